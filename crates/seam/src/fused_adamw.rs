//! The fused AdamW kernel (kernels/adamw.cu) for f32 parameters on a CUDA device: one
//! launch per parameter tensor that reads p, g, m, v once and writes p, m, v once. The
//! moments live in plain device buffers owned by the optimizer (not candle tensors), so a
//! sharded optimizer can keep only its shard. [`group`]: many parameters' updates in one
//! launch (what the step uses).

pub mod group;

use crate::error::{ModelError, Result};
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use candle_core::cuda_backend::{CudaStorage, WrapErr};
use candle_core::{DType, InplaceOp2, Layout, Tensor};
use std::cell::RefCell;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/adamw.ptx"));

/// AdamW's first and second moments of one parameter, on its device.
pub struct DeviceMoments {
    m: CudaSlice<f32>,
    v: CudaSlice<f32>,
}

/// The scalars of one step (computed on the host in f64, uploaded as f32).
#[derive(Clone, Copy)]
pub struct StepScalars {
    pub decay: f32,
    pub b1: f32,
    pub b2: f32,
    pub eps: f32,
    pub step_size: f32,
    pub bc2_sqrt: f32,
}

impl StepScalars {
    fn values(&self) -> [f32; 6] {
        [
            self.decay,
            self.b1,
            self.b2,
            self.eps,
            self.step_size,
            self.bc2_sqrt,
        ]
    }
}

/// One step's scalars in device memory, where the kernels read them (a CUDA graph freezes
/// kernel arguments, not the memory they point at). [`DeviceScalars::upload`] queues a copy
/// from pinned host memory on the stream ([`crate::pinned::Ring`]), ahead of the kernels
/// (or the replay) that read them; the host waits only for the copy of two uploads ago,
/// never for the step in flight.
pub struct DeviceScalars {
    ring: crate::pinned::Ring,
    dev: CudaSlice<f32>,
    stream: std::sync::Arc<CudaStream>,
}

impl DeviceScalars {
    pub fn new(p: &Tensor) -> Result<Self> {
        let stream = stream_of(p)?;
        stream.context().bind_to_thread().w()?;
        Ok(Self {
            ring: crate::pinned::Ring::new(p.device())?,
            dev: stream.alloc_zeros::<f32>(6).w()?,
            stream,
        })
    }

    /// Queues the upload of `s` on the stream. Not while the stream is captured (a captured
    /// copy would re-read a buffer the host rewrites).
    pub fn upload(&mut self, s: StepScalars, caller: &str) -> Result<()> {
        use candle_core::cuda_backend::cudarc::driver::DevicePtr;
        if crate::capture::capturing_stream(&self.stream) {
            return Err(ModelError::Input(format!(
                "fused AdamW: step scalars cannot be uploaded inside a capture ({caller})"
            )));
        }
        let bytes: Vec<u8> = s.values().iter().flat_map(|v| v.to_ne_bytes()).collect();
        let (dst, _sync) = self.dev.device_ptr(&self.stream);
        self.ring.upload(&[(bytes, dst)])
    }
}

/// The compute stream of `p`'s CUDA device.
pub(crate) fn stream_of(p: &Tensor) -> Result<std::sync::Arc<CudaStream>> {
    let candle_core::Device::Cuda(dev) = p.device() else {
        return Err(ModelError::Input(
            "fused AdamW needs a CUDA parameter".into(),
        ));
    };
    Ok(dev.cuda_stream())
}

/// A gradient as the kernels read it: contiguous, f32 or bf16 as it is, other dtypes cast
/// to f32 (queued on the gradient's stream).
pub(crate) fn kernel_grad(g: &Tensor) -> Result<Tensor> {
    Ok(if matches!(g.dtype(), DType::F32 | DType::BF16) {
        g.contiguous()?
    } else {
        g.to_dtype(DType::F32)?
    })
}

/// A gradient that an update on a second stream can read as it is: contiguous f32 or bf16
/// ([`kernel_grad`] would convert anything else on the parameter's stream, unordered with
/// the second one).
pub(crate) fn side_grad(g: &Tensor) -> Result<()> {
    if g.is_contiguous() && matches!(g.dtype(), DType::F32 | DType::BF16) {
        return Ok(());
    }
    Err(ModelError::Input(format!(
        "fused AdamW on a second stream: the gradient must be contiguous f32 or bf16, got {:?}",
        g.dtype()
    )))
}

pub fn zero_moments(p: &Tensor) -> Result<DeviceMoments> {
    let s = stream_of(p)?;
    let n = p.elem_count();
    Ok(DeviceMoments {
        m: s.alloc_zeros::<f32>(n).w()?,
        v: s.alloc_zeros::<f32>(n).w()?,
    })
}

impl DeviceMoments {
    /// Copies one moment of parameter `p` to the host.
    pub fn moment_to_host(&self, p: &Tensor, which: crate::adamw::Moment) -> Result<Vec<f32>> {
        let s = stream_of(p)?;
        let x = match which {
            crate::adamw::Moment::ExpAvg => &self.m,
            crate::adamw::Moment::ExpAvgSq => &self.v,
        };
        Ok(s.clone_dtoh(x).w()?)
    }

    /// Moments for `p` from host values (a resumed checkpoint).
    pub fn from_host(p: &Tensor, m: &[f32], v: &[f32]) -> Result<Self> {
        let s = stream_of(p)?;
        Ok(Self {
            m: s.clone_htod(m).w()?,
            v: s.clone_htod(v).w()?,
        })
    }
}

struct Launch<'a> {
    moments: RefCell<&'a mut DeviceMoments>,
    s: &'a CudaSlice<f32>,
    /// Where to write the updated parameter in bf16 (model::shadow), if anywhere.
    copy: Option<candle_core::cuda_backend::cudarc::driver::CudaView<'a, half::bf16>>,
    /// The copy's start offset is a multiple of 4 elements (its 8-byte stores are aligned).
    copy_vec4: bool,
    /// The stream to launch on (the parameter's, candle's compute stream, when `None`)
    /// and at most how many blocks to launch there.
    on: Option<(&'a std::sync::Arc<CudaStream>, Option<u32>)>,
    /// Where the kernel reads the gradient's scale (the clipping coefficient), if anywhere.
    scale: Option<candle_core::cuda_backend::cudarc::driver::CudaView<'a, f32>>,
}

impl InplaceOp2 for Launch<'_> {
    fn name(&self) -> &'static str {
        "fused-adamw"
    }
    fn cpu_fwd(
        &self,
        _: &mut candle_core::CpuStorage,
        _: &Layout,
        _: &candle_core::CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<()> {
        candle_core::bail!("fused AdamW runs on CUDA only")
    }
    fn cuda_fwd(
        &self,
        p: &mut CudaStorage,
        pl: &Layout,
        g: &CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<()> {
        // The parameter and the gradient may be contiguous views into larger buffers (a
        // ZeRO-1 shard of a parameter, DDP's flat buckets): each is read from its offset.
        if !pl.is_contiguous() {
            candle_core::bail!("fused AdamW: the parameter must be contiguous");
        }
        if !gl.is_contiguous() {
            candle_core::bail!("fused AdamW: the gradient must be contiguous");
        }
        let n = pl.shape().elem_count();
        if gl.shape().elem_count() != n {
            candle_core::bail!(
                "fused AdamW: gradient of {} elements for a parameter of {n}",
                gl.shape().elem_count()
            );
        }
        let (po, go) = (pl.start_offset(), gl.start_offset());
        // m and v are whole allocations (aligned); 16-byte loads need p's and g's start
        // offsets to be multiples of 4 elements too (a view into a bucket may not be).
        let vec4 = po.is_multiple_of(4) && go.is_multiple_of(4) && self.copy_vec4;
        let kernel = match (g.dtype(), vec4) {
            (DType::F32, false) => "adamw_f32",
            (DType::F32, true) => "adamw_f32_v4",
            (DType::BF16, false) => "adamw_f32_gbf16",
            (DType::BF16, true) => "adamw_f32_gbf16_v4",
            (d, _) => candle_core::bail!("fused AdamW: {d:?} gradient (f32 or bf16)"),
        };
        let func = p
            .device
            .get_or_load_custom_func(kernel, "model_adamw", PTX)?;
        let mut mom = self.moments.borrow_mut();
        if mom.m.len() != n {
            candle_core::bail!(
                "fused AdamW: moments of {} elements for a parameter of {n}",
                mom.m.len()
            );
        }
        let mut pd = p.as_cuda_slice_mut::<f32>()?.slice_mut(po..po + n);
        let DeviceMoments { m, v } = &mut **mom;
        let n64 = n as u64;
        // One pass of the kernel's loop a thread unless the caller caps the grid: on
        // nvidia-h200 (call 296, `bench adamw`) an xl-sized update took 13.35 ms against
        // 14.52 with at most 2,112 blocks looping over the elements.
        let per_thread = if vec4 { 4 } else { 1 };
        let cap = self.on.and_then(|(_, b)| b).unwrap_or(u32::MAX).max(1) as usize;
        let blocks = n.div_ceil(256 * per_thread).min(cap).min(i32::MAX as usize) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let (gf, gb);
        let mut b = match self.on {
            Some((stream, _)) => stream.launch_builder(&func),
            None => func.builder(),
        };
        b.arg(&mut pd);
        if g.dtype() == DType::F32 {
            gf = g.as_cuda_slice::<f32>()?.slice(go..go + n);
            b.arg(&gf);
        } else {
            gb = g.as_cuda_slice::<half::bf16>()?.slice(go..go + n);
            b.arg(&gb);
        }
        b.arg(m).arg(v).arg(&n64).arg(self.s);
        let null = 0u64;
        match &self.copy {
            Some(c) if c.len() == n => b.arg(c),
            Some(c) => candle_core::bail!(
                "fused AdamW: a bf16 copy of {} elements for a parameter of {n}",
                c.len()
            ),
            None => b.arg(&null),
        };
        match &self.scale {
            Some(sc) => b.arg(sc),
            None => b.arg(&null),
        };
        crate::profile::mark_kernel_begin(kernel);
        // SAFETY: the kernel's signature matches the arguments; p, m, v hold n f32 and g
        // n elements of the kernel's gradient type.
        unsafe { b.launch(cfg) }.w()?;
        crate::profile::mark_kernel(kernel);
        Ok(())
    }
}

/// One fused step of parameter `p` (a whole parameter or a contiguous view of one: a
/// [`crate::Span`]) with gradient `g` (f32 or bf16, read as it is; other
/// dtypes are cast to f32 first), with the scalars last uploaded to `s`; also writes the
/// updated `p` in bf16 into `copy` (a contiguous bf16 CUDA tensor or view of as many elements) if
/// given.
/// `on`: launch on this stream instead of the parameter's, with at most this many blocks
/// (the kernel loops over the elements; fewer blocks leave SMs to the GEMMs that run
/// beside it, see [`crate::in_backward`]); the caller orders it after
/// whatever wrote `g`, `p`, the moments and the scalars, and keeps `g` alive until it ran
/// (see [`crate::in_backward`]). Anything the launch must allocate or convert (a
/// non-contiguous or non-f32/bf16 gradient) is refused there, since that would run on the
/// parameter's stream, unordered with `on`.
pub fn step(
    p: &Tensor,
    g: &Tensor,
    moments: &mut DeviceMoments,
    s: &DeviceScalars,
    copy: Option<&Tensor>,
    on: Option<(&std::sync::Arc<CudaStream>, Option<u32>)>,
    scale: Option<&Tensor>,
) -> Result<()> {
    if on.is_some() {
        side_grad(g)?;
    }
    let g = kernel_grad(g)?;
    let guard = copy.map(|c| c.storage_and_layout());
    let copy_vec4 = guard
        .as_ref()
        .is_none_or(|(_, l)| l.start_offset().is_multiple_of(4));
    let copy = match &guard {
        None => None,
        Some((st, l)) => {
            let candle_core::Storage::Cuda(cs) = &**st else {
                return Err(ModelError::Input(
                    "fused AdamW: the bf16 copy is not on CUDA".into(),
                ));
            };
            if !l.is_contiguous() {
                return Err(ModelError::Input(
                    "fused AdamW: the bf16 copy must be contiguous".into(),
                ));
            }
            let (o, n) = (l.start_offset(), l.shape().elem_count());
            Some(cs.as_cuda_slice::<half::bf16>()?.slice(o..o + n))
        }
    };
    let sguard = scale.map(|t| t.storage_and_layout());
    let scale = match &sguard {
        None => None,
        Some((st, l)) => {
            let candle_core::Storage::Cuda(cs) = &**st else {
                return Err(ModelError::Input(
                    "fused AdamW: the gradient scale is not on CUDA".into(),
                ));
            };
            if l.shape().elem_count() != 2 || cs.dtype() != DType::F32 {
                return Err(ModelError::Input(
                    "fused AdamW: the gradient scale must be a [norm, coef] f32 tensor".into(),
                ));
            }
            let o = l.start_offset() + 1;
            Some(cs.as_cuda_slice::<f32>()?.slice(o..o + 1))
        }
    };
    p.inplace_op2(
        &g,
        &Launch {
            moments: RefCell::new(moments),
            s: &s.dev,
            copy,
            copy_vec4,
            on,
            scale,
        },
    )?;
    Ok(())
}
