//! The step's batches on its device and its `[loss, norm]` back on the host.
//!
//! On CUDA the micro-batches live in fixed device tensors (what a captured step reads):
//! host tensors are copied in through pinned memory, device tensors by a device copy,
//! both queued on the compute stream; the values come back through pinned memory, the
//! host waiting only when it reads them. Elsewhere the batches are used as they are and
//! the values read directly.
//!
//! A read also gives the step's time: from the end of the step read before it to the end
//! of this one, on the device's clock (CUDA events after the steps' readbacks) or, where
//! a step computes as it is queued (the CPU), the host's when its values were queued.

use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use seam::Batch;

/// A queued read of one step's values.
pub struct Ticket(Inner);

enum Inner {
    /// The values, and when they were queued (computed: the CPU).
    Host(Tensor, std::time::Instant),
    #[cfg(feature = "cuda")]
    Pinned(usize, usize),
}

pub struct Slots {
    device: Device,
    /// The fixed device batches (CUDA).
    fixed: Vec<Batch>,
    #[cfg(feature = "cuda")]
    up: Option<seam::pinned::Ring>,
    #[cfg(feature = "cuda")]
    down: Option<seam::pinned::Ring>,
    /// When the host values read last were queued.
    last_host: Option<std::time::Instant>,
}

/// Whether `b` has the shapes and dtypes of `f`, tensor by tensor.
fn same_layout(b: &Batch, f: &Batch) -> bool {
    let (x, y): (Vec<_>, Vec<_>) = (b.tensors().collect(), f.tensors().collect());
    x.len() == y.len()
        && x.iter()
            .zip(&y)
            .all(|((n, a), (m, b))| n == m && a.dims() == b.dims() && a.dtype() == b.dtype())
}

impl Slots {
    pub fn new(device: &Device) -> Result<Self> {
        #[cfg(feature = "cuda")]
        let rings = if device.is_cuda() {
            (
                Some(seam::pinned::Ring::new(device)?),
                Some(seam::pinned::Ring::new(device)?),
            )
        } else {
            (None, None)
        };
        Ok(Self {
            device: device.clone(),
            fixed: Vec::new(),
            #[cfg(feature = "cuda")]
            up: rings.0,
            #[cfg(feature = "cuda")]
            down: rings.1,
            last_host: None,
        })
    }

    /// The batches as the step reads them. `fixed`: a captured step reads the fixed
    /// tensors, so their number and shapes may not change. `extra`: (host tensor, device
    /// tensor of its shape) pairs copied in with the batches (CUDA; ignored elsewhere).
    pub fn upload(
        &mut self,
        micro: &[Batch],
        fixed: bool,
        extra: &[(&Tensor, &Tensor)],
    ) -> Result<Vec<Batch>> {
        if !self.device.is_cuda() {
            return micro
                .iter()
                .map(|b| b.map(|t| Ok(t.to_device(&self.device)?)))
                .collect();
        }
        let fits = self.fixed.len() == micro.len()
            && micro
                .iter()
                .zip(&self.fixed)
                .all(|(b, f)| same_layout(b, f));
        if !fits {
            if fixed {
                bail!(
                    "the batches' number or shapes changed after the step was captured as a CUDA graph ({} micro-batches before, {} now)",
                    self.fixed.len(),
                    micro.len()
                );
            }
            self.fixed = micro
                .iter()
                .map(|b| b.map(|t| Tensor::zeros(t.shape(), t.dtype(), &self.device)))
                .collect::<candle_core::Result<_>>()?;
        }
        self.copy_in(micro, extra)?;
        Ok(self.fixed.clone())
    }

    #[cfg(feature = "cuda")]
    fn copy_in(&mut self, micro: &[Batch], extra: &[(&Tensor, &Tensor)]) -> Result<()> {
        use seam::pinned::{device_ptr, host_bytes, stream};
        let s = stream(&self.device)?;
        let mut parts = Vec::new();
        for (h, d) in extra {
            parts.push((host_bytes(h)?, device_ptr(d, &s)?));
        }
        for (b, f) in micro.iter().zip(&self.fixed) {
            for ((_, t), (_, slot)) in b.tensors().zip(f.tensors()) {
                if t.device().is_cuda() {
                    slot.slice_set(&t.contiguous()?, 0, 0)?;
                } else {
                    parts.push((host_bytes(t)?, device_ptr(slot, &s)?));
                }
            }
        }
        if !parts.is_empty() {
            self.up
                .as_mut()
                .expect("a CUDA device has rings")
                .upload(&parts)?;
        }
        Ok(())
    }

    #[cfg(not(feature = "cuda"))]
    fn copy_in(&mut self, _: &[Batch], _: &[(&Tensor, &Tensor)]) -> Result<()> {
        bail!("built without the cuda feature")
    }

    /// Queues the read of `t` (a small f32 tensor on the step's device).
    pub fn download(&mut self, t: &Tensor) -> Result<Ticket> {
        #[cfg(feature = "cuda")]
        if let Some(r) = self.down.as_mut() {
            let t = t.to_dtype(candle_core::DType::F32)?.contiguous()?;
            return Ok(Ticket(Inner::Pinned(r.download(&t)?, t.elem_count())));
        }
        Ok(Ticket(Inner::Host(t.clone(), std::time::Instant::now())))
    }

    /// The values of a queued read (waits for them), and the seconds since the end of the
    /// step read before it (`None` for the first read).
    pub fn read(&mut self, t: Ticket) -> Result<(Vec<f32>, Option<f64>)> {
        match t.0 {
            Inner::Host(t, at) => {
                let since = self.last_host.replace(at);
                let seconds = since.map(|s| at.duration_since(s).as_secs_f64());
                Ok((t.to_dtype(candle_core::DType::F32)?.to_vec1()?, seconds))
            }
            #[cfg(feature = "cuda")]
            Inner::Pinned(k, n) => match self.down.as_mut() {
                Some(r) => Ok(r.read(k, n)?),
                None => bail!("a pinned read without its ring"),
            },
        }
    }
}
