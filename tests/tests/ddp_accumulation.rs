//! Gradient accumulation averages over micro-batches by default: after k no_sync calls,
//! the collected gradients are the mean of the k + 1 global batches' gradients (the sum
//! with DdpOptions::sum_micro_batches), for all-reduce and for reduce-scatter (ZeRO-1).
//! AdamW hides a constant factor, so the gradients themselves are compared.

mod common;
use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};

const MICRO: u64 = 3;

/// The single-process gradients of the MICRO global batches, summed, flattened.
fn summed() -> Vec<Vec<f32>> {
    let m = build(Kind::Toy, 0);
    let mut total: Vec<Vec<f32>> = Vec::new();
    for k in 0..MICRO {
        let (_, g) =
            model::forward_backward(m.as_ref(), &global_batch(Kind::Toy, k), |_, _| Ok(()))
                .unwrap();
        let g: Vec<Vec<f32>> = g.iter().map(|g| flat(g.as_ref().unwrap())).collect();
        total = if total.is_empty() {
            g
        } else {
            total.iter().zip(&g).map(|(a, b)| add(a, b)).collect()
        };
    }
    total
}

fn flat(t: &candle_core::Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

fn add(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// Each rank's collected gradients after MICRO micro-batches (the last one synchronised).
fn accumulate(world: usize, opts: DdpOptions) -> Vec<Vec<Vec<f32>>> {
    on_ranks(world, move |rank, comm| {
        let m = build(Kind::Toy, rank as u64 * 17);
        let mut ddp = Ddp::new(comm, m.as_ref(), opts).unwrap();
        for k in 0..MICRO {
            let local = shard_batch(&global_batch(Kind::Toy, k), rank, world).unwrap();
            if k + 1 < MICRO {
                ddp.forward_backward_no_sync(m.as_ref(), &local).unwrap();
            } else {
                ddp.forward_backward(m.as_ref(), &local).unwrap();
            }
        }
        let g = ddp.finish_gradient_synchronization().unwrap();
        g.iter().map(|g| flat(g.as_ref().unwrap())).collect()
    })
}

#[test]
fn accumulated_gradients_are_the_mean_over_micro_batches_by_default() {
    let sum = summed();
    let mean: Vec<Vec<f32>> = sum
        .iter()
        .map(|g| g.iter().map(|x| x / MICRO as f32).collect())
        .collect();
    for world in [2, 4] {
        for s in [Strategy::Flat, Strategy::Overlap] {
            for (r, g) in accumulate(world, DdpOptions::new(s)).iter().enumerate() {
                let d = max_diff(g, &mean);
                assert!(d <= 1e-6, "{s} world {world} rank {r}: off the mean by {d}");
            }
            let opts = DdpOptions {
                sum_micro_batches: true,
                ..DdpOptions::new(s)
            };
            for (r, g) in accumulate(world, opts).iter().enumerate() {
                let d = max_diff(g, &sum);
                assert!(d <= 1e-5, "{s} world {world} rank {r}: off the sum by {d}");
            }
        }
    }
}

/// Reduce-scatter (ZeRO-1's path): each rank's slice of each bucket is the mean too.
#[test]
fn reduce_scattered_slices_are_the_mean_too() {
    let sum: Vec<f32> = summed().concat();
    let world = 2;
    let got = on_ranks(world, move |rank, comm| {
        let m = build(Kind::Toy, 0);
        let opts = DdpOptions {
            reduce_scatter: true,
            ..DdpOptions::new(Strategy::Flat)
        };
        let mut ddp = Ddp::new(comm, m.as_ref(), opts).unwrap();
        for k in 0..MICRO {
            let local = shard_batch(&global_batch(Kind::Toy, k), rank, world).unwrap();
            if k + 1 < MICRO {
                ddp.forward_backward_no_sync(m.as_ref(), &local).unwrap();
            } else {
                ddp.forward_backward(m.as_ref(), &local).unwrap();
            }
        }
        let slices = ddp.finish_reduce_scatter().unwrap();
        assert_eq!(slices.len(), 1, "flat: one bucket");
        let s = &slices[0];
        assert!(
            s.params.is_empty(),
            "the toy's parameters are all below 64 Ki elements"
        );
        flat(s.flat.as_ref().expect("a flat part"))
    });
    // The flat bucket is the parameters in reverse order, zero-padded to a multiple of 2.
    let m = build(Kind::Toy, 0);
    let mut bucket: Vec<f32> = Vec::new();
    let mut off: Vec<usize> = vec![0];
    for v in m.params().vars() {
        off.push(off.last().unwrap() + v.elem_count());
    }
    for i in (0..m.params().len()).rev() {
        bucket.extend_from_slice(&sum[off[i]..off[i + 1]]);
    }
    bucket.resize(bucket.len().div_ceil(world) * world, 0.0);
    let whole: Vec<f32> = got.concat();
    assert_eq!(whole.len(), bucket.len());
    let d = whole
        .iter()
        .zip(&bucket)
        .map(|(g, s)| (g - s / MICRO as f32).abs())
        .fold(0.0, f32::max);
    assert!(d <= 1e-6, "reduce-scattered slices off the mean by {d}");
}
