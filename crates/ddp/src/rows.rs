//! Stage 0's gradients from every rank's rows ([`DdpOptions::gather_rows`]). Where the
//! model's first stage is an embedding table ([`seam::StagedModel::rows_stage0`]), its
//! gradient is a sum of its output gradient's rows by token id: nonzero on the batch's
//! tokens only, and final only at the very end of the backward. Reduced as a bucket it is
//! the step's last launch, with nothing left to hide it behind (xl: 50,304 × 1,600, 161 MB
//! in bf16). Instead every rank gathers every rank's rows and ids (8 × 128 tokens of xl:
//! 3.3 MB of bf16 rows a rank) and computes the averaged gradient itself: the sum over all
//! ranks' tokens in rank and token order, times 1/world, the same bits on every rank.
//!
//! Taken in a step where it moves fewer bytes (world × tokens ≤ twice the table's rows: a
//! rank receives (world − 1) × tokens rows, a ring all-reduce 2 (world − 1) / world tables), with no
//! accumulated micro-batch (their sums go through the buckets). ZeRO-1 keeps this rank's
//! part of each, as the bucket's reduce-scatter would; not ZeRO-2 or FSDP, which free
//! gradients during the backward. Every rank's batch must hold as many tokens (the
//! gathers' sizes must agree), hence opt-in; `DDP_ROWS=0` turns it off.

use crate::error::{DdpError, Result};
use crate::reducer::Ddp;
use crate::DdpOptions;
use candle_core::{DType, Tensor};
use comm::Work;
use seam::{Batch, StagedModel};

/// Largest table whose ids the gathers carry exactly (as f32: comm gathers floats).
const MAX_ROWS: usize = 1 << 24;

/// What a Ddp that takes stage 0's gradients from rows knows of them.
pub(crate) struct Rows {
    /// Stage 0's parameters (they go in a bucket of their own, used with accumulation).
    pub(crate) params: Vec<usize>,
    /// The smallest table's row count: a step gathers at most twice as many tokens.
    table_rows: usize,
}

/// `opts` with [`DdpOptions::gather_rows`] off where `DDP_ROWS=0`.
pub(crate) fn resolved(mut opts: DdpOptions) -> Result<DdpOptions> {
    let what = (
        "stage 0's gradients from the gathered rows",
        "reduced in a bucket",
    );
    if crate::options::switch("DDP_ROWS", what)? == Some(false) {
        opts.gather_rows = false;
    }
    Ok(opts)
}

/// The plan where every rank takes stage 0's gradients from rows: asked, above one rank,
/// not releasing gradients, a model whose stage 0 gives them and whose other stages use
/// none of its parameters, tables of at most [`MAX_ROWS`] rows.
pub(crate) fn plan(model: &dyn StagedModel, opts: &DdpOptions, world: usize) -> Option<Rows> {
    let asked = opts.gather_rows && world > 1 && !opts.release_gradients;
    if !asked || model.num_stages() < 2 || !model.rows_stage0() {
        return None;
    }
    let params = model.stage_params(0);
    let shared = (1..model.num_stages()).any(|s| {
        let used = model.stage_params(s);
        params.iter().any(|i| used.contains(i))
    });
    let vars = model.params().vars();
    let table_rows = (params.iter())
        .map(|&i| vars[i].dims().first().copied().unwrap_or(0))
        .min()?;
    (!shared && !params.is_empty() && table_rows <= MAX_ROWS).then_some(Rows { params, table_rows })
}

/// A step's gathers of every rank's ids, launched before the forward.
pub(crate) struct IdsInFlight {
    work: Work,
    ids: Tensor,
}

impl Ddp {
    /// Whether this step takes stage 0's gradients from rows (`acc`: accumulated
    /// micro-batches are added in this step), and if so the gather of every rank's ids,
    /// launched now.
    pub(crate) fn rows_begin(&self, batch: &Batch, acc: bool) -> Result<Option<IdsInFlight>> {
        let w = self.comm.world_size();
        let n = batch.input.elem_count();
        let fewer = |r: &Rows| w * n <= 2 * r.table_rows;
        let take = (self.rows.as_ref()).is_some_and(|r| !acc && n > 0 && fewer(r));
        if !take {
            return Ok(None);
        }
        let mine = batch
            .input
            .flatten_all()?
            .to_dtype(DType::F32)?
            .contiguous()?;
        let ids = Tensor::zeros(w * n, DType::F32, &self.device)?;
        let work = self.comm.all_gather_async(&mine, &ids)?;
        Ok(Some(IdsInFlight { work, ids }))
    }

    /// Stage 0's averaged gradients from `upstream` (∂loss/∂ stage 0's output, this
    /// rank's) and every rank's ids: every rank's rows gathered, then the model's
    /// gradients from all of them, scaled by 1/world.
    pub(crate) fn rows_gradients(
        &self,
        model: &dyn StagedModel,
        ids: IdsInFlight,
        upstream: Option<Tensor>,
    ) -> Result<Vec<(usize, Tensor)>> {
        let up = upstream.ok_or_else(|| {
            DdpError::Input("stage 0's output got no gradient from the backward".into())
        })?;
        let w = self.comm.world_size();
        let d = up.dims().last().copied().unwrap_or(1).max(1);
        let mine = up.flatten_all()?.contiguous()?;
        let rows = Tensor::zeros(w * mine.elem_count(), mine.dtype(), &self.device)?;
        let work = self.comm.all_gather_async(&mine, &rows)?;
        ids.work.wait()?;
        work.wait()?;
        let ids = ids.ids.to_dtype(DType::U32)?;
        let rows = (rows.reshape(((), d))?.to_dtype(DType::F32)? * (1.0 / w as f64))?;
        Ok(model.gradients_from_rows(&ids, &rows)?)
    }

    /// This rank's part of each of stage 0's averaged gradients, for the norm: the r-th
    /// of `world` near-equal slices (the squares summed over the ranks are the whole's).
    pub(crate) fn rows_parts(&self) -> Result<Vec<Tensor>> {
        let (w, r) = (self.comm.world_size(), self.comm.rank());
        (self.local.iter())
            .map(|(_, g)| {
                let n = g.elem_count();
                let (a, b) = (r * n / w, (r + 1) * n / w);
                Ok(g.flatten_all()?.narrow(0, a, b - a)?)
            })
            .collect()
    }

    /// Whether bucket `b` holds stage 0's gradients that a step may take from rows (it is
    /// then not launched).
    pub(crate) fn rows_bucket(&self, b: usize) -> bool {
        let rows = |i: &usize| self.rows.as_ref().is_some_and(|r| r.params.contains(i));
        self.buckets[b].params.iter().all(rows)
    }
}
