//! What a benchmark's flags will allocate, checked before anything is allocated: the
//! generic checks are `model::budget`'s (shared with `train` and `bench ddp-check`); here the
//! benchmarks' own needs.

pub use model::budget::{ensure, Mem};

use crate::single::Precision;
use anyhow::{anyhow, Result};

/// Checks `ranks` ranks of a training-step benchmark at `batch` sequences per rank, for
/// every size and precision asked for, of `vocab` tokens where given (`bench single
/// --vocab`; else the size's): CPU ranks share the host's memory; a GPU rank has its GPU,
/// and its token ids still pass through the host.
pub fn ensure_lm(
    flags: &str,
    gpu: bool,
    ranks: usize,
    sizes: &[String],
    dtypes: &[Precision],
    batch: usize,
    vocab: Option<usize>,
) -> Result<()> {
    for size in sizes {
        let cfg =
            crate::ddp::config_vocab(size, vocab).map_err(|e| anyhow!("--size {size}: {e}"))?;
        for &d in dtypes {
            let flags = format!("{flags} (size {size}, {})", d.name());
            let bf16 = d == Precision::Bf16;
            model::budget::ensure_lm_step(&flags, &cfg, batch, bf16, gpu, ranks)?;
        }
    }
    Ok(())
}

/// The bytes a collective sweep holds at its largest message, `copies` buffers of the
/// message's size on each rank (all of them on the host for CPU ranks, one GPU's own).
pub fn collective(bytes: usize, copies: u64, ranks: usize, gpu: bool) -> Option<u64> {
    let per_rank = (bytes as u64).checked_mul(copies)?;
    if gpu {
        Some(per_rank)
    } else {
        per_rank.checked_mul(ranks as u64)
    }
}
