#!/usr/bin/env python3
"""The list-scheduling model behind flash::order (crates/model/kernels/stage.cuh).

Each tiled attention launch is a grid of BH x n blocks; a block of rank r does work in
proportion to the tiles it walks. Blocks start in grid order on `slots` resident places
(blocks an SM x 132 SMs) as earlier ones finish, all tiles taking the same time. Prints
each order's makespan in tile-times: heaviest first across all heads (until session 52),
groups of heads alone, and groups with the lightest quarter of the ranks last (the order
the kernels use), beside the ideal (work / slots). The model ignores what the grouping is
for: a head's tiles read from L2 rather than DRAM (docs/results/gpus-s52.md).
"""
import heapq


def makespan(work, slots):
    ends = [0.0] * slots
    last = 0.0
    for w in work:
        t = heapq.heappop(ends) + w
        heapq.heappush(ends, t)
        last = max(last, t)
    return last


def group_size(bh, n):
    g = -(-256 // n)
    while g < bh and bh % g:
        g += 1
    return min(g, bh)


def order(bh, n, light_last):
    """(head, rank) in grid order, as flash::order maps blockIdx.x."""
    heavy = n - n // 4 if light_last else n
    g = group_size(bh, n)
    out = [(h, r) for g0 in range(0, bh, g) for r in range(heavy) for h in range(g0, min(g0 + g, bh))]
    return out + [(h, r) for r in range(heavy, n) for h in range(bh)]


# (launch, n ranks, b * h, resident blocks, work of rank r): the forward's and the ∂q's
# block of rank r walks 2 (n - r) - 0.5 key tiles; flash_bwd_kv's, n - r query tiles.
SHAPES = [
    ("6.7B fwd2, 8 x 1024", 8, 256, 264, lambda r, n: 2 * (n - r) - 0.5),
    ("6.7B bwd_kv", 16, 256, 264, lambda r, n: n - r),
    ("xl fwd2, 8 x 1024", 8, 200, 264, lambda r, n: 2 * (n - r) - 0.5),
    ("xl bwd_kv", 16, 200, 396, lambda r, n: n - r),
    ("13B fwd2, 4 x 2048", 16, 160, 264, lambda r, n: 2 * (n - r) - 0.5),
    ("13B bwd_kv", 32, 160, 264, lambda r, n: n - r),
]

if __name__ == "__main__":
    print(f"{'launch':22s} {'ideal':>7s} {'heaviest':>9s} {'groups':>7s} {'groups, light last':>19s}")
    for name, n, bh, slots, w in SHAPES:
        heaviest = [w(r, n) for r in range(n) for _ in range(bh)]
        runs = [makespan(heaviest, slots)]
        for light_last in (False, True):
            runs.append(makespan([w(r, n) for _, r in order(bh, n, light_last)], slots))
        ideal = sum(heaviest) / slots
        print(f"{name:22s} {ideal:7.1f} {runs[0]:9.1f} {runs[1]:7.1f} {runs[2]:19.1f}")
