//! The multi-process CPU backend ("cpu-proc") beside Gloo (the PyTorch anchor's
//! `gloo_allreduce.py` lines, when it ran in the same call), NCCL and the in-process
//! backend ("cpu", threads), per rank count and message size.

use crate::allreduce::human_bytes;
use crate::allreduce_run::CPU_PROC;
use crate::records::{AllReduceRecord, TorchAllReduce};
use anyhow::Result;
use std::fmt::Write;

fn find<'a>(
    recs: &'a [AllReduceRecord],
    backend: &str,
    r: &AllReduceRecord,
) -> Option<&'a AllReduceRecord> {
    recs.iter()
        .find(|x| x.backend == backend && x.world == r.world && x.bytes == r.bytes)
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// Writes the comparison table; nothing when no cpu-proc records are there.
pub fn side_by_side(
    md: &mut String,
    recs: &[AllReduceRecord],
    gloo: &[TorchAllReduce],
) -> Result<()> {
    let mine: Vec<&AllReduceRecord> = recs.iter().filter(|r| r.backend == CPU_PROC).collect();
    if mine.is_empty() {
        return Ok(());
    }
    md.push_str(
        "### CPU processes beside Gloo and NCCL\n\n\
         Ours: `cpu-proc`, one process per rank, ring over loopback TCP. Gloo: PyTorch's \
         Gloo all-reduce, one process per rank (`run.sh gloo`; median of per-iteration \
         slowest-rank times; ours: mean of back-to-back iterations, slowest rank). \
         Threads: our in-process backend. NCCL: GPUs, when the same run has them.\n\n\
         | ranks | size | ours: time (µs) | ours: busbw (GB/s) | Gloo: time (µs) | Gloo: busbw (GB/s) | ours ÷ Gloo busbw | threads: busbw | NCCL: busbw |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in mine {
        let mib = r.bytes as f64 / (1u64 << 20) as f64;
        let g = gloo
            .iter()
            .find(|t| t.world == r.world && (t.mib - mib).abs() < 1e-6);
        writeln!(
            md,
            "| {} | {} | {:.1} | {:.2} | {} | {} | {} | {} | {} |",
            r.world,
            human_bytes(r.bytes),
            r.time_us,
            r.busbw_gbs,
            cell(g.map(|t| t.time_us()), 1),
            cell(g.map(|t| t.busbw_gbs), 2),
            cell(g.map(|t| r.busbw_gbs / t.busbw_gbs), 2),
            cell(find(recs, "cpu", r).map(|x| x.busbw_gbs), 2),
            cell(find(recs, "nccl", r).map(|x| x.busbw_gbs), 2),
        )?;
    }
    if gloo.is_empty() {
        md.push_str(
            "\nNo Gloo lines in this run (`run.sh gloo` writes them on a machine with PyTorch).\n",
        );
    }
    md.push('\n');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gloo_lines_parse_and_sit_beside_ours() {
        let line = r#"{"mode": "allreduce", "backend": "gloo", "world": 2, "MiB": 1.0, "us": 900.0, "algbw_GBs": 1.1, "busbw_GBs": 1.1}"#;
        let g: TorchAllReduce = serde_json::from_str(line).unwrap();
        assert!(g.is_gloo() && (g.time_us() - 900.0).abs() < 1e-9);
        let r = AllReduceRecord {
            bench: "allreduce".into(),
            backend: CPU_PROC.into(),
            world: 2,
            bytes: 1 << 20,
            iters: 5,
            time_us: 300.0,
            algbw_gbs: 3.3,
            busbw_gbs: 3.3,
            correct: true,
            device: "cpu".into(),
        };
        let mut md = String::new();
        side_by_side(&mut md, &[r], &[g]).unwrap();
        assert!(
            md.contains("| 2 | 1 MiB | 300.0 | 3.30 | 900.0 | 1.10 | 3.00 | – | – |"),
            "{md}"
        );
    }
}
