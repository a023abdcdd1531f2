//! [`super::matmul`]'s candle op on CUDA: the operands' device pointers, the output
//! buffer, and the call through [`super::lt`]'s plans.

use super::lt::{self, Args, Key};
use crate::error::Result;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use candle_core::cuda_backend::{CudaStorage, WrapErr};
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, InplaceOp3, Layout, Shape, Tensor};
use half::bf16;

fn ptr<
    'a,
    T: candle_core::cuda_backend::CudaDType
        + candle_core::cuda_backend::cudarc::driver::DeviceRepr
        + 'a,
>(
    st: &'a CudaStorage,
    l: &Layout,
    s: &'a CudaStream,
) -> candle_core::Result<(
    u64,
    candle_core::cuda_backend::cudarc::driver::SyncOnDrop<'a>,
)> {
    let v = st.as_cuda_slice::<T>()?;
    let (p, g) = v.device_ptr(s);
    Ok((p + (l.start_offset() * std::mem::size_of::<T>()) as u64, g))
}

/// The op: inputs a, b (and c), output D.
struct Gemm;

/// The plan's key for a (m, k) · b (k, n): each operand plain where plain reads it (a
/// single column is both), else the transposed view.
fn key(
    a: (&CudaStorage, &Layout),
    b: (&CudaStorage, &Layout),
    add: bool,
    out_f32: bool,
) -> candle_core::Result<Key> {
    let (m, k) = a.1.shape().dims2()?;
    let n = b.1.shape().dims2()?.1;
    let transposed = |l: &Layout| !super::plain(l.dims(), l.stride());
    Ok(Key {
        m,
        n,
        k,
        ta: transposed(a.1),
        tb: transposed(b.1),
        bf16: a.0.dtype() == DType::BF16,
        tf32: candle_core::cuda::gemm_reduced_precision_f32(),
        add,
        out_f32,
        sms: seam::gemm_sms::sm_target() as u32,
    })
}

fn run(
    a: (&CudaStorage, &Layout),
    b: (&CudaStorage, &Layout),
    c: Option<(&CudaStorage, &Layout)>,
) -> candle_core::Result<(CudaStorage, Shape)> {
    let dev = a.0.device().clone();
    let s = dev.cuda_stream();
    let key = key(a, b, c.is_some(), false)?;
    let (m, n) = (key.m, key.n);
    macro_rules! go {
        ($t:ty) => {{
            // SAFETY: the GEMM writes all m·n elements.
            let mut out = unsafe { s.alloc::<$t>(m * n) }.w()?;
            {
                let (pa, _ga) = ptr::<$t>(a.0, a.1, &s)?;
                let (pb, _gb) = ptr::<$t>(b.0, b.1, &s)?;
                let (pd, _gd) = out.device_ptr_mut(&s);
                let (pc, _gc) = match c {
                    Some(c) => {
                        let (p, g) = ptr::<$t>(c.0, c.1, &s)?;
                        (p, Some(g))
                    }
                    None => (pd, None),
                };
                let x = Args {
                    a: pa,
                    b: pb,
                    c: pc,
                    d: pd,
                    alpha: 1.0,
                    beta: if c.is_some() { 1.0 } else { 0.0 },
                };
                lt::execute(key, &x, &dev)?;
            }
            CudaStorage::wrap_cuda_slice(out, dev)
        }};
    }
    let out = match a.0.dtype() {
        DType::BF16 => go!(bf16),
        _ => go!(f32),
    };
    Ok((out, Shape::from((m, n))))
}

impl CustomOp2 for Gemm {
    fn name(&self) -> &'static str {
        "gemm"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        crate::kernels::cuda_only("gemm")
    }
    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        al: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        run((a, al), (b, bl), None)
    }
}

impl CustomOp3 for Gemm {
    fn name(&self) -> &'static str {
        "gemm_add"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        crate::kernels::cuda_only("gemm_add")
    }
    #[allow(clippy::too_many_arguments)]
    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        al: &Layout,
        b: &CudaStorage,
        bl: &Layout,
        c: &CudaStorage,
        cl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        run((a, al), (b, bl), Some((c, cl)))
    }
}

/// `(sum + a · b)·scale` in f32 for a and b in bf16 or f32: into `sum` in place (C = D,
/// β = α = scale) as [`InplaceOp3`], or into a new f32 buffer (β = 0) as [`CustomOp2`].
struct SumInto {
    scale: f32,
}

fn sum_into(
    scale: f32,
    a: (&CudaStorage, &Layout),
    b: (&CudaStorage, &Layout),
    sum: Option<(&mut CudaStorage, &Layout)>,
) -> candle_core::Result<Option<CudaStorage>> {
    let dev = a.0.device().clone();
    let s = dev.cuda_stream();
    let bf16 = a.0.dtype() == DType::BF16;
    let key = key(a, b, sum.is_some(), bf16)?;
    let (m, n) = (key.m, key.n);
    macro_rules! go {
        ($t:ty, $pd:expr, $beta:expr) => {{
            let (pa, _ga) = ptr::<$t>(a.0, a.1, &s)?;
            let (pb, _gb) = ptr::<$t>(b.0, b.1, &s)?;
            let x = Args {
                a: pa,
                b: pb,
                c: $pd,
                d: $pd,
                alpha: scale,
                beta: $beta,
            };
            lt::execute(key, &x, &dev)?;
        }};
    }
    match sum {
        Some((st, l)) => {
            let o = l.start_offset() * 4;
            let v = st.as_cuda_slice_mut::<f32>()?;
            let (pd, _gd) = v.device_ptr_mut(&s);
            let pd = pd + o as u64;
            match bf16 {
                true => go!(bf16, pd, scale),
                false => go!(f32, pd, scale),
            }
            Ok(None)
        }
        None => {
            // SAFETY: the GEMM writes all m·n elements (β = 0).
            let mut out = unsafe { s.alloc::<f32>(m * n) }.w()?;
            {
                let (pd, _gd) = out.device_ptr_mut(&s);
                match bf16 {
                    true => go!(bf16, pd, 0.0),
                    false => go!(f32, pd, 0.0),
                }
            }
            Ok(Some(CudaStorage::wrap_cuda_slice(out, dev)))
        }
    }
}

impl CustomOp2 for SumInto {
    fn name(&self) -> &'static str {
        "gemm_f32"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        crate::kernels::cuda_only("gemm_f32")
    }
    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        al: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (m, n) = (al.shape().dims2()?.0, bl.shape().dims2()?.1);
        let out = sum_into(self.scale, (a, al), (b, bl), None)?;
        Ok((out.expect("a new buffer"), Shape::from((m, n))))
    }
}

impl InplaceOp3 for SumInto {
    fn name(&self) -> &'static str {
        "gemm_sum_into"
    }
    fn cpu_fwd(
        &self,
        _: &mut CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<()> {
        crate::kernels::cuda_only("gemm_sum_into")
    }
    fn cuda_fwd(
        &self,
        sum: &mut CudaStorage,
        sl: &Layout,
        a: &CudaStorage,
        al: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<()> {
        sum_into(self.scale, (a, al), (b, bl), Some((sum, sl))).map(|_| ())
    }
}

/// `(sum + a · b)·scale` in f32: into `sum` (contiguous f32, m × n) in place, or a new
/// buffer; the caller has checked layouts, dtypes and shapes.
pub fn gemm_sum(a: &Tensor, b: &Tensor, sum: Option<&Tensor>, scale: f64) -> Result<Tensor> {
    let op = SumInto {
        scale: scale as f32,
    };
    Ok(match sum {
        Some(sum) => {
            sum.inplace_op3(a, b, &op)?;
            sum.clone()
        }
        None => a.apply_op2_no_bwd(b, &op)?,
    })
}

/// a · b (+ c) through cuBLASLt; the caller has checked layouts, dtypes and shapes.
pub fn gemm(a: &Tensor, b: &Tensor, c: Option<&Tensor>) -> Result<Tensor> {
    Ok(match c {
        Some(c) => a.apply_op3_no_bwd(b, c, &Gemm)?,
        None => a.apply_op2_no_bwd(b, &Gemm)?,
    })
}
