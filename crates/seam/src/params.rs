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
    /// Per parameter released ([`Self::release`]): its shape; its `Var` is a placeholder.
    released: Vec<Option<candle_core::Shape>>,
}

impl ParamSet {
    pub fn new() -> Self {
        Self {
            names: Vec::new(),
            vars: Vec::new(),
            bf16: Default::default(),
            released: Vec::new(),
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
    /// Total number of elements (released parameters counted whole).
    pub fn numel(&self) -> usize {
        (0..self.len()).map(|i| self.shape(i).elem_count()).sum()
    }

    /// Parameter `i`'s shape, released or not.
    pub fn shape(&self, i: usize) -> &candle_core::Shape {
        match self.released.get(i) {
            Some(Some(s)) => s,
            _ => self.vars[i].shape(),
        }
    }

    /// Whether parameter `i`'s f32 master was released ([`Self::release`]).
    pub fn is_released(&self, i: usize) -> bool {
        matches!(self.released.get(i), Some(Some(_)))
    }

    /// Drops parameter `i`'s f32 master, whose value from now on is its bf16 copy, held
    /// whole (`Bf16Shadows::hold`), and a distributed optimizer's f32 master of each rank's
    /// part (ZeRO's sharded masters: `zero1::Zero1Overlap::release_masters`). Its `Var`
    /// becomes a one-element placeholder; [`Self::shape`] keeps its shape. The memory is
    /// freed once no one else holds the `Var`. Refused for a parameter whose copy is not
    /// held: its forward would read the placeholder.
    pub fn release(&mut self, i: usize) -> Result<()> {
        self.release_as(i, true)
    }

    /// [`Self::release`] before parameter `i` has a copy, for a distributed optimizer that
    /// sets it right after, before any forward (ZeRO: a view into the buffer its gathers
    /// fill), so that no whole copy need exist beside the whole masters.
    pub fn release_uncopied(&mut self, i: usize) -> Result<()> {
        self.release_as(i, false)
    }

    fn release_as(&mut self, i: usize, copied: bool) -> Result<()> {
        let name = self.names.get(i).cloned().unwrap_or_default();
        let no_copy = copied && self.bf16.copy(i).is_none();
        if i >= self.vars.len() || !self.bf16.gatherable(i) || no_copy {
            return Err(crate::ModelError::Input(format!(
                "parameter {i} ({name}): only a parameter read through its bf16 copy, written, may release its f32 master"
            )));
        }
        if self.is_released(i) {
            return Ok(());
        }
        let v = &self.vars[i];
        let placeholder = Var::zeros(1, v.dtype(), v.device())?;
        self.released.resize(self.vars.len(), None);
        self.released[i] = Some(v.shape().clone());
        self.vars[i] = placeholder;
        Ok(())
    }

    /// Copies every value from `other` (same names and shapes), e.g. to start two models
    /// from identical weights.
    pub fn copy_from(&self, other: &ParamSet) -> Result<()> {
        if let Some(i) = (0..self.len()).find(|&i| self.is_released(i) || other.is_released(i)) {
            return Err(crate::ModelError::Input(format!(
                "copy_from: parameter {} has no f32 master here (released)",
                self.names[i]
            )));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_master_keeps_its_shape_and_only_a_copy_read_parameter_may_go() {
        let dev = Device::Cpu;
        let mut p = ParamSet::new();
        let mut r = rng(0);
        p.add("w", &[4, 8], Init::Const(0.5), &mut r, &dev).unwrap();
        p.add("emb", &[3, 2], Init::Const(1.0), &mut r, &dev)
            .unwrap();
        let e = p.release(0).unwrap_err().to_string();
        assert!(e.contains("parameter 0 (w)"), "no copies yet: {e}");
        p.enable_bf16_shadows(true);
        p.set_bf16_copy_only(vec![true, false]);
        let master = p.var(0).as_tensor().clone();
        p.bf16_shadows().write(0, &master).unwrap();
        p.bf16_shadows().write(1, p.var(1).as_tensor()).unwrap();
        assert!(p.release(1).is_err(), "the embedding is read as its master");
        p.release(0).unwrap();
        assert!(p.is_released(0) && !p.is_released(1));
        assert_eq!(
            (p.shape(0).dims(), p.var(0).elem_count()),
            (&[4usize, 8][..], 1)
        );
        assert_eq!(p.numel(), 32 + 6);
        let copy = p.bf16_shadows().copy(0).unwrap();
        assert_eq!(copy.dims(), &[4, 8]);
        let other = ParamSet::new();
        assert!(p.copy_from(&other).is_err());
    }
}
