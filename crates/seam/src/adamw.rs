//! AdamW with decoupled weight decay and bias correction, step for step as PyTorch's
//! `torch.optim.AdamW` (single-tensor path):
//!   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//!   p ← p − (lr / (1−β1ᵗ)) · m / (√v / √(1−β2ᵗ) + ε)
//! State is kept in f32 next to each f32 parameter. On a CUDA device (with the `cuda`
//! feature) each parameter is updated by one fused kernel (`fused_adamw`);
//! elsewhere by candle ops.

use crate::error::{ModelError, Result};
use candle_core::{Tensor, Var};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    /// PyTorch's defaults.
    fn default() -> Self {
        Self {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
        }
    }
}

/// One of AdamW's two moments (PyTorch's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    ExpAvg,
    ExpAvgSq,
}

/// First and second moments of one parameter.
pub(crate) enum Moments {
    Tensors(Tensor, Tensor),
    #[cfg(feature = "cuda")]
    Device(crate::fused_adamw::DeviceMoments),
}

pub struct AdamW {
    pub cfg: AdamWConfig,
    step: u64,
    /// Moments per parameter, created on the first step.
    pub(crate) state: Vec<Option<Moments>>,
    /// Use the fused kernel for CUDA parameters (default true).
    pub fused: bool,
    /// The fused kernels' per-step scalars on the device (created with the first fused
    /// update).
    #[cfg(feature = "cuda")]
    pub(crate) scalars: Option<crate::fused_adamw::DeviceScalars>,
    /// `[norm, coef]` from [`crate::clip::norm_and_coef`]: every update scales its gradient
    /// by `coef` first (read on the device by the fused kernel).
    pub(crate) grad_scale: Option<Tensor>,
}

impl AdamW {
    pub fn new(cfg: AdamWConfig) -> Result<Self> {
        let ok = cfg.lr >= 0.0
            && (0.0..1.0).contains(&cfg.beta1)
            && (0.0..1.0).contains(&cfg.beta2)
            && cfg.eps >= 0.0
            && cfg.weight_decay >= 0.0;
        if !ok {
            return Err(ModelError::Config(format!(
                "invalid AdamW hyperparameters {cfg:?}"
            )));
        }
        Ok(Self {
            cfg,
            step: 0,
            state: Vec::new(),
            fused: true,
            #[cfg(feature = "cuda")]
            scalars: None,
            grad_scale: None,
        })
    }

    /// Scales every gradient by `nc[1]` (a `[norm, coef]` tensor from
    /// [`crate::clip::norm_and_coef`], on the parameters' device) in the next step (it is
    /// let go when that step is queued, so a tensor made inside a CUDA graph capture is
    /// also freed inside it); `None`: unscaled. The fused kernel reads the coefficient
    /// from device memory, so a captured step clips by each replay's own norm.
    pub fn set_grad_scale(&mut self, nc: Option<Tensor>) {
        self.grad_scale = nc;
    }

    /// Whether parameter `p` is updated by the fused CUDA kernel (its moments then live
    /// in device buffers).
    #[cfg(feature = "cuda")]
    pub(crate) fn uses_fused(&self, p: &Tensor) -> bool {
        self.fused && p.device().is_cuda() && p.dtype() == candle_core::DType::F32
    }

    pub fn steps_taken(&self) -> u64 {
        self.step
    }

    /// Sets the step count (a checkpoint's, for an optimizer that holds no moments).
    pub fn set_steps_taken(&mut self, steps: u64) {
        self.step = steps;
    }

    /// Parameter `i`'s first and second moments on the host (`None` before its first
    /// step), for checkpoints.
    pub fn moments(&self, i: usize, p: &Var) -> Result<Option<(Vec<f32>, Vec<f32>)>> {
        self.moments_of(i, p.as_tensor())
    }

    /// [`Self::moments`] of state `i`, whose parameter (or span of one) is `p`.
    pub(crate) fn moments_of(&self, i: usize, p: &Tensor) -> Result<Option<(Vec<f32>, Vec<f32>)>> {
        let m = self.moment_of(i, p, Moment::ExpAvg)?;
        Ok(m.zip(self.moment_of(i, p, Moment::ExpAvgSq)?))
    }

    /// One moment of state `i` (whose parameter, or span of one, is `p`) on the host, or
    /// `None` before its first step: a checkpoint copies one at a time.
    pub(crate) fn moment_of(
        &self,
        i: usize,
        p: &Tensor,
        which: Moment,
    ) -> Result<Option<Vec<f32>>> {
        let _ = p;
        Ok(match self.state.get(i) {
            None | Some(None) => None,
            Some(Some(Moments::Tensors(m, v))) => {
                let t = match which {
                    Moment::ExpAvg => m,
                    Moment::ExpAvgSq => v,
                };
                Some(
                    t.flatten_all()?
                        .to_dtype(candle_core::DType::F32)?
                        .to_vec1()?,
                )
            }
            #[cfg(feature = "cuda")]
            Some(Some(Moments::Device(d))) => Some(d.moment_to_host(p, which)?),
        })
    }

    /// Restores a checkpoint: the step count and parameter `i`'s moments (f32, as many
    /// elements as `p`).
    pub fn restore(&mut self, steps: u64, i: usize, p: &Var, m: &[f32], v: &[f32]) -> Result<()> {
        self.restore_of(steps, i, &p.flatten_all()?, m, v)
    }

    /// [`Self::restore`] of state `i`, whose parameter (or span of one) is `p`, flat.
    pub(crate) fn restore_of(
        &mut self,
        steps: u64,
        i: usize,
        p: &Tensor,
        m: &[f32],
        v: &[f32],
    ) -> Result<()> {
        let n = p.elem_count();
        if m.len() != n || v.len() != n {
            return Err(ModelError::Input(format!(
                "AdamW restore: moments of {} and {} elements for a parameter of {n}",
                m.len(),
                v.len()
            )));
        }
        self.step = steps;
        if self.state.len() <= i {
            self.state.resize_with(i + 1, || None);
        }
        #[cfg(feature = "cuda")]
        if self.uses_fused(p) {
            let d = crate::fused_adamw::DeviceMoments::from_host(p, m, v)?;
            self.state[i] = Some(Moments::Device(d));
            return Ok(());
        }
        let t = |x: &[f32]| -> Result<Tensor> {
            Ok(Tensor::from_slice(x, p.shape(), p.device())?.to_dtype(p.dtype())?)
        };
        self.state[i] = Some(Moments::Tensors(t(m)?, t(v)?));
        Ok(())
    }

    /// One step over `params` with `grads` (same order; `None` = no gradient, skipped).
    /// On CUDA the fused updates go in few launches (`fused_adamw::group`, `cuda` feature).
    pub fn step(&mut self, params: &[Var], grads: &[Option<Tensor>]) -> Result<()> {
        self.step_all(params, grads, None)
    }

    /// [`Self::step`] over a [`crate::ParamSet`]: where its bf16 copies are enabled, the fused
    /// kernel also writes each updated parameter's bf16 copy, which the next forward takes
    /// instead of casting ([`crate::shadow`]).
    pub fn step_params(
        &mut self,
        params: &crate::ParamSet,
        grads: &[Option<Tensor>],
    ) -> Result<()> {
        let shadows = Some(params.bf16_shadows()).filter(|s| s.enabled());
        self.step_all(params.vars(), grads, shadows)
    }

    /// Every parameter's update, in index order, the fused ones together.
    fn step_all(
        &mut self,
        params: &[Var],
        grads: &[Option<Tensor>],
        shadows: Option<&crate::shadow::Bf16Shadows>,
    ) -> Result<()> {
        let spans: Vec<crate::Span> = params.iter().map(crate::Span::whole).collect();
        let index: Vec<Option<usize>> = (0..spans.len()).map(Some).collect();
        let none = |_| Ok::<(), ModelError>(());
        let order = 0..spans.len();
        let shadows = shadows.map(|s| (s, &index[..]));
        self.step_spans_together(&spans, grads, order, |_, _| true, none, shadows)
    }

    /// [`Self::step`], calling `after(i)` as soon as parameter `i`'s update is queued (a
    /// ZeRO optimizer launches that parameter's all-gather there, overlapping the rest).
    /// The first error, of `after` or of the step, ends the step and is returned as is.
    pub fn step_each<E: From<ModelError>>(
        &mut self,
        params: &[Var],
        grads: &[Option<Tensor>],
        after: impl FnMut(usize) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.step_each_in(params, grads, 0..params.len(), after)
    }

    /// [`Self::step_each`], updating the parameters in `order` (each index once; state
    /// stays keyed by index). ZeRO updates the buckets the next forward needs first.
    pub fn step_each_in<E: From<ModelError>>(
        &mut self,
        params: &[Var],
        grads: &[Option<Tensor>],
        order: impl IntoIterator<Item = usize>,
        after: impl FnMut(usize) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let spans: Vec<crate::Span> = params.iter().map(crate::Span::whole).collect();
        self.step_spans_in(&spans, grads, order, after, None)
    }

    /// Starts a step over `params` (all of them, in index order) whose parameters are then
    /// updated one by one ([`crate::in_backward`]): advances the step count and queues the
    /// fused kernels' scalars.
    /// Inside a CUDA graph capture it does neither: the replays own the step count, and
    /// [`Self::advance_for_replay`] before each replay uploads its scalars.
    pub(crate) fn begin_step(&mut self, params: &[Var]) -> Result<()> {
        self.begin(params.len(), params.iter().map(|p| p.as_tensor()))
    }

    /// [`Self::begin_step`] over `n` states whose parameters are `params`.
    pub(crate) fn begin<'a>(
        &mut self,
        n: usize,
        params: impl Iterator<Item = &'a Tensor>,
    ) -> Result<()> {
        self.state.resize_with(n, || None);
        #[cfg(feature = "cuda")]
        if let Some(p) = params.into_iter().find(|p| self.uses_fused(p)) {
            let stream = crate::fused_adamw::stream_of(p)?;
            if crate::capture::capturing_stream(&stream) {
                if self.scalars.is_none() {
                    return Err(ModelError::Input(
                        "fused AdamW: capture a step only after one eager step".into(),
                    ));
                }
                return Ok(());
            }
            self.step += 1;
            if self.scalars.is_none() {
                self.scalars = Some(crate::fused_adamw::DeviceScalars::new(p)?);
            }
            let s = self.step_scalars();
            if let Some(d) = self.scalars.as_mut() {
                d.upload(s, "begin_step")?;
            }
            return Ok(());
        }
        #[cfg(not(feature = "cuda"))]
        let _ = params;
        self.step += 1;
        Ok(())
    }

    /// Allocates what parameter `i`'s fused update writes (its moments, its bf16 copy) and
    /// readies its gradient `g` for the kernel, all on the parameter's stream, so that an
    /// update launched on another stream allocates and converts nothing. The gradient to
    /// update with there, or `None` where `i` does not take the fused path (only it can
    /// run on another stream).
    pub(crate) fn prepare_side(
        &mut self,
        i: usize,
        p: &Var,
        g: &Tensor,
        shadows: Option<&crate::shadow::Bf16Shadows>,
    ) -> Result<Option<Tensor>> {
        #[cfg(feature = "cuda")]
        if self.uses_fused(p.as_tensor()) {
            if !matches!(self.state[i], Some(Moments::Device(_))) {
                let m = crate::fused_adamw::zero_moments(p.as_tensor())?;
                self.state[i] = Some(Moments::Device(m));
            }
            if let Some(sh) = shadows {
                sh.target(i, p.as_tensor())?;
            }
            return Ok(Some(crate::fused_adamw::kernel_grad(g)?));
        }
        let _ = (i, p, g, shadows);
        Ok(None)
    }

    /// The bias corrections of the current step count: 1 − β1ᵗ and √(1 − β2ᵗ).
    pub(crate) fn bias_corrections(&self) -> (f64, f64) {
        let (c, t) = (self.cfg, self.step as i32);
        (1.0 - c.beta1.powi(t), (1.0 - c.beta2.powi(t)).sqrt())
    }

    /// The fused kernels' scalars for the current step count.
    #[cfg(feature = "cuda")]
    fn step_scalars(&self) -> crate::fused_adamw::StepScalars {
        let c = self.cfg;
        let (bc1, bc2_sqrt) = self.bias_corrections();
        crate::fused_adamw::StepScalars {
            decay: (1.0 - c.lr * c.weight_decay) as f32,
            b1: c.beta1 as f32,
            b2: c.beta2 as f32,
            eps: c.eps as f32,
            step_size: (c.lr / bc1) as f32,
            bc2_sqrt: bc2_sqrt as f32,
        }
    }

    /// For a step captured in a CUDA graph ([`crate::graph`]) together with this optimizer
    /// (whose capture advanced nothing): advances the step count and queues the upload of
    /// its scalars (at the current `cfg.lr`) on the stream, ahead of the replay that reads
    /// them. Call it before every replay, the first included. The host does not wait for
    /// the device (the pinned staging buffers alternate).
    pub fn advance_for_replay(&mut self) -> Result<()> {
        self.step += 1;
        #[cfg(feature = "cuda")]
        {
            let s = self.step_scalars();
            if let Some(d) = self.scalars.as_mut() {
                d.upload(s, "advance_for_replay")?;
            }
        }
        Ok(())
    }

    /// Queues the update of each `(i, g)`, parameter `vars[i]` with gradient `g`, for the
    /// current step count (and, with `shadows` on the fused path, the write of its bf16
    /// copy); the fused updates together.
    pub(crate) fn update_many(
        &mut self,
        vars: &[Var],
        taken: &[(usize, Tensor)],
        shadows: Option<&crate::shadow::Bf16Shadows>,
        on: Option<&crate::in_backward::SideStream>,
    ) -> Result<()> {
        let spans: Vec<crate::Span> = taken
            .iter()
            .map(|(i, _)| crate::Span::whole(&vars[*i]))
            .collect();
        let items: Vec<crate::update::SpanUpdate> = (taken.iter().zip(&spans))
            .map(|((i, g), s)| (*i, s, g, shadows.map(|sh| (sh, *i))))
            .collect();
        self.update_spans(&items, on)
    }
}
