//! What a plan takes: one rank's training step ([`Input`]), and `train run`'s defaults.

use crate::shape::Shape;

/// One rank's training step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub shape: Shape,
    pub world: usize,
    /// Sequences (of `shape.context` tokens) in one micro-batch on one GPU.
    pub rows: usize,
    pub accum: usize,
    pub bf16: bool,
    /// Clipping by the global norm (`--clip` > 0): AdamW then runs after the backward.
    pub clip: bool,
    /// The step is one captured CUDA graph (train's default on CUDA; `--eager` runs it
    /// eagerly): see [`crate::Phase::Captured`].
    pub captured: bool,
    /// ZeRO-1 and ZeRO-2 keep the f32 masters they shard in place as each rank's part
    /// alone (zero1::masters: train's default; `ZERO1_MASTERS=whole` keeps them whole).
    pub sharded_masters: bool,
    /// FSDP's gathers (zero1::Zero1Overlap::set_fsdp_gathers): how many of the last
    /// stages keep their forward gather for the backward (0, the default; `usize::MAX`:
    /// every one), and how many stages ahead (1 by default): the stage buffers it holds.
    pub fsdp_gathers: (usize, usize),
    /// FSDP's unit (zero1::Zero1Overlap::set_fsdp_unit): stages gathered as one, into one
    /// buffer (`None`: the default, [`crate::fsdp_unit`] of the largest stage); the gathers ahead
    /// and the kept stages count in units.
    pub fsdp_unit: Option<usize>,
    /// ZeRO-1's reduce-scatters by the copy engines, with a slot for each peer's part
    /// (comm::nccl::ce_reduce): `None` at [`crate::CE_REDUCE_WORLDS`]; `Some`: `COMM_CE_REDUCE`.
    pub ce_slots: Option<bool>,
    /// DDP's split all-reduce (ddp::split: the copy-engine reduce-scatters' slots, AdamW
    /// after the backward): `None` at [`crate::DDP_SPLIT_WORLDS`]; `Some`: `DDP_SPLIT`.
    pub ddp_split: Option<bool>,
    /// Activation checkpointing (`model::TransformerLm::set_activation_checkpointing`):
    /// each block keeps only its input from the forward, and its backward holds that
    /// block's activations, made again, alone.
    pub checkpointed: bool,
}

impl Input {
    /// `train run`'s defaults for `rows` sequences of `shape` a GPU at `world`: bf16, one
    /// micro-batch, clipping, a step captured as one CUDA graph, each rank's part of the
    /// masters it shards, FSDP's default gathers and unit, the copy engines and DDP's
    /// split where `train` takes them, no activation checkpointing.
    pub fn train_defaults(shape: Shape, world: usize, rows: usize) -> Self {
        Self {
            shape,
            world,
            rows,
            accum: 1,
            bf16: true,
            clip: true,
            captured: true,
            sharded_masters: true,
            fsdp_gathers: (0, 1),
            fsdp_unit: None,
            ce_slots: None,
            ddp_split: None,
            checkpointed: false,
        }
    }
}
