//! The deferred bf16 reduce-scatter of `bench allreduce --op reduce-scatter`: what DDP
//! (split) and ZeRO-1 launch during the backward. It calls
//! `Communicator::reduce_scatter_deferred_with` in place, so this rank's chunk of each
//! buffer receives the average; the launch is then waited for. On NCCL at 2 and 4 ranks,
//! comm's copy engines do the work (`comm::nccl::ce_reduce`).
//!
//! The message is split into `buffers` buffers of one launch, as a DDP launch holds a
//! stage's gradients. The question it answers: does the copy engines' rate fall with the
//! copies a launch makes? Issue 47, session 35: inside a step they brought 137-161 GB/s
//! into a GPU at world 4, against 231 GB/s alone in ce-probe (docs/results/gpus-s35.md).

use anyhow::{bail, Result};
use candle_core::{DType, Tensor};
use comm::{Communicator, Deferred, ReduceOp};

/// One rank's buffers of one launch: each one's input (kept, for the checked runs) and the
/// buffer the timed runs reduce in place.
pub(crate) struct Parts {
    inputs: Vec<Tensor>,
    bufs: Vec<Tensor>,
    /// The f32 pattern's slice of each buffer, for the expected sums.
    base: Vec<Tensor>,
}

impl Parts {
    /// `buffers` bf16 buffers of rank r's input, (r+1) × `base` (a pattern of small
    /// integers: sums over the ranks are exact in bf16), each a multiple of the world size.
    pub(crate) fn new(comm: &dyn Communicator, base: &Tensor, buffers: usize) -> Result<Self> {
        let world = comm.world_size();
        let per = base.elem_count() / buffers.max(1) / world * world;
        if buffers == 0 || per == 0 {
            bail!(
                "--buffers {buffers}: a message of {} bf16 elements cannot hold {buffers} buffers of {world} ranks' chunks",
                base.elem_count()
            );
        }
        let mut parts = Parts {
            inputs: Vec::new(),
            bufs: Vec::new(),
            base: Vec::new(),
        };
        for k in 0..buffers {
            let b = base.narrow(0, k * per, per)?;
            let input = b
                .affine((comm.rank() + 1) as f64, 0.0)?
                .to_dtype(DType::BF16)?;
            parts.bufs.push(input.copy()?);
            parts.inputs.push(input);
            parts.base.push(b);
        }
        Ok(parts)
    }

    /// Each buffer with this rank's chunk as its output, in place.
    fn pairs(bufs: &[Tensor], comm: &dyn Communicator) -> Result<Vec<(Tensor, Tensor)>> {
        let (world, rank) = (comm.world_size(), comm.rank());
        bufs.iter()
            .map(|b| {
                let c = b.elem_count() / world;
                Ok((b.clone(), b.narrow(0, rank * c, c)?))
            })
            .collect()
    }

    fn launch(bufs: &[Tensor], comm: &dyn Communicator, op: ReduceOp) -> Result<()> {
        let pairs = Self::pairs(bufs, comm)?;
        comm.reduce_scatter_deferred_with(&pairs, op, &Deferred::default())?
            .wait()?;
        Ok(())
    }

    /// A launch (sum) on fresh copies of the inputs: how many elements of this rank's
    /// chunks differ from the exact sums.
    pub(crate) fn checked(&self, comm: &dyn Communicator) -> Result<u64> {
        let (world, rank) = (comm.world_size(), comm.rank());
        let bufs = self
            .inputs
            .iter()
            .map(|t| t.copy())
            .collect::<candle_core::Result<Vec<_>>>()?;
        Self::launch(&bufs, comm, ReduceOp::Sum)?;
        let mut bad = 0;
        for (b, base) in bufs.iter().zip(&self.base) {
            let c = b.elem_count() / world;
            let want = base
                .narrow(0, rank * c, c)?
                .affine((world * (world + 1) / 2) as f64, 0.0)?;
            let got = b.narrow(0, rank * c, c)?.to_dtype(DType::F32)?;
            bad += got
                .ne(&want)?
                .to_dtype(DType::F32)?
                .sum_all()?
                .to_scalar::<f32>()? as u64;
        }
        Ok(bad)
    }

    /// The timed launch: the average, in place (it stays bounded however often it runs).
    pub(crate) fn run(&self, comm: &dyn Communicator) -> Result<()> {
        Self::launch(&self.bufs, comm, ReduceOp::Avg)
    }
}
