//! The report's `train run` section: what a user's training loop runs at (run.sh
//! train-speed's `{"bench":"train"}` records, the median step of a real `train run`,
//! clipping on) beside `bench single`'s step without clipping and the PyTorch trainer
//! (torch_train_best.py, mode `train-best`: nanoGPT's loop with torch.compile), all from
//! the same run.

use super::plot;
use crate::records::TorchStep;
use crate::single::{AdamwPlace, Mode, SingleRecord};
use anyhow::Result;
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::Path;

/// One `train run` measured by run.sh train-speed.
#[derive(Debug, Clone, Deserialize)]
pub struct TrainRecord {
    pub size: String,
    pub dtype: String,
    pub strategy: String,
    pub world: usize,
    /// Micro-batches per step (`--accum`; 1 where absent).
    #[serde(default = "crate::records::one")]
    pub accum: usize,
    pub batch: usize,
    pub seq: usize,
    pub step_ms: f64,
    #[serde(default)]
    pub graph: bool,
    #[serde(default)]
    pub adamw: Option<String>,
    #[serde(default)]
    pub norm: Option<String>,
    /// The data's vocabulary (the model's embedding and head).
    #[serde(default)]
    pub vocab: Option<usize>,
    /// Each rank's peak GPU memory, GiB (tensors and graphs), by rank; empty in records
    /// written before train printed it.
    #[serde(default)]
    pub peak_gib: Vec<f64>,
    /// Each rank's peak after its first (eager) step: the captured steps'; empty in records
    /// written before train printed it.
    #[serde(default)]
    pub peak_after_first_gib: Vec<f64>,
    /// The NCCL our ranks loaded above world 1 ("2.28.9"; from train's step line).
    #[serde(default)]
    pub nccl: Option<String>,
}

#[cfg(test)]
impl TrainRecord {
    /// The tests' record: xl bf16, `single` at world 1, 8 rows, 41.6 ms.
    pub(crate) fn xl_single() -> Self {
        serde_json::from_str(
            r#"{"size":"xl","dtype":"bf16","strategy":"single","world":1,"batch":8,"seq":128,"step_ms":41.6,"graph":true,"vocab":683}"#,
        )
        .unwrap()
    }
}

/// `bench single`'s step for `r`'s size, dtype and batch and the same vocabulary (the last
/// such record): without clipping, or with it (`--clip 1`: the norm taken, AdamW after);
/// the same model, or no ratio.
pub fn bench_single<'a>(
    singles: &'a [SingleRecord],
    r: &TrainRecord,
    clip: bool,
) -> Option<&'a SingleRecord> {
    singles
        .iter()
        .filter(|s| s.size == r.size && s.dtype.name() == r.dtype && !s.tf32)
        .filter(|s| Some(s.vocab) == r.vocab && s.batch == r.batch)
        .rfind(|s| {
            s.mode == Mode::Step
                && match clip {
                    false => s.norm.is_none() && s.adamw != AdamwPlace::After,
                    true => s.norm.is_some() && s.adamw == AdamwPlace::After,
                }
        })
}

/// A `bench single` record's median step (its mean where it has no median).
pub fn median(s: &SingleRecord) -> f64 {
    s.step_median_ms.unwrap_or(s.step_ms.0)
}

/// ", vocabulary N (`train`'s data)" where a record's model is not the size's own.
pub fn vocab_note(r: &SingleRecord) -> String {
    match r.vocab == model::VOCAB {
        true => String::new(),
        false => format!(", vocabulary {} (`train`'s data)", r.vocab),
    }
}

/// The PyTorch trainer's lines (any variant, DDP or FSDP2, any world size) for `r`'s size
/// and dtype, micro-batches and rows a GPU (8 where the line gives no global batch; a line
/// without a world size is one GPU's).
pub fn trainer_lines<'a>(
    torch: &'a [TorchStep],
    r: &'a TrainRecord,
) -> impl Iterator<Item = &'a TorchStep> {
    torch
        .iter()
        .filter(|t| t.mode == "train-best" && t.size == r.size && t.dtype == r.dtype)
        .filter(|t| t.accum == r.accum)
        .filter(|t| {
            let ranks = t.world.unwrap_or(1) * t.accum;
            t.global_batch.map_or(8, |g| g / ranks) == r.batch
        })
}

/// The fastest of [`trainer_lines`] at `r`'s world size.
fn trainer<'a>(torch: &'a [TorchStep], r: &'a TrainRecord) -> Option<&'a TorchStep> {
    trainer_lines(torch, r)
        .filter(|t| t.world.unwrap_or(1) == r.world)
        .min_by(|a, b| a.step_ms.total_cmp(&b.step_ms))
}

pub fn section(
    md: &mut String,
    recs: &[TrainRecord],
    singles: &[SingleRecord],
    torch: &[TorchStep],
    out: &Path,
) -> Result<()> {
    if recs.is_empty() {
        return Ok(());
    }
    let first = &recs[0];
    let versions: std::collections::BTreeSet<&str> =
        recs.iter().filter_map(|r| r.nccl.as_deref()).collect();
    let nccl = match versions.is_empty() {
        true => String::new(),
        false => format!(
            " Above world 1 our ranks loaded NCCL {} (each record's `nccl`); PyTorch its own.",
            versions.into_iter().collect::<Vec<_>>().join(", ")
        ),
    };
    writeln!(
        md,
        "## `train run`: what a user's training runs at\n\n\
         The median step of `train run` (steps 6 on; rows of {} tokens, the rows a GPU \
         shown, clipping at 1.0, the default), against `bench single`'s step at the same \
         rows, without clipping and with it (`--clip 1`: the same work), on the same model (its \
         vocabulary that of `train`'s data; the median over the same window, 5 warm-up \
         steps then as many as `train run` times, where its record has a median, else its \
         mean) and the PyTorch trainer \
         (`torch_train_best.py`: nanoGPT's loop with SDPA, torch.compile, fused AdamW, \
         clipping, the schedule and the loss read every step; its fastest variant), all \
         from this run. DDP and ZeRO-1 rows run over NCCL at the world size shown, with \
         the batch above per GPU: above world 1, × `bench single` is the step against one \
         GPU's (what the ranks' communication costs), and the PyTorch trainer is DDP at \
         the same world size under torchrun.{}\n\n\
         Peak GiB: the largest of the ranks' peak GPU memory (tensors and captured \
         graphs; NCCL's buffers and the CUDA context aside), against the memory plan \
         train checks a run against (`memplan`).\n\n\
         | size | dtype | strategy | world | rows a GPU | step ms | × `bench single` | × `bench single --clip 1` | PyTorch trainer ms | × PyTorch trainer | graph | AdamW | norm | peak GiB | plan GiB | peak ÷ plan |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|",
        first.seq, nccl
    )?;
    let mut bars: Vec<(String, f64)> = Vec::new();
    for r in recs {
        // One micro-batch's step is no measure of several: no ratio to bench single there.
        let single = bench_single(singles, r, false).filter(|_| r.accum == 1);
        let clipped = bench_single(singles, r, true).filter(|_| r.accum == 1);
        let torch = trainer(torch, r);
        let strategy = match r.accum {
            1 => r.strategy.clone(),
            a => format!("{}, --accum {a}", r.strategy),
        };
        let ratio = |d: Option<f64>| d.map_or("-".into(), |d| format!("{:.3}", r.step_ms / d));
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.size,
            r.dtype,
            strategy,
            r.world,
            r.batch,
            r.step_ms,
            ratio(single.map(median)),
            ratio(clipped.map(median)),
            torch.map_or("-".into(), |t| format!("{:.2}", t.step_ms)),
            ratio(torch.map(|t| t.step_ms)),
            if r.graph { "yes" } else { "no" },
            r.adamw.as_deref().unwrap_or("-"),
            r.norm.as_deref().unwrap_or("-"),
            super::train_memory::cells(r),
        )?;
        if let Some(t) = torch {
            let world = match r.world {
                1 => String::new(),
                w => format!(", world {w}"),
            };
            bars.push((
                format!("{} {} {strategy}{world}", r.size, r.dtype),
                r.step_ms / t.step_ms,
            ));
        }
    }
    md.push('\n');
    if !bars.is_empty() {
        let svg = "train-vs-pytorch.svg";
        plot::bars(
            &out.join(svg),
            "train run against the PyTorch trainer, same run",
            "step time / PyTorch trainer's (lower is faster)",
            &bars,
        )?;
        writeln!(md, "![train run against the PyTorch trainer]({svg})\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(extra: &str) -> SingleRecord {
        let base = r#"{"bench":"single","size":"xl","dtype":"bf16","mode":"step","params":2000000000,"vocab":683,"batch":8,"seq":128,"steps":35,"fwd_ms":[40.0,0.5],"bwd_ms":[0.0,0.0],"opt_ms":[0.0,0.0],"step_ms":[40.0,0.5],"tokens_per_s":25600.0,"mfu":null,"peak_fwd_gib":null,"peak_step_gib":29.1,"loss_first":9.2,"loss_last":9.1,"graph":true,"adamw":"in-backward""#;
        serde_json::from_str(&format!("{base}{extra}}}")).unwrap()
    }

    fn train() -> TrainRecord {
        TrainRecord::xl_single()
    }

    fn table(s: &SingleRecord) -> String {
        let (mut md, dir) = (String::new(), std::env::temp_dir());
        section(&mut md, &[train()], std::slice::from_ref(s), &[], &dir).unwrap();
        md
    }

    fn torch(world: Option<usize>, step_ms: f64) -> TorchStep {
        let w = world.map_or(String::new(), |w| format!(r#""world":{w},"#));
        serde_json::from_str(&format!(
            r#"{{"mode":"train-best",{w}"variant":"compile-ro","size":"xl","dtype":"bf16","step_ms":{step_ms},"peak_GiB":30.0}}"#
        ))
        .unwrap()
    }

    #[test]
    fn the_table_sets_each_peak_beside_the_memory_plan() {
        let md = table(&single(""));
        assert!(md.contains("| peak GiB | plan GiB | peak ÷ plan |"), "{md}");
    }

    #[test]
    fn the_nccl_our_ranks_loaded_is_named() {
        assert!(!table(&single("")).contains("loaded NCCL"));
        let r = TrainRecord {
            nccl: Some("2.28.9".into()),
            ..train()
        };
        let (mut md, dir) = (String::new(), std::env::temp_dir());
        section(&mut md, &[train(), r], &[single("")], &[], &dir).unwrap();
        assert!(md.contains("our ranks loaded NCCL 2.28.9 ("), "{md}");
    }

    #[test]
    fn the_ratio_takes_bench_singles_median_as_train_runs_step_is() {
        // 41.6 / 41.0 (the median), not 41.6 / 40.0 (the mean).
        let md = table(&single(r#","step_median_ms":41.0"#));
        assert!(md.contains("| 41.60 | 1.015 |"), "{md}");
        // Records written before the median: the mean.
        let md = table(&single(""));
        assert!(md.contains("| 41.60 | 1.040 |"), "{md}");
    }

    #[test]
    fn each_world_size_is_set_beside_the_pytorch_trainer_of_its_own() {
        let at2 = TrainRecord {
            strategy: "bucketed:25".into(),
            world: 2,
            step_ms: 45.0,
            ..train()
        };
        // One GPU's trainer is the faster line, but world 2 is set beside DDP's (50 ms), and
        // world 1 beside one GPU's (a line without a world size is one GPU's).
        let t = [torch(Some(2), 50.0), torch(None, 40.0)];
        let dir = tempfile::tempdir().unwrap(); // the bars' plot is written there
        let mut md = String::new();
        section(&mut md, &[train(), at2], &[single("")], &t, dir.path()).unwrap();
        assert!(
            md.contains("| xl | bf16 | bucketed:25 | 2 | 8 | 45.00 | 1.125 | - | 50.00 | 0.900 |"),
            "{md}"
        );
        assert!(
            md.contains("| xl | bf16 | single | 1 | 8 | 41.60 | 1.040 | - | 40.00 | 1.040 |"),
            "{md}"
        );
    }

    #[test]
    fn rows_a_gpu_pick_the_bench_single_and_trainer_of_the_same_rows() {
        let at4 = TrainRecord {
            strategy: "zero1".into(),
            world: 4,
            step_ms: 42.0,
            ..train()
        };
        // bench single at 32 rows, and with clipping at 8 rows (42.0 = 1.000 of it); the
        // trainer's 32-row line at world 4 (global batch 128) is not the 8-row one's (32).
        let (mut s32, mut clip) = (single(""), single(r#","norm":"after""#));
        s32.batch = 32;
        clip.adamw = AdamwPlace::After;
        clip.step_ms.0 = 42.0;
        let mut t32 = torch(Some(4), 170.0);
        t32.global_batch = Some(128);
        let mut t8 = torch(Some(4), 130.0);
        t8.global_batch = Some(32);
        let dir = tempfile::tempdir().unwrap();
        let mut md = String::new();
        let singles = [single(""), clip, s32];
        section(&mut md, &[at4], &singles, &[t32, t8], dir.path()).unwrap();
        assert!(
            md.contains("| xl | bf16 | zero1 | 4 | 8 | 42.00 | 1.050 | 1.000 | 130.00 | 0.323 |"),
            "{md}"
        );
    }

    #[test]
    fn accumulation_is_set_beside_the_pytorch_trainer_that_accumulates_as_much() {
        let acc = TrainRecord {
            accum: 4,
            step_ms: 150.0,
            ..train()
        };
        let mut t4 = torch(None, 200.0);
        t4.accum = 4;
        let dir = tempfile::tempdir().unwrap();
        let mut md = String::new();
        let t = [torch(None, 40.0), t4];
        section(&mut md, &[train(), acc], &[single("")], &t, dir.path()).unwrap();
        // Not against bench single's one micro-batch, nor the trainer without accumulation.
        assert!(
            md.contains(
                "| xl | bf16 | single, --accum 4 | 1 | 8 | 150.00 | - | - | 200.00 | 0.750 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| single | 1 | 8 | 41.60 | 1.040 | - | 40.00 | 1.040 |"),
            "{md}"
        );
    }
}
