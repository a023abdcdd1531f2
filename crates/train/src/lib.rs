//! Training a language model end to end (issue 26): the embedded story corpus
//! ([`corpus`]), a byte-level BPE ([`tokenizer`]), uint16 token files read through memory
//! maps ([`tokens`], [`data`]), seeded batch windows that are the same whatever the world
//! size ([`sampler`]); the run's configuration ([`config`]), the learning-rate schedule
//! ([`schedule`]), one rank's model and optimizer with gradient clipping ([`engine`]),
//! checkpoints with the training state ([`state`]), the loop ([`trainer`]), where ranks
//! run ([`launch`]), the log and loss curve ([`log`]), sampling ([`generate`], [`load`]);
//! for parity with another trainer, the configuration and initial weights ([`export`]) and
//! two logs compared ([`compare`]).

pub mod compare;
pub mod config;
pub mod corpus;
pub mod data;
pub mod engine;
pub mod export;
pub mod gemm_table;
pub mod generate;
pub mod launch;
pub mod load;
pub mod log;
pub mod rng;
pub mod rundir;
pub mod sampler;
pub mod schedule;
pub mod state;
pub mod tokenizer;
pub mod tokens;
pub mod trainer;
