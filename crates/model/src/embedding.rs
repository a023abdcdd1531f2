//! The first stage with a hand-written backward, as head.rs does for the last: the token
//! embedding. Under candle's autograd the stage's backward was `sum(out ⊙ upstream)`
//! backward: a product and a sum over the whole (b, t, d) activation, then the broadcast
//! and multiply of the sum's gradient, before the embedding's own backward kernel (about
//! 0.6 ms of an xl bf16 step at batch 32 on nvidia-h200, run 32). Here the backward is that
//! kernel alone.

use crate::error::Result;
use crate::kernels;
use crate::staged::SavedStage;
use candle_core::{DType, Tensor};

struct Saved {
    /// The table's parameter index and row count.
    id: usize,
    vocab: usize,
    /// The token ids (b·t,), u32.
    ids: Tensor,
}

/// The stage's forward: the rows of the f32 `table` (parameter `id`) named by `ids` (b, t)
/// in `dtype`, as (b, t, d); `None` where the one-op embedding does not apply (the stage
/// then runs under autograd).
pub(crate) fn forward(
    table: &Tensor,
    id: usize,
    ids: &Tensor,
    dtype: DType,
) -> Result<Option<(Tensor, Box<dyn SavedStage>)>> {
    let (b, t) = ids.dims2()?;
    let flat = ids.flatten_all()?.contiguous()?;
    let table = table.detach();
    if !kernels::embed::fused(&table, &flat, dtype) {
        return Ok(None);
    }
    let (vocab, d) = table.dims2()?;
    let out = kernels::embedding(&table, &flat, dtype)?.reshape((b, t, d))?;
    crate::profile::mark("fwd/embedding");
    let saved = Saved {
        id,
        vocab,
        ids: flat,
    };
    Ok(Some((out, Box::new(saved))))
}

impl SavedStage for Saved {
    fn backward(
        self: Box<Self>,
        upstream: Option<&Tensor>,
    ) -> Result<(Tensor, Vec<(usize, Tensor)>)> {
        let g = upstream.ok_or_else(|| {
            crate::error::ModelError::Config("the embedding cannot be the last stage".into())
        })?;
        let d = g.dims().last().copied().unwrap_or(0);
        let dw = kernels::embed::embedding_grad(&g.reshape(((), d))?, &self.ids, self.vocab)?;
        crate::profile::mark("bwd/embedding");
        // The input is the token ids: no gradient flows past this stage.
        Ok((g.clone(), vec![(self.id, dw)]))
    }
}
