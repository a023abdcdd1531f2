//! What a run's flags will allocate, checked before anything is allocated (`bench`,
//! `train`, `ddp-train`): a run that cannot fit fails with an error naming the flags and
//! the bytes needed against the bytes there are, instead of an abort, an OOM kill or a
//! "capacity overflow" panic halfway through.
//!
//! The needs are lower bounds (what the run certainly holds at once), so a refusal is
//! sure; the memory is the CPU's `MemAvailable` (/proc/meminfo) or, for GPU runs, the
//! smallest GPU's total memory (`nvidia-smi`; not checked when that cannot be read).

use crate::config::LmConfig;
use anyhow::{bail, Result};
use std::process::Command;
/// Where a run's big buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mem {
    Host,
    Gpu,
}

/// The bytes `mem` offers and where that figure comes from; `None` when unknown.
pub fn available(mem: Mem) -> Option<(u64, &'static str)> {
    match mem {
        Mem::Host => std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| mem_available(&t))
            .map(|b| (b, "MemAvailable in /proc/meminfo")),
        Mem::Gpu => {
            let out = Command::new("nvidia-smi")
                .args(["--query-gpu=memory.total", "--format=csv,noheader,nounits"])
                .output()
                .ok()
                .filter(|o| o.status.success())?;
            smallest_gpu(&String::from_utf8_lossy(&out.stdout))
                .map(|b| (b, "the smallest GPU's total memory (nvidia-smi)"))
        }
    }
}

/// `MemAvailable:  23737488 kB` → bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// nvidia-smi's `memory.total` lines (MiB) → the smallest, in bytes.
fn smallest_gpu(csv: &str) -> Option<u64> {
    csv.lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .min()
        .map(|mib| mib << 20)
}

pub fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Fails, naming `flags`, when `need` bytes (`None`: more than a u64 holds) exceed what
/// `mem` offers.
pub fn ensure(flags: &str, need: Option<u64>, mem: Mem) -> Result<()> {
    check(flags, need, mem, available(mem))
}

fn check(flags: &str, need: Option<u64>, mem: Mem, avail: Option<(u64, &str)>) -> Result<()> {
    let place = match mem {
        Mem::Host => "memory",
        Mem::Gpu => "GPU memory",
    };
    let Some(need) = need else {
        bail!("{flags}: the run would need more {place} than 2^64 bytes");
    };
    match avail {
        Some((have, source)) if need > have => bail!(
            "{flags}: the run needs at least {} ({need} bytes) of {place}; {} ({have} bytes) \
             available ({source})",
            gib(need),
            gib(have)
        ),
        _ => Ok(()),
    }
}

/// What one rank certainly holds during a training step of `cfg` on `batch` sequences:
/// weights, gradients and the two AdamW moments (14 bytes a parameter at least) and the
/// logits with their gradient (2 × batch × context × vocab elements of the compute dtype).
pub fn lm_step(cfg: &LmConfig, batch: usize, bf16: bool) -> Option<u64> {
    let elem = if bf16 { 2 } else { 4 };
    let logits = tokens(cfg, batch)?
        .checked_mul(cfg.vocab as u64)?
        .checked_mul(2 * elem)?;
    (cfg.param_count() as u64)
        .checked_mul(14)?
        .checked_add(logits)
}

/// The host-side token ids of a batch (inputs and targets, u32).
pub fn lm_ids(cfg: &LmConfig, batch: usize) -> Option<u64> {
    tokens(cfg, batch)?.checked_mul(8)
}

fn tokens(cfg: &LmConfig, batch: usize) -> Option<u64> {
    (batch as u64).checked_mul(cfg.context as u64)
}

/// Checks one rank of an LM training step at `rows` sequences a micro-batch, before the
/// model is built: on its GPU (`gpu`; the token ids still pass through the host), or on
/// the host for `host_ranks` ranks sharing it ([`ranks_in_this_process`]).
pub fn ensure_lm_step(
    flags: &str,
    cfg: &LmConfig,
    rows: usize,
    bf16: bool,
    gpu: bool,
    host_ranks: usize,
) -> Result<()> {
    let step = lm_step(cfg, rows, bf16);
    if gpu {
        ensure(flags, step, Mem::Gpu)?;
        return ensure(flags, lm_ids(cfg, rows), Mem::Host);
    }
    ensure(
        flags,
        step.and_then(|s| s.checked_mul(host_ranks as u64)),
        Mem::Host,
    )
}

/// How many of `world` ranks run in this process: one under a launcher (`RANK` set: each
/// rank is a process of its own), else all of them (threads).
pub fn ranks_in_this_process(world: usize) -> usize {
    match std::env::var_os("RANK") {
        Some(_) => 1,
        None => world,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_nvidia_smi_are_read() {
        let t = "MemTotal:       32000000 kB\nMemAvailable:   23737488 kB\n";
        assert_eq!(mem_available(t), Some(23737488 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(smallest_gpu("81559\n143771\n"), Some(81559 << 20));
        assert_eq!(smallest_gpu(""), None);
    }

    #[test]
    fn a_need_above_what_there_is_names_the_flag_and_both_sizes() {
        let have = Some((1u64 << 30, "test"));
        let e = check("--batch 9", Some(3 << 30), Mem::Host, have).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("--batch 9:") && msg.contains("3.0 GiB"),
            "{msg}"
        );
        assert!(msg.contains("1.0 GiB") && msg.contains("test"), "{msg}");
        assert!(check("--batch 9", Some(1 << 20), Mem::Host, have).is_ok());
        assert!(check("--x", None, Mem::Gpu, None).is_err());
        assert!(
            check("--x", Some(u64::MAX), Mem::Gpu, None).is_ok(),
            "unknown: not checked"
        );
    }

    #[test]
    fn the_lm_bound_stays_below_what_a_step_was_measured_to_hold() {
        // tiny, batch 64, one CPU step: 279 MB max RSS measured; small, batch 1: 2.27 GB.
        let tiny = LmConfig::tiny(crate::VOCAB);
        assert!(lm_step(&tiny, 64, false).unwrap() < 279_000_000);
        let small = LmConfig::by_name("small").unwrap();
        assert!(lm_step(&small, 1, false).unwrap() < 2_265_000_000);
        assert_eq!(lm_step(&small, usize::MAX, false), None);
    }
}
