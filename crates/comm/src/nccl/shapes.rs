//! `COMM_CHECK_SHAPES=1`: before each collective every rank all-gathers what it is about
//! to call (op, element count, dtype, root) and compares, failing on every rank with each
//! rank's call named instead of hanging or corrupting memory on a mismatch.

use super::comm::{drv, NcclComm};
use crate::error::{CommError, Result};
use candle_core::DType;
use cudarc::driver::{DevicePtr, DevicePtrMut};
use std::ffi::c_void;

impl NcclComm {
    /// With `check_shapes`: all ranks exchange (op, count, dtype, root) and compare.
    pub(super) fn agree(
        &self,
        op: &'static str,
        code: i64,
        count: usize,
        dtype: DType,
        root: usize,
    ) -> Result<()> {
        if !self.opts.check_shapes {
            return Ok(());
        }
        let mine = [code, count as i64, dtype as i64, root as i64];
        let send = self.stream.clone_htod(&mine).map_err(drv("cuMemcpyHtoD"))?;
        let mut recv = self
            .stream
            .alloc_zeros::<i64>(4 * self.world)
            .map_err(drv("cuMemAlloc"))?;
        {
            let (s, _g1) = send.device_ptr(&self.stream);
            let (r, _g2) = recv.device_ptr_mut(&self.stream);
            let res = unsafe {
                cudarc::nccl::result::all_gather(
                    s as *const c_void,
                    r as *mut c_void,
                    4,
                    cudarc::nccl::sys::ncclDataType_t::ncclInt64,
                    self.raw.ptr(),
                    self.stream.cu_stream() as _,
                )
            };
            self.raw.check("ncclAllGather (shape check)", res)?;
        }
        let all = self.stream.clone_dtoh(&recv).map_err(drv("cuMemcpyDtoH"))?;
        if all.chunks(4).any(|c| c != mine) {
            let detail = all
                .chunks(4)
                .enumerate()
                .map(|(r, c)| {
                    format!(
                        "rank {r}: op#{} of {} elements, dtype#{}, root {}",
                        c[0], c[1], c[2], c[3]
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(CommError::Mismatch { op, detail });
        }
        Ok(())
    }
}
