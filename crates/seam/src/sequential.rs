//! A staged model made of candle-nn `Module`s (or closures `Fn(&Tensor) -> Result<Tensor>`),
//! one stage each, with the loss as a closure outside the model. Each stage's parameters
//! are those of the [`ParamSet`] whose names start with its prefix (`l1` owns `l1.weight`
//! and `l1.bias`); a parameter that matches no stage, or two, is an error naming it.
//!
//! ```
//! # fn main() -> seam::Result<()> {
//! use candle_core::{DType, Device, Module, Tensor};
//! use candle_nn::{linear, VarBuilder, VarMap};
//! let (varmap, dev) = (VarMap::new(), Device::Cpu);
//! let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
//! let (l1, l2) = (linear(4, 8, vb.pp("l1"))?, linear(8, 3, vb.pp("l2"))?);
//! let model = seam::Sequential::builder(seam::ParamSet::from_varmap(&varmap)?)
//!     .stage("l1", move |x: &Tensor| l1.forward(x)?.gelu())
//!     .stage("l2", l2)
//!     .loss(|logits, b| candle_nn::loss::cross_entropy(logits, &b.targets))?;
//! let logits = model.output(&Tensor::zeros((2, 4), DType::F32, &dev)?)?; // evaluation
//! assert_eq!(logits.dims(), [2, 3]);
//! # Ok(()) }
//! ```

use crate::error::{ModelError, Result};
use crate::params::ParamSet;
use crate::staged::{Batch, StagedModel};
use candle_core::{Module, Tensor};

/// The loss of the last stage's output on a batch (a scalar).
pub type LossFn = Box<dyn Fn(&Tensor, &Batch) -> candle_core::Result<Tensor> + Send + Sync>;

/// A stage: its parameters' prefix, its module, and whether its activations are
/// checkpointed ([`SequentialBuilder::checkpointed_stage`]).
type Stage = (String, Box<dyn Module + Send + Sync>, bool);

/// A model of stages in sequence; build it with [`Sequential::builder`].
pub struct Sequential {
    params: ParamSet,
    stages: Vec<Stage>,
    stage_params: Vec<Vec<usize>>,
    loss: LossFn,
}

/// Collects the stages; [`SequentialBuilder::loss`] finishes the model.
pub struct SequentialBuilder {
    params: ParamSet,
    stages: Vec<Stage>,
}

impl Sequential {
    pub fn builder(params: ParamSet) -> SequentialBuilder {
        SequentialBuilder {
            params,
            stages: Vec::new(),
        }
    }

    /// The model's output for `input` (every stage, no loss): for evaluation.
    pub fn output(&self, input: &Tensor) -> Result<Tensor> {
        let mut x = input.clone();
        for (_, m, _) in &self.stages {
            x = m.forward(&x)?;
        }
        Ok(x)
    }

    /// The loss closure on an output and a batch (e.g. the loss of [`Self::output`]).
    pub fn loss_of(&self, output: &Tensor, batch: &Batch) -> Result<Tensor> {
        Ok((self.loss)(output, batch)?)
    }
}

impl SequentialBuilder {
    /// Appends a stage owning the parameters named `prefix` or `prefix.…`; an empty
    /// prefix: a stage without parameters (an activation, a reshape).
    pub fn stage(mut self, prefix: &str, module: impl Module + Send + Sync + 'static) -> Self {
        self.stages
            .push((prefix.to_string(), Box::new(module), false));
        self
    }

    /// [`Self::stage`], its activations checkpointed (`torch.utils.checkpoint`): its
    /// forward keeps only its input, and runs again right before its backward
    /// ([`StagedModel::checkpointed`]); the same gradients, for a forward more. The last
    /// stage, whose output is the loss, keeps its activations.
    pub fn checkpointed_stage(
        self,
        prefix: &str,
        module: impl Module + Send + Sync + 'static,
    ) -> Self {
        let mut b = self.stage(prefix, module);
        if let Some(stage) = b.stages.last_mut() {
            stage.2 = true;
        }
        b
    }

    /// Sets the loss and finishes the model; fails naming a parameter that matches no
    /// stage's prefix or two, or a model without stages.
    pub fn loss(
        self,
        loss: impl Fn(&Tensor, &Batch) -> candle_core::Result<Tensor> + Send + Sync + 'static,
    ) -> Result<Sequential> {
        if self.stages.is_empty() {
            return Err(ModelError::Config(
                "a Sequential needs at least one stage".into(),
            ));
        }
        let owns = |prefix: &str, name: &str| {
            !prefix.is_empty()
                && name
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        };
        let mut stage_params = vec![Vec::new(); self.stages.len()];
        for (i, name) in self.params.names().iter().enumerate() {
            let hits: Vec<usize> = (0..self.stages.len())
                .filter(|&s| owns(&self.stages[s].0, name))
                .collect();
            match hits[..] {
                [s] => stage_params[s].push(i),
                [] => {
                    let prefixes: Vec<&str> = self.stages.iter().map(|s| s.0.as_str()).collect();
                    return Err(ModelError::Config(format!(
                        "parameter {name} matches no stage's prefix (stages: {prefixes:?})"
                    )));
                }
                [a, b, ..] => {
                    return Err(ModelError::Config(format!(
                        "parameter {name} matches the prefixes of stage {a} ({:?}) and stage {b} ({:?})",
                        self.stages[a].0, self.stages[b].0
                    )))
                }
            }
        }
        Ok(Sequential {
            params: self.params,
            stages: self.stages,
            stage_params,
            loss: Box::new(loss),
        })
    }
}

impl StagedModel for Sequential {
    fn params(&self) -> &ParamSet {
        &self.params
    }
    fn num_stages(&self) -> usize {
        self.stages.len()
    }
    fn stage_params(&self, s: usize) -> Vec<usize> {
        self.stage_params[s].clone()
    }
    fn forward_stage(&self, s: usize, x: Option<&Tensor>, batch: &Batch) -> Result<Tensor> {
        let input = match (s, x) {
            (0, _) => &batch.input,
            (_, Some(x)) => x,
            (_, None) => {
                return Err(ModelError::Input(format!("stage {s} got no input")));
            }
        };
        let out = self.stages[s].1.forward(input)?;
        if s + 1 < self.stages.len() {
            return Ok(out);
        }
        let loss = (self.loss)(&out, batch)?;
        if loss.rank() != 0 {
            return Err(ModelError::Input(format!(
                "the loss closure returned shape {:?}; it must return a scalar",
                loss.dims()
            )));
        }
        Ok(loss)
    }
    fn check_batch(&self, _batch: &Batch) -> Result<()> {
        Ok(())
    }
    fn checkpointed(&self, s: usize) -> bool {
        self.stages.get(s).is_some_and(|stage| stage.2)
    }
}
