//! Activation checkpointing (`StagedModel::checkpointed`): a checkpointed stage keeps
//! nothing of its forward but its input, runs its forward again right before its
//! backward, and gives the same gradients, bit for bit.

use candle_core::{Device, Tensor, Var};
use seam::staged::{Batch, SavedStage, StagedModel};
use seam::{ModelError, ParamSet};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// Stages s < last: x ⊙ w_s; the last: Σ x ⊙ w_last. Hand-written, counting the saved
/// states alive (and their peak) and the forwards run.
struct Chain {
    params: ParamSet,
    checkpoint: bool,
    live: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    forwards: Arc<AtomicUsize>,
}

struct Saved {
    x: Tensor,
    w: Tensor,
    i: usize,
    last: bool,
    live: Arc<AtomicUsize>,
}

impl Drop for Saved {
    fn drop(&mut self) {
        self.live.fetch_sub(1, SeqCst);
    }
}

impl SavedStage for Saved {
    fn backward(
        self: Box<Self>,
        upstream: Option<&Tensor>,
    ) -> seam::Result<(Tensor, Vec<(usize, Tensor)>)> {
        Ok(match (self.last, upstream) {
            (true, _) => (self.w.clone(), vec![(self.i, self.x.clone())]),
            (false, Some(u)) => ((u * &self.w)?, vec![(self.i, (u * &self.x)?)]),
            (false, None) => return Err(ModelError::Input("no upstream".into())),
        })
    }
}

impl StagedModel for Chain {
    fn params(&self) -> &ParamSet {
        &self.params
    }
    fn num_stages(&self) -> usize {
        self.params.len()
    }
    fn stage_params(&self, s: usize) -> Vec<usize> {
        vec![s]
    }
    fn forward_stage(&self, _s: usize, _x: Option<&Tensor>, _b: &Batch) -> seam::Result<Tensor> {
        Err(ModelError::Input("hand-written only".into()))
    }
    fn check_batch(&self, _b: &Batch) -> seam::Result<()> {
        Ok(())
    }
    fn forward_saved(
        &self,
        s: usize,
        x: Option<&Tensor>,
        b: &Batch,
    ) -> seam::Result<Option<(Tensor, Box<dyn SavedStage>)>> {
        let x = x.unwrap_or(&b.input).clone();
        let w = self.params.var(s).as_tensor().clone();
        let last = s + 1 == self.num_stages();
        let out = match last {
            true => (&x * &w)?.sum_all()?,
            false => (&x * &w)?,
        };
        self.forwards.fetch_add(1, SeqCst);
        let now = self.live.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(now, SeqCst);
        let live = self.live.clone();
        Ok(Some((
            out,
            Box::new(Saved {
                x,
                w,
                i: s,
                last,
                live,
            }),
        )))
    }
    fn checkpointed(&self, s: usize) -> bool {
        self.checkpoint && s + 1 < self.num_stages()
    }
}

fn chain(stages: usize, checkpoint: bool) -> Chain {
    let mut params = ParamSet::new();
    for s in 0..stages {
        let w: Vec<f32> = (0..5).map(|k| 0.9 + 0.01 * (s * 5 + k) as f32).collect();
        let v = Var::from_tensor(&Tensor::new(w, &Device::Cpu).unwrap()).unwrap();
        params.push_var(format!("w{s}"), v).unwrap();
    }
    let counter = || Arc::new(AtomicUsize::new(0));
    Chain {
        params,
        checkpoint,
        live: counter(),
        peak: counter(),
        forwards: counter(),
    }
}

#[test]
fn a_checkpointed_stage_keeps_only_its_input_and_runs_again() {
    let n = 6;
    let x = Tensor::new(&[1.5f32, -2.0, 0.25, 3.0, -0.5], &Device::Cpu).unwrap();
    let batch = Batch::new(x.clone(), x);
    let mut got = Vec::new();
    for checkpoint in [false, true] {
        let m = chain(n, checkpoint);
        let tape = seam::forward(&m, &batch).unwrap();
        // Without: every stage's state; with: the last stage's alone.
        assert_eq!(m.live.load(SeqCst), if checkpoint { 1 } else { n });
        m.peak.store(m.live.load(SeqCst), SeqCst);
        let grads = tape.backward(|_, _| Ok::<(), ModelError>(())).unwrap();
        assert_eq!(m.live.load(SeqCst), 0);
        // Backward: with checkpointing, at most the stage being run back and the last's.
        assert!(m.peak.load(SeqCst) <= if checkpoint { 2 } else { n });
        // Each checkpointed stage's forward ran twice.
        let again = if checkpoint { n - 1 } else { 0 };
        assert_eq!(m.forwards.load(SeqCst), n + again);
        let bits: Vec<Vec<u32>> = (grads.iter())
            .map(|g| {
                let v = g.as_ref().unwrap().to_vec1::<f32>().unwrap();
                v.into_iter().map(f32::to_bits).collect()
            })
            .collect();
        got.push(bits);
    }
    assert_eq!(got[0], got[1], "the same gradients, bit for bit");
}

/// A `Sequential` of candle-nn modules under autograd: checkpointed stages give the
/// same loss and gradients, bit for bit.
#[test]
fn a_sequentials_checkpointed_stages_give_the_same_gradients() {
    use candle_core::{DType, Module};
    use candle_nn::{linear, loss::cross_entropy, VarBuilder, VarMap};
    let (varmap, dev) = (VarMap::new(), Device::Cpu);
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
    let l1 = linear(6, 16, vb.pp("l1")).unwrap();
    let l2 = linear(16, 16, vb.pp("l2")).unwrap();
    let l3 = linear(16, 4, vb.pp("l3")).unwrap();
    // One set of weights for both models.
    let grads = |checkpoint: bool| {
        let (l1, l2, l3) = (l1.clone(), l2.clone(), l3.clone());
        let f1 = move |x: &Tensor| l1.forward(x)?.gelu();
        let f2 = move |x: &Tensor| l2.forward(x)?.gelu();
        let b = seam::Sequential::builder(ParamSet::from_varmap(&varmap).unwrap());
        let b = match checkpoint {
            true => b.checkpointed_stage("l1", f1).checkpointed_stage("l2", f2),
            false => b.stage("l1", f1).stage("l2", f2),
        };
        let m = b
            .stage("l3", l3)
            .loss(|y, b| cross_entropy(y, &b.targets))
            .unwrap();
        assert_eq!(
            (0..3).filter(|&s| m.checkpointed(s)).count(),
            if checkpoint { 2 } else { 0 }
        );
        let x: Vec<f32> = (0..8 * 6)
            .map(|i| ((i * 37 % 23) as f32) / 11.0 - 1.0)
            .collect();
        let batch = Batch::new(
            Tensor::from_vec(x, (8, 6), &dev).unwrap(),
            Tensor::from_vec((0..8u32).map(|i| i % 4).collect::<Vec<_>>(), 8, &dev).unwrap(),
        );
        let (loss, g) = seam::forward_backward(&m, &batch, |_, _| Ok(())).unwrap();
        let mut bits = vec![loss.to_scalar::<f32>().unwrap().to_bits()];
        for t in g.iter().map(|t| t.as_ref().unwrap()) {
            let v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            bits.extend(v.into_iter().map(f32::to_bits));
        }
        bits
    };
    assert_eq!(grads(false), grads(true));
}
