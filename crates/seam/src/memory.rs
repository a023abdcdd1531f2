//! Device memory in use and its high-water mark, from the CUDA default memory pool that
//! candle allocates from (cuMemAllocAsync): `CU_MEMPOOL_ATTR_USED_MEM_HIGH`; with
//! [`process_peak`], captured graphs' own memory beside the pool's. Not counted: NCCL's buffers and the
//! CUDA context. On the CPU, or without the `cuda` feature, there is nothing to read:
//! `None`. `bench` reads it around the steps it times; `train` prints each rank's peak.

use candle_core::Device;

#[cfg(feature = "cuda")]
fn pool_attr(
    device: &Device,
    attr: candle_core::cuda_backend::cudarc::driver::sys::CUmemPool_attribute,
    reset: bool,
) -> Option<u64> {
    use candle_core::cuda_backend::cudarc::driver::sys;
    let Device::Cuda(d) = device else { return None };
    let ctx = d.cuda_stream().context().clone();
    ctx.bind_to_thread().ok()?;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: plain driver queries on the device's default pool.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) != sys::CUresult::CUDA_SUCCESS
        {
            return None;
        }
        let mut v: u64 = 0;
        let r = if reset {
            sys::cuMemPoolSetAttribute(pool, attr, &mut v as *mut u64 as *mut _)
        } else {
            sys::cuMemPoolGetAttribute(pool, attr, &mut v as *mut u64 as *mut _)
        };
        (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
    }
}

/// Which pool counter.
#[derive(Clone, Copy)]
enum Used {
    Current,
    High,
    /// The physical memory the pool held at most (what it holds beyond its bytes in use
    /// is what its layout costs).
    ReservedHigh,
}

/// Synchronises the device, then reads (or with `reset`, zeroes) a pool counter; `None`
/// on the CPU or without the `cuda` feature.
fn synced(device: &Device, which: Used, reset: bool) -> Option<u64> {
    #[cfg(feature = "cuda")]
    {
        use candle_core::cuda_backend::cudarc::driver::sys::CUmemPool_attribute as A;
        if device.is_cuda() {
            let _ = device.synchronize();
        }
        let attr = match which {
            Used::Current => A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
            Used::High => A::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
            Used::ReservedHigh => A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
        };
        pool_attr(device, attr, reset)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (device, which, reset);
        None
    }
}

/// Bytes in use now.
pub fn current(device: &Device) -> Option<u64> {
    synced(device, Used::Current, false)
}

/// Highest bytes in use since the last [`reset_peak`].
pub fn peak(device: &Device) -> Option<u64> {
    synced(device, Used::High, false)
}

/// Highest bytes the pool reserved (physical memory) since the last [`reset_peak`].
pub fn reserved_peak(device: &Device) -> Option<u64> {
    synced(device, Used::ReservedHigh, false)
}

/// Zeroes [`peak`] and [`reserved_peak`].
pub fn reset_peak(device: &Device) {
    let _ = synced(device, Used::High, true);
    let _ = synced(device, Used::ReservedHigh, true);
}

/// The process's highest bytes in use since it started (or [`reset_peak`] and
/// `graph::reset_mem_high`): the pool's own mark (the eager steps), or what the pool holds
/// now plus the captured graphs' mark (a replay runs beside what the pool holds: the
/// parameters and optimizer state), whichever is higher. The two marks are not added: an
/// eager step's transients (activations, gradients) and a replay's are never alive
/// together, and the sum counted them twice.
pub fn process_peak(device: &Device) -> Option<u64> {
    let eager = peak(device)?;
    let graphs = crate::graph::mem_high(device).unwrap_or(0);
    Some(eager.max(current(device).unwrap_or(0) + graphs))
}

pub fn gib(b: Option<u64>) -> Option<f64> {
    b.map(|b| b as f64 / (1u64 << 30) as f64)
}
