//! Training a language model end to end (issue 26): the embedded story corpus
//! ([`corpus`]), a byte-level BPE ([`tokenizer`]), uint16 token files read through memory
//! maps ([`tokens`], [`data`]), seeded batch windows that are the same whatever the world
//! size ([`sampler`]); the run's configuration ([`config`]), the learning-rate schedule
//! ([`schedule`]), one rank's model and optimizer with gradient clipping ([`engine`]),
//! checkpoints with the training state ([`state`]), the memory check before the model is
//! built ([`preflight`]), the loop ([`trainer`]), where ranks
//! run ([`launch`]), the log and loss curve ([`log`]), the MFU ([`mfu`]), sampling ([`generate`], [`load`]);
//! for parity with another trainer, the configuration and initial weights ([`export`]) and
//! two logs compared ([`compare`]).

pub mod cadence;
pub mod compare;
pub mod config;
pub mod corpus;
pub mod data;
pub mod engine;
pub mod export;
pub mod fault;
pub mod gemm_table;
pub mod generate;
pub mod launch;
pub mod load;
pub mod log;
pub mod mfu;
pub mod preflight;
pub mod rng;
pub mod rundir;
pub mod sampler;
pub mod schedule;
pub mod state;
mod summary;
pub mod tokenizer;
pub mod tokens;
pub mod trainer;

/// Marks an error as the user's: bad flags or input, or a checkpoint this run will not
/// resume. `train` exits with code 2 for it (`comm::launch::USER_ERROR_EXIT`), so that a
/// launcher with `--max-restarts` does not start the job again only to fail the same way.
#[derive(Debug)]
pub struct UserError(pub String);

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

/// `r` with its error marked as the user's ([`UserError`]).
pub fn users<T>(r: anyhow::Result<T>) -> anyhow::Result<T> {
    r.map_err(|e| UserError(format!("{e:#}")).into())
}

/// The run stopped on a signal (a preemption notice) after writing a checkpoint of `step`;
/// `train` exits with 128 + the signal's number, as a process killed by it would.
#[derive(Debug)]
pub struct Stopped {
    pub signal: i32,
    pub step: u64,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stopped by {} after step {}: its checkpoint is written; run the same command to resume",
            comm::launch::signals::name(self.signal),
            self.step
        )
    }
}

impl std::error::Error for Stopped {}
