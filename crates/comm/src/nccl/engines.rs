//! Which engines this process's communicators move data with, for a run's log, and the
//! facts each communicator decides them from before NCCL starts.

use super::policy::windows_wanted;
use crate::error::Result;
use std::sync::atomic::Ordering;

/// Whether a communicator of this process gathers on the copy engines ([`ce_gathers`]).
pub(super) static GATHERS_ON: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether this process's gathers into gather buffers run on the copy engines
/// (`super::ce`), for a run's log.
pub fn ce_gathers() -> bool {
    GATHERS_ON.load(Ordering::Relaxed)
}

/// Whether a communicator of this process reduce-scatters on the copy engines
/// ([`ce_reduces`]).
pub(super) static REDUCES_ON: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether this process's in-place bf16 reduce-scatters run on the copy engines
/// (`super::ce_reduce`), for a run's log.
pub fn ce_reduces() -> bool {
    REDUCES_ON.load(Ordering::Relaxed)
}

/// Whether a communicator of this process asked NCCL for its zero-CTA policy
/// (`super::policy::nccl_cta_policy`): NCCL gathers into the buffers that ask for it on the
/// copy engines. For a run's log.
pub(super) static NCCL_CE_ON: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether a communicator of this process gathers with NCCL's copy engines, for a run's log.
pub fn nccl_ce_gathers() -> bool {
    NCCL_CE_ON.load(Ordering::Relaxed)
}

/// Whether gather buffers are windows (`COMM_NCCL_WINDOWS`, the loaded NCCL), and the
/// ranks on this node (`LOCAL_WORLD_SIZE`, where the launcher says) beside `world`.
pub(super) fn windows_here(world: usize) -> Result<(bool, (Option<usize>, usize))> {
    let env = std::env::var("COMM_NCCL_WINDOWS").ok();
    let on = windows_wanted(env.as_deref(), super::raw::version())?;
    let local = std::env::var("LOCAL_WORLD_SIZE").ok();
    Ok((on, (local.and_then(|l| l.parse().ok()), world)))
}
