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
//! the ring's. (With the zero-CTA policy NCCL 2.28 runs them on the copy engines instead:
//! at xl, 60 ms a step against 47 without windows, call 108; at world 2 the communicator
//! now asks for it, for ZeRO-1's buffers: `super::engines`.) Where our own copy-engine
//! gathers run instead (`super::ce`; by default at world 2), each window also holds their
//! flags after its buffer, and [`Span`] says where the peers' buffers are mapped here.
//!
//! The buffer is wrapped as a candle tensor whose storage is never dropped (cudarc would
//! free it with `cuMemFreeAsync`, which is not NCCL's allocator); the windows are
//! deregistered and the memory freed when the communicator goes, after both streams
//! have finished. A gather buffer must not be used after its communicator is dropped.

use super::comm::{drv, NcclComm};
use super::engines::{GATHERS_ON, REDUCES_ON};
use super::policy::{ce_wanted, CE_GATHER, CE_REDUCE};
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

/// Bytes this process holds in NCCL windows (gather buffers, and the copy-engine
/// reduce-scatters' slots): memory outside candle's pool, which `train`'s peak adds to the
/// pool's.
pub fn window_bytes() -> u64 {
    HELD.load(Ordering::Relaxed)
}

/// `NCCL_WIN_COLL_SYMMETRIC` (nccl.h 2.27+; cudarc's bindings lack the macro).
const WIN_COLL_SYMMETRIC: i32 = 0x01;

/// The windows a communicator registered: freed when it goes.
pub(super) struct Windows {
    raw: Arc<RawComm>,
    streams: [Arc<CudaStream>; 2],
    made: Mutex<Vec<Made>>,
    /// Whether gather buffers are windows ([`windows_wanted`]).
    pub(super) on: bool,
    /// Whether gathers into them run on the copy engines (`super::policy::CE_GATHER`): then each
    /// window also holds the flags of `super::ce` and knows its peers' addresses.
    pub(super) ce: bool,
    /// `COMM_CE_GATHER=1`: also into the buffers that ask for NCCL (`crate::Gatherer::Nccl`).
    ce_asked: bool,
    /// Whether in-place bf16 reduce-scatters run on the copy engines, into windows of
    /// their own (`super::policy::CE_REDUCE`, `super::ce_reduce`).
    pub(super) ce_reduce: bool,
}

/// A registered buffer: its address, window, bytes, and span (with copy-engine gathers).
type Made = (*mut c_void, sys::ncclWindow_t, u64, Option<Span>);

/// What a window is registered for ([`NcclComm::register`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// A gather buffer: the copy engines' flags after it where they gather, all 0.
    Gather,
    /// A gather buffer that NCCL gathers into (`crate::Gatherer::Nccl`): no flags, unless
    /// `COMM_CE_GATHER=1` asks for the copy-engine gathers everywhere.
    NcclGather,
    /// A copy-engine reduce-scatter's slots (`super::ce_reduce`): the flags after them,
    /// the "ready" ones 1 (every peer's part may come).
    Reduce,
}

impl Use {
    /// Its operation and variable in errors, its watchdog names: registering, zeroing.
    fn names(self) -> [&'static str; 4] {
        match self {
            Use::Gather | Use::NcclGather => [
                "gather_buffer",
                "COMM_CE_GATHER",
                "gather_buffer (ncclCommWindowRegister)",
                "gather_buffer (zeroing)",
            ],
            Use::Reduce => [
                "reduce_scatter_deferred",
                "COMM_CE_REDUCE",
                "copy-engine reduce-scatter (ncclCommWindowRegister)",
                "copy-engine reduce-scatter (zeroing)",
            ],
        }
    }
}

/// A window as the copy-engine gathers (`super::ce`) see it: where its buffer is here and
/// at each peer, and where its flags are.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    /// This rank's buffer: its address and bytes (the flags follow, at `flags`).
    pub base: u64,
    pub bytes: u64,
    /// Offset of the flags: `2 × world` u32, "ready" from each rank, then "done".
    pub flags: u64,
    world: u64,
    /// NCCL's flat mapping of the ranks' buffers in this process: rank q's at
    /// `lsa_base + q × stride`.
    lsa_base: u64,
    stride: u64,
}

impl Span {
    /// The address of `offset` into rank `q`'s buffer, mapped in this process.
    pub fn peer(&self, q: usize, offset: u64) -> u64 {
        self.lsa_base + q as u64 * self.stride + offset
    }
    /// Offset of the flag that rank `q` sets here when it has reached a gather (its part is
    /// written, its buffer may be written into).
    pub fn ready(&self, q: usize) -> u64 {
        self.flags + 4 * q as u64
    }
    /// Offset of the flag that rank `q` sets here when it has pushed its parts into this
    /// rank's buffer.
    pub fn done(&self, q: usize) -> u64 {
        self.flags + 4 * (self.world + q as u64)
    }
}

/// The head of NCCL 2.28's `struct ncclWindow_vidmem` (nccl_device/impl/core__types.h),
/// which `ncclWindow_t` points to in device memory.
#[repr(C)]
#[derive(Default)]
struct WindowHead {
    win_host: u64,
    lsa_flat_base: u64,
    lsa_rank: i32,
    world_rank: i32,
    stride_4g: u32,
    _pad: u32,
}

// The raw pointers are device addresses and NCCL window handles, used under the mutex.
unsafe impl Send for Windows {}
unsafe impl Sync for Windows {}

impl Windows {
    /// The windows of a communicator (`raw`), its streams `compute` and `comm`, as
    /// [`super::engines::windows_here`] found them (`on`, `worlds`).
    pub(super) fn new(
        raw: Arc<RawComm>,
        (on, worlds): (bool, (Option<usize>, usize)),
        compute: Arc<CudaStream>,
        comm: Arc<CudaStream>,
    ) -> Result<Self> {
        let version = super::raw::version();
        let wanted = |u| ce_wanted(u, std::env::var(u.var).ok().as_deref(), on, version, worlds);
        let (ce, ce_reduce) = (wanted(&CE_GATHER)?, wanted(&CE_REDUCE)?);
        let ce_asked = ce && std::env::var(CE_GATHER.var).as_deref() == Ok("1");
        GATHERS_ON.fetch_or(ce, Ordering::Relaxed);
        REDUCES_ON.fetch_or(ce_reduce, Ordering::Relaxed);
        Ok(Self {
            raw,
            streams: [compute, comm],
            made: Mutex::new(Vec::new()),
            on,
            ce,
            ce_asked,
            ce_reduce,
        })
    }

    /// The window holding device address `at`, where gathers run on the copy engines.
    pub(super) fn span_of(&self, at: u64) -> Option<Span> {
        let made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        made.iter()
            .filter_map(|m| m.3)
            .find(|s| (s.base..s.base + s.bytes).contains(&at))
    }
}

/// Window `win`'s span ([`Span`]) for `u`, rank `rank` of `world`, its buffer of `bytes` at
/// `base`, flags at `flags`: read from NCCL's window struct, checked to put this rank where
/// it is (one NVLink domain of all ranks).
fn span(
    u: Use,
    win: sys::ncclWindow_t,
    base: u64,
    bytes: u64,
    flags: u64,
    rank: usize,
    world: usize,
) -> Result<Span> {
    let mut h = WindowHead::default();
    // SAFETY: `win` points to NCCL 2.28's window struct (policy: only on 2.28), at least
    // as large as its head; cuMemcpy infers both sides' kinds (unified addressing).
    unsafe {
        cudarc::driver::sys::cuMemcpy(
            &mut h as *mut WindowHead as u64,
            win as u64,
            std::mem::size_of::<WindowHead>(),
        )
    }
    .result()
    .map_err(drv("cuMemcpy (NCCL window head)"))?;
    if h.world_rank != rank as i32 || h.lsa_rank != rank as i32 || h.stride_4g == 0 {
        let [op, var, ..] = u.names();
        let e = format!(
            "{var}=1: NCCL's window puts rank {rank} at world rank {} and load/store rank {} (stride {} × 4 GiB): the copy engines need every rank in one NVLink domain",
            h.world_rank, h.lsa_rank, h.stride_4g
        );
        return Err(CommError::invalid(op, rank, e));
    }
    Ok(Span {
        base,
        bytes,
        flags,
        world: world as u64,
        lsa_base: h.lsa_flat_base,
        stride: (h.stride_4g as u64) << 32,
    })
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
        for (ptr, win, bytes, _) in made {
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
    /// [`crate::Communicator::gather_buffer_by`]: see the module's doc.
    pub(super) fn window_buffer(
        &self,
        len: usize,
        dtype: DType,
        device: &Device,
        by: crate::Gatherer,
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
        let data = (len * dtype.size_in_bytes()) as u64;
        let u = match by {
            crate::Gatherer::Default => Use::Gather,
            crate::Gatherer::Nccl => Use::NcclGather,
        };
        let ptr = self.register(u, data)?.0;
        let dev = self.device().as_cuda_device()?.clone();
        let storage = wrap(&self.compute, ptr, len, dev);
        let t = Tensor::from_storage(
            Storage::Cuda(storage),
            len,
            candle_core::op::BackpropOp::none(),
            false,
        );
        // The storage's last reference is never dropped: NCCL's memory, freed above.
        std::mem::forget(t.clone());
        Ok(t)
    }

    /// Allocates and registers a window of `data` bytes on every rank (a collective) for
    /// `u`, with the `2 × world` u32 flags of the copy engines after it where they gather
    /// into it or it is a reduce-scatter's ([`Use`]). Returns the buffer's address and,
    /// with flags, its [`Span`].
    pub(super) fn register(&self, u: Use, data: u64) -> Result<(u64, Option<Span>)> {
        let w = &self.windows;
        let flags = match u {
            Use::Reduce => true,
            Use::Gather => w.ce,
            Use::NcclGather => w.ce_asked,
        };
        let [_, _, registering, zeroing] = u.names();
        let at = data.next_multiple_of(256);
        let bytes = match flags {
            true => (at + 8 * self.world as u64).next_multiple_of(256),
            false => data,
        } as usize;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: NCCL writes the pointer of `bytes` bytes it allocated on this device.
        let r = unsafe { sys::ncclMemAlloc(&mut ptr, bytes) }.result();
        self.raw.check("ncclMemAlloc", r)?;
        let ones = (u == Use::Reduce).then_some(ptr as u64 + at);
        if let Err(e) = self.zero(ptr, bytes, ones, zeroing) {
            // SAFETY: allocated above, used by nothing (the stream has drained or failed).
            unsafe { sys::ncclMemFree(ptr) };
            return Err(e);
        }
        let mut win: sys::ncclWindow_t = std::ptr::null_mut();
        // Every rank registers together: a rank that never comes fails them all, after the
        // timeout, through the watchdog (as a collective's host call would).
        let seq = self.seq.load(Ordering::Relaxed);
        self.watchdog.in_call(Some((registering, seq)));
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
        let span = match flags {
            true => Some(span(u, win, ptr as u64, data, at, self.rank, self.world)),
            false => None,
        }
        .transpose();
        let keep = span.as_ref().ok().copied().flatten();
        let mut made = self.windows.made.lock().unwrap_or_else(|e| e.into_inner());
        made.push((ptr, win, bytes as u64, keep));
        HELD.fetch_add(bytes as u64, Ordering::Relaxed);
        // (Registered either way: freed with the others when the communicator goes.)
        Ok((ptr as u64, span?))
    }

    /// Zeroes `bytes` at `ptr` before the window is registered: no peer can set a flag of
    /// `super::ce` in it before (registering is collective); then sets `world` u32 at
    /// `ones`, if given, to 1; watched as `what`. By the driver, not by candle's
    /// `zero_set`: its kernel counts elements in 32 bits and never ends past 2^32 of them
    /// (zero1's copies at 6.7B, 6.7e9 bf16, hung there: calls 113-114).
    fn zero(
        &self,
        ptr: *mut c_void,
        bytes: usize,
        ones: Option<u64>,
        what: &'static str,
    ) -> Result<()> {
        self.compute
            .context()
            .bind_to_thread()
            .map_err(drv("cuCtxSetCurrent"))?;
        // SAFETY: `bytes` bytes at `ptr`, allocated on this device, used by nothing yet.
        unsafe { result::memset_d8_async(ptr as u64, 0, bytes, self.compute.cu_stream()) }
            .map_err(drv("cuMemsetD8Async"))?;
        if let Some(at) = ones {
            // SAFETY: `world` u32 inside the allocation (the flags after the buffer).
            unsafe {
                cudarc::driver::sys::cuMemsetD32Async(at, 1, self.world, self.compute.cu_stream())
            }
            .result()
            .map_err(drv("cuMemsetD32Async"))?;
        }
        // Watched like a collective: a stream that never drains fails the rank after the
        // timeout, with a message, instead of blocking the sync below for ever.
        crate::Communicator::watch_queued(self, what)?;
        self.compute
            .synchronize()
            .map_err(drv("cuStreamSynchronize"))
    }
}
