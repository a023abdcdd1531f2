//! `cargo xtask plan --model SIZE`: the per-GPU memory plan of every data-parallel strategy
//! for one of the LM's named sizes, the same table (and the same arithmetic, the `memplan`
//! crate) `train` checks a run against before it builds the model: f32 masters, bf16
//! copies, gradients, optimizer state, activations and communication buffers at each
//! strategy's peak, beside the ZeRO paper's figure, against `--free-gib` per GPU.

use anyhow::{bail, Result};
use memplan::{Input, Shape, Strategy, WORLDS};
use serde_json::{json, Value};

#[derive(clap::Args, Debug, Clone)]
pub struct LmArgs {
    /// Print the memory plan per data-parallel strategy of this LM size (small, medium,
    /// large, xl, 2.7B, 6.7B, 13B) instead of the CS336 accounting.
    #[arg(long, conflicts_with_all = ["config", "d_model", "d_ff", "num_blocks"])]
    pub model: Option<String>,
    /// With --model: ranks (GPUs) [default: 1].
    #[arg(long, allow_negative_numbers = true)]
    pub world: Option<i64>,
    /// With --model: sequences in one micro-batch on each GPU (train's --global-batch /
    /// (world × accum)) [default: 8].
    #[arg(long, allow_negative_numbers = true)]
    pub batch: Option<i64>,
    /// With --model: micro-batches a step [default: 1].
    #[arg(long, allow_negative_numbers = true)]
    pub accum: Option<i64>,
    /// With --model: bf16 compute (f32 masters), as train --bf16.
    #[arg(long)]
    pub bf16: bool,
    /// With --model: no clipping (train --clip 0: single and DDP run AdamW inside the
    /// backward).
    #[arg(long)]
    pub no_clip: bool,
    /// With --model: the plan of an eager step (train --eager) instead of a step captured
    /// as one CUDA graph (train's default on CUDA), whose graph holds the activations and
    /// the gradients at once.
    #[arg(long)]
    pub eager: bool,
    /// With --model: ZeRO-1 and ZeRO-2 keep the whole f32 masters (train with
    /// ZERO1_MASTERS=whole) instead of each rank's part of those they shard (train's
    /// default).
    #[arg(long)]
    pub whole_masters: bool,
    /// With --model: FSDP keeps each stage's forward gather for the backward (train with
    /// FSDP_RESHARD_AFTER_FORWARD=0).
    #[arg(long)]
    pub fsdp_keep: bool,
    /// With --model: activation checkpointing (train --activation-checkpointing): each
    /// block keeps only its input from the forward.
    #[arg(long)]
    pub activation_checkpointing: bool,
    /// With --model: FSDP keeps the last K stages' forward gathers for the backward (train's
    /// FSDP_KEEP_LAST) [default: 0].
    #[arg(long, allow_negative_numbers = true)]
    pub fsdp_keep_last: Option<i64>,
    /// With --model: stages FSDP gathers ahead, 1 to 4 (train's FSDP_PREFETCH) [default: 1].
    #[arg(long, allow_negative_numbers = true)]
    pub fsdp_prefetch: Option<i64>,
    /// With --model: stages FSDP gathers as one unit, 1 to 8 (train's FSDP_UNIT) [default:
    /// as many as make 200 MB, memplan::fsdp_unit].
    #[arg(long, allow_negative_numbers = true)]
    pub fsdp_unit: Option<i64>,
    /// With --model: vocabulary [default: 10000].
    #[arg(long, allow_negative_numbers = true)]
    pub vocab: Option<i64>,
    /// With --model: tokens a sequence [default: 128].
    #[arg(long, allow_negative_numbers = true)]
    pub context: Option<i64>,
    /// With --model: GiB free on each GPU, what the plans are checked against [default: 80].
    #[arg(long, allow_negative_numbers = true)]
    pub free_gib: Option<f64>,
    /// With --model: the step time per GPU on paper instead (memplan::time: DDP and ZeRO-1
    /// at 1 to 64 GPUs, from measured rates; --batch × --context tokens a GPU, bf16).
    #[arg(long)]
    pub project: bool,
    /// With --project: the GPU whose measured rates to take, h100 or h200 [default: h100].
    #[arg(long)]
    pub gpu: Option<String>,
}

fn positive(flag: &str, v: Option<i64>, default: i64, max: i64) -> Result<usize> {
    let v = v.unwrap_or(default);
    if v <= 0 || v > max {
        bail!("{flag} must be an integer from 1 to {max}, got {v}");
    }
    Ok(v as usize)
}

impl LmArgs {
    /// The plan's input and the GiB free, or `None` without --model (then none of the
    /// plan flags may be given).
    pub fn resolve(&self) -> Result<Option<(Input, u64)>> {
        let Some(name) = &self.model else {
            let given = [
                ("--world", self.world.is_some()),
                ("--batch", self.batch.is_some()),
                ("--accum", self.accum.is_some()),
                ("--bf16", self.bf16),
                ("--no-clip", self.no_clip),
                ("--eager", self.eager),
                ("--whole-masters", self.whole_masters),
                ("--fsdp-keep", self.fsdp_keep),
                ("--activation-checkpointing", self.activation_checkpointing),
                ("--fsdp-keep-last", self.fsdp_keep_last.is_some()),
                ("--fsdp-prefetch", self.fsdp_prefetch.is_some()),
                ("--fsdp-unit", self.fsdp_unit.is_some()),
                ("--vocab", self.vocab.is_some()),
                ("--context", self.context.is_some()),
                ("--free-gib", self.free_gib.is_some()),
                ("--project", self.project),
                ("--gpu", self.gpu.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|g| g.1) {
                bail!("{flag} belongs to the memory plan: give --model SIZE too");
            }
            return Ok(None);
        };
        if self.gpu.is_some() && !self.project {
            bail!("--gpu belongs to the projection: give --project too");
        }
        let vocab = positive("--vocab", self.vocab, 10_000, 1 << 32)?;
        let context = positive("--context", self.context, 128, 1 << 20)?;
        let Some(shape) = Shape::by_name(name, vocab, context) else {
            bail!(
                "--model: unknown size '{name}' (known: {})",
                memplan::size_names()
            );
        };
        let free = self.free_gib.unwrap_or(80.0);
        if !(free.is_finite() && free > 0.0 && free < 1e9) {
            bail!("--free-gib must be a finite number > 0 (GiB), got {free}");
        }
        let input = Input {
            shape,
            world: positive("--world", self.world, 1, 1 << 20)?,
            rows: positive("--batch", self.batch, 8, 1 << 24)?,
            accum: positive("--accum", self.accum, 1, 1 << 24)?,
            bf16: self.bf16,
            clip: !self.no_clip,
            captured: !self.eager,
            sharded_masters: !self.whole_masters,
            fsdp_gathers: (
                match (self.fsdp_keep, self.fsdp_keep_last) {
                    (true, Some(_)) => {
                        bail!("--fsdp-keep keeps every stage: drop --fsdp-keep-last")
                    }
                    (true, None) => usize::MAX,
                    (false, None) => 0,
                    (false, Some(k)) if k >= 0 => k as usize,
                    (false, Some(k)) => bail!("--fsdp-keep-last must be 0 or more, got {k}"),
                },
                positive("--fsdp-prefetch", self.fsdp_prefetch, 1, 4)?,
            ),
            fsdp_unit: match self.fsdp_unit {
                None => None,
                u => Some(positive("--fsdp-unit", u, 1, 8)?),
            },
            // As train by default (COMM_CE_REDUCE unset).
            ce_slots: None,
            ddp_split: None,
            checkpointed: self.activation_checkpointing,
        };
        Ok(Some((input, (free * (1u64 << 30) as f64) as u64)))
    }
}

/// The table and which built strategies fit at world 1, 2, 4, 8 (same sequences per GPU).
pub fn text(i: &Input, free: u64) -> String {
    let fits = memplan::fitting(i, free, &|_| Some(i.rows));
    format!(
        "{}Built strategies that fit at world {} with {} sequences a micro-batch per GPU: {}.\n",
        memplan::table(i, Some(free)),
        WORLDS.map(|w| w.to_string()).join(", "),
        i.rows,
        memplan::fitting_text(&fits, i, free)
    )
}

/// The same as one JSON object.
pub fn json(i: &Input, free: u64) -> Value {
    let rows: Vec<Value> = Strategy::ALL
        .iter()
        .map(|&s| {
            let r = memplan::plan(i, s);
            let b = r.bytes;
            json!({
                "strategy": s.name(), "built": s.built(), "world": r.world,
                "masters": b.masters, "copies": b.copies, "grads": b.grads,
                "optimizer": b.optimizer, "activations": b.activations, "comm": b.comm,
                "peak": r.peak(), "peak_at": r.at.name(), "paper": memplan::paper(i, s),
                "fits": r.peak() <= free,
            })
        })
        .collect();
    let fits = memplan::fitting(i, free, &|_| Some(i.rows));
    json!({
        "model": {"d_model": i.shape.d_model, "d_ff": i.shape.d_ff, "layers": i.shape.layers,
                  "heads": i.shape.heads, "vocab": i.shape.vocab, "context": i.shape.context,
                  "parameters": i.shape.params()},
        "world": i.world, "batch": i.rows, "accum": i.accum, "bf16": i.bf16, "clip": i.clip,
        "free_bytes": free,
        "rows": rows,
        "fit": fits.iter().map(|(s, w)| json!({"strategy": s.name(), "worlds": w})).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use crate::plan::PlanArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: PlanArgs,
    }

    fn parse(args: &[&str]) -> anyhow::Result<T> {
        let mut v = vec!["plan"];
        v.extend_from_slice(args);
        Ok(T::try_parse_from(v)?)
    }

    fn err(args: &[&str]) -> String {
        match parse(args) {
            Ok(t) => format!("{:#}", t.a.lm.resolve().expect_err("should fail")),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_plan_mode_prints_every_strategy_and_what_fits() {
        let t = parse(&["--model", "6.7B", "--world", "4", "--batch", "8", "--bf16"]).unwrap();
        let (i, free) = t.a.lm.resolve().unwrap().unwrap();
        assert_eq!(
            (i.world, i.rows, i.accum, i.bf16, i.clip),
            (4, 8, 1, true, true)
        );
        assert_eq!(free, 80 << 30);
        let text = super::text(&i, free);
        for row in [
            "single ",
            "ddp (bucketed:MB",
            "sharded ",
            "zero1 ",
            "zero2 ",
            "fsdp ",
        ] {
            assert!(text.contains(row), "{row}: {text}");
        }
        let fit = text.lines().last().unwrap();
        assert!(
            fit.contains("zero1 at world 2, 4, 8")
                && fit.contains("zero2 at world")
                && fit.contains("fsdp at world 2, 4, 8"),
            "{fit}"
        );
        assert!(
            !fit.contains("ddp"),
            "6.7B bf16 under DDP does not fit 80 GiB: {fit}"
        );
        let v = super::json(&i, free);
        assert_eq!(v["rows"].as_array().unwrap().len(), 6);
        assert_eq!(v["rows"][1]["fits"], false);
        // Without --model: the CS336 accounting, as before.
        assert!(parse(&[]).unwrap().a.lm.resolve().unwrap().is_none());
    }

    #[test]
    fn plan_mode_flags_are_checked_naming_the_flag() {
        let e = err(&["--model", "huge"]);
        assert!(
            e.contains("--model: unknown size 'huge'") && e.contains("13B"),
            "{e}"
        );
        assert!(err(&["--world", "4"]).contains("--world belongs to the memory plan"));
        assert!(err(&["--bf16"]).contains("--bf16"));
        assert!(err(&["--model", "xl", "--world", "0"]).contains("--world must be"));
        assert!(err(&["--model", "xl", "--batch", "-8"]).contains("--batch must be"));
        assert!(err(&["--model", "xl", "--free-gib", "nan"]).contains("--free-gib"));
        assert!(err(&["--model", "xl", "--d-model", "8"]).contains("--d-model"));
        assert!(err(&["--gpu", "h200"]).contains("--gpu belongs to the memory plan"));
        assert!(err(&["--model", "xl", "--gpu", "h200"]).contains("give --project too"));
        let t = parse(&["--model", "xl", "--project", "--gpu", "a100"]).unwrap();
        assert!(
            t.a.lm.resolve().is_ok(),
            "the GPU is checked where the rates are taken"
        );
        let e = crate::plan::run(&t.a).unwrap_err().to_string();
        assert!(
            e.contains("--gpu \"a100\"") && e.contains("h100 and h200"),
            "{e}"
        );
    }
}
