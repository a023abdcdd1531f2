//! The NVML sampler (`cuda` feature): one thread per timed window, on the NVML device
//! whose PCI bus id is the candle device's.

use super::{Acc, GpuTelemetry, PERIOD};
use candle_core::Device;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::Nvml;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Instant;

/// Samples one GPU from [`Sampler::start`] until [`Sampler::stop`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Option<GpuTelemetry>>,
}

impl Sampler {
    /// Starts sampling `device`'s GPU; `None` (with a warning) where NVML cannot watch it.
    pub fn start(device: &Device) -> Option<Self> {
        let Device::Cuda(d) = device else {
            return None;
        };
        let bus = match pci_bus_id(d) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("no GPU telemetry: the device's PCI bus id: {e}");
                return None;
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, started) = mpsc::sync_channel(1);
        let flag = stop.clone();
        let thread = std::thread::spawn(move || sample(&bus, &flag, &ready));
        match started.recv() {
            Ok(Ok(())) => Some(Self { stop, thread }),
            Ok(Err(e)) => {
                tracing::warn!("no GPU telemetry: {e}");
                let _ = thread.join();
                None
            }
            Err(_) => None,
        }
    }

    /// Stops sampling; what the window looked like (`None` if no sample was read).
    pub fn stop(self) -> Option<GpuTelemetry> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().ok().flatten()
    }
}

/// NVML's form of the device's PCI address ("00000000:18:00.0").
fn pci_bus_id(d: &candle_core::CudaDevice) -> Result<String, String> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let ctx = d.cuda_stream().context().clone();
    let attr = |a| ctx.attribute(a).map_err(|e| format!("{e:?}"));
    Ok(format!(
        "{:08x}:{:02x}:{:02x}.0",
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
    ))
}

/// The sampling thread: says on `ready` whether NVML found the GPU, then samples every
/// [`PERIOD`] until `stop`.
fn sample(
    bus: &str,
    stop: &AtomicBool,
    ready: &mpsc::SyncSender<Result<(), String>>,
) -> Option<GpuTelemetry> {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            let _ = ready.send(Err(format!("NVML (libnvidia-ml.so.1) did not start: {e}")));
            return None;
        }
    };
    let dev = match nvml.device_by_pci_bus_id(bus) {
        Ok(d) => d,
        Err(e) => {
            let _ = ready.send(Err(format!("NVML has no GPU at PCI {bus}: {e}")));
            return None;
        }
    };
    let max_mhz = dev.max_clock_info(Clock::SM).ok().map(f64::from);
    let limit_w = dev
        .enforced_power_limit()
        .ok()
        .map(|mw| f64::from(mw) / 1e3);
    let power = ThrottleReasons::SW_POWER_CAP | ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN;
    let thermal = ThrottleReasons::SW_THERMAL_SLOWDOWN | ThrottleReasons::HW_THERMAL_SLOWDOWN;
    let energy0 = dev.total_energy_consumption();
    let t0 = Instant::now();
    let _ = ready.send(Ok(()));
    let mut acc = Acc::default();
    loop {
        let read = (
            dev.clock_info(Clock::SM),
            dev.power_usage(),
            dev.current_throttle_reasons(),
        );
        if let (Ok(mhz), Ok(mw), Ok(why)) = read {
            let temp = dev
                .temperature(TemperatureSensor::Gpu)
                .map_or(f64::NAN, f64::from);
            let (capped, hot) = (why.intersects(power), why.intersects(thermal));
            acc.add(f64::from(mhz), f64::from(mw) / 1e3, capped, hot, temp);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(PERIOD);
    }
    let secs = t0.elapsed().as_secs_f64();
    let energy_j = match (energy0, dev.total_energy_consumption()) {
        (Ok(a), Ok(b)) if b > a => Some((b - a) as f64 / 1e3),
        _ => None,
    };
    acc.finish(energy_j, secs, max_mhz, limit_w)
}
