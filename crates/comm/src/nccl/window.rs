//! Gather buffers in NCCL windows ([`crate::Communicator::gather_buffer`]).
//!
//! With windows on ([`windows_wanted`]: by default where the runtime NCCL is 2.28.7 or
//! later; `COMM_NCCL_WINDOWS=0` or `1` says otherwise), a gather buffer is allocated by
//! `ncclMemAlloc` and
//! registered on every rank as a symmetric window (`ncclCommWindowRegister`,
//! `NCCL_WIN_COLL_SYMMETRIC`: every rank's buffers are the same sizes in the same order,
//! so an offset means the same on all). An in-place all-gather into such a buffer has
//! both its ends in the window, and NCCL runs it with its symmetric kernels: each rank
//! writes its part straight into the others' buffers, through fewer SMs for less time than
//! the ring's. (With `NCCL_CTA_POLICY=2` NCCL 2.28 runs them on the copy engines instead:
//! at xl, 60 ms a step against 47 without windows, call 108.)
//!
//! The buffer is wrapped as a candle tensor whose storage is never dropped (cudarc would
//! free it with `cuMemFreeAsync`, which is not NCCL's allocator); the windows are
//! deregistered and the memory freed when the communicator goes, after both streams
//! have finished. A gather buffer must not be used after its communicator is dropped.

use super::comm::{drv, NcclComm};
use super::policy::windows_wanted;
use super::raw::RawComm;
use crate::error::{CommError, Result};
use crate::Tensor;
use candle_core::cuda_backend::{CudaDevice, CudaStorage};
use candle_core::{DType, Device, Storage};
use cudarc::driver::{result, CudaStream};
use cudarc::nccl::sys;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of gather buffers this process holds in NCCL windows ([`window_bytes`]).
static HELD: AtomicU64 = AtomicU64::new(0);

/// Bytes of gather buffers this process holds in NCCL windows: memory outside candle's
/// pool, which `train`'s peak adds to the pool's.
pub fn window_bytes() -> u64 {
    HELD.load(Ordering::Relaxed)
}

/// `NCCL_WIN_COLL_SYMMETRIC` (nccl.h 2.27+; cudarc's bindings lack the macro).
const WIN_COLL_SYMMETRIC: i32 = 0x01;

/// The windows a communicator registered: freed when it goes.
pub(super) struct Windows {
    raw: Arc<RawComm>,
    streams: [Arc<CudaStream>; 2],
    made: Mutex<Vec<(*mut c_void, sys::ncclWindow_t, u64)>>,
    /// Whether gather buffers are windows ([`windows_wanted`]).
    pub(super) on: bool,
}

// The raw pointers are device addresses and NCCL window handles, used under the mutex.
unsafe impl Send for Windows {}
unsafe impl Sync for Windows {}

impl Windows {
    pub(super) fn new(
        raw: Arc<RawComm>,
        compute: Arc<CudaStream>,
        comm: Arc<CudaStream>,
    ) -> Result<Self> {
        let env = std::env::var("COMM_NCCL_WINDOWS").ok();
        Ok(Self {
            raw,
            streams: [compute, comm],
            made: Mutex::new(Vec::new()),
            on: windows_wanted(env.as_deref(), super::raw::version())?,
        })
    }
}

impl Drop for Windows {
    fn drop(&mut self) {
        let made = std::mem::take(self.made.get_mut().unwrap_or_else(|e| e.into_inner()));
        if made.is_empty() {
            return;
        }
        for s in &self.streams {
            let _ = s.synchronize();
        }
        for (ptr, win, bytes) in made {
            HELD.fetch_sub(bytes, Ordering::Relaxed);
            // SAFETY: registered by `gather_buffer` on this communicator, used by nothing
            // queued (both streams are idle).
            unsafe {
                let _ = sys::ncclCommWindowDeregister(self.raw.ptr(), win);
                let _ = sys::ncclMemFree(ptr);
            }
        }
    }
}

impl NcclComm {
    /// [`crate::Communicator::gather_buffer`]: see the module's doc.
    pub(super) fn window_buffer(
        &self,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let name = "gather_buffer";
        if !device.same_device(self.device()) {
            let (here, ours) = (device.location(), self.device().location());
            let e = format!("buffer on {here:?}, this rank's NCCL device is {ours:?}");
            return Err(CommError::invalid(name, self.rank, e));
        }
        if !self.windows.on || self.world == 1 || len == 0 {
            return Ok(Tensor::zeros(len, dtype, device)?);
        }
        // The buffer as candle storage. SAFETY (of each): `len` elements of device memory
        // at the address, alive until the windows are freed; the slice is never dropped
        // (below), so cudarc never frees it.
        type Wrap = fn(&Arc<CudaStream>, u64, usize, CudaDevice) -> CudaStorage;
        let wrap: Wrap = match dtype {
            DType::BF16 => |s, at, len, dev| {
                CudaStorage::wrap_cuda_slice(
                    unsafe { s.upgrade_device_ptr::<half::bf16>(at, len) },
                    dev,
                )
            },
            DType::F32 => |s, at, len, dev| {
                CudaStorage::wrap_cuda_slice(unsafe { s.upgrade_device_ptr::<f32>(at, len) }, dev)
            },
            d => {
                let e = format!("{d:?} gather buffer in an NCCL window (bf16 or f32 only)");
                return Err(CommError::invalid(name, self.rank, e));
            }
        };
        let bytes = len * dtype.size_in_bytes();
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: NCCL writes the pointer of `bytes` bytes it allocated on this device.
        let r = unsafe { sys::ncclMemAlloc(&mut ptr, bytes) }.result();
        self.raw.check("ncclMemAlloc", r)?;
        let mut win: sys::ncclWindow_t = std::ptr::null_mut();
        // Every rank registers together: a rank that never comes fails them all, after the
        // timeout, through the watchdog (as a collective's host call would).
        let seq = self.seq.load(Ordering::Relaxed);
        self.watchdog
            .in_call(Some(("gather_buffer (ncclCommWindowRegister)", seq)));
        // SAFETY: `ptr` holds `bytes`; every rank registers its buffers in the same order.
        let r = unsafe {
            sys::ncclCommWindowRegister(self.raw.ptr(), ptr, bytes, &mut win, WIN_COLL_SYMMETRIC)
        }
        .result();
        self.watchdog.in_call(None);
        if let Err(e) = self.raw.check("ncclCommWindowRegister", r) {
            // SAFETY: allocated above and not registered.
            unsafe { sys::ncclMemFree(ptr) };
            return Err(e);
        }
        self.windows
            .made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((ptr, win, bytes as u64));
        HELD.fetch_add(bytes as u64, Ordering::Relaxed);
        let dev = self.device().as_cuda_device()?.clone();
        let storage = wrap(&self.compute, ptr as u64, len, dev);
        let t = Tensor::from_storage(
            Storage::Cuda(storage),
            len,
            candle_core::op::BackpropOp::none(),
            false,
        );
        // The storage's last reference is never dropped: NCCL's memory, freed above.
        std::mem::forget(t.clone());
        // Zeroed by the driver. Not by candle's `zero_set`: its kernel counts elements in
        // 32 bits and never ends past 2^32 of them (zero1's copies at 6.7B, 6.7e9 bf16,
        // hung there: calls 113-114).
        self.compute
            .context()
            .bind_to_thread()
            .map_err(drv("cuCtxSetCurrent"))?;
        // SAFETY: `bytes` bytes at `ptr`, allocated above on this device, used by nothing yet.
        unsafe { result::memset_d8_async(ptr as u64, 0, bytes, self.compute.cu_stream()) }
            .map_err(drv("cuMemsetD8Async"))?;
        // Watched like a collective: a stream that never drains fails the rank after the
        // timeout, with a message, instead of blocking the sync below for ever.
        crate::Communicator::watch_queued(self, "gather_buffer (zeroing)")?;
        self.compute
            .synchronize()
            .map_err(drv("cuStreamSynchronize"))?;
        Ok(t)
    }
}
