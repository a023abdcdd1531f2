//! What a run's flags will allocate, checked before anything is allocated (`bench`,
//! `train`, `bench ddp-check`): a run that cannot fit fails with an error naming the flags and
//! the bytes needed against the bytes there are, instead of an abort, an OOM kill or a
//! "capacity overflow" panic halfway through.
//!
//! Two kinds of need. [`lm_step`] is a lower bound (what a step certainly holds at once),
//! so a refusal on it is sure (bench (ddp-check too), and `train` on CPU ranks). [`ensure_plan`]
//! checks a GPU rank of `train` against the memory plan of its strategy
//! ([`crate::plan`], the `memplan` crate): an estimate of the step's real peak, so a
//! refusal says it is the plan's estimate and names the strategies and world sizes that
//! would fit. The memory is the CPU's `MemAvailable` (/proc/meminfo) or, for GPU runs, the
//! memory *free* on the GPU: the rank's own device where candle has it (cuMemGetInfo,
//! `cuda` builds), else the smallest `memory.free` of the GPUs `CUDA_VISIBLE_DEVICES`
//! lets the run see (`nvidia-smi`); not checked when neither can be read.

use crate::config::LmConfig;
use anyhow::{anyhow, bail, Result};
use candle_core::Device;
use std::process::Command;
/// Where a run's big buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mem {
    Host,
    Gpu,
}

/// The bytes `mem` offers and where that figure comes from; `None` when unknown. For the
/// GPU: the memory free on the smallest visible GPU (nvidia-smi).
pub fn available(mem: Mem) -> Option<(u64, String)> {
    match mem {
        Mem::Host => std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| mem_available(&t))
            .map(|b| (b, "MemAvailable in /proc/meminfo".to_string())),
        Mem::Gpu => {
            let out = Command::new("nvidia-smi")
                .args([
                    "--query-gpu=index,uuid,memory.free",
                    "--format=csv,noheader,nounits",
                ])
                .output()
                .ok()
                .filter(|o| o.status.success())?;
            let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
            smallest_free(&String::from_utf8_lossy(&out.stdout), visible.as_deref())
        }
    }
}

/// The memory free on `dev`'s GPU: cuMemGetInfo on the device itself (`cuda` builds), else
/// [`available`]`(Mem::Gpu)`; `None` for the CPU or when unknown.
pub fn free_on(dev: &Device) -> Option<(u64, String)> {
    if !dev.is_cuda() {
        return None;
    }
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = dev {
        let ctx = d.cuda_stream().context().clone();
        if let Ok((free, total)) = ctx.mem_get_info() {
            let at = format!(
                "free on GPU {} (cuMemGetInfo, of {} total)",
                ctx.ordinal(),
                gib(total as u64)
            );
            return Some((free as u64, at));
        }
    }
    available(Mem::Gpu)
}

/// `MemAvailable:  23737488 kB` → bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// nvidia-smi's `index, uuid, memory.free` lines (MiB) → the smallest free memory, in
/// bytes, of the GPUs `visible` names (CUDA_VISIBLE_DEVICES: indices or UUIDs, or their
/// prefixes; the list ends at the first entry that names no GPU, as CUDA reads it; every
/// GPU when unset), and which GPU that is.
fn smallest_free(csv: &str, visible: Option<&str>) -> Option<(u64, String)> {
    let gpus: Vec<(&str, &str, u64)> = csv
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            match f[..] {
                [i, id, mib] => Some((i, id, mib.parse::<u64>().ok()?.checked_mul(1 << 20)?)),
                _ => None,
            }
        })
        .collect();
    let seen: Vec<&(&str, &str, u64)> = match visible {
        None => gpus.iter().collect(),
        Some(v) => v
            .split(',')
            .map(str::trim)
            .map_while(|e| {
                let uuid = e.starts_with("GPU-");
                gpus.iter()
                    .find(|g| g.0 == e || (uuid && g.1.starts_with(e)))
            })
            .collect(),
    };
    let low = seen.iter().min_by_key(|g| g.2)?;
    let which = match visible {
        Some(v) => format!("CUDA_VISIBLE_DEVICES={v}"),
        None => "every GPU".to_string(),
    };
    Some((
        low.2,
        format!(
            "free on GPU {} (nvidia-smi memory.free, the least of {which})",
            low.0
        ),
    ))
}

pub fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Fails, naming `flags`, when `need` bytes (`None`: more than a u64 holds) exceed what
/// `mem` offers.
pub fn ensure(flags: &str, need: Option<u64>, mem: Mem) -> Result<()> {
    let avail = available(mem);
    check(
        flags,
        need,
        mem,
        avail.as_ref().map(|(b, s)| (*b, s.as_str())),
    )
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

/// Checks one GPU rank of an LM training step against its strategy's memory plan
/// ([`crate::plan`]: `chosen`, as `train --strategy` spells it) and the memory free on
/// `dev` ([`free_on`]; not checked when unknown). A refusal shows the plan's row and names
/// the built strategies and world sizes of 1, 2, 4, 8 that would fit (`rows_at(w)`: the
/// sequences a micro-batch at world w, `None` where the batch does not split).
pub fn ensure_plan(
    flags: &str,
    plan: &crate::plan::Input,
    chosen: &str,
    dev: &Device,
    rows_at: &dyn Fn(usize) -> Option<usize>,
) -> Result<()> {
    let s = crate::plan::Strategy::of_train(chosen)
        .ok_or_else(|| anyhow!("{flags}: --strategy {chosen}: no memory plan for it"))?;
    match free_on(dev) {
        Some((free, source)) => {
            crate::plan::check(flags, plan, (s, chosen), (free, &source), rows_at)
                .map_err(|e| anyhow!(e))
        }
        None => Ok(()),
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
        let smi = "0, GPU-aaaa1111, 81000\n1, GPU-bbbb2222, 9000\n2, GPU-cccc3333, 40000\n";
        let (b, at) = smallest_free(smi, None).unwrap();
        assert_eq!(b, 9000 << 20);
        assert!(
            at.starts_with("free on GPU 1 (nvidia-smi memory.free"),
            "{at}"
        );
        assert_eq!(smallest_free(smi, Some("0,2")).unwrap().0, 40000 << 20);
        assert_eq!(smallest_free(smi, Some("GPU-aaaa")).unwrap().0, 81000 << 20);
        // CUDA stops at the first entry that names no GPU: GPU 1 is not visible.
        assert_eq!(smallest_free(smi, Some("0,7,1")).unwrap().0, 81000 << 20);
        assert_eq!(smallest_free(smi, Some("")), None);
        assert_eq!(smallest_free("", None), None);
        assert_eq!(
            smallest_free("81559\n", None),
            None,
            "not the queried columns"
        );
    }

    #[test]
    fn a_run_that_fits_the_total_but_not_the_free_memory_is_refused_naming_the_free_figure() {
        // An 80 GB GPU (81,559 MiB total) with 70 GiB taken by another process.
        let smi = format!("0, GPU-aaaa1111, {}\n", 81559 - 70 * 1024);
        let free = smallest_free(&smi, Some("0")).unwrap();
        let xl = LmConfig::by_name("xl").unwrap();
        let need = lm_step(&xl, 8, true);
        assert!(need.unwrap() < 81559 << 20, "fits the total");
        let e = check("--model xl", need, Mem::Gpu, Some((free.0, &free.1)));
        let msg = e.unwrap_err().to_string();
        assert!(
            msg.contains("9.6 GiB") && msg.contains("free on GPU 0"),
            "{msg}"
        );
        // The plan's check reads the same figure.
        let plan = crate::plan::Input::train_defaults(xl.shape(), 1, 8);
        let single = (crate::plan::Strategy::Single, "single");
        let rows = |w: usize| (w == 1).then_some(8);
        let e = crate::plan::check("--model xl", &plan, single, (free.0, &free.1), &rows);
        let msg = e.unwrap_err();
        assert!(
            msg.contains("9.6 GiB") && msg.contains("free on GPU 0"),
            "{msg}"
        );
        assert!(msg.contains("no strategy fits"), "{msg}");
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
