//! Stand-in for builds without the `cuda` feature: same API, every constructor fails.

use crate::error::{CommError, Result};
use crate::{CommOptions, Communicator, DistEnv, ReduceOp, Tensor, Work};

/// NCCL communicator (unavailable: built without the `cuda` feature).
pub struct NcclComm(());

fn unavailable<T>() -> Result<T> {
    Err(CommError::Unavailable {
        backend: "nccl",
        msg: "this binary was built without the `cuda` feature (rebuild with --features cuda)"
            .into(),
    })
}

/// Unavailable without the `cuda` feature.
pub fn cuda_device(_ordinal: usize) -> Result<candle_core::Device> {
    unavailable()
}

/// Unavailable without the `cuda` feature.
pub fn gpu_count() -> Result<usize> {
    unavailable()
}

/// No NCCL without the `cuda` feature.
pub fn version() -> Option<i32> {
    None
}

/// No NCCL windows without the `cuda` feature.
pub fn window_bytes() -> u64 {
    0
}

/// No copy-engine gathers without the `cuda` feature.
pub fn ce_gathers() -> bool {
    false
}

/// No copy-engine reduce-scatters without the `cuda` feature.
pub fn ce_reduces() -> bool {
    false
}

/// No NCCL copy-engine gathers without the `cuda` feature.
pub fn nccl_ce_gathers() -> bool {
    false
}

impl NcclComm {
    pub fn new(_env: &DistEnv, _device_ordinal: usize, _opts: CommOptions) -> Result<Self> {
        unavailable()
    }
    pub fn start_timeline(&self) -> Result<()> {
        unavailable()
    }
    pub fn mark(&self, _label: impl Into<String>) -> Result<()> {
        unavailable()
    }
    pub fn take_timeline(&self) -> Result<crate::Timeline> {
        unavailable()
    }
    pub fn device(&self) -> &candle_core::Device {
        unreachable!("an NcclComm cannot be built without the cuda feature")
    }
}

impl Communicator for NcclComm {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn backend(&self) -> &'static str {
        "nccl"
    }
    fn all_reduce_async(&self, _: &Tensor, _: ReduceOp) -> Result<Work> {
        unavailable()
    }
    fn reduce_scatter_async(&self, _: &Tensor, _: &Tensor, _: ReduceOp) -> Result<Work> {
        unavailable()
    }
    fn all_gather_async(&self, _: &Tensor, _: &Tensor) -> Result<Work> {
        unavailable()
    }
    fn broadcast_async(&self, _: &Tensor, _: usize) -> Result<Work> {
        unavailable()
    }
    fn barrier(&self) -> Result<()> {
        unavailable()
    }
}
