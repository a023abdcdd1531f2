//! The data-parallel strategies a memory plan covers, `train`'s (single, the DDP
//! strategies, sharded, zero1, zero2, fsdp), FSDP's default unit ([`fsdp_unit`]), where DDP
//! splits its all-reduce, `sharded`'s largest rank load, and the ZeRO paper's bytes per GPU
//! ([`paper`]).

use crate::shape::{mul, u};

/// A data-parallel strategy: how parameters, gradients and optimizer state are laid out
/// over the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Single,
    Ddp,
    Sharded,
    Zero1,
    Zero2,
    Fsdp,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [
        Strategy::Single,
        Strategy::Ddp,
        Strategy::Sharded,
        Strategy::Zero1,
        Strategy::Zero2,
        Strategy::Fsdp,
    ];

    /// Whether `train` runs it (all do; FSDP since session 18).
    pub fn built(self) -> bool {
        true
    }

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Single => "single",
            Strategy::Ddp => "ddp",
            Strategy::Sharded => "sharded",
            Strategy::Zero1 => "zero1",
            Strategy::Zero2 => "zero2",
            Strategy::Fsdp => "fsdp",
        }
    }

    /// The name with `train --strategy`'s spellings.
    pub fn label(self) -> &'static str {
        match self {
            Strategy::Ddp => "ddp (bucketed:MB, flat, overlap, naive)",
            s => s.name(),
        }
    }

    /// The plan of `train --strategy s`; `None` for a name train does not know.
    pub fn of_train(s: &str) -> Option<Self> {
        Some(match s {
            "single" => Strategy::Single,
            "sharded" => Strategy::Sharded,
            s if s == "zero1" || s.starts_with("zero1:") => Strategy::Zero1,
            s if s == "zero2" || s.starts_with("zero2:") => Strategy::Zero2,
            s if s == "fsdp" || s.starts_with("fsdp:") => Strategy::Fsdp,
            "naive" | "flat" | "overlap" => Strategy::Ddp,
            s if s.starts_with("bucketed:") => Strategy::Ddp,
            _ => return None,
        })
    }
}

/// FSDP's default unit gathers at least this many MB (10⁶ bytes) in one launch (call 101,
/// xl on 4 × H200: units of 1, 2, 3 and 4 of its 82 MB blocks stepped in 50.1, 48.0, 47.4
/// and 47.9 ms).
pub const FSDP_UNIT_MB: u64 = 200;

/// FSDP's default unit (zero1::Zero1Overlap's unless `set_fsdp_unit` says otherwise):
/// as many consecutive stages as make [`FSDP_UNIT_MB`] of the largest stage's gathered
/// bytes, 1 to 8 (xl's 82 MB blocks: 3; 6.7B's and 13B's, 0.4 and 0.6 GB: 1).
pub fn fsdp_unit(largest_stage_bytes: u64) -> usize {
    (FSDP_UNIT_MB * 1_000_000)
        .div_ceil(largest_stage_bytes.max(1))
        .clamp(1, 8) as usize
}

/// The worlds at which NCCL runs ZeRO-1's bf16 reduce-scatters on the copy engines, into
/// windows that hold a slot for each peer's part (`comm::nccl::CE_REDUCE_WORLDS`, which
/// comm cannot take from here; dp-tests' `memplan_agrees_with_comm` checks they agree).
pub const CE_REDUCE_WORLDS: &[usize] = &[2, 4];

/// The worlds at which ZeRO-2's and FSDP's reduce-scatters, collected during the backward,
/// go as deferred launches (comm's copy engines where it runs them, the norm in their adds)
/// by default, instead of NCCL's kernels (`ddp`; `DDP_RELEASE_CE` says otherwise): world 2,
/// xl bf16 on 2 H200s (calls 249-252, docs/results/gpus-s46.md): zero2 38.08 ms against
/// 39.89 (zero1 38.16), fsdp 40.52 against 42.32; the 6.7B's fsdp 110.13 against 119.68,
/// for 0.31-1.14 GiB of windows. Not world 4, not measured there: on paper (`time`),
/// where the copy engines' rate into a GPU is half NCCL's, FSDP's reduce-scatters by them
/// and its gathers would outlast the backward, 2.3 ms longer a step at xl on H100's rates
/// (0.6 ms shorter on H200's).
pub const RELEASED_CE_WORLDS: &[usize] = &[2];

/// The worlds at which DDP splits each all-reduce into a reduce-scatter during the backward
/// and an all-gather beside AdamW by default (`ddp::split`; `DDP_SPLIT` says otherwise):
/// NCCL's copy-engine reduce-scatters' worlds. xl bf16 on 4 H200s, bucketed:25 (calls
/// 178-179, docs/results/gpus-s33.md): world 2, 49.11 ms whole, 46.41 split; world 4,
/// 50.54 whole, 45.90 split (its gathers into windows); one GPU 41.25-41.53.
pub const DDP_SPLIT_WORLDS: &[usize] = &[2, 4];

/// Where a split all-reduce sums into gather buffers (NCCL windows) of its own, which
/// NCCL's symmetric kernels fill, by default (`DDP_SPLIT_WINDOWS` says otherwise): world
/// 4, 45.90 ms against 48.29 gathering in place by NCCL's ring; not world 2, where comm's
/// copy engines would fill them, 47.08 against 46.18 (call 179).
pub const DDP_SPLIT_WINDOW_WORLDS: &[usize] = &[4];

/// Where a split all-reduce gathers each launch as soon as its sums are in, during the
/// backward, into one gather buffer for all its gradients (comm's copy engines fill it at
/// world 2), so that AdamW runs alone after the backward, by default (`DDP_SPLIT_EARLY`
/// says otherwise): world 2, xl bf16 on 2 H200s (call 183, docs/results/gpus-s34.md),
/// 45.02 and 45.19 ms against 46.29 and 46.71 gathering beside AdamW, one GPU 41.68 (at
/// 32 rows 116.06 against 117.84, one GPU 111.34), for 3.66 GiB more. Not world 4, where
/// NCCL's kernels, not the copy engines, gather into windows (their SMs beside the GEMMs).
pub const DDP_SPLIT_EARLY_WORLDS: &[usize] = &[2];

/// How many of a ZeRO step's `buckets` gather beside its AdamW by default, the rest at the
/// next forward: ⌈buckets ÷ world⌉, but ⌈2 × buckets ÷ 5⌉ at world 2 (zero1::Zero1Overlap
/// unless `ZERO1_PARAM_GATHER` says otherwise, and `memplan::time`'s projection). AdamW's
/// shard shrinks as 1 ÷ world, and so does what hides beside it. At xl bf16, 10 buckets, on
/// 4 H200s (calls 141 and 143, docs/results/world4-s27.md):
/// - world 4: K = 0 (all at the forward) 40.04 ms, K = 3 39.33, 4 39.74, 5 40.12;
/// - world 2 (NCCL's symmetric kernels then): K = 0 42.35 ms, K = 3 41.85, K = 5 41.54.
///
/// At world 2 NCCL now gathers on the copy engines (comm's `NCCL_CE_WORLDS`), where K = 4
/// took 38.67 ms against 39.80 with K = 5 (call 172, docs/results/gpus-s32.md). Again on 2
/// H200s with one GEMM table (calls 321-322, docs/results/gpus-s57.md): K = 3 39.60-39.77,
/// 4 37.46-38.10, 5 37.28-37.93, 6 38.45-38.70; 5 within the spread of 4, which stays.
pub fn gathers_beside_adamw(buckets: usize, world: usize) -> usize {
    match world {
        2 => (2 * buckets).div_ceil(5),
        w => buckets.div_ceil(w.max(1)),
    }
}

/// The ZeRO paper's bytes per GPU (K = 12 bytes of optimizer state, no activations).
pub fn paper(i: &crate::Input, s: Strategy) -> u64 {
    let (p, n) = (i.shape.params(), u(i.world.max(1)));
    let n = if s == Strategy::Single { 1 } else { n };
    match s {
        Strategy::Single | Strategy::Ddp => mul(p, 16),
        Strategy::Sharded | Strategy::Zero1 => mul(p, 4).saturating_add(mul(p, 12) / n),
        Strategy::Zero2 => mul(p, 2).saturating_add(mul(p, 14) / n),
        Strategy::Fsdp => mul(p, 16) / n,
    }
}

/// The largest rank load of `zero1::partition::assign` (largest first, each to the least
/// loaded rank).
pub(crate) fn max_load(sizes: &[u64], w: u64) -> u64 {
    if w >= u(sizes.len()) {
        return sizes.iter().copied().max().unwrap_or(0);
    }
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let mut loads = vec![0u64; w as usize];
    for s in sorted {
        if let Some(min) = loads.iter_mut().min() {
            *min = min.saturating_add(s);
        }
    }
    loads.into_iter().max().unwrap_or(0)
}
