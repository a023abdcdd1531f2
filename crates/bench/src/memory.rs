//! Device memory in use and its high-water mark, from the CUDA default memory pool that
//! candle allocates from (cuMemAllocAsync): `CU_MEMPOOL_ATTR_USED_MEM_HIGH`.
//! On the CPU, or without the `cuda` feature, there is nothing to read: `None`.

use candle_core::Device;

#[cfg(feature = "cuda")]
fn pool_attr(
    device: &Device,
    attr: cudarc::driver::sys::CUmemPool_attribute,
    reset: bool,
) -> Option<u64> {
    use cudarc::driver::sys;
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

/// Synchronises the device, then reads (or with `reset`, zeroes) a pool attribute.
#[cfg(feature = "cuda")]
fn synced(
    device: &Device,
    attr: cudarc::driver::sys::CUmemPool_attribute,
    reset: bool,
) -> Option<u64> {
    if device.is_cuda() {
        let _ = device.synchronize();
    }
    pool_attr(device, attr, reset)
}

/// Bytes in use now.
pub fn current(device: &Device) -> Option<u64> {
    #[cfg(feature = "cuda")]
    return synced(
        device,
        cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
        false,
    );
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        None
    }
}

/// Highest bytes in use since the last [`reset_peak`].
pub fn peak(device: &Device) -> Option<u64> {
    #[cfg(feature = "cuda")]
    return synced(
        device,
        cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        false,
    );
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        None
    }
}

pub fn reset_peak(device: &Device) {
    #[cfg(feature = "cuda")]
    let _ = synced(
        device,
        cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        true,
    );
    #[cfg(not(feature = "cuda"))]
    let _ = device;
}

pub fn gib(b: Option<u64>) -> Option<f64> {
    b.map(|b| b as f64 / (1u64 << 30) as f64)
}
