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
use model::gemm::{self, Choice};
use serde::{Deserialize, Serialize};
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

#[derive(Serialize, Deserialize)]
struct Table {
    /// The GPU model and cuBLASLt version the indices are for.
    identity: String,
    choices: Vec<Row>,
}

#[derive(Serialize, Deserialize)]
struct Row {
    m: usize,
    n: usize,
    k: usize,
    ta: bool,
    tb: bool,
    dtype: String,
    add: bool,
    index: usize,
}

/// Where rank `rank`'s table comes from: `--gemm-choices FILE` (it must hold here), else
/// the rank's own in the run directory (taken where it holds; otherwise said, and the
/// shapes are timed again). Returns what to say.
pub fn load(out: &Path, rank: usize, from: Option<&Path>, dev: &Device) -> Result<Option<String>> {
    let Some(here) = gemm::identity(dev)? else {
        return match from {
            Some(f) => bail!(
                "--gemm-choices {}: the table is for CUDA's GEMMs; this run is on {dev:?}",
                f.display()
            ),
            None => Ok(None),
        };
    };
    let (path, given) = match from {
        Some(f) => (f.to_path_buf(), true),
        None => (path(out, rank), false),
    };
    if !given && !path.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let t: Table = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a GEMM choice table", path.display()))?;
    if t.identity != here {
        let why = format!("{} is for {}; this is {here}", path.display(), t.identity);
        if given {
            bail!("--gemm-choices {why}");
        }
        return Ok(Some(format!(
            "warning: {why}: the GEMMs are timed again, and the run will not repeat the earlier steps' bits"
        )));
    }
    let rows: Vec<Choice> = t.choices.into_iter().map(choice).collect();
    gemm::set_choices(&rows).with_context(|| path.display().to_string())?;
    Ok(Some(format!(
        "GEMM algorithms: {} shapes from {}",
        rows.len(),
        path.display()
    )))
}

/// Writes the process's table as rank `rank`'s into `out` when it holds more shapes than
/// `written` (through a temporary file and a rename); returns how many it holds. Nothing
/// off CUDA.
pub fn save(out: &Path, rank: usize, dev: &Device, written: usize) -> Result<usize> {
    let Some(identity) = gemm::identity(dev)? else {
        return Ok(0);
    };
    let all = gemm::choices();
    if all.len() <= written {
        return Ok(written);
    }
    let n = all.len();
    let t = Table {
        identity,
        choices: all.into_iter().map(row).collect(),
    };
    let dest = path(out, rank);
    let tmp = out.join(format!(".gemm-choices.tmp-{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_string_pretty(&t)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &dest).with_context(|| format!("renaming to {}", dest.display()))?;
    Ok(n)
}

fn choice(r: Row) -> Choice {
    Choice {
        m: r.m,
        n: r.n,
        k: r.k,
        ta: r.ta,
        tb: r.tb,
        dtype: r.dtype,
        add: r.add,
        index: r.index,
    }
}

fn row(c: Choice) -> Row {
    Row {
        m: c.m,
        n: c.n,
        k: c.k,
        ta: c.ta,
        tb: c.tb,
        dtype: c.dtype,
        add: c.add,
        index: c.index,
    }
}
