//! One conformance suite for every backend (like nccl-tests' `-c`): each collective's
//! result checked against values computed by hand, on whatever device the backend uses.
//! The CPU backend runs it in `cargo test`; the NCCL backend runs it on GPUs through
//! `comm-selftest` (one process per GPU).

use crate::{CommError, Communicator, Deferred, ReduceOp, Result};
use candle_core::{DType, Device, Tensor};

mod buffers;

fn fail(what: &str, got: impl std::fmt::Debug, want: impl std::fmt::Debug) -> CommError {
    CommError::Mismatch {
        op: "conformance",
        detail: format!("{what}: got {got:?}, want {want:?}"),
    }
}

/// What rank `k`'s part `k + 1/3`, cast to bf16, gathers as.
fn third_in_bf16(k: f32) -> f32 {
    half::bf16::from_f32(k + 1.0 / 3.0).to_f32()
}

fn expect(what: &str, t: &Tensor, want: &[f32]) -> Result<()> {
    let got = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    if got.len() != want.len()
        || got
            .iter()
            .zip(want)
            .any(|(g, w)| (g - w).abs() > 1e-5 * w.abs().max(1.0))
    {
        return Err(fail(what, got, want));
    }
    Ok(())
}

/// Runs every check on this rank; all ranks must call it together. Returns the check count.
pub fn run_all(c: &dyn Communicator, dev: &Device) -> Result<usize> {
    let (r, n) = (c.rank() as f32, c.world_size());
    let nf = n as f32;
    let ranks = || (0..n).map(|k| k as f32);
    let mut checks = 0;

    // 1. all-reduce, every op, on 5 elements (not divisible by most world sizes).
    let sum: f32 = ranks().sum();
    let sq: f32 = ranks().map(|k| k * k).sum();
    for (op, want) in [
        (ReduceOp::Sum, vec![sum, 2.0 * sum, -sum, nf, sq]),
        (
            ReduceOp::Avg,
            vec![sum / nf, 2.0 * sum / nf, -sum / nf, 1.0, sq / nf],
        ),
        (
            ReduceOp::Max,
            vec![nf - 1.0, 2.0 * (nf - 1.0), 0.0, 1.0, (nf - 1.0).powi(2)],
        ),
        (ReduceOp::Min, vec![0.0, 0.0, 1.0 - nf, 1.0, 0.0]),
    ] {
        let x = Tensor::new(&[r, 2.0 * r, -r, 1.0, r * r], dev)?;
        c.all_reduce(&x, op)?;
        expect(&format!("all_reduce {op:?}"), &x, &want)?;
        checks += 1;
    }

    // 2. A large all-reduce and one on a view: only the view changes.
    let big = Tensor::ones(1_000_003, DType::F32, dev)?.affine(1.0, r as f64)?;
    c.all_reduce(&big, ReduceOp::Sum)?;
    let s = big.sum_all()?.to_scalar::<f32>()? as f64;
    let want = 1_000_003.0 * (nf + sum) as f64;
    if (s - want).abs() > 1e-6 * want {
        return Err(fail(
            "all_reduce of 1,000,003 elements (sum of all)",
            s,
            want,
        ));
    }
    let flat = Tensor::ones(4, DType::F32, dev)?;
    c.all_reduce(&flat.narrow(0, 1, 2)?, ReduceOp::Sum)?;
    expect("all_reduce on a view", &flat, &[1.0, nf, nf, 1.0])?;
    checks += 2;

    // 3. reduce-scatter, all-gather, broadcast, barrier.
    let input: Vec<f32> = (0..n).flat_map(|k| [r + k as f32, 1.0]).collect();
    let out = Tensor::zeros(2, DType::F32, dev)?;
    c.reduce_scatter(&Tensor::new(input.as_slice(), dev)?, &out, ReduceOp::Sum)?;
    expect("reduce_scatter", &out, &[sum + nf * r, nf])?;
    let gathered = Tensor::zeros(2 * n, DType::F32, dev)?;
    c.all_gather(&Tensor::new(&[r, 10.0 * r], dev)?, &gathered)?;
    let want: Vec<f32> = ranks().flat_map(|k| [k, 10.0 * k]).collect();
    expect("all_gather", &gathered, &want)?;
    let b = Tensor::new(&[r, r + 0.5], dev)?;
    c.broadcast(&b, n - 1)?;
    expect("broadcast from the last rank", &b, &[nf - 1.0, nf - 0.5])?;
    c.barrier()?;
    checks += 4;

    // 3b. In place (NCCL's rule: the small buffer is this rank's chunk of the large one).
    let ri = c.rank();
    let buf = Tensor::new(input.as_slice(), dev)?;
    let mine = buf.narrow(0, 2 * ri, 2)?;
    c.reduce_scatter(&buf, &mine, ReduceOp::Avg)?;
    expect(
        "reduce_scatter in place",
        &mine,
        &[(sum + nf * r) / nf, 1.0],
    )?;
    let stale: Vec<f32> = ranks().flat_map(|k| [k - 7.0, -1.0]).collect();
    let all = Tensor::new(stale.as_slice(), dev)?;
    all.slice_set(&Tensor::new(&[r, 10.0 * r], dev)?, 0, 2 * ri)?;
    c.all_gather(&all.narrow(0, 2 * ri, 2)?, &all)?;
    expect("all_gather in place", &all, &want)?;
    checks += 2;

    // 4. bf16 buffers.
    let h = Tensor::new(&[1.0f32, 0.5], dev)?.to_dtype(DType::BF16)?;
    c.all_reduce(&h, ReduceOp::Sum)?;
    expect("all_reduce bf16", &h, &[nf, 0.5 * nf])?;
    checks += 1;

    // 5. Asynchronous collectives ordered with compute: inputs produced by queued compute,
    //    several in flight at once, results consumed by compute after wait().
    let base = Tensor::ones((256, 256), DType::F32, dev)?;
    let mut pending = Vec::new();
    for k in 0..3 {
        let x = (base.matmul(&base)? * ((k + 1) as f64))?.affine(1.0, r as f64)?; // 256·(k+1) + r
        let w = c.all_reduce_async(&x, ReduceOp::Sum)?;
        pending.push((k, x, w));
    }
    for (k, x, w) in pending {
        w.wait()?;
        let y = (x * 2.0)?;
        let want = 2.0 * (nf * 256.0 * (k + 1) as f32 + sum);
        let got = y.mean_all()?.to_scalar::<f32>()?;
        if (got - want).abs() > 1e-3 * want {
            return Err(fail(
                &format!("async all_reduce #{k} then compute"),
                got,
                want,
            ));
        }
    }
    let w = c.all_reduce_async(&Tensor::ones(8, DType::F32, dev)?, ReduceOp::Sum)?;
    w.synchronize()?;
    checks += 2;

    // 6. Coalesced collectives: buffers of mixed dtypes (one a view) produced by queued
    //    compute, one handle; reduce-scatters likewise; an empty list is a no-op.
    let flat = Tensor::ones(6, DType::F32, dev)?;
    let bufs = [
        (base.matmul(&base)? / 256.0)?.affine(1.0, r as f64)?, // 1 + r
        Tensor::new(&[r, 1.0], dev)?.to_dtype(DType::BF16)?,
        flat.narrow(0, 2, 3)?,
    ];
    c.all_reduce_coalesced_async(&bufs, ReduceOp::Sum)?.wait()?;
    let got = bufs[0].mean_all()?.to_scalar::<f32>()?;
    if (got - (nf + sum)).abs() > 1e-4 * (nf + sum) {
        return Err(fail("all_reduce_coalesced (f32 of compute)", got, nf + sum));
    }
    expect("all_reduce_coalesced (bf16)", &bufs[1], &[sum, nf])?;
    expect(
        "all_reduce_coalesced (a view)",
        &flat,
        &[1.0, 1.0, nf, nf, nf, 1.0],
    )?;
    let pairs: Vec<(Tensor, Tensor)> = (1..3)
        .map(|k| -> Result<_> {
            let input: Vec<f32> = (0..n * k).map(|i| r + i as f32).collect();
            Ok((
                Tensor::new(input.as_slice(), dev)?,
                Tensor::zeros(k, DType::F32, dev)?,
            ))
        })
        .collect::<Result<_>>()?;
    c.reduce_scatter_coalesced_async(&pairs, ReduceOp::Avg)?
        .wait()?;
    for (k, (_, out)) in pairs.iter().enumerate() {
        let k = k + 1;
        let want: Vec<f32> = (0..k)
            .map(|i| sum / nf + (r as usize * k + i) as f32)
            .collect();
        expect(&format!("reduce_scatter_coalesced #{k}"), out, &want)?;
    }
    // All-gathers as one launch: one into a separate buffer, one in place (the input is
    // this rank's chunk of the output), in two dtypes.
    let mut host = vec![0f32; 2 * n];
    host[2 * c.rank()..2 * c.rank() + 2].copy_from_slice(&[r, r + 0.5]);
    let whole = Tensor::new(host.as_slice(), dev)?.to_dtype(DType::BF16)?;
    let mine = whole.narrow(0, 2 * c.rank(), 2)?;
    let pairs = [
        (
            Tensor::new(&[10.0 * r], dev)?,
            Tensor::zeros(n, DType::F32, dev)?,
        ),
        (mine, whole.clone()),
    ];
    c.all_gather_coalesced_async(&pairs)?.wait()?;
    let want: Vec<f32> = ranks().map(|k| 10.0 * k).collect();
    expect("all_gather_coalesced (separate)", &pairs[0].1, &want)?;
    let want: Vec<f32> = ranks().flat_map(|k| [k, k + 0.5]).collect();
    expect("all_gather_coalesced (in place, bf16)", &whole, &want)?;
    // Mixed-precision gathers: f32 parts cast into bf16 wholes (in place on the GPU).
    let wholes = [
        Tensor::zeros(3 * n, DType::BF16, dev)?,
        Tensor::zeros(n, DType::BF16, dev)?,
    ];
    let parts = [
        Tensor::new(&[r + 0.25, 2.0 * r, -r][..], dev)?,
        Tensor::new(&[r + 1.0 / 3.0][..], dev)?,
    ];
    let pairs: Vec<_> = parts.iter().cloned().zip(wholes.iter().cloned()).collect();
    c.all_gather_cast_coalesced_async(&pairs)?.wait()?;
    let want: Vec<f32> = ranks().flat_map(|k| [k + 0.25, 2.0 * k, -k]).collect();
    expect("all_gather_cast_coalesced (bf16 of f32)", &wholes[0], &want)?;
    let want: Vec<f32> = ranks().map(third_in_bf16).collect();
    expect("all_gather_cast_coalesced (rounded)", &wholes[1], &want)?;
    c.all_reduce_coalesced_async(&[], ReduceOp::Sum)?
        .synchronize()?;
    checks += 6;

    checks += buffers::gathers_into_buffers(c, dev, &parts)?;

    // In-place bf16 reduce-scatters as one deferred launch, as ZeRO-1's gradients (NCCL:
    // by the copy engines where COMM_CE_REDUCE says so: each shape's window and flags reused), in
    // chunks of 3, 5 and 1024 elements a rank; between two of them one of other shapes.
    let ri = c.rank();
    for (i, sizes) in [[3, 5, 1024], [5, 3, 8], [3, 5, 1024]]
        .into_iter()
        .enumerate()
    {
        let m = |j: usize| ((j + i) % 16) as f32;
        let pairs = sizes
            .iter()
            .map(|&k| -> Result<(Tensor, Tensor)> {
                let host: Vec<f32> = (0..k * n).map(|j| r + m(j)).collect();
                let b = Tensor::new(host.as_slice(), dev)?.to_dtype(DType::BF16)?;
                let mine = b.narrow(0, k * ri, k)?;
                Ok((b, mine))
            })
            .collect::<Result<Vec<_>>>()?;
        let (op, div) = match i {
            1 => (ReduceOp::Sum, 1.0),
            _ => (ReduceOp::Avg, nf),
        };
        c.reduce_scatter_deferred_async(&pairs, op)?.wait()?;
        for (&k, (_, out)) in sizes.iter().zip(&pairs) {
            let want: Vec<f32> = (0..k).map(|j| (sum + nf * m(k * ri + j)) / div).collect();
            let what = format!("reduce_scatter_coalesced in place (bf16, launch {i}, {k} a rank)");
            expect(&what, out, &want)?;
        }
    }
    checks += 1;

    // Deferred bf16 reduce-scatters with more (`Deferred`), as DDP's split all-reduce and
    // the norm from the shards: into views of one gather buffer, all-gathered (NCCL at
    // world 2: by the copy engines, chained to the adds), with and without the norm of
    // this rank's chunks; then a plain one with the norm, and one beside the others (NCCL:
    // by its kernels on its second stream); then sizes that differ, refused.
    let all = c.gather_buffer(2048 * n, DType::BF16, dev)?;
    let norm = Tensor::zeros(1, DType::F32, dev)?;
    for i in 0..4 {
        let m = |j: usize| ((j + 3 * i) % 16) as f32;
        let (gather, squares, beside) = (i < 2, i != 1, i == 3);
        let pairs = [(0, 5 * n), (1024 * n, 1000 * n)]
            .iter()
            .map(|&(at, k)| -> Result<(Tensor, Tensor)> {
                let host: Vec<f32> = (0..k).map(|j| r + m(j)).collect();
                let input = Tensor::new(host.as_slice(), dev)?.to_dtype(DType::BF16)?;
                let buf = all.narrow(0, at, k)?;
                let out = match gather {
                    true => buf,
                    false => buf.narrow(0, c.rank() * k / n, k / n)?,
                };
                Ok((input, out))
            })
            .collect::<Result<Vec<_>>>()?;
        let with = Deferred {
            gather,
            norm: squares.then(|| norm.clone()),
            beside,
        };
        c.reduce_scatter_deferred_with(&pairs, ReduceOp::Avg, &with)?
            .wait()?;
        let mut want_sq = 0f64;
        for (input, out) in &pairs {
            let k = input.elem_count();
            let want: Vec<f32> = (0..k).map(|j| (sum + nf * m(j)) / nf).collect();
            let mine = &want[c.rank() * k / n..(c.rank() + 1) * k / n];
            want_sq += mine
                .iter()
                .map(|&v| f64::from(v) * f64::from(v))
                .sum::<f64>();
            let what =
                format!("reduce_scatter_deferred_with (bf16, gather {gather}, beside {beside})");
            expect(&what, out, if gather { &want } else { mine })?;
        }
        if squares {
            let what = format!("reduce_scatter_deferred_with's norm (gather {gather})");
            expect(&what, &norm, &[want_sq.sqrt() as f32])?;
        }
    }
    let short = all.narrow(0, 0, n)?;
    let long = Tensor::zeros(2 * n, DType::BF16, dev)?;
    let with = Deferred {
        gather: true,
        ..Deferred::default()
    };
    match c.reduce_scatter_deferred_with(&[(long, short)], ReduceOp::Sum, &with) {
        Err(CommError::InvalidArgument { .. }) => checks += 3,
        other => {
            return Err(fail(
                "reduce_scatter_deferred_with a gather and an input larger than its buffer",
                other.map(|_| ()),
                "InvalidArgument",
            ))
        }
    }

    // 7. Bad input fails before anything is sent, the same way on every rank.
    let t = Tensor::zeros((3, 4), DType::F32, dev)?.t()?;
    match c.all_reduce(&t, ReduceOp::Sum) {
        Err(CommError::InvalidArgument { .. }) => checks += 1,
        other => {
            return Err(fail(
                "non-contiguous all_reduce",
                other.map(|_| ()),
                "InvalidArgument",
            ))
        }
    }
    let ok = Tensor::zeros(4, DType::F32, dev)?;
    match c.all_reduce_coalesced_async(&[ok.clone(), t], ReduceOp::Sum) {
        Err(CommError::InvalidArgument { .. }) => checks += 1,
        other => {
            return Err(fail(
                "coalesced all_reduce with a non-contiguous second buffer",
                other.map(|_| ()),
                "InvalidArgument",
            ))
        }
    }
    // Nothing was sent: the next collective still pairs up across ranks.
    c.all_reduce(&ok, ReduceOp::Sum)?;
    Ok(checks)
}

/// With shape checks on (always on CPU; `COMM_CHECK_SHAPES=1` on NCCL): ranks passing
/// different sizes all get a `Mismatch` error naming each rank's size.
pub fn mismatch_is_detected(c: &dyn Communicator, dev: &Device) -> Result<()> {
    let x = Tensor::zeros(3 + c.rank(), DType::F32, dev)?;
    match c.all_reduce(&x, ReduceOp::Sum) {
        Err(CommError::Mismatch { detail, .. }) if detail.contains("rank 1") => Ok(()),
        other => Err(fail(
            "mismatched sizes",
            other.map(|_| ()),
            "Mismatch naming rank 1",
        )),
    }
}
