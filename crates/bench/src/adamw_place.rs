//! Where `bench single` runs AdamW in a step (`--adamw`): after the backward, stage by
//! stage inside it (model::InBackward), or so on a second CUDA stream (model::SideStream),
//! and the `auto` policy that picks between them from runs 28-31 on nvidia-h200.

use crate::single::{Mode, Precision};
use anyhow::Result;
use candle_core::Device;
use model::{StagedModel, TransformerLm};
use serde::{Deserialize, Serialize};

/// Where AdamW runs in a step (`bench single --adamw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum AdamwPlace {
    /// After the backward, over all gradients (`opt_ms` is its time).
    #[default]
    After,
    /// What measured fastest on nvidia-h200 (docs/results/single-gpu-h200.md, runs
    /// 28-30): `side-stream` for fp32 on CUDA without TF32 (its SIMT GEMMs leave memory
    /// bandwidth to the updates: 2.7B −20 ms, xl −6 ms), `in-backward` otherwise (bf16
    /// and TF32 GEMMs and the updates both want the bandwidth; a second stream gained
    /// at most 0.3 ms there and lost up to 2.6 ms). Records name the place chosen.
    Auto,
    /// Stage by stage inside the backward, on the compute stream (model::InBackward);
    /// `opt_ms` is 0 and `bwd_ms` holds both.
    InBackward,
    /// As `in-backward`, on a second CUDA stream beside the backward (model::SideStream).
    SideStream,
}

/// `--adamw` and the side stream's settings.
#[derive(Debug, Clone, Copy)]
pub struct AdamwOpts {
    pub place: AdamwPlace,
    /// Block cap of the side stream's update kernels (0: their full grid).
    pub side_blocks: u32,
    pub side_lag: usize,
}

impl AdamwOpts {
    /// The place a step of `mode` in `dtype` on `device` runs AdamW (only step mode has
    /// one; `auto` resolved), and the second stream when that place needs one.
    pub fn resolve(
        self,
        mode: Mode,
        dtype: Precision,
        device: &Device,
    ) -> Result<(AdamwPlace, Option<model::SideStream>)> {
        let place = match (mode, self.place) {
            (Mode::Step, AdamwPlace::Auto) => {
                let fp32_simt = dtype == Precision::Fp32 && !model::tf32::tf32();
                if device.is_cuda() && fp32_simt {
                    AdamwPlace::SideStream
                } else {
                    AdamwPlace::InBackward
                }
            }
            (Mode::Step, place) => place,
            _ => AdamwPlace::After,
        };
        Ok((place, self.side(place, device)?))
    }

    /// The second stream `place` needs on `device`, with these settings (none for the
    /// other places).
    pub fn side(&self, place: AdamwPlace, device: &Device) -> Result<Option<model::SideStream>> {
        if place != AdamwPlace::SideStream {
            return Ok(None);
        }
        let side = model::SideStream::new(device)
            .map_err(|e| anyhow::anyhow!("--adamw side-stream: {e}"))?;
        Ok(Some(
            side.with_max_blocks(Some(self.side_blocks))
                .with_lag(self.side_lag),
        ))
    }
}

/// The staged backward, with AdamW inside it unless `place` is `After`; the gradients
/// when AdamW is still to run.
pub(crate) fn backward(
    lm: &TransformerLm,
    tape: model::Tape,
    opt: &mut model::AdamW,
    place: AdamwPlace,
    side: Option<&model::SideStream>,
) -> model::Result<Option<model::Grads>> {
    if place == AdamwPlace::After {
        return Ok(Some(tape.backward(|_, _| Ok::<(), model::ModelError>(()))?));
    }
    let mut ib = model::InBackward::begin(opt, lm.params(), side)?;
    tape.backward(|s, g| ib.stage(&lm.stage_params(s), g))?;
    ib.finish()?;
    Ok(None)
}
