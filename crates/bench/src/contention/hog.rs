//! The hogs (`cuda` feature), launched on their own stream after the compute stream's
//! work queued so far, each for a given time:
//! - `spin`: one block per SM taking all of its shared memory (no GEMM tile can share the
//!   SM), one warp sleeping on the global timer: SM occupancy and nothing else;
//! - `stream`: blocks of 512 threads (NCCL's default) copying a 256 MiB buffer with four
//!   16-byte loads in flight per thread: SMs and HBM traffic, as a collective's local
//!   side makes; it counts what it moved.

use super::HogKind;
use anyhow::{bail, Result};
use candle_core::cuda_backend::cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use candle_core::cuda_backend::cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use candle_core::Device;
use std::sync::Arc;

/// Hand-written PTX (no nvcc needed).
const PTX: &str = r#"
.version 8.0
.target sm_90
.address_size 64

.extern .shared .align 16 .b8 hog_smem[];

// Spin until `ns` nanoseconds have passed since the block started.
.visible .entry sm_spin(.param .u64 ns)
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

// Copy src to dst (n float4s, n a multiple of 4 x the grid threads) pass after pass
// until `ns` nanoseconds have passed; counts[thread] = float4s this thread copied.
.visible .entry sm_stream(.param .u64 ns, .param .u64 src, .param .u64 dst,
                          .param .u64 n, .param .u64 counts)
{
    .reg .pred %p, %q;
    .reg .b32 %rtid, %rntid, %rctaid, %rnctaid;
    .reg .b64 %limit, %t0, %t1, %dt, %src, %dst, %nn, %cnt, %i, %stride, %start, %off,
              %pa, %pb, %copied, %stride16;
    .reg .f32 %x<16>;
    ld.param.u64 %limit, [ns];
    ld.param.u64 %src, [src];
    ld.param.u64 %dst, [dst];
    ld.param.u64 %nn, [n];
    ld.param.u64 %cnt, [counts];
    cvta.to.global.u64 %src, %src;
    cvta.to.global.u64 %dst, %dst;
    cvta.to.global.u64 %cnt, %cnt;
    mov.u32 %rtid, %tid.x;
    mov.u32 %rntid, %ntid.x;
    mov.u32 %rctaid, %ctaid.x;
    mov.u32 %rnctaid, %nctaid.x;
    mul.wide.u32 %start, %rctaid, %rntid;
    cvt.u64.u32 %pa, %rtid;
    add.u64 %start, %start, %pa;
    mul.wide.u32 %stride, %rnctaid, %rntid;
    shl.b64 %stride16, %stride, 4;
    mov.u64 %copied, 0;
    mov.u64 %t0, %globaltimer;
$pass:
    mov.u64 %i, %start;
$loop:
    shl.b64 %off, %i, 4;
    add.u64 %pa, %src, %off;
    add.u64 %pb, %dst, %off;
    ld.global.v4.f32 {%x0, %x1, %x2, %x3}, [%pa];
    add.u64 %pa, %pa, %stride16;
    ld.global.v4.f32 {%x4, %x5, %x6, %x7}, [%pa];
    add.u64 %pa, %pa, %stride16;
    ld.global.v4.f32 {%x8, %x9, %x10, %x11}, [%pa];
    add.u64 %pa, %pa, %stride16;
    ld.global.v4.f32 {%x12, %x13, %x14, %x15}, [%pa];
    st.global.v4.f32 [%pb], {%x0, %x1, %x2, %x3};
    add.u64 %pb, %pb, %stride16;
    st.global.v4.f32 [%pb], {%x4, %x5, %x6, %x7};
    add.u64 %pb, %pb, %stride16;
    st.global.v4.f32 [%pb], {%x8, %x9, %x10, %x11};
    add.u64 %pb, %pb, %stride16;
    st.global.v4.f32 [%pb], {%x12, %x13, %x14, %x15};
    add.u64 %copied, %copied, 4;
    mad.lo.u64 %i, %stride, 4, %i;
    setp.lt.u64 %p, %i, %nn;
    @%p bra $loop;
    mov.u64 %t1, %globaltimer;
    sub.u64 %dt, %t1, %t0;
    setp.lt.u64 %q, %dt, %limit;
    @%q bra $pass;
    shl.b64 %off, %start, 3;
    add.u64 %pa, %cnt, %off;
    st.global.u64 [%pa], %copied;
    ret;
}
"#;

/// Threads per `stream` block, and the bytes of each of its two buffers.
const STREAM_THREADS: u32 = 512;
const STREAM_BYTES: usize = 256 << 20;

pub struct Hog {
    compute: Arc<CudaStream>,
    stream: Arc<CudaStream>,
    spin: CudaFunction,
    copy: CudaFunction,
    smem: u32,
    buffers: (CudaSlice<f32>, CudaSlice<f32>),
    counts: Option<CudaSlice<u64>>,
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
        let load = |name| -> Result<CudaFunction> {
            let f = d.get_or_load_custom_func(name, "bench_sm_hog", PTX)?;
            Ok(f.into_cuda_function())
        };
        let (spin, copy) = (load("sm_spin")?, load("sm_stream")?);
        spin.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem,
        )?;
        let stream = ctx.new_stream()?;
        let floats = STREAM_BYTES / 4;
        let buffers = (stream.alloc_zeros(floats)?, stream.alloc_zeros(floats)?);
        Ok(Self {
            compute,
            stream,
            spin,
            copy,
            smem: smem as u32,
            buffers,
            counts: None,
        })
    }

    /// Holds `sms` SMs (`spin`: one block each; `stream`: `sms` blocks) for `ms`
    /// milliseconds, starting after the compute stream's work queued so far.
    pub fn start(&mut self, kind: HogKind, sms: usize, ms: f64) -> Result<()> {
        let ev = self.compute.record_event(None)?;
        self.stream.wait(&ev)?;
        let ns = (ms * 1e6) as u64;
        match kind {
            HogKind::Spin => {
                let cfg = LaunchConfig {
                    grid_dim: (sms as u32, 1, 1),
                    block_dim: (32, 1, 1),
                    shared_mem_bytes: self.smem,
                };
                let mut b = self.stream.launch_builder(&self.spin);
                b.arg(&ns);
                // SAFETY: the kernel takes one u64 and touches no memory.
                unsafe { b.launch(cfg) }?;
            }
            HogKind::Stream => {
                let threads = sms * STREAM_THREADS as usize;
                // Whole passes of four float4s per thread.
                let n = (STREAM_BYTES / 16) / (4 * threads) * (4 * threads);
                let counts = self.stream.alloc_zeros::<u64>(threads)?;
                let cfg = LaunchConfig {
                    grid_dim: (sms as u32, 1, 1),
                    block_dim: (STREAM_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                let n = n as u64;
                let mut b = self.stream.launch_builder(&self.copy);
                b.arg(&ns)
                    .arg(&self.buffers.0)
                    .arg(&mut self.buffers.1)
                    .arg(&n)
                    .arg(&counts);
                // SAFETY: src and dst hold STREAM_BYTES, the kernel reads and writes the
                // first n float4s of them and one u64 per thread of `counts`.
                unsafe { b.launch(cfg) }?;
                self.counts = Some(counts);
            }
        }
        Ok(())
    }

    /// Waits for the hog to end; the bytes a `stream` hog read and wrote.
    pub fn finish(&mut self) -> Result<Option<u64>> {
        self.stream.synchronize()?;
        match self.counts.take() {
            Some(c) => {
                let v = self.stream.clone_dtoh(&c)?;
                Ok(Some(v.iter().sum::<u64>() * 16 * 2))
            }
            None => Ok(None),
        }
    }
}
