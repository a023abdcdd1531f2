//! The bytes each data-parallel strategy holds per GPU at the peak of a training step,
//! worked out from what the code allocates, not from the ZeRO paper's formulas (kept for
//! comparison: [`paper`]). Ψ parameters, N ranks, n tokens a micro-batch, compute element
//! size e (2 in bf16, 4 in fp32):
//!
//! - f32 masters 4Ψ on every rank (`seam::ParamSet`; ZeRO-1 keeps them whole too and adds
//!   f32 masters of its slices of the bucket flat parts). bf16 copies 2Ψ (`seam::shadow`,
//!   written by AdamW for every parameter); `sharded` writes none, so its forward casts
//!   each weight and the block keeps the cast until its backward.
//! - Gradients as the backward makes them: GEMM weights (head included) in the compute
//!   dtype, norms and the embedding table in f32. On N > 1 ranks a gradient of 64 Ki
//!   elements or more (and, for ZeRO-1, a multiple of N) is reduced where it lies, cast to
//!   the wire dtype first where it is not in it (the embedding's in bf16); smaller ones are
//!   copied into the buckets' flat buffers (communication buffers). The wire dtype is the
//!   compute dtype, except `sharded`'s (f32: `train` builds its Ddp without one). ZeRO-1
//!   keeps every gradient whole until its step (its slices are views). With --accum > 1
//!   the f32 sums (4Ψ) come on top of one micro-batch's gradients.
//! - AdamW moments 8Ψ (DDP), of this rank's parameters (`sharded`: whole parameters,
//!   largest first to the least loaded rank) or slices (ZeRO-1: Ψ/N).
//! - Activations the hand-written backward keeps per block (`model::block`): x, h1, qkv
//!   (3d), y, x2, h2, the SwiGLU's a, b, s (3·d_ff) and the probabilities (heads·t) per
//!   token (where the bf16 attention is tiled, at multiples of 64 tokens: each head's
//!   log-sum-exp instead); the head's input and norm (2d) and the logits with their
//!   gradient (2·vocab). A block's backward adds its own temporaries.
//! - `sharded`'s step with clipping scales a f32 copy of every gradient (`seam::clip::scale`)
//!   and each owner's parameters travel as one flat f32 buffer; ZeRO-1 gathers its flat
//!   parts into a f32 buffer. Above one rank NCCL's own buffers ([`NCCL_RESERVE`]) and
//!   ZeRO-1's copy-engine reduce-scatter slots, (N−1)/N of its in-place bf16 gradients.
//!
//! The peak is the largest of five moments of the step ([`Phase`]), or, for a step captured
//! as one CUDA graph, of six: [`Phase::Captured`]; a row lists what is held at that moment. What is not counted: the CUDA context, cuBLASLt's 32 MiB workspace
//! per stream, allocator rounding. It is an estimate of the peak, not a bound.

use crate::attention::Attention;
pub use crate::input::Input;
use crate::shape::{mul, sum, u, Kind};
use crate::strategy::max_load;
pub use crate::strategy::{paper, Strategy};

/// Gradients this large are reduced where they lie (`ddp::launch::IN_PLACE_MIN`).
pub const IN_PLACE_MIN: u64 = 1 << 16;
/// Stages between a bucket's launch and its use (`ddp::REDUCE_LAG`).
pub const REDUCE_LAG: u64 = 2;
/// NCCL's own buffers per rank above one rank: an estimate (channels × peers ×
/// NCCL_BUFFSIZE), not yet measured.
pub const NCCL_RESERVE: u64 = 512 << 20;
/// The world sizes a refusal considers.
pub const WORLDS: [usize; 4] = [1, 2, 4, 8];

/// The moments of a step at which memory can peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Head,
    LastBlock,
    FirstBlock,
    Embedding,
    Optimizer,
    /// A captured step, whose graph holds the step's activations and its gradients at
    /// once. Measured (docs/results/big-h200x4.md, calls 86-87): the graph's own memory is
    /// the activations plus every gradient, within 2 % at xl and 6.7B, for ZeRO-2 too; its
    /// memory nodes do not take what the activations, or the gradients ZeRO-2 scatters,
    /// free for the gradients made after them, as the eager pool does.
    Captured,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Head => "head's backward",
            Phase::LastBlock => "last block's backward",
            Phase::FirstBlock => "first block's backward",
            Phase::Embedding => "embedding's backward",
            Phase::Optimizer => "optimizer step",
            Phase::Captured => "captured step",
        }
    }
}

/// What one GPU holds at one moment, by component.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bytes {
    pub masters: u64,
    pub copies: u64,
    pub grads: u64,
    pub optimizer: u64,
    pub activations: u64,
    pub comm: u64,
}

impl Bytes {
    pub fn total(&self) -> u64 {
        [
            self.masters,
            self.copies,
            self.grads,
            self.optimizer,
            self.activations,
            self.comm,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// One strategy's plan: what is held at its peak, and where that is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub strategy: Strategy,
    pub world: usize,
    pub bytes: Bytes,
    pub at: Phase,
}

impl Row {
    pub fn peak(&self) -> u64 {
        self.bytes.total()
    }
}

/// Strategy `s`'s plan for `i` (`single` at world 1 whatever `i.world`).
pub fn plan(i: &Input, s: Strategy) -> Row {
    use Strategy::*;
    let world = if s == Single { 1 } else { i.world.max(1) };
    let (w, multi) = (u(world), world > 1);
    let sh = &i.shape;
    let e: u64 = if i.bf16 { 2 } else { 4 };
    let psi = sh.params();
    let (l, d, f, v) = (u(sh.layers), u(sh.d_model), u(sh.d_ff), u(sh.vocab));
    let (h, t) = (u(sh.heads), u(sh.context));
    let table = mul(v, d);
    let ddp_split = s == Ddp
        && i.ddp_split
            .unwrap_or(crate::DDP_SPLIT_WORLDS.contains(&world));
    let scattered = matches!(s, Zero1 | Zero2 | Fsdp) || ddp_split;
    let split = matches!(s, Zero2 | Fsdp);
    let wire = if s == Sharded { 4 } else { e };
    let own = |k: Kind| if k == Kind::Linear { e } else { 4 };
    let flat = |n: u64| multi && (n < IN_PLACE_MIN || (scattered && !n.is_multiple_of(w)));
    // One tensor's synchronised gradient: (held as a gradient, held in a flat buffer).
    let grad = |&(n, k): &(u64, Kind)| match (multi, flat(n)) {
        (false, _) => (mul(n, own(k)), 0),
        (true, true) => (0, mul(n, wire)),
        (true, false) => (mul(n, wire), 0),
    };
    let group = |ts: &[(u64, Kind)]| {
        let g: Vec<(u64, u64)> = ts.iter().map(grad).collect();
        (sum(g.iter().map(|x| x.0)), sum(g.iter().map(|x| x.1)))
    };
    let (g_blk, c_blk) = group(&sh.block_tensors());
    let (g_head, c_head) = group(&[(d, Kind::Norm), (table, Kind::Linear)]);
    let (g_emb, c_emb) = group(&[(table, Kind::Embedding)]);
    let g_all = sum([g_emb, mul(l, g_blk), g_head]);
    let c_flat = sum([c_emb, mul(l, c_blk), c_head]);
    // ZeRO-2 and FSDP keep only this rank's part of each gradient once it is scattered.
    let part = |x: u64| if split { x.div_ceil(w) } else { x };
    let tensors = sh.tensors();
    let flat_elems = sum(tensors.iter().filter(|t| flat(t.0)).map(|t| t.0));
    let flat_part = flat_elems.div_ceil(w);
    // ZeRO-1 and ZeRO-2 with sharded masters, in bf16 above one rank: the masters of the
    // parameters sharded in place and read through their bf16 copies (all but the
    // embedding table) are each rank's part alone (zero1::masters).
    let released = match (s, multi && i.bf16 && i.sharded_masters) {
        (Zero1 | Zero2, true) => sum(tensors
            .iter()
            .filter(|t| !flat(t.0) && t.1 != Kind::Embedding)
            .map(|t| t.0)),
        _ => 0,
    };
    let masters = match s {
        Zero1 | Zero2 => sum([
            mul(psi - released, 4),
            mul(released / w, 4),
            mul(flat_part, 4),
        ]),
        Fsdp => mul(psi.div_ceil(w), 4),
        _ => mul(psi, 4),
    };
    // The sharded optimizer's largest rank: the whole parameters it owns.
    let owned = match s {
        Sharded => max_load(&tensors.iter().map(|t| t.0).collect::<Vec<_>>(), w),
        _ => 0,
    };
    let optimizer = match s {
        Single | Ddp => mul(psi, 8),
        Sharded => mul(owned, 8),
        Zero1 | Zero2 => {
            let mine = sum(tensors.iter().filter(|t| !flat(t.0)).map(|t| t.0 / w));
            mul(sum([mine, flat_part]), 8)
        }
        Fsdp => mul(psi.div_ceil(w), 8),
    };
    // Activations: per block, per token (8d + 3f + heads·t) elements kept, or with the tiled
    // bf16 attention ([`crate::attention`]) 8d + 3f and each head's f32 log-sum-exp
    // (2·heads bf16 elements); a backward's temporaries (3f + 9d with either bf16 attention
    // kernel, else 3f + 13d + 2·heads·t; the tiled kernel's backward adds the dSᵀ of every
    // pair of 64-token tiles, heads·(t + 64)/2 bf16 elements a token).
    let n = mul(u(i.rows), t);
    let kernel = crate::attention(i.bf16, sh.context, sh.head_dim());
    let kept_attn = match kernel {
        Some(Attention::Tiled) => mul(2, h),
        _ => mul(h, t),
    };
    let a_b = mul(mul(n, e), sum([mul(8, d), mul(3, f), kept_attn]));
    let tmp = match kernel {
        Some(Attention::Tiled) => sum([mul(3, f), mul(9, d), mul(h, t + 64) / 2]),
        Some(Attention::Whole) => sum([mul(3, f), mul(9, d)]),
        None => sum([mul(3, f), mul(13, d), mul(2, mul(h, t))]),
    };
    let t_b = mul(mul(n, e), tmp);
    let head_act = sum([mul(mul(n, d), 2 * e), mul(mul(n, v), 2 * e)]);
    // A block's input (n·d elements; the embedding's upstream gradient is as large).
    let x_b = mul(mul(n, d), e);
    // Per block until its backward: what it keeps, or (checkpointed) its input alone; and
    // what its backward holds beyond that (checkpointed: the rest, made again).
    let (kept, again) = match i.checkpointed {
        true => (x_b, a_b.saturating_sub(x_b)),
        false => (a_b, 0),
    };
    // The f32 embedding gradient while its wire copy is made.
    let emb_cast = if multi && wire == 2 { mul(table, 4) } else { 0 };
    let acc = if i.accum > 1 { mul(psi, 4) } else { 0 };
    let in_backward = !i.clip && ((s == Single && i.accum == 1) || (s == Ddp && !ddp_split));
    let window = |stages: u64| mul(l.min(stages), g_blk);
    // bf16 weights: AdamW's copies, or (sharded) casts held from the forward to each
    // block's backward; FSDP: two stage buffers (this stage and the next, gathered from
    // the masters' parts: no copy kept).
    let copies = |p: Phase| -> u64 {
        if !i.bf16 && s != Fsdp {
            return 0;
        }
        match s {
            Sharded => match p {
                Phase::Head => mul(psi.saturating_sub(table), 2),
                Phase::LastBlock => mul(psi.saturating_sub(sum([mul(table, 2), d])), 2),
                Phase::FirstBlock => mul(sh.block_params(), 2),
                _ => 0,
            },
            // On one rank nothing is sharded: the whole copies, as single's.
            Fsdp if !multi => mul(psi, if i.bf16 { 2 } else { 0 }),
            // Every stage kept after the forward: every released parameter whole (all
            // but the embedding table); else depth + 1 stage buffers and one for each
            // stage kept (counted as blocks).
            Fsdp => match i.fsdp_gathers {
                (keep, _) if keep >= sh.layers => mul(psi.saturating_sub(table), e),
                (keep, depth) => {
                    let stage = sh.block_params().max(table);
                    let unit = i
                        .fsdp_unit
                        .unwrap_or_else(|| crate::fsdp_unit(mul(stage, e)))
                        .max(1);
                    let buffers = (1 + depth) * unit + keep.div_ceil(unit) * unit;
                    mul(mul(stage, u(buffers)), e)
                }
            },
            _ => mul(psi, 2),
        }
    };
    // ZeRO-1's (and split DDP's) copy-engine reduce-scatters: a window slot per peer's part;
    // ZeRO-2's and FSDP's reuse the windows of launches already waited for, and are not
    // counted (0.31-1.14 GiB at world 2: xl and 6.7B, docs/results/gpus-s46.md);
    // split DDP's gather buffers where it has them (DDP_SPLIT_WINDOW_WORLDS, _EARLY_WORLDS).
    let ce = i
        .ce_slots
        .unwrap_or(crate::CE_REDUCE_WORLDS.contains(&world));
    let sent: Vec<u64> = tensors.iter().map(|t| t.0).filter(|&n| !flat(n)).collect();
    let slots = (s == Zero1 || ddp_split) && multi && wire == 2 && ce;
    let slots = sum(sent.iter().map(|&n| mul(n / w, mul(2, w - 1)))) * u64::from(slots);
    let win = [
        crate::DDP_SPLIT_WINDOW_WORLDS,
        crate::DDP_SPLIT_EARLY_WORLDS,
    ];
    let win = ddp_split && win.iter().any(|ws| ws.contains(&world));
    let windows = sum(sent.iter().map(|&n| mul(n, wire))) * u64::from(win);
    let nccl = mul(sum([NCCL_RESERVE, slots, windows]), u64::from(multi));
    // Full gradients in flight before their reduce-scatter frees them (ZeRO-2, FSDP).
    let in_flight = mul(1 + REDUCE_LAG, g_blk.max(g_head).max(g_emb)) * u64::from(split && multi);
    let comm = |c: u64| sum([nccl, c, in_flight]);
    let step_extra = match s {
        Sharded => mul(owned, 4),
        Zero1 if multi => mul(mul(flat_part, w), 4),
        _ => 0,
    };
    let scaled = mul(psi, 4) * u64::from(s == Sharded && i.clip);
    let at = |p: Phase, grads: u64, activations: u64, c: u64| Bytes {
        masters,
        copies: copies(p),
        grads: sum([grads, acc]),
        optimizer,
        activations,
        comm: comm(c),
    };
    let mut phases = vec![
        (
            Phase::Head,
            at(
                Phase::Head,
                part(g_head),
                sum([mul(l, kept), head_act]),
                c_head,
            ),
        ),
        (
            Phase::LastBlock,
            at(
                Phase::LastBlock,
                part(sum([g_head, g_blk])),
                sum([mul(l, kept), again, t_b]),
                sum([c_head, c_blk]),
            ),
        ),
    ];
    let (first, emb) = match in_backward {
        true => (
            window(1 + REDUCE_LAG),
            sum([window(REDUCE_LAG), g_emb, emb_cast]),
        ),
        false => (
            part(sum([g_head, mul(l, g_blk)])),
            sum([part(g_all), emb_cast]),
        ),
    };
    let c_first = sum([c_head, mul(l, c_blk)]);
    phases.push((
        Phase::FirstBlock,
        at(Phase::FirstBlock, first, sum([kept, again, t_b]), c_first),
    ));
    phases.push((Phase::Embedding, at(Phase::Embedding, emb, x_b, c_flat)));
    if !in_backward {
        let g = sum([part(g_all), scaled]);
        let c = sum([c_flat, step_extra]);
        phases.push((Phase::Optimizer, at(Phase::Optimizer, g, 0, c)));
    }
    // Measured only where AdamW runs after the backward; `sharded` never captures. ZeRO-2
    // and FSDP free each gradient once scattered, and a graph reuses what it frees
    // (model-check's probe, call 90): their eager phases hold. With sharded masters the
    // one captured step measured (ZeRO-1, xl, world 4, call 88: 13.29 GiB, its graph
    // 4.09) peaked where the eager phases put it. On one rank nothing is scattered, so
    // ZeRO-2 and FSDP hold every gradient as single does (call 137).
    let holds = s != Sharded && !(split && multi);
    if i.captured && !in_backward && holds && released == 0 {
        let grads = sum([g_head, mul(l, g_blk), acc]);
        let bytes = Bytes {
            masters,
            copies: copies(Phase::FirstBlock),
            grads,
            optimizer,
            activations: sum([mul(l, kept), again, t_b]),
            comm: sum([nccl, c_first]),
        };
        phases.push((Phase::Captured, bytes));
    }
    let (at, bytes) = phases
        .into_iter()
        .fold(None::<(Phase, Bytes)>, |best, (p, b)| match best {
            Some((_, m)) if m.total() >= b.total() => best,
            _ => Some((p, b)),
        })
        .expect("at least one phase");
    Row {
        strategy: s,
        world,
        bytes,
        at,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
