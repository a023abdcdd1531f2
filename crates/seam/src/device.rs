//! What a device is, as its driver names it: for the dense peak the MFU is taken against
//! (`memplan::peak`). `None` on the CPU, so the same code runs in CI.
//!
//! ```
//! assert_eq!(seam::device::name(&candle_core::Device::Cpu).unwrap(), None);
//! ```

use crate::error::{ModelError, Result};
use candle_core::Device;

/// The GPU's name (`NVIDIA H200`); `None` on the CPU.
pub fn name(device: &Device) -> Result<Option<String>> {
    match device {
        Device::Cpu => Ok(None),
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => {
            use candle_core::cuda_backend::WrapErr;
            Ok(Some(d.cuda_stream().context().name().w()?))
        }
        other => Err(ModelError::Input(format!(
            "the name of device {other:?} is not supported"
        ))),
    }
}
