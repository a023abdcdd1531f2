//! [`Communicator`] for [`NcclComm`]: each call checks its buffers and hands them to
//! `comm.rs`'s launch paths, `cast.rs` (mixed-precision gathers) or `window.rs` (gather
//! buffers).

use super::comm::{capturing, drv, NcclComm};
use super::launch_op::Call;
use super::watchdog::Pending;
use crate::error::{CommError, Result};
use crate::validate::check_root;
use crate::{Communicator, ReduceOp, Tensor, Work};
use candle_core::{DType, Device};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Communicator for NcclComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world
    }
    fn backend(&self) -> &'static str {
        "nccl"
    }

    fn all_reduce_async(&self, buf: &Tensor, op: ReduceOp) -> Result<Work> {
        self.all_reduce_list("all_reduce", 1, &[buf], op)
    }

    fn reduce_scatter_async(&self, input: &Tensor, output: &Tensor, op: ReduceOp) -> Result<Work> {
        self.reduce_scatter_list(
            "reduce_scatter",
            2,
            &[(input, output)],
            op,
            (false, None, None, false),
        )
    }

    fn all_gather_async(&self, input: &Tensor, output: &Tensor) -> Result<Work> {
        self.all_gather_coalesced_async(&[(input.clone(), output.clone())])
    }

    fn all_gather_coalesced_async(&self, pairs: &[(Tensor, Tensor)]) -> Result<Work> {
        let name = match pairs.len() {
            1 => "all_gather",
            _ => "all_gather_coalesced",
        };
        let calls = self.gather_calls(name, pairs, true)?;
        self.launch_all(name, &calls)
    }

    fn all_gather_cast_coalesced_async(&self, pairs: &[(Tensor, Tensor)]) -> Result<Work> {
        self.gather_cast(pairs)
    }

    fn gather_buffer_by(
        &self,
        len: usize,
        dtype: DType,
        device: &Device,
        by: crate::Gatherer,
    ) -> Result<Tensor> {
        self.window_buffer(len, dtype, device, by)
    }

    fn broadcast_async(&self, buf: &Tensor, root: usize) -> Result<Work> {
        check_root("broadcast", self.rank, self.world, root)?;
        self.check_cuda("broadcast", buf)?;
        self.agree("broadcast", 4, buf.elem_count(), buf.dtype(), root)?;
        self.launch("broadcast", Call::Broadcast(root), buf, None)
    }

    fn all_reduce_coalesced_async(&self, bufs: &[Tensor], op: ReduceOp) -> Result<Work> {
        let bufs: Vec<&Tensor> = bufs.iter().collect();
        self.all_reduce_list("all_reduce_coalesced", 5, &bufs, op)
    }

    fn reduce_scatter_coalesced_async(
        &self,
        pairs: &[(Tensor, Tensor)],
        op: ReduceOp,
    ) -> Result<Work> {
        let pairs: Vec<(&Tensor, &Tensor)> = pairs.iter().map(|(i, o)| (i, o)).collect();
        self.reduce_scatter_list(
            "reduce_scatter_coalesced",
            6,
            &pairs,
            op,
            (false, None, None, false),
        )
    }

    fn reduce_scatter_deferred_async(
        &self,
        pairs: &[(Tensor, Tensor)],
        op: ReduceOp,
    ) -> Result<Work> {
        self.reduce_scatter_deferred_with(pairs, op, &crate::Deferred::default())
    }

    fn reduce_scatter_deferred_with(
        &self,
        pairs: &[(Tensor, Tensor)],
        op: ReduceOp,
        with: &crate::Deferred,
    ) -> Result<Work> {
        let name = "reduce_scatter_deferred_with";
        let sums = crate::deferred::sums(name, self, pairs, with)?;
        if let Some(t) = &with.norm {
            crate::deferred::check_norm(name, t)?;
            self.check_cuda(name, t)?;
        }
        let refs: Vec<(&Tensor, &Tensor)> = sums.iter().map(|(i, o)| (i, o)).collect();
        if !with.gather {
            let how = (true, None, with.norm.as_ref(), with.beside);
            return self.reduce_scatter_list(name, 6, &refs, op, how);
        }
        // With a gather, the stream it goes on waits for the sums (chained): its own
        // (`super::ce_lane`), so that the next reduce-scatter need not wait for these adds,
        // or the communication stream, where the all-gathers then queue behind them.
        let gathers = crate::deferred::gathers(sums.clone(), pairs);
        let lane = self.gather_lane_for(name, &refs, op, &gathers)?;
        let chain = lane.as_ref().map_or(&*self.stream, |l| &*l.0.stream);
        let how = (true, Some(chain), with.norm.as_ref(), with.beside);
        let work = self.reduce_scatter_list(name, 6, &refs, op, how)?;
        let whole = match lane {
            Some(l) => self.gather_on_lane("all_gather_coalesced", &gathers, l)?,
            None => self.all_gather_coalesced_async(&gathers)?,
        };
        Ok(Work::all(vec![work, whole]))
    }

    fn norm_with_sums(&self, pairs: &[(Tensor, Tensor)]) -> bool {
        let refs: Vec<(&Tensor, &Tensor)> = pairs.iter().map(|(i, o)| (i, o)).collect();
        (self.scatter_calls("norm_with_sums", &refs, ReduceOp::Avg))
            .is_ok_and(|calls| self.norm_in_adds(&calls))
    }

    fn watch_queued(&self, what: &'static str) -> Result<()> {
        if capturing(&self.compute) {
            return Err(CommError::invalid(
                "watch_queued",
                self.rank,
                "called inside a CUDA graph capture (call it after the replay)",
            ));
        }
        let event = Arc::new(
            self.compute
                .record_event(None)
                .map_err(drv("cuEventRecord"))?,
        );
        self.watchdog.push(Pending {
            seq: self.seq.load(Ordering::Relaxed),
            op: what,
            event,
            deadline: crate::deadline_after(self.opts.timeout),
        });
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        // Like PyTorch: an all-reduce of one element, then block the host on it.
        let t = Tensor::zeros(1, DType::F32, self.device())?;
        self.all_reduce_async(&t, ReduceOp::Sum)?.synchronize()
    }
}
