//! The candle in-place ops that issue NCCL calls: they hand us `&mut` access to a
//! tensor's CUDA storage, from which we take device pointers (with cudarc's event
//! bookkeeping on the communication stream) for the raw NCCL call.

use super::raw::{nccl_dtype, nccl_op, RawComm};
use crate::error::CommError;
use crate::ReduceOp;
use candle_core::cuda_backend::{CudaStorage, CudaStorageSlice};
use candle_core::{InplaceOp1, InplaceOp2, Layout};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::ffi::c_void;

/// Which NCCL call an in-place op issues.
#[derive(Clone, Copy)]
pub(super) enum Call {
    AllReduce(ReduceOp),
    Broadcast(usize),
    ReduceScatter(ReduceOp),
    AllGather,
    /// In place, on the large buffer: this rank's chunk of `small` elements at `at`
    /// elements into it (NCCL's in-place rule: at = rank × small).
    ReduceScatterInPlace {
        op: ReduceOp,
        small: usize,
        at: usize,
    },
    AllGatherInPlace {
        small: usize,
        at: usize,
    },
}

pub(super) struct Launch<'a> {
    pub raw: &'a RawComm,
    pub stream: &'a CudaStream,
    pub call: Call,
}

fn cerr(e: CommError) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

macro_rules! with_ptr {
    ($slice:expr, $layout:expr, $stream:expr, $method:ident, |$p:ident| $body:expr) => {
        match $slice {
            CudaStorageSlice::F32(s) => {
                let (b, _g) = s.$method($stream);
                let $p = b + 4 * $layout.start_offset() as u64;
                $body
            }
            CudaStorageSlice::F64(s) => {
                let (b, _g) = s.$method($stream);
                let $p = b + 8 * $layout.start_offset() as u64;
                $body
            }
            CudaStorageSlice::BF16(s) => {
                let (b, _g) = s.$method($stream);
                let $p = b + 2 * $layout.start_offset() as u64;
                $body
            }
            CudaStorageSlice::F16(s) => {
                let (b, _g) = s.$method($stream);
                let $p = b + 2 * $layout.start_offset() as u64;
                $body
            }
            _ => candle_core::bail!("unsupported dtype for NCCL"),
        }
    };
}

impl Launch<'_> {
    fn dtype(&self, s: &CudaStorage) -> candle_core::Result<cudarc::nccl::sys::ncclDataType_t> {
        use candle_core::backend::BackendStorage;
        nccl_dtype(s.dtype()).ok_or_else(|| {
            candle_core::Error::Msg(format!("dtype {:?} unsupported by NCCL", s.dtype()))
        })
    }
}

impl InplaceOp1 for Launch<'_> {
    fn name(&self) -> &'static str {
        "nccl-inplace"
    }
    fn cpu_fwd(&self, _: &mut candle_core::CpuStorage, _: &Layout) -> candle_core::Result<()> {
        candle_core::bail!("NCCL collectives need CUDA tensors")
    }
    fn cuda_fwd(&self, s: &mut CudaStorage, l: &Layout) -> candle_core::Result<()> {
        use candle_core::backend::BackendStorage;
        let (c, dt, n) = (self, self.dtype(s)?, l.shape().elem_count());
        let esz = s.dtype().size_in_bytes() as u64;
        let (raw, st) = (c.raw.ptr(), c.stream.cu_stream() as _);
        with_ptr!(&mut s.slice, l, &c.stream, device_ptr_mut, |p| {
            let chunk = |at: usize| (p + esz * at as u64) as *mut c_void;
            let p = p as *mut c_void;
            let r = match self.call {
                Call::ReduceScatterInPlace { op, small, at } => ("ncclReduceScatter", unsafe {
                    cudarc::nccl::result::reduce_scatter(
                        p,
                        chunk(at),
                        small,
                        dt,
                        nccl_op(op),
                        raw,
                        st,
                    )
                }),
                Call::AllGatherInPlace { small, at } => ("ncclAllGather", unsafe {
                    cudarc::nccl::result::all_gather(chunk(at), p, small, dt, raw, st)
                }),
                Call::AllReduce(op) => ("ncclAllReduce", unsafe {
                    cudarc::nccl::result::all_reduce(p, p, n, dt, nccl_op(op), raw, st)
                }),
                Call::Broadcast(root) => ("ncclBroadcast", unsafe {
                    cudarc::nccl::result::broadcast(p, p, n, dt, root as i32, raw, st)
                }),
                _ => unreachable!("two-buffer calls go through InplaceOp2"),
            };
            c.raw.check(r.0, r.1).map_err(cerr)
        })
    }
}

impl InplaceOp2 for Launch<'_> {
    fn name(&self) -> &'static str {
        "nccl-two-buffer"
    }
    fn cpu_fwd(
        &self,
        _: &mut candle_core::CpuStorage,
        _: &Layout,
        _: &candle_core::CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<()> {
        candle_core::bail!("NCCL collectives need CUDA tensors")
    }
    fn cuda_fwd(
        &self,
        dst: &mut CudaStorage,
        dl: &Layout,
        src: &CudaStorage,
        sl: &Layout,
    ) -> candle_core::Result<()> {
        let (c, dt) = (self, self.dtype(src)?);
        let (raw, st) = (c.raw.ptr(), c.stream.cu_stream() as _);
        let (n_out, n_in) = (dl.shape().elem_count(), sl.shape().elem_count());
        with_ptr!(&src.slice, sl, &c.stream, device_ptr, |sp| {
            with_ptr!(&mut dst.slice, dl, &c.stream, device_ptr_mut, |dp| {
                let (sp, dp) = (sp as *const c_void, dp as *mut c_void);
                let r = match self.call {
                    Call::ReduceScatter(op) => ("ncclReduceScatter", unsafe {
                        cudarc::nccl::result::reduce_scatter(
                            sp,
                            dp,
                            n_out,
                            dt,
                            nccl_op(op),
                            raw,
                            st,
                        )
                    }),
                    Call::AllGather => ("ncclAllGather", unsafe {
                        cudarc::nccl::result::all_gather(sp, dp, n_in, dt, raw, st)
                    }),
                    _ => unreachable!("one-buffer calls go through InplaceOp1"),
                };
                c.raw.check(r.0, r.1).map_err(cerr)
            })
        })
    }
}
