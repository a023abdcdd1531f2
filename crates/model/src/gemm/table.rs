//! A GEMM choice table as a file: the process's [`super::choices`] with the
//! [`super::identity`] they hold for, as JSON (`{"identity": …, "choices": [Choice…]}`).
//! `train` keeps one per rank in its run directory; `bench single --gemm-choices` computes
//! with one, so that a benchmark and a `train run` time the same algorithms.
//!
//! ```ignore
//! let t = model::gemm::Table::current(&dev)?;         // None off CUDA
//! std::fs::write(path, t.unwrap().to_json())?;
//! let t = model::gemm::Table::read(path)?;            // refuses a file that is not one
//! t.check(&dev)?;                                     // refuses another GPU or cuBLASLt
//! t.apply()?;                                         // its shapes are not timed again
//! ```

use super::Choice;
use crate::error::{ModelError, Result};
use std::path::Path;

/// A table of GEMM choices and where it holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Table {
    /// The GPU model and cuBLASLt version the indices are for.
    pub identity: String,
    pub choices: Vec<Choice>,
}

impl Table {
    /// The process's choices so far on `dev` (`None` off CUDA).
    pub fn current(dev: &candle_core::Device) -> Result<Option<Table>> {
        Ok(super::identity(dev)?.map(|identity| Table {
            identity,
            choices: super::choices(),
        }))
    }

    /// The table in `path`; an unreadable file or one that is not a table is an error
    /// naming it.
    pub fn read(path: &Path) -> Result<Table> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ModelError::Input(format!("reading {}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| {
            ModelError::Input(format!("{}: not a GEMM choice table: {e}", path.display()))
        })
    }

    /// Pretty JSON, as [`Table::read`] takes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a table serializes")
    }

    /// Where this table does not hold on `dev`: why (another GPU model or cuBLASLt
    /// version, or no CUDA); `None` where it holds.
    pub fn mismatch(&self, dev: &candle_core::Device) -> Result<Option<String>> {
        Ok(match super::identity(dev)? {
            None => Some(format!("the table is for CUDA's GEMMs; this is {dev:?}")),
            Some(here) if here != self.identity => Some(format!(
                "the table is for {}; this is {here}",
                self.identity
            )),
            Some(_) => None,
        })
    }

    /// Takes the table as the process's choices: its shapes are not timed again.
    pub fn apply(&self) -> Result<()> {
        super::set_choices(&self.choices)
    }
}
