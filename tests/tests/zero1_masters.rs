//! ZeRO's sharded f32 masters (`zero1::masters`, train's default) on CPU
//! ranks, with any `StagedModel` that reads its weights through their bf16 copies: here an
//! eight-stage linear model with hand-written stages (the LM does so only on CUDA). Trained
//! by `Zero1Overlap` through `TrainStep` with clipping, it computes bit for bit what it
//! computes with whole masters; its checkpoint (the released masters gathered one at a
//! time) resumes, with whole masters, to the same bits as the straight run. It fails with
//! a detached master's copy written at the wrong place, or not gathered.

mod common;

use candle_core::{DType, Device, Tensor};
use common::on_ranks;
use ddp::{shard_batch, DdpOptions, Strategy};
use rand::{Rng, SeedableRng};
use seam::params::{rng, Init};
use seam::{AdamWConfig, Batch, ParamSet, SavedStage, StagedModel};
use step::{StepOptions, TrainStep};
use zero1::Zero1Overlap;

const WORLD: usize = 2;
const STEPS: u64 = 6;
/// Inputs and hidden width: W0..W6 have 256 × 256 = 65,536 elements each, enough for
/// ZeRO-1 to shard them in place (and so to detach their masters); W7 (16 × 256) goes
/// through a flat bucket. Seven released stages: FSDP's stage 3 takes stage 1's buffer, so
/// stage 1's backward (whose input gradient needs W1) needs its gather again; units of two
/// stages make four units, so a unit's buffer is taken back while it still has a backward.
const D: usize = 256;
const OUT: usize = 16;
const STAGES: usize = 8;

/// `loss = mean((x W0ᵀ W1ᵀ … W7ᵀ - t)²)`, each weight read as its bf16 copy (or the bf16
/// cast of its master where no copy is the value), computed in f32.
struct CopyMlp {
    params: ParamSet,
}

impl CopyMlp {
    fn new() -> Self {
        let (mut params, mut r, dev) = (ParamSet::new(), rng(3), Device::Cpu);
        let init = Init::Linear { fan_in: D };
        for s in 0..STAGES {
            let rows = if s + 1 == STAGES { OUT } else { D };
            params
                .add(format!("w{s}"), &[rows, D], init, &mut r, &dev)
                .unwrap();
        }
        params.enable_bf16_shadows(true);
        params.set_bf16_copy_only(vec![true; STAGES]);
        Self { params }
    }

    /// Weight `i` as the forward reads it: its copy where released (with FSDP a view of a
    /// stage buffer, kept as it is for the backward, as the LM's blocks keep theirs), else
    /// its master's bf16 cast (the copy's bits).
    fn w(&self, i: usize) -> seam::Result<Tensor> {
        let t = match self.params.is_released(i) {
            true => self
                .params
                .bf16_shadows()
                .copy(i)
                .expect("a released master's copy"),
            false => self.params.var(i).as_tensor().to_dtype(DType::BF16)?,
        };
        Ok(t)
    }
}

/// A stage: `y = x Wᵀ` (W bf16, the arithmetic in f32); the last, the loss of `y` against
/// the targets.
struct Saved {
    stage: usize,
    x: Tensor,
    w: Tensor,
    t: Option<Tensor>,
}

impl SavedStage for Saved {
    fn backward(
        self: Box<Self>,
        up: Option<&Tensor>,
    ) -> seam::Result<(Tensor, Vec<(usize, Tensor)>)> {
        let dy = match (&self.t, up) {
            (Some(t), _) => {
                let y = self.x.matmul(&self.w.to_dtype(DType::F32)?.t()?)?;
                ((y - t)? * (2.0 / t.elem_count() as f64))?
            }
            (None, Some(up)) => up.clone(),
            (None, None) => unreachable!("stage 0 has a downstream stage"),
        };
        let dw = dy.t()?.matmul(&self.x)?;
        Ok((
            dy.matmul(&self.w.to_dtype(DType::F32)?)?,
            vec![(self.stage, dw)],
        ))
    }
}

impl StagedModel for CopyMlp {
    fn params(&self) -> &ParamSet {
        &self.params
    }
    fn num_stages(&self) -> usize {
        STAGES
    }
    fn stage_params(&self, s: usize) -> Vec<usize> {
        vec![s]
    }
    fn forward_stage(&self, s: usize, x: Option<&Tensor>, b: &Batch) -> seam::Result<Tensor> {
        Ok(self.forward_saved(s, x, b)?.expect("hand-written").0)
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
        let (x, w) = (x.unwrap_or(&b.input).clone(), self.w(s)?);
        let y = x.matmul(&w.to_dtype(DType::F32)?.t()?)?;
        let (out, t) = match s + 1 == STAGES {
            false => (y, None),
            true => (
                ((&y - &b.targets)?.sqr()?.mean_all()?),
                Some(b.targets.clone()),
            ),
        };
        Ok(Some((out, Box::new(Saved { stage: s, x, w, t }))))
    }
}

/// The same rows every step (so that the loss falls), 8 of them.
fn global_batch(_step: u64) -> Batch {
    let mut r = rand::rngs::StdRng::seed_from_u64(500);
    let mut v = |n: usize| -> Vec<f32> { (0..n).map(|_| r.random_range(-1.0..1.0)).collect() };
    let (x, t) = (v(8 * D), v(8 * OUT));
    Batch::new(
        Tensor::from_vec(x, (8, D), &Device::Cpu).unwrap(),
        Tensor::from_vec(t, (8, OUT), &Device::Cpu).unwrap(),
    )
}

/// FSDP's gathers: the last stages kept from the forward (`usize::MAX`: all), units
/// gathered ahead, stages a unit (0: zero1's default, memplan::fsdp_unit: here, with
/// stages of a few hundred bytes, every stage in one unit).
type Gathers = Option<(usize, usize, usize)>;

/// The default FSDP: nothing kept, one unit ahead, zero1's default unit.
const FSDP: Gathers = Some((0, 1, 0));

/// ZeRO-1 (`fsdp`: ZeRO-3 with those gathers, the gradients released as ZeRO-2's and,
/// once the masters are released, the copies sharded: zero1::fsdp).
fn step_for(comm: std::sync::Arc<dyn comm::Communicator>, m: &CopyMlp, fsdp: Gathers) -> TrainStep {
    let opts = DdpOptions {
        release_gradients: fsdp.is_some(),
        ..DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 })
    };
    let mut z = Zero1Overlap::new(comm, m, opts, AdamWConfig::default()).unwrap();
    z.set_gather_ahead(true);
    z.set_fsdp(fsdp.is_some());
    if let Some((keep_last, depth, unit)) = fsdp {
        z.set_fsdp_gathers(keep_last, depth).unwrap();
        if unit > 0 {
            z.set_fsdp_unit(unit).unwrap();
        }
    }
    let o = StepOptions {
        clip: 1.0,
        ..StepOptions::default()
    };
    TrainStep::new(m, Box::new(z), AdamWConfig::default(), o).unwrap()
}

/// Steps `from..to` on this rank's rows; the losses and a validation loss, then each
/// weight as the forward reads it (FSDP's: stale outside a forward, not compared).
fn run(
    st: &mut TrainStep,
    m: &CopyMlp,
    (rank, micro): (usize, usize),
    (from, to): (u64, u64),
) -> (Vec<f64>, Vec<Vec<f32>>) {
    let mut losses = Vec::new();
    for s in from..to {
        let b = shard_batch(&global_batch(s), rank, WORLD).unwrap();
        let bs: Vec<Batch> = (0..micro)
            .map(|j| shard_batch(&b, j, micro).unwrap())
            .collect();
        losses.extend(st.step(m, &bs, 0.002).unwrap().map(|o| o.loss));
    }
    losses.extend(st.flush().unwrap().map(|o| o.loss));
    let val = shard_batch(&global_batch(99), rank, WORLD).unwrap();
    losses.push(st.eval_loss(m, &[val]).unwrap());
    let w = (0..STAGES)
        .map(|i| {
            m.w(i)
                .and_then(|w| Ok(w.to_dtype(DType::F32)?))
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        })
        .collect();
    (losses, w)
}

/// One rank's run: its losses and validations, its weights, the masters it released.
type Run = (Vec<f64>, Vec<Vec<f32>>, usize);

/// The checkpoint `ck` (after step 3), resumed with whole masters: steps 3.. with the bits
/// of the straight run `whole`.
fn resumes_as_straight(ck: std::path::PathBuf, whole: &[Run]) {
    let resumed = on_ranks(WORLD, move |rank, comm| {
        let m = CopyMlp::new();
        let mut st = step_for(comm.clone(), &m, None);
        assert_eq!(st.resume(&m, &ck, &comm).unwrap(), 3);
        run(&mut st, &m, (rank, 1), (3, STEPS))
    });
    for (r, (losses, w)) in resumed.iter().enumerate() {
        assert_eq!(
            losses[..],
            whole[r].0[4..],
            "rank {r}'s losses after the resume"
        );
        assert_eq!(*w, whole[r].1, "rank {r}'s weights after the resume");
    }
}

/// Trains STEPS steps; `sharded`: masters released after the build (`fsdp`: the copies
/// sharded too); `micro`: micro-batches a step (this rank's rows split); `save`: a
/// checkpoint after step 3.
fn train(
    (sharded, fsdp, micro): (bool, Gathers, usize),
    save: Option<std::path::PathBuf>,
) -> Vec<Run> {
    on_ranks(WORLD, move |rank, comm| {
        let mut m = CopyMlp::new();
        let mut st = step_for(comm.clone(), &m, fsdp);
        let released = match sharded {
            true => st.release_masters(&mut m.params).unwrap(),
            false => 0,
        };
        if let Some((_, _, unit)) = fsdp.filter(|_| sharded) {
            // Unset, stages of a few hundred bytes: the default's most, 8 (all of them).
            let want = if unit == 0 { 8 } else { unit };
            let z = st.strategy_as::<Zero1Overlap>().unwrap();
            assert_eq!(z.fsdp_unit_used(), Some(want), "the stages a unit");
            if unit == 0 {
                // No whole copy of its own: every copy is a view into the one unit buffer.
                let mine = (0..m.params.len()).filter(|&i| m.params.is_released(i));
                let copies = mine.map(|i| m.params.bf16_shadows().copy(i).expect("a copy"));
                let mut at: Vec<usize> = copies.map(|c| storage_address(&c)).collect();
                at.dedup();
                assert!(released > 1 && at.len() == 1, "{released} copies in {at:?}");
            }
        }
        let (mut losses, _) = run(&mut st, &m, (rank, micro), (0, 3));
        if let Some(dir) = &save {
            st.save(&m, dir, &comm).unwrap();
        }
        let (more, w) = run(&mut st, &m, (rank, 1), (3, STEPS));
        losses.extend(more);
        (losses, w, released)
    })
}

/// Where a CPU tensor's storage starts (bf16).
fn storage_address(t: &Tensor) -> usize {
    let (st, _) = t.storage_and_layout();
    match &*st {
        candle_core::Storage::Cpu(candle_core::CpuStorage::BF16(v)) => v.as_ptr() as usize,
        _ => panic!("a bf16 CPU tensor expected"),
    }
}

#[test]
fn sharded_masters_train_and_resume_bit_for_bit_as_whole_masters() {
    let whole = train((false, None, 1), None);
    let dir = std::env::temp_dir().join(format!("zero1-masters-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ck = dir.join("step-3");
    let sharded = train((true, None, 1), Some(ck.clone()));
    assert_eq!(
        (whole[0].2, sharded[0].2),
        (0, STAGES - 1),
        "W0..W6's masters released, W7's kept"
    );
    assert_eq!(
        sharded[0].0.len() as u64,
        STEPS + 2,
        "the steps, two validations"
    );
    for r in 0..WORLD {
        assert_eq!(whole[r].0, sharded[r].0, "rank {r}'s losses");
        assert_eq!(whole[r].1, sharded[r].1, "rank {r}'s weights");
    }
    assert!(
        whole[0].0[STEPS as usize] < whole[0].0[0],
        "it trains: {:?}",
        whole[0].0
    );
    // The sharded run's checkpoint, resumed with whole masters: steps 3.. as straight.
    resumes_as_straight(ck, &whole);
    let _ = std::fs::remove_dir_all(&dir);
}

/// FSDP (the copies sharded too, gathered in its default units, gradients released): the same
/// losses and validation losses as whole masters, bit for bit; its checkpoint resumes, with
/// whole masters, to the straight run's bits. Fails with a stage's gather left out.
#[test]
fn fsdp_trains_and_resumes_bit_for_bit_as_whole_masters() {
    let whole = train((false, None, 1), None);
    let dir = std::env::temp_dir().join(format!("zero1-fsdp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ck = dir.join("step-3");
    let fsdp = train((true, FSDP, 1), Some(ck.clone()));
    assert_eq!(
        fsdp[0].2,
        STAGES - 1,
        "W0..W6's masters released, their copies sharded"
    );
    for r in 0..WORLD {
        assert_eq!(whole[r].0, fsdp[r].0, "rank {r}'s losses and validations");
    }
    resumes_as_straight(ck, &whole);
    let _ = std::fs::remove_dir_all(&dir);
}

/// FSDP accumulating 2 micro-batches a step (each one's units gathered, the sums reduced
/// once): the losses and validation losses of whole masters accumulating, bit for bit.
#[test]
fn fsdp_accumulates_bit_for_bit_as_whole_masters() {
    let whole = train((false, None, 2), None);
    let fsdp = train((true, FSDP, 2), None);
    assert_eq!(fsdp[0].2, STAGES - 1);
    for r in 0..WORLD {
        assert_eq!(whole[r].0, fsdp[r].0, "rank {r}'s losses and validations");
    }
    assert_ne!(
        whole[0].0,
        train((false, None, 1), None)[0].0,
        "2 micro-batches differ"
    );
}

/// FSDP gathering two and three stages ahead, keeping the last stages' forward gathers for
/// the backward, keeping every one (`reshard_after_forward=False`), and gathering two or
/// three stages as a unit (with those) or all eight (the default unit of stages this
/// small), with and without accumulation: bit for bit as
/// whole masters. Fails where the backward finds a buffer holding another stage.
#[test]
fn fsdp_prefetched_or_kept_is_bit_for_bit_as_whole_masters() {
    for micro in [1, 2] {
        let whole = train((false, None, micro), None);
        let ahead = [(0, 2, 1), (0, 3, 1)];
        let kept = [(1, 1, 1), (2, 1, 1), (3, 1, 1), (2, 2, 1), (4, 1, 1)];
        let all = [(usize::MAX, 1, 1), (usize::MAX, 2, 1)];
        let units = [
            (0, 1, 2),
            (0, 2, 2),
            (0, 1, 3),
            (1, 1, 2),
            (3, 1, 2),
            (usize::MAX, 1, 2),
            (2, 1, 0),
        ];
        for gathers in ahead.into_iter().chain(kept).chain(all).chain(units) {
            let fsdp = train((true, Some(gathers), micro), None);
            for r in 0..WORLD {
                assert_eq!(
                    whole[r].0, fsdp[r].0,
                    "{gathers:?}, {micro} micro-batches, rank {r}"
                );
            }
        }
    }
}
