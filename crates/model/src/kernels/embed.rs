//! The token embedding as one op. Forward: the rows of the f32 table that the ids name,
//! rounded to the compute dtype (the whole table is not cast). Backward: the f32 table
//! gradient, written directly; each vocabulary row sums its tokens' gradient rows in
//! token order (deterministic). It replaces candle's index-add, which ran at 12 GB/s
//! (0.54 ms of an xl bf16 step on nvidia-h200, run 22), and the table's casts. Any count of
//! tokens: the backward lists a row's tokens 4,096 at a time (until session 53 more tokens
//! fell back to candle's ops, 5.8 ms of xl's step at 8 × 1024 tokens, call 291).
//! CUDA kernels `embed_fwd_*`, `embed_bwd_*` (fused.cu); an f32 CPU implementation.

use crate::error::Result;
#[cfg(feature = "cuda")]
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Shape, Tensor};

// The backward kernel runs embed.cuh's EMBED_WARPS (8) warps a block.
#[cfg(feature = "cuda")]
const _: () = assert!(super::BLOCK == 8 * 32);

struct Fwd {
    /// The output's dtype (the CPU implementation is f32 only).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    dtype: DType,
}

struct Bwd {
    vocab: usize,
}

fn ids<'a>(s: &'a CpuStorage, l: &Layout, vocab: usize) -> candle_core::Result<&'a [u32]> {
    super::u32s_below("embedding", "id", s, l, vocab, "rows")
}

impl CustomOp2 for Fwd {
    fn name(&self) -> &'static str {
        "embedding"
    }
    fn cpu_fwd(
        &self,
        ws: &CpuStorage,
        wl: &Layout,
        is: &CpuStorage,
        il: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (v, d) = wl.shape().dims2()?;
        let w = super::f32s("embedding", "table", ws, wl)?;
        let t = ids(is, il, v)?;
        let y = t
            .iter()
            .flat_map(|&i| w[i as usize * d..(i as usize + 1) * d].iter().copied())
            .collect();
        Ok((CpuStorage::F32(y), Shape::from((t.len(), d))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        ws: &candle_core::CudaStorage,
        wl: &Layout,
        is: &candle_core::CudaStorage,
        il: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use super::gpu;
        let (_, d) = wl.shape().dims2()?;
        let n = il.shape().elem_count();
        let out = gpu::launch(gpu::Launch {
            kernel: format!("embed_fwd_{}", gpu::suffix(self.dtype)?),
            ins: &[(ws, wl), (is, il)],
            out_dtype: self.dtype,
            out_len: n * d,
            grid: (n * d).div_ceil(super::BLOCK).clamp(1, 132 * 16),
            block: super::BLOCK,
            n: [n, d, 0],
            f: 0.0,
        })?;
        Ok((out, Shape::from((n, d))))
    }
    fn bwd(
        &self,
        w: &Tensor,
        ids: &Tensor,
        _y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let op = Bwd { vocab: w.dim(0)? };
        let dw = g.contiguous()?.apply_op2_no_bwd(ids, &op)?;
        Ok((Some(dw), None))
    }
}

impl CustomOp2 for Bwd {
    fn name(&self) -> &'static str {
        "embedding-bwd"
    }
    fn cpu_fwd(
        &self,
        gs: &CpuStorage,
        gl: &Layout,
        is: &CpuStorage,
        il: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, d) = gl.shape().dims2()?;
        let g = super::f32s("embedding backward", "gradient", gs, gl)?;
        let t = ids(is, il, self.vocab)?;
        let mut dw = vec![0f32; self.vocab * d];
        for (r, &i) in t.iter().enumerate() {
            let row = &mut dw[i as usize * d..(i as usize + 1) * d];
            for (a, b) in row.iter_mut().zip(&g[r * d..(r + 1) * d]) {
                *a += b;
            }
        }
        Ok((CpuStorage::F32(dw), Shape::from((self.vocab, d))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        gs: &candle_core::CudaStorage,
        gl: &Layout,
        is: &candle_core::CudaStorage,
        il: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use super::gpu;
        let (n, d) = gl.shape().dims2()?;
        super::dense("embedding backward", "gradient", gl)?;
        let out = gpu::launch(gpu::Launch {
            kernel: format!("embed_bwd_{}", gpu::suffix(gs.dtype())?),
            ins: &[(gs, gl), (is, il)],
            out_dtype: DType::F32,
            out_len: self.vocab * d,
            grid: self.vocab,
            block: super::BLOCK,
            n: [n, d, 0],
            f: 0.0,
        })?;
        Ok((out, Shape::from((self.vocab, d))))
    }
}

/// Rows `ids` (u32, any shape; flattened) of the f32 table `w` (V, d), in `dtype`, as (N, d),
/// differentiable in `w` (an f32 gradient). One op on CUDA (f32/bf16) and on the CPU (f32);
/// elsewhere candle's index_select of the f32 rows, then cast (the gradient summed in f32).
pub fn embedding(w: &Tensor, ids: &Tensor, dtype: DType) -> Result<Tensor> {
    let ids = ids.flatten_all()?.contiguous()?;
    if !fused(w, &ids, dtype) {
        return Ok(w.index_select(&ids, 0)?.to_dtype(dtype)?);
    }
    Ok(w.apply_op2(&ids, Fwd { dtype })?)
}

/// Whether [`embedding`] runs as the one op for this table, ids and dtype (and so
/// [`embedding_grad`] applies).
pub fn fused(w: &Tensor, ids: &Tensor, dtype: DType) -> bool {
    ids.dtype() == DType::U32 && fused_table(w, dtype)
}

/// [`fused`] but for the ids: whether the table and dtype take the one op (and so
/// [`embedding_grad`] gives the table's gradient from any tokens' rows).
pub fn fused_table(w: &Tensor, dtype: DType) -> bool {
    w.dtype() == DType::F32
        && w.layout().is_contiguous()
        && match w.device() {
            candle_core::Device::Cuda(_) => matches!(dtype, DType::F32 | DType::BF16),
            _ => dtype == DType::F32,
        }
}

/// The table's f32 gradient (vocab, d) from the rows' gradient g (N, d) and the ids (N):
/// the backward of the one op, for a hand-written stage.
pub fn embedding_grad(g: &Tensor, ids: &Tensor, vocab: usize) -> Result<Tensor> {
    let ids = ids.flatten_all()?.contiguous()?;
    Ok(g.contiguous()?.apply_op2_no_bwd(&ids, &Bwd { vocab })?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn values_and_gradients_equal_index_select() {
        let dev = Device::Cpu;
        let w = Var::from_tensor(&Tensor::randn(0f32, 1., (7, 5), &dev).unwrap()).unwrap();
        let ids = Tensor::new(&[3u32, 0, 3, 6, 3, 1], &dev).unwrap();
        let r = Tensor::randn(0f32, 1., (6, 5), &dev).unwrap();
        let ours = embedding(w.as_tensor(), &ids, DType::F32).unwrap();
        let theirs = w.as_tensor().index_select(&ids, 0).unwrap();
        let diff = (&ours - &theirs).unwrap().abs().unwrap().max_all().unwrap();
        assert_eq!(diff.to_scalar::<f32>().unwrap(), 0.0);
        let g1 = (ours * &r).unwrap().sum_all().unwrap().backward().unwrap();
        let g2 = (theirs * &r)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let (a, b) = (
            g1.get(w.as_tensor()).unwrap(),
            g2.get(w.as_tensor()).unwrap(),
        );
        let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap();
        assert!(diff.to_scalar::<f32>().unwrap() < 1e-6);
    }

    #[test]
    fn an_id_past_the_table_is_an_error_naming_it() {
        let dev = Device::Cpu;
        let w = Tensor::zeros((4, 2), DType::F32, &dev).unwrap();
        let ids = Tensor::new(&[1u32, 9], &dev).unwrap();
        let e = embedding(&w, &ids, DType::F32).unwrap_err().to_string();
        assert!(e.contains("id 9 is out of range for 4 rows"), "{e}");
    }
}
