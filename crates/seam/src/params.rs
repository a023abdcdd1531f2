//! Named parameters in a fixed order, and their seeded initialisation (PyTorch's defaults:
//! Linear U(±1/√fan_in), Embedding N(0, 1), norms ones / zeros; the models may
//! choose otherwise per parameter). Values are drawn on the
//! host from a seeded RNG, one tensor at a time, so every device and rank gets the same
//! weights for the same seed.

use crate::error::Result;
use candle_core::{DType, Device, Tensor, Var};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

/// How a parameter is initialised.
#[derive(Debug, Clone, Copy)]
pub enum Init {
    /// U(-1/√fan_in, 1/√fan_in), nn.Linear's default (kaiming_uniform with a = √5).
    Linear {
        fan_in: usize,
    },
    /// N(0, std²); nn.Embedding's default is std = 1.
    Normal {
        std: f32,
    },
    Const(f32),
}

/// The model's parameters, in the order the model declares them (DDP buckets follow the
/// reverse of this order).
pub struct ParamSet {
    names: Vec<String>,
    vars: Vec<Var>,
    /// bf16 copies AdamW writes for a bf16 forward (off unless enabled).
    bf16: crate::shadow::Bf16Shadows,
}

impl ParamSet {
    pub fn new() -> Self {
        Self {
            names: Vec::new(),
            vars: Vec::new(),
            bf16: Default::default(),
        }
    }

    /// Adds a parameter drawn from `init` with `rng`; returns its index.
    pub fn add(
        &mut self,
        name: impl Into<String>,
        shape: &[usize],
        init: Init,
        rng: &mut StdRng,
        device: &Device,
    ) -> Result<usize> {
        let n: usize = shape.iter().product();
        let host: Vec<f32> = match init {
            Init::Linear { fan_in } => {
                let b = 1.0 / (fan_in as f32).sqrt();
                (0..n).map(|_| rng.random_range(-b..b)).collect()
            }
            Init::Normal { std } => (0..n)
                .map(|_| std * <StandardNormal as Distribution<f32>>::sample(&StandardNormal, rng))
                .collect(),
            Init::Const(c) => vec![c; n],
        };
        let t = Tensor::from_vec(host, shape, device)?;
        self.names.push(name.into());
        self.vars.push(Var::from_tensor(&t)?);
        Ok(self.vars.len() - 1)
    }

    pub fn len(&self) -> usize {
        self.vars.len()
    }
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }
    pub fn vars(&self) -> &[Var] {
        &self.vars
    }
    pub fn names(&self) -> &[String] {
        &self.names
    }
    pub fn var(&self, i: usize) -> &Var {
        &self.vars[i]
    }
    /// The bf16 copies of the parameters ([`crate::shadow`]).
    pub fn bf16_shadows(&self) -> &crate::shadow::Bf16Shadows {
        &self.bf16
    }
    /// Lets [`crate::AdamW::step_params`] write bf16 copies (a bf16 model on CUDA).
    pub fn enable_bf16_shadows(&mut self, on: bool) {
        self.bf16.set_enabled(on);
    }
    /// Declares the parameters the model's forward reads only through their bf16 copies
    /// ([`crate::shadow::Bf16Shadows::set_copy_only`]).
    pub fn set_bf16_copy_only(&mut self, on: Vec<bool>) {
        self.bf16.set_copy_only(on);
    }
    /// Total number of elements.
    pub fn numel(&self) -> usize {
        self.vars.iter().map(|v| v.elem_count()).sum()
    }

    /// Copies every value from `other` (same names and shapes), e.g. to start two models
    /// from identical weights.
    pub fn copy_from(&self, other: &ParamSet) -> Result<()> {
        self.bf16.invalidate();
        for (i, (a, b)) in self.vars.iter().zip(&other.vars).enumerate() {
            if a.dims() != b.dims() {
                return Err(crate::ModelError::Input(format!(
                    "parameter {} has shape {:?}, the source has {:?}",
                    self.names[i],
                    a.dims(),
                    b.dims()
                )));
            }
            a.set(&b.as_tensor().to_device(a.device())?.to_dtype(DType::F32)?)?;
        }
        Ok(())
    }
}

impl Default for ParamSet {
    fn default() -> Self {
        Self::new()
    }
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

impl ParamSet {
    /// Appends an existing `Var` (shared, not copied: a candle-nn layer holding it trains
    /// with it) under `name`; returns its index. A name already present is an error.
    pub fn push_var(&mut self, name: impl Into<String>, var: Var) -> Result<usize> {
        let name = name.into();
        if self.names.contains(&name) {
            return Err(crate::ModelError::Input(format!(
                "parameter {name} is listed twice"
            )));
        }
        self.names.push(name);
        self.vars.push(var);
        Ok(self.vars.len() - 1)
    }
}
