//! What `cargo xtask bench` runs: the `bench` runs ([`bench_runs`]) and `run.sh
//! train-speed`'s cases ([`train_speed_cases`]). `cargo xtask gpu-pack` writes both for the
//! GPU machines without Rust (bench-runs-N.tsv, train-speed-N.tsv), which run.sh's `full`
//! job reads: one list for both paths.

use anyhow::Result;

/// One `run.sh train-speed` of `cargo xtask bench --gpus N`.
#[derive(Debug, PartialEq)]
pub struct TrainSpeedCase {
    /// Rows of 128 tokens a GPU (TS_BATCH).
    pub batch: usize,
    /// World sizes (TS_WORLDS): 1, then 2, 4, 8 ... below N, then N.
    pub worlds: String,
    /// `--strategy` values (TS_STRATEGIES).
    pub strategies: &'static str,
    /// PyTorch's trainers above world 1 (TS_TORCH_PARALLEL).
    pub torch_parallel: &'static str,
}

/// The `train run` speed cases on `gpus` GPUs: at 8 rows a GPU every strategy at every
/// world, PyTorch DDP and FSDP2 beside them; above one GPU also 32 rows a GPU at worlds 1
/// and N (single, DDP, ZeRO-1; PyTorch DDP), where the step is long enough to hide the
/// collectives.
pub fn train_speed_cases(gpus: usize) -> Vec<TrainSpeedCase> {
    let mut worlds = vec![1];
    let mut w = 2;
    while w < gpus {
        worlds.push(w);
        w *= 2;
    }
    if gpus > 1 {
        worlds.push(gpus);
    }
    let worlds: Vec<String> = worlds.iter().map(|w| w.to_string()).collect();
    let mut cases = vec![TrainSpeedCase {
        batch: 8,
        worlds: worlds.join(" "),
        strategies: match gpus {
            1 => "single bucketed:25 zero1",
            _ => "single bucketed:25 zero1 zero2 fsdp",
        },
        torch_parallel: "ddp fsdp2",
    }];
    if gpus > 1 {
        cases.push(TrainSpeedCase {
            batch: 32,
            worlds: format!("1 {gpus}"),
            strategies: "single bucketed:25 zero1",
            torch_parallel: "ddp",
        });
    }
    cases
}

/// Every benchmark run of `cargo xtask bench`, as `bench` arguments (each appends to
/// `results`): on `gpus` GPUs at xl, or (`gpus` 0) the same pipeline on the CPU backend with
/// the tiny LM (no speed claim: it shows the whole report on a laptop).
pub fn bench_runs(
    gpus: usize,
    results: &str,
    out_dir: &std::path::Path,
) -> Result<Vec<Vec<String>>> {
    let prof = out_dir.join("profile").to_string_lossy().to_string();
    let traces = out_dir.join("traces").to_string_lossy().to_string();
    let (g, g2) = (gpus.to_string(), gpus.min(2).to_string());
    let ranks: Vec<String> = [2usize, 4, 6, 8]
        .iter()
        .filter(|&&r| r <= gpus)
        .map(|r| r.to_string())
        .collect();
    let ranks = ranks.join(",");
    // One GPU: no all-reduce (the report says why); DDP (overlapped, bucketed at 25 MB) and
    // ZeRO-1 over NCCL at world 1.
    let sweep: Vec<&str> = match gpus {
        1 => vec!["--strategies", "overlap,bucketed", "--buckets-mb", "25"],
        _ => vec![],
    };
    let runs: Vec<Vec<&str>> = if gpus > 0 {
        let mut runs = vec![
            vec!["allreduce", "--backend", "nccl", "--ranks", &ranks],
            vec![
                "single",
                "--size",
                "xl",
                "--dtype",
                "fp32,bf16",
                "--mode",
                "step",
            ],
            // Every strategy and bucket size, with traces.
            vec![
                "ddp",
                "--backend",
                "nccl",
                "--ranks",
                &g,
                "--size",
                "xl",
                "--dtype",
                "fp32,bf16",
                "--trace-dir",
                &traces,
            ]
            .into_iter()
            .chain(sweep)
            .collect(),
            vec![
                "zero1",
                "--backend",
                "nccl",
                "--ranks",
                &g2,
                "--size",
                "xl",
                "--dtype",
                "fp32,bf16",
                "--bucket-mb",
                "1",
                "--modes",
                "ddp,sharded,zero1-overlap,zero1-ahead",
            ],
            vec![
                "profile",
                "--size",
                "xl",
                "--dtype",
                "fp32",
                "--mode",
                "step",
                "--svg-dir",
                &prof,
            ],
        ];
        if ranks.is_empty() {
            runs.remove(0);
        }
        runs
    } else {
        let tiny = ["--size", "tiny", "--warmup", "1", "--steps", "3"];
        vec![
            // Ranks as processes (the multi-process backend, the seeds' Gloo setting) ...
            vec![
                "allreduce",
                "--backend",
                "cpu",
                "--ranks",
                "2,4,6",
                "--sizes-mib",
                "0.5,1,10,50",
                "--warmup",
                "2",
                "--iters",
                "5",
            ],
            // ... and as threads of one process (the in-process backend).
            vec![
                "allreduce",
                "--backend",
                "cpu",
                "--threads",
                "--ranks",
                "2,4",
                "--sizes-mib",
                "0.5,1,10,50",
                "--warmup",
                "2",
                "--iters",
                "5",
            ],
            [
                &["single", "--cpu", "--dtype", "fp32", "--mode", "step"][..],
                &tiny,
            ]
            .concat(),
            [
                &[
                    "ddp",
                    "--backend",
                    "cpu",
                    "--ranks",
                    "2",
                    "--dtype",
                    "fp32",
                    "--buckets-mb",
                    "0.01,0.1,1",
                ][..],
                &tiny,
            ]
            .concat(),
            [
                &[
                    "zero1",
                    "--backend",
                    "cpu",
                    "--ranks",
                    "2",
                    "--bucket-mb",
                    "0.1",
                ][..],
                &tiny,
            ]
            .concat(),
            vec![
                "profile",
                "--cpu",
                "--size",
                "tiny",
                "--dtype",
                "fp32",
                "--mode",
                "step",
                "--svg-dir",
                &prof,
            ],
        ]
    };
    Ok(runs
        .into_iter()
        .map(|r| {
            r.into_iter()
                .chain(["--out", results])
                .map(String::from)
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::{bench_runs, train_speed_cases};
    use std::path::Path;

    #[test]
    fn train_speed_covers_every_world_and_both_batches() {
        let one = train_speed_cases(1);
        assert_eq!((one.len(), one[0].worlds.as_str()), (1, "1"));
        let four = train_speed_cases(4);
        assert_eq!(four[0].worlds, "1 2 4");
        assert!(four[0].strategies.ends_with("zero2 fsdp"));
        assert_eq!((four[1].batch, four[1].worlds.as_str()), (32, "1 4"));
        assert_eq!(train_speed_cases(8)[0].worlds, "1 2 4 8");
        assert_eq!(train_speed_cases(6)[0].worlds, "1 2 4 6");
    }

    #[test]
    fn one_gpu_runs_everything_but_the_all_reduce() {
        let one = bench_runs(1, "r.jsonl", Path::new("out")).unwrap();
        let names: Vec<&str> = one.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(names, ["single", "ddp", "zero1", "profile"]);
        let ddp = one[1].join(" ");
        assert!(
            ddp.contains("--ranks 1") && ddp.contains("--strategies overlap,bucketed"),
            "{ddp}"
        );
        let two = bench_runs(2, "r.jsonl", Path::new("out")).unwrap();
        assert_eq!(two[0][..5].join(" "), "allreduce --backend nccl --ranks 2");
        assert!(
            !two[2].join(" ").contains("--strategies"),
            "every strategy on 2 GPUs"
        );
    }
}
