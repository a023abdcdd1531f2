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
//! assert_eq!(acc.take().unwrap()[0].as_ref().unwrap().to_vec1::<f32>()?, [1.0, 2.0]);
//! # Ok(()) }
//! ```

mod sums;
pub use sums::{Accumulator, Target};

use crate::error::{ModelError, Result};
use candle_core::{CpuStorage, CustomOp2, DType, InplaceOp2, Layout, Shape, Tensor};

/// `g` in a new f32 buffer of its own, times `scale` if given.
pub fn own_f32(g: &Tensor, scale: Option<f64>) -> Result<Tensor> {
    let f = match g.dtype() {
        DType::F32 => crate::span::own(g)?,
        _ => g.to_dtype(DType::F32)?.contiguous()?,
    };
    Ok(match scale {
        Some(k) => f.affine(k, 0.0)?,
        None => f,
    })
}

/// f32 or bf16, contiguous (others cast to f32 first).
fn operand(g: &Tensor) -> Result<Tensor> {
    Ok(match g.dtype() {
        DType::F32 | DType::BF16 => g.contiguous()?,
        _ => g.to_dtype(DType::F32)?,
    })
}

fn same_size(a: &Tensor, g: &Tensor) -> Result<()> {
    if a.elem_count() != g.elem_count() {
        return Err(ModelError::Input(format!(
            "accumulate: a gradient of {} elements into a sum of {}",
            g.elem_count(),
            a.elem_count()
        )));
    }
    Ok(())
}

/// `acc ← (acc + g)·scale` in place (`acc`: contiguous f32 of its own; `g`: as many
/// elements, f32 or bf16, other dtypes cast first).
pub fn accumulate(acc: &Tensor, g: &Tensor, scale: Option<f64>) -> Result<()> {
    in_place_ok(acc)?;
    same_size(acc, g)?;
    acc.inplace_op2(
        &operand(g)?,
        &Accum {
            scale,
            out: DType::F32,
        },
    )?;
    Ok(())
}

/// One sum of [`sum_many`].
pub(crate) enum Job {
    /// `sum ← (sum + g)·scale`, `sum` contiguous f32 of its own.
    InPlace { sum: Tensor, g: Tensor },
    /// `(a + g)·scale` into a new f32 buffer.
    New { a: Tensor, g: Tensor },
}

/// Each job's sum, in order: on CUDA the small ones (a norm's weight) up to 32 to a launch
/// (a micro-batch's few hundred tiny kernels become a few, `cuda::sum_small`), the rest one
/// pass each as [`accumulate`] and [`sum_new`]; the same bits.
pub(crate) fn sum_many(jobs: Vec<Job>, scale: Option<f64>) -> Result<Vec<Tensor>> {
    let mut out: Vec<Option<Tensor>> = vec![None; jobs.len()];
    #[cfg(feature = "cuda")]
    let rest = cuda::sum_small(jobs, scale, &mut out)?;
    #[cfg(not(feature = "cuda"))]
    let rest = jobs.into_iter().enumerate();
    for (j, job) in rest {
        out[j] = Some(match job {
            Job::InPlace { sum, g } => {
                accumulate(&sum, &g, scale)?;
                sum
            }
            Job::New { a, g } => sum_new(&a, &g, scale)?,
        });
    }
    Ok(out
        .into_iter()
        .map(|s| s.expect("every job summed"))
        .collect())
}

fn in_place_ok(acc: &Tensor) -> Result<()> {
    if acc.dtype() != DType::F32 || !acc.is_contiguous() {
        return Err(ModelError::Input(format!(
            "accumulate: the sum must be contiguous f32, got {:?}",
            acc.dtype()
        )));
    }
    Ok(())
}

/// `(a + b)·scale` in a new f32 buffer (a and b: as many elements, any float dtype), one
/// pass.
pub fn sum_new(a: &Tensor, b: &Tensor, scale: Option<f64>) -> Result<Tensor> {
    sum_new_as(a, b, scale, DType::F32)
}

/// [`sum_new`] into a new buffer of `dtype` (f32 or bf16; `a` an f32 sum for bf16): the
/// bits of the f32 result cast to `dtype`, in one pass. DDP and ZeRO send the last
/// micro-batch's sums this way (8 bytes an element for a bf16 gradient, where summing in
/// place and then casting moved 16).
pub fn sum_new_as(a: &Tensor, b: &Tensor, scale: Option<f64>, dtype: DType) -> Result<Tensor> {
    same_size(a, b)?;
    if dtype != DType::F32 && (dtype != DType::BF16 || a.dtype() != DType::F32) {
        return Err(ModelError::Input(format!(
            "accumulate: a {dtype:?} result from a {:?} sum (f32 results, or bf16 from an f32 sum)",
            a.dtype()
        )));
    }
    let shape = a.shape().clone();
    let a = operand(a)?.flatten_all()?;
    let b = operand(b)?.flatten_all()?;
    let op = Accum { scale, out: dtype };
    Ok(a.apply_op2_no_bwd(&b, &op)?.reshape(shape)?)
}

struct Accum {
    scale: Option<f64>,
    /// The dtype of a new buffer ([`CustomOp2`]); f32 in place.
    out: DType,
}

impl Accum {
    /// `out[i] = (x[i] + y[i])·s` on the host (`x` None: `out` itself).
    fn host(
        &self,
        out: &mut [f32],
        x: Option<&CpuStorage>,
        xo: usize,
        y: &CpuStorage,
        yo: usize,
    ) -> candle_core::Result<()> {
        let n = out.len();
        let s = self.scale.map(|s| s as f32);
        let f = |t: f32| s.map_or(t, |s| t * s);
        let at = |st: &CpuStorage, o: usize| -> candle_core::Result<Vec<f32>> {
            Ok(match st {
                CpuStorage::F32(v) => v[o..o + n].to_vec(),
                CpuStorage::BF16(v) => v[o..o + n].iter().map(|x| x.to_f32()).collect(),
                _ => candle_core::bail!("accumulate: f32 or bf16 gradients"),
            })
        };
        let y = at(y, yo)?;
        match x {
            None => out.iter_mut().zip(&y).for_each(|(o, &b)| *o = f(*o + b)),
            Some(x) => {
                let x = at(x, xo)?;
                out.iter_mut()
                    .zip(x.iter().zip(&y))
                    .for_each(|(o, (&a, &b))| *o = f(a + b));
            }
        }
        Ok(())
    }
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
        let (o, n) = (al.start_offset(), al.shape().elem_count());
        self.host(&mut a[o..o + n], None, 0, g, gl.start_offset())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a: &mut candle_core::CudaStorage,
        al: &Layout,
        g: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<()> {
        let n = al.shape().elem_count();
        let (ao, go) = (al.start_offset(), gl.start_offset());
        let dev = a.device.clone();
        let mut out = a.as_cuda_slice_mut::<f32>()?.slice_mut(ao..ao + n);
        cuda::launch(&dev, &mut out, None, (g, go), n, self.scale, ao % 4 == 0)
    }
}

impl CustomOp2 for Accum {
    fn name(&self) -> &'static str {
        "accumulate-new"
    }

    fn cpu_fwd(
        &self,
        a: &CpuStorage,
        al: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let n = al.shape().elem_count();
        let mut out = vec![0f32; n];
        self.host(&mut out, Some(a), al.start_offset(), b, bl.start_offset())?;
        let out = match self.out {
            DType::BF16 => CpuStorage::BF16(out.into_iter().map(half::bf16::from_f32).collect()),
            _ => CpuStorage::F32(out),
        };
        Ok((out, Shape::from(n)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a: &candle_core::CudaStorage,
        al: &Layout,
        b: &candle_core::CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let n = al.shape().elem_count();
        let dev = a.device.clone();
        macro_rules! go {
            ($t:ty) => {{
                // SAFETY: every element is written by the kernel below before anything
                // reads it.
                let mut out = unsafe { dev.alloc::<$t>(n)? };
                let mut view = out.slice_mut(0..n);
                let x = Some((a, al.start_offset()));
                cuda::launch(
                    &dev,
                    &mut view,
                    x,
                    (b, bl.start_offset()),
                    n,
                    self.scale,
                    true,
                )?;
                candle_core::CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        let out = match self.out {
            DType::BF16 => go!(half::bf16),
            _ => go!(f32),
        };
        Ok((out, Shape::from(n)))
    }
}

#[cfg(feature = "cuda")]
mod cuda;

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
        let got = acc.take().unwrap();
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
            acc.take().unwrap()[0]
                .as_ref()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap(),
            [2.0, 4.0]
        );
    }

    #[test]
    fn a_sum_sent_in_bf16_has_the_bits_of_the_sum_then_the_cast() {
        let d = Device::Cpu;
        let a = Tensor::new(&[0.1f32, -2.5, 3.0e-3, 1.0e7, -7.77], &d).unwrap();
        let g = Tensor::new(&[0.7f32, 1.0 / 3.0, 9.0, 1.0, 0.01], &d)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let got = sum_new_as(&a, &g, Some(0.25), DType::BF16).unwrap();
        assert_eq!(got.dtype(), DType::BF16);
        let own = a.affine(1.0, 0.0).unwrap();
        accumulate(&own, &g, Some(0.25)).unwrap();
        let want = own.to_dtype(DType::BF16).unwrap();
        let bits = |t: &Tensor| -> Vec<u16> {
            let v = t.to_vec1::<half::bf16>().unwrap();
            v.iter().map(|x| x.to_bits()).collect()
        };
        assert_eq!(bits(&got), bits(&want));
        assert_eq!(
            a.to_vec1::<f32>().unwrap()[0],
            0.1,
            "the sum is left as it was"
        );
        let e = sum_new_as(&g, &a, None, DType::BF16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("BF16") && e.contains("f32 sum"), "{e}");
    }

    #[test]
    fn a_size_mismatch_is_refused_naming_both() {
        let a = Tensor::zeros(3, DType::F32, &Device::Cpu).unwrap();
        let g = Tensor::zeros(2, DType::F32, &Device::Cpu).unwrap();
        let e = accumulate(&a, &g, None).unwrap_err().to_string();
        assert!(e.contains("2 elements") && e.contains("3"), "{e}");
    }
}
