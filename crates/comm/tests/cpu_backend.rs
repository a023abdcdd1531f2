//! The CPU backend's collectives against values computed by hand, on 1–4 ranks, plus
//! the failure paths: mismatched buffers, a missing rank, bad arguments.

use candle_core::{DType, Device, Tensor};
use comm::{cpu_group, CommOptions, Communicator, CpuComm, ReduceOp};
use std::time::{Duration, Instant};

/// Runs `f` on every rank in its own thread; returns the per-rank results in rank order.
fn on_ranks<T: Send>(world: usize, opts: CommOptions, f: impl Fn(&CpuComm) -> T + Sync) -> Vec<T> {
    let comms = cpu_group(world, opts).unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = comms.iter().map(|c| s.spawn(|| f(c))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn t(v: &[f32]) -> Tensor {
    Tensor::new(v, &Device::Cpu).unwrap()
}

#[test]
fn all_reduce_sum_avg_max_min() {
    for world in 1..=4 {
        let out = on_ranks(world, CommOptions::default(), |c| {
            let r = c.rank() as f32;
            let mut res = Vec::new();
            for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min] {
                // 5 elements: not divisible by most world sizes.
                let x = t(&[r, 2.0 * r, -r, 1.0, r * r]);
                c.all_reduce(&x, op).unwrap();
                res.push(x.to_vec1::<f32>().unwrap());
            }
            res
        });
        let n = world as f32;
        let s: f32 = (0..world).map(|r| r as f32).sum();
        let sq: f32 = (0..world).map(|r| (r * r) as f32).sum();
        let m = n - 1.0;
        let want = [
            vec![s, 2.0 * s, -s, n, sq],
            vec![s / n, 2.0 * s / n, -s / n, 1.0, sq / n],
            vec![m, 2.0 * m, 0.0, 1.0, m * m],
            vec![0.0, 0.0, -m, 1.0, 0.0],
        ];
        for per_rank in &out {
            for (got, want) in per_rank.iter().zip(&want) {
                for (g, w) in got.iter().zip(want) {
                    assert!(
                        (g - w).abs() < 1e-6,
                        "world {world}: got {got:?}, want {want:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn all_reduce_on_a_view_changes_only_the_view() {
    let out = on_ranks(2, CommOptions::default(), |c| {
        let flat = t(&[1.0, 1.0, 1.0, 1.0]);
        let view = flat.narrow(0, 1, 2).unwrap();
        c.all_reduce(&view, ReduceOp::Sum).unwrap();
        flat.to_vec1::<f32>().unwrap()
    });
    assert_eq!(out[0], vec![1.0, 2.0, 2.0, 1.0]);
    assert_eq!(out[1], out[0]);
}

#[test]
fn reduce_scatter_all_gather_broadcast_barrier() {
    let world = 3;
    let out = on_ranks(world, CommOptions::default(), |c| {
        let r = c.rank() as f32;
        // reduce-scatter: input of world × 2 elements.
        let input = t(&[r, 1.0, r, 2.0, r, 3.0]);
        let rs = Tensor::zeros(2, DType::F32, &Device::Cpu).unwrap();
        c.reduce_scatter(&input, &rs, ReduceOp::Sum).unwrap();
        // all-gather of 2 elements.
        let ag = Tensor::zeros(2 * world, DType::F32, &Device::Cpu).unwrap();
        c.all_gather(&t(&[r, 10.0 * r]), &ag).unwrap();
        // broadcast from rank 2.
        let b = t(&[r, r]);
        c.broadcast(&b, 2).unwrap();
        c.barrier().unwrap();
        (
            rs.to_vec1::<f32>().unwrap(),
            ag.to_vec1::<f32>().unwrap(),
            b.to_vec1::<f32>().unwrap(),
        )
    });
    for (rank, (rs, ag, b)) in out.iter().enumerate() {
        assert_eq!(rs, &vec![3.0, 3.0 * (rank as f32 + 1.0)]);
        assert_eq!(ag, &vec![0.0, 0.0, 1.0, 10.0, 2.0, 20.0]);
        assert_eq!(b, &vec![2.0, 2.0]);
    }
}

#[test]
fn bf16_and_f64_buffers_work() {
    let out = on_ranks(2, CommOptions::default(), |c| {
        let a = Tensor::new(&[1.5f64, 2.0], &Device::Cpu).unwrap();
        c.all_reduce(&a, ReduceOp::Sum).unwrap();
        let b = Tensor::new(&[1.0f32, 0.5], &Device::Cpu)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        c.all_reduce(&b, ReduceOp::Sum).unwrap();
        (
            a.to_vec1::<f64>().unwrap(),
            b.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap(),
        )
    });
    assert_eq!(out[0], (vec![3.0, 4.0], vec![2.0, 1.0]));
}

#[test]
fn mismatched_sizes_fail_on_every_rank_naming_each() {
    let out = on_ranks(2, CommOptions::default(), |c| {
        let x = Tensor::zeros(3 + c.rank(), DType::F32, &Device::Cpu).unwrap();
        c.all_reduce(&x, ReduceOp::Sum).unwrap_err().to_string()
    });
    for e in out {
        assert!(
            e.contains("rank 0: all_reduce of 3") && e.contains("rank 1: all_reduce of 4"),
            "{e}"
        );
    }
}

#[test]
fn a_missing_rank_fails_the_others_within_the_timeout() {
    let opts = CommOptions {
        timeout: Duration::from_millis(300),
        ..CommOptions::default()
    };
    let t0 = Instant::now();
    let out = on_ranks(3, opts, |c| {
        if c.rank() == 1 {
            return None; // rank 1 never calls the collective
        }
        let x = t(&[1.0]);
        Some(c.all_reduce(&x, ReduceOp::Sum).unwrap_err().to_string())
    });
    // Bounded, not timed: the failure comes from the 300 ms timeout; only a hang trips this.
    assert!(t0.elapsed() < Duration::from_secs(120));
    for e in out.into_iter().flatten() {
        assert!(e.contains("[1]"), "error should name missing rank 1: {e}");
    }
}

#[test]
fn bad_arguments_are_rejected_before_communicating() {
    let out = on_ranks(2, CommOptions::default(), |c| {
        let ints = Tensor::zeros(4, DType::U32, &Device::Cpu).unwrap();
        let e1 = c.all_reduce(&ints, ReduceOp::Sum).unwrap_err().to_string();
        let e2 = c.broadcast(&t(&[1.0]), 5).unwrap_err().to_string();
        let small = Tensor::zeros(3, DType::F32, &Device::Cpu).unwrap();
        let e3 = c.all_gather(&small, &small).unwrap_err().to_string();
        (e1, e2, e3)
    });
    let (e1, e2, e3) = &out[0];
    assert!(e1.contains("U32"), "{e1}");
    assert!(e2.contains("root 5"), "{e2}");
    assert!(e3.contains("expected world_size 2"), "{e3}");
}

#[test]
fn conformance_suite_passes_on_1_to_4_ranks() {
    for world in 1..=4 {
        let counts = on_ranks(world, CommOptions::default(), |c| {
            comm::conformance::run_all(c, &Device::Cpu).unwrap()
        });
        assert!(counts.iter().all(|&n| n == 32), "world {world}: {counts:?}");
    }
    let errs = on_ranks(2, CommOptions::default(), |c| {
        comm::conformance::mismatch_is_detected(c, &Device::Cpu)
    });
    assert!(errs.iter().all(|e| e.is_ok()), "{errs:?}");
}
