# Per rank and replay of a trace-*.csv.gz (run.sh trace, TRACE_KEEP=1): when the backward
# ends (embed_bwd), the last copy-engine adds, AdamW's first and last kernels, the next
# replay; and where NCCL's reduce-scatter kernels ran (session 37: ddp::tail), their first
# start and last end. Session 34 (docs/results/gpus-s34.md). Usage: python3 replays.py trace.csv.gz
import csv,gzip,sys,collections
rows=[r for r in csv.DictReader(gzip.open(sys.argv[1],'rt')) if r['kind']=='K' and r['graph_id']!='0']
gid={}
for d in ['0','1','2','3']:
    c=collections.Counter(r['graph_id'] for r in rows if r['device']==d)
    if c: gid[d]=c.most_common(1)[0][0]
ev=collections.defaultdict(list)
for r in rows:
    d=r['device']
    if r['graph_id']!=gid[d]: continue
    ev[d].append((int(r['start_ns']),int(r['end_ns']),r['name'],r['stream']))
base=None
for d in sorted(ev):
    e=sorted(ev[d]); first=e[0][2]; st=e[0][3]
    starts=[x[0] for x in e if x[2]==first and x[3]==st]
    if base is None: base=starts[0]
    for i in range(len(starts)-1):
        rep=[x for x in e if starts[i]<=x[0]<starts[i+1]]
        eb=max(x[1] for x in rep if 'embed_bwd' in x[2])
        a0=min(x[0] for x in rep if 'adamw' in x[2]); a1=max(x[1] for x in rep if 'adamw' in x[2])
        sums=[x for x in rep if 'comm_sum' in x[2]]
        lastsum=max(x[1] for x in sums) if sums else 0
        rs=[x for x in rep if 'ReduceScatter' in x[2]]
        rsw=f" rs {len(rs)} +{(min(x[0] for x in rs)-starts[i])/1e6:7.2f}..+{(max(x[1] for x in rs)-starts[i])/1e6:7.2f}" if rs else ""
        f=lambda t:(t-base)/1e6
        print(d,i,f"start {f(starts[i]):9.2f} bwd_end +{(eb-starts[i])/1e6:7.2f} lastsum +{(lastsum-starts[i])/1e6:7.2f} adamw +{(a0-starts[i])/1e6:7.2f}..+{(a1-starts[i])/1e6:7.2f} next {(starts[i+1]-starts[i])/1e6:7.2f}{rsw}")
