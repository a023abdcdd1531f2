//! Duplicated runs: records that repeat an earlier record.
//!
//! A repeated record is not new evidence, but the bootstrap would treat it as such and its
//! intervals would shrink. Two records are duplicates when they have the same model size
//! and the same final loss (equal values: `1e8` and `100000000.0` are one value) at the same
//! compute budget, which, as everywhere in the fits, means budgets equal to within
//! [`crate::data::SAME_VALUE_TOLERANCE`] (1e-9 relative). A run repeated with a loss that differs at all
//! (another seed, or a re-measurement) is a distinct run and is kept: no tolerance on the loss
//! could tell a copy from a dense set of genuine repeats.

use std::collections::hash_map::{Entry, HashMap};

use serde::Serialize;

use crate::data::{group_by_budget, DataError, Run};

/// What to do with duplicated records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DuplicatePolicy {
    /// Keep the first record of each group, drop the others and report them (the default).
    #[default]
    Drop,
    /// Refuse the input, naming the duplicates.
    Refuse,
    /// Fit the records as given (each copy counts as a run).
    Keep,
}

/// A record that repeats an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Duplicate {
    /// Position of the repeated record in the slice given.
    #[serde(skip)]
    pub position: usize,
    /// The repeated record (dropped under [`DuplicatePolicy::Drop`]).
    pub record: usize,
    /// The first record with the same values (kept).
    pub same_as: usize,
    /// Whether the compute budgets are equal too (else within 1e-9 relative of each other).
    pub exact: bool,
    /// Model size N of the repeated record.
    pub parameters: f64,
    /// Compute budget C of the repeated record.
    pub compute_budget: f64,
    /// Final loss L of the repeated record.
    pub final_loss: f64,
}

impl std::fmt::Display for Duplicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "record {} (parameters={}, compute_budget={:e}, final_loss={}) repeats record {}{}",
            self.record,
            self.parameters,
            self.compute_budget,
            self.final_loss,
            self.same_as,
            if self.exact {
                ""
            } else {
                " (its compute budget within 1e-9 relative)"
            }
        )
    }
}

/// Every record that repeats an earlier one (by input position), in input order.
pub fn find_duplicates(runs: &[Run]) -> Vec<Duplicate> {
    // Work on positions (in `index`), so that runs built in code with clashing indices work.
    let by_position: Vec<Run> = runs
        .iter()
        .enumerate()
        .map(|(index, r)| Run { index, ..*r })
        .collect();
    let mut found = Vec::new();
    for budget in group_by_budget(&by_position) {
        let mut first: HashMap<(u64, u64), usize> = HashMap::new();
        let mut members = budget.runs;
        members.sort_by_key(|r| r.index);
        for r in members {
            let key = (r.parameters.to_bits(), r.final_loss.to_bits());
            match first.entry(key) {
                Entry::Vacant(e) => {
                    e.insert(r.index);
                }
                Entry::Occupied(e) => found.push((r.index, *e.get())),
            }
        }
    }
    found.sort_unstable();
    found
        .into_iter()
        .map(|(pos, first)| Duplicate {
            position: pos,
            record: runs[pos].index,
            same_as: runs[first].index,
            exact: runs[pos].compute_budget.to_bits() == runs[first].compute_budget.to_bits(),
            parameters: runs[pos].parameters,
            compute_budget: runs[pos].compute_budget,
            final_loss: runs[pos].final_loss,
        })
        .collect()
}

/// Lists the first `limit` duplicates, one per line, and how many more there are.
pub fn describe(dups: &[Duplicate], limit: usize) -> String {
    let mut lines: Vec<String> = dups.iter().take(limit).map(|d| d.to_string()).collect();
    if dups.len() > limit {
        lines.push(format!("... and {} more", dups.len() - limit));
    }
    lines.join("\n")
}

/// Applies `policy`: returns the runs to fit and the duplicates found (dropped under
/// [`DuplicatePolicy::Drop`], still present under [`DuplicatePolicy::Keep`]).
pub fn apply(
    runs: &[Run],
    policy: DuplicatePolicy,
) -> Result<(Vec<Run>, Vec<Duplicate>), DataError> {
    let dups = find_duplicates(runs);
    match policy {
        _ if dups.is_empty() => Ok((runs.to_vec(), dups)),
        DuplicatePolicy::Keep => Ok((runs.to_vec(), dups)),
        DuplicatePolicy::Refuse => Err(DataError::Duplicates(format!(
            "{} record(s) repeat earlier ones:\n{}",
            dups.len(),
            describe(&dups, 20)
        ))),
        DuplicatePolicy::Drop => {
            let mut dropped = vec![false; runs.len()];
            for d in &dups {
                dropped[d.position] = true;
            }
            let kept = runs
                .iter()
                .zip(&dropped)
                .filter(|(_, &d)| !d)
                .map(|(r, _)| *r)
                .collect();
            Ok((kept, dups))
        }
    }
}
