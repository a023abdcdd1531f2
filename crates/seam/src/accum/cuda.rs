//! The accumulation kernels' launcher (kernels/accum.cu).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaViewMut, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, CudaStorage, WrapErr};
use candle_core::DType;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/accum.ptx"));

fn tag(d: DType) -> candle_core::Result<&'static str> {
    Ok(match d {
        DType::F32 => "f32",
        DType::BF16 => "bf16",
        d => candle_core::bail!("accumulate: {d:?} gradient (f32 or bf16)"),
    })
}

/// `out ← (x + y)·s` (`x` None: out itself), n elements from each start offset; 16-byte
/// accesses where every start allows them.
pub(super) fn launch(
    dev: &CudaDevice,
    out: &mut CudaViewMut<'_, f32>,
    x: Option<(&CudaStorage, usize)>,
    (y, yo): (&CudaStorage, usize),
    n: usize,
    scale: Option<f64>,
    out_aligned: bool,
) -> candle_core::Result<()> {
    let kernel = match x {
        None => format!("accum_in_place_{}", tag(y.dtype())?),
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
    // SAFETY: the kernel's signature matches: out n f32, x and y n elements of their
    // types (x absent: the in-place kernel).
    unsafe { b.launch(cfg) }.w()?;
    Ok(())
}
