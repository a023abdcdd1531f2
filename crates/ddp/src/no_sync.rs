//! [`Ddp::forward_backward_no_sync`]: a micro-batch whose gradients are summed locally, for
//! the next synchronised backward to reduce (PyTorch DDP's `no_sync`).

use crate::error::Result;
use crate::reducer::Ddp;
use candle_core::Tensor;
use seam::{Batch, StagedModel};

impl Ddp {
    /// Forward and backward without communication: gradients are summed locally and
    /// reduced by the next [`Self::forward_backward`] (PyTorch's `no_sync`), which
    /// averages them over the micro-batches unless [`crate::DdpOptions::sum_micro_batches`].
    pub fn forward_backward_no_sync(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
    ) -> Result<Tensor> {
        self.forward_backward_no_sync_with(model, batch, |_| Ok(()))
    }

    /// [`Self::forward_backward_no_sync`] with `before_stage(s)` right before forward stage
    /// `s` and the stage hook ([`Self::set_stage_hook`]) after each stage's backward, as in
    /// a synchronised micro-batch (FSDP gathers its stages' parameters there).
    pub fn forward_backward_no_sync_with(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
        before_stage: impl FnMut(usize) -> Result<()>,
    ) -> Result<Tensor> {
        self.expect_idle("forward_backward_no_sync")?;
        // Accumulated in f32 (as PyTorch's .grad of f32 parameters), whatever the compute
        // dtype, in place (seam::accum: in the weight-gradient GEMMs where the model sums
        // there, else one pass per micro-batch).
        let tape = seam::forward_with(model, batch, before_stage)?;
        let loss = tape.loss().clone();
        let (sums, hook) = (&mut self.accumulated, &mut self.stage_hook);
        tape.backward_into(sums, None, |s, _| -> Result<()> {
            if let Some(h) = hook.as_mut() {
                h(s)?;
            }
            Ok(())
        })?;
        self.micro_batches += 1;
        Ok(loss)
    }
}
