//! Thin fallible layer over `cudarc::nccl::{sys, result}`: owns one `ncclComm_t`, maps
//! return codes to errors with NCCL's strings, and aborts instead of panicking.

use crate::error::{CommError, Result};
use crate::ReduceOp;
use candle_core::DType;
use cudarc::nccl::{result, sys};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

/// `ncclConfig_t` as NCCL 2.27's nccl.h lays it out (`ncclConfig_v22700`): this crate reads
/// NCCL 2.28 or later, and cudarc's own struct is the newest NCCL's.
#[repr(C)]
struct Config {
    size: usize,
    magic: u32,
    version: u32,
    blocking: i32,
    cga_cluster_size: i32,
    min_ctas: i32,
    max_ctas: i32,
    net_name: *const std::ffi::c_char,
    split_share: i32,
    traffic_class: i32,
    comm_name: *const std::ffi::c_char,
    collnet_enable: i32,
    cta_policy: i32,
    shrink_share: i32,
    nvls_ctas: i32,
}

// NCCL 2.27's fields sit where cudarc's newer struct has them (a later NCCL only appends).
const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(Config, net_name) == offset_of!(sys::ncclConfig_t, netName));
    assert!(offset_of!(Config, comm_name) == offset_of!(sys::ncclConfig_t, commName));
    assert!(offset_of!(Config, cta_policy) == offset_of!(sys::ncclConfig_t, CTAPolicy));
    assert!(offset_of!(Config, nvls_ctas) == offset_of!(sys::ncclConfig_t, nvlsCTAs));
};

impl Config {
    /// `NCCL_CONFIG_INITIALIZER` of NCCL 2.27.0 (every field undefined: NCCL's default or
    /// its environment variable), but the CTA policy.
    fn with_cta_policy(cta_policy: i32) -> Self {
        const UNDEF: i32 = i32::MIN;
        Self {
            size: std::mem::size_of::<Self>(),
            magic: 0xcafe_beef,
            version: 22700,
            blocking: UNDEF,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
            split_share: UNDEF,
            traffic_class: UNDEF,
            comm_name: std::ptr::null(),
            collnet_enable: UNDEF,
            cta_policy,
            shrink_share: UNDEF,
            nvls_ctas: UNDEF,
        }
    }
}

/// An initialised NCCL communicator.
pub struct RawComm {
    ptr: sys::ncclComm_t,
    rank: usize,
    aborted: AtomicBool,
}

// NCCL communicators may be used from the thread that enqueues and aborted from another
// (the watchdog), as PyTorch does.
unsafe impl Send for RawComm {}
unsafe impl Sync for RawComm {}

/// A fresh unique id (rank 0 makes it and sends it through the store).
pub fn unique_id() -> Result<[u8; 128]> {
    let id = result::get_uniqueid().map_err(|e| err("ncclGetUniqueId", 0, e.0, None))?;
    Ok(id.internal.map(|c| c as u8))
}

/// The loaded NCCL's version, as `ncclGetVersion` gives it (2.28.9: 22809).
pub fn version() -> Option<i32> {
    result::get_nccl_version().ok()
}

fn err(
    call: &'static str,
    rank: usize,
    code: sys::ncclResult_t,
    comm: Option<sys::ncclComm_t>,
) -> CommError {
    // SAFETY: NCCL returns static strings; a null pointer is handled.
    let cstr = |p: *const std::ffi::c_char| {
        if p.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let generic = cstr(unsafe { sys::ncclGetErrorString(code) });
    let last = comm
        .map(|c| cstr(unsafe { sys::ncclGetLastError(c) }))
        .unwrap_or_default();
    CommError::Nccl {
        call,
        rank,
        code: format!("{code:?}"),
        msg: if last.is_empty() {
            generic
        } else {
            format!("{generic}: {last}")
        },
    }
}

pub fn nccl_dtype(d: DType) -> Option<sys::ncclDataType_t> {
    Some(match d {
        DType::F32 => sys::ncclDataType_t::ncclFloat32,
        DType::F64 => sys::ncclDataType_t::ncclFloat64,
        DType::BF16 => sys::ncclDataType_t::ncclBfloat16,
        DType::F16 => sys::ncclDataType_t::ncclFloat16,
        _ => return None,
    })
}

pub fn nccl_op(op: ReduceOp) -> sys::ncclRedOp_t {
    match op {
        ReduceOp::Sum => sys::ncclRedOp_t::ncclSum,
        ReduceOp::Avg => sys::ncclRedOp_t::ncclAvg,
        ReduceOp::Max => sys::ncclRedOp_t::ncclMax,
        ReduceOp::Min => sys::ncclRedOp_t::ncclMin,
    }
}

impl RawComm {
    /// `ncclCommInitRank`, or `ncclCommInitRankConfig` with `cta_policy` set (NCCL 2.27's
    /// config, every other field left to NCCL); the current CUDA context must be the
    /// rank's device.
    pub fn init(rank: usize, world: usize, id: [u8; 128], cta_policy: Option<i32>) -> Result<Self> {
        let id = sys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let mut ptr = std::mem::MaybeUninit::uninit();
        match cta_policy {
            None => {
                unsafe { result::comm_init_rank(ptr.as_mut_ptr(), world as i32, id, rank as i32) }
                    .map_err(|e| err("ncclCommInitRank", rank, e.0, None))?;
            }
            Some(p) => {
                let mut config = Config::with_cta_policy(p);
                // SAFETY: a config as NCCL 2.27's header lays it out, its size and version
                // saying so (later NCCLs read older configs by those two).
                let config = &mut config as *mut Config as *mut sys::ncclConfig_t;
                unsafe {
                    sys::ncclCommInitRankConfig(
                        ptr.as_mut_ptr(),
                        world as i32,
                        id,
                        rank as i32,
                        config,
                    )
                }
                .result()
                .map_err(|e| err("ncclCommInitRankConfig", rank, e.0, None))?;
            }
        }
        Ok(Self {
            ptr: unsafe { ptr.assume_init() },
            rank,
            aborted: AtomicBool::new(false),
        })
    }

    pub fn ptr(&self) -> sys::ncclComm_t {
        self.ptr
    }

    /// Maps a `result::*` return to our error, with the communicator's last error text.
    pub fn check(
        &self,
        call: &'static str,
        r: std::result::Result<result::NcclStatus, result::NcclError>,
    ) -> Result<()> {
        if self.aborted.load(Ordering::Acquire) {
            return Err(CommError::Broken {
                rank: self.rank,
                reason: "the NCCL communicator was aborted".into(),
            });
        }
        r.map(|_| ())
            .map_err(|e| err(call, self.rank, e.0, Some(self.ptr)))
    }

    /// An error raised asynchronously inside NCCL (e.g. a peer vanished).
    pub fn async_error(&self) -> Result<()> {
        if self.aborted.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut code = sys::ncclResult_t::ncclSuccess;
        unsafe { sys::ncclCommGetAsyncError(self.ptr, &mut code) }
            .result()
            .map_err(|e| err("ncclCommGetAsyncError", self.rank, e.0, Some(self.ptr)))?;
        match code {
            sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress => Ok(()),
            c => Err(err(
                "collective (asynchronous error)",
                self.rank,
                c,
                Some(self.ptr),
            )),
        }
    }

    /// Aborts the communicator: kernels in flight return, the comm is unusable after.
    pub fn abort(&self) {
        if !self.aborted.swap(true, Ordering::AcqRel) {
            let _ = unsafe { result::comm_abort(self.ptr) };
        }
    }
}

impl Drop for RawComm {
    fn drop(&mut self) {
        if !self.aborted.load(Ordering::Acquire) {
            let _ = unsafe { result::comm_destroy(self.ptr) };
        }
    }
}
