//! The measured rates a projection starts from: one GPU's compute and AdamW, the bus
//! bandwidth and its latency curve, the copy engines' rate, and the contentions fitted to
//! DDP at worlds 2 (NCCL's kernels) and 4 (the copy engines); H100's and H200's, each
//! figure named by its device call.

use super::{compute, Collectives, Paths};
use crate::shape::Shape;

/// Measured rates, and the network's, which are assumed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    /// Forward + backward's rate of 6·Ψ a token, FLOP/s (bf16), over its time less
    /// [`Rates::fixed_s`] and the attention's: xl at 8 × 128 tokens in 27.60 ms on an H100
    /// (call 64) is 6 · 2.01e9 · 1024 / (27.60 ms − 5.35 − 0.50).
    pub flops: f64,
    /// Forward + backward's time that does not grow with the tokens, s
    /// ([`super::compute::FIXED_S`]).
    pub fixed_s: f64,
    /// The causal attention's FLOP/s by head width, 7·t·d_model·layers a token
    /// ([`super::compute::attention_h200`]).
    pub attention: Vec<(usize, f64)>,
    /// AdamW's bytes/s: xl's 28 bytes a parameter in 19.96 ms on an H100 (call 67, traced).
    pub adamw_bps: f64,
    /// The rest of a clipped step (the norm, the loss read back, gaps): on an H100 47.96 −
    /// 27.60 − 19.96 ms (calls 72, 64, 67).
    pub rest_s: f64,
    /// NCCL bus bandwidth inside a node, large messages: 354.6 GB/s, a 1 GiB all-reduce
    /// on 4 H100s (issue 47's call); 324.5 on 2 H200s (docs/results/allreduce-h200x2.md).
    pub link_bps: f64,
    /// Where a collective reaches half of `link_bps`: on H100s, `bucketed:25`'s and
    /// `zero1:25`'s buckets hold 20.8 MB of bf16 on average (xl's 4.0 GB in 192), and one's
    /// all-gather took 0.058 ms alone on 2 H100s (call 68): 179 GB/s of bus bandwidth.
    pub half_bytes: f64,
    /// Between nodes, per GPU: a 400 Gb/s NIC each, 90 % of its 50 GB/s (assumed).
    pub net_bps: f64,
    pub gpus_per_node: usize,
    /// Time the forward or backward loses per second of a collective beside it: fitted
    /// so that `bucketed:25` at world 2 projects what was measured (on H100s call 72's
    /// 56.97 ms against one GPU's 47.96). Beside the GEMMs a collective runs at its own
    /// speed.
    pub contention: f64,
    /// Time AdamW loses per second of a gather beside it (ZeRO-1 gathers its first
    /// ⌈buckets ÷ world⌉ buckets there: `zero1::gather::beside_adamw`): 0.28 on an H200,
    /// zero1 at world 4 (call 147's trace: AdamW 0.64 ms longer beside 2.3 ms of gathers).
    /// Memory-bound, AdamW loses less beside a collective than the GEMMs do. An H100's
    /// is not measured: the H200's.
    pub adamw_contention: f64,
    /// The copy engines' rate into a GPU from its peers inside a node, by world (comm's
    /// copy-engine reduce-scatters, at [`crate::CE_REDUCE_WORLDS`]), from ce-probe: on
    /// H200s 358 GB/s from one peer (call 160) and 231 pushed from three (call 189); on
    /// H100s 197 from three (call 164), and world 2 not measured there (the H200's).
    pub ce_bps: Vec<(usize, f64)>,
    /// Time the backward loses per second of copy-engine traffic beside it (their memory
    /// traffic; no SM): fitted so that `bucketed:25` at world 4 (its reduce-scatter on the
    /// copy engines, its gathers beside AdamW) projects what was measured on 4 H200s (call
    /// 190: 1.120× one GPU). An H100's is not measured: the H200's.
    pub ce_contention: f64,
    /// Other shapes' forward + backward and AdamW rates, each relative to xl's, by
    /// parameter count: `(parameters, FLOP/s ÷ xl's, AdamW's bytes/s ÷ xl's)`, xl's
    /// `(Ψ, 1, 1)` among them. Larger GEMMs and tensors run faster: on an H200 the 6.7B's
    /// forward and backward reach 1.28 times xl's FLOP/s (call 256: [`SIZES_H200`]). A
    /// shape between two of them takes a rate between theirs (linear in ln Ψ), one
    /// outside them the nearest's.
    pub by_size: Vec<(f64, f64, f64)>,
}

/// One H200's forward + backward and clipped step (ms), bf16, 8 × 128 tokens, vocabulary
/// 683, each a CUDA graph (call 256, `bench single --mode fwd-bwd` and `--mode step --clip
/// 1`, one call): xl, 2.7B, 6.7B. [`Rates::by_size`] is made of them. An H100's are not
/// measured: it takes the H200's ratios.
pub const SIZES_H200: [(&str, f64, f64); 3] = [
    ("xl", 26.47, 41.21),
    ("2.7B", 38.77, 62.03),
    ("6.7B", 68.10, 113.96),
];

impl Default for Rates {
    /// One H100's rates ([`Rates::h100`]).
    fn default() -> Self {
        Self::h100()
    }
}

impl Rates {
    /// One and two H100s' figures (calls 64-72): xl bf16, 8 × 128 tokens, forward and
    /// backward 27.60 ms, AdamW 19.96 ms, the clipped step 47.96 ms, bucketed:25 at world 2
    /// 56.97 ms; 354.6 GB/s bus bandwidth (4 H100s).
    pub fn h100() -> Self {
        let half = half_bytes(354.6e9, 20.8e6, 179.0e9);
        let ce = vec![(2, 358e9), (4, 197e9)];
        let mut r = Self::fitted([27.60, 19.96, 47.96, 56.97], 354.6e9, half, ce);
        r.ce_contention = Self::h200().ce_contention;
        r
    }

    /// One to four H200s' figures: xl bf16, 8 × 128 tokens, forward and backward 26.29 ms
    /// and the clipped step 41.33 (call 125); AdamW 14.68 ms (call 147's trace); bucketed:25
    /// at world 2 1.194× one GPU (call 137: 49.49 against 41.45 ms); 355.1 GB/s bus
    /// bandwidth (call 137, 4 H200s), 304.5 GB/s at 50 MiB (call 143, 4 H200s); the copy
    /// engines' contention from bucketed:25 split at world 4, 1.120× one GPU (call 190:
    /// 46.70 against `bench single --clip 1`'s 41.68 ms).
    pub fn h200() -> Self {
        let step = [26.29, 14.68, 41.33, 41.33 * 49.49 / 41.45];
        let ce = vec![(2, 358e9), (4, 231e9)];
        let half = half_bytes(355.1e9, 52_428_800.0, 304.5e9);
        let mut r = Self::fitted(step, 355.1e9, half, ce);
        r.ce_contention = r.fit_ce_contention(46.70 / 41.68);
        r
    }

    /// The rates of the GPU `name` names (`NVIDIA H100 80GB HBM3`, `h200`, ...): H100 or
    /// H200, the two measured; `None` for another.
    pub fn for_gpu(name: &str) -> Option<Self> {
        let n = name.to_ascii_uppercase();
        match () {
            _ if n.contains("H200") => Some(Self::h200()),
            _ if n.contains("H100") => Some(Self::h100()),
            _ => None,
        }
    }

    /// From xl bf16 at 8 × 128 tokens: `[forward and backward, AdamW, clipped step,
    /// bucketed:25 at world 2, its all-reduce whole]` in ms, the bus bandwidth,
    /// [`Rates::half_bytes`] and [`Rates::ce_bps`]; the contention fitted so that
    /// bucketed:25 at world 2 on NCCL's kernels ([`Paths::NCCL`]) projects what was measured.
    fn fitted(
        [fb, adamw, step, ddp2]: [f64; 4],
        link_bps: f64,
        half_bytes: f64,
        ce_bps: Vec<(usize, f64)>,
    ) -> Self {
        let xl = Shape::by_name("xl", 683, 128).expect("xl is a named size");
        let psi = xl.params() as f64;
        let (fixed_s, attention) = (compute::FIXED_S, compute::attention_h200());
        let grows = compute::grows_s(fb * 1e-3, fixed_s, &attention, &xl);
        let mut r = Self {
            flops: 6.0 * psi * 1024.0 / grows,
            fixed_s,
            adamw_bps: 28.0 * psi / (adamw * 1e-3),
            rest_s: (step - fb - adamw) * 1e-3,
            link_bps,
            half_bytes,
            net_bps: 0.9 * 50e9,
            gpus_per_node: 8,
            contention: 0.0,
            adamw_contention: ADAMW_CONTENTION,
            ce_bps,
            ce_contention: 0.0,
            by_size: by_size(&SIZES_H200, fixed_s, &attention),
            attention,
        };
        let ddp = Collectives::Ddp { bucket_mb: 25.0 };
        let p = r.project_on(&xl, 1024, ddp, 2, Paths::NCCL);
        r.contention = ((ddp2 - step) * 1e-3 - p.exposed) / p.hidden;
        r
    }

    /// The FLOP/s of forward + backward at `psi` parameters ([`Rates::by_size`]).
    pub fn flops_at(&self, psi: f64) -> f64 {
        self.flops * self.scale_at(psi).0
    }

    /// AdamW's bytes/s at `psi` parameters ([`Rates::by_size`]).
    pub fn adamw_bps_at(&self, psi: f64) -> f64 {
        self.adamw_bps * self.scale_at(psi).1
    }

    /// [`Rates::by_size`]'s ratios at `psi`: between two points linear in ln Ψ; outside
    /// them the nearest's; (1, 1) where there are none.
    fn scale_at(&self, psi: f64) -> (f64, f64) {
        let pts = &self.by_size;
        let (Some(lo), Some(hi)) = (pts.first(), pts.last()) else {
            return (1.0, 1.0);
        };
        if psi <= lo.0 {
            return (lo.1, lo.2);
        }
        if psi >= hi.0 {
            return (hi.1, hi.2);
        }
        let i = pts.iter().position(|p| p.0 >= psi).unwrap_or(pts.len() - 1);
        let (a, b) = (pts[i - 1], pts[i]);
        let f = (psi.ln() - a.0.ln()) / (b.0.ln() - a.0.ln());
        (a.1 + f * (b.1 - a.1), a.2 + f * (b.2 - a.2))
    }

    /// The copy engines' contention that makes `bucketed:25` at world 4, as `train` runs it
    /// there ([`Paths::at`]), project `ratio` × one GPU's step (xl bf16, 8 × 128 tokens).
    /// The step is linear in it.
    fn fit_ce_contention(&self, ratio: f64) -> f64 {
        let xl = Shape::by_name("xl", 683, 128).expect("xl is a named size");
        let ddp = Collectives::Ddp { bucket_mb: 25.0 };
        let at = |k: f64| {
            let r = Self {
                ce_contention: k,
                ..self.clone()
            };
            r.project(&xl, 1024, ddp, 4).step
        };
        let one = self.project(&xl, 1024, Collectives::Single, 1).step;
        (ratio * one - at(0.0)) / (at(1.0) - at(0.0))
    }
}

/// [`Rates::by_size`] from one call's `(size, forward + backward, clipped step)` (ms) at
/// vocabulary 683, xl among them: forward and backward's rate from its time less `fixed_s`
/// and the attention's (at `attention`), AdamW's from the step less forward + backward
/// (AdamW, the norm and the rest of the step, 0.4 of xl's 14.7 ms).
fn by_size(
    sizes: &[(&str, f64, f64)],
    fixed_s: f64,
    attention: &[(usize, f64)],
) -> Vec<(f64, f64, f64)> {
    let rate = |&(n, fb, step): &(&str, f64, f64)| {
        let Some(s) = Shape::by_name(n, 683, 128) else {
            return (0.0, 0.0, 0.0);
        };
        let psi = s.params() as f64;
        let grows = compute::grows_s(fb * 1e-3, fixed_s, attention, &s);
        (psi, psi / grows, psi / ((step - fb) * 1e-3))
    };
    let Some(xl) = sizes.iter().find(|s| s.0 == "xl").map(rate) else {
        return Vec::new();
    };
    let mut pts: Vec<_> = (sizes.iter().map(rate))
        .map(|(p, f, a)| (p, f / xl.1, a / xl.2))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// [`Rates::adamw_contention`]: an H200's (call 147), for every GPU.
const ADAMW_CONTENTION: f64 = 0.28;

/// Where a collective reaches half of `link_bps`, from one that ran `bytes` at `busbw`
/// (bus bandwidth `link_bps · m / (m + m½)`).
fn half_bytes(link_bps: f64, bytes: f64, busbw: f64) -> f64 {
    bytes * (link_bps / busbw - 1.0).max(0.0)
}
