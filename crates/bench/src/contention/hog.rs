//! The SM hog (`cuda` feature): a kernel whose blocks each take a whole SM's shared
//! memory and spin one warp on the global timer for a given time, launched on its own
//! stream after the compute stream's work queued so far.

use anyhow::{bail, Result};
use candle_core::cuda_backend::cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use candle_core::cuda_backend::cudarc::driver::{
    CudaFunction, CudaStream, LaunchConfig, PushKernelArg,
};
use candle_core::Device;
use std::sync::Arc;

/// Hand-written PTX (no nvcc needed): spin until `ns` nanoseconds have passed since the
/// block started, sleeping 1 µs between looks at the timer.
const PTX: &str = r#"
.version 8.0
.target sm_90
.address_size 64

.extern .shared .align 16 .b8 hog_smem[];

.visible .entry sm_hog(.param .u64 ns)
{
    .reg .pred %p;
    .reg .b64 %limit, %t0, %t1, %dt;
    ld.param.u64 %limit, [ns];
    mov.u64 %t0, %globaltimer;
$spin:
    nanosleep.u32 1000;
    mov.u64 %t1, %globaltimer;
    sub.u64 %dt, %t1, %t0;
    setp.lt.u64 %p, %dt, %limit;
    @%p bra $spin;
    ret;
}
"#;

pub struct Hog {
    compute: Arc<CudaStream>,
    stream: Arc<CudaStream>,
    func: CudaFunction,
    smem: u32,
}

impl Hog {
    pub fn new(device: &Device) -> Result<Self> {
        let Device::Cuda(d) = device else {
            bail!("bench contention needs a GPU (device {device:?})");
        };
        let compute = d.cuda_stream();
        let ctx = compute.context().clone();
        let smem = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        let func = d
            .get_or_load_custom_func("sm_hog", "bench_sm_hog", PTX)?
            .into_cuda_function();
        func.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem,
        )?;
        Ok(Self {
            stream: ctx.new_stream()?,
            compute,
            func,
            smem: smem as u32,
        })
    }

    /// Holds `sms` SMs for `ms` milliseconds, starting after the compute stream's work
    /// queued so far (and as SMs free up).
    pub fn start(&self, sms: usize, ms: f64) -> Result<()> {
        let ev = self.compute.record_event(None)?;
        self.stream.wait(&ev)?;
        let ns = (ms * 1e6) as u64;
        let cfg = LaunchConfig {
            grid_dim: (sms as u32, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: self.smem,
        };
        let mut b = self.stream.launch_builder(&self.func);
        b.arg(&ns);
        // SAFETY: the kernel takes one u64 and touches no memory.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// Waits for the hog to end.
    pub fn finish(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }
}
