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

/// Mean and sample standard deviation; (0, 0) for no values.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var =
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len().max(2).saturating_sub(1) as f64;
    (m, var.sqrt())
}

/// The median (the mean of the two middle values for an even count); NaN for no values.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// What [`timed`] measured over the timed calls.
pub struct Timed {
    /// Milliseconds per call until the device finished its work.
    pub gpu: Vec<f64>,
}

/// Runs `f` `warmup + steps` times and measures the last `steps` calls, each alone (the
/// device drained before and after). Training steps are timed back to back instead, by
/// `step_timing`.
pub fn timed(
    dev: &Device,
    warmup: usize,
    steps: usize,
    mut f: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Timed> {
    let mut gpu = Vec::with_capacity(steps);
    for i in 0..warmup + steps {
        let t = Timer::start(dev)?;
        f()?;
        let s = t.stop()?;
        if i >= warmup {
            gpu.push(s * 1e3);
        }
    }
    Ok(Timed { gpu })
}

/// One call of `f` to warm up, then `iters` calls back to back between two marks: the
/// mean milliseconds a call (the kernel benchmarks: `bench rmsnorm`, `bench adamw`).
pub fn mean_ms(
    dev: &Device,
    iters: usize,
    f: &mut dyn FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    f()?;
    let t = Timer::start(dev)?;
    for _ in 0..iters {
        f()?;
    }
    Ok(t.stop()? / iters as f64 * 1e3)
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_even_and_no_values() {
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(super::median(&[]).is_nan());
    }
}
