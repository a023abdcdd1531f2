//! Loading and validating IsoFLOP training runs.
//!
//! Input is a JSON array of records `{"parameters", "compute_budget", "final_loss"}`.
//! Every value must be a finite, strictly positive number; any violation is reported as a
//! [`DataError`] naming the record by index and values. Nothing here panics on user data.

use std::fmt;
use std::path::Path;

use serde_json::Value;

/// One training run: a model of `parameters` weights trained with `compute_budget` FLOPs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// Position of the record in the input (0-based), used in error messages.
    pub index: usize,
    /// Model size N.
    pub parameters: f64,
    /// Training compute C in FLOPs.
    pub compute_budget: f64,
    /// Final training loss L.
    pub final_loss: f64,
}

impl Run {
    /// Training tokens D = C / (6 N).
    pub fn tokens(&self) -> f64 {
        self.compute_budget / (6.0 * self.parameters)
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "record {} (parameters={}, compute_budget={:e}, final_loss={})",
            self.index, self.parameters, self.compute_budget, self.final_loss
        )
    }
}

/// Errors in the input data. Messages name the offending record.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is empty or holds an empty array.
    #[error("no runs: the input is empty")]
    Empty,
    /// The text is not valid JSON.
    #[error("invalid JSON: {0}")]
    Json(serde_json::Error),
    /// The top-level value is not an array of records.
    #[error("expected a JSON array of run records, found {0}")]
    NotArray(&'static str),
    /// A record lacks a field or has a non-numeric one.
    #[error("record {index} {record}: missing or non-numeric field `{field}`")]
    MissingField {
        /// Record index.
        index: usize,
        /// The record as compact JSON.
        record: String,
        /// Field name.
        field: &'static str,
    },
    /// A field is zero, negative, NaN or infinite.
    #[error("{run}: field `{field}` must be finite and > 0, got {value}")]
    BadValue {
        /// The record.
        run: Run,
        /// Field name.
        field: &'static str,
        /// The value found.
        value: f64,
    },
    /// The values are each valid but cannot be fitted together (e.g. 6N overflows, so the
    /// tokens D = C/(6N) are 0 or infinite).
    #[error("{run}: cannot be fitted: {reason}")]
    Unfittable {
        /// The record.
        run: Run,
        /// What is wrong.
        reason: String,
    },
    /// Two records repeat one run and the policy is to refuse duplicates.
    #[error("duplicated runs: {0}")]
    Duplicates(String),
}

/// Relative tolerance under which two compute budgets count as one (and two records as
/// duplicates, see [`crate::dedup`]).
pub const SAME_VALUE_TOLERANCE: f64 = 1e-9;

const FIELDS: [&str; 3] = ["parameters", "compute_budget", "final_loss"];

/// Reads and validates runs from a JSON file.
pub fn load_runs(path: &Path) -> Result<Vec<Run>, DataError> {
    let text = std::fs::read_to_string(path).map_err(|source| DataError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse_runs(&text)
}

/// Parses and validates runs from JSON text.
pub fn parse_runs(text: &str) -> Result<Vec<Run>, DataError> {
    if text.trim().is_empty() {
        return Err(DataError::Empty);
    }
    // Python's json module writes NaN/Infinity as bare tokens, which are not JSON; quote them
    // so the offending record can be named below instead of failing with a syntax error.
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => serde_json::from_str(&quote_non_finite(text)).map_err(|_| DataError::Json(e))?,
    };
    let records = match &value {
        Value::Array(items) => items,
        Value::Object(_) => return Err(DataError::NotArray("an object")),
        _ => return Err(DataError::NotArray("a scalar")),
    };
    let mut runs = Vec::with_capacity(records.len());
    for (index, record) in records.iter().enumerate() {
        let mut values = [0.0; 3];
        for (slot, field) in values.iter_mut().zip(FIELDS) {
            *slot = record
                .get(field)
                .and_then(number)
                .ok_or_else(|| DataError::MissingField {
                    index,
                    record: record.to_string(),
                    field,
                })?;
        }
        runs.push(Run {
            index,
            parameters: values[0],
            compute_budget: values[1],
            final_loss: values[2],
        });
    }
    validate_runs(&runs)?;
    Ok(runs)
}

/// A JSON number, or a string holding one (e.g. "NaN", "Infinity").
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Wraps bare `NaN`, `Infinity` and `-Infinity` tokens outside strings in quotes.
fn quote_non_finite(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if !in_string {
            if let Some(tok) = ["-Infinity", "Infinity", "NaN"]
                .into_iter()
                .find(|t| rest.starts_with(t))
            {
                out.push('"');
                out.push_str(tok);
                out.push('"');
                rest = &rest[tok.len()..];
                continue;
            }
        }
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Checks that there is at least one run, every value is finite and positive, and the values
/// of each run can be fitted: 6N and the tokens D = C/(6N) are finite and positive.
pub fn validate_runs(runs: &[Run]) -> Result<(), DataError> {
    if runs.is_empty() {
        return Err(DataError::Empty);
    }
    for run in runs {
        let fields = [
            ("parameters", run.parameters),
            ("compute_budget", run.compute_budget),
            ("final_loss", run.final_loss),
        ];
        for (field, value) in fields {
            if !(value.is_finite() && value > 0.0) {
                return Err(DataError::BadValue {
                    run: *run,
                    field,
                    value,
                });
            }
        }
        let six_n = 6.0 * run.parameters;
        let reason = if !six_n.is_finite() {
            Some(format!(
                "6N = {six_n:e} overflows, so the tokens D = C/(6N) are 0"
            ))
        } else if !(run.tokens().is_finite() && run.tokens() > 0.0) {
            Some(format!(
                "the tokens D = C/(6N) = {:e} are not a finite positive number",
                run.tokens()
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(DataError::Unfittable { run: *run, reason });
        }
    }
    Ok(())
}

/// The runs sharing one compute budget.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Compute budget C in FLOPs.
    pub compute: f64,
    /// Runs at this budget, sorted by model size.
    pub runs: Vec<Run>,
}

/// Groups runs by compute budget (relative tolerance 1e-9), sorted by budget then size.
pub fn group_by_budget(runs: &[Run]) -> Vec<Budget> {
    let mut sorted: Vec<Run> = runs.to_vec();
    sorted.sort_by(|x, y| {
        x.compute_budget
            .total_cmp(&y.compute_budget)
            .then(x.parameters.total_cmp(&y.parameters))
    });
    let mut groups: Vec<Budget> = Vec::new();
    for run in sorted {
        match groups.last_mut() {
            Some(g)
                if (run.compute_budget - g.compute).abs() <= SAME_VALUE_TOLERANCE * g.compute =>
            {
                g.runs.push(run)
            }
            _ => groups.push(Budget {
                compute: run.compute_budget,
                runs: vec![run],
            }),
        }
    }
    for g in &mut groups {
        g.runs.sort_by(|x, y| x.parameters.total_cmp(&y.parameters));
    }
    groups
}
