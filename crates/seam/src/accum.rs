//! Gradient accumulation in place: `acc ← (acc + g)·s` over f32 sums, one pass
//! (on CUDA one kernel, kernels/accum.cu: 10 bytes per element for a bf16 gradient, where a
//! cast, an add into a new buffer and a scale moved 26). [`Accumulator`] keeps a step's sums
//! across micro-batches; the sum and the product round separately, so the bits equal
//! `(acc + g.to_dtype(F32)) * s` in candle.
//!
//! ```
//! # fn main() -> seam::Result<()> {
//! use candle_core::{Device, Tensor};
//! let g = Tensor::new(&[1f32, 2.0], &Device::Cpu)?;
//! let mut acc = seam::accum::Accumulator::default();
//! acc.add(vec![Some(g.clone())], None)?;
//! acc.add(vec![Some(g)], Some(0.5))?; // the last micro-batch: the mean of two
//! assert_eq!(acc.take()[0].as_ref().unwrap().to_vec1::<f32>()?, [1.0, 2.0]);
//! # Ok(()) }
//! ```

use crate::error::{ModelError, Result};
use crate::Grads;
use candle_core::{CpuStorage, DType, InplaceOp2, Layout, Tensor};

/// Sums of gradients in f32, parameter by parameter, each its own buffer.
#[derive(Default)]
pub struct Accumulator {
    sums: Option<Grads>,
}

impl Accumulator {
    /// Goes on from `sums` that [`Self::take`] returned (f32 buffers of their own, not
    /// copied again).
    pub fn with_sums(sums: Grads) -> Self {
        Self { sums: Some(sums) }
    }

    /// Adds one micro-batch's gradients (any float dtype) and multiplies by `scale` if
    /// given (1/k on the last of k micro-batches). The first micro-batch's become the sums
    /// (cast, or copied where already f32: the sums never alias a gradient).
    pub fn add(&mut self, grads: Grads, scale: Option<f64>) -> Result<()> {
        let sums = match self.sums.take() {
            None => grads
                .into_iter()
                .map(|g| g.map(|g| own_f32(&g, scale)).transpose())
                .collect::<Result<Grads>>()?,
            Some(mut sums) => {
                if sums.len() < grads.len() {
                    sums.resize(grads.len(), None);
                }
                for (s, g) in sums.iter_mut().zip(grads) {
                    *s = match (s.take(), g) {
                        (Some(a), Some(g)) => {
                            accumulate(&a, &g, scale)?;
                            Some(a)
                        }
                        (Some(a), None) => Some(match scale {
                            Some(k) => a.affine(k, 0.0)?,
                            None => a,
                        }),
                        (None, Some(g)) => Some(own_f32(&g, scale)?),
                        (None, None) => None,
                    };
                }
                sums
            }
        };
        self.sums = Some(sums);
        Ok(())
    }

    /// Whether nothing has been added since the last [`Self::take`].
    pub fn is_empty(&self) -> bool {
        self.sums.is_none()
    }

    /// The sums (empty when nothing was added), leaving the accumulator empty.
    pub fn take(&mut self) -> Grads {
        self.sums.take().unwrap_or_default()
    }

    /// Parameter `i`'s sum so far, taken out (`None`: none).
    pub fn take_one(&mut self, i: usize) -> Option<Tensor> {
        self.sums.as_mut()?.get_mut(i)?.take()
    }
}

/// `g` in a new f32 buffer of its own, times `scale` if given.
fn own_f32(g: &Tensor, scale: Option<f64>) -> Result<Tensor> {
    let f = match g.dtype() {
        DType::F32 => g.copy()?,
        _ => g.to_dtype(DType::F32)?.contiguous()?,
    };
    Ok(match scale {
        Some(k) => f.affine(k, 0.0)?,
        None => f,
    })
}

/// `acc ← (acc + g)·scale` in place (`acc`: contiguous f32 of its own; `g`: as many
/// elements, f32 or bf16, other dtypes cast first).
pub fn accumulate(acc: &Tensor, g: &Tensor, scale: Option<f64>) -> Result<()> {
    if acc.dtype() != DType::F32 || !acc.is_contiguous() {
        return Err(ModelError::Input(format!(
            "accumulate: the sum must be contiguous f32, got {:?}",
            acc.dtype()
        )));
    }
    if acc.elem_count() != g.elem_count() {
        return Err(ModelError::Input(format!(
            "accumulate: a gradient of {} elements into a sum of {}",
            g.elem_count(),
            acc.elem_count()
        )));
    }
    let g = match g.dtype() {
        DType::F32 | DType::BF16 => g.contiguous()?,
        _ => g.to_dtype(DType::F32)?,
    };
    acc.inplace_op2(&g, &Accum { scale })?;
    Ok(())
}

struct Accum {
    scale: Option<f64>,
}

impl InplaceOp2 for Accum {
    fn name(&self) -> &'static str {
        "accumulate"
    }

    fn cpu_fwd(
        &self,
        a: &mut CpuStorage,
        al: &Layout,
        g: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<()> {
        let CpuStorage::F32(a) = a else {
            candle_core::bail!("accumulate: the sum must be f32");
        };
        let n = al.shape().elem_count();
        let a = &mut a[al.start_offset()..al.start_offset() + n];
        let go = gl.start_offset();
        let s = self.scale.map(|s| s as f32);
        let put = |x: &mut f32, y: f32| {
            let t = *x + y;
            *x = s.map_or(t, |s| t * s);
        };
        match g {
            CpuStorage::F32(g) => a
                .iter_mut()
                .zip(&g[go..go + n])
                .for_each(|(x, &y)| put(x, y)),
            CpuStorage::BF16(g) => a
                .iter_mut()
                .zip(&g[go..go + n])
                .for_each(|(x, y)| put(x, y.to_f32())),
            _ => candle_core::bail!("accumulate: an f32 or bf16 gradient"),
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a: &mut candle_core::CudaStorage,
        al: &Layout,
        g: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<()> {
        use candle_core::backend::BackendStorage;
        use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
        use candle_core::cuda_backend::WrapErr;
        const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/accum.ptx"));
        let n = al.shape().elem_count();
        let (ao, go) = (al.start_offset(), gl.start_offset());
        let kernel = match g.dtype() {
            DType::F32 => "accum_f32",
            DType::BF16 => "accum_bf16",
            d => candle_core::bail!("accumulate: {d:?} gradient (f32 or bf16)"),
        };
        let func = a
            .device
            .get_or_load_custom_func(kernel, "seam_accum", PTX)?;
        let mut ad = a.as_cuda_slice_mut::<f32>()?.slice_mut(ao..ao + n);
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(256).min(132 * 16) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n64, s, on) = (
            n as u64,
            self.scale.unwrap_or(1.0) as f32,
            i32::from(self.scale.is_some()),
        );
        let (gf, gb);
        let mut b = func.builder();
        b.arg(&mut ad);
        if g.dtype() == DType::F32 {
            gf = g.as_cuda_slice::<f32>()?.slice(go..go + n);
            b.arg(&gf);
        } else {
            gb = g.as_cuda_slice::<half::bf16>()?.slice(go..go + n);
            b.arg(&gb);
        }
        b.arg(&n64).arg(&s).arg(&on);
        // SAFETY: the kernel's signature matches: acc n f32, g n elements of its type.
        unsafe { b.launch(cfg) }.w()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn sums_in_place_equal_candles_add_then_scale_bit_for_bit() {
        let d = Device::Cpu;
        let a = Tensor::new(&[0.1f32, -2.5, 3.0e-3], &d).unwrap();
        let b = Tensor::new(&[0.7f32, 1.0 / 3.0, 9.0], &d)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let c = Tensor::new(&[1.1f32, 2.2, -3.3], &d).unwrap();
        let mut acc = Accumulator::default();
        acc.add(vec![Some(a.clone()), None], None).unwrap();
        acc.add(vec![Some(b.clone()), Some(c.clone())], None)
            .unwrap();
        acc.add(vec![Some(c.clone()), None], Some(1.0 / 3.0))
            .unwrap();
        let got = acc.take();
        let want = ((((a + b.to_dtype(DType::F32).unwrap()).unwrap() + &c).unwrap())
            .affine(1.0 / 3.0, 0.0))
        .unwrap();
        assert_eq!(
            got[0].as_ref().unwrap().to_vec1::<f32>().unwrap(),
            want.to_vec1::<f32>().unwrap()
        );
        let second = c.affine(1.0 / 3.0, 0.0).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(got[1].as_ref().unwrap().to_vec1::<f32>().unwrap(), second);
        assert!(acc.is_empty());
    }

    #[test]
    fn the_sums_never_alias_the_first_gradient() {
        let g = Tensor::new(&[1f32, 2.0], &Device::Cpu).unwrap();
        let mut acc = Accumulator::default();
        acc.add(vec![Some(g.clone())], None).unwrap();
        acc.add(vec![Some(g.clone())], None).unwrap();
        assert_eq!(g.to_vec1::<f32>().unwrap(), [1.0, 2.0]);
        assert_eq!(
            acc.take()[0].as_ref().unwrap().to_vec1::<f32>().unwrap(),
            [2.0, 4.0]
        );
    }

    #[test]
    fn a_size_mismatch_is_refused_naming_both() {
        let a = Tensor::zeros(3, DType::F32, &Device::Cpu).unwrap();
        let g = Tensor::zeros(2, DType::F32, &Device::Cpu).unwrap();
        let e = accumulate(&a, &g, None).unwrap_err().to_string();
        assert!(e.contains("2 elements") && e.contains("3"), "{e}");
    }
}
