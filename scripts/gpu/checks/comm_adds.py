"""comm's copy-engine adds (crates/comm/kernels/sum.cu's comm_sum_parts) launched from Python
on torch's current stream through the driver, for prio-probe.py and adds-check.py (session
41). The PTX is nvcc --ptx -O3 -arch=sm_90 of a sum.cu."""
import ctypes

import torch

RUNS, BLOCKS = 8, 528  # COMM_SUM_RUNS; comm's cap on blocks (adds_policy.rs)
_cu = None


class Runs(ctypes.Structure):  # kernels/sum.cu's SumRuns
    _fields_ = [(k, ctypes.c_uint64 * RUNS) for k in ("own", "dst", "src", "n", "stride")] + [
        ("scale", ctypes.c_float * RUNS)
    ]


def load(path):
    """comm_sum_parts from the PTX at `path`, in torch's context."""
    global _cu
    torch.zeros(1, device="cuda")  # torch's context, current on this thread
    _cu = _cu or ctypes.CDLL("libcuda.so.1")
    mod, f = ctypes.c_void_p(), ctypes.c_void_p()
    assert _cu.cuModuleLoadData(ctypes.byref(mod), open(path, "rb").read() + b"\0") == 0, path
    assert _cu.cuModuleGetFunction(ctypes.byref(f), mod, b"comm_sum_parts") == 0, path
    return f


def launch(f, runs, parts, sq=0, blocks=BLOCKS):
    """One launch: `runs` of (dst, own, src, n, stride, scale), addresses as ints; `sq`, 0
    or room for one f32 a block. The grid as comm's `ce_adds::grid`. Returns it."""
    r = Runs()
    for k, (d, o, s, n, st, sc) in enumerate(runs):
        r.dst[k], r.own[k], r.src[k], r.n[k], r.stride[k], r.scale[k] = d, o, s, n, st, sc
    x = max(1, min(-(-max(run[3] for run in runs) // 2048), blocks))
    p, q = ctypes.c_uint(parts), ctypes.c_uint64(sq)
    args = (ctypes.c_void_p * 3)(*(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in (r, p, q)))
    s = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    assert _cu.cuLaunchKernel(f, x, len(runs), 1, 256, 1, 1, 0, s, args, None) == 0
    return x
