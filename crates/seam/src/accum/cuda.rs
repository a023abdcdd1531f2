//! The accumulation kernels' launcher (kernels/accum.cu).

use super::{in_place_ok, operand, same_size, Job};
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaStream, CudaViewMut, DeviceRepr, LaunchConfig, PushKernelArg,
};
use candle_core::cuda_backend::{CudaDevice, CudaStorage, WrapErr};
use candle_core::{DType, Device, Shape, Storage, Tensor};
use std::sync::Arc;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/accum.ptx"));

fn tag(d: DType) -> candle_core::Result<&'static str> {
    Ok(match d {
        DType::F32 => "f32",
        DType::BF16 => "bf16",
        d => candle_core::bail!("accumulate: {d:?} gradient (f32 or bf16)"),
    })
}

/// `out ← (x + y)·s` (`x` None: out itself), n elements from each start offset; 16-byte
/// accesses where every start allows them. `out` is f32, or bf16 (`T` = `half::bf16`) with
/// `x` an f32 sum.
pub(super) fn launch<T: DeviceRepr>(
    dev: &CudaDevice,
    out: &mut CudaViewMut<'_, T>,
    x: Option<(&CudaStorage, usize)>,
    (y, yo): (&CudaStorage, usize),
    n: usize,
    scale: Option<f64>,
    out_aligned: bool,
) -> candle_core::Result<()> {
    let bf16_out = std::mem::size_of::<T>() == 2;
    let kernel = match x {
        None => format!("accum_in_place_{}", tag(y.dtype())?),
        Some((x, _)) if bf16_out && x.dtype() == DType::F32 => {
            format!("accum_to_bf16_f32_{}", tag(y.dtype())?)
        }
        Some(_) if bf16_out => candle_core::bail!("accumulate: a bf16 result needs an f32 sum"),
        Some((x, _)) => format!("accum_{}_{}", tag(x.dtype())?, tag(y.dtype())?),
    };
    let func = dev.get_or_load_custom_func(&kernel, "seam_accum", PTX)?;
    let vec4 = out_aligned && yo % 4 == 0 && x.is_none_or(|(_, xo)| xo % 4 == 0);
    let per = if vec4 { 4 } else { 1 };
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(256 * per).clamp(1, 132 * 8) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let (n64, s, on, v4) = (
        n as u64,
        scale.unwrap_or(1.0) as f32,
        i32::from(scale.is_some()),
        i32::from(vec4),
    );
    let (xf, xb, yf, yb);
    let mut b = func.builder();
    b.arg(out);
    if let Some((x, xo)) = x {
        if x.dtype() == DType::F32 {
            xf = x.as_cuda_slice::<f32>()?.slice(xo..xo + n);
            b.arg(&xf);
        } else {
            xb = x.as_cuda_slice::<half::bf16>()?.slice(xo..xo + n);
            b.arg(&xb);
        }
    }
    if y.dtype() == DType::F32 {
        yf = y.as_cuda_slice::<f32>()?.slice(yo..yo + n);
        b.arg(&yf);
    } else {
        yb = y.as_cuda_slice::<half::bf16>()?.slice(yo..yo + n);
        b.arg(&yb);
    }
    b.arg(&n64).arg(&s).arg(&on).arg(&v4);
    // SAFETY: the kernel's signature matches: out n elements of its type (f32, or bf16 for
    // the accum_to_bf16 kernels), x and y n elements of theirs (x absent: the in-place
    // kernel).
    unsafe { b.launch(cfg) }.w()?;
    Ok(())
}

/// Sums per launch of [`launch_many`] (AM_MAX in kernels/accum.cu).
pub(super) const MANY: usize = 32;

#[repr(C)]
#[derive(Clone, Copy)]
struct AccumTable {
    n: [u64; MANY],
    out: [u64; MANY],
    x: [u64; MANY],
    y: [u64; MANY],
    count: u32,
}
// SAFETY: plain old data with the kernel's layout (kernels/accum.cu AccumTable).
unsafe impl candle_core::cuda_backend::cudarc::driver::DeviceRepr for AccumTable {}

/// Device address of `t`'s first element ([`crate::pinned::device_ptr`], the error named).
fn addr(t: &Tensor, s: &Arc<CudaStream>) -> candle_core::Result<u64> {
    crate::pinned::device_ptr(t, s).map_err(|e| candle_core::Error::Msg(format!("accumulate: {e}")))
}

/// `out[j] ← (x[j] + y[j])·s` for up to [`MANY`] sums of one (x, y) dtype pair in one
/// launch; `out[j]`: contiguous f32 of its own, `x[j]` and `y[j]` contiguous with as many
/// elements (`x[j]` may be `out[j]`: in place).
pub(super) fn launch_many(
    dev: &CudaDevice,
    sums: &[(&Tensor, &Tensor, &Tensor)],
    scale: Option<f64>,
) -> candle_core::Result<()> {
    let Some(&(_, x0, y0)) = sums.first() else {
        return Ok(());
    };
    if sums.len() > MANY {
        candle_core::bail!(
            "accumulate: {} sums in one launch (at most {MANY})",
            sums.len()
        );
    }
    let kernel = format!("accum_many_{}_{}", tag(x0.dtype())?, tag(y0.dtype())?);
    let func = dev.get_or_load_custom_func(&kernel, "seam_accum", PTX)?;
    let s = dev.cuda_stream();
    let mut t = AccumTable {
        n: [0; MANY],
        out: [0; MANY],
        x: [0; MANY],
        y: [0; MANY],
        count: sums.len() as u32,
    };
    let mut most = 1;
    for (j, (out, x, y)) in sums.iter().enumerate() {
        if x.dtype() != x0.dtype() || y.dtype() != y0.dtype() {
            candle_core::bail!("accumulate: one launch's sums must share their dtypes");
        }
        t.n[j] = out.elem_count() as u64;
        (t.out[j], t.x[j], t.y[j]) = (addr(out, &s)?, addr(x, &s)?, addr(y, &s)?);
        most = most.max(out.elem_count());
    }
    let cfg = LaunchConfig {
        grid_dim: (most.div_ceil(256).clamp(1, 64) as u32, sums.len() as u32, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let (sc, on) = (scale.unwrap_or(1.0) as f32, i32::from(scale.is_some()));
    let mut b = s.launch_builder(&func);
    b.arg(&t).arg(&sc).arg(&on);
    // SAFETY: the table names live buffers of the elements it gives (the tensors are
    // borrowed by the caller until the launch is queued), of the kernel's dtypes.
    unsafe { b.launch(cfg) }.w()?;
    Ok(())
}

/// Sums at most this large go through one launch together; larger ones each take the
/// vectorized kernel.
const SMALL: usize = 1 << 20;

/// [`super::sum_many`]'s small CUDA sums: each job of at most [`SMALL`] elements on CUDA
/// summed up to [`MANY`] to a launch per dtype pair, its sum put in `out` at its index;
/// returns the other jobs with their indices.
pub(super) fn sum_small(
    jobs: Vec<Job>,
    scale: Option<f64>,
    out: &mut [Option<Tensor>],
) -> crate::error::Result<Vec<(usize, Job)>> {
    let (mut small, mut rest) = (Vec::new(), Vec::new());
    for (j, job) in jobs.into_iter().enumerate() {
        let (x, g) = match &job {
            Job::InPlace { sum, g } => (sum, g),
            Job::New { a, g } => (a, g),
        };
        let Device::Cuda(dev) = x.device().clone() else {
            rest.push((j, job));
            continue;
        };
        if x.elem_count() > SMALL || !g.device().is_cuda() {
            rest.push((j, job));
            continue;
        }
        same_size(x, g)?;
        let g = operand(g)?;
        let (sum, x) = match job {
            Job::InPlace { sum, .. } => {
                in_place_ok(&sum)?;
                (sum.clone(), sum)
            }
            Job::New { a, .. } => (new_f32(&dev, a.shape())?, operand(&a)?),
        };
        small.push((j, sum, x, g, dev));
    }
    small.sort_by_key(|(_, _, x, g, _)| (x.dtype() as u8, g.dtype() as u8));
    let pair = |t: &(usize, Tensor, Tensor, Tensor, CudaDevice)| (t.2.dtype(), t.3.dtype());
    for group in small.chunk_by(|a, b| pair(a) == pair(b)) {
        for chunk in group.chunks(MANY) {
            let t: Vec<_> = chunk.iter().map(|(_, s, x, g, _)| (s, x, g)).collect();
            launch_many(&chunk[0].4, &t, scale)?;
        }
    }
    for (j, sum, ..) in small {
        out[j] = Some(sum);
    }
    Ok(rest)
}

/// A new f32 buffer of `shape`, not initialized (the sum's kernel writes every element).
fn new_f32(dev: &CudaDevice, shape: &Shape) -> crate::error::Result<Tensor> {
    // SAFETY: written whole by the launch that takes it before anything reads it.
    let buf = unsafe { dev.alloc::<f32>(shape.elem_count())? };
    let st = CudaStorage::wrap_cuda_slice(buf, dev.clone());
    Ok(Tensor::from_storage(
        Storage::Cuda(st),
        shape.clone(),
        candle_core::op::BackpropOp::none(),
        false,
    ))
}
