//! [`Zero1Overlap`]'s switches: what it gathers, when, and how its reduce-scatters share the
//! GPU (FSDP's are in crate::fsdp).

use crate::error::Result;
use crate::overlap::Zero1Overlap;

impl Zero1Overlap {
    /// With `true` (the default unless `ZERO1_GATHER=f32`), a step all-gathers the bf16
    /// copies AdamW writes of every parameter sharded in place that the model's forward
    /// reads only through its copy (`seam::shadow::Bf16Shadows::gatherable`): half the
    /// bytes of the f32 masters, and no cast in the next forward (Megatron-Core's
    /// distributed optimizer gathers its bf16 parameter buffer so). The f32 masters outside
    /// this rank's part are then stale until [`Self::sync_params`].
    pub fn set_bf16_gather(&mut self, on: bool) {
        self.bf16_gather = on;
    }

    /// With `true`, [`Self::step`] queues its all-gathers for the next forward, which
    /// launches them and waits stage by stage; the parameters are stale until then or
    /// [`Self::sync_params`].
    pub fn set_gather_ahead(&mut self, on: bool) {
        self.gather_ahead = on;
    }

    /// Whether [`Self::step`] leaves its all-gathers for the next forward.
    pub fn gather_ahead(&self) -> bool {
        self.gather_ahead
    }

    /// SMs the backward's GEMMs leave to NCCL's reduce-scatters (see
    /// `ddp::DdpOptions::gemm_sm_carveout`; 0: none).
    pub fn set_gemm_sm_carveout(&mut self, carveout: usize) -> Result<()> {
        Ok(self.ddp.set_gemm_sm_carveout(carveout)?)
    }

    /// With `true`, the buckets that become ready at the same stage are reduce-scattered
    /// as one coalesced launch (`ddp::DdpOptions::coalesce`).
    pub fn set_coalesce(&mut self, on: bool) {
        self.ddp.set_coalesce(on);
    }
}
