//! Clipping by the global gradient norm, as `torch.nn.utils.clip_grad_norm_`, without a
//! host round trip on CUDA.
//!
//! ```ignore
//! let nc = seam::clip::norm_and_coef(&grads, 1.0)?; // [norm, coef], f32, grads' device
//! opt.set_grad_scale(Some(nc.clone()));               // AdamW scales by coef as it updates
//! opt.step_params(model.params(), &grads)?;
//! ```
//!
//! On CUDA (`cuda` feature, gradients f32 or bf16) one multi-tensor kernel per 128
//! gradients (kernels/gradnorm.cu) writes per-block partial sums of squares, and one block
//! sums them in a fixed order: deterministic, capturable in a CUDA graph, f32 accumulation.
//! The kernel reads the gradients as one run of 16-byte vectors; `SEAM_GRADNORM=tensorwise`
//! takes the earlier layout, one tensor after another (for comparisons; `bench gradnorm`).
//! Elsewhere the sum is taken per tensor in f32 and over tensors in f64 on the host, as
//! the reference step always did.
//!
//! The coefficient is `clip / (norm + 1e-6)` where that is below 1, else 1 (also when
//! `clip` is 0: no clipping). A non-finite norm (inf or NaN) gives a NaN coefficient, and
//! AdamW skips a step whose coefficient is not finite (nothing is written: the weights
//! stay those before the step; a caller that stops on the non-finite norm it reads back
//! stops with them).

use crate::error::{ModelError, Result};
use candle_core::{DType, Tensor};

/// `[norm, coef]` (f32, on the gradients' device) of the gradients present in `grads`.
pub fn norm_and_coef(grads: &[Option<Tensor>], clip: f64) -> Result<Tensor> {
    norm_and_coef_in(None, grads, clip)
}

/// [`norm_and_coef`] with the CUDA kernel's layout given (`None`: [`Layout::from_env`]);
/// the host path has one layout.
pub fn norm_and_coef_in(
    layout: Option<Layout>,
    grads: &[Option<Tensor>],
    clip: f64,
) -> Result<Tensor> {
    check(clip, grads.iter().flatten().count())?;
    let present: Vec<&Tensor> = grads.iter().flatten().collect();
    let first = present[0];
    #[cfg(feature = "cuda")]
    if first.device().is_cuda()
        && present
            .iter()
            .all(|g| matches!(g.dtype(), DType::F32 | DType::BF16))
    {
        let layout = layout.map_or_else(Layout::from_env, Ok)?;
        return cuda::norm_and_coef(layout, &present, clip as f32);
    }
    let _ = layout;
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
    let coef = match (norm.is_finite(), clip > 0.0 && c < 1.0) {
        (false, _) => f64::NAN,
        (true, true) => c,
        (true, false) => 1.0,
    };
    Ok(Tensor::new(&[norm as f32, coef as f32], first.device())?)
}

/// How the sums-of-squares kernel walks the gradients (kernels/gradnorm.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One run of 16-byte vectors across every tensor of a launch (the default).
    Flat,
    /// Tensor after tensor, each grid-strided on its own (the earlier kernel).
    Tensorwise,
}

impl Layout {
    /// `SEAM_GRADNORM` (flat or tensorwise), read once; flat where unset. Anything else
    /// is an error naming it.
    pub fn from_env() -> Result<Layout> {
        static L: std::sync::OnceLock<std::result::Result<Layout, String>> =
            std::sync::OnceLock::new();
        L.get_or_init(|| match std::env::var("SEAM_GRADNORM").as_deref() {
            Err(_) | Ok("flat") => Ok(Layout::Flat),
            Ok("tensorwise") => Ok(Layout::Tensorwise),
            Ok(v) => Err(format!("SEAM_GRADNORM={v}: expected flat or tensorwise")),
        })
        .clone()
        .map_err(ModelError::Input)
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn kernel(self) -> &'static str {
        match self {
            Layout::Flat => "gradnorm_sumsq",
            Layout::Tensorwise => "gradnorm_sumsq_tensorwise",
        }
    }
}

/// Refuses a clipping threshold that is not a finite norm >= 0, and a norm of no gradient
/// (`present` of them).
pub(crate) fn check(clip: f64, present: usize) -> Result<()> {
    if !(clip.is_finite() && clip >= 0.0) {
        return Err(ModelError::Input(format!(
            "clip: {clip} (a finite norm >= 0; 0 turns clipping off)"
        )));
    }
    if present == 0 {
        return Err(ModelError::Input(
            "clipping: no gradient to take the norm of".into(),
        ));
    }
    Ok(())
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

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::Layout;
    use crate::error::{ModelError, Result};
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{
        CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
    };
    use candle_core::cuda_backend::WrapErr;
    use candle_core::{DType, Device, Storage, Tensor};
    use std::sync::Arc;

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/gradnorm.ptx"));
    /// Tensors per launch (GN_MAX in kernels/gradnorm.cu).
    const MAX: usize = 128;
    /// Blocks per launch: fixed, so the sum's order does not depend on the GPU.
    pub const BLOCKS: usize = 264;
    const THREADS: u32 = 512;

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct GradTable {
        ptr: [u64; MAX],
        n: [u64; MAX],
        vstart: [u64; MAX + 1],
        bf16: [u32; MAX],
        count: u32,
        ragged: u32,
    }
    // SAFETY: plain old data with the kernel's layout (kernels/gradnorm.cu GradTable).
    unsafe impl DeviceRepr for GradTable {}

    fn cuda_err(what: &str) -> ModelError {
        ModelError::Input(format!("gradient norm: {what}"))
    }

    pub fn norm_and_coef(layout: Layout, grads: &[&Tensor], clip: f32) -> Result<Tensor> {
        let Device::Cuda(dev) = grads[0].device() else {
            return Err(cuda_err("not a CUDA tensor"));
        };
        let stream = dev.cuda_stream();
        let partials = Tensor::zeros(slots(grads.len(), BLOCKS), DType::F32, grads[0].device())?;
        let used = sumsq_in(layout, &stream, grads, &partials, 0, BLOCKS)?;
        finish(&stream, &partials, used, clip)
    }

    /// Partial-sum slots that [`sumsq`] fills for `n` gradients at `blocks` per launch.
    pub fn slots(n: usize, blocks: usize) -> usize {
        n.div_ceil(MAX) * blocks
    }

    /// Queues on `stream` the sums of squares of `grads` into `partials[offset..]`
    /// (`blocks` per launch of up to MAX gradients, a fixed order); returns the slots used.
    pub fn sumsq(
        stream: &Arc<CudaStream>,
        grads: &[&Tensor],
        partials: &Tensor,
        offset: usize,
        blocks: usize,
    ) -> Result<usize> {
        sumsq_in(Layout::from_env()?, stream, grads, partials, offset, blocks)
    }

    /// [`sumsq`] with the kernel's layout given.
    pub fn sumsq_in(
        layout: Layout,
        stream: &Arc<CudaStream>,
        grads: &[&Tensor],
        partials: &Tensor,
        offset: usize,
        blocks: usize,
    ) -> Result<usize> {
        let Device::Cuda(dev) = partials.device() else {
            return Err(cuda_err("partials not on CUDA"));
        };
        let func = dev.get_or_load_custom_func(layout.kernel(), "seam_gradnorm", PTX)?;
        let contiguous: Vec<Tensor> = grads
            .iter()
            .map(|g| g.contiguous())
            .collect::<candle_core::Result<_>>()?;
        let (ps, _) = partials.storage_and_layout();
        let Storage::Cuda(ps) = &*ps else {
            return Err(cuda_err("partials not on CUDA"));
        };
        let pslice = ps.as_cuda_slice::<f32>()?;
        let used = slots(grads.len(), blocks);
        if offset + used > pslice.len() {
            return Err(cuda_err("more partial sums than slots"));
        }
        for (c, chunk) in contiguous.chunks(MAX).enumerate() {
            let mut t = GradTable {
                ptr: [0; MAX],
                n: [0; MAX],
                vstart: [0; MAX + 1],
                bf16: [0; MAX],
                count: chunk.len() as u32,
                ragged: 0,
            };
            for (k, g) in chunk.iter().enumerate() {
                if !matches!(g.dtype(), DType::F32 | DType::BF16) {
                    return Err(cuda_err(&format!("{:?} gradient (f32 or bf16)", g.dtype())));
                }
                t.ptr[k] = crate::pinned::device_ptr(g, stream)?;
            }
            // The guards keep every gradient's storage borrowed until the launch.
            let guards: Vec<_> = chunk.iter().map(|g| g.storage_and_layout()).collect();
            for (k, (st, l)) in guards.iter().enumerate() {
                let Storage::Cuda(cs) = &**st else {
                    return Err(cuda_err("a gradient is not on CUDA"));
                };
                t.n[k] = l.shape().elem_count() as u64;
                t.bf16[k] = u32::from(cs.dtype() == DType::BF16);
                // Whole 16-byte vectors (none where the start is not 16-byte aligned).
                let per = 16 / cs.dtype().size_in_bytes() as u64;
                let vecs = if t.ptr[k].is_multiple_of(16) {
                    t.n[k] / per
                } else {
                    0
                };
                t.vstart[k + 1] = t.vstart[k] + vecs;
                t.ragged |= u32::from(vecs * per != t.n[k]);
            }
            let at = offset + c * blocks;
            let dst = pslice.slice(at..at + blocks);
            let mut b = stream.launch_builder(&func);
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
        Ok(used)
    }

    /// Queues on `stream` the sum of `partials[..count]` in a fixed order: `[norm, coef]`.
    pub fn finish(
        stream: &Arc<CudaStream>,
        partials: &Tensor,
        count: usize,
        clip: f32,
    ) -> Result<Tensor> {
        let Device::Cuda(dev) = partials.device() else {
            return Err(cuda_err("partials not on CUDA"));
        };
        let func = dev.get_or_load_custom_func("gradnorm_finish", "seam_gradnorm", PTX)?;
        let out = Tensor::zeros(2, DType::F32, partials.device())?;
        {
            let (ps, _) = partials.storage_and_layout();
            let (os, _) = out.storage_and_layout();
            let (Storage::Cuda(ps), Storage::Cuda(os)) = (&*ps, &*os) else {
                return Err(cuda_err("partials not on CUDA"));
            };
            let (pslice, oslice) = (ps.as_cuda_slice::<f32>()?, os.as_cuda_slice::<f32>()?);
            let count = count as u32;
            let mut b = stream.launch_builder(&func);
            b.arg(pslice).arg(&count).arg(&clip).arg(oslice);
            let cfg = LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: partials holds at least `count` f32, out 2.
            unsafe { b.launch(cfg) }.w()?;
        }
        Ok(out)
    }
}
