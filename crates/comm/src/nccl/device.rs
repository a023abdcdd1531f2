//! The CUDA device a rank computes on, opened for candle's compute stream plus the
//! communication stream that [`super::NcclComm`] orders with its own events.

use super::comm::drv;
use crate::error::Result;
use candle_core::Device;
use cudarc::driver::{result, CudaContext, CudaStream};
use std::sync::Arc;

/// Opens GPU `ordinal` with cudarc's per-allocation event tracking off (unless
/// `COMM_CUDA_EVENT_TRACKING=1`).
///
/// With tracking on, cudarc creates two CUDA events per allocation and, once a second
/// stream exists, waits on one and records the other around every kernel argument: a
/// few driver calls per tensor per op, host time on every op of a step. It is not needed
/// here: every tensor a collective touches is ordered by [`super::NcclComm`]'s own events
/// (the communication stream waits for compute before each launch; `Work::wait`, or the
/// `Work`'s drop, makes compute wait after it, before the tensors it keeps can be freed
/// on the compute stream), and candle computes on one stream. Call it before anything is
/// allocated on the device: slices allocated earlier keep their events.
pub fn cuda_device(ordinal: usize) -> Result<Device> {
    let device = Device::new_cuda(ordinal)?;
    if std::env::var("COMM_CUDA_EVENT_TRACKING").as_deref() != Ok("1") {
        // SAFETY: nothing has been allocated on this device yet, and the only cross-stream
        // uses of its memory are NcclComm's collectives, which order themselves (above).
        unsafe { device.as_cuda_device()?.disable_event_tracking() };
    }
    Ok(device)
}

/// The communication stream, at the device's highest priority: the collectives' kernels
/// go ahead of the compute stream's wherever an SM frees up, and a CUDA graph keeps each
/// captured node's priority. At world 2, xl bf16, a DDP step took 0.4-0.6 ms (1 %) less
/// (docs/results/train-speed-x2.md, call 61). `COMM_NCCL_STREAM_PRIORITY=default`: the
/// default priority.
pub fn comm_stream(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>> {
    if std::env::var("COMM_NCCL_STREAM_PRIORITY").as_deref() == Ok("default") {
        return ctx.new_stream().map_err(drv("cuStreamCreate"));
    }
    ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
    let (_, highest) =
        result::stream::get_priority_range().map_err(drv("cuCtxGetStreamPriorityRange"))?;
    ctx.new_stream_with_priority(highest)
        .map_err(drv("cuStreamCreateWithPriority"))
}

/// The stream of the copy-engine reduce-scatters' adds: at the lowest priority, or
/// `COMM_CE_ADDS_PRIORITY` (`env`, 1 to 5) levels above it. Inside a CUDA graph whose
/// compute kernels run above the lowest (`SEAM_GRAPH_COMPUTE_PRIORITY`, more levels than
/// this), the backward's kernels then get a freed SM before the adds' pending blocks; at
/// the lowest, the adds would be raised with them. Any other value is an error naming the
/// variable.
pub fn adds_stream(ctx: &Arc<CudaContext>, env: Option<&str>) -> Result<Arc<CudaStream>> {
    let levels = super::adds_policy::adds_priority(env)?;
    ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
    let (least, greatest) =
        result::stream::get_priority_range().map_err(drv("cuCtxGetStreamPriorityRange"))?;
    // Greater priorities are lower numbers.
    ctx.new_stream_with_priority((least - levels).max(greatest))
        .map_err(drv("cuStreamCreateWithPriority"))
}

/// The GPUs this process sees (CUDA_VISIBLE_DEVICES applies); an error says why none can
/// be seen (no driver, no device).
pub fn gpu_count() -> Result<usize> {
    use cudarc::driver::result;
    let err = |call: &'static str| {
        move |e: cudarc::driver::DriverError| crate::error::CommError::Cuda {
            call,
            msg: format!("{e:?}"),
        }
    };
    result::init().map_err(err("cuInit"))?;
    Ok(result::device::get_count().map_err(err("cuDeviceGetCount"))? as usize)
}
