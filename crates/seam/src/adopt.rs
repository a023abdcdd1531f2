//! Parameters a model already has: a candle-nn `VarMap` or `Var`s with names. The `Var`s
//! are shared, not copied, so the candle-nn layers built on them train in place.
//!
//! ```
//! # fn main() -> seam::Result<()> {
//! use candle_nn::{Module, VarBuilder, VarMap};
//! let varmap = VarMap::new();
//! let vb = VarBuilder::from_varmap(&varmap, candle_core::DType::F32, &candle_core::Device::Cpu);
//! let _layer = candle_nn::linear(4, 2, vb.pp("fc"))?;
//! let params = seam::ParamSet::from_varmap(&varmap)?; // fc.bias, fc.weight (by name)
//! assert_eq!(params.names(), ["fc.bias", "fc.weight"]);
//! # Ok(()) }
//! ```

use crate::error::{ModelError, Result};
use crate::params::ParamSet;
use candle_core::Var;

impl ParamSet {
    /// Every variable of `varmap`, ordered by name (a `VarMap` is a hash map: sorting
    /// makes the order, and so DDP's buckets and the cross-rank check, the same on every
    /// rank).
    pub fn from_varmap(varmap: &candle_nn::VarMap) -> Result<Self> {
        let data = varmap
            .data()
            .lock()
            .map_err(|_| ModelError::Input("the VarMap's lock is poisoned".into()))?;
        let mut named: Vec<(String, Var)> =
            data.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
        drop(data);
        named.sort_by(|a, b| a.0.cmp(&b.0));
        Self::from_vars(named)
    }

    /// `Var`s with their names, in the order given (the names must be unique).
    pub fn from_vars(named: impl IntoIterator<Item = (String, Var)>) -> Result<Self> {
        let mut p = ParamSet::new();
        for (name, var) in named {
            p.push_var(name, var)?;
        }
        Ok(p)
    }
}
