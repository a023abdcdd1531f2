//! Bad input fails with a clear error on every rank, never a hang.

mod common;
use candle_core::Device;
use common::*;
use ddp::{Ddp, DdpOptions, Strategy};
use model::{StagedModel, ToyModel};

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
fn ranks_whose_gradient_options_differ_fail_on_every_rank() {
    // One rank summing and the other averaging would train on a silently wrong gradient;
    // one reduce-scattering (a split all-reduce) while the other all-reduces would hang, as
    // would one reduce-scattering its last stages beside the copy engines, gathering
    // other launches late, or bucketing its first stages apart (ddp::tail).
    let options: [fn(&mut DdpOptions); 5] = [
        |o| o.sum_micro_batches = true,
        |o| o.split = true,
        |o| o.tail_stages = Some(2),
        |o| o.late_gathers = Some(2),
        |o| o.last_bucket_mb = Some(1.0),
    ];
    for set in options {
        let errs = on_ranks(2, move |rank, comm| {
            let m = build(Kind::Toy, 0);
            let mut o = DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 });
            if rank == 1 {
                set(&mut o);
            }
            Ddp::new(comm, m.as_ref(), o).err().map(|e| e.to_string())
        });
        for (r, e) in errs.iter().enumerate() {
            let e = e
                .as_deref()
                .unwrap_or_else(|| panic!("rank {r} accepted it"));
            assert!(e.contains("rank 1's gradient options"), "{e}");
        }
    }
}

#[test]
fn a_bad_first_stages_bucket_fails_on_every_rank_naming_it() {
    let errs = on_ranks(2, |rank, comm| {
        let m = build(Kind::Toy, 0);
        let o = DdpOptions {
            last_bucket_mb: Some(if rank == 1 { f64::NAN } else { 1.0 }),
            ..DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 })
        };
        Ddp::new(comm, m.as_ref(), o).err().map(|e| e.to_string())
    });
    let e0 = errs[0].as_deref().expect("rank 0 accepted it");
    let e1 = errs[1].as_deref().expect("rank 1 accepted it");
    assert!(e0.contains("rank 1's DDP options are invalid"), "{e0}");
    assert!(e1.contains("last_bucket_mb NaN"), "{e1}");
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

/// ToyModel with its first parameter listed under the last stage instead of its own.
struct Misfiled(ToyModel);

impl model::StagedModel for Misfiled {
    fn params(&self) -> &model::ParamSet {
        self.0.params()
    }
    fn num_stages(&self) -> usize {
        self.0.num_stages()
    }
    fn stage_params(&self, s: usize) -> Vec<usize> {
        let last = self.0.num_stages() - 1;
        let mut p: Vec<usize> = self
            .0
            .stage_params(s)
            .into_iter()
            .filter(|&i| i != 0)
            .collect();
        if s == last {
            p.push(0);
        }
        p
    }
    fn forward_stage(
        &self,
        s: usize,
        x: Option<&candle_core::Tensor>,
        b: &model::Batch,
    ) -> model::Result<candle_core::Tensor> {
        self.0.forward_stage(s, x, b)
    }
    fn check_batch(&self, b: &model::Batch) -> model::Result<()> {
        self.0.check_batch(b)
    }
}

fn misfiled_step(find_unused: bool) -> Vec<Result<(), String>> {
    on_ranks(2, move |rank, comm| {
        let m = Misfiled(ToyModel::new(6, 5, 0, &Device::Cpu).unwrap());
        let opts = DdpOptions {
            find_unused_parameters: find_unused,
            ..DdpOptions::new(Strategy::Overlap)
        };
        let mut d = Ddp::new(comm, &m, opts).map_err(|e| e.to_string())?;
        let b = ddp::shard_batch(&global_batch(Kind::Toy, 0), rank, 2).unwrap();
        d.forward_backward(&m, &b)
            .and_then(|_| d.finish_gradient_synchronization())
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
}

#[test]
fn a_parameter_under_the_wrong_stage_is_an_error_naming_it() {
    let name = ToyModel::new(6, 5, 0, &Device::Cpu)
        .unwrap()
        .params()
        .names()[0]
        .clone();
    for (r, e) in misfiled_step(false).into_iter().enumerate() {
        let e = e
            .err()
            .unwrap_or_else(|| panic!("rank {r} took a zero gradient"));
        assert!(
            e.contains(&format!("parameter {name} got no gradient")),
            "{e}"
        );
        assert!(e.contains("find_unused_parameters"), "{e}");
    }
    // Opted in: its gradient is zero, as before.
    for (r, ok) in misfiled_step(true).into_iter().enumerate() {
        assert!(ok.is_ok(), "rank {r}: {ok:?}");
    }
}

#[test]
fn a_split_all_reduce_with_zero_options_is_refused() {
    let errs = on_ranks(2, |_, comm| {
        let m = build(Kind::Toy, 0);
        let mut o = DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 });
        (o.split, o.reduce_scatter) = (true, true);
        Ddp::new(comm, m.as_ref(), o).err().map(|e| e.to_string())
    });
    for e in errs {
        let e = e.expect("refused");
        assert!(
            e.contains("split all-reduce (DDP) with reduce_scatter"),
            "{e}"
        );
    }
}
