//! What the GPU's clocks and power did while a benchmark ran, read through NVML: did the
//! step run at full SM clock, or was it held back by the power or thermal limit?
//!
//! ```ignore
//! let s = telemetry::Sampler::start(&device);   // None: CPU, no `cuda`, or no NVML
//! // ... timed steps ...
//! let t: Option<GpuTelemetry> = s.and_then(|s| s.stop());
//! ```
//!
//! A thread samples the SM clock, power draw and clock-event ("throttle") reasons every
//! [`PERIOD`]; the mean power is the energy counter's difference over the window, so it
//! is exact even though one power reading is NVML's own running average. NVML is the
//! driver's `libnvidia-ml.so.1`, loaded at run time: without the `cuda` feature, on the
//! CPU, or where it cannot be loaded, there is simply no telemetry (a warning says why).

use serde::{Deserialize, Serialize};

/// How often the sampler reads the GPU.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub const PERIOD: std::time::Duration = std::time::Duration::from_millis(10);

/// Clocks and power of one GPU over a timed window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GpuTelemetry {
    pub samples: usize,
    /// SM clock: mean and lowest sample, and the GPU's maximum SM clock.
    pub sm_mhz: f64,
    pub sm_mhz_min: f64,
    pub sm_mhz_max: Option<f64>,
    /// Mean power over the window (energy ÷ time; the samples' mean where the energy
    /// counter cannot be read), highest sample, enforced limit.
    pub power_w: f64,
    pub power_w_max: f64,
    pub power_limit_w: Option<f64>,
    /// Share of samples whose clocks were held back by the power limit (software power
    /// cap or hardware power brake), and by temperature (software or hardware).
    pub power_capped: f64,
    pub thermal: f64,
    pub temp_c_max: f64,
}

/// The table cell: "1755 MHz 690 W cap 62%" (mean SM clock, mean power, share of samples
/// held back by the power limit), or "-".
pub fn cell(t: Option<&GpuTelemetry>) -> String {
    t.map_or_else(
        || "-".into(),
        |t| {
            format!(
                "{:.0} MHz {:.0} W cap {:.0}%",
                t.sm_mhz,
                t.power_w,
                100.0 * t.power_capped
            )
        },
    )
}

/// Folds samples into [`GpuTelemetry`] (the NVML thread's; without `cuda`, tests only).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
#[derive(Default)]
struct Acc {
    n: usize,
    mhz_sum: f64,
    mhz_min: f64,
    power_sum: f64,
    power_max: f64,
    capped: usize,
    thermal: usize,
    temp_max: f64,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl Acc {
    fn add(&mut self, mhz: f64, power_w: f64, capped: bool, thermal: bool, temp_c: f64) {
        self.mhz_min = if self.n == 0 {
            mhz
        } else {
            self.mhz_min.min(mhz)
        };
        self.n += 1;
        self.mhz_sum += mhz;
        self.power_sum += power_w;
        self.power_max = self.power_max.max(power_w);
        self.capped += capped as usize;
        self.thermal += thermal as usize;
        self.temp_max = self.temp_max.max(temp_c);
    }

    /// `energy_j` over `secs` gives the mean power; `max_mhz`, `limit_w`: the GPU's.
    fn finish(
        &self,
        energy_j: Option<f64>,
        secs: f64,
        max_mhz: Option<f64>,
        limit_w: Option<f64>,
    ) -> Option<GpuTelemetry> {
        let n = self.n as f64;
        (self.n > 0 && secs > 0.0).then(|| GpuTelemetry {
            samples: self.n,
            sm_mhz: self.mhz_sum / n,
            sm_mhz_min: self.mhz_min,
            sm_mhz_max: max_mhz,
            power_w: energy_j.map_or(self.power_sum / n, |e| e / secs),
            power_w_max: self.power_max,
            power_limit_w: limit_w,
            power_capped: self.capped as f64 / n,
            thermal: self.thermal as f64 / n,
            temp_c_max: self.temp_max,
        })
    }
}

#[cfg(feature = "cuda")]
mod nvml;
#[cfg(feature = "cuda")]
pub use nvml::Sampler;

/// Without the `cuda` feature there is no GPU to watch: [`Sampler::start`] is `None`.
#[cfg(not(feature = "cuda"))]
pub struct Sampler;

#[cfg(not(feature = "cuda"))]
impl Sampler {
    pub fn start(_device: &candle_core::Device) -> Option<Self> {
        None
    }

    pub fn stop(self) -> Option<GpuTelemetry> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_fold_into_means_shares_and_extremes() {
        let mut a = Acc::default();
        a.add(1980.0, 500.0, false, false, 50.0);
        a.add(1700.0, 700.0, true, false, 60.0);
        a.add(1800.0, 690.0, true, true, 55.0);
        a.add(1900.0, 650.0, false, false, 58.0);
        // 2.5 kJ over 4 s: 625 W mean, whatever the samples say.
        let t = a
            .finish(Some(2500.0), 4.0, Some(1980.0), Some(700.0))
            .expect("four samples");
        assert_eq!(t.samples, 4);
        assert!((t.sm_mhz - 1845.0).abs() < 1e-9, "{}", t.sm_mhz);
        assert_eq!((t.sm_mhz_min, t.sm_mhz_max), (1700.0, Some(1980.0)));
        assert!((t.power_w - 625.0).abs() < 1e-9);
        assert_eq!((t.power_w_max, t.power_limit_w), (700.0, Some(700.0)));
        assert!((t.power_capped - 0.5).abs() < 1e-12);
        assert!((t.thermal - 0.25).abs() < 1e-12);
        assert_eq!(t.temp_c_max, 60.0);
        assert_eq!(cell(Some(&t)), "1845 MHz 625 W cap 50%");
        assert_eq!(cell(None), "-");
        // Without the energy counter, the samples' mean power; the record stays JSON.
        let t = a.finish(None, 4.0, None, None).expect("four samples");
        assert!((t.power_w - 635.0).abs() < 1e-9, "{}", t.power_w);
        let back: GpuTelemetry = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn no_samples_or_no_time_is_no_telemetry() {
        assert!(Acc::default().finish(Some(1.0), 1.0, None, None).is_none());
        let mut a = Acc::default();
        a.add(1980.0, 500.0, false, false, 50.0);
        assert!(a.finish(Some(1.0), 0.0, None, None).is_none());
    }

    #[test]
    fn without_a_gpu_there_is_no_sampler() {
        assert!(Sampler::start(&candle_core::Device::Cpu).is_none());
    }
}
