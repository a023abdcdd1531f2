//! What another trainer needs to start where ours starts (issue 26, parity with PyTorch):
//! the run's configuration as `config.json` (the [`TrainConfig`] as checkpoints hold it)
//! and, on request, the model's initial parameters as `init.safetensors`, f32, under the
//! model's own names (`emb`, `blocks.{l}.{norm1,qkv,o,norm2,w1,w3,w2}`, `norm`, `head`;
//! shapes (out, in) as nn.Linear's weights). `scripts/anchors/torch_train.py` reads both.

use crate::config::TrainConfig;
use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use model::TransformerLm;
use seam::StagedModel;
use std::collections::HashMap;
use std::path::Path;

pub const CONFIG_FILE: &str = "config.json";
pub const INIT_FILE: &str = "init.safetensors";

/// Writes `dir/config.json`: the configuration and the run's identity (`run_id`, which
/// every checkpoint of the run records too).
pub fn config(dir: &Path, c: &TrainConfig, run_id: &str) -> Result<()> {
    let p = dir.join(CONFIG_FILE);
    let mut v = serde_json::to_value(c)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("run_id".into(), run_id.into());
    }
    let text = serde_json::to_string_pretty(&v)? + "\n";
    Ok(checkpoint::write_atomic(&p, text.as_bytes())?)
}

/// Writes the model's parameters as they are now (f32, on the host) to `path`.
pub fn weights(m: &TransformerLm, path: &Path) -> Result<()> {
    let p = m.params();
    let tensors = p
        .names()
        .iter()
        .zip(p.vars())
        .map(|(n, v)| {
            let t = v
                .as_tensor()
                .to_device(&Device::Cpu)?
                .to_dtype(DType::F32)?;
            Ok((n.clone(), t))
        })
        .collect::<Result<HashMap<String, Tensor>>>()?;
    candle_core::safetensors::save(&tensors, path)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::shape_by_name;

    #[test]
    fn the_initial_weights_round_trip_under_the_models_names() {
        let d = tempfile::tempdir().unwrap();
        let shape = shape_by_name("nano", None).unwrap();
        let m = TransformerLm::new(shape.lm_config(50).unwrap(), 7, &Device::Cpu).unwrap();
        let path = d.path().join(INIT_FILE);
        weights(&m, &path).unwrap();
        let t = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
        assert_eq!(t.len(), m.params().len());
        for (n, v) in m.params().names().iter().zip(m.params().vars()) {
            let w = &t[n];
            assert_eq!((w.dims(), w.dtype()), (v.dims(), DType::F32), "{n}");
            let (a, b): (Vec<f32>, Vec<f32>) = (
                w.flatten_all().unwrap().to_vec1().unwrap(),
                v.as_tensor().flatten_all().unwrap().to_vec1().unwrap(),
            );
            assert_eq!(a, b, "{n}");
        }
        assert_eq!(t["blocks.1.qkv"].dims(), [3 * 64, 64]);
        assert_eq!(t["head"].dims(), [50, 64]);
    }
}
