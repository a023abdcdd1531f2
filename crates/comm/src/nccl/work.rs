//! [`NcclWork`]: the [`crate::Work`] of one NCCL launch (a collective or a group): the
//! completion event recorded after it on the communication stream, and the tensors it
//! reads and writes, kept alive until it completes.

use super::comm::drv;
use super::raw::RawComm;
use crate::error::{CommError, Result};
use crate::{PendingWork, Tensor};
use cudarc::driver::{CudaEvent, CudaStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) struct NcclWork {
    pub(super) op: &'static str,
    pub(super) seq: u64,
    pub(super) rank: usize,
    pub(super) event: Arc<CudaEvent>,
    pub(super) compute: Arc<CudaStream>,
    pub(super) raw: Arc<RawComm>,
    pub(super) timeout: Duration,
    /// The compute stream already waits for `event` (wait or synchronize ran).
    pub(super) ordered: bool,
    pub(super) _keep: Vec<Tensor>,
}

/// A work dropped without `wait` still orders the compute stream after the collective,
/// so the buffers it keeps are not freed (stream-ordered, on the compute stream) while
/// NCCL may still read or write them.
impl Drop for NcclWork {
    fn drop(&mut self) {
        if !self.ordered {
            let _ = self.compute.wait(&self.event);
        }
    }
}

impl PendingWork for NcclWork {
    fn wait(mut self: Box<Self>) -> Result<()> {
        self.compute
            .wait(&self.event)
            .map_err(drv("cuStreamWaitEvent (compute after a collective)"))?;
        self.ordered = true;
        Ok(())
    }

    fn synchronize(mut self: Box<Self>) -> Result<()> {
        let deadline = crate::deadline_after(self.timeout);
        loop {
            if self.event.try_is_complete().map_err(drv("cuEventQuery"))? {
                self.ordered = true; // complete: nothing left to order
                return Ok(());
            }
            self.raw.async_error()?;
            if Instant::now() > deadline {
                self.raw.abort();
                return Err(CommError::CollectiveTimeout {
                    op: self.op,
                    seq: self.seq,
                    rank: self.rank,
                    timeout: self.timeout,
                });
            }
            std::thread::yield_now();
        }
    }

    fn is_completed(&self) -> Result<bool> {
        self.event.try_is_complete().map_err(drv("cuEventQuery"))
    }
}
