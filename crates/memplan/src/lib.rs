//! The LM's named sizes ([`shape`]) and the memory plan of each data-parallel strategy
//! ([`mod@plan`], [`report`]): the bytes per GPU of f32 masters, bf16 copies, gradients,
//! optimizer state, activations and communication buffers at a step's peak, as the code
//! allocates them. The one owner of this arithmetic: `model` re-exports it (its sizes
//! table, `train`'s pre-flight check), `cargo xtask plan --model` prints it. No
//! dependencies, so that xtask need not build candle. [`time`]: a step's time per GPU on
//! paper, each strategy at any world size, from measured rates. [`mod@attention`]: which
//! attention kernel the LM's block runs, by sequence and head width (the model reads it).
//! [`peak`]: GPUs' dense peak FLOP/s, for the MFU that `train` and `bench` print.
//!
//! ```
//! use memplan::{plan, Input, Shape, Strategy};
//! let shape = Shape::by_name("6.7B", 10_000, 128).unwrap();
//! let i = Input { shape, world: 4, rows: 8, accum: 1, bf16: true, clip: true, captured: true,
//!                    sharded_masters: false, fsdp_gathers: (0, 1), fsdp_unit: None,
//!                    ce_slots: None, ddp_split: None, checkpointed: false };
//! let (ddp, zero1) = (plan(&i, Strategy::Ddp), plan(&i, Strategy::Zero1));
//! assert!(zero1.peak() < ddp.peak());
//! assert_eq!(4 * zero1.bytes.optimizer, ddp.bytes.optimizer);
//! ```

pub mod attention;
mod input;
pub mod peak;
pub mod plan;
pub mod report;
pub mod shape;
pub mod strategy;
pub mod time;

pub use attention::{attention, whole, Attention};
pub use plan::{paper, plan, Bytes, Input, Phase, Row, Strategy, WORLDS};
pub use report::{check, fitting, fitting_text, table};
pub use shape::{size_names, Kind, Shape, SIZES};
pub use strategy::{
    fsdp_unit, gathers_beside_adamw, CE_REDUCE_WORLDS, DDP_SPLIT_EARLY_WORLDS,
    DDP_SPLIT_WINDOW_WORLDS, DDP_SPLIT_WORLDS, FSDP_UNIT_MB, RELEASED_CE_WORLDS,
};
