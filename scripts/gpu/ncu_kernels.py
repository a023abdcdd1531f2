#!/usr/bin/env python3
"""Per-kernel table of one replayed training step, from Nsight Compute's raw CSV.

  ncu_kernels.py NCU_CSV SINGLE_JSONL > kernels.jsonl

NCU_CSV: `ncu --import REP --csv --page raw` of a `bench single` run in graph mode, with
the metrics gpu__time_duration.sum, dram__bytes_read.sum, dram__bytes_write.sum.
SINGLE_JSONL: that run's record; its `graph_kernels` (kernel launches per replay) says
how many of the last profiled launches are the last replay. Prints one JSON line per
kernel name (calls, time, DRAM traffic, achieved GB/s) and, on stderr, a table.
"""
import csv
import json
import sys

GEMM_MARKS = ("gemm", "xmma", "cutlass", "sm90_", "cublas")


def short(name):
    """The kernel's name without template arguments and parameter lists."""
    base = name.split("(")[0]
    if "<" in base:
        base = base.split("<")[0]
    return base.replace("void ", "").strip()[:60]


def main():
    csv_path, rec_path = sys.argv[1], sys.argv[2]
    rec = [json.loads(l) for l in open(rec_path) if l.startswith("{")][-1]
    k = rec.get("graph_kernels")
    if not k:
        sys.exit(f"{rec_path}: no graph_kernels (the step was not replayed as a graph)")
    rows = list(csv.reader(open(csv_path)))
    head = rows[0]
    col = {h: i for i, h in enumerate(head)}
    for need in ("Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum",
                 "dram__bytes_write.sum"):
        if need not in col:
            sys.exit(f"{csv_path}: no column {need!r} (columns: {head[:12]}...)")
    units = rows[1]
    data = [r for r in rows[2:] if len(r) == len(head)]
    if len(data) < k:
        sys.exit(f"{csv_path}: {len(data)} kernels profiled, fewer than one replay ({k})")
    last = data[-k:]

    def num(r, name):
        v = float(r[col[name]].replace(",", ""))
        u = units[col[name]]
        scale = {"ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
                 "nsecond": 1e-6, "byte": 1e-9, "Kbyte": 1e-6, "Mbyte": 1e-3,
                 "Gbyte": 1.0, "KB": 1e-6, "MB": 1e-3, "GB": 1.0, "B": 1e-9}
        return v * scale.get(u, 1.0)

    by = {}
    for r in last:
        name = short(r[col["Kernel Name"]])
        e = by.setdefault(name, [0, 0.0, 0.0, 0.0])
        e[0] += 1
        e[1] += num(r, "gpu__time_duration.sum")
        e[2] += num(r, "dram__bytes_read.sum")
        e[3] += num(r, "dram__bytes_write.sum")
    total = sum(e[1] for e in by.values())
    gemm_ms = sum(e[1] for n, e in by.items() if any(m in n.lower() for m in GEMM_MARKS))
    step_flops = rec.get("step_flops")
    base = {"bench": "kernels", "size": rec["size"], "dtype": rec["dtype"],
            "batch": rec["batch"], "seq": rec["seq"], "tf32": rec.get("tf32", False),
            "graph_kernels": k, "kernels_ms": total, "gemm_ms": gemm_ms}
    if step_flops:
        base["step_flops"] = step_flops
    print(json.dumps({**base, "kernel": "(all)", "calls": k, "ms": total}))
    rows_out = sorted(by.items(), key=lambda kv: -kv[1][1])
    for name, (calls, ms, rd, wr) in rows_out:
        gemm = any(m in name.lower() for m in GEMM_MARKS)
        print(json.dumps({**base, "kernel": name, "calls": calls, "ms": ms,
                          "read_gb": rd, "write_gb": wr, "gemm": gemm,
                          "gbps": (rd + wr) / (ms * 1e-3) if ms > 0 else 0.0}))
    err = sys.stderr
    print(f"{rec['size']} {rec['dtype']} batch {rec['batch']}: {k} kernels in one replay, "
          f"{total:.2f} ms of kernel time, GEMM {gemm_ms:.2f} ms",
          file=err)
    print(f"{'kernel':60} {'calls':>6} {'ms':>8} {'share':>6} {'GB':>7} {'GB/s':>7}", file=err)
    for name, (calls, ms, rd, wr) in rows_out[:30]:
        gbps = (rd + wr) / (ms * 1e-3) if ms > 0 else 0.0
        print(f"{name:60} {calls:6d} {ms:8.3f} {100 * ms / total:5.1f}% {rd + wr:7.2f} {gbps:7.0f}",
              file=err)


if __name__ == "__main__":
    main()
