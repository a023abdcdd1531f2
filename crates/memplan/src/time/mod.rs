//! A step's time per GPU on paper: each strategy at any world size, from measured compute
//! and collective rates ([`Rates`]: H100s' or H200s' measured figures, each named by its
//! device call; H100's by default). A projection, not a measurement: it exists to say
//! where 8, 16 and 64 GPUs would land, and it is shown beside what was measured at 2 and
//! 4 GPUs (docs/results/projection.md). Per GPU, N ranks, S the gradient bytes:
//!
//! - forward and backward: a part that does not grow with the tokens, 6·Ψ·tokens at the
//!   measured FLOP rate (xl's, scaled by the shape's size as measured on one GPU:
//!   [`Rates::by_size`]) and the attention's t² work at its own ([`Rates::compute`]); the
//!   backward is 2/3 of it;
//! - AdamW: 28 bytes a parameter (bf16 gradients and copies, f32 masters and moments) at
//!   the measured HBM rate (scaled so too), over Ψ (single, DDP) or Ψ/N (ZeRO-1);
//! - a collective on a bucket's m bytes at bus bandwidth B·m/(m + m½): B the link's (the
//!   network's above one node: a ring crosses it), m½ where half of B is reached;
//! - the copy engines (where `train` takes them: [`Paths::at`], 2 and 4 ranks in a node):
//!   a reduce-scatter of S takes (N−1)/N·S at their measured rate into a GPU
//!   ([`Rates::ce_bps`]), and the backward beside it loses `ce_contention` × its time;
//! - DDP: an all-reduce of S, 2(N−1)/N·S/B(m), beside the backward; split where `train`
//!   splits it: the reduce-scatter beside the backward, the all-gather chained to it (world
//!   2, the copy engines) or beside AdamW (world 4, NCCL); ZeRO-1: a reduce-scatter of S
//!   beside the backward, and an all-gather of the bf16 copies: the first ⌈buckets ÷ N⌉
//!   buckets (2 in 5 at N = 2) beside AdamW, the rest beside the next step's forward (as
//!   `zero1` runs them since session 27; Megatron-Core's overlap_param_gather); FSDP: the
//!   reduce-scatter (on the copy engines at [`crate::RELEASED_CE_WORLDS`]) and an
//!   all-gather of the bf16 weights beside the backward, another all-gather beside the
//!   forward, each gather a stage's weights (2Ψ/layers bytes); what outlasts the work
//!   beside it is exposed, and the work beside a collective loses `contention` × the
//!   collective's time (fitted to DDP at world 2, its all-reduce whole on NCCL's kernels:
//!   [`Paths::NCCL`]), AdamW
//!   `adamw_contention` × it (measured).

use crate::shape::Shape;

mod compute;
mod rates;
pub use compute::{attention_h200, ATTENTION_MS_H200, FIXED_S};
pub use rates::{Rates, SIZES_H200};

/// The strategies a projection covers: `train`'s DDP (`bucketed:MB`), ZeRO-1 and ZeRO-2
/// (`zero1:MB`, `zero2:MB`: the same collectives) and FSDP (`fsdp:MB`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Collectives {
    Single,
    Ddp { bucket_mb: f64 },
    Zero1 { bucket_mb: f64 },
    Fsdp { bucket_mb: f64 },
}

/// ZeRO-1's (and ZeRO-2's) bucket size when `--strategy` names none: train's default
/// (`train::config::ZERO1_BUCKET` is made of it).
pub const ZERO1_BUCKET_MB: f64 = 400.0;

/// FSDP's bucket size when `--strategy` names none: train's default
/// (`train::config::FSDP_BUCKET` is made of it). Its buckets only reduce-scatter.
pub const FSDP_BUCKET_MB: f64 = 200.0;

impl Collectives {
    /// The projection of a `train --strategy` name: `single`, `bucketed:MB`, `zero1[:MB]`,
    /// `zero2[:MB]` (the same collectives as ZeRO-1; 400 MB, train's default, without MB)
    /// and `fsdp[:MB]` (200 MB without); `None` for others.
    pub fn of_train(s: &str) -> Option<Self> {
        let mb = |rest: &str, default: f64| match rest {
            "" => Some(default),
            r => r.strip_prefix(':')?.parse().ok(),
        };
        if let Some(rest) = s.strip_prefix("fsdp") {
            let bucket_mb = mb(rest, FSDP_BUCKET_MB)?;
            return Some(Collectives::Fsdp { bucket_mb });
        }
        match s {
            "single" => Some(Collectives::Single),
            s if s.starts_with("bucketed:") => Some(Collectives::Ddp {
                bucket_mb: s["bucketed:".len()..].parse().ok()?,
            }),
            s if s.starts_with("zero1") || s.starts_with("zero2") => Some(Collectives::Zero1 {
                bucket_mb: mb(&s[5..], ZERO1_BUCKET_MB)?,
            }),
            _ => None,
        }
    }
}

/// One projected step, seconds per GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub compute: f64,
    pub optimizer: f64,
    /// The collectives' own time (as if alone).
    pub comm: f64,
    /// Of it, what nothing hides.
    pub exposed: f64,
    /// Of it, what runs beside other work.
    pub hidden: f64,
    /// What the work beside the collectives loses.
    pub slowdown: f64,
    pub step: f64,
}

/// Which engines and arrangement a step's collectives take at a world size, as `train`
/// runs them by default ([`Paths::at`]), or NCCL's whole all-reduce everywhere
/// ([`Paths::NCCL`], what the contention was fitted to).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paths {
    /// The bf16 reduce-scatters (ZeRO-1's, split DDP's) on the copy engines
    /// ([`crate::CE_REDUCE_WORLDS`], inside a node).
    pub ce: bool,
    /// FSDP's too ([`crate::RELEASED_CE_WORLDS`]); else on NCCL's kernels.
    pub released: bool,
    /// DDP's all-reduce split into a reduce-scatter in the backward and an all-gather
    /// ([`crate::DDP_SPLIT_WORLDS`]).
    pub split: bool,
    /// The split's all-gathers chained to its reduce-scatters, in the backward, on the
    /// copy engines ([`crate::DDP_SPLIT_EARLY_WORLDS`]); else beside AdamW, by NCCL.
    pub early: bool,
}

impl Paths {
    /// NCCL's kernels for every collective, DDP's all-reduce whole.
    pub const NCCL: Paths = Paths {
        ce: false,
        released: false,
        split: false,
        early: false,
    };

    /// What `train` takes by default at `world` ranks with `gpus_per_node` a node.
    pub fn at(world: usize, gpus_per_node: usize) -> Self {
        let ce = world <= gpus_per_node && crate::CE_REDUCE_WORLDS.contains(&world);
        let split = ce && crate::DDP_SPLIT_WORLDS.contains(&world);
        Paths {
            ce,
            released: ce && crate::RELEASED_CE_WORLDS.contains(&world),
            split,
            early: split && crate::DDP_SPLIT_EARLY_WORLDS.contains(&world),
        }
    }
}

impl Rates {
    /// Bus bandwidth for messages of `bytes` over `world` ranks.
    pub fn busbw(&self, bytes: f64, world: usize) -> f64 {
        let link = match world <= self.gpus_per_node {
            true => self.link_bps,
            false => self.link_bps.min(self.net_bps),
        };
        link * bytes / (bytes + self.half_bytes)
    }

    /// The copy engines' rate into a GPU at `world` ([`Rates::ce_bps`]): the measured
    /// world's, else the nearest measured world's below it.
    pub fn ce_rate(&self, world: usize) -> f64 {
        let by = self.ce_bps.iter();
        (by.clone()
            .filter(|&&(w, _)| w <= world)
            .max_by_key(|&&(w, _)| w))
        .or_else(|| by.min_by_key(|&&(w, _)| w))
        .map_or(self.link_bps, |&(_, bps)| bps)
    }

    /// One step of `shape` at `tokens` per GPU (bf16) under `sync` on `world` ranks, each
    /// collective on the engine `train` takes there ([`Paths::at`]).
    pub fn project(
        &self,
        shape: &Shape,
        tokens: usize,
        sync: Collectives,
        world: usize,
    ) -> Projection {
        let paths = Paths::at(world, self.gpus_per_node);
        self.project_on(shape, tokens, sync, world, paths)
    }

    /// [`Rates::project`] with the engines and arrangement `paths` says.
    pub fn project_on(
        &self,
        shape: &Shape,
        tokens: usize,
        sync: Collectives,
        world: usize,
        paths: Paths,
    ) -> Projection {
        let (psi, n) = (shape.params() as f64, world.max(1) as f64);
        let compute = self.compute(shape, tokens);
        let (forward, backward) = (compute / 3.0, compute * 2.0 / 3.0);
        let grads = 2.0 * psi; // bf16
        let part = (n - 1.0) / n;
        let bucket = |mb: f64| (mb * 1e6).min(grads); // a bucket's gradients, bytes
        let optimizer = match sync {
            Collectives::Zero1 { .. } | Collectives::Fsdp { .. } => {
                28.0 * psi / n / self.adamw_bps_at(psi)
            }
            _ => 28.0 * psi / self.adamw_bps_at(psi),
        };
        // The collective beside the backward (DDP's all-reduce, ZeRO-1's reduce-scatter),
        // and ZeRO-1's all-gather beside the next forward, each as its time alone; and the
        // pipeline's ends, which nothing can hide: the last bucket's collective after the
        // backward, the first gather before the forward (call 127's trace: 0.5-0.7 and
        // 0.47 ms at xl, world 2).
        let t = |bytes: f64| part * bytes / self.busbw(bytes, world);
        // A reduce-scatter's time: by the copy engines (each rank takes in its peers'
        // parts), or by NCCL's kernels.
        let ce = self.ce_rate(world);
        let rs = |bytes: f64| match paths.ce {
            true => part * bytes / ce,
            false => t(bytes),
        };
        // Gathers beside AdamW: ZeRO-1's first buckets (crate::gathers_beside_adamw),
        // split DDP's gathers where they are not early.
        let mut adamw_side = 0.0;
        // The share of the backward's collectives that runs on the copy engines.
        let mut bwd_ce = 0.0;
        let (bwd, fwd, last, first) = match sync {
            _ if world <= 1 => (0.0, 0.0, 0.0, 0.0),
            Collectives::Single => (0.0, 0.0, 0.0, 0.0),
            Collectives::Ddp { bucket_mb } if paths.split => {
                let b = bucket(bucket_mb);
                bwd_ce = if paths.ce { 1.0 } else { 0.0 };
                match paths.early {
                    // Each launch's gather chained to its sums, on the copy engines too.
                    true => (2.0 * rs(b) * grads / b, 0.0, 2.0 * rs(b), 0.0),
                    false => {
                        adamw_side = t(b) * grads / b;
                        (rs(b) * grads / b, 0.0, rs(b), 0.0)
                    }
                }
            }
            Collectives::Ddp { bucket_mb } => {
                let b = bucket(bucket_mb);
                (2.0 * t(b) * grads / b, 0.0, 2.0 * t(b), 0.0)
            }
            Collectives::Zero1 { bucket_mb } => {
                let b = bucket(bucket_mb);
                let buckets = (grads / b).ceil() as usize;
                let beside = crate::gathers_beside_adamw(buckets, world);
                adamw_side = t(b) * beside as f64;
                let fwd = t(b) * (buckets - beside) as f64;
                bwd_ce = if paths.ce { 1.0 } else { 0.0 };
                (
                    rs(b) * grads / b,
                    fwd,
                    rs(b),
                    if fwd > 0.0 { t(b) } else { 0.0 },
                )
            }
            Collectives::Fsdp { bucket_mb } => {
                // One gather a unit (memplan::fsdp_unit's default: 3 of xl's stages).
                let stage = grads / shape.layers.max(1) as f64;
                let unit = crate::fsdp_unit(stage as u64) as f64 * stage;
                // Its reduce-scatters on the copy engines where `train` takes them for
                // FSDP, its gathers on NCCL's kernels.
                let (b, gather) = (bucket(bucket_mb), t(unit) * grads / unit);
                let rs = |bytes| if paths.released { rs(bytes) } else { t(bytes) };
                let scatter = rs(b) * grads / b;
                if paths.released {
                    bwd_ce = scatter / (scatter + gather);
                }
                (scatter + gather, gather, rs(b), t(unit))
            }
        };
        let comm = bwd + fwd + adamw_side;
        let exposed = (bwd - backward).max(last)
            + (fwd - forward).max(first)
            + (adamw_side - optimizer).max(0.0);
        let beside_backward = bwd.min(backward);
        let beside_forward = fwd.min(forward);
        let beside_adamw = adamw_side.min(optimizer);
        let backward_loses = bwd_ce * self.ce_contention + (1.0 - bwd_ce) * self.contention;
        let slowdown = backward_loses * beside_backward
            + self.contention * beside_forward
            + self.adamw_contention * beside_adamw;
        let hidden = beside_backward + beside_forward + beside_adamw;
        Projection {
            compute,
            optimizer,
            comm,
            exposed,
            hidden,
            slowdown,
            step: compute + optimizer + self.rest_s + exposed + slowdown,
        }
    }
}

/// The world sizes a projection table shows.
pub const PROJECTED: [usize; 6] = [1, 2, 4, 8, 16, 64];

/// The strategies a projection table shows: DDP as `train`'s default, ZeRO-1 at 25 MB and
/// at its default 400 MB.
pub const SHOWN: [(&str, Collectives); 4] = [
    ("bucketed:25", Collectives::Ddp { bucket_mb: 25.0 }),
    ("zero1:25", Collectives::Zero1 { bucket_mb: 25.0 }),
    (
        "zero1 (400 MB)",
        Collectives::Zero1 {
            bucket_mb: ZERO1_BUCKET_MB,
        },
    ),
    (
        "fsdp (200 MB)",
        Collectives::Fsdp {
            bucket_mb: FSDP_BUCKET_MB,
        },
    ),
];

/// Per strategy and world size: the projected step per GPU (ms) and its ratio to one
/// GPU's, as `cargo xtask plan --model M --project` prints it.
pub fn table(r: &Rates, shape: &Shape, tokens: usize) -> String {
    let one = r.project(shape, tokens, Collectives::Single, 1).step;
    let mut out = format!(
        "step per GPU on paper, ms (x one GPU's {:.2} ms), {tokens} tokens a GPU, bf16; \
         ranks 1-{} on NVLink, then {:.0} GB/s a GPU between nodes\n{:<16}",
        one * 1e3,
        r.gpus_per_node,
        r.net_bps / 1e9,
        "strategy"
    );
    for w in PROJECTED {
        out += &format!("{:>16}", format!("world {w}"));
    }
    out += "\n";
    for (name, sync) in SHOWN {
        out += &format!("{name:<16}");
        for w in PROJECTED {
            let p = r.project(shape, tokens, sync, w);
            out += &format!(
                "{:>16}",
                format!("{:.1} ({:.2}x)", p.step * 1e3, p.step / one)
            );
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests;
