//! AdamW on spans: a contiguous run of one parameter's elements (flat order), updated in
//! place in the parameter's own storage, with moments of the span's size. ZeRO-1 shards
//! each large parameter so (rank r of W steps its elements [r·n/W, (r+1)·n/W)), as
//! FSDP2 shards per parameter, instead of copying gradients into flat buckets and
//! keeping a separate master copy: the reduce-scatter and the all-gather then run in
//! place on the gradient and on the parameter.
//!
//! ```
//! # fn main() -> seam::Result<()> {
//! use candle_core::{Device, Tensor, Var};
//! let w = Var::ones(8, candle_core::DType::F32, &Device::Cpu)?;
//! let half = seam::Span { var: w.clone(), start: 4, len: 4, copy_at: None }; // rank 1 of 2
//! let mut opt = seam::AdamW::new(seam::AdamWConfig::default())?;
//! let g = Tensor::ones(4, candle_core::DType::F32, &Device::Cpu)?;
//! opt.step_spans_in(&[half], &[Some(g)], [0], |_| Ok::<(), seam::ModelError>(()), None)?;
//! let v = w.to_vec1::<f32>()?;
//! assert_eq!(v[..4], [1.0; 4]); // not this span's
//! assert!(v[4] < 1.0);
//! # Ok(()) }
//! ```

use crate::adamw::{AdamW, Moment};
use crate::error::{ModelError, Result};
use crate::shadow::Bf16Shadows;
use candle_core::{DType, Device, Tensor, Var};

/// Elements `start..start + len` of `var` in flat (row-major) order.
///
/// `copy_at`: `var` is a *detached master* of part of a parameter (a ZeRO rank's f32
/// master of its chunk, the parameter's own f32 storage released): AdamW writes the
/// updated elements into the parameter's bf16 copy from element `copy_at` on, which must
/// already exist (`crate::shadow::Bf16Shadows::copy`). `None`: the span lies in the
/// parameter itself, at `start`.
#[derive(Clone, Debug)]
pub struct Span {
    pub var: Var,
    pub start: usize,
    pub len: usize,
    pub copy_at: Option<usize>,
}

impl Span {
    /// The whole parameter.
    pub fn whole(var: &Var) -> Self {
        Self {
            var: var.clone(),
            start: 0,
            len: var.elem_count(),
            copy_at: None,
        }
    }

    /// The span is its whole parameter (not a part, nor a detached master).
    pub fn is_whole(&self) -> bool {
        self.copy_at.is_none() && self.start == 0 && self.len == self.var.elem_count()
    }

    /// Where the span's elements sit in its parameter (flat).
    pub fn at(&self) -> usize {
        self.copy_at.unwrap_or(self.start)
    }

    /// A detached master's bf16 copy target: its part of the parameter's copy `whole`.
    pub(crate) fn copy_target(&self, whole: Option<Tensor>, j: usize) -> Result<Tensor> {
        let c = whole.ok_or_else(|| {
            ModelError::Input(format!("parameter {j}: a detached master but no bf16 copy"))
        })?;
        Ok(c.flatten_all()?.narrow(0, self.at(), self.len)?)
    }

    /// The span as a flat view of the parameter's storage (writes through it, such as the
    /// fused kernel's, land in the parameter).
    pub fn view(&self) -> Result<Tensor> {
        let flat = self.var.as_tensor().flatten_all()?;
        if self.start + self.len > flat.elem_count() || !flat.is_contiguous() {
            return Err(ModelError::Input(format!(
                "span {}..{} of a parameter of {} elements{}",
                self.start,
                self.start + self.len,
                flat.elem_count(),
                if flat.is_contiguous() {
                    ""
                } else {
                    " (not contiguous)"
                }
            )));
        }
        Ok(flat.narrow(0, self.start, self.len)?)
    }

    /// Writes `x` (`len` elements, flat) into the parameter at the span.
    pub fn write(&self, x: &Tensor) -> Result<()> {
        let x = x.flatten_all()?.to_dtype(self.var.dtype())?;
        if self.is_whole() {
            self.var.set(&x.reshape(self.var.shape())?)?;
        } else {
            let flat = self.var.as_tensor().flatten_all()?;
            flat.slice_set(&x.contiguous()?, 0, self.start)?;
        }
        Ok(())
    }
}

impl AdamW {
    /// One step over `spans` (state `i` belongs to span `i`: keep the list the same from
    /// step to step), in `order` (each index once), calling `after(i)` as soon as span
    /// `i`'s update is queued; `grads[i]` has span `i`'s element count (`None`: skipped).
    /// `shadows`: the model's bf16 copies and, per span, its parameter's index there; the
    /// fused kernel writes the copy of a span that is a whole parameter, and any other
    /// span's parameter is marked stale.
    pub fn step_spans_in<E: From<ModelError>>(
        &mut self,
        params: &[Span],
        grads: &[Option<Tensor>],
        order: impl IntoIterator<Item = usize>,
        after: impl FnMut(usize) -> std::result::Result<(), E>,
        shadows: Option<(&Bf16Shadows, &[Option<usize>])>,
    ) -> std::result::Result<(), E> {
        self.step_spans_together(params, grads, order, |_, _| false, after, shadows)
    }

    /// Span `i`'s moments on the host (`None` before its first step).
    pub fn span_moments(&self, i: usize, span: &Span) -> Result<Option<(Vec<f32>, Vec<f32>)>> {
        self.moments_of(i, &span.view()?)
    }

    /// One of [`Self::span_moments`], copied alone (a checkpoint holds one span's moment on
    /// the host at a time).
    pub fn span_moment(&self, i: usize, span: &Span, which: Moment) -> Result<Option<Vec<f32>>> {
        self.moment_of(i, &span.view()?, which)
    }

    /// Restores the step count and span `i`'s moments (`span.len` elements each).
    pub fn restore_span(
        &mut self,
        steps: u64,
        i: usize,
        span: &Span,
        m: &[f32],
        v: &[f32],
    ) -> Result<()> {
        self.restore_of(steps, i, &span.view()?, m, v)
    }
}

/// `t`'s elements in a new buffer of exactly their size: a span's chunk kept apart from the
/// whole it was cut from. (candle's `Tensor::copy` clones the whole storage under a view,
/// so a chunk copied with it keeps the whole alive.)
pub fn own(t: &Tensor) -> Result<Tensor> {
    Ok(t.force_contiguous()?)
}

/// A buffer of `len` elements for a collective to write whole before anything reads it
/// (a reduce-scatter's output): left uninitialised, so that no pass over memory fills it.
pub fn received(len: usize, dtype: DType, device: &Device) -> Result<Tensor> {
    // SAFETY: candle allocates `len` elements of `dtype` on `device`; the caller's
    // collective writes every one of them before any read (comm's reduce-scatter contract).
    Ok(unsafe { Tensor::empty(len, dtype, device) }?)
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    #[test]
    fn an_owned_chunk_holds_its_elements_only() {
        let whole = Tensor::arange(0f32, 8.0, &Device::Cpu).unwrap();
        let chunk = super::own(&whole.narrow(0, 4, 2).unwrap()).unwrap();
        assert_eq!(chunk.to_vec1::<f32>().unwrap(), [4.0, 5.0]);
        let (storage, layout) = chunk.storage_and_layout();
        let candle_core::Storage::Cpu(c) = &*storage else {
            panic!("a CPU tensor")
        };
        let len = c.as_slice::<f32>().unwrap().len();
        assert_eq!((len, layout.start_offset()), (2, 0));
    }
}
