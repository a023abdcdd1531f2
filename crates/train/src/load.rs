//! A trained model from a checkpoint, on one process (the `sample` command): the run's
//! configuration from `train.safetensors`, the weights from the DDP file or the zero1
//! parameters file.

use crate::config::TrainConfig;
use crate::state;
use anyhow::{Context, Result};
use candle_core::{DType, Device};
use checkpoint::{Checkpoint, Part};
use model::TransformerLm;
use seam::StagedModel;
use std::path::{Path, PathBuf};

/// The step directory `sample --out` names: the newest complete checkpoint of a run
/// directory (each one skipped said on stderr), or `out` itself (a step directory).
pub fn step_dir(out: &Path) -> Result<PathBuf> {
    if !out.is_dir() {
        anyhow::bail!(
            "--out {}: no such directory (a run directory, or one of its checkpoints/step-N)",
            out.display()
        );
    }
    let ckpts = out.join("checkpoints");
    if !ckpts.is_dir() {
        return Ok(out.to_path_buf());
    }
    let (found, skipped) = state::newest(&ckpts)?;
    for s in skipped {
        eprintln!("train: skipping a checkpoint that cannot be used: {s}");
    }
    Ok(found
        .with_context(|| format!("no complete checkpoint under {}", ckpts.display()))?
        .1)
}

/// The model of the checkpoint in step directory `dir`, for a vocabulary of `vocab`.
pub fn model(dir: &Path, vocab: usize, dev: &Device) -> Result<(TransformerLm, TrainConfig)> {
    let (_, c) = state::read(dir)?;
    let mut m = TransformerLm::new(c.model.lm_config(vocab)?, c.seed, dev)?;
    let vars = m.params().vars().to_vec();
    let md = state::manifest_dir(dir);
    if md != dir {
        // The parameters alone, checked, then set one at a time: the optimizer's files are
        // not read.
        let ck = Checkpoint::open(&md)?;
        zero1::checkpoint::check_params(&ck, &zero1::checkpoint::shapes(&vars))?;
        zero1::checkpoint::Params::Verified(ck).set(&vars)?;
    } else {
        // The parameters alone: the moments' bytes are summed as they pass, never held.
        let keep = |k: &str, _: &[usize], _: &_| match k.starts_with("param/") {
            true => Part::Whole,
            false => Part::Skip,
        };
        let t = Checkpoint::open(dir)?.load_parts(ddp::checkpoint::FILE, keep)?;
        for (name, v) in m.params().names().iter().zip(&vars) {
            let w = t.get(&format!("param/{name}")).with_context(|| {
                format!(
                    "checkpoint {}: no parameter {name} (trained with another vocabulary?)",
                    dir.display()
                )
            })?;
            if w.dims() != v.dims() {
                anyhow::bail!("checkpoint {}: parameter {name} has shape {:?}, the model {:?} (another tokenizer?)", dir.display(), w.dims(), v.dims());
            }
            v.set(&w.to_device(dev)?.to_dtype(DType::F32)?)?;
        }
    }
    if c.bf16 {
        m.set_compute_dtype(DType::BF16);
    }
    Ok((m, c))
}
