//! The reference step that `step::TrainStep` replaced (train's engine before the one-step
//! issue: gradients summed per micro-batch in f32 and averaged, the global norm on the host
//! in f64, `clip_grad_norm_`'s coefficient applied by a tensor op, AdamW after the
//! backward), 200 steps of the tiny LM with clipping active and a changing learning rate,
//! and the step on ranks to compare with it (step_reference.rs, step_tail.rs).

use super::{build, global_batch, max_diff, on_ranks, weights, Kind};
use candle_core::DType;
use ddp::{shard_batch, DdpOptions, Strategy};
use model::{AdamW, AdamWConfig, Batch, Grads, StagedModel};
use step::{AdamwPlace, StepOptions, TrainStep};
use zero1::Zero1Overlap;

/// Builds a rank's strategy.
pub type MakeStrategy =
    fn(&dyn StagedModel, std::sync::Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy>;

pub const STEPS: u64 = 200;
/// Below the tiny LM's gradient norm for most of the run: clipping is active.
pub const CLIP: f64 = 0.05;

pub fn lr(s: u64) -> f64 {
    1e-4 + 2e-3 * (0.5 + 0.5 * (s as f64 * 0.05).cos())
}

/// The micro-batches of step `s`: `accum` global batches, each of 8 rows.
pub fn micro(s: u64, accum: u64) -> Vec<Batch> {
    (0..accum)
        .map(|k| global_batch(Kind::Lm, s * accum + k))
        .collect()
}

/// The reference step on one process; returns the norm of each step.
pub fn reference_run(accum: u64) -> (Vec<Vec<f32>>, Vec<f64>, usize) {
    let m = build(Kind::Lm, 0);
    let mut opt = AdamW::new(AdamWConfig::default()).unwrap();
    let (mut norms, mut clipped) = (Vec::new(), 0);
    for s in 0..STEPS {
        let mut sum: Option<Grads> = None;
        let bs = micro(s, accum);
        for b in &bs {
            let (_, g) = model::forward_backward(m.as_ref(), b, |_, _| Ok(())).unwrap();
            let g: Grads = g
                .into_iter()
                .map(|g| g.map(|g| g.to_dtype(DType::F32).unwrap()))
                .collect();
            sum = Some(match sum {
                None => g,
                Some(a) => a
                    .into_iter()
                    .zip(g)
                    .map(|(a, b)| match (a, b) {
                        (Some(a), Some(b)) => Some((a + b).unwrap()),
                        (a, b) => a.or(b),
                    })
                    .collect(),
            });
        }
        let k = bs.len() as f64;
        let mut g: Grads = sum
            .unwrap()
            .into_iter()
            .map(|g| g.map(|g| g.affine(1.0 / k, 0.0).unwrap()))
            .collect();
        let mut n = 0f64;
        for t in g.iter().flatten() {
            n += t
                .sqr()
                .unwrap()
                .sum_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap() as f64;
        }
        let norm = n.sqrt();
        norms.push(norm);
        let coef = CLIP / (norm + 1e-6);
        if coef < 1.0 {
            clipped += 1;
            g = g
                .into_iter()
                .map(|g| g.map(|g| g.affine(coef, 0.0).unwrap()))
                .collect();
        }
        opt.cfg.lr = lr(s);
        opt.step(m.params().vars(), &g).unwrap();
    }
    (weights(m.as_ref()), norms, clipped)
}

/// The tests' buckets: 0.01 MiB, several for the tiny LM.
pub fn bucketed() -> DdpOptions {
    DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 })
}

/// ZeRO-1 (or 2, per `o`) gathering ahead, as `train` builds it.
pub fn zero_over(
    m: &dyn StagedModel,
    c: std::sync::Arc<dyn comm::Communicator>,
    o: DdpOptions,
) -> Box<dyn step::Strategy> {
    let mut z = Zero1Overlap::new(c, m, o, AdamWConfig::default()).unwrap();
    z.set_gather_ahead(true);
    Box::new(z)
}

pub fn opts() -> StepOptions {
    StepOptions {
        clip: CLIP,
        adamw: AdamwPlace::Auto,
        ..StepOptions::default()
    }
}

/// Every rank's weights and the norms rank 0 read, under `sync` built per rank.
pub fn with_step(world: usize, accum: u64, sync: MakeStrategy) -> Vec<(Vec<Vec<f32>>, Vec<f64>)> {
    on_ranks(world, move |rank, comm| {
        let m = build(Kind::Lm, 0);
        let s = sync(m.as_ref(), comm);
        let mut st = TrainStep::new(m.as_ref(), s, AdamWConfig::default(), opts()).unwrap();
        let mut norms = Vec::new();
        for s in 0..STEPS {
            let bs: Vec<Batch> = micro(s, accum)
                .iter()
                .map(|b| shard_batch(b, rank, world).unwrap())
                .collect();
            if let Some(o) = st.step(m.as_ref(), &bs, lr(s)).unwrap() {
                norms.push(
                    o.grad_norm
                        .expect("AdamW after the backward takes the norm"),
                );
            }
        }
        norms.push(st.flush().unwrap().unwrap().grad_norm.unwrap());
        (weights(m.as_ref()), norms)
    })
}

pub fn assert_close(
    what: &str,
    got: &[(Vec<Vec<f32>>, Vec<f64>)],
    want: &(Vec<Vec<f32>>, Vec<f64>, usize),
) {
    assert!(
        want.2 > STEPS as usize / 2,
        "clipping active in {} of {STEPS} steps only",
        want.2
    );
    let scale = want.0.iter().flatten().fold(0f32, |a, x| a.max(x.abs()));
    for (r, (w, norms)) in got.iter().enumerate() {
        let d = max_diff(w, &want.0) / scale;
        assert!(
            d <= 1e-5,
            "{what}, rank {r}: weights differ by {d:.2e} (relative) from the reference step"
        );
        assert_eq!(norms.len(), want.1.len());
        for (s, (a, b)) in norms.iter().zip(&want.1).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1e-6),
                "{what}, rank {r}, step {s}: norm {a} vs {b}"
            );
        }
    }
}
