#!/usr/bin/env python3
"""Reads trace-<pid>.csv files written by scripts/cupti/trace.c and prints, per process,
where one replay of the training step's CUDA graph spends its time (the median over the
replays after --skip), as one JSON line each and a short table:

- period: start of one replay to the start of the next (the step as the device sees it);
- span: first kernel start to last kernel end of the replay;
- compute: the union of the non-NCCL kernels' intervals; comm: the union of NCCL's;
- overlap: where both run; comm_alone: NCCL running with no compute kernel (exposed
  communication); idle: inside the span, nothing running at all;
- per category (gemm, attention, adamw, norm, nccl, memset, memcpy, other) the summed
  kernel time (the graph's memsets and memcpys counted as work beside the kernels), and the
  top kernels by time. Comparing the categories of a world-2 trace with a world-1 trace of
  the same model shows what communication costs the kernels beside it;
- beside_nccl_ms: the same from one trace alone, per category: what the launches with NCCL
  beside them take over the median of the same kernel's launches without (`beside_nccl`:
  the top kernels by that).

With several processes (the ranks of one run), one more record, `"bench": "cupti-skew"`:
each collective's start on every rank (the i-th NCCL kernel of the i-th replay), and per
rank the median over replays of its summed wait, the last rank's start less its own (NCCL's
kernel holds its SMs from its start, and cannot finish before every rank has come), and
how often it was the last to come. CUPTI's timestamps are the host's clock, so ranks on one
host compare.

Usage: summarize.py DIR [--skip N] [--top K] [--label NAME] [--timeline] [--kernels]
(--timeline: the middle replay's NCCL kernels and compute gaps over 50 us, in ms;
--kernels: after the table, every kernel's median time a replay and its launches a replay.)
Each record's `gaps` says where the idle time sits: per kernel that starts after an idle
gap (its name's first 60 characters), the median over replays of its gaps' sum (ms) and
count, the top K by time; `gap_pairs` the same per (kernel that ended last > kernel after).
"""
import csv
import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def category(name):
    n = name.lower()
    # graph_memset: cuBLASLt's memsets as kernels (seam::graph::splice).
    if n.startswith("memset:") or n == "graph_memset":
        return "memset"
    if n.startswith("memcpy"):
        return "memcpy"
    if "nccl" in n:
        return "nccl"
    if any(s in n for s in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "cublas")):
        return "gemm"
    if "attn" in n or "softmax" in n or n.startswith("flash_"):
        return "attention"
    if "adamw" in n:
        return "adamw"
    if "norm" in n:
        return "norm"
    if "accum" in n or "sum_new" in n:
        return "accumulate"
    return "other"


def union(iv):
    """Merged, sorted intervals."""
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(iv):
    return sum(e - s for s, e in iv)


def intersect(a, b):
    i = j = 0
    total = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def replays(rows):
    """The step graph's replays: among graph kernels, the graph id whose launches run the
    most kernels; each launch (correlation id) one replay, in time order, with the graph's
    memsets and memcpys (kinds S and C) beside its kernels."""
    by_graph = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["kind"] in ("K", "S", "C") and int(r["graph_id"]) != 0:
            by_graph[r["graph_id"]][r["correlation"]].append(r)
    if not by_graph:
        return []
    kernels = lambda ks: sum(1 for k in ks if k["kind"] == "K")
    gid = max(by_graph, key=lambda g: max(kernels(v) for v in by_graph[g].values()) * len(by_graph[g]))
    launches = list(by_graph[gid].values())
    launches.sort(key=lambda ks: min(int(k["start_ns"]) for k in ks))
    return launches


def one_replay(ks, next_start):
    iv = lambda sel: union([(int(k["start_ns"]), int(k["end_ns"])) for k in ks if sel(k)])
    comp = iv(lambda k: category(k["name"]) != "nccl")
    comm = iv(lambda k: category(k["name"]) == "nccl")
    alls = union(comp + comm)
    start, end = alls[0][0], alls[-1][1]
    ov = intersect(comp, comm)
    cats = defaultdict(int)
    names = defaultdict(int)
    calls = defaultdict(int)
    # Idle before each kernel: from the latest end of anything before it to its start.
    gaps = defaultdict(lambda: [0, 0])
    pairs = defaultdict(lambda: [0, 0])
    seen_end, last = None, ""
    for k in sorted(ks, key=lambda k: int(k["start_ns"])):
        st, en = int(k["start_ns"]), int(k["end_ns"])
        if seen_end is not None and st > seen_end:
            for table, key in ((gaps, k["name"][:60]), (pairs, f"{last[:40]} > {k['name'][:40]}")):
                table[key][0] += st - seen_end
                table[key][1] += 1
        if seen_end is None or en >= seen_end:
            seen_end, last = en, k["name"]
    # Each compute kernel's duration and the share of it that NCCL ran beside.
    inst = defaultdict(list)
    for k in ks:
        st, en = int(k["start_ns"]), int(k["end_ns"])
        d = en - st
        cats[category(k["name"])] += d
        names[k["name"]] += d
        calls[k["name"]] += 1
        if category(k["name"]) != "nccl" and d > 0:
            inst[k["name"]].append((d, intersect([[st, en]], comm) / d))
    return {
        "period": (next_start - start) if next_start else None,
        "span": end - start,
        "compute": length(comp),
        "comm": length(comm),
        "overlap": ov,
        "comm_alone": length(comm) - ov,
        "idle": (end - start) - length(alls),
        "kernels": sum(1 for k in ks if k["kind"] == "K"),
        "cats": dict(cats),
        "names": dict(names),
        "calls": dict(calls),
        "gaps": dict(gaps),
        "gap_pairs": dict(pairs),
        "inst": dict(inst),
    }


def beside(stats, top):
    """What the compute kernels lose beside NCCL, from one trace: per kernel name, the
    median duration of its launches with NCCL running through at least half of them against
    that of its launches with no NCCL beside them (the same name: mostly the same shape, as
    a block's GEMMs are); the loss is what the former take over the latter's median, per
    replay. Returns (ms lost per category, the top names by loss:
    [name, launches beside, alone, median beside us, median alone us, ms lost])."""
    pooled = defaultdict(list)
    for s in stats:
        for n, v in s["inst"].items():
            pooled[n].extend(v)
    cats, rows = defaultdict(float), []
    for n, v in pooled.items():
        near = [d for d, f in v if f >= 0.5]
        alone = [d for d, f in v if f == 0]
        if not near or not alone:
            continue
        base = statistics.median(alone)
        lost = sum(d - base for d in near) / len(stats) / 1e6
        cats[category(n)] += lost
        rows.append([n[:60], round(len(near) / len(stats), 1), round(len(alone) / len(stats), 1),
                     round(statistics.median(near) / 1e3, 1), round(base / 1e3, 1), round(lost, 3)])
    rows.sort(key=lambda r: -r[5])
    return {c: round(v, 3) for c, v in sorted(cats.items())}, rows[:top]


def timeline(ks, gap_ns=50_000):
    """One replay as lines: each NCCL kernel (start, length, name) and each gap in the
    compute kernels longer than gap_ns (start, length), in ms from the replay's start."""
    t0 = min(int(k["start_ns"]) for k in ks)
    ms = lambda ns: round(ns / 1e6, 3)
    lines = [["nccl", ms(int(k["start_ns"]) - t0), ms(int(k["end_ns"]) - int(k["start_ns"])), k["name"][:40]]
             for k in ks if category(k["name"]) == "nccl"]
    comp = union([(int(k["start_ns"]), int(k["end_ns"])) for k in ks if category(k["name"]) != "nccl"])
    for (s0, e0), (s1, _) in zip(comp, comp[1:]):
        if s1 - e0 > gap_ns:
            lines.append(["gap", ms(e0 - t0), ms(s1 - e0), ""])
    return sorted(lines, key=lambda l: l[1])


def median_ms(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs) / 1e6, 3) if xs else None


def summarize(path, rows, reps, skip, top, label, dump, every=False):
    """One process's record from its trace file's rows and their replays (`replays`)."""
    if len(reps) <= skip + 1:
        return None
    starts = [min(int(k["start_ns"]) for k in ks) for ks in reps]
    stats = [one_replay(ks, starts[i + 1] if i + 1 < len(reps) else None)
             for i, ks in enumerate(reps)][skip:]
    out = {"bench": "cupti", "label": label, "file": os.path.basename(path),
           "replays": len(stats)}
    for key in ("period", "span", "compute", "comm", "overlap", "comm_alone", "idle"):
        out[key + "_ms"] = median_ms([s[key] for s in stats])
    out["kernels"] = statistics.median(s["kernels"] for s in stats)
    cats = {c for s in stats for c in s["cats"]}
    out["category_ms"] = {c: median_ms([s["cats"].get(c, 0) for s in stats]) for c in sorted(cats)}
    names = defaultdict(list)
    for s in stats:
        for n, d in s["names"].items():
            names[n].append(d)
    tops = sorted(names.items(), key=lambda kv: -statistics.median(kv[1]))
    out["top"] = [[n[:90], median_ms(v), len(v) and round(len(v) / len(stats), 2)] for n, v in tops[:top]]
    if every:
        out["kernels_ms"] = [[n[:90], round(statistics.median(v) / 1e6, 4),
                              statistics.median(s["calls"].get(n, 0) for s in stats)] for n, v in tops]
    for field in ("gaps", "gap_pairs"):
        names = {n for s in stats for n in s[field]}
        by = {n: ([s[field].get(n, [0, 0])[0] for s in stats], [s[field].get(n, [0, 0])[1] for s in stats])
              for n in names}
        best = sorted(by.items(), key=lambda kv: -statistics.median(kv[1][0]))[:top]
        out[field] = [[n, median_ms(t), statistics.median(c)] for n, (t, c) in best]
    out["beside_nccl_ms"], out["beside_nccl"] = beside(stats, top)
    if dump:
        out["timeline"] = timeline(reps[skip + len(stats) // 2])
    dropped = sum(1 for r in rows if r["kind"] == "D")
    if dropped:
        out["dropped_buffers"] = dropped
    return out


def skew(ranks, skip, label):
    """The ranks' waits in their collectives (see the module's doc), from each process's
    replays (`replays`), or None where the processes' replays or collectives do not line
    up (then nothing is claimed)."""
    per = [[sorted(int(k["start_ns"]) for k in ks if k["kind"] == "K" and category(k["name"]) == "nccl")
            for ks in reps] for reps in ranks]
    n = min(len(r) for r in per)
    if len(per) < 2 or n <= skip:
        return None
    # The last n replays of each: ranks may record a different number of warm-up launches.
    per = [r[-n:][skip:] for r in per]
    waits = [[] for _ in per]
    last = [0] * len(per)
    count = 0
    for i in range(len(per[0])):
        colls = [r[i] for r in per]
        if len({len(c) for c in colls}) != 1:
            return None
        w = [0] * len(per)
        for j in range(len(colls[0])):
            starts = [c[j] for c in colls]
            top = max(starts)
            last[starts.index(top)] += 1
            count += 1
            for r, st in enumerate(starts):
                w[r] += top - st
        for r in range(len(per)):
            waits[r].append(w[r])
    return {"bench": "cupti-skew", "label": label, "ranks": len(per), "replays": len(per[0]),
            "collectives": len(per[0][0]) if per[0] else 0,
            "wait_ms": [median_ms(w) for w in waits],
            "last_share": [round(l / count, 3) if count else None for l in last]}


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    d = args[0]
    opt = lambda name, default: (args[args.index(name) + 1] if name in args else default)
    skip, top, label = int(opt("--skip", 5)), int(opt("--top", 12)), opt("--label", d)
    dump = "--timeline" in args
    res, ranks = [], []
    for p in sorted(glob.glob(os.path.join(d, "trace-*.csv"))):
        with open(p) as f:
            rows = list(csv.DictReader(f))
        ranks.append(replays(rows))
        s = summarize(p, rows, ranks[-1], skip, top, label, dump, "--kernels" in args)
        if s:
            res.append(s)
            print(json.dumps(s))
    sk = skew(ranks, skip, label) if len(ranks) > 1 else None
    if sk:
        print(json.dumps(sk))
    print(f"{'trace':<22}{'period':>8}{'span':>8}{'compute':>9}{'comm':>7}{'overlap':>8}"
          f"{'alone':>7}{'idle':>7}  categories (ms)")
    for s in res:
        cats = " ".join(f"{c}={v}" for c, v in s["category_ms"].items())
        print(f"{s['label'][-12:] + ':' + s['file'][6:-4]:<22}{s['period_ms'] or 0:>8}{s['span_ms']:>8}"
              f"{s['compute_ms']:>9}{s['comm_ms']:>7}{s['overlap_ms']:>8}{s['comm_alone_ms']:>7}"
              f"{s['idle_ms']:>7}  {cats}")
    for s in res:
        for n, ms, calls in s.get("kernels_ms", []):
            print(f"{ms:10.3f} ms {calls:6g}x  {n[:70]}")
    if sk:
        print(f"waits in collectives a replay (ms, by rank): {sk['wait_ms']}; last to come: {sk['last_share']}")


if __name__ == "__main__":
    main()
