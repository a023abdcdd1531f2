//! Stopping every rank after the same step (a preemption notice: SIGTERM to the launcher,
//! forwarded to every rank). Each rank sees the signal at its own point; the step carries
//! the request as a flag uploaded with the batch, all-reduced (max) after the step and read
//! back with its `[loss, norm]`, so every rank learns it from the same step's values and
//! stops at the same step boundary. Off unless asked for ([`crate::TrainStep::enable_stop`]):
//! then one tiny all-reduce per step, outside the captured graph.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

pub(crate) struct Stop {
    /// The flag the step reads: fixed on CUDA (copied in with the batch), else made per step.
    flag: Tensor,
    asked: bool,
}

impl Stop {
    pub(crate) fn new(device: &Device) -> Result<Self> {
        Ok(Self {
            flag: Tensor::zeros(1, DType::F32, device)?,
            asked: false,
        })
    }

    pub(crate) fn ask(&mut self) {
        self.asked = true;
    }

    /// This rank's request now, on the host.
    pub(crate) fn host(&self) -> Result<Tensor> {
        Ok(Tensor::new(
            &[f32::from(u8::from(self.asked))],
            &Device::Cpu,
        )?)
    }

    /// The device flag the upload writes (CUDA), or the host value moved there.
    pub(crate) fn flag(&mut self, host: &Tensor) -> Result<&Tensor> {
        if !self.flag.device().is_cuda() {
            self.flag = host.to_device(self.flag.device())?;
        }
        Ok(&self.flag)
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
