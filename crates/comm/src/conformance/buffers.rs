//! The conformance suite's gathers into gather buffers (`Communicator::gather_buffer`: on
//! NCCL 2.28.7 or later, windows, which the copy engines may gather into).

use super::{expect, third_in_bf16};
use crate::{Communicator, Result};
use candle_core::{DType, Device, Tensor};

/// Gathers into views of gather buffers, alone and in launches with plain tensors, the
/// cast ones from `run_all`'s f32 `parts` (`[r + 0.25, 2r, -r]` and `[r + 1/3]` on rank r);
/// returns the checks made.
pub(super) fn gathers_into_buffers(
    c: &dyn Communicator,
    dev: &Device,
    parts: &[Tensor; 2],
) -> Result<usize> {
    let (r, n) = (c.rank() as f32, c.world_size());
    let ranks = || (0..n).map(|k| k as f32);
    let mut checks = 0;

    // The same gathers into views of one gather buffer (NCCL 2.28.7 or later: a window),
    // chunks of 3, 1 and 5 elements a rank, cast and plain, as FSDP and ZeRO-1 do.
    let buf = c.gather_buffer(9 * n, DType::BF16, dev)?;
    let views = [
        buf.narrow(0, 0, 3 * n)?,
        buf.narrow(0, 3 * n, n)?,
        buf.narrow(0, 4 * n, 5 * n)?,
    ];
    let five: Vec<f32> = (0..5).map(|j| r + j as f32).collect();
    let parts = [parts[0].clone(), parts[1].clone(), Tensor::new(five, dev)?];
    let pairs: Vec<_> = parts.iter().cloned().zip(views.iter().cloned()).collect();
    c.all_gather_cast_coalesced_async(&pairs)?.wait()?;
    let want: Vec<f32> = ranks()
        .flat_map(|k| [k + 0.25, 2.0 * k, -k])
        .chain(ranks().map(third_in_bf16))
        .chain(ranks().flat_map(|k| (0..5).map(move |j| k + j as f32)))
        .collect();
    expect("all_gather_cast_coalesced (gather buffer)", &buf, &want)?;
    // Again and again into one buffer: each gather's flags (copy engines) or NCCL's state
    // left ready for the next.
    for i in 0..4 {
        let mine = views[1].narrow(0, c.rank(), 1)?;
        let v = 7.0 * r + i as f32;
        mine.slice_set(&Tensor::new(&[v], dev)?.to_dtype(DType::BF16)?, 0, 0)?;
        c.all_gather_coalesced_async(&[(mine, views[1].clone())])?
            .wait()?;
        let want: Vec<f32> = ranks().map(|k| 7.0 * k + i as f32).collect();
        expect(
            "all_gather in place (gather buffer, repeated)",
            &views[1],
            &want,
        )?;
    }
    checks += 2;

    // As a ZeRO-1 bucket gathers: in place into the gather buffer (its bf16 copies) and into
    // a plain f32 tensor (its small parameters) in one call; and into a second gather
    // buffer, as split DDP's launches span a window per gradient. With the copy engines on,
    // they take each buffer's and NCCL the plain one.
    let plain = Tensor::zeros(2 * n, DType::F32, dev)?;
    let mine_plain = plain.narrow(0, 2 * c.rank(), 2)?;
    mine_plain.slice_set(&Tensor::new(&[r, -r][..], dev)?, 0, 0)?;
    let mine_buf = views[0].narrow(0, 3 * c.rank(), 3)?;
    let three = Tensor::new(&[r + 5.0, r + 6.0, r + 7.0][..], dev)?;
    mine_buf.slice_set(&three.to_dtype(DType::BF16)?, 0, 0)?;
    let other = c.gather_buffer(2 * n, DType::BF16, dev)?;
    let mine_other = other.narrow(0, 2 * c.rank(), 2)?;
    mine_other.slice_set(
        &Tensor::new(&[-r, 9.0][..], dev)?.to_dtype(DType::BF16)?,
        0,
        0,
    )?;
    let pairs = [
        (mine_buf, views[0].clone()),
        (mine_plain, plain.clone()),
        (mine_other, other.clone()),
    ];
    c.all_gather_coalesced_async(&pairs)?.wait()?;
    let want: Vec<f32> = ranks().flat_map(|k| [k + 5.0, k + 6.0, k + 7.0]).collect();
    expect(
        "all_gather_coalesced in place (buffer, with a plain)",
        &views[0],
        &want,
    )?;
    let want: Vec<f32> = ranks().flat_map(|k| [k, -k]).collect();
    expect(
        "all_gather_coalesced in place (plain, with a buffer)",
        &plain,
        &want,
    )?;
    let want: Vec<f32> = ranks().flat_map(|k| [-k, 9.0]).collect();
    expect(
        "all_gather_coalesced in place (a second buffer)",
        &other,
        &want,
    )?;
    checks += 3;
    Ok(checks)
}
