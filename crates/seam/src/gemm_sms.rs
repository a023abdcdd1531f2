//! How many SMs cuBLAS plans its GEMMs for. While collectives run beside the backward
//! (DDP's all-reduces, ZeRO's all-gathers), NCCL's kernels hold some SMs; a GEMM planned
//! for the whole GPU then runs its last wave of tiles on whatever is left and can take up
//! to a wave longer. [`set_gemm_sm_carveout`] leaves `carveout` SMs out of cuBLAS's plan
//! (`cublasSetSmCountTarget`, what PyTorch's `_set_sm_carveout_experimental` sets for
//! async tensor parallelism), so GEMMs queued from then on are tiled for the SMs NCCL
//! leaves free. Carve-out 0 restores cuBLAS's default (every SM). The model's own
//! cuBLASLt GEMMs (`model::gemm`) read the same target ([`sm_target`]) into their plans.
//!
//! How to use (a no-op on the CPU, so the same code runs in CI):
//! ```
//! # fn main() -> seam::Result<()> {
//! let dev = candle_core::Device::Cpu;
//! seam::gemm_sms::set_gemm_sm_carveout(&dev, 16)?; // GEMMs queued now leave 16 SMs free
//! seam::gemm_sms::set_gemm_sm_carveout(&dev, 0)?; // back to every SM
//! # Ok(()) }
//! ```

use crate::error::{ModelError, Result};
use candle_core::Device;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The SM count GEMMs are planned for now (0: every SM), as last set on a CUDA device.
static TARGET: AtomicUsize = AtomicUsize::new(0);

/// How many SMs GEMMs queued now are planned for: 0 for every SM (the default, and always
/// on the CPU). cuBLASLt plans (`model::gemm`) take it as their SM count target.
pub fn sm_target() -> usize {
    TARGET.load(Ordering::Relaxed)
}

/// The device's SM count (`None` on the CPU).
pub fn sm_count(device: &Device) -> Result<Option<usize>> {
    match device {
        Device::Cpu => Ok(None),
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => cuda::sm_count(d).map(Some),
        other => Err(ModelError::Input(format!(
            "SM count of device {other:?} is not supported"
        ))),
    }
}

/// Fails, naming the value, when `carveout` would leave the device no SM; returns the
/// device's SM count (`None` on the CPU, where any carve-out is a no-op).
pub fn check_carveout(device: &Device, carveout: usize) -> Result<Option<usize>> {
    let sms = sm_count(device)?;
    match sms {
        Some(n) if carveout >= n => Err(ModelError::Input(format!(
            "GEMM SM carve-out {carveout} leaves no SM of the device's {n}"
        ))),
        _ => Ok(sms),
    }
}

/// Makes cuBLAS plan the GEMMs queued from now on for all SMs but `carveout` (0: all).
/// Fails, naming the value, when the carve-out leaves no SM.
pub fn set_gemm_sm_carveout(device: &Device, carveout: usize) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => {
            let sms = check_carveout(device, carveout)?.expect("a CUDA device has SMs");
            // cuBLAS reads 0 as "no target": every SM.
            let target = if carveout == 0 { 0 } else { sms - carveout };
            cuda::set_target(d, target)?;
            TARGET.store(target, Ordering::Relaxed);
            Ok(())
        }
        other => Err(ModelError::Input(format!(
            "GEMM SM carve-out {carveout} on device {other:?} is not supported"
        ))),
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use crate::error::Result;
    use candle_core::cuda_backend::cudarc::cublas::sys::cublasSetSmCountTarget;
    use candle_core::cuda_backend::cudarc::driver::sys::CUdevice_attribute;
    use candle_core::cuda_backend::WrapErr;
    use candle_core::CudaDevice;

    pub fn sm_count(d: &CudaDevice) -> Result<usize> {
        let n = d
            .cuda_stream()
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .w()?;
        Ok(n as usize)
    }

    pub fn set_target(d: &CudaDevice, target: usize) -> Result<()> {
        let blas = d.cublas_handle();
        // SAFETY: the handle is candle's live cuBLAS handle for this device; the call only
        // sets a planning hint read by later GEMM calls on it.
        unsafe { cublasSetSmCountTarget(*blas.handle(), target as i32) }
            .result()
            .w()?;
        Ok(())
    }
}
