//! The seeds' ToyModel: Linear(in, 10, no bias) → ReLU → LayerNorm(10) → Linear(10, out,
//! no bias), with a cross-entropy loss. Two stages, for DDP tests.

use crate::error::{ModelError, Result};
use crate::layers::{layer_norm, linear};
use crate::params::{rng, Init, ParamSet};
use crate::staged::{Batch, StagedModel};
use candle_core::{DType, Device, Tensor};

pub struct ToyModel {
    params: ParamSet,
    inputs: usize,
    outputs: usize,
}

impl ToyModel {
    pub fn new(inputs: usize, outputs: usize, seed: u64, device: &Device) -> Result<Self> {
        if inputs == 0 || outputs == 0 {
            return Err(ModelError::Config(format!(
                "ToyModel needs positive sizes, got in={inputs} out={outputs}"
            )));
        }
        let mut r = rng(seed);
        let mut p = ParamSet::new();
        p.add(
            "fc1",
            &[10, inputs],
            Init::Linear { fan_in: inputs },
            &mut r,
            device,
        )?;
        p.add("ln.weight", &[10], Init::Const(1.0), &mut r, device)?;
        p.add("ln.bias", &[10], Init::Const(0.0), &mut r, device)?;
        p.add(
            "fc2",
            &[outputs, 10],
            Init::Linear { fan_in: 10 },
            &mut r,
            device,
        )?;
        Ok(Self {
            params: p,
            inputs,
            outputs,
        })
    }
}

impl StagedModel for ToyModel {
    fn params(&self) -> &ParamSet {
        &self.params
    }
    fn num_stages(&self) -> usize {
        2
    }
    fn stage_params(&self, s: usize) -> Vec<usize> {
        if s == 0 {
            vec![0, 1, 2]
        } else {
            vec![3]
        }
    }
    fn check_batch(&self, b: &Batch) -> Result<()> {
        let (n, f) = b.input.dims2().map_err(|_| {
            ModelError::Input(format!(
                "ToyModel input must be (batch, {}), got {:?}",
                self.inputs,
                b.input.dims()
            ))
        })?;
        if f != self.inputs {
            return Err(ModelError::Input(format!(
                "ToyModel input has {f} features, expected {}",
                self.inputs
            )));
        }
        if b.targets.dims() != [n] || b.targets.dtype() != DType::U32 {
            return Err(ModelError::Input(format!(
                "ToyModel targets must be u32 of shape ({n},), got {:?} {:?}",
                b.targets.dtype(),
                b.targets.dims()
            )));
        }
        let max = b.targets.max(0)?.to_scalar::<u32>()?;
        if max as usize >= self.outputs {
            return Err(ModelError::Input(format!(
                "target class {max} is out of range for {} outputs",
                self.outputs
            )));
        }
        Ok(())
    }
    fn forward_stage(&self, s: usize, x: Option<&Tensor>, b: &Batch) -> Result<Tensor> {
        let p = |i: usize| self.params.var(i).as_tensor();
        if s == 0 {
            let h = linear(&b.input, p(0))?.relu()?;
            return layer_norm(&h, p(1), p(2), 1e-5);
        }
        let x = x.ok_or_else(|| ModelError::Config("stage 1 needs an input".into()))?;
        Ok(candle_nn::loss::cross_entropy(
            &linear(x, p(3))?,
            &b.targets,
        )?)
    }
}
