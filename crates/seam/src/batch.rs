//! A batch: the model's input and the loss's targets, plus any other named tensors a model
//! needs (masks, a second input, weights). Every tensor's first dimension is the batch's
//! rows, so a batch splits across ranks by rows (`ddp::shard_batch`).
//!
//! ```
//! # fn main() -> seam::Result<()> {
//! use candle_core::{DType, Device, Tensor};
//! let dev = Device::Cpu;
//! let b = seam::Batch::new(
//!     Tensor::zeros((4, 16), DType::U32, &dev)?,          // ids
//!     Tensor::zeros((4, 16), DType::U32, &dev)?,          // labels
//! )
//! .with("mask", Tensor::ones((4, 16), DType::F32, &dev)?);
//! assert_eq!(b.get("mask")?.dims(), [4, 16]);
//! assert_eq!(b.rows()?, 4);
//! # Ok(()) }
//! ```

use crate::error::{ModelError, Result};
use candle_core::Tensor;
use std::collections::BTreeMap;

/// One batch: `input` (stage 0 reads it), `targets` (the loss), and named `extra` tensors.
#[derive(Clone)]
pub struct Batch {
    pub input: Tensor,
    pub targets: Tensor,
    /// Other tensors by name, each with the batch's rows as its first dimension.
    pub extra: BTreeMap<String, Tensor>,
}

impl Batch {
    pub fn new(input: Tensor, targets: Tensor) -> Self {
        Self {
            input,
            targets,
            extra: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) the tensor `name`.
    pub fn with(mut self, name: impl Into<String>, t: Tensor) -> Self {
        self.extra.insert(name.into(), t);
        self
    }

    /// The tensor `name` ("input" and "targets" included); an error names a missing one
    /// and the names there are.
    pub fn get(&self, name: &str) -> Result<&Tensor> {
        match name {
            "input" => Ok(&self.input),
            "targets" => Ok(&self.targets),
            _ => self.extra.get(name).ok_or_else(|| {
                let names: Vec<&str> = self.tensors().map(|(n, _)| n).collect();
                ModelError::Input(format!("the batch has no tensor {name} (it has {names:?})"))
            }),
        }
    }

    /// Every tensor with its name: input, targets, then the extra ones by name.
    pub fn tensors(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        [("input", &self.input), ("targets", &self.targets)]
            .into_iter()
            .chain(self.extra.iter().map(|(n, t)| (n.as_str(), t)))
    }

    /// The number of rows: the first dimension, the same for every tensor; an error names
    /// a scalar or a tensor whose first dimension differs from the input's.
    pub fn rows(&self) -> Result<usize> {
        let first = |name: &str, t: &Tensor| {
            t.dims().first().copied().ok_or_else(|| {
                ModelError::Input(format!("batch tensor {name} is a scalar: it has no rows"))
            })
        };
        let rows = first("input", &self.input)?;
        for (name, t) in self.tensors().skip(1) {
            let r = first(name, t)?;
            if r != rows {
                return Err(ModelError::Input(format!(
                    "batch tensor {name} has {r} rows (shape {:?}) but the input has {rows}",
                    t.dims()
                )));
            }
        }
        Ok(rows)
    }

    /// Rows `[start, start + len)` of every tensor.
    pub fn narrow(&self, start: usize, len: usize) -> Result<Self> {
        self.map(|t| Ok(t.narrow(0, start, len)?))
    }

    /// The batch with `f` applied to every tensor (moved to a device, narrowed, …), names
    /// kept.
    pub fn map<E>(
        &self,
        mut f: impl FnMut(&Tensor) -> std::result::Result<Tensor, E>,
    ) -> std::result::Result<Self, E> {
        let mut extra = BTreeMap::new();
        for (n, t) in &self.extra {
            extra.insert(n.clone(), f(t)?);
        }
        Ok(Self {
            input: f(&self.input)?,
            targets: f(&self.targets)?,
            extra,
        })
    }
}
