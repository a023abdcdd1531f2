//! AdamW's update of a list of spans ([`crate::Span`]): on CUDA the fused kernel, the
//! list's f32 parameters in few launches ([`crate::fused_adamw::group`]); elsewhere
//! candle's ops, one span at a time. `AdamW::step`, the step's replicated AdamW, DDP's
//! per-bucket AdamW and the in-backward AdamW hand it every parameter they update at once;
//! ZeRO-1 a bucket's spans at a time ([`AdamW::step_spans_together`]).

use crate::adamw::{AdamW, Moments};
use crate::error::{ModelError, Result};
use crate::shadow::Bf16Shadows;
use crate::span::Span;
use candle_core::Tensor;

/// One span's update: its state's index, the span, its gradient (as many elements, any
/// shape) and, where the model keeps bf16 copies, them and the parameter's index there.
pub(crate) type SpanUpdate<'a> = (
    usize,
    &'a Span,
    &'a Tensor,
    Option<(&'a Bf16Shadows, usize)>,
);

impl AdamW {
    /// [`Self::step_spans_in`], the updates of consecutive spans (in `order`) for which
    /// `together(previous, next)` holds queued together (on CUDA in few launches), and
    /// `after(i)` called for each of them, in order, once they are queued. ZeRO-1 updates a
    /// bucket's spans together, then launches its gather.
    pub fn step_spans_together<E: From<ModelError>>(
        &mut self,
        params: &[Span],
        grads: &[Option<Tensor>],
        order: impl IntoIterator<Item = usize>,
        together: impl Fn(usize, usize) -> bool,
        mut after: impl FnMut(usize) -> std::result::Result<(), E>,
        shadows: Option<(&Bf16Shadows, &[Option<usize>])>,
    ) -> std::result::Result<(), E> {
        if params.len() != grads.len() {
            return Err(ModelError::Input(format!(
                "{} parameters but {} gradients",
                params.len(),
                grads.len()
            ))
            .into());
        }
        let order: Vec<usize> = order.into_iter().collect();
        let mut seen = vec![false; params.len()];
        let duplicate_or_out = order
            .iter()
            .any(|&i| i >= params.len() || std::mem::replace(&mut seen[i], true));
        if duplicate_or_out || seen.contains(&false) {
            return Err(ModelError::Input(format!(
                "step order {order:?} is not a permutation of 0..{}",
                params.len()
            ))
            .into());
        }
        self.begin(params.len(), params.iter().map(|s| s.var.as_tensor()))?;
        let mut group: Vec<usize> = Vec::new();
        for (at, &i) in order.iter().enumerate() {
            group.push(i);
            let next = order.get(at + 1);
            if next.is_some_and(|&j| together(i, j)) {
                continue;
            }
            let items: Vec<SpanUpdate> = (group.iter())
                .filter_map(|&k| {
                    let shadow =
                        shadows.and_then(|(sh, ix)| Some((sh, ix.get(k).copied().flatten()?)));
                    Some((k, &params[k], grads[k].as_ref()?, shadow))
                })
                .collect();
            self.update_spans(&items, None)?;
            for &k in &items {
                after(k.0)?;
            }
            group.clear();
        }
        self.grad_scale = None;
        Ok(())
    }

    /// Queues every item's update for the current step count, the fused ones together:
    /// state `i`'s of its span with its gradient; with bf16 copies, the parameter's copy
    /// written (fused path) where the span is the whole parameter, else made stale.
    /// `on`: launch them on this side stream instead (the caller orders it; gradients there
    /// must be contiguous f32 or bf16 already, as [`Self::prepare_side`] leaves them).
    pub(crate) fn update_spans(
        &mut self,
        items: &[SpanUpdate<'_>],
        on: Option<&crate::in_backward::SideStream>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        let items = &self.update_fused(items, on)?;
        #[cfg(not(feature = "cuda"))]
        let _ = on;
        for &(i, span, g, shadow) in items {
            self.update_composed(i, span, g, shadow)?;
        }
        Ok(())
    }

    /// The fused updates of `items`, queued; returns the items that are not for the fused
    /// kernel.
    #[cfg(feature = "cuda")]
    fn update_fused<'a>(
        &mut self,
        items: &[SpanUpdate<'a>],
        on: Option<&crate::in_backward::SideStream>,
    ) -> Result<Vec<SpanUpdate<'a>>> {
        use crate::fused_adamw::{self as fa, group};
        struct Fused<'a> {
            i: usize,
            p: Tensor,
            g: Tensor,
            mom: fa::DeviceMoments,
            copy: Option<Tensor>,
            span: &'a Span,
            writes: Option<(&'a Bf16Shadows, usize)>,
            shadow: Option<(&'a Bf16Shadows, usize)>,
        }
        let mut rest = Vec::new();
        let mut fused = Vec::new();
        for &(i, span, g, shadow) in items {
            let p = span.view()?;
            if !self.uses_fused(&p) {
                rest.push((i, span, g, shadow));
                continue;
            }
            if on.is_some() {
                fa::side_grad(g)?;
            }
            // The whole copy where the span is the whole parameter; the span's part of it
            // where the copy alone may carry the value (a ZeRO-1 rank then all-gathers the
            // copy and holds it: Bf16Shadows::hold).
            let writes = shadow.filter(|&(sh, j)| span.is_whole() || sh.gatherable(j));
            let copy = match writes {
                // A detached master: the copy is the parameter's value, gathered whole.
                Some((sh, j)) if span.copy_at.is_some() => {
                    sh.mark_stale(j); // until gathered and held
                    Some(span.copy_target(sh.copy(j), j)?)
                }
                Some((sh, j)) => {
                    let c = sh.target(j, span.var.as_tensor())?;
                    Some(match span.is_whole() {
                        true => c,
                        false => c.flatten_all()?.narrow(0, span.start, span.len)?,
                    })
                }
                None => None,
            };
            let mom = match self.state[i].take() {
                Some(Moments::Device(d)) => d,
                _ => fa::zero_moments(&p)?,
            };
            let g = fa::kernel_grad(g)?;
            fused.push(Fused {
                i,
                p,
                g,
                mom,
                copy,
                span,
                writes,
                shadow,
            });
        }
        if fused.is_empty() {
            return Ok(rest);
        }
        let s = self
            .scalars
            .as_ref()
            .ok_or_else(|| ModelError::Input("fused AdamW: step scalars not uploaded".into()))?;
        let scale = self.grad_scale.as_ref();
        match on.map(|side| (side.stream(), side.max_blocks())) {
            // A capped grid (blocks left to the GEMMs beside it): a launch a tensor.
            Some((stream, Some(cap))) => {
                for f in fused.iter_mut() {
                    let on = Some((stream, Some(cap)));
                    fa::step(&f.p, &f.g, &mut f.mom, s, f.copy.as_ref(), on, scale)?;
                }
            }
            stream => {
                let mut list: Vec<group::Item> = (fused.iter_mut())
                    .map(|f| group::Item {
                        p: &f.p,
                        g: &f.g,
                        moments: &mut f.mom,
                        copy: f.copy.as_ref(),
                    })
                    .collect();
                group::step(&mut list, s, stream.map(|(st, _)| st), scale)?;
            }
        }
        for f in fused {
            self.state[f.i] = Some(Moments::Device(f.mom));
            match (f.writes, f.shadow) {
                (Some((sh, j)), _) if f.span.is_whole() => sh.mark_fresh(j),
                (Some(_), _) => {} // stale (target) until gathered and held
                (None, Some((sh, j))) => sh.mark_stale(j),
                _ => {}
            }
        }
        Ok(rest)
    }

    /// One span's update by candle's ops (the CPU, or a parameter the fused kernel does not
    /// take).
    fn update_composed(
        &mut self,
        i: usize,
        span: &Span,
        g: &Tensor,
        shadow: Option<(&Bf16Shadows, usize)>,
    ) -> Result<()> {
        let p = span.view()?;
        // A non-finite clipping coefficient (a non-finite norm) skips the step, as the fused
        // kernel does (a host read: this path is the CPU's).
        if let Some(nc) = &self.grad_scale {
            let coef = nc
                .narrow(0, 1, 1)?
                .to_dtype(candle_core::DType::F32)?
                .to_vec1::<f32>()?;
            if !coef[0].is_finite() {
                return Ok(());
            }
        }
        if let Some((sh, j)) = shadow {
            sh.mark_stale(j);
        }
        let c = self.cfg;
        let (bc1, bc2_sqrt) = self.bias_corrections();
        let g = g.flatten_all()?.to_dtype(p.dtype())?;
        let g = match &self.grad_scale {
            Some(nc) => g.broadcast_mul(&nc.narrow(0, 1, 1)?.to_dtype(p.dtype())?)?,
            None => g,
        };
        let (m, v) = match self.state[i].take() {
            Some(Moments::Tensors(m, v)) => (m, v),
            _ => (g.zeros_like()?, g.zeros_like()?),
        };
        let m = ((m * c.beta1)? + (&g * (1.0 - c.beta1))?)?;
        let v = ((v * c.beta2)? + (g.sqr()? * (1.0 - c.beta2))?)?;
        let decayed = (p * (1.0 - c.lr * c.weight_decay))?;
        let denom = ((v.sqrt()? / bc2_sqrt)? + c.eps)?;
        let upd = (m.div(&denom)? * (c.lr / bc1))?;
        let new = (decayed - upd)?;
        span.write(&new)?;
        // A detached master's part of the bf16 copy, as the fused kernel writes it (the
        // cast, rounding to nearest even), for the step to gather.
        if let (Some(_), Some((sh, j))) = (span.copy_at, shadow) {
            let x = new.to_dtype(candle_core::DType::BF16)?.contiguous()?;
            span.copy_target(sh.copy(j), j)?.slice_set(&x, 0, 0)?;
        }
        self.state[i] = Some(Moments::Tensors(m, v));
        Ok(())
    }
}
