//! NCCL backend: one process per GPU, NCCL over cudarc.
//!
//! Layering as in cudarc: `raw` owns the `ncclComm_t` and turns every NCCL return code
//! into a [`crate::CommError::Nccl`] carrying NCCL's own message; `api` implements
//! [`crate::Communicator`] on candle CUDA tensors through `comm`'s launch paths (`cast`:
//! its mixed-precision gathers; `window`: gather buffers; `ce`: gathers into them by the
//! copy engines; `ce_reduce`: in-place reduce-scatters by the copy engines), queueing collectives on a dedicated
//! communication stream ordered with candle's compute stream by events; `watchdog`
//! enforces the timeout on collectives in flight; `work` is their handle; `device` opens the GPU (cudarc's per-allocation event tracking off: NcclComm orders
//! its stream itself); `events` records an opt-in
//! [`crate::Timeline`] (collective spans and compute marks) with timing CUDA events;
//! `shapes` is the opt-in cross-rank check of each call (`COMM_CHECK_SHAPES=1`).
//!
//! Without the `cuda` feature, [`NcclComm`] still exists so code builds the same way, but
//! constructing one returns [`crate::CommError::Unavailable`] (candle's dummy-backend
//! pattern).

#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // tested without CUDA too
mod adds_policy;
#[cfg(feature = "cuda")]
mod api;
#[cfg(feature = "cuda")]
mod cast;
#[cfg(feature = "cuda")]
mod ce;
#[cfg(feature = "cuda")]
mod ce_adds;
#[cfg(feature = "cuda")]
mod ce_lane;
#[cfg(feature = "cuda")]
mod ce_reduce;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // tested without CUDA too
mod ce_schedule;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // tested without CUDA too
mod ce_windows;
#[cfg(feature = "cuda")]
mod comm;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod engines;
#[cfg(feature = "cuda")]
mod events;
#[cfg(feature = "cuda")]
mod launch_op;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // tested without CUDA too
mod policy;
#[cfg(feature = "cuda")]
pub mod raw;
#[cfg(feature = "cuda")]
mod scatter;
#[cfg(feature = "cuda")]
mod shapes;
#[cfg(feature = "cuda")]
mod watchdog;
#[cfg(feature = "cuda")]
mod window;
#[cfg(feature = "cuda")]
mod work;
#[cfg(feature = "cuda")]
pub use comm::NcclComm;
#[cfg(feature = "cuda")]
pub use device::{cuda_device, gpu_count};
#[cfg(feature = "cuda")]
pub use engines::{ce_gathers, ce_reduces, nccl_ce_gathers};
pub use policy::{
    ce_reduce_asked, loaded_version, windows_note, CE_REDUCE_WORLDS, NCCL_CE_WORLDS,
    WINDOWS_MIN_NCCL,
};
#[cfg(feature = "cuda")]
pub use raw::version;
#[cfg(feature = "cuda")]
pub use window::window_bytes;

#[cfg(not(feature = "cuda"))]
mod stub;
#[cfg(not(feature = "cuda"))]
pub use stub::{
    ce_gathers, ce_reduces, cuda_device, gpu_count, nccl_ce_gathers, version, window_bytes,
    NcclComm,
};
