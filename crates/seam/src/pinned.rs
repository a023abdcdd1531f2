//! Page-locked host buffers and the copies through them (CUDA), queued on the compute
//! stream so the host queues step s + 1 while the GPU runs step s: AdamW's per-step
//! scalars and a step's batch go up, its `[loss, norm]` comes down. Two buffers alternate;
//! before rewriting one the host waits only for the copy that last used it. A download's
//! event is timed: [`Ring::read`] gives the device time since the download read before it
//! (the step's time, without the host's clock, which sees results one step late).

use crate::error::{ModelError, Result};
use candle_core::cuda_backend::cudarc::driver::{result, CudaEvent, CudaStream, DevicePtr};
use candle_core::{DType, Device, Storage, Tensor};
use std::sync::Arc;

fn err(what: impl std::fmt::Display) -> ModelError {
    ModelError::Input(what.to_string())
}

macro_rules! anyhow {
    ($($t:tt)*) => { err(format!($($t)*)) };
}

macro_rules! bail {
    ($($t:tt)*) => { return Err(anyhow!($($t)*)) };
}

/// One page-locked host allocation.
struct Pinned {
    ptr: *mut u8,
    len: usize,
}

impl Pinned {
    fn new(len: usize) -> Result<Self> {
        // SAFETY: a plain page-locked allocation (freed in Drop).
        let ptr = unsafe { result::malloc_host(len.max(1), 0) }
            .map_err(|e| anyhow!("pinned host memory of {len} bytes: {e:?}"))?
            as *mut u8;
        Ok(Self { ptr, len })
    }
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: len bytes allocated in new, touched only through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated by malloc_host, freed once (after the ring's stream synced).
        let _ = unsafe { result::free_host(self.ptr as *mut _) };
    }
}

/// Two pinned buffers used in turn for copies on one stream.
pub struct Ring {
    bufs: [Option<Pinned>; 2],
    done: [Option<CudaEvent>; 2],
    next: usize,
    stream: Arc<CudaStream>,
    /// The event of the download read last (timed).
    last_read: Option<CudaEvent>,
}

// SAFETY: the buffers are only touched through &mut self.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}

/// The compute stream of a CUDA device.
pub fn stream(device: &Device) -> Result<Arc<CudaStream>> {
    match device {
        Device::Cuda(d) => Ok(d.cuda_stream()),
        _ => bail!("not a CUDA device"),
    }
}

/// The device address of `t`'s first element (a CUDA tensor).
pub fn device_ptr(t: &Tensor, s: &Arc<CudaStream>) -> Result<u64> {
    let (st, l) = t.storage_and_layout();
    let Storage::Cuda(cs) = &*st else {
        bail!("not a CUDA tensor")
    };
    macro_rules! ptr {
        ($t:ty) => {
            cs.as_cuda_slice::<$t>()?.device_ptr(s).0
        };
    }
    let base = match t.dtype() {
        DType::U8 => ptr!(u8),
        DType::U32 => ptr!(u32),
        DType::I64 => ptr!(i64),
        DType::F32 => ptr!(f32),
        DType::F64 => ptr!(f64),
        DType::BF16 => ptr!(half::bf16),
        DType::F16 => ptr!(half::f16),
        d => bail!("{d:?} tensors are not staged"),
    };
    Ok(base + (l.start_offset() * t.dtype().size_in_bytes()) as u64)
}

/// A host tensor's elements as bytes, in order.
pub fn host_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let t = t.to_device(&Device::Cpu)?.flatten_all()?;
    fn raw<T: Copy>(v: Vec<T>) -> Vec<u8> {
        let n = v.len() * std::mem::size_of::<T>();
        // SAFETY: plain numeric elements viewed as their bytes.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, n) }.to_vec()
    }
    Ok(match t.dtype() {
        DType::U8 => t.to_vec1::<u8>()?,
        DType::U32 => raw(t.to_vec1::<u32>()?),
        DType::I64 => raw(t.to_vec1::<i64>()?),
        DType::F32 => raw(t.to_vec1::<f32>()?),
        DType::F64 => raw(t.to_vec1::<f64>()?),
        DType::BF16 => raw(t.to_vec1::<half::bf16>()?),
        DType::F16 => raw(t.to_vec1::<half::f16>()?),
        d => bail!("{d:?} tensors are not staged"),
    })
}

impl Ring {
    pub fn new(device: &Device) -> Result<Self> {
        Ok(Self {
            bufs: [None, None],
            done: [None, None],
            next: 0,
            stream: stream(device)?,
            last_read: None,
        })
    }

    /// The next buffer, at least `len` bytes, free to write (its last copy has run).
    fn take(&mut self, len: usize) -> Result<usize> {
        let k = self.next;
        self.next = 1 - k;
        if let Some(e) = self.done[k].take() {
            e.synchronize()
                .map_err(|e| anyhow!("waiting for a copy: {e:?}"))?;
        }
        if self.bufs[k].as_ref().is_none_or(|b| b.len < len) {
            self.bufs[k] = Some(Pinned::new(len)?);
        }
        // Both buffers exist from the first use on (the first, eager step): page-locked
        // allocation is not allowed while a graph is being captured.
        let other = 1 - k;
        if self.bufs[other].as_ref().is_none_or(|b| b.len < len) && self.done[other].is_none() {
            self.bufs[other] = Some(Pinned::new(len)?);
        }
        Ok(k)
    }

    /// Records buffer `k`'s event: `timed` for downloads (an untimed event is cheaper).
    fn record(&mut self, k: usize, timed: bool) -> Result<()> {
        use candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags as F;
        let flags = if timed {
            F::CU_EVENT_DEFAULT
        } else {
            F::CU_EVENT_DISABLE_TIMING
        };
        let e = self
            .stream
            .record_event(Some(flags))
            .map_err(|e| anyhow!("recording a copy's event: {e:?}"))?;
        self.done[k] = Some(e);
        Ok(())
    }

    /// Queues copies of `parts` (host bytes, each to a device address) through one buffer.
    pub fn upload(&mut self, parts: &[(Vec<u8>, u64)]) -> Result<()> {
        let total: usize = parts.iter().map(|(b, _)| b.len()).sum();
        let k = self.take(total)?;
        let buf = self.bufs[k]
            .as_mut()
            .ok_or_else(|| err("staging buffer"))?
            .bytes();
        let mut at = 0;
        for (bytes, dst) in parts {
            let src = &mut buf[at..at + bytes.len()];
            src.copy_from_slice(bytes);
            // SAFETY: a copy from pinned memory, alive until the event says it ran, to a
            // device buffer of at least that many bytes (the caller's slot).
            unsafe { result::memcpy_htod_async(*dst, &*src, self.stream.cu_stream()) }
                .map_err(|e| anyhow!("copying to the device: {e:?}"))?;
            at += bytes.len();
        }
        self.record(k, false)
    }

    /// Queues a copy of `t` (f32, on the device) into the next buffer; returns the ticket
    /// [`Self::read`] takes.
    pub fn download(&mut self, t: &Tensor) -> Result<usize> {
        let n = t.elem_count();
        let k = self.take(4 * n)?;
        let src = device_ptr(t, &self.stream)?;
        let buf = self.bufs[k]
            .as_mut()
            .ok_or_else(|| err("readback buffer"))?
            .bytes();
        // SAFETY: n f32 from a live device buffer into pinned memory of at least 4n bytes.
        unsafe { result::memcpy_dtoh_async(&mut buf[..4 * n], src, self.stream.cu_stream()) }
            .map_err(|e| anyhow!("reading back a step: {e:?}"))?;
        self.record(k, true)?;
        Ok(k)
    }

    /// Waits for download `k` and returns its `n` f32, with the device's seconds from the
    /// download read before it to this one (`None` for the first).
    pub fn read(&mut self, k: usize, n: usize) -> Result<(Vec<f32>, Option<f64>)> {
        let mut seconds = None;
        if let Some(e) = self.done[k].take() {
            e.synchronize()
                .map_err(|e| anyhow!("waiting for a step's readback: {e:?}"))?;
            if let Some(last) = &self.last_read {
                let ms = last
                    .elapsed_ms(&e)
                    .map_err(|e| anyhow!("timing a step: {e:?}"))?;
                seconds = Some(f64::from(ms) / 1e3);
            }
            self.last_read = Some(e);
        }
        let buf = self.bufs[k]
            .as_mut()
            .ok_or_else(|| err("readback buffer"))?
            .bytes();
        let v = buf[..4 * n]
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok((v, seconds))
    }
}
