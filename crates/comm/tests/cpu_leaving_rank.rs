//! The CPU backend when a rank leaves: a dropped handle or a panicked rank thread breaks
//! the group at once (not after the 300 s default timeout), and the others' error names
//! the rank and the collective. A rank that leaves after its last collective breaks nothing.

use candle_core::{Device, Tensor};
use comm::{cpu_group, CommOptions, Communicator, CpuComm, ReduceOp};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs `f` on every rank, each handle moved into its own thread; the results of the
/// ranks that return, within `limit` (the test fails instead of hanging).
fn on_ranks<T: Send + 'static>(
    world: usize,
    limit: Duration,
    f: impl Fn(CpuComm) -> T + Send + Sync + Copy + 'static,
) -> Vec<Option<T>> {
    let (tx, rx) = mpsc::channel();
    for c in cpu_group(world, CommOptions::default()).unwrap() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let r = c.rank();
            // A panicking rank sends nothing.
            let out = f(c);
            let _ = tx.send((r, out));
        });
    }
    drop(tx);
    let mut res: Vec<Option<T>> = (0..world).map(|_| None).collect();
    let t0 = Instant::now();
    while let Ok((r, v)) = rx.recv_timeout(limit.saturating_sub(t0.elapsed())) {
        res[r] = Some(v);
    }
    res
}

fn all_reduce(c: &CpuComm) -> Result<(), String> {
    let x = Tensor::new(&[1.0f32, 2.0], &Device::Cpu).unwrap();
    c.all_reduce(&x, ReduceOp::Sum).map_err(|e| e.to_string())
}

fn check_others_fail_fast(world: usize, leaver: usize, panics: bool) {
    let t0 = Instant::now();
    // A timeout far past the bound below: passing shows the others failed on the leaving
    // rank (an event), not on the timeout, however loaded the machine.
    let out = on_ranks(world, Duration::from_secs(600), move |c| {
        if c.rank() == leaver {
            if panics {
                panic!("rank {leaver} fails on purpose (test)");
            }
            drop(c);
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
        all_reduce(&c)
    });
    let took = t0.elapsed();
    let how = if panics {
        "panicked"
    } else {
        "handle was dropped"
    };
    for (r, res) in out.iter().enumerate().filter(|(r, _)| *r != leaver) {
        let err = res
            .as_ref()
            .unwrap_or_else(|| panic!("world {world}: rank {r} hung"))
            .as_ref()
            .unwrap_err();
        assert!(
            err.contains(&format!("rank {leaver} left the group"))
                && err.contains(how)
                && err.contains("all_reduce"),
            "world {world}, rank {r}: {err}"
        );
    }
    assert!(
        took < Duration::from_secs(300),
        "world {world}: took {took:?}, as long as the timeout"
    );
}

#[test]
fn a_dropped_handle_fails_the_others_at_once_naming_it() {
    check_others_fail_fast(2, 1, false);
    check_others_fail_fast(4, 2, false);
}

#[test]
fn a_panicked_rank_fails_the_others_at_once_naming_it() {
    check_others_fail_fast(2, 0, true);
    check_others_fail_fast(4, 3, true);
}

#[test]
fn leaving_after_the_last_collective_breaks_nothing() {
    for world in [2, 4] {
        for _ in 0..50 {
            let out = on_ranks(world, Duration::from_secs(10), |c| {
                all_reduce(&c)?;
                c.barrier().map_err(|e| e.to_string())?;
                all_reduce(&c)
                // `c` is dropped here, possibly while the others still finish.
            });
            for (r, res) in out.iter().enumerate() {
                let res = res.as_ref().unwrap_or_else(|| panic!("rank {r} hung"));
                assert!(res.is_ok(), "world {world}, rank {r}: {res:?}");
            }
        }
    }
}
