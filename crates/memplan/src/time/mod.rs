//! A step's time per GPU on paper: each strategy at any world size, from measured compute
//! and collective rates ([`Rates`]: H100s' or H200s' measured figures, each named by its
//! device call; H100's by default). A projection, not a measurement: it exists to say
//! where 8, 16 and 64 GPUs would land, and it is shown beside what was measured at 2 and
//! 4 GPUs (docs/results/projection.md). Per GPU, N ranks, S the gradient bytes:
//!
//! - forward and backward: 6·Ψ·tokens at the measured FLOP rate; the backward is 2/3 of it;
//! - AdamW: 28 bytes a parameter (bf16 gradients and copies, f32 masters and moments) at
//!   the measured HBM rate, over Ψ (single, DDP) or Ψ/N (ZeRO-1);
//! - a collective on a bucket's m bytes at bus bandwidth B·m/(m + m½): B the link's (the
//!   network's above one node: a ring crosses it), m½ where half of B is reached;
//! - DDP: an all-reduce of S, 2(N−1)/N·S/B(m), beside the backward; ZeRO-1: a
//!   reduce-scatter of S beside the backward, and an all-gather of the bf16 copies: the
//!   first ⌈buckets ÷ N⌉ buckets (2 in 5 at N = 2) beside AdamW, the rest beside the next step's forward (as
//!   `zero1` runs them since session 27; Megatron-Core's overlap_param_gather); FSDP: the reduce-scatter and an all-gather of the bf16
//!   weights beside the backward, another all-gather beside the forward, each gather a
//!   stage's weights (2Ψ/layers bytes); what outlasts the work beside it is exposed, and the work
//!   beside a collective loses `contention` × the collective's time (fitted to DDP at
//!   world 2), AdamW `adamw_contention` × it (measured).

use crate::shape::Shape;

mod rates;
pub use rates::Rates;

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

impl Rates {
    /// Bus bandwidth for messages of `bytes` over `world` ranks.
    pub fn busbw(&self, bytes: f64, world: usize) -> f64 {
        let link = match world <= self.gpus_per_node {
            true => self.link_bps,
            false => self.link_bps.min(self.net_bps),
        };
        link * bytes / (bytes + self.half_bytes)
    }

    /// One step of `shape` at `tokens` per GPU (bf16) under `sync` on `world` ranks.
    pub fn project(
        &self,
        shape: &Shape,
        tokens: usize,
        sync: Collectives,
        world: usize,
    ) -> Projection {
        let (psi, n) = (shape.params() as f64, world.max(1) as f64);
        let compute = 6.0 * psi * tokens as f64 / self.flops;
        let (forward, backward) = (compute / 3.0, compute * 2.0 / 3.0);
        let grads = 2.0 * psi; // bf16
        let part = (n - 1.0) / n;
        let bucket = |mb: f64| (mb * 1e6).min(grads); // a bucket's gradients, bytes
        let optimizer = match sync {
            Collectives::Zero1 { .. } | Collectives::Fsdp { .. } => 28.0 * psi / n / self.adamw_bps,
            _ => 28.0 * psi / self.adamw_bps,
        };
        // The collective beside the backward (DDP's all-reduce, ZeRO-1's reduce-scatter),
        // and ZeRO-1's all-gather beside the next forward, each as its time alone; and the
        // pipeline's ends, which nothing can hide: the last bucket's collective after the
        // backward, the first gather before the forward (call 127's trace: 0.5-0.7 and
        // 0.47 ms at xl, world 2).
        let t = |bytes: f64| part * bytes / self.busbw(bytes, world);
        // ZeRO-1's gathers beside AdamW: crate::gathers_beside_adamw's first buckets.
        let mut adamw_side = 0.0;
        let (bwd, fwd, last, first) = match sync {
            _ if world <= 1 => (0.0, 0.0, 0.0, 0.0),
            Collectives::Single => (0.0, 0.0, 0.0, 0.0),
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
                (
                    t(b) * grads / b,
                    fwd,
                    t(b),
                    if fwd > 0.0 { t(b) } else { 0.0 },
                )
            }
            Collectives::Fsdp { bucket_mb } => {
                // One gather a unit (memplan::fsdp_unit's default: 3 of xl's stages).
                let stage = grads / shape.layers.max(1) as f64;
                let unit = crate::fsdp_unit(stage as u64) as f64 * stage;
                let (b, gather) = (bucket(bucket_mb), t(unit) * grads / unit);
                (t(b) * grads / b + gather, gather, t(b), t(unit))
            }
        };
        let comm = bwd + fwd + adamw_side;
        let exposed = (bwd - backward).max(last)
            + (fwd - forward).max(first)
            + (adamw_side - optimizer).max(0.0);
        let (beside_compute, beside_adamw) = (
            bwd.min(backward) + fwd.min(forward),
            adamw_side.min(optimizer),
        );
        let slowdown = self.contention * beside_compute + self.adamw_contention * beside_adamw;
        let hidden = beside_compute + beside_adamw;
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
mod tests {
    use super::*;

    fn xl() -> Shape {
        Shape::by_name("xl", 683, 128).unwrap()
    }

    #[test]
    fn one_gpu_is_the_measured_step() {
        let p = Rates::default().project(&xl(), 1024, Collectives::Single, 1);
        assert!((p.step * 1e3 - 47.96).abs() < 0.01, "{p:?}");
        assert_eq!((p.comm, p.exposed, p.slowdown), (0.0, 0.0, 0.0));
    }

    #[test]
    fn each_gpus_rates_give_its_measured_steps() {
        let h200 = Rates::for_gpu("NVIDIA H200").unwrap();
        assert_eq!(h200, Rates::h200());
        assert_eq!(Rates::for_gpu("NVIDIA H100 80GB HBM3"), Some(Rates::h100()));
        assert_eq!(Rates::for_gpu("NVIDIA A100-SXM4-80GB"), None);
        let at = |c, w| h200.project(&xl(), 1024, c, w).step * 1e3;
        // Call 125's clipped step, and call 137's bucketed:25 at world 2 (1.194x one GPU).
        assert!((at(Collectives::Single, 1) - 41.33).abs() < 1e-9);
        let ddp = at(Collectives::Ddp { bucket_mb: 25.0 }, 2) / at(Collectives::Single, 1);
        assert!((ddp - 49.49 / 41.45).abs() < 1e-9, "{ddp}");
        // AdamW is a smaller share of an H200's step: ZeRO-1 saves less of it.
        let z4 = |r: &Rates| {
            let one = r.project(&xl(), 1024, Collectives::Single, 1).step;
            r.project(&xl(), 1024, Collectives::Zero1 { bucket_mb: 400.0 }, 4)
                .step
                / one
        };
        assert!(z4(&h200) > z4(&Rates::h100()) + 0.03);
    }

    #[test]
    fn ddp_at_world_2_is_what_it_was_fitted_to() {
        let r = Rates::default();
        let p = r.project(&xl(), 1024, Collectives::Ddp { bucket_mb: 25.0 }, 2);
        // 56.97 ms measured (call 72), which the contention is fitted to.
        assert!((p.step * 1e3 - 56.97).abs() < 1e-6, "{p:?}");
        assert!(r.contention > 0.0 && r.contention < 1.0, "{r:?}");
    }

    #[test]
    fn more_ranks_shrink_zero1s_optimizer_and_a_network_slows_every_collective() {
        let r = Rates::default();
        let z = |w| r.project(&xl(), 1024, Collectives::Zero1 { bucket_mb: 400.0 }, w);
        assert!(z(4).optimizer * 4.0 - z(1).optimizer < 1e-12);
        assert!(z(16).comm > z(8).comm * 2.0, "16 ranks cross the network");
        let d = |w| r.project(&xl(), 1024, Collectives::Ddp { bucket_mb: 25.0 }, w);
        assert!(d(64).step > d(8).step && d(8).step > d(1).step);
    }

    /// ZeRO's last reduce-scatter and first gather run with nothing beside them: a larger
    /// bucket leaves more of them, and DDP's exposure is at least its last all-reduce.
    #[test]
    fn the_pipelines_ends_are_exposed() {
        let r = Rates::default();
        let z = |mb| r.project(&xl(), 1024, Collectives::Zero1 { bucket_mb: mb }, 2);
        assert!(z(100.0).exposed > 0.0);
        assert!(z(800.0).exposed > z(400.0).exposed && z(400.0).exposed > z(100.0).exposed);
        // 400 MB at world 2: each end half a bucket at the bus rate, 1.1-1.3 ms together.
        assert!(
            (1.1e-3..1.3e-3).contains(&z(400.0).exposed),
            "{:?}",
            z(400.0)
        );
        let d = r.project(&xl(), 1024, Collectives::Ddp { bucket_mb: 400.0 }, 2);
        assert!(
            d.exposed >= 2.0 * 0.5 * 400e6 / r.busbw(400e6, 2) - 1e-12,
            "{d:?}"
        );
    }

    /// ZeRO-1's first gathers (`gathers_beside_adamw`) run beside AdamW, which loses less beside
    /// them than the forward would (call 147); DDP and FSDP gather nothing there.
    #[test]
    fn zero1s_gathers_beside_adamw_cost_less_than_beside_the_forward() {
        let r = Rates::h200();
        let as_forward = Rates {
            adamw_contention: r.contention,
            ..r.clone()
        };
        let at = |r: &Rates, c, w| r.project(&xl(), 1024, c, w).step;
        let z = Collectives::Zero1 { bucket_mb: 400.0 };
        // 10 buckets at world 2: 4 beside AdamW, each half of 400 MB at the bus rate.
        let beside = 4.0 * 0.5 * 400e6 / r.busbw(400e6, 2);
        let gain = at(&as_forward, z, 2) - at(&r, z, 2);
        let want = (r.contention - r.adamw_contention) * beside;
        assert!((gain - want).abs() < 1e-9, "{gain} {want}");
        // Calls 143 and 145 measured 0.6-0.8 ms between the two places, at worlds 2 and 4.
        assert!((0.5e-3..1.0e-3).contains(&gain), "{gain}");
        for c in [
            Collectives::Ddp { bucket_mb: 25.0 },
            Collectives::Fsdp { bucket_mb: 200.0 },
        ] {
            assert_eq!(at(&as_forward, c, 4), at(&r, c, 4));
        }
        assert_eq!(at(&as_forward, z, 1), at(&r, z, 1));
    }

    #[test]
    fn train_names_project_as_their_collectives() {
        use Collectives::{Ddp, Fsdp, Single, Zero1};
        let cases = [
            ("single", Some(Single)),
            ("bucketed:25", Some(Ddp { bucket_mb: 25.0 })),
            ("zero1", Some(Zero1 { bucket_mb: 400.0 })),
            ("zero2:50", Some(Zero1 { bucket_mb: 50.0 })),
            ("fsdp", Some(Fsdp { bucket_mb: 200.0 })),
            ("fsdp:50", Some(Fsdp { bucket_mb: 50.0 })),
            ("fsdp:x", None),
            ("zero1x", None),
            ("sharded", None),
        ];
        for (name, want) in cases {
            assert_eq!(Collectives::of_train(name), want, "{name}");
        }
    }

    /// FSDP moves 1.5× ZeRO-1's bytes, each gather a unit's weights: slower than ZeRO-1
    /// above one rank, with its optimizer as ZeRO-1's.
    #[test]
    fn fsdp_gathers_twice_beside_zero1s_once() {
        let r = Rates::default();
        let at = |c, w| r.project(&xl(), 1024, c, w);
        let (z, f) = (
            Collectives::Zero1 { bucket_mb: 400.0 },
            Collectives::Fsdp { bucket_mb: 200.0 },
        );
        assert_eq!(at(f, 1).step, at(z, 1).step);
        for w in [2, 4, 8, 64] {
            assert!(at(f, w).comm > 1.5 * at(z, w).comm, "world {w}");
            assert!(at(f, w).step > at(z, w).step, "world {w}");
            assert_eq!(at(f, w).optimizer, at(z, w).optimizer);
        }
    }

    #[test]
    fn the_table_has_every_strategy_and_world() {
        let t = table(&Rates::default(), &xl(), 1024);
        assert_eq!(t.lines().count(), 2 + SHOWN.len(), "{t}");
        assert!(
            t.contains("world 64") && t.contains("zero1 (400 MB)"),
            "{t}"
        );
    }
}
