//! The global gradient norm taken stage by stage inside the backward: each stage's final
//! gradients are summed (squares, f32) as soon as the backward has made them, while they
//! are fresh in L2 or, on a second CUDA stream, beside the next stages' GEMMs, instead of
//! one more pass over every gradient after the backward.
//!
//! ```ignore
//! let mut norm = StagedNorm::new(&model, None)?;        // or Some(&side_stream)
//! let (loss, grads) = seam::forward_backward(&model, &batch, |s, g| norm.stage(s, g))?;
//! let nc = norm.finish(1.0)?;                           // [norm, coef], as clip::norm_and_coef
//! ```
//!
//! A parameter counts at the first stage that lists it (the last its backward reaches),
//! where its gradient is final. On CUDA the partial sums go to fixed slots in stage order
//! and one block adds them in a fixed order: deterministic, capturable; the result may
//! differ from [`crate::clip::norm_and_coef`]'s in the last bits (another grouping). On
//! the CPU the gradients are held and [`crate::clip::norm_and_coef`] takes them in
//! parameter order at the end: the same bits as after the backward.
//!
//! On a side stream each stage's launch waits for everything queued on the compute stream
//! so far (the gradients exist), and [`StagedNorm::finish`] makes the compute stream wait
//! for the last; the gradients are held (not freed) until then.

use crate::error::Result;
use crate::in_backward::SideStream;
use crate::staged::{Grads, StagedModel};
use candle_core::Tensor;

/// Partial sums per launch on a side stream: a few blocks leave the SMs to the GEMMs.
pub const SIDE_BLOCKS: usize = 32;

/// One step's gradient norm, summed stage by stage (see the module docs).
pub struct StagedNorm<'a> {
    /// Per parameter: the stage whose backward makes its gradient final.
    ready: Vec<Option<usize>>,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    side: Option<&'a SideStream>,
    /// The gradients summed so far, by parameter index.
    held: Vec<(usize, Tensor)>,
    #[cfg(feature = "cuda")]
    cuda: Option<Partials>,
}

#[cfg(feature = "cuda")]
struct Partials {
    buf: Tensor,
    used: usize,
    blocks: usize,
}

impl<'a> StagedNorm<'a> {
    /// A norm over `model`'s gradients; on CUDA its launches go to `side` when given, else
    /// to the compute stream.
    pub fn new(model: &dyn StagedModel, side: Option<&'a SideStream>) -> Result<Self> {
        let ready = crate::staged::final_stages(model);
        #[cfg(feature = "cuda")]
        let cuda = match model.params().var(0).device() {
            d @ candle_core::Device::Cuda(_) => {
                let mut per_stage = vec![0usize; model.num_stages()];
                for &r in ready.iter().flatten() {
                    per_stage[r] += 1;
                }
                let blocks = match side {
                    Some(_) => SIDE_BLOCKS,
                    None => crate::clip::cuda::BLOCKS,
                };
                let slots: usize = per_stage
                    .iter()
                    .map(|&k| crate::clip::cuda::slots(k, blocks))
                    .sum();
                let buf = Tensor::zeros(slots.max(1), candle_core::DType::F32, d)?;
                Some(Partials {
                    buf,
                    used: 0,
                    blocks,
                })
            }
            _ => None,
        };
        Ok(Self {
            ready,
            side,
            held: Vec::new(),
            #[cfg(feature = "cuda")]
            cuda,
        })
    }

    /// Stage `s`'s backward is queued: sums the gradients it made final (call it from
    /// `Tape::backward`'s callback before anything takes them).
    pub fn stage(&mut self, s: usize, grads: &Grads) -> Result<()> {
        let mine: Vec<(usize, Tensor)> = grads
            .iter()
            .enumerate()
            .filter(|(i, _)| self.ready.get(*i) == Some(&Some(s)))
            .filter_map(|(i, g)| g.clone().map(|g| (i, g)))
            .collect();
        if mine.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "cuda")]
        if let Some(p) = self.cuda.as_mut() {
            let ts: Vec<&Tensor> = mine.iter().map(|(_, g)| g).collect();
            let stream = match self.side {
                Some(side) => {
                    side.fork()?;
                    side.stream().clone()
                }
                None => cuda_stream(&p.buf)?,
            };
            p.used += crate::clip::cuda::sumsq(&stream, &ts, &p.buf, p.used, p.blocks)?;
        }
        self.held.extend(mine);
        Ok(())
    }

    /// `[norm, coef]` (f32, on the device) of every gradient summed, clipping at `clip`
    /// (as [`crate::clip::norm_and_coef`]); the compute stream is ordered after the sums.
    pub fn finish(mut self, clip: f64) -> Result<Tensor> {
        crate::clip::check(clip, self.held.len())?;
        #[cfg(feature = "cuda")]
        if let Some(p) = self.cuda.take() {
            let stream = cuda_stream(&p.buf)?;
            if let Some(side) = self.side {
                side.compute_waits(&side.done()?)?;
            }
            // Held until here: the sums have been read before any gradient can be freed.
            return crate::clip::cuda::finish(&stream, &p.buf, p.used, clip as f32);
        }
        self.held.sort_by_key(|(i, _)| *i);
        let grads: Grads = self.held.into_iter().map(|(_, g)| Some(g)).collect();
        crate::clip::norm_and_coef(&grads, clip)
    }
}

#[cfg(feature = "cuda")]
fn cuda_stream(
    t: &Tensor,
) -> Result<std::sync::Arc<candle_core::cuda_backend::cudarc::driver::CudaStream>> {
    match t.device() {
        candle_core::Device::Cuda(d) => Ok(d.cuda_stream()),
        _ => Err(crate::error::ModelError::Input(
            "gradient norm: not a CUDA tensor".into(),
        )),
    }
}
