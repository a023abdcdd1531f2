//! The seam DDP overlaps communication with: a model is a sequence of stages whose
//! backward can run one at a time, last stage first (candle has no per-parameter backward
//! hooks, see docs/ARCHITECTURE.md).
//!
//! Forward runs stage by stage; the input of every stage after the first is cut from the
//! graph (a fresh `Var`). Backward then runs the last stage from the loss, and each earlier
//! stage from `sum(out ⊙ upstream)`, where `upstream` is the gradient of the next stage's
//! input. After each stage its parameters' gradients are final and reported.
//!
//! A model may hand-write a stage instead ([`StagedModel::forward_saved`]): its forward runs
//! without an autograd graph and returns a [`SavedStage`] whose backward maps the output's
//! gradient to the input's gradient and the parameters' gradients directly.
//!
//! A model may checkpoint a stage's activations ([`StagedModel::checkpointed`]: PyTorch's
//! `torch.utils.checkpoint`, torchtitan's and Megatron's full recompute per block): its
//! forward keeps only the stage's input, and runs the stage's forward again right before
//! its backward. The recomputed forward is the same kernels on the same input, so the
//! gradients are the same where those kernels repeat their bits (checked: the CPU, and the
//! LM on GPUs at 128 tokens); the step holds one stage's activations at a time instead of
//! every stage's, for a forward more.
//!
//! [`forward`] records a [`Tape`]; [`Tape::backward`] runs it back; [`forward_backward`]
//! does both.

use crate::error::{ModelError, Result};
use crate::params::ParamSet;
use candle_core::{DType, Tensor, Var};

use crate::accum::Accumulator;
pub use crate::batch::Batch;

/// What a hand-written stage keeps from its forward for its backward.
pub trait SavedStage {
    /// From ∂loss/∂output (`None` for the last stage, whose output is the loss: ∂loss/∂out
    /// = 1): ∂loss/∂input and the gradients of the parameters, by index.
    fn backward(
        self: Box<Self>,
        upstream: Option<&Tensor>,
    ) -> Result<(Tensor, Vec<(usize, Tensor)>)>;

    /// [`Self::backward`] in a micro-batch of an accumulating step: a stage may sum a
    /// parameter's gradient into the step's sums itself (a GEMM's epilogue), for each
    /// parameter `sums.target(i)` offers, handing it to `sums.put` and returning the rest.
    /// The default sums nothing itself.
    fn backward_into(
        self: Box<Self>,
        upstream: Option<&Tensor>,
        sums: &mut Accumulator,
    ) -> Result<(Tensor, Vec<(usize, Tensor)>)> {
        let _ = sums;
        self.backward(upstream)
    }
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
    /// A hand-written forward of stage `s` (an input `x` without graph; `None` for stage
    /// 0, which reads `batch.input`) and what its backward needs; `None` (the default):
    /// stage `s` runs under autograd. Stage 0's backward returns an input gradient that is
    /// not used (its input is the token ids).
    fn forward_saved(
        &self,
        _s: usize,
        _x: Option<&Tensor>,
        _batch: &Batch,
    ) -> Result<Option<(Tensor, Box<dyn SavedStage>)>> {
        Ok(None)
    }

    /// Whether stage `s`'s activations are checkpointed: its forward keeps its input only,
    /// and runs again right before its backward (see the module's doc). `false` (the
    /// default): the forward keeps what the backward needs.
    fn checkpointed(&self, _s: usize) -> bool {
        false
    }

    /// Whether stage 0's parameters' gradients are sums of its output's gradient rows by
    /// token id (an embedding table that no other stage uses), so that
    /// [`Self::gradients_from_rows`] gives them from any tokens' rows: data parallelism can
    /// then gather every rank's few rows and ids instead of reducing the whole table's
    /// gradient (`ddp::rows`). `false` (the default): no such stage.
    fn rows_stage0(&self) -> bool {
        false
    }

    /// Stage 0's parameters' gradients, by index, from token ids `ids` (n,) u32 and the
    /// gradient rows `rows` (n, d) of stage 0's output at those tokens (where
    /// [`Self::rows_stage0`]).
    fn gradients_from_rows(&self, _ids: &Tensor, _rows: &Tensor) -> Result<Vec<(usize, Tensor)>> {
        Err(ModelError::Config(
            "this model's first stage does not give its gradients from rows".into(),
        ))
    }

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

/// Gradients by parameter index, filled in as stages finish; each in the dtype it was
/// computed in (f32, or bf16 where a bf16 model's hand-written block computed it on CUDA).
pub type Grads = Vec<Option<Tensor>>;

/// Each gradient in f32 (as PyTorch's `.grad` of f32 parameters accumulates).
/// Per parameter, the stage whose backward makes its gradient final: the first stage that
/// lists it (the last the backward reaches); `None` for a parameter no stage lists.
pub fn final_stages(model: &dyn StagedModel) -> Vec<Option<usize>> {
    let mut first = vec![None; model.params().len()];
    for s in (0..model.num_stages()).rev() {
        for i in model.stage_params(s) {
            first[i] = Some(s);
        }
    }
    first
}

/// One recorded stage.
enum Record {
    /// Under autograd: its cut input (none for stage 0) and its output.
    Auto {
        input: Option<Var>,
        out: Tensor,
    },
    Manual(Box<dyn SavedStage>),
    /// Checkpointed: its input only (none for stage 0); its forward runs again before its
    /// backward.
    Recompute(Option<Tensor>),
}

/// A staged forward, ready to run backward.
pub struct Tape<'m> {
    model: &'m dyn StagedModel,
    stages: Vec<Record>,
    loss: Tensor,
    /// The batch, where a checkpointed stage's forward runs again.
    batch: Batch,
}

/// Staged forward: checks the batch, runs every stage and records what backward needs.
pub fn forward<'m>(model: &'m dyn StagedModel, batch: &Batch) -> Result<Tape<'m>> {
    forward_with(model, batch, |_| Ok::<(), ModelError>(()))
}

/// [`forward`] with `before_stage(s)` run right before stage `s` is queued: the place to
/// make the compute stream wait for parameters still arriving (ZeRO's all-gathers).
pub fn forward_with<'m, E: From<ModelError>>(
    model: &'m dyn StagedModel,
    batch: &Batch,
    mut before_stage: impl FnMut(usize) -> std::result::Result<(), E>,
) -> std::result::Result<Tape<'m>, E> {
    model.check_batch(batch)?;
    let n = model.num_stages();
    let mut stages: Vec<Record> = Vec::with_capacity(n);
    let mut prev: Option<Tensor> = None;
    for s in 0..n {
        before_stage(s)?;
        let cut = prev.as_ref().map(Tensor::detach);
        let (out, record) = stage_forward(model, s, cut.as_ref(), batch)?;
        stages.push(match model.checkpointed(s) && s + 1 < n {
            // What the backward would need goes now; the output only goes on (cut from
            // any graph by the next stage).
            true => Record::Recompute(cut),
            false => record,
        });
        prev = Some(out);
    }
    let loss = prev
        .ok_or_else(|| ModelError::Config("a model needs at least one stage".into()))?
        .to_dtype(candle_core::DType::F32)
        .map_err(ModelError::from)?
        .detach();
    Ok(Tape {
        model,
        stages,
        loss,
        batch: batch.clone(),
    })
}

/// Stage `s`'s forward from `cut` (its input, cut from any graph; none for stage 0): its
/// output and what its backward needs.
fn stage_forward(
    model: &dyn StagedModel,
    s: usize,
    cut: Option<&Tensor>,
    batch: &Batch,
) -> Result<(Tensor, Record)> {
    if let Some((out, saved)) = model.forward_saved(s, cut, batch)? {
        return Ok((out, Record::Manual(saved)));
    }
    let input = match cut {
        None => None,
        Some(p) => Some(Var::from_tensor(p)?),
    };
    let out = model.forward_stage(s, input.as_ref().map(|v| v.as_tensor()), batch)?;
    Ok((out.clone(), Record::Auto { input, out }))
}

impl Tape<'_> {
    /// The loss (an f32 scalar, detached: reading it makes the host wait for the device).
    pub fn loss(&self) -> &Tensor {
        &self.loss
    }

    /// Backward, last stage first. `on_stage(s, grads)` runs right after stage `s`'s
    /// backward, when the gradients of `stage_params(s)` are final; it may take them (a
    /// reducer that has copied a gradient into its bucket frees it that way). Its first
    /// error ends the backward and is returned as is.
    pub fn backward<E: From<ModelError>>(
        self,
        on_stage: impl FnMut(usize, &mut Grads) -> std::result::Result<(), E>,
    ) -> std::result::Result<Grads, E> {
        Ok(self.backward_with(None, 0, on_stage)?.0)
    }

    /// [`Self::backward`] of the stages from the last down to `first` only: the gradients
    /// and ∂loss/∂(the output of stage `first - 1`), whose backward is left to the caller
    /// (`ddp::rows` takes stage 0's gradients from every rank's rows of it).
    pub fn backward_to<E: From<ModelError>>(
        self,
        first: usize,
        on_stage: impl FnMut(usize, &mut Grads) -> std::result::Result<(), E>,
    ) -> std::result::Result<(Grads, Option<Tensor>), E> {
        self.backward_with(None, first, on_stage)
    }

    /// [`Self::backward`] as one micro-batch of an accumulating step: stages may sum their
    /// gradients into `sums` as they compute them ([`SavedStage::backward_into`]), the rest
    /// are added after (with `scale`, 1/k on the last of k). `on_stage` sees only the
    /// gradients the stages returned.
    pub fn backward_into<E: From<ModelError>>(
        self,
        sums: &mut Accumulator,
        scale: Option<f64>,
        on_stage: impl FnMut(usize, &mut Grads) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        sums.lend(scale);
        let (grads, _) = self.backward_with(Some(&mut *sums), 0, on_stage)?;
        Ok(sums.add(grads, scale)?)
    }

    fn backward_with<E: From<ModelError>>(
        self,
        mut sums: Option<&mut Accumulator>,
        first: usize,
        mut on_stage: impl FnMut(usize, &mut Grads) -> std::result::Result<(), E>,
    ) -> std::result::Result<(Grads, Option<Tensor>), E> {
        let model = self.model;
        let mut grads: Grads = vec![None; model.params().len()];
        let mut upstream: Option<Tensor> = None;
        let mut stages = self.stages;
        for s in (first.min(stages.len())..stages.len()).rev() {
            let record = stages.pop().expect("one record per stage");
            stage_backward(
                model,
                &self.batch,
                s,
                record,
                &mut grads,
                &mut upstream,
                sums.as_deref_mut(),
            )?;
            on_stage(s, &mut grads)?;
        }
        Ok((grads, upstream))
    }
}

/// Runs stage `s`'s backward from `upstream` (none for the last stage), adding its
/// parameters' gradients to `grads` and leaving its input's gradient in `upstream`; a
/// checkpointed stage's forward first.
fn stage_backward(
    model: &dyn StagedModel,
    batch: &Batch,
    s: usize,
    record: Record,
    grads: &mut Grads,
    upstream: &mut Option<Tensor>,
    sums: Option<&mut Accumulator>,
) -> Result<()> {
    match record {
        Record::Recompute(cut) => {
            let (_, record) = stage_forward(model, s, cut.as_ref(), batch)?;
            stage_backward(model, batch, s, record, grads, upstream, sums)?;
        }
        Record::Manual(saved) => {
            let g = upstream.take();
            let (dx, pg) = match sums {
                Some(sums) => saved.backward_into(g.as_ref(), sums)?,
                None => saved.backward(g.as_ref())?,
            };
            for (i, g) in pg {
                accumulate(grads, i, g)?;
            }
            *upstream = Some(dx);
        }
        Record::Auto { input, out } => {
            let store = match upstream.take() {
                None => out.backward()?,
                Some(g) => (out * g)?.sum_all()?.backward()?,
            };
            for i in model.stage_params(s) {
                if let Some(g) = store.get(model.params().var(i).as_tensor()) {
                    accumulate(grads, i, g.clone())?;
                }
            }
            if let Some(input) = input {
                *upstream = Some(store.get(input.as_tensor()).cloned().ok_or_else(|| {
                    ModelError::Config(format!("stage {s} does not use its input"))
                })?);
            }
        }
    }
    Ok(())
}

fn accumulate(grads: &mut Grads, i: usize, g: Tensor) -> Result<()> {
    grads[i] = Some(match grads[i].take() {
        Some(a) if a.dtype() != g.dtype() => (a.to_dtype(DType::F32)? + g.to_dtype(DType::F32)?)?,
        Some(a) => (a + g)?,
        None => g,
    });
    Ok(())
}

/// One micro-batch of an accumulating step ([`forward`] then [`Tape::backward_into`]):
/// its gradients summed into `sums` (times `scale`, 1/k on the last of k); returns the
/// loss as [`forward_backward`] does.
pub fn forward_backward_into(
    model: &dyn StagedModel,
    batch: &Batch,
    sums: &mut Accumulator,
    scale: Option<f64>,
    on_stage: impl FnMut(usize, &mut Grads) -> Result<()>,
) -> Result<Tensor> {
    let tape = forward(model, batch)?;
    let loss = tape.loss().clone();
    tape.backward_into(sums, scale, on_stage)?;
    Ok(loss)
}

/// Staged forward and backward ([`forward`] then [`Tape::backward`]). Returns the loss (an
/// f32 scalar tensor, detached: reading it is the caller's choice, so the host does not
/// wait for the device here) and all gradients.
pub fn forward_backward(
    model: &dyn StagedModel,
    batch: &Batch,
    on_stage: impl FnMut(usize, &mut Grads) -> Result<()>,
) -> Result<(Tensor, Grads)> {
    let tape = forward(model, batch)?;
    let loss = tape.loss().clone();
    Ok((loss, tape.backward(on_stage)?))
}
