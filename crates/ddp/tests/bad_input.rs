//! Bad input fails with a clear error on every rank, never a hang.

mod common;
use candle_core::Device;
use common::*;
use ddp::{Ddp, DdpOptions, Strategy};
use model::ToyModel;

#[test]
fn different_models_fail_on_every_rank() {
    let errs = on_ranks(2, |rank, comm| {
        let m = ToyModel::new(6 + rank, 5, 0, &Device::Cpu).unwrap();
        Ddp::new(comm, &m, DdpOptions::new(Strategy::Flat))
            .err()
            .map(|e| e.to_string())
    });
    for (r, e) in errs.iter().enumerate() {
        let e = e
            .as_deref()
            .unwrap_or_else(|| panic!("rank {r} accepted it"));
        assert!(e.contains("rank 1 has element count"), "{e}");
    }
}

#[test]
fn different_strategies_fail_on_every_rank() {
    let errs = on_ranks(2, |rank, comm| {
        let m = build(Kind::Toy, 0);
        let s = if rank == 0 {
            Strategy::Flat
        } else {
            Strategy::Overlap
        };
        Ddp::new(comm, m.as_ref(), DdpOptions::new(s))
            .err()
            .map(|e| e.to_string())
    });
    for e in errs {
        assert!(e.unwrap().contains("rank 1's strategy differs"));
    }
}

#[test]
fn finishing_without_a_backward_is_an_error() {
    let errs = on_ranks(1, |_, comm| {
        let m = build(Kind::Toy, 0);
        let mut d = Ddp::new(comm, m.as_ref(), DdpOptions::new(Strategy::Naive)).unwrap();
        d.finish_gradient_synchronization().unwrap_err().to_string()
    });
    assert!(errs[0].contains("no synchronised backward"), "{}", errs[0]);
}

/// Each rank's error (None: accepted) from `Ddp::new` with a bucket size of `mb(rank)`.
fn bucket_errors(mb: impl Fn(usize) -> f64 + Send + Sync + 'static) -> Vec<Option<String>> {
    on_ranks(2, move |rank, comm| {
        let m = build(Kind::Toy, 0);
        let s = Strategy::Bucketed {
            bucket_mb: mb(rank),
        };
        Ddp::new(comm, m.as_ref(), DdpOptions::new(s))
            .err()
            .map(|e| e.to_string())
    })
}

#[test]
fn a_bad_bucket_size_fails_on_every_rank_naming_it() {
    // A NaN bucket size on rank 1 only: rank 1 names the size, rank 0 names rank 1 (no
    // hang waiting for it, and no "strategy differs" from NaN != NaN).
    let errs = bucket_errors(|rank| if rank == 1 { f64::NAN } else { 25.0 });
    let e0 = errs[0].as_deref().expect("rank 0 accepted it");
    let e1 = errs[1].as_deref().expect("rank 1 accepted it");
    assert!(e0.contains("rank 1's DDP options are invalid"), "{e0}");
    assert!(e1.contains("bucket size NaN MB"), "{e1}");
    for mb in [0.0, -1.0, f64::INFINITY] {
        for e in bucket_errors(move |_| mb) {
            let e = e.unwrap_or_else(|| panic!("bucket size {mb} accepted"));
            assert!(e.contains(&format!("bucket size {mb} MB")), "{e}");
        }
    }
}
