//! Stopping every rank after the same step (a preemption notice: SIGTERM to the launcher,
//! forwarded to every rank), or checkpointing at the same step (a cadence in minutes, which
//! each rank's clock reads at its own moment). Each rank sees its reason at its own point;
//! the step carries the request as a flag uploaded with the batch (2 stop, 1 checkpoint),
//! all-reduced (max) after the step and read back with its `[loss, norm]`, so every rank
//! learns it from the same step's values and acts at the same step boundary. Off unless
//! asked for ([`crate::TrainStep::enable_stop`]): then one tiny all-reduce per step,
//! outside the captured graph.

use anyhow::{bail, Result};
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

/// The step's side of it: every rank's requests, carried by its steps.
impl crate::TrainStep {
    /// Lets ranks stop together: from now on each step carries this rank's
    /// [`Self::request_stop`] to every rank, and [`crate::StepOut::stop`] says whether any rank
    /// asked by that step. Every rank must call it, before the same step.
    pub fn enable_stop(&mut self) -> Result<()> {
        self.stop = Some(Stop::new(&self.device)?);
        Ok(())
    }

    /// Asks every rank to stop (needs [`Self::enable_stop`]): the next step's
    /// [`crate::StepOut::stop`] is true on every rank.
    pub fn request_stop(&mut self) -> Result<()> {
        self.stop_mut("request_stop")?.ask();
        Ok(())
    }

    /// The ranks' agreement, or an error naming `what` needed [`Self::enable_stop`].
    fn stop_mut(&mut self, what: &str) -> Result<&mut Stop> {
        match self.stop.as_mut() {
            Some(s) => Ok(s),
            None => bail!("{what}: enable_stop was not called"),
        }
    }

    /// Asks every rank to checkpoint at the same step (needs [`Self::enable_stop`]): a later
    /// step's [`crate::StepOut::checkpoint`] is true on every rank. The request stays up until
    /// [`Self::checkpoint_done`].
    pub fn request_checkpoint(&mut self) -> Result<()> {
        self.stop_mut("request_checkpoint")?.ask_checkpoint();
        Ok(())
    }

    /// This rank's checkpoint is written: its request (if any) is taken down.
    pub fn checkpoint_done(&mut self) {
        if let Some(s) = self.stop.as_mut() {
            s.checkpoint_done();
        }
    }
}
