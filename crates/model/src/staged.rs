//! The seam DDP overlaps communication with: a model is a sequence of stages whose
//! backward can run one at a time, last stage first (candle has no per-parameter backward
//! hooks, see docs/ARCHITECTURE.md).
//!
//! Forward runs stage by stage; the input of every stage after the first is cut from the
//! graph (a fresh `Var`). Backward then runs the last stage from the loss, and each earlier
//! stage from `sum(out ⊙ upstream)`, where `upstream` is the gradient of the next stage's
//! input. After each stage its parameters' gradients are final and reported.

use crate::error::{ModelError, Result};
use crate::params::ParamSet;
use candle_core::{Tensor, Var};

/// One batch: the model's input (token ids or features) and the targets of the loss.
pub struct Batch {
    pub input: Tensor,
    pub targets: Tensor,
}

/// A model split into stages.
pub trait StagedModel {
    fn params(&self) -> &ParamSet;
    fn num_stages(&self) -> usize;
    /// Indices (into `params()`) of the parameters stage `s` uses.
    fn stage_params(&self, s: usize) -> Vec<usize>;
    /// Stage 0 reads `batch.input` (`x` is ignored); the last stage returns the scalar loss.
    fn forward_stage(&self, s: usize, x: Option<&Tensor>, batch: &Batch) -> Result<Tensor>;
    /// Checks the batch before any compute (ids in range, lengths), naming bad values.
    fn check_batch(&self, batch: &Batch) -> Result<()>;

    /// The whole forward in one graph; returns the loss.
    fn loss(&self, batch: &Batch) -> Result<Tensor> {
        self.check_batch(batch)?;
        let mut x: Option<Tensor> = None;
        for s in 0..self.num_stages() {
            x = Some(self.forward_stage(s, x.as_ref(), batch)?);
        }
        x.ok_or_else(|| ModelError::Config("a model needs at least one stage".into()))
    }
}

/// Gradients by parameter index, filled in as stages finish.
pub type Grads = Vec<Option<Tensor>>;

/// Staged forward and backward. `on_stage(s, grads)` runs right after stage `s`'s
/// backward, when the gradients of `stage_params(s)` are final. Returns the loss (an f32
/// scalar tensor, detached: reading it is the caller's choice, so the host does not wait
/// for the device here) and all gradients.
pub fn forward_backward(
    model: &dyn StagedModel,
    batch: &Batch,
    mut on_stage: impl FnMut(usize, &Grads) -> Result<()>,
) -> Result<(Tensor, Grads)> {
    model.check_batch(batch)?;
    let n = model.num_stages();
    let mut cut_inputs: Vec<Option<Var>> = Vec::with_capacity(n);
    let mut outputs: Vec<Tensor> = Vec::with_capacity(n);
    for s in 0..n {
        let input = match outputs.last() {
            None => None,
            Some(prev) => Some(Var::from_tensor(&prev.detach())?),
        };
        let out = model.forward_stage(s, input.as_ref().map(|v| v.as_tensor()), batch)?;
        cut_inputs.push(input);
        outputs.push(out);
    }
    let loss = outputs
        .last()
        .expect("at least one stage")
        .to_dtype(candle_core::DType::F32)?
        .detach();
    let mut grads: Grads = vec![None; model.params().len()];
    let mut upstream: Option<Tensor> = None;
    for s in (0..n).rev() {
        let out = outputs.pop().expect("one output per stage");
        let store = match upstream.take() {
            None => out.backward()?,
            Some(g) => (out * g)?.sum_all()?.backward()?,
        };
        for i in model.stage_params(s) {
            let g = store.get(model.params().var(i).as_tensor()).cloned();
            grads[i] = match (grads[i].take(), g) {
                (Some(a), Some(b)) => Some((a + b)?),
                (a, b) => a.or(b),
            };
        }
        if let Some(Some(input)) = cut_inputs.pop() {
            upstream =
                Some(store.get(input.as_tensor()).cloned().ok_or_else(|| {
                    ModelError::Config(format!("stage {s} does not use its input"))
                })?);
        }
        drop(store);
        on_stage(s, &grads)?;
    }
    Ok((loss, grads))
}
