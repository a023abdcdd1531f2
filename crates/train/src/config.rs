//! What a run is: the model's shape, the optimisation and the data-parallel strategy. Saved
//! in every checkpoint; a resume under another configuration is refused naming the fields.

use anyhow::{bail, Context, Result};
use model::LmConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The Transformer's shape (vocabulary from the data).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelShape {
    pub d_model: usize,
    pub layers: usize,
    pub heads: usize,
    pub d_ff: usize,
    pub context: usize,
}

/// Sizes for CPUs (`nano`, `micro`, `mini`), then the seeds' table (`small` … `2.7B`, and
/// the Llama-shaped `6.7B` and `13B`; context 128 unless given).
pub fn shape_by_name(name: &str, context: Option<usize>) -> Result<ModelShape> {
    let cpu: &[(&str, usize, usize, usize, usize, usize)] = &[
        ("nano", 64, 2, 4, 192, 64),
        ("micro", 128, 4, 4, 384, 128),
        ("mini", 256, 6, 8, 768, 256),
    ];
    let s = match cpu.iter().find(|s| s.0.eq_ignore_ascii_case(name)) {
        Some(&(_, d_model, layers, heads, d_ff, ctx)) => ModelShape {
            d_model,
            layers,
            heads,
            d_ff,
            context: ctx,
        },
        None => {
            let c = LmConfig::by_name(name)
                .map_err(|e| anyhow::anyhow!("{e}; or nano, micro, mini"))?;
            ModelShape {
                d_model: c.d_model,
                layers: c.layers,
                heads: c.heads,
                d_ff: c.d_ff,
                context: c.context,
            }
        }
    };
    Ok(ModelShape {
        context: context.unwrap_or(s.context),
        ..s
    })
}

/// A shape from a JSON file: {"d_model": …, "layers": …, "heads": …, "d_ff": …, "context": …}.
pub fn shape_from_file(path: &Path) -> Result<ModelShape> {
    let b =
        std::fs::read(path).with_context(|| format!("reading model config {}", path.display()))?;
    serde_json::from_slice(&b).with_context(|| {
        format!("model config {}: expected {{\"d_model\", \"layers\", \"heads\", \"d_ff\", \"context\"}}", path.display())
    })
}

impl ModelShape {
    pub fn lm_config(&self, vocab: usize) -> Result<LmConfig> {
        let c = LmConfig {
            vocab,
            context: self.context,
            d_model: self.d_model,
            d_ff: self.d_ff,
            layers: self.layers,
            heads: self.heads,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
        };
        c.validate()
            .map_err(|e| anyhow::anyhow!("model shape {self:?}: {e}"))?;
        Ok(c)
    }
}

/// Everything that decides the trajectory (checkpoint cadence and logging excluded).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainConfig {
    pub model: ModelShape,
    pub bf16: bool,
    /// `single`, a ddp strategy (`naive`, `flat`, `overlap`, `bucketed:MB`), `zero1` or
    /// `zero1:MB` (ZeRO-1, buckets of MB; [`ZERO1_BUCKET`] alone), `zero2` or `zero2:MB`
    /// (ZeRO-1's buckets, each bucket's gradients freed once scattered), `fsdp` or
    /// `fsdp:MB` (ZeRO-3: zero2 with the f32 masters and bf16 copies sharded too,
    /// zero1::fsdp) or `sharded` (DDP's all-reduce, then the broadcast sharded optimizer).
    pub strategy: String,
    pub steps: u64,
    /// Windows per optimizer step, over all ranks and micro-batches.
    pub global_batch: usize,
    pub accum: usize,
    pub lr: f64,
    pub min_lr: f64,
    pub warmup: u64,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    /// Clip the global gradient norm to this (0: no clipping).
    pub clip: f64,
    pub eval_every: u64,
    pub eval_batches: usize,
    pub seed: u64,
    /// Activation checkpointing (`--activation-checkpointing`): each block's forward runs
    /// again before its backward, holding one block's activations at a time
    /// (`model::TransformerLm::set_activation_checkpointing`). The same computation made
    /// again: a resume may change it. Absent from older runs' configurations: off.
    #[serde(default)]
    pub activation_checkpointing: bool,
}

impl TrainConfig {
    pub fn validate(&self, world: usize) -> Result<()> {
        if self.accum == 0 {
            bail!("--accum 0: a step takes at least 1 micro-batch");
        }
        crate::sampler::check_split(self.global_batch, world, self.accum)?;
        let numbers = [
            ("lr", self.lr),
            ("min-lr", self.min_lr),
            ("weight-decay", self.weight_decay),
            ("beta1", self.beta1),
            ("beta2", self.beta2),
            ("clip", self.clip),
        ];
        for (flag, v) in numbers {
            if !v.is_finite() {
                bail!("--{flag} {v}: not a finite number");
            }
        }
        for (flag, v) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&v) {
                bail!("--{flag} {v}: AdamW's betas lie in [0, 1)");
            }
        }
        if self.weight_decay < 0.0 {
            bail!("--weight-decay {}: must be >= 0", self.weight_decay);
        }
        if !(self.lr > 0.0 && self.min_lr >= 0.0 && self.min_lr <= self.lr) {
            bail!(
                "--min-lr {} --lr {}: the learning rates must satisfy 0 <= --min-lr <= --lr and --lr > 0",
                self.min_lr,
                self.lr
            );
        }
        let counts = [
            ("steps", self.steps, "a run trains at least one step"),
            (
                "eval-every",
                self.eval_every,
                "validation runs every N >= 1 steps (and at the last)",
            ),
            (
                "eval-batches",
                self.eval_batches as u64,
                "validation needs at least one batch",
            ),
            (
                "context",
                self.model.context as u64,
                "a window holds at least one token",
            ),
        ];
        if let Some((flag, v, why)) = counts.iter().find(|c| c.1 == 0) {
            bail!("--{flag} {v}: {why}");
        }
        if !(self.clip >= 0.0 && self.clip.is_finite()) {
            bail!(
                "--clip {}: a finite number >= 0 (0: no clipping)",
                self.clip
            );
        }
        if zero_buckets(&self.strategy)?.is_none()
            && !["single", "sharded"].contains(&self.strategy.as_str())
        {
            if let Err(e) = self.strategy.parse::<ddp::Strategy>() {
                bail!("--strategy {:?}: {STRATEGIES} ({e})", self.strategy);
            }
        }
        if self.strategy == "single" && world != 1 {
            bail!("strategy single runs on one rank, not {world}");
        }
        Ok(())
    }

    /// What is allowed but probably not meant, one line each (rank 0 prints them).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.warmup > self.steps {
            w.push(format!(
                "--warmup {} is longer than the run (--steps {}): the learning rate never reaches --lr {}",
                self.warmup, self.steps, self.lr
            ));
        }
        w
    }

    /// The fields that differ and forbid a resume ("field: ours vs theirs"): everything
    /// that decided the trajectory so far, or the schedule's shape (model, bf16, global
    /// batch, learning rates, warm-up, AdamW, clipping, seed). [`MAY_CHANGE`] lists the
    /// others.
    pub fn differences(&self, other: &TrainConfig) -> Vec<String> {
        self.compare(other, false)
    }

    /// The fields that differ and may (a resume says so): "field: ours → theirs (what it
    /// means)".
    pub fn changes(&self, other: &TrainConfig) -> Vec<String> {
        self.compare(other, true)
    }

    fn compare(&self, other: &TrainConfig, allowed: bool) -> Vec<String> {
        let (a, b) = (
            serde_json::to_value(self).unwrap(),
            serde_json::to_value(other).unwrap(),
        );
        let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
        let why = |k: &str| MAY_CHANGE.iter().find(|m| m.0 == k).map(|m| m.1);
        a.iter()
            .filter(|(k, v)| b.get(*k) != Some(v) && why(k).is_some() == allowed)
            .map(|(k, v)| {
                let theirs = b.get(k).cloned().unwrap_or_default();
                match why(k) {
                    Some(w) => format!("{k}: {v} → {theirs} ({w})"),
                    None => format!("{k}: {v} vs {theirs}"),
                }
            })
            .collect()
    }
}

/// What a resume may change, and what each change means. The world size is not in the
/// configuration: it may change too (the global batch stays the same).
pub const MAY_CHANGE: [(&str, &str); 6] = [
    (
        "strategy",
        "the optimizer state converts; a replicated checkpoint under sharded is refused",
    ),
    (
        "steps",
        "the cosine schedule stretches: the learning rates from here on are not the original run's",
    ),
    ("eval_every", "when to evaluate only"),
    ("eval_batches", "how much to evaluate only"),
    ("accum", "the same global batch in other micro-batches"),
    (
        "activation_checkpointing",
        "the same computation made again: memory and time only",
    ),
];

/// ZeRO-1's buckets by default: 400 MB. At world 2, xl bf16 (nvidia-h100-x2), a step took
/// 54.55 ms with 25 MB buckets, 50.12 with 100 and 48.61 with 200 (call 71); 48.75 with
/// 200, 48.03 with 400 and 48.01 with 800 (call 74): each bucket's all-gather runs faster
/// the larger it is (about 170 GB/s at 25 MB), and fewer of them queue behind AdamW.
pub const ZERO1_BUCKET: ddp::Strategy = ddp::Strategy::Bucketed {
    bucket_mb: model::plan::time::ZERO1_BUCKET_MB,
};

/// FSDP's buckets by default: 200 MB. They reduce-scatter the gradients only (FSDP gathers
/// stage by stage), and on the one communication stream a large bucket's reduce-scatter
/// holds up the backward's gathers behind it. At world 4, xl bf16 (nvidia-h200-x4, call 99)
/// a step took 51.05 ms with 25 MB buckets, 50.36 with 50, 50.45 with 100, 50.09 with 200
/// and 52.01 with 400. ZeRO-2 keeps ZeRO-1's: its buckets gather too (zero2:50 took 50.74).
pub const FSDP_BUCKET: ddp::Strategy = ddp::Strategy::Bucketed {
    bucket_mb: model::plan::time::FSDP_BUCKET_MB,
};

/// Every `--strategy` train takes, for the error that names a bad one.
pub const STRATEGIES: &str = "expected single, naive, flat, overlap, bucketed:MB (DDP), \
     zero1[:MB], zero2[:MB], fsdp[:MB] or sharded";

/// The ZeRO stage (1, 2, or 3: `fsdp`) and its buckets where `strategy` is `zero1`, `zero2`
/// or `fsdp`
/// ([`ZERO1_BUCKET`]; fsdp [`FSDP_BUCKET`]), or `zero1:MB` or `zero2:MB` (the same buckets reduce-scatter the
/// gradients and all-gather the parameters; ZeRO-2 also frees each bucket's gradients once
/// scattered); `None` for another strategy; an error naming a bad size.
pub fn zero_buckets(strategy: &str) -> Result<Option<(u8, ddp::Strategy)>> {
    for (stage, name) in [(1, "zero1"), (2, "zero2"), (3, "fsdp")] {
        match strategy.strip_prefix(name) {
            Some("") if stage == 3 => return Ok(Some((stage, FSDP_BUCKET))),
            Some("") => return Ok(Some((stage, ZERO1_BUCKET))),
            Some(rest) => match rest.strip_prefix(':') {
                Some(mb) => {
                    let s = ddp::Strategy::Bucketed {
                        bucket_mb: mb.parse().unwrap_or(f64::NAN),
                    };
                    if s.validate().is_err() {
                        bail!("--strategy {name}:{mb}: the bucket size {mb:?} must be a positive, finite number of MB (e.g. {name}:25)");
                    }
                    return Ok(Some((stage, s)));
                }
                None => return Ok(None),
            },
            None => {}
        }
    }
    Ok(None)
}

#[cfg(test)]
impl TrainConfig {
    /// A valid configuration for the unit tests: `model` at 128 tokens, bf16, `strategy`,
    /// `global_batch` sequences a step, 10 steps, the rest small.
    pub(crate) fn for_tests(model: &str, strategy: &str, global_batch: usize) -> Self {
        TrainConfig {
            model: shape_by_name(model, None).unwrap(),
            bf16: true,
            strategy: strategy.into(),
            steps: 10,
            global_batch,
            accum: 1,
            lr: 1e-3,
            min_lr: 1e-4,
            warmup: 1,
            weight_decay: 0.1,
            beta1: 0.9,
            beta2: 0.95,
            clip: 1.0,
            eval_every: 10,
            eval_batches: 1,
            seed: 0,
            activation_checkpointing: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TrainConfig {
        TrainConfig::for_tests("nano", "single", 4)
    }

    /// Each refusal names the flag and the value given.
    #[test]
    fn a_bad_count_or_rate_is_refused_naming_its_flag_and_value() {
        assert!(config().validate(1).is_ok());
        let refuse = |f: &dyn Fn(&mut TrainConfig)| {
            let mut c = config();
            f(&mut c);
            c.validate(1).unwrap_err().to_string()
        };
        type Change<'a> = &'a dyn Fn(&mut TrainConfig);
        let cases: [(Change, &str); 8] = [
            (&|c| c.steps = 0, "--steps 0: "),
            (&|c| c.eval_every = 0, "--eval-every 0: "),
            (&|c| c.eval_batches = 0, "--eval-batches 0: "),
            (&|c| c.model.context = 0, "--context 0: "),
            (&|c| c.global_batch = 0, "--global-batch 0 does not split"),
            (
                &|c| (c.global_batch, c.accum) = (3, 2),
                "--global-batch 3 does not split into 1 ranks × 2",
            ),
            (&|c| c.clip = -1.0, "--clip -1: "),
            (&|c| c.min_lr = 1.0, "--min-lr 1 --lr 0.001: "),
        ];
        for (f, says) in cases {
            let e = refuse(f);
            assert!(e.starts_with(says), "{e}");
        }
    }
}
