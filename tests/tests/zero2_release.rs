//! ZeRO-2 (`DdpOptions::release_gradients`) where a gradient is reduce-scattered alone
//! (Kind::Wide on 2 ranks: its 70,010-element first layer): each rank's chunk is received
//! into a buffer of its own, so that the full gradient is freed once its launch is
//! collected, and training equals single-process AdamW.

mod common;
use candle_core::Tensor;
use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::AdamWConfig;
use step::{StepOptions, TrainStep};
use zero1::Zero1Overlap;

const STEPS: u64 = 5;

fn released(release: bool) -> DdpOptions {
    DdpOptions {
        release_gradients: release,
        ..DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 })
    }
}

/// How many f32 elements the CPU storage under `t` holds.
fn storage_len(t: &Tensor) -> usize {
    let (s, _) = t.storage_and_layout();
    match &*s {
        candle_core::Storage::Cpu(c) => c.as_slice::<f32>().unwrap().len(),
        _ => panic!("a CPU tensor"),
    }
}

#[test]
fn zero2_with_in_place_shards_equals_single_process_adamw() {
    let want = reference(Kind::Wide, STEPS, 1);
    let got = on_ranks(2, move |rank, comm| {
        let m = build(Kind::Wide, rank as u64 * 13);
        let cfg = AdamWConfig::default();
        let z = Zero1Overlap::new(comm, m.as_ref(), released(true), cfg).unwrap();
        assert!(
            (0..m.params().len()).any(|i| z.ddp().shards_in_place(i)),
            "a gradient reduce-scattered alone"
        );
        let mut st = TrainStep::new(m.as_ref(), Box::new(z), cfg, StepOptions::default()).unwrap();
        for s in 0..STEPS {
            let b = shard_batch(&global_batch(Kind::Wide, s), rank, 2).unwrap();
            st.step(m.as_ref(), &[b], cfg.lr).unwrap();
        }
        st.flush().unwrap();
        weights(m.as_ref())
    });
    for (r, w) in got.iter().enumerate() {
        let d = max_diff(w, &want);
        assert!(d <= 1e-5, "rank {r}: {d:e} from single-process AdamW");
    }
}

#[test]
fn a_released_gradients_chunk_holds_its_own_elements_only() {
    let chunks = |release: bool| {
        on_ranks(2, move |rank, comm| {
            let m = build(Kind::Wide, 0);
            let opts = DdpOptions {
                reduce_scatter: true,
                ..released(release)
            };
            let mut ddp = Ddp::new(comm, m.as_ref(), opts).unwrap();
            let b = shard_batch(&global_batch(Kind::Wide, 0), rank, 2).unwrap();
            ddp.forward_backward(m.as_ref(), &b).unwrap();
            let shards = ddp.finish_reduce_scatter().unwrap();
            let alone: Vec<(usize, Tensor)> = shards.into_iter().flat_map(|s| s.params).collect();
            assert!(!alone.is_empty(), "a gradient reduce-scattered alone");
            (alone.iter())
                .map(|(i, c)| {
                    (
                        *i,
                        c.elem_count(),
                        storage_len(c),
                        c.to_vec1::<f32>().unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        })
    };
    let (kept, freed) = (chunks(false), chunks(true));
    for (r, (kept, freed)) in kept.iter().zip(&freed).enumerate() {
        for ((i, n, held, x), (j, m, own, y)) in kept.iter().zip(freed) {
            assert_eq!((i, n), (j, m), "rank {r}: the same chunks");
            assert_eq!(x, y, "rank {r}, parameter {i}: the same reduced values");
            assert_eq!(*held, 2 * n, "ZeRO-1's chunk {i} is a view of its gradient");
            assert_eq!(
                *own, *n,
                "rank {r}: released chunk {i} holds its gradient whole"
            );
        }
    }
}
