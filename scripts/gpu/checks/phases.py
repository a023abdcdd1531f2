# Where a replay's time goes, per phase, from a trace-*.csv.gz (run.sh trace, TRACE_KEEP=1),
# median over replays 3.. of each rank: the forward (embed_fwd's start to xent_fwd's end), the
# backward (to embed_bwd's end), what follows to AdamW's first kernel, AdamW; for each phase
# its span and its compute kernels' busy time (the union of every kernel but NCCL's and comm's,
# on whatever stream a captured graph put it), so that a phase that waits (idle) is told from
# one whose kernels run slower (busy). And, per phase, NCCL's and comm's
# kernel time beside it. Session 38. Usage: python3 phases.py trace.csv.gz [more...]
import csv, gzip, sys, collections, statistics as st


def union(iv):
    t = 0; end = None
    for a, b in sorted(iv):
        if end is None or a > end:
            t += b - a; end = b
        elif b > end:
            t += b - end; end = b
    return t


def phases(path):
    rows = [r for r in csv.DictReader(gzip.open(path, 'rt')) if r['kind'] == 'K' and r['graph_id'] != '0']
    out = collections.defaultdict(list)
    for d in sorted({r['device'] for r in rows}):
        g = collections.Counter(r['graph_id'] for r in rows if r['device'] == d).most_common(1)[0][0]
        e = sorted((int(r['start_ns']), int(r['end_ns']), r['name'], r['stream'])
                   for r in rows if r['device'] == d and r['graph_id'] == g)
        starts = [x[0] for x in e if 'embed_fwd' in x[2]]
        for i in range(2, len(starts) - 1):
            rep = [x for x in e if starts[i] <= x[0] < starts[i + 1]]
            t0 = starts[i]
            fe = max(x[1] for x in rep if 'xent_fwd' in x[2])
            be = max(x[1] for x in rep if 'embed_bwd' in x[2])
            ad = [x for x in rep if 'adamw' in x[2]]
            a0, a1 = min(x[0] for x in ad), max(x[1] for x in ad)
            t1 = starts[i + 1]
            cuts = [('fwd', t0, fe), ('bwd', fe, be), ('tail', be, a0), ('adamw', a0, a1), ('rest', a1, t1)]
            row = {'step': (t1 - t0) / 1e6}
            for name, a, b in cuts:
                clip = lambda xs: [(max(x[0], a), min(x[1], b)) for x in xs if x[1] > a and x[0] < b]
                mains = [x for x in rep if 'nccl' not in x[2].lower() and not x[2].startswith('comm_')]
                nccl = [x for x in rep if 'nccl' in x[2].lower()]
                comm = [x for x in rep if x[2].startswith('comm_')]
                row[name] = (b - a) / 1e6
                row[name + '_busy'] = union(clip(mains)) / 1e6
                row[name + '_nccl'] = union(clip(nccl)) / 1e6
                row[name + '_comm'] = union(clip(comm)) / 1e6
            out[d].append(row)
    return out


for p in sys.argv[1:]:
    print(p)
    print('rank  step |  fwd busy nccl comm |  bwd busy nccl comm | tail | adamw busy nccl | rest')
    for d, rs in phases(p).items():
        m = lambda k: st.median(r[k] for r in rs)
        print(f"{d:>4} {m('step'):6.2f} | {m('fwd'):5.2f} {m('fwd_busy'):5.2f} {m('fwd_nccl'):4.2f} {m('fwd_comm'):4.2f} |"
              f" {m('bwd'):5.2f} {m('bwd_busy'):5.2f} {m('bwd_nccl'):4.2f} {m('bwd_comm'):4.2f} | {m('tail'):4.2f} |"
              f" {m('adamw'):5.2f} {m('adamw_busy'):5.2f} {m('adamw_nccl'):4.2f} | {m('rest'):4.2f}  ({len(rs)} replays)")
