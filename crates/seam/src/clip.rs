//! Clipping by the global gradient norm, as `torch.nn.utils.clip_grad_norm_`, without a
//! host round trip on CUDA.
//!
//! ```ignore
//! let nc = seam::clip::norm_and_coef(&grads, 1.0)?; // [norm, coef], f32, grads' device
//! opt.set_grad_scale(Some(nc.clone()));               // AdamW scales by coef as it updates
//! opt.step_params(model.params(), &grads)?;
//! ```
//!
//! On CUDA (`cuda` feature, gradients f32 or bf16) one multi-tensor kernel per 160
//! gradients (kernels/gradnorm.cu) writes per-block partial sums of squares, and one block
//! sums them in a fixed order: deterministic, capturable in a CUDA graph, f32 accumulation.
//! Elsewhere the sum is taken per tensor in f32 and over tensors in f64 on the host, as
//! the reference step always did.
//!
//! The coefficient is `clip / (norm + 1e-6)` where that is below 1, else 1 (also when
//! `clip` is 0: no clipping); a NaN norm gives a NaN coefficient on CUDA (the step's
//! weights turn NaN, which divergence checks see), 1 on the host path.

use crate::error::{ModelError, Result};
use candle_core::{DType, Tensor};

/// `[norm, coef]` (f32, on the gradients' device) of the gradients present in `grads`.
pub fn norm_and_coef(grads: &[Option<Tensor>], clip: f64) -> Result<Tensor> {
    if !(clip.is_finite() && clip >= 0.0) {
        return Err(ModelError::Input(format!(
            "clip: {clip} (a finite norm >= 0; 0 turns clipping off)"
        )));
    }
    let present: Vec<&Tensor> = grads.iter().flatten().collect();
    let Some(first) = present.first() else {
        return Err(ModelError::Input(
            "clipping: no gradient to take the norm of".into(),
        ));
    };
    #[cfg(feature = "cuda")]
    if first.device().is_cuda()
        && present
            .iter()
            .all(|g| matches!(g.dtype(), DType::F32 | DType::BF16))
    {
        return cuda::norm_and_coef(&present, clip as f32);
    }
    let mut s = 0f64;
    for t in &present {
        s += t
            .to_dtype(DType::F32)?
            .sqr()?
            .sum_all()?
            .to_scalar::<f32>()? as f64;
    }
    let norm = s.sqrt();
    let c = clip / (norm + 1e-6);
    let coef = if clip > 0.0 && c < 1.0 { c } else { 1.0 };
    Ok(Tensor::new(&[norm as f32, coef as f32], first.device())?)
}

/// The gradients scaled by `nc`'s coefficient (a tensor op each; for optimizers that do
/// not read the coefficient themselves).
pub fn scale(grads: &[Option<Tensor>], nc: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let c = nc.narrow(0, 1, 1)?;
    grads
        .iter()
        .map(|g| {
            g.as_ref()
                .map(|g| -> Result<Tensor> {
                    let g = g.to_dtype(DType::F32)?;
                    Ok(g.broadcast_mul(&c)?)
                })
                .transpose()
        })
        .collect()
}

/// The global norm taken stage by stage inside a backward: each stage's final gradients
/// are summed as soon as the stage's backward is queued (on CUDA on a side stream, beside
/// the earlier stages' backward, or on the compute stream while they are fresh in L2),
/// and [`StagedNorm::finish`] gives `[norm, coef]` as [`norm_and_coef`] does: the same
/// value, the f32 sums taken in another order. Deterministic for a given model and
/// stream choice. The gradients must stay alive until `finish` (AdamW after it reads them).
pub struct StagedNorm<'a> {
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    side: Option<&'a crate::SideStream>,
    /// CUDA: each stage's partial sums (f32, on the device).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    parts: Vec<Tensor>,
    /// Elsewhere: the sum of squares so far (per tensor in f32, over tensors in f64).
    host: f64,
    device: Option<candle_core::Device>,
}

impl<'a> StagedNorm<'a> {
    /// `side`: the stream for the sums on CUDA (its block cap applies; `None`: the
    /// compute stream).
    pub fn new(side: Option<&'a crate::SideStream>) -> Self {
        Self {
            side,
            parts: Vec::new(),
            host: 0.0,
            device: None,
        }
    }

    /// Adds the sums of squares of `grads` (a stage's final gradients).
    pub fn stage(&mut self, grads: &[&Tensor]) -> Result<()> {
        let Some(first) = grads.first() else {
            return Ok(());
        };
        self.device.get_or_insert_with(|| first.device().clone());
        #[cfg(feature = "cuda")]
        if first.device().is_cuda()
            && grads
                .iter()
                .all(|g| matches!(g.dtype(), DType::F32 | DType::BF16))
        {
            let on = self
                .side
                .map(|s| (s.stream(), s.max_blocks().unwrap_or(NORM_SIDE_BLOCKS)));
            self.parts.push(cuda::sumsq(grads, on)?);
            return Ok(());
        }
        for t in grads {
            self.host += t
                .to_dtype(DType::F32)?
                .sqr()?
                .sum_all()?
                .to_scalar::<f32>()? as f64;
        }
        Ok(())
    }

    /// `[norm, coef]` (f32, on the gradients' device); the compute stream waits for the
    /// side stream's sums first.
    pub fn finish(self, clip: f64) -> Result<Tensor> {
        let Some(device) = self.device else {
            return Err(ModelError::Input(
                "clipping: no gradient to take the norm of".into(),
            ));
        };
        #[cfg(feature = "cuda")]
        if !self.parts.is_empty() {
            if let Some(side) = self.side {
                side.join()?;
            }
            let all = Tensor::cat(&self.parts, 0)?;
            return cuda::finish(&all, clip as f32);
        }
        let norm = self.host.sqrt();
        let c = clip / (norm + 1e-6);
        let coef = if clip > 0.0 && c < 1.0 { c } else { 1.0 };
        Ok(Tensor::new(&[norm as f32, coef as f32], &device)?)
    }
}

/// Blocks of a side stream's sum kernels when its cap is unset: few, so that they trickle
/// beside the backward's GEMMs instead of taking the SMs from them.
pub const NORM_SIDE_BLOCKS: u32 = 16;

#[cfg(feature = "cuda")]
mod cuda {
    use crate::error::{ModelError, Result};
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{
        CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
    };
    use candle_core::cuda_backend::{CudaStorage, WrapErr};
    use candle_core::{DType, Device, Storage, Tensor};
    use std::sync::Arc;

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/gradnorm.ptx"));
    /// Tensors per launch (GN_MAX in kernels/gradnorm.cu).
    const MAX: usize = 160;
    /// Blocks per launch: fixed, so the sum's order does not depend on the GPU.
    const BLOCKS: usize = 264;
    const THREADS: u32 = 512;

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct GradTable {
        ptr: [u64; MAX],
        n: [u64; MAX],
        bf16: [u32; MAX],
        count: u32,
    }
    // SAFETY: plain old data with the kernel's layout (kernels/gradnorm.cu GradTable).
    unsafe impl DeviceRepr for GradTable {}

    fn cuda_err(what: &str) -> ModelError {
        ModelError::Input(format!("gradient norm: {what}"))
    }

    pub fn norm_and_coef(grads: &[&Tensor], clip: f32) -> Result<Tensor> {
        let partials = sumsq(grads, None)?;
        finish(&partials, clip)
    }

    /// Queues the per-block sums of squares of `grads` (one launch per [`MAX`] of them) on
    /// `on` (a stream, at most this many blocks) or the compute stream ([`BLOCKS`]); returns
    /// the partials (allocated on the compute stream before the launches).
    pub fn sumsq(grads: &[&Tensor], on: Option<(&Arc<CudaStream>, u32)>) -> Result<Tensor> {
        let Device::Cuda(dev) = grads[0].device() else {
            return Err(cuda_err("not a CUDA tensor"));
        };
        let stream = match on {
            Some((s, _)) => s.clone(),
            None => dev.cuda_stream(),
        };
        let blocks = on.map_or(BLOCKS, |(_, b)| (b as usize).clamp(1, BLOCKS));
        let chunks = grads.len().div_ceil(MAX);
        let partials = Tensor::zeros(chunks * blocks, DType::F32, grads[0].device())?;
        let sumsq = dev.get_or_load_custom_func("gradnorm_sumsq", "seam_gradnorm", PTX)?;
        let contiguous: Vec<Tensor> = grads
            .iter()
            .map(|g| g.contiguous())
            .collect::<candle_core::Result<_>>()?;
        if let Some((side, _)) = on {
            // The side stream starts after the partials' zeroing and the gradients.
            let e = dev.cuda_stream().record_event(None).w()?;
            side.wait(&e).w()?;
        }
        launch_sumsq(&partials, &contiguous, &stream, &sumsq, blocks)?;
        Ok(partials)
    }

    fn launch_sumsq(
        partials: &Tensor,
        contiguous: &[Tensor],
        stream: &Arc<CudaStream>,
        sumsq: &candle_core::cuda_backend::cudarc::driver::CudaFunction,
        blocks: usize,
    ) -> Result<()> {
        let (ps, _) = partials.storage_and_layout();
        let Storage::Cuda(ps) = &*ps else {
            return Err(cuda_err("partials not on CUDA"));
        };
        let pslice = ps.as_cuda_slice::<f32>()?;
        for (c, chunk) in contiguous.chunks(MAX).enumerate() {
            let mut t = GradTable {
                ptr: [0; MAX],
                n: [0; MAX],
                bf16: [0; MAX],
                count: chunk.len() as u32,
            };
            // The guards keep every gradient's storage borrowed until the launch.
            let guards: Vec<_> = chunk.iter().map(|g| g.storage_and_layout()).collect();
            for (k, (st, l)) in guards.iter().enumerate() {
                let Storage::Cuda(cs) = &**st else {
                    return Err(cuda_err("a gradient is not on CUDA"));
                };
                t.ptr[k] =
                    base_ptr(cs, stream)? + (l.start_offset() * cs.dtype().size_in_bytes()) as u64;
                t.n[k] = l.shape().elem_count() as u64;
                t.bf16[k] = u32::from(cs.dtype() == DType::BF16);
            }
            let dst = pslice.slice(c * blocks..(c + 1) * blocks);
            let mut b = stream.launch_builder(sumsq);
            b.arg(&t).arg(&dst);
            let cfg = LaunchConfig {
                grid_dim: (blocks as u32, 1, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the table lists live device buffers of t.n elements of the dtype
            // given; dst holds `blocks` f32.
            unsafe { b.launch(cfg) }.w()?;
            drop(guards);
        }
        Ok(())
    }

    /// `[norm, coef]` from partial sums of squares, summed in their order by one block.
    pub fn finish(partials: &Tensor, clip: f32) -> Result<Tensor> {
        let Device::Cuda(dev) = partials.device() else {
            return Err(cuda_err("not a CUDA tensor"));
        };
        let stream = dev.cuda_stream();
        let out = Tensor::zeros(2, DType::F32, partials.device())?;
        let finish = dev.get_or_load_custom_func("gradnorm_finish", "seam_gradnorm", PTX)?;
        let partials = partials.contiguous()?;
        launch_finish(&partials, &out, &stream, &finish, clip)?;
        Ok(out)
    }

    fn launch_finish(
        partials: &Tensor,
        out: &Tensor,
        stream: &Arc<CudaStream>,
        finish: &candle_core::cuda_backend::cudarc::driver::CudaFunction,
        clip: f32,
    ) -> Result<()> {
        let (ps, pl) = partials.storage_and_layout();
        let Storage::Cuda(ps) = &*ps else {
            return Err(cuda_err("partials not on CUDA"));
        };
        let pslice = ps.as_cuda_slice::<f32>()?;
        let (os, _) = out.storage_and_layout();
        let Storage::Cuda(os) = &*os else {
            return Err(cuda_err("output not on CUDA"));
        };
        let oslice = os.as_cuda_slice::<f32>()?;
        let count = pl.shape().elem_count() as u32;
        let src = pslice.slice(pl.start_offset()..);
        let mut b = stream.launch_builder(finish);
        b.arg(&src).arg(&count).arg(&clip).arg(oslice);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: partials holds `count` f32, out 2.
        unsafe { b.launch(cfg) }.w()?;
        Ok(())
    }

    /// The device address of a CUDA storage's first element.
    fn base_ptr(
        cs: &CudaStorage,
        stream: &std::sync::Arc<candle_core::cuda_backend::cudarc::driver::CudaStream>,
    ) -> Result<u64> {
        use candle_core::cuda_backend::cudarc::driver::DevicePtr;
        Ok(match cs.dtype() {
            DType::F32 => cs.as_cuda_slice::<f32>()?.device_ptr(stream).0,
            DType::BF16 => cs.as_cuda_slice::<half::bf16>()?.device_ptr(stream).0,
            d => return Err(cuda_err(&format!("{d:?} gradient (f32 or bf16)"))),
        })
    }
}

#[cfg(test)]
mod staged_tests {
    use super::*;
    use candle_core::Device;

    /// Stage by stage gives the norm of all at once (host path: the same f32 sums per
    /// tensor, added in f64 in another grouping).
    #[test]
    fn staged_equals_all_at_once() {
        let d = Device::Cpu;
        let g: Vec<Tensor> = (0..5)
            .map(|i| {
                Tensor::arange(0f32, 10.0 + i as f32, &d)
                    .unwrap()
                    .affine(0.1, -0.3)
                    .unwrap()
            })
            .collect();
        let all: Vec<Option<Tensor>> = g.iter().cloned().map(Some).collect();
        let want = norm_and_coef(&all, 1.0).unwrap().to_vec1::<f32>().unwrap();
        let mut s = StagedNorm::new(None);
        s.stage(&[&g[4], &g[3]]).unwrap();
        s.stage(&[]).unwrap();
        s.stage(&[&g[2], &g[1], &g[0]]).unwrap();
        let got = s.finish(1.0).unwrap().to_vec1::<f32>().unwrap();
        assert!(
            (got[0] - want[0]).abs() <= 1e-6 * want[0],
            "{got:?} vs {want:?}"
        );
        assert!((got[1] - want[1]).abs() <= 1e-6, "{got:?} vs {want:?}");
        assert!(want[1] < 1.0, "clipping active: {want:?}");
        assert!(StagedNorm::new(None).finish(1.0).is_err());
    }
}
