//! The all-gathers of [`crate::Zero1Overlap`]'s step, per bucket, and when they are copied
//! into the parameters: all at once ([`Gathers::complete`]) or, ahead-of-time mode, each
//! right before the first forward stage that reads one of its parameters
//! ([`Gathers::before_stage`]); the compute stream waits on the GPU, the host never blocks.
//!
//! A parameter sharded in place is all-gathered in place, into its own storage; so is a
//! flat part that is one parameter and needs no padding ([`Gathers::target`]): nothing to
//! copy, only the wait. Other flat parts are gathered into one buffer per bucket, made
//! once: a captured step's gathers write the same memory at every replay.
//!
//! A step queues each bucket's gathers as AdamW finishes it ([`Gathers::queue`]); they are
//! launched then, or, ahead-of-time, at the start of the next forward
//! ([`Gathers::launch_queued`]), which then overlaps them stage by stage as Megatron-Core's
//! `overlap_param_gather` does. Inside one CUDA graph per step that is the only place they
//! can overlap the forward: a replay ends only when all it launched has ended. The queue
//! is kept, so that a replayed step (whose host code does not run) queues it again
//! ([`Gathers::requeue`]), and a settle before a capture leaves it due, so that the
//! captured forward holds its launches.
//!
//! Errors are the ddp crate's (comm or candle) so they pass through
//! `Ddp::forward_backward_with`'s stage hook unchanged.

use candle_core::{DType, Tensor, Var};
use comm::{Communicator, Work};
use ddp::Result;

/// One bucket's all-gathers: its index, its (input, output) pairs, and where its flat part
/// is gathered ([`Gathers::target`]; `None`: no flat part).
pub(crate) type OpenBucket = (usize, Vec<(Tensor, Tensor)>, Option<(Tensor, bool)>);

pub(crate) struct Gathers {
    /// Per bucket: its all-gathers in flight, each with the gathered flat part to copy
    /// from (`None`: gathered in place), not yet collected.
    pending: Vec<Vec<(Option<Tensor>, Work)>>,
    /// Per bucket: the parameters of its flat part, in flat order.
    flat_params: Vec<Vec<usize>>,
    /// Per forward stage: the buckets holding parameters it uses.
    stage_buckets: Vec<Vec<usize>>,
    /// Per bucket: its flat part's gather buffer, once made ([`Self::target`]).
    targets: Vec<Option<(Tensor, bool)>>,
    /// The last step's buckets, in launch order, and whether their gathers are still to
    /// launch.
    queued: Vec<OpenBucket>,
    due: bool,
}

impl Gathers {
    /// `bucket_params[b]`: bucket b's parameters; `flat_params[b]`: those of its flat part,
    /// in flat order; `stage_params[s]`: the parameters forward stage s uses.
    pub(crate) fn new(
        bucket_params: &[Vec<usize>],
        flat_params: Vec<Vec<usize>>,
        stage_params: &[Vec<usize>],
    ) -> Self {
        let n = bucket_params.iter().flatten().max().map_or(0, |&i| i + 1);
        let mut bucket_of = vec![usize::MAX; n];
        for (b, ps) in bucket_params.iter().enumerate() {
            for &i in ps {
                bucket_of[i] = b;
            }
        }
        let stage_buckets = stage_params
            .iter()
            .map(|ps| {
                let mut bs: Vec<usize> = ps
                    .iter()
                    .filter_map(|&i| bucket_of.get(i).copied().filter(|&b| b != usize::MAX))
                    .collect();
                bs.sort_unstable();
                bs.dedup();
                bs
            })
            .collect();
        Self {
            pending: (0..bucket_params.len()).map(|_| Vec::new()).collect(),
            targets: vec![None; bucket_params.len()],
            flat_params,
            stage_buckets,
            queued: Vec::new(),
            due: false,
        }
    }

    /// Where the all-gather of bucket `b`'s flat part, `len` elements with padding, goes,
    /// and whether that is the parameter itself: a flat view of its one parameter when the
    /// flat part is exactly that, else a flat f32 buffer of the bucket's, made once.
    pub(crate) fn target(
        &mut self,
        b: usize,
        len: usize,
        params: &[Var],
    ) -> Result<(Tensor, bool)> {
        if let Some(t) = &self.targets[b] {
            return Ok(t.clone());
        }
        let one = match self.flat_params[b][..] {
            [i] => Some(params[i].as_tensor()),
            _ => None,
        };
        let t = match one
            .filter(|p| p.elem_count() == len && p.dtype() == DType::F32 && p.is_contiguous())
        {
            Some(p) => (p.flatten_all()?, true),
            None => {
                let dev = params[self.flat_params[b][0]].device();
                (Tensor::zeros(len, DType::F32, dev)?, false)
            }
        };
        self.targets[b] = Some(t.clone());
        Ok(t)
    }

    /// Starts a step's queue: the buckets it queues replace the last step's.
    pub(crate) fn begin_step(&mut self) {
        self.queued.clear();
        self.due = false;
    }

    /// Queues bucket `o`'s gathers (AdamW has been queued for all of it); with `now`,
    /// launches them at once (they overlap the updates after them), else leaves them to
    /// [`Self::launch_queued`].
    pub(crate) fn queue(
        &mut self,
        o: OpenBucket,
        comm: &dyn Communicator,
        now: bool,
    ) -> Result<()> {
        if now {
            return launch(&mut self.pending, &o, comm);
        }
        self.queued.push(o);
        self.due = true;
        Ok(())
    }

    /// Launches the queued gathers not yet launched, in the order they were queued (the
    /// first stages' buckets first). With `keep`, they stay due: the next forward gathers
    /// the same parts again (the same bits), as a step captured next must, to hold them.
    pub(crate) fn launch_queued(&mut self, comm: &dyn Communicator, keep: bool) -> Result<()> {
        if self.due {
            self.due = keep;
            for o in &self.queued {
                launch(&mut self.pending, o, comm)?;
            }
        }
        Ok(())
    }

    /// A captured step was replayed: the gathers it queued are due again.
    pub(crate) fn requeue(&mut self) {
        self.due = !self.queued.is_empty();
    }

    /// Makes the compute stream wait for, and copies, every pending bucket that stage `s`
    /// reads.
    pub(crate) fn before_stage(&mut self, s: usize, params: &[Var]) -> Result<()> {
        for k in 0..self.stage_buckets.get(s).map_or(0, Vec::len) {
            self.apply(self.stage_buckets[s][k], params)?;
        }
        Ok(())
    }

    /// Completes every pending bucket.
    pub(crate) fn complete(&mut self, params: &[Var]) -> Result<()> {
        for b in 0..self.pending.len() {
            self.apply(b, params)?;
        }
        Ok(())
    }

    fn apply(&mut self, b: usize, params: &[Var]) -> Result<()> {
        for (out, work) in std::mem::take(&mut self.pending[b]) {
            work.wait()?;
            let Some(out) = out else {
                continue; // gathered in place
            };
            let mut off = 0;
            for &i in &self.flat_params[b] {
                let p = &params[i];
                let n = p.elem_count();
                p.set(&out.narrow(0, off, n)?.reshape(p.shape())?)?;
                off += n;
            }
        }
        Ok(())
    }
}

/// Bucket `b`'s parameters flattened in bucket order and zero-padded to a multiple of `w`:
/// the flat part whose slices the ranks step and gather.
pub(crate) fn bucket_flat(params: &[Var], idx: &[usize], w: usize) -> crate::error::Result<Tensor> {
    let mut parts: Vec<Tensor> = idx
        .iter()
        .map(|&i| params[i].as_tensor().flatten_all())
        .collect::<candle_core::Result<_>>()?;
    let n: usize = parts.iter().map(|t| t.elem_count()).sum();
    let pad = (w - n % w) % w;
    if pad > 0 {
        parts.push(Tensor::zeros(pad, DType::F32, parts[0].device())?);
    }
    Ok(Tensor::cat(&parts, 0)?)
}

/// Launches bucket `o`'s gathers and records them as pending.
fn launch(
    pending: &mut [Vec<(Option<Tensor>, Work)>],
    o: &OpenBucket,
    comm: &dyn Communicator,
) -> Result<()> {
    let (b, pairs, target) = o;
    if pairs.is_empty() {
        return Ok(()); // FSDP's parameters: gathered stage by stage (crate::fsdp)
    }
    let work = comm.all_gather_coalesced_async(pairs)?;
    let out = target.as_ref().filter(|t| !t.1).map(|t| t.0.clone());
    pending[*b].push((out, work));
    Ok(())
}

/// How many of a step's `buckets` (at `world` ranks) gather beside its AdamW, the rest at the
/// next forward, from `ZERO1_PARAM_GATHER`: unset, `memplan::gathers_beside_adamw`'s
/// (⌈buckets ÷ world⌉; 2 in 5 at world 2); `forward` none; `adamw` all; `adamw:K` the first K.
///
/// Beside AdamW (memory-bound) the gathers take SMs from no GEMM, but too many and the step's
/// end waits for them.
pub(crate) fn beside_adamw(
    v: Option<String>,
    buckets: usize,
    world: usize,
) -> crate::error::Result<usize> {
    match v.as_deref() {
        None => Ok(memplan::gathers_beside_adamw(buckets, world)),
        Some("forward") => Ok(0),
        Some("adamw") => Ok(usize::MAX),
        Some(s) => s
            .strip_prefix("adamw:")
            .and_then(|k| k.parse().ok())
            .ok_or_else(|| {
                crate::error::Zero1Error::Input(format!(
                    "ZERO1_PARAM_GATHER={s:?}: forward, adamw or adamw:K (K buckets beside AdamW, the rest at the next forward); unset: ⌈buckets ÷ world⌉"
                ))
            }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_gather_place_is_read_or_refused_naming_the_variable() {
        let b = |v: Option<&str>| super::beside_adamw(v.map(String::from), 10, 4);
        assert_eq!(b(None).unwrap(), 3);
        assert_eq!(super::beside_adamw(None, 10, 2).unwrap(), 4);
        assert_eq!(super::beside_adamw(None, 1, 4).unwrap(), 1);
        assert_eq!(b(Some("forward")).unwrap(), 0);
        assert_eq!(b(Some("adamw")).unwrap(), usize::MAX);
        assert_eq!(b(Some("adamw:2")).unwrap(), 2);
        let e = b(Some("adam")).unwrap_err().to_string();
        assert!(e.contains("ZERO1_PARAM_GATHER=\"adam\""), "{e}");
    }
}
