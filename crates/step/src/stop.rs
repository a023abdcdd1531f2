//! Stopping every rank after the same step (a preemption notice: SIGTERM to the launcher,
//! forwarded to every rank), or checkpointing at the same step (a cadence in minutes, which
//! each rank's clock reads at its own moment). Each rank sees its reason at its own point;
//! the step carries the request as a flag uploaded with the batch (2 stop, 1 checkpoint),
//! all-reduced (max) after the step and read back with its `[loss, norm]`, so every rank
//! learns it from the same step's values and acts at the same step boundary. Off unless
//! asked for ([`crate::TrainStep::enable_stop`]): then one tiny all-reduce per step,
//! outside the captured graph.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

/// The agreed flag's values: stop (a checkpoint first), or checkpoint only.
pub(crate) const STOP: f32 = 2.0;
pub(crate) const CHECKPOINT: f32 = 1.0;

pub(crate) struct Stop {
    /// The flag the step reads: fixed on CUDA (copied in with the batch), else made per step.
    flag: Tensor,
    asked: bool,
    /// Until [`Self::checkpoint_done`]: a rank's request stays up, so that a step read
    /// through a flush (which nobody acts on) does not lose it.
    checkpoint: bool,
}

impl Stop {
    pub(crate) fn new(device: &Device) -> Result<Self> {
        Ok(Self {
            flag: Tensor::zeros(1, DType::F32, device)?,
            asked: false,
            checkpoint: false,
        })
    }

    pub(crate) fn ask(&mut self) {
        self.asked = true;
    }

    pub(crate) fn ask_checkpoint(&mut self) {
        self.checkpoint = true;
    }

    pub(crate) fn checkpoint_done(&mut self) {
        self.checkpoint = false;
    }

    /// (this rank's request on the host, the device flag the step reads): on CUDA the
    /// batch's upload copies the first into the second; elsewhere the flag is the value.
    pub(crate) fn upload_pair(&mut self) -> Result<(Tensor, Tensor)> {
        let level = match (self.asked, self.checkpoint) {
            (true, _) => STOP,
            (false, true) => CHECKPOINT,
            (false, false) => 0.0,
        };
        let host = Tensor::new(&[level], &Device::Cpu)?;
        if !self.flag.device().is_cuda() {
            self.flag = host.to_device(self.flag.device())?;
        }
        Ok((host, self.flag.clone()))
    }

    /// `out` with the flag agreed over the ranks (max) appended.
    pub(crate) fn append(
        &self,
        out: &Tensor,
        comm: Option<&dyn comm::Communicator>,
    ) -> Result<Tensor> {
        let agreed = self.flag.copy()?;
        if let Some(c) = comm.filter(|c| c.world_size() > 1) {
            c.all_reduce(&agreed, comm::ReduceOp::Max)?;
        }
        Ok(Tensor::cat(&[out, &agreed], 0)?)
    }
}
