//! Validation through the step's model: each batch's forward and loss, summed on the
//! device and read once at the end; on CUDA the forward is captured as a CUDA graph after
//! one eager batch and replayed for every other (the batches copied into fixed tensors,
//! as the step's are).

use crate::slots::Slots;
use crate::{Graph, TrainStep};
use anyhow::{bail, Result};
use candle_core::{DType, Tensor};
use seam::{Batch, StagedModel};

pub(crate) struct Eval {
    slots: Slots,
    graph: Graph,
}

/// One batch's loss, f32, shape (1); the strategy's work before each stage (FSDP's gathers).
fn loss(model: &dyn StagedModel, b: &Batch, s: &mut dyn crate::Strategy) -> Result<Tensor> {
    let tape = seam::forward_with(model, b, |k| s.before_stage(k))?;
    Ok(tape.loss().to_dtype(DType::F32)?.reshape(1)?)
}

impl TrainStep {
    /// The mean loss of `model` over `batches` (this rank's; host tensors are best; every
    /// batch of one shape). No gradient is taken and the optimizer is not touched; the
    /// step's pending values stay pending. The parameters are completed first (ZeRO-1's
    /// all-gathers ahead).
    pub fn eval_loss(&mut self, model: &dyn StagedModel, batches: &[Batch]) -> Result<f64> {
        if batches.is_empty() {
            bail!("validation needs at least one batch");
        }
        self.core.settle()?;
        let device = self.device.clone();
        if self.eval.is_none() {
            let graph = match &self.no_graph {
                Some(why) => Graph::Off(why.clone()),
                None => Graph::Wanted,
            };
            self.eval = Some(Eval {
                slots: Slots::new(&device)?,
                graph,
            });
        }
        let e = self.eval.as_mut().expect("made above");
        let mut sum: Option<Tensor> = None;
        for b in batches {
            model.check_batch(b)?;
            let on = matches!(e.graph, Graph::On(_));
            let fixed = e.slots.upload(std::slice::from_ref(b), on, &[])?;
            let l = match &e.graph {
                Graph::On(c) => {
                    c.replay()?;
                    // Added before the next replay rewrites it (stream order).
                    c.outputs().clone()
                }
                _ => loss(model, &fixed[0], self.core.strategy.as_mut())?,
            };
            sum = Some(match sum {
                None => l.copy()?,
                Some(s) => (s + l)?,
            });
            if matches!(e.graph, Graph::Wanted) {
                let s = self.core.strategy.as_mut();
                let captured = seam::graph::capture(&device, || {
                    loss(model, &fixed[0], s).map_err(|e| seam::ModelError::Input(format!("{e:#}")))
                });
                e.graph = match captured {
                    Ok(c) => Graph::On(c),
                    Err(why) => Graph::Off(format!("capture failed: {why}")),
                };
            }
        }
        let total = sum.expect("at least one batch").to_vec1::<f32>()?[0] as f64;
        // The graph pool keeps the physical memory of the validation graph's forward (its
        // activations, as large as a training step's) after the replay. A captured training
        // step reuses it; an eager one (the warm-up before the capture, or every step where
        // none is captured) allocates from the stream-ordered pool beside it, and ran out of
        // memory for it (the 6.7B at 8 × 1024 tokens on one H200: call 270, with it kept).
        // So it goes back to the device; the next validation maps it again.
        if self.eval_graph_on() && !matches!(self.graph, Graph::On(_)) {
            seam::graph::trim(&device);
        }
        Ok(total / batches.len() as f64)
    }

    /// Whether validation runs as a CUDA graph, or why not (`None` before the first).
    pub fn eval_graph_status(&self) -> Option<std::result::Result<(), String>> {
        self.eval.as_ref().map(|e| e.graph.status())
    }

    /// Whether a validation graph holds memory (trimmed on drop).
    pub(crate) fn eval_graph_on(&self) -> bool {
        self.eval
            .as_ref()
            .is_some_and(|e| matches!(e.graph, Graph::On(_)))
    }
}
