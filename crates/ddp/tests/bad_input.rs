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
