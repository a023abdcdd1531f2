//! Training a language model end to end (issue 26): the embedded story corpus
//! ([`corpus`]), a byte-level BPE ([`tokenizer`]), uint16 token files read through memory
//! maps ([`tokens`], [`data`]), seeded batch windows that are the same whatever the world
//! size ([`sampler`]).

pub mod corpus;
pub mod data;
pub mod rng;
pub mod sampler;
pub mod tokenizer;
pub mod tokens;
