//! The run's GEMM algorithm table, `gemm-choices.json` in `--out`: which of cuBLASLt's
//! candidates each GEMM shape uses ([`model::gemm::Choice`]). The model times the
//! candidates once per process, and timing noise can make two processes choose
//! differently; two algorithms round differently, so two runs of one configuration part
//! after some steps. Kept with the run (as PyTorch's TunableOp keeps its file), it makes a
//! resumed run compute the bits the uninterrupted one would, and `--gemm-choices FILE`
//! repeats another run's arithmetic. Each rank times its own GEMMs and keeps its own table
//! (rank r > 0 in `gemm-choices.rank<r>.json`). A table holds for one GPU model and
//! cuBLASLt version; off CUDA there is none.

use anyhow::{bail, Context, Result};
use candle_core::Device;
use model::gemm::{self, Table};
use std::path::{Path, PathBuf};

/// Rank 0's table's file name in the run directory.
pub const FILE: &str = "gemm-choices.json";

/// Rank `rank`'s table in `out`.
pub fn path(out: &Path, rank: usize) -> PathBuf {
    match rank {
        0 => out.join(FILE),
        r => out.join(format!("gemm-choices.rank{r}.json")),
    }
}

/// Where rank `rank`'s table comes from: `--gemm-choices FILE` (it must hold here), else
/// the rank's own in the run directory (taken where it holds; otherwise said, and the
/// shapes are timed again). Returns what to say.
pub fn load(out: &Path, rank: usize, from: Option<&Path>, dev: &Device) -> Result<Option<String>> {
    if gemm::identity(dev)?.is_none() {
        return match from {
            Some(f) => bail!(
                "--gemm-choices {}: the table is for CUDA's GEMMs; this run is on {dev:?}",
                f.display()
            ),
            None => Ok(None),
        };
    }
    let (path, given) = match from {
        Some(f) => (f.to_path_buf(), true),
        None => (path(out, rank), false),
    };
    if !given && !path.exists() {
        return Ok(None);
    }
    match Table::apply_file(&path, dev)? {
        Ok(t) => Ok(Some(format!(
            "GEMM algorithms: {} shapes from {}",
            t.choices.len(),
            path.display()
        ))),
        Err(why) if given => bail!("--gemm-choices {}: {why}", path.display()),
        Err(why) => Ok(Some(format!(
            "warning: {}: {why}: the GEMMs are timed again, and the run will not repeat the earlier steps' bits",
            path.display()
        ))),
    }
}

/// Writes the process's table as rank `rank`'s into `out` when it holds more shapes than
/// `written`; returns how many it holds. Nothing off CUDA.
pub fn save(out: &Path, rank: usize, dev: &Device, written: usize) -> Result<usize> {
    let Some(t) = Table::current(dev)? else {
        return Ok(0);
    };
    let n = t.choices.len();
    if n <= written {
        return Ok(written);
    }
    let dest = path(out, rank);
    // Whole or not at all, and durable: temp, fsync, rename, directory fsync.
    checkpoint::write_atomic(&dest, t.to_json().as_bytes())
        .with_context(|| format!("writing {}", dest.display()))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table written on an H100 by session 8's build (its own `Row` type, since replaced
    /// by `model::gemm::Table`) still reads, and writes back the same JSON.
    #[test]
    fn tables_written_before_read_and_write_back_the_same() {
        let f = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/results/repeat-gpu/call24-bf16-A-gemm-choices.json"
        );
        let text = std::fs::read_to_string(f).unwrap();
        let t: Table = serde_json::from_str(&text).unwrap();
        assert_eq!(Table::read(std::path::Path::new(f)).unwrap(), t);
        assert!(t.identity.contains("H100"), "{}", t.identity);
        assert!(!t.choices.is_empty());
        assert!(t.choices.iter().all(|c| c.dtype == "bf16"));
        let again: serde_json::Value = serde_json::to_value(&t).unwrap();
        let before: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(again, before);
    }
}
