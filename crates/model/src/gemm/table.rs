//! A GEMM choice table as a file: the process's [`super::choices`] with the
//! [`super::identity`] they hold for, as JSON (`{"identity": …, "choices": [Choice…]}`).
//! `train` keeps one per rank in its run directory; `bench single --gemm-choices` computes
//! with one, so that a benchmark and a `train run` time the same algorithms.
//!
//! ```ignore
//! let t = model::gemm::Table::current(&dev)?;         // None off CUDA
//! std::fs::write(path, t.unwrap().to_json())?;
//! match model::gemm::Table::apply_file(path, &dev)? {  // refuses a file that is not one
//!     Ok(t) => {}      // taken: its t.choices.len() shapes are not timed again
//!     Err(why) => {}   // for another GPU or cuBLASLt, or off CUDA: nothing taken
//! }
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

    /// Reads `path` and, where the table holds on `dev`, takes it as the process's choices
    /// (its shapes are not timed again): the table taken, or why it does not hold here
    /// (another GPU model or cuBLASLt version, or no CUDA), nothing taken. A file that
    /// cannot be read or is not a table is an error naming it.
    pub fn apply_file(
        path: &Path,
        dev: &candle_core::Device,
    ) -> Result<std::result::Result<Table, String>> {
        let t = Table::read(path)?;
        let why = match super::identity(dev)? {
            None => format!("the table is for CUDA's GEMMs; this is {dev:?}"),
            Some(here) if here != t.identity => {
                format!("the table is for {}; this is {here}", t.identity)
            }
            Some(_) => {
                super::set_choices(&t.choices)
                    .map_err(|e| ModelError::Input(format!("{}: {e}", path.display())))?;
                return Ok(Ok(t));
            }
        };
        Ok(Err(why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table written before plans had an SM count target still reads (every SM), and a
    /// choice for every SM is written as before; one with a target keeps it.
    #[test]
    fn sm_target_is_optional_in_the_file() {
        let old = r#"{"identity":"g","choices":[{"m":8,"n":4,"k":2,"ta":false,"tb":true,
            "dtype":"bf16","add":false,"index":3}]}"#;
        let t: Table = serde_json::from_str(old).unwrap();
        assert_eq!(t.choices[0].sms, 0);
        assert!(!t.to_json().contains("sms"), "{}", t.to_json());
        let mut c = t.clone();
        c.choices[0].sms = 116;
        let back: Table = serde_json::from_str(&c.to_json()).unwrap();
        assert_eq!(back.choices[0].sms, 116);
        assert_eq!(back, c);
    }
}
