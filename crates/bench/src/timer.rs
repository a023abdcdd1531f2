//! Timing that means the same thing on CPU and GPU: on a CUDA device, events recorded on
//! candle's compute stream (what a training step waits for); on the CPU, the wall clock.

use candle_core::Device;
use std::time::Instant;

pub struct Timer {
    start: Instant,
    #[cfg(feature = "cuda")]
    cuda: Option<(
        std::sync::Arc<cudarc::driver::CudaStream>,
        cudarc::driver::CudaEvent,
    )>,
}

impl Timer {
    pub fn start(device: &Device) -> anyhow::Result<Self> {
        #[cfg(feature = "cuda")]
        {
            if let Device::Cuda(d) = device {
                let stream = d.cuda_stream();
                let ev = stream
                    .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
                return Ok(Self {
                    start: Instant::now(),
                    cuda: Some((stream, ev)),
                });
            }
        }
        let _ = device;
        Ok(Self {
            start: Instant::now(),
            #[cfg(feature = "cuda")]
            cuda: None,
        })
    }

    /// Seconds since `start`, after all work queued on the device has finished.
    pub fn stop(self) -> anyhow::Result<f64> {
        #[cfg(feature = "cuda")]
        {
            if let Some((stream, start)) = self.cuda {
                let end = stream
                    .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
                return Ok(start.elapsed_ms(&end)? as f64 / 1e3);
            }
        }
        Ok(self.start.elapsed().as_secs_f64())
    }
}
