//! `bench model-check`'s grouped AdamW row: `seam::fused_adamw::group` (up to 64 tensors a
//! launch) against the kernel a tensor (`seam::fused_adamw::step`), bit for bit, on the GPU.

use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use seam::fused_adamw::{self as fa, group, StepScalars};

/// One tensor of the check: the parameter, its moments and its bf16 copy, on one path.
struct Side {
    p: Tensor,
    mom: fa::DeviceMoments,
    copy: Option<Tensor>,
}

/// 150 tensors (two launches of bf16 gradients, one of f32): 1 to 65,537 elements (tails
/// of 1-3 after the four-at-a-time loads), gradients f32 or bf16 at element offsets 0, 1
/// and 4 of larger buffers (1: loaded one by one), bf16 copies whole, at offset 1 of a
/// larger buffer or none, every gradient scaled by 0.5; three steps. Parameters, both
/// moments and the copies must equal the kernel a tensor's bit for bit. Returns the
/// tensors checked.
pub fn run(gpu: &Device) -> Result<usize> {
    let sizes = [1usize, 3, 4, 5, 1003, 1024, 1025, 4096, 65537, 777];
    let count = 150;
    let scale = Tensor::new(&[2.0f32, 0.5], gpu)?;
    let mut s = fa::DeviceScalars::new(&scale)?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for k in 0..count {
        let n = sizes[k % sizes.len()];
        let init = Tensor::randn(0f32, 1.0, n, gpu)?;
        for side in [&mut a, &mut b] {
            let p = init.copy()?;
            let copy = match k % 3 {
                0 => Some(Tensor::zeros(n, DType::BF16, gpu)?),
                1 => Some(Tensor::zeros(n + 1, DType::BF16, gpu)?.narrow(0, 1, n)?),
                _ => None,
            };
            side.push(Side {
                mom: fa::zero_moments(&p)?,
                p,
                copy,
            });
        }
    }
    for step in 1..=3 {
        let scalars = StepScalars {
            decay: 1.0 - 1e-2 * 0.1,
            b1: 0.9,
            b2: 0.999,
            eps: 1e-8,
            step_size: (1e-2 / (1.0 - 0.9f64.powi(step))) as f32,
            bc2_sqrt: (1.0 - 0.999f64.powi(step)).sqrt() as f32,
        };
        s.upload(scalars, "model-check grouped AdamW")?;
        let grads = (0..count)
            .map(|k| {
                let n = sizes[k % sizes.len()];
                let offset = [0, 1, 4][(k / 3) % 3];
                let dtype = if k % 4 == 0 { DType::F32 } else { DType::BF16 };
                let buf = Tensor::randn(0f32, 1.0, n + offset, gpu)?.to_dtype(dtype)?;
                Ok(buf.narrow(0, offset, n)?)
            })
            .collect::<Result<Vec<Tensor>>>()?;
        let mut items: Vec<group::Item> = (a.iter_mut().zip(&grads))
            .map(|(x, g)| group::Item {
                p: &x.p,
                g,
                moments: &mut x.mom,
                copy: x.copy.as_ref(),
            })
            .collect();
        group::step(&mut items, &s, None, Some(&scale))?;
        for (y, g) in b.iter_mut().zip(&grads) {
            let g = g.contiguous()?;
            fa::step(
                &y.p,
                &g,
                &mut y.mom,
                &s,
                y.copy.as_ref(),
                None,
                Some(&scale),
            )?;
        }
    }
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        let bits = |t: &Tensor| -> Result<Vec<u32>> {
            let v = t.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            Ok(v.iter().map(|f| f.to_bits()).collect())
        };
        let mut pairs = vec![("parameter", bits(&x.p)?, bits(&y.p)?)];
        for (what, which) in [
            ("first moment", seam::Moment::ExpAvg),
            ("second moment", seam::Moment::ExpAvgSq),
        ] {
            let host = |side: &Side| -> Result<Vec<u32>> {
                let v = side.mom.moment_to_host(&side.p, which)?;
                Ok(v.iter().map(|f| f.to_bits()).collect())
            };
            pairs.push((what, host(x)?, host(y)?));
        }
        if let (Some(cx), Some(cy)) = (&x.copy, &y.copy) {
            pairs.push(("bf16 copy", bits(cx)?, bits(cy)?));
        }
        for (what, u, v) in pairs {
            if let Some(i) = (0..u.len()).find(|&i| u[i] != v[i]) {
                bail!(
                    "grouped AdamW, tensor {k} ({} elements): its {what}'s element {i} is {:e} where the kernel a tensor gives {:e}",
                    u.len(),
                    f32::from_bits(u[i]),
                    f32::from_bits(v[i])
                );
            }
        }
    }
    Ok(count)
}
