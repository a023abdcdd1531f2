//! The Transformer LM: token embedding; pre-norm blocks (RMSNorm, causal multi-head
//! attention with RoPE, residual; RMSNorm, SwiGLU, residual); final RMSNorm; untied head;
//! no biases. Stages: embedding, one per block, final norm + head + loss (blocks and the
//! last stage with hand-written backward passes where the fused kernels run: block.rs,
//! head.rs).

use crate::block::{self, BlockDims, BlockWeights};
use crate::config::LmConfig;
use crate::embedding;
use crate::error::{ModelError, Result};
use crate::head::{self, HeadWeights};
use crate::kernels::cross_entropy;
use crate::layers::{attention, linear, rope_tables, swiglu};
use crate::params::{rng, Init, ParamSet};
use crate::rmsnorm::rms_norm_fused as rms_norm;
use crate::staged::{Batch, SavedStage, StagedModel};
use candle_core::{DType, Device, Tensor};

struct BlockIds {
    norm1: usize,
    qkv: usize,
    o: usize,
    norm2: usize,
    w1: usize,
    w3: usize,
    w2: usize,
}

pub struct TransformerLm {
    cfg: LmConfig,
    params: ParamSet,
    emb: usize,
    blocks: Vec<BlockIds>,
    norm: usize,
    head: usize,
    /// RoPE cos and sin tables (context, head_dim/2), f32, on `device`, built once.
    rope: (Tensor, Tensor),
    /// Compute dtype (F32, or BF16 with f32 master weights).
    dtype: DType,
    /// Blocks run the hand-written forward/backward of [`crate::block`] where supported.
    hand_written: bool,
    /// The blocks' activations checkpointed ([`Self::set_activation_checkpointing`]).
    checkpoint_blocks: bool,
}

impl TransformerLm {
    /// Builds the model with weights drawn from `seed` (same seed, same weights anywhere).
    pub fn new(cfg: LmConfig, seed: u64, device: &Device) -> Result<Self> {
        cfg.validate()?;
        let (d, f, v) = (cfg.d_model, cfg.d_ff, cfg.vocab);
        let mut r = rng(seed);
        let mut p = ParamSet::new();
        let emb = p.add("emb", &[v, d], Init::Normal { std: 1.0 }, &mut r, device)?;
        let mut blocks = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let lin = |fan_in| Init::Linear { fan_in };
            blocks.push(BlockIds {
                norm1: p.add(
                    format!("blocks.{l}.norm1"),
                    &[d],
                    Init::Const(1.0),
                    &mut r,
                    device,
                )?,
                qkv: p.add(
                    format!("blocks.{l}.qkv"),
                    &[3 * d, d],
                    lin(d),
                    &mut r,
                    device,
                )?,
                o: p.add(format!("blocks.{l}.o"), &[d, d], lin(d), &mut r, device)?,
                norm2: p.add(
                    format!("blocks.{l}.norm2"),
                    &[d],
                    Init::Const(1.0),
                    &mut r,
                    device,
                )?,
                w1: p.add(format!("blocks.{l}.w1"), &[f, d], lin(d), &mut r, device)?,
                w3: p.add(format!("blocks.{l}.w3"), &[f, d], lin(d), &mut r, device)?,
                w2: p.add(format!("blocks.{l}.w2"), &[d, f], lin(f), &mut r, device)?,
            });
        }
        let norm = p.add("norm", &[d], Init::Const(1.0), &mut r, device)?;
        // The readout starts small (N(0, 1/d²), muP-style) so that the logits start near zero
        // and the loss at initialisation is ln(vocab); every other layer uses PyTorch's
        // defaults, as the anchor does.
        let head = p.add(
            "head",
            &[v, d],
            Init::Normal {
                std: 1.0 / d as f32,
            },
            &mut r,
            device,
        )?;
        let rope = rope_tables(cfg.context, cfg.head_dim(), cfg.rope_theta, device)?;
        Ok(Self {
            rope,
            cfg,
            params: p,
            emb,
            blocks,
            norm,
            head,
            dtype: DType::F32,
            hand_written: true,
            checkpoint_blocks: false,
        })
    }

    pub fn config(&self) -> &LmConfig {
        &self.cfg
    }

    /// The parameters, to release f32 masters a distributed optimizer keeps the parts of
    /// (`seam::ParamSet::release`; the model then reads those through their bf16 copies).
    pub fn params_mut(&mut self) -> &mut ParamSet {
        &mut self.params
    }

    /// Sets the compute dtype (parameters stay f32 masters; they are cast per use). bf16
    /// on CUDA also enables the parameters' bf16 copies that [`crate::AdamW::step_params`]
    /// writes and the blocks' forward takes instead of casting ([`crate::shadow`]).
    pub fn set_compute_dtype(&mut self, dtype: DType) {
        self.dtype = dtype;
        let cuda = self.params.var(0).device().is_cuda();
        self.params
            .enable_bf16_shadows(cuda && dtype == DType::BF16);
        self.declare_copy_only();
    }

    /// Chooses the blocks' backward in the staged path ([`crate::forward_backward`]): the
    /// hand-written one (default; used on CUDA, and on the CPU in f32) or candle's autograd.
    pub fn set_hand_written_backward(&mut self, on: bool) {
        self.hand_written = on;
        self.declare_copy_only();
    }

    /// Activation checkpointing (`seam::StagedModel::checkpointed`): with `true`, each
    /// block's forward keeps only its input, and runs again right before its backward
    /// (torchtitan's full activation checkpointing, Megatron's full recompute per layer):
    /// the same gradients (bit for bit on the CPU and, checked, on GPUs at 128 tokens; over
    /// 128 tokens not checked on GPUs), one block's activations held at a time instead of
    /// every block's, for one more forward of the blocks. The embedding and the head keep
    /// theirs. Off by default.
    pub fn set_activation_checkpointing(&mut self, on: bool) {
        self.checkpoint_blocks = on;
    }

    /// The hand-written bf16 stages read every weight but the embedding table (read in
    /// f32 by its kernel) through `compute_weight`: the copy, or a cast of the master.
    /// Candle's autograd path casts the masters (`w`), so then none is copy-only.
    fn declare_copy_only(&mut self) {
        let on = self.hand_written && self.params.bf16_shadows().enabled();
        let mask = (0..self.params.len())
            .map(|i| on && i != self.emb)
            .collect();
        self.params.set_bf16_copy_only(mask);
    }

    /// Logits (batch, seq, vocab) in f32 for token ids `input` (batch, seq): every stage
    /// but the loss, for sampling. Checks the ids like a batch.
    pub fn logits(&self, input: &Tensor) -> Result<Tensor> {
        self.logits_with(input, |_| Ok(()))
    }

    /// [`Self::logits`] with `before_stage(s)` right before each stage's weights are read
    /// (the last, the head's, as in a forward): where a distributed strategy gathers them
    /// (FSDP), every rank calls this together.
    pub fn logits_with(
        &self,
        input: &Tensor,
        mut before_stage: impl FnMut(usize) -> Result<()>,
    ) -> Result<Tensor> {
        self.check_ids(input, "token")?;
        let batch = Batch::new(input.clone(), input.clone());
        before_stage(0)?;
        let mut x = self.forward_stage(0, None, &batch)?;
        for s in 1..=self.cfg.layers {
            before_stage(s)?;
            x = self.forward_stage(s, Some(&x), &batch)?;
        }
        before_stage(self.cfg.layers + 1)?;
        let h = rms_norm(&x, &self.w(self.norm)?, self.cfg.norm_eps)?;
        Ok(linear(&h, &self.w(self.head)?)?.to_dtype(DType::F32)?)
    }

    /// The RoPE tables for the first `t` positions (views of the ones built at start).
    fn rope_for(&self, t: usize) -> Result<(Tensor, Tensor)> {
        Ok((self.rope.0.narrow(0, 0, t)?, self.rope.1.narrow(0, 0, t)?))
    }

    /// Parameter `i` detached in the compute dtype for a hand-written stage: in bf16 the
    /// copy AdamW wrote (crate::shadow) if fresh, else a cast.
    fn compute_weight(&self, i: usize) -> Result<Tensor> {
        let p = self.params.var(i).as_tensor();
        match self.dtype {
            DType::BF16 => match self.params.bf16_shadows().take_fresh(i) {
                Some(copy) => Ok(copy),
                None => crate::kernels::to_bf16(p),
            },
            d => Ok(p.detach().to_dtype(d)?),
        }
    }

    fn w(&self, i: usize) -> Result<Tensor> {
        let p = match self.params.is_released(i) {
            // Its value is its bf16 copy, held whole (seam::ParamSet::release).
            true => self.params.bf16_shadows().copy(i).ok_or_else(|| {
                ModelError::Input(format!("parameter {i}: released, and no bf16 copy"))
            })?,
            false => self.params.var(i).as_tensor().clone(),
        };
        Ok(p.to_dtype(self.dtype)?)
    }

    /// Token ids (batch, seq) of dtype u32 for this model and `device`, from host values;
    /// rejects out-of-range ids and over-long sequences naming the value.
    pub fn tokens(&self, ids: &[u32], batch: usize, device: &Device) -> Result<Tensor> {
        if batch == 0 || !ids.len().is_multiple_of(batch) {
            return Err(ModelError::Input(format!(
                "{} token ids do not split into {batch} sequences",
                ids.len()
            )));
        }
        let t = Tensor::from_vec(ids.to_vec(), (batch, ids.len() / batch), device)?;
        self.check_ids(&t, "token")?;
        Ok(t)
    }

    fn check_ids(&self, t: &Tensor, what: &str) -> Result<()> {
        let (_, seq) = t.dims2().map_err(|_| {
            ModelError::Input(format!(
                "{what} ids must have shape (batch, seq), got {:?}",
                t.dims()
            ))
        })?;
        if seq > self.cfg.context {
            return Err(ModelError::Input(format!(
                "sequence length {seq} is longer than the context {}",
                self.cfg.context
            )));
        }
        if t.dtype() != DType::U32 {
            return Err(ModelError::Input(format!(
                "{what} ids must be u32, got {:?}",
                t.dtype()
            )));
        }
        // The range check reads the ids back (a host sync), which a CUDA graph capture
        // cannot hold: a captured step's static inputs were checked by the eager warm-up,
        // and what is copied into them is the caller's to check (`tokens` does).
        if crate::graph::capturing(t.device()) {
            return Ok(());
        }
        let max = t.flatten_all()?.max(0)?.to_scalar::<u32>()?;
        if max as usize >= self.cfg.vocab {
            return Err(ModelError::Input(format!(
                "{what} id {max} is out of range for vocabulary {}",
                self.cfg.vocab
            )));
        }
        Ok(())
    }
}

impl StagedModel for TransformerLm {
    fn params(&self) -> &ParamSet {
        &self.params
    }

    fn num_stages(&self) -> usize {
        self.cfg.layers + 2
    }

    fn stage_params(&self, s: usize) -> Vec<usize> {
        let l = self.cfg.layers;
        match s {
            0 => vec![self.emb],
            s if s <= l => {
                let b = &self.blocks[s - 1];
                vec![b.norm1, b.qkv, b.o, b.norm2, b.w1, b.w3, b.w2]
            }
            _ => vec![self.norm, self.head],
        }
    }

    fn rows_stage0(&self) -> bool {
        let table = self.params.var(self.emb).as_tensor();
        crate::kernels::embed::fused_table(table, self.dtype)
    }

    fn gradients_from_rows(&self, ids: &Tensor, rows: &Tensor) -> Result<Vec<(usize, Tensor)>> {
        let vocab = self.cfg.vocab;
        let rows = rows.reshape(((), self.cfg.d_model))?;
        let dw = crate::kernels::embed::embedding_grad(&rows, ids, vocab)?;
        Ok(vec![(self.emb, dw)])
    }

    fn checkpointed(&self, s: usize) -> bool {
        self.checkpoint_blocks && (1..=self.cfg.layers).contains(&s)
    }

    fn check_batch(&self, batch: &Batch) -> Result<()> {
        self.check_ids(&batch.input, "token")?;
        self.check_ids(&batch.targets, "target")?;
        if batch.input.dims() != batch.targets.dims() {
            return Err(ModelError::Input(format!(
                "targets {:?} do not match tokens {:?}",
                batch.targets.dims(),
                batch.input.dims()
            )));
        }
        Ok(())
    }

    fn forward_saved(
        &self,
        s: usize,
        x: Option<&Tensor>,
        batch: &Batch,
    ) -> Result<Option<(Tensor, Box<dyn SavedStage>)>> {
        let supported = batch.input.device().is_cuda() || self.dtype == DType::F32;
        if !self.hand_written || !supported {
            return Ok(None);
        }
        let Some(x) = x else {
            let table = self.params.var(self.emb).as_tensor();
            return embedding::forward(table, self.emb, &batch.input, self.dtype);
        };
        if s > self.cfg.layers {
            let ids = [self.norm, self.head];
            let [a, b] = ids.map(|i| self.compute_weight(i));
            let w = HeadWeights { w: [a?, b?], ids };
            return Ok(Some(head::forward(
                x,
                &batch.targets,
                w,
                self.cfg.norm_eps as f32,
            )?));
        }
        let blk = &self.blocks[s - 1];
        let ids = [blk.norm1, blk.qkv, blk.o, blk.norm2, blk.w1, blk.w3, blk.w2];
        let [a, b, c, d, e, f, g] = ids.map(|i| self.compute_weight(i));
        let (cos, sin) = self.rope_for(x.dim(1)?)?;
        let dims = BlockDims {
            heads: self.cfg.heads,
            eps: self.cfg.norm_eps as f32,
            cos,
            sin,
        };
        let weights = BlockWeights {
            w: [a?, b?, c?, d?, e?, f?, g?],
            ids,
        };
        Ok(Some(block::forward(x, weights, dims)?))
    }

    fn forward_stage(&self, s: usize, x: Option<&Tensor>, batch: &Batch) -> Result<Tensor> {
        let l = self.cfg.layers;
        if s == 0 {
            let (b, t) = batch.input.dims2()?;
            let table = self.params.var(self.emb).as_tensor();
            let e = crate::kernels::embedding(table, &batch.input, self.dtype)?;
            crate::profile::mark("fwd/embedding");
            return Ok(e.reshape((b, t, self.cfg.d_model))?);
        }
        let x = x.ok_or_else(|| ModelError::Config(format!("stage {s} needs an input")))?;
        let eps = self.cfg.norm_eps;
        if s <= l {
            let blk = &self.blocks[s - 1];
            let (cos, sin) = self.rope_for(x.dim(1)?)?;
            let h = rms_norm(x, &self.w(blk.norm1)?, eps)?;
            let x = (x + attention(
                &h,
                &self.w(blk.qkv)?,
                &self.w(blk.o)?,
                self.cfg.heads,
                &cos,
                &sin,
            )?)?;
            let h = rms_norm(&x, &self.w(blk.norm2)?, eps)?;
            return Ok((&x + swiglu(&h, &self.w(blk.w1)?, &self.w(blk.w3)?, &self.w(blk.w2)?)?)?);
        }
        let h = rms_norm(x, &self.w(self.norm)?, eps)?;
        crate::profile::mark("fwd/head/norm");
        // bf16 logits go to the loss as they are (it computes in f32).
        let logits = linear(&h, &self.w(self.head)?)?;
        crate::profile::mark("fwd/head/proj");
        let v = self.cfg.vocab;
        let loss = cross_entropy(&logits.reshape(((), v))?, &batch.targets.flatten_all()?)?;
        crate::profile::mark("fwd/head/loss");
        Ok(loss)
    }
}
