//! Model FLOPs utilization, as nanoGPT and torchtitan print it: the measured tokens/s ×
//! the model's training FLOPs a token (`memplan::Shape::flops_per_token`) ÷ the GPUs'
//! bf16 dense peak (`memplan::peak`). Only for bf16 runs on a GPU the table knows: an fp32
//! run, the CPU and an unknown GPU have none, rather than one against a guessed peak.

use crate::config::ModelShape;
use anyhow::Result;
use candle_core::Device;

/// What turns a run's tokens/s into its MFU.
#[derive(Debug, Clone, PartialEq)]
pub struct Mfu {
    flops_per_token: f64,
    /// Every rank's GPU's peak together, FLOP/s.
    peak: f64,
    /// The GPU and its peak, for the closing line.
    pub gpu: String,
}

impl Mfu {
    /// For `model` over a vocabulary of `vocab`, in bf16 where `bf16`, on `world` GPUs like
    /// `dev`; `None` where there is no MFU to give (fp32, the CPU, a GPU not in
    /// `memplan::peak`).
    pub fn of(
        model: &ModelShape,
        bf16: bool,
        vocab: usize,
        world: usize,
        dev: &Device,
    ) -> Result<Option<Self>> {
        let Some(name) = seam::device::name(dev)?.filter(|_| bf16) else {
            return Ok(None);
        };
        let Some(p) = model::plan::peak::of(&name) else {
            return Ok(None);
        };
        Ok(Some(Self::new(model, vocab, world, &name, p.bf16)?))
    }

    /// For `model` over `vocab` tokens on `world` GPUs named `name`, of `peak` bf16 FLOP/s
    /// each.
    pub fn new(
        model: &ModelShape,
        vocab: usize,
        world: usize,
        name: &str,
        peak: f64,
    ) -> Result<Self> {
        Ok(Self {
            flops_per_token: model.lm_config(vocab)?.shape().flops_per_token(),
            peak: peak * world as f64,
            gpu: format!("{name}'s bf16 dense peak, {:.0} TFLOP/s a GPU", peak / 1e12),
        })
    }

    /// The fraction of the peak that `tokens_per_s` (over every rank) makes.
    pub fn at(&self, tokens_per_s: f64) -> f64 {
        tokens_per_s * self.flops_per_token / self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::shape_by_name;

    #[test]
    fn xl_at_its_measured_step_makes_the_mfu_the_flops_give() {
        let xl = shape_by_name("xl", Some(128)).unwrap();
        let m = Mfu::new(&xl, 683, 1, "NVIDIA H200", 989e12).unwrap();
        let fpt = xl.lm_config(683).unwrap().shape().flops_per_token();
        // 8 × 128 tokens in 39.60 ms (call 342).
        let tps = 1024.0 / 0.0396;
        assert!((m.at(tps) - tps * fpt / 989e12).abs() < 1e-12);
        assert!((0.3..0.4).contains(&m.at(tps)), "{}", m.at(tps));
        // Four GPUs at four times the tokens make the same MFU.
        let m4 = Mfu::new(&xl, 683, 4, "NVIDIA H200", 989e12).unwrap();
        assert!((m4.at(4.0 * tps) - m.at(tps)).abs() < 1e-12);
        assert!(Mfu::of(&xl, true, 683, 1, &Device::Cpu).unwrap().is_none());
    }
}
