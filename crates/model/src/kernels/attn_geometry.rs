//! What the attention's kernels launch with (`kernels::attn`, CUDA only): the tiled
//! kernels' tile and query tiles a block, each kernel's dynamic shared memory, and the lanes
//! `flash_dot` gives a row. Each mirrors a constant or rule of kernels/attn.cuh or
//! kernels/flash.cuh, named beside it.

use crate::plan::Attention as Kernel;

/// The tiled kernel's tile rows (flash.cuh `BT`) and threads (four warps).
pub(crate) const TILE: usize = 64;

/// Query tiles a tiled forward or ∂q block takes (flash.cuh `MT`): two (128 queries, a
/// warp's 32 rows sharing each k or v fragment it reads) where t / 64 is even, else one;
/// and the kernel name's suffix for it.
pub(crate) fn query_tiles(t: usize) -> (usize, &'static str) {
    if (t / TILE).is_multiple_of(2) {
        (2, "2")
    } else {
        (1, "")
    }
}

/// Bytes of dynamic shared memory. Whole (attn.cuh): k, v and q staged, t rows of e + 8
/// each (the backward puts dY in v's place); forward, per pair of query strips (t / 32 of
/// them) an f32 strip of 16 rows of max(t, e) + 4 and a bf16 strip of 16 rows of t + 8;
/// backward, dS (t rows of t + 8) and per pair an f32 strip of 16 rows of max(e, 32) + 4.
/// Tiled (flash.cuh): 64-row tiles of e + 8 (forward: [`query_tiles`] q tiles and two
/// stages of k, v; backward's ∂k, ∂v: k, v and two stages of q, dY, with two stages of 64
/// L and D, f32, and a dSᵀ tile of 64 × 72 on its way out); the scores stay in registers.
/// ∂q: [`shared_q`].
pub(crate) fn shared(k: Kernel, t: usize, e: usize, backward: bool) -> u32 {
    let bytes = match k {
        Kernel::Whole => {
            let (w, staged) = (t / 32, 3 * t * (e + 8) * 2);
            if backward {
                staged + t * (t + 8) * 2 + w * 16 * (e.max(32) + 4) * 4
            } else {
                staged + w * 16 * (t.max(e) + 4) * 4 + w * 16 * (t + 8) * 2
            }
        }
        Kernel::Tiled => {
            let tile = TILE * (e + 8) * 2;
            if backward {
                6 * tile + 4 * TILE * 4 + TILE * (TILE + 8) * 2
            } else {
                (query_tiles(t).0 + 4) * tile
            }
        }
    };
    bytes as u32
}

/// The tiled ∂q's bytes: stages (flash.cuh `q_stages`: three where a block takes two
/// query tiles above e = 64, else two) of [`query_tiles`] dSᵀ tiles (64 × 72) and a k
/// tile (64 × e + 8).
pub(crate) fn shared_q(t: usize, e: usize) -> u32 {
    let m = query_tiles(t).0;
    let stages = if m == 2 && e > 64 { 3 } else { 2 };
    (stages * TILE * (m * (TILE + 8) + (e + 8)) * 2) as u32
}

/// The lanes `flash_dot` gives a row of e (flash.cuh `dot_lanes`): e / 8 chunks of 16
/// bytes, rounded up to a power of two.
pub(crate) fn dot_lanes(e: usize) -> usize {
    (e / 8).next_power_of_two().max(2)
}
