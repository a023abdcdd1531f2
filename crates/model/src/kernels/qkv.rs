//! The attention's q, k, v from the qkv projection in one pass: the GEMM's rows
//! (b, t, 3·h·e) become q, k, v (b, h, t, e), q and k roped (interleaved pairs, as
//! [`super::rope`]). Replaces the strided copies of q, k and v out of the permuted GEMM
//! output plus two rope kernels (forward), and two inverse ropes, a stack and a permuted
//! copy (backward: [`qkv_rope_bwd`]), each with one kernel.

use super::f32s;
use crate::error::Result;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor};

/// (b, t, h, e) of qkv (b, t, 3·h·e) against the tables (t, e/2).
fn dims(
    ql: &Layout,
    cl: &Layout,
    heads: usize,
) -> candle_core::Result<(usize, usize, usize, usize)> {
    let d = ql.shape().dims();
    let ok = d.len() == 3 && heads > 0 && d[2].is_multiple_of(3 * heads);
    if !ok || !(d[2] / (3 * heads)).is_multiple_of(2) {
        candle_core::bail!("qkv_rope: qkv must be (b, t, 3·{heads}·e) with e even, got {d:?}");
    }
    let (b, t, e) = (d[0], d[1], d[2] / (3 * heads));
    if cl.shape().dims() != [t, e / 2] {
        candle_core::bail!(
            "qkv_rope: tables must be ({t}, {}), got {:?}",
            e / 2,
            cl.shape().dims()
        );
    }
    Ok((b, t, heads, e))
}

/// One pair rotated by the angle with cosine `c` and sine `s` (rope's arithmetic) when
/// `rotate` (q and k), else copied (v).
fn rot(rotate: bool, (a, b): (f32, f32), c: f32, s: f32) -> (f32, f32) {
    if rotate {
        (a * c - b * s, a * s + b * c)
    } else {
        (a, b)
    }
}

/// Launches a kernel of one thread per pair of the 3·b·t·h·e elements it writes
/// (fused.cu's argument tail: n0 = b·t, n1 = t, n2 = h, f = e).
#[cfg(feature = "cuda")]
fn launch_pairs(
    kernel: &str,
    ins: &[(&candle_core::CudaStorage, &Layout)],
    (b, t, h, e): (usize, usize, usize, usize),
) -> candle_core::Result<candle_core::CudaStorage> {
    use candle_core::backend::BackendStorage;
    let dtype = ins[0].0.dtype();
    let pairs = 3 * b * t * h * e / 2;
    // 16 bytes per thread where e holds whole chunks and every buffer starts aligned.
    let size = dtype.size_in_bytes();
    let aligned = ins
        .iter()
        .all(|(s, l)| (l.start_offset() * s.dtype().size_in_bytes()).is_multiple_of(16));
    let vec = (e * size).is_multiple_of(16) && aligned;
    let (name, per) = if vec {
        (
            format!("{kernel}_v_{}", super::gpu::suffix(dtype)?),
            8 / size,
        )
    } else {
        (format!("{kernel}_{}", super::gpu::suffix(dtype)?), 1)
    };
    super::gpu::launch(super::gpu::Launch {
        kernel: name,
        ins,
        out_dtype: dtype,
        out_len: 2 * pairs,
        grid: (pairs / per).div_ceil(super::BLOCK),
        block: super::BLOCK,
        n: [b * t, t, h],
        f: e as f32,
    })
}

struct Split {
    heads: usize,
}

impl CustomOp3 for Split {
    fn name(&self) -> &'static str {
        "qkv-rope-split"
    }
    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        cs: &CpuStorage,
        cl: &Layout,
        ss: &CpuStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (b, t, h, e) = dims(ql, cl, self.heads)?;
        let (x, c, s) = (
            f32s("qkv_rope", "qkv", qs, ql)?,
            f32s("qkv_rope", "cos", cs, cl)?,
            f32s("qkv_rope", "sin", ss, sl)?,
        );
        let half = e / 2;
        let mut y = vec![0f32; x.len()];
        for which in 0..3 {
            for bi in 0..b {
                for hi in 0..h {
                    for ti in 0..t {
                        for i in 0..half {
                            let src = (((bi * t + ti) * 3 + which) * h + hi) * e + 2 * i;
                            let dst = (((which * b + bi) * h + hi) * t + ti) * e + 2 * i;
                            let pair = (x[src], x[src + 1]);
                            let (c, s) = (c[ti * half + i], s[ti * half + i]);
                            (y[dst], y[dst + 1]) = rot(which < 2, pair, c, s);
                        }
                    }
                }
            }
        }
        Ok((CpuStorage::F32(y), Shape::from((3, b, h, t, e))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        qs: &candle_core::CudaStorage,
        ql: &Layout,
        cs: &candle_core::CudaStorage,
        cl: &Layout,
        ss: &candle_core::CudaStorage,
        sl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        for (what, l) in [("qkv", ql), ("cos", cl), ("sin", sl)] {
            super::dense("qkv_rope", what, l)?;
        }
        let (b, t, h, e) = dims(ql, cl, self.heads)?;
        let out = launch_pairs(
            "qkv_rope_split",
            &[(qs, ql), (cs, cl), (ss, sl)],
            (b, t, h, e),
        )?;
        Ok((out, Shape::from((3, b, h, t, e))))
    }
    fn bwd(
        &self,
        _qkv: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        _y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let d = qkv_rope_bwd(&g.get(0)?, &g.get(1)?, &g.get(2)?, cos, sin)
            .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        Ok((Some(d), None, None))
    }
}

/// The backward: (dq, dk, dv) → dqkv; the tables are fixed inputs of the op.
struct Merge {
    cos: Tensor,
    sin: Tensor,
}

impl Merge {
    /// (b, h, t, e), all three the same and contiguous.
    fn dims(&self, ls: [&Layout; 3]) -> candle_core::Result<(usize, usize, usize, usize)> {
        let d = ls[0].shape().dims();
        if d.len() != 4 || ls.iter().any(|l| l.shape().dims() != d) || !d[3].is_multiple_of(2) {
            candle_core::bail!("qkv_rope_bwd: dq, dk, dv must be equal (b, h, t, e), e even");
        }
        if self.cos.dims() != [d[2], d[3] / 2] || self.sin.dims() != self.cos.dims() {
            candle_core::bail!("qkv_rope_bwd: tables must be ({}, {})", d[2], d[3] / 2);
        }
        Ok((d[0], d[1], d[2], d[3]))
    }
}

impl CustomOp3 for Merge {
    fn name(&self) -> &'static str {
        "qkv-rope-merge"
    }
    fn cpu_fwd(
        &self,
        s0: &CpuStorage,
        l0: &Layout,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (b, h, t, e) = self.dims([l0, l1, l2])?;
        let g = [
            f32s("qkv_rope_bwd", "dq", s0, l0)?,
            f32s("qkv_rope_bwd", "dk", s1, l1)?,
            f32s("qkv_rope_bwd", "dv", s2, l2)?,
        ];
        let (c, s): (Vec<f32>, Vec<f32>) = (
            self.cos.flatten_all()?.to_vec1()?,
            self.sin.flatten_all()?.to_vec1()?,
        );
        let half = e / 2;
        let mut y = vec![0f32; 3 * b * h * t * e];
        for bi in 0..b {
            for ti in 0..t {
                for (which, g) in g.iter().enumerate() {
                    for hi in 0..h {
                        for i in 0..half {
                            let src = ((bi * h + hi) * t + ti) * e + 2 * i;
                            let dst = (((bi * t + ti) * 3 + which) * h + hi) * e + 2 * i;
                            let pair = (g[src], g[src + 1]);
                            let (c, s) = (c[ti * half + i], -s[ti * half + i]);
                            (y[dst], y[dst + 1]) = rot(which < 2, pair, c, s);
                        }
                    }
                }
            }
        }
        Ok((CpuStorage::F32(y), Shape::from((b, t, 3 * h * e))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s0: &candle_core::CudaStorage,
        l0: &Layout,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::Storage;
        for (what, l) in [("dq", l0), ("dk", l1), ("dv", l2)] {
            super::dense("qkv_rope_bwd", what, l)?;
        }
        let (b, h, t, e) = self.dims([l0, l1, l2])?;
        let (cg, cl) = self.cos.storage_and_layout();
        let (sg, sl) = self.sin.storage_and_layout();
        let (Storage::Cuda(cs), Storage::Cuda(ss)) = (&*cg, &*sg) else {
            candle_core::bail!("qkv_rope_bwd: the tables must be on the gradients' GPU");
        };
        let ins = [(s0, l0), (s1, l1), (s2, l2), (cs, cl), (ss, sl)];
        let out = launch_pairs("qkv_rope_merge", &ins, (b, t, h, e))?;
        Ok((out, Shape::from((b, t, 3 * h * e))))
    }
}

/// The composition the fused op replaces (CPU with a dtype other than f32, and the check).
pub fn qkv_rope_composed(qkv: &Tensor, heads: usize, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (b, t, d3) = qkv.dims3()?;
    let e = d3 / (3 * heads);
    let x = qkv.reshape((b, t, 3, heads, e))?.permute((2, 0, 3, 1, 4))?;
    let q = crate::layers::rope(&x.get(0)?.contiguous()?, cos, sin)?;
    let k = crate::layers::rope(&x.get(1)?.contiguous()?, cos, sin)?;
    Ok(Tensor::stack(&[q, k, x.get(2)?.contiguous()?], 0)?)
}

/// q, k, v (b, h, t, e) from qkv (b, t, 3·h·e) with `heads` heads, q and k roped by the
/// f32 tables (t, e/2), as one (3, b, h, t, e) tensor (`get(0)` is q, contiguous).
pub fn qkv_rope(qkv: &Tensor, heads: usize, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    if qkv.device().is_cpu() && qkv.dtype() != DType::F32 {
        return qkv_rope_composed(qkv, heads, cos, sin);
    }
    let (cos, sin) = (
        cos.to_dtype(DType::F32)?.contiguous()?,
        sin.to_dtype(DType::F32)?.contiguous()?,
    );
    Ok(qkv.contiguous()?.apply_op3(&cos, &sin, Split { heads })?)
}

/// ∂qkv (b, t, 3·h·e) of [`qkv_rope`] from the gradients of q, k and v (b, h, t, e).
pub fn qkv_rope_bwd(
    dq: &Tensor,
    dk: &Tensor,
    dv: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
) -> Result<Tensor> {
    let merge = Merge {
        cos: cos.to_dtype(DType::F32)?.contiguous()?,
        sin: sin.to_dtype(DType::F32)?.contiguous()?,
    };
    Ok(dq
        .contiguous()?
        .apply_op3_no_bwd(&dk.contiguous()?, &dv.contiguous()?, &merge)?)
}
