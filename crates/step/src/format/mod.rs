//! The two checkpoint formats a step saves and resumes, under the `checkpoint` crate's
//! manifest (each file fsynced, the ranks agreeing, `manifest.json` last):
//! - [`flat`]: one file, `ddp.safetensors`, written by rank 0: a replicated optimizer's
//!   (one rank, DDP);
//! - [`sharded`]: the parameters, and each rank's shard of the moments: a sharded
//!   optimizer's (ZeRO-1, ZeRO-2, the sharded optimizer).
//!
//! Either resumes any strategy at any world size. They live here, below the strategies'
//! crates (ddp, zero1), so that a strategy can read the other's format and `step` needs
//! none of them. Errors are the `checkpoint` crate's, each naming the file.

pub mod flat;
pub mod sharded;
mod state;

/// Where each of the tensors of `counts` elements starts in their concatenation, in order
/// (the flat, declaration-order numbering both formats' runs count in), then the total.
pub fn flat_offsets(counts: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let mut at = 0;
    let ends = counts.into_iter().map(|n| {
        at += n;
        at
    });
    std::iter::once(0).chain(ends).collect()
}
