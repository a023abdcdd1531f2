//! The GEMM tuner beside a stand-in for NCCL (`MODEL_GEMM_TUNE_BESIDE=CTAS`): while a
//! candidate's replays are timed, CTAS blocks of `sm_hog` (kernels/fused.cu) hold as many
//! SMs on another stream and stream memory through them, as NCCL's kernels do beside the
//! backward's GEMMs (24 CTAs for its large collectives on an H200, call 128). A candidate
//! that loses little when SMs are missing (smaller clusters, no cooperative wave sized for
//! every SM) then wins. An experiment: unset, the tuner times on an idle GPU.
//!
//! The stand-in runs only between a timing's first and last event, so that nothing else the
//! tuner does (captures, allocations) can wait for it, and it is stopped by a host write to
//! a flag in mapped host memory, not by a CUDA call (call 152's first try, stopped by a copy
//! on the tuner's stream, hung).

use crate::kernels::gpu;
use candle_core::cuda_backend::cudarc::driver::{
    sys, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PinnedHostSlice,
    PushKernelArg,
};
use candle_core::cuda_backend::WrapErr;
use std::sync::{Arc, OnceLock};

/// The CTAs of the tuner's stand-in for NCCL: `MODEL_GEMM_TUNE_BESIDE` (0 or unset: none).
pub(super) fn ctas() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("MODEL_GEMM_TUNE_BESIDE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// Bytes each copy pass streams (beyond the L2, so that it reaches memory).
const BYTES: usize = 64 << 20;
/// At most this many cycles (about 1 s), should nothing stop it.
const MAX_CYCLES: i64 = 2_000_000_000;

/// What the stand-in needs, made once per tuned shape: its stream, buffers and stop flag.
pub(super) struct Stand {
    ctas: u32,
    f: CudaFunction,
    stream: Arc<CudaStream>,
    /// The flag (kept alive), its host address, and its device address with the buffers'.
    _flag: PinnedHostSlice<i32>,
    host: *mut i32,
    ptrs: (u64, u64, u64),
    _bufs: (CudaSlice<u8>, CudaSlice<u8>),
}

/// The stand-in running, until dropped.
pub(super) struct Running<'a>(&'a Stand);

impl Stand {
    /// `None` where `MODEL_GEMM_TUNE_BESIDE` asks for none.
    pub(super) fn new(dev: &candle_core::CudaDevice) -> candle_core::Result<Option<Self>> {
        let ctas = ctas();
        if ctas == 0 {
            return Ok(None);
        }
        let main = dev.cuda_stream();
        let stream = main.context().new_stream().w()?;
        let (src, dst) = (
            main.alloc_zeros::<u8>(BYTES).w()?,
            main.alloc_zeros::<u8>(BYTES).w()?,
        );
        // SAFETY: a mapped allocation of one i32, written before any kernel reads it.
        let mut flag = unsafe {
            main.context()
                .alloc_pinned_with_flags::<i32>(1, sys::CU_MEMHOSTALLOC_DEVICEMAP)
        }
        .w()?;
        let (mut p, host): (sys::CUdeviceptr, *mut i32) = (0, flag.as_mut_ptr().w()?);
        // SAFETY: `host` is a live mapped allocation.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut p, host as *mut _, 0) }
            .result()
            .w()?;
        main.synchronize().w()?;
        let (s, d) = {
            let ((s, _a), (d, _b)) = (src.device_ptr(&main), dst.device_ptr(&main));
            (s, d)
        };
        Ok(Some(Self {
            ctas: ctas as u32,
            f: gpu::function(dev, "sm_hog")?,
            stream,
            _flag: flag,
            host,
            ptrs: (p, s, d),
            _bufs: (src, dst),
        }))
    }

    /// Starts the stand-in on its stream.
    pub(super) fn run(&self) -> candle_core::Result<Running<'_>> {
        self.set(0);
        let (p, s, d) = self.ptrs;
        let words = (BYTES / 16) as u64;
        let cfg = LaunchConfig {
            grid_dim: (self.ctas, 1, 1),
            block_dim: (512, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = self.stream.launch_builder(&self.f);
        b.arg(&s).arg(&d).arg(&words).arg(&p).arg(&MAX_CYCLES);
        // SAFETY: the arguments match sm_hog's (const uint4 *, uint4 *, unsigned long long,
        // volatile int *, long long); both buffers hold BYTES and the flag one i32, all alive
        // as long as `self`, which `Running` borrows until it has waited for the kernel.
        unsafe { b.launch(cfg) }.w()?;
        Ok(Running(self))
    }

    fn set(&self, v: i32) {
        // SAFETY: the mapped flag, alive as long as `self`; volatile, as the kernel reads it so.
        unsafe { std::ptr::write_volatile(self.host, v) };
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.set(1);
        let _ = self.0.stream.synchronize();
    }
}
