//! The multi-process CPU backend (`ProcComm`) with threads standing in for processes (each
//! has its own ring sockets and store connection, as a process would): the conformance
//! suite on 1-4 ranks, identical bits on every rank, mismatched calls named on every rank.
//! Real processes (launcher, SIGKILL, rendezvous) are tested in `tests/proc_faults.rs`.

use candle_core::{DType, Device, Tensor};
use comm::{conformance, CommOptions, Communicator, DistEnv, ProcComm, ReduceOp};
use std::sync::mpsc;
use std::time::Duration;

/// The tests run one at a time: a port picked by binding port 0 and closing it can be
/// handed to a test running beside it (seen in CI with the store tests).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn free_port() -> u16 {
    comm::launch::free_port().unwrap()
}

/// Runs `f` on `world` ranks, each in its own thread with its own `ProcComm`; fails
/// instead of hanging.
fn on_ranks<T: Send + 'static>(
    world: usize,
    timeout_s: u64,
    f: impl Fn(ProcComm) -> T + Send + Sync + Copy + 'static,
) -> Vec<T> {
    let port = free_port();
    let (tx, rx) = mpsc::channel();
    for rank in 0..world {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let env = DistEnv {
                rank,
                world_size: world,
                local_rank: rank,
                master_addr: "127.0.0.1".into(),
                master_port: port,
            };
            let opts = CommOptions {
                timeout: Duration::from_secs(timeout_s),
                ..CommOptions::default()
            };
            let c = ProcComm::new(&env, opts).unwrap();
            let _ = tx.send((rank, f(c)));
        });
    }
    drop(tx);
    let mut out: Vec<Option<T>> = (0..world).map(|_| None).collect();
    for _ in 0..world {
        let (r, v) = rx
            .recv_timeout(Duration::from_secs(50))
            .expect("a rank panicked or hung");
        out[r] = Some(v);
    }
    out.into_iter().map(Option::unwrap).collect()
}

#[test]
fn conformance_on_one_to_four_ranks() {
    let _one = one_at_a_time();
    for world in 1..=4 {
        let checks = on_ranks(world, 30, |c| {
            conformance::run_all(&c, &Device::Cpu).unwrap()
        });
        assert!(
            checks.iter().all(|&n| n == checks[0] && n > 10),
            "{checks:?}"
        );
    }
}

#[test]
fn every_rank_ends_with_identical_bits() {
    let _one = one_at_a_time();
    for world in [2, 3, 4] {
        let outs = on_ranks(world, 30, |c| {
            let r = c.rank() as f32;
            // 1.5 M elements: several segments per chunk; values whose sum depends on order.
            let x = Tensor::arange(0f32, 1_500_001f32, &Device::Cpu)
                .unwrap()
                .affine(0.1 + r as f64 * 0.37, 1.0 / (1.0 + r as f64))
                .unwrap();
            c.all_reduce(&x, ReduceOp::Avg).unwrap();
            let h = x.to_dtype(DType::BF16).unwrap();
            c.all_reduce(&h, ReduceOp::Sum).unwrap();
            (
                x.to_vec1::<f32>().unwrap(),
                h.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap(),
            )
        });
        for o in &outs[1..] {
            assert!(o
                .0
                .iter()
                .zip(&outs[0].0)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            assert!(o
                .1
                .iter()
                .zip(&outs[0].1)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        let want = 1_500_000.0 * (0.1 * world as f64 + 0.37 * (world * (world - 1) / 2) as f64)
            / world as f64;
        let got = outs[0].0[1_500_000] as f64;
        assert!(
            (got - want).abs() < 1e-3 * want,
            "world {world}: {got} vs {want}"
        );
    }
}

#[test]
fn mismatched_sizes_fail_on_every_rank_naming_them() {
    let _one = one_at_a_time();
    for world in [2, 3] {
        let errs = on_ranks(world, 10, |c| {
            conformance::mismatch_is_detected(&c, &Device::Cpu)
        });
        for e in errs {
            e.unwrap();
        }
    }
}
