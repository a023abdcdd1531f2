//! A strategy defined outside `step` plugs into `step::TrainStep` as the built-in ones do:
//! here one that wraps `step::Local`, counting the step's calls. It trains the tiny LM
//! bit-for-bit as `Local` does (clipping on, two micro-batches, a checkpoint saved and
//! resumed), the step calls it once per step for the backward and once for the update,
//! and `strategy_as` reaches it. Nothing in `step` names it.

mod common;

use anyhow::Result;
use candle_core::Tensor;
use comm::Communicator;
use common::*;
use model::AdamWConfig;
use std::sync::Arc;
use step::strategy::{Backward, Ckpt, Pass, Update};
use step::{Local, StepOptions, Strategy, TrainStep};

/// `Local`, counting what the step asks of it.
#[derive(Default)]
struct Counting {
    inner: Local,
    backwards: usize,
    updates: usize,
}

impl Strategy for Counting {
    fn comm(&self) -> Option<&dyn Communicator> {
        self.inner.comm()
    }
    fn adamw_in_backward(&self, micro_batches: usize) -> bool {
        self.inner.adamw_in_backward(micro_batches)
    }
    fn forward_backward(&mut self, p: Pass<'_>) -> Result<Backward> {
        self.backwards += 1;
        self.inner.forward_backward(p)
    }
    fn update(&mut self, u: Update<'_>) -> Result<Option<Tensor>> {
        self.updates += 1;
        self.inner.update(u)
    }
    fn save(&mut self, c: Ckpt<'_>) -> Result<()> {
        self.inner.save(c)
    }
    fn resume(&mut self, c: Ckpt<'_>) -> Result<u64> {
        self.inner.resume(c)
    }
}

const STEPS: u64 = 6;

/// The weights after STEPS steps of two micro-batches, saved after step 3 and resumed
/// from there (in `dir`); and the step itself.
fn train(
    strategy: Box<dyn Strategy>,
    comm: Arc<dyn Communicator>,
    dir: &std::path::Path,
) -> (Vec<Vec<f32>>, TrainStep) {
    let m = build(Kind::Lm, 0);
    let opts = StepOptions {
        clip: 0.05,
        ..StepOptions::default()
    };
    let cfg = AdamWConfig::default();
    let mut st = TrainStep::new(m.as_ref(), strategy, cfg, opts).unwrap();
    for s in 0..STEPS {
        let b = [
            global_batch(Kind::Lm, 2 * s),
            global_batch(Kind::Lm, 2 * s + 1),
        ];
        st.step(m.as_ref(), &b, cfg.lr).unwrap();
        if s == 3 {
            st.flush().unwrap();
            st.save(m.as_ref(), dir, &comm).unwrap();
            assert_eq!(st.resume(m.as_ref(), dir, &comm).unwrap(), 4);
        }
    }
    st.flush().unwrap();
    (weights(m.as_ref()), st)
}

#[test]
fn a_strategy_of_its_own_trains_as_the_one_it_wraps() {
    let base = std::env::temp_dir().join(format!("dp-tests-step-plugin-{}", std::process::id()));
    let got = on_ranks(1, move |_, comm| {
        let (want, _) = train(Box::new(Local), comm.clone(), &base.join("local"));
        let (got, st) = train(Box::<Counting>::default(), comm, &base.join("counting"));
        let c: &Counting = st.strategy_as().expect("built as Counting");
        let counts = (c.backwards, c.updates);
        let not_local = st.strategy_as::<Local>().is_none();
        let _ = std::fs::remove_dir_all(&base);
        (max_diff(&got, &want), counts, not_local)
    });
    let (diff, (backwards, updates), not_local) = got.into_iter().next().unwrap();
    assert_eq!(diff, 0.0, "bit for bit as Local");
    assert_eq!((backwards, updates), (STEPS as usize, STEPS as usize));
    assert!(not_local, "it is not a Local");
}
