//! The rendezvous store with threads as ranks: every rank gets rank 0's payload; a rank
//! that never arrives, an absent rank 0 and a world-size mismatch fail naming the cause.

use comm::store::rendezvous;
use comm::DistEnv;
use std::net::TcpListener;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The tests run one at a time: a port picked by binding port 0 and closing it can be
/// handed to a test running beside it (seen in CI: two tests on one port).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A free port, and the lock that keeps the other tests off it until the test ends.
fn free_port() -> (u16, MutexGuard<'static, ()>) {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    (port, guard)
}

fn env(rank: usize, world: usize, port: u16) -> DistEnv {
    DistEnv {
        rank,
        world_size: world,
        local_rank: rank,
        master_addr: "127.0.0.1".into(),
        master_port: port,
    }
}

#[test]
fn all_ranks_get_rank0_payload() {
    let (port, _one) = free_port();
    let handles: Vec<_> = (0..4)
        .map(|r| {
            std::thread::spawn(move || {
                rendezvous(&env(r, 4, port), Duration::from_secs(10), || {
                    Ok(b"the-id".to_vec())
                })
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), b"the-id");
    }
}

#[test]
fn missing_rank_fails_every_rank_naming_it() {
    let (port, _one) = free_port();
    // world 3, rank 2 never comes.
    let handles: Vec<_> = (0..2)
        .map(|r| {
            std::thread::spawn(move || {
                rendezvous(&env(r, 3, port), Duration::from_millis(800), || Ok(vec![1]))
            })
        })
        .collect();
    for h in handles {
        let err = h.join().unwrap().unwrap_err().to_string();
        assert!(
            err.contains("[2]"),
            "error should name missing rank 2: {err}"
        );
    }
}

#[test]
fn absent_rank0_times_out_on_workers() {
    let (port, _one) = free_port();
    let t0 = Instant::now();
    let err = rendezvous(&env(1, 2, port), Duration::from_millis(500), || Ok(vec![]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing ranks [0]"), "{err}");
    // Bounded, not timed: only a hang past the 500 ms timeout trips this.
    assert!(t0.elapsed() < Duration::from_secs(120));
}

#[test]
fn world_size_mismatch_is_reported() {
    let (port, _one) = free_port();
    let r0 = std::thread::spawn(move || {
        rendezvous(&env(0, 2, port), Duration::from_secs(5), || Ok(vec![]))
    });
    std::thread::sleep(Duration::from_millis(100));
    let e1 = rendezvous(&env(1, 3, port), Duration::from_secs(5), || Ok(vec![])).unwrap_err();
    let e0 = r0.join().unwrap().unwrap_err();
    assert!(e0.to_string().contains("WORLD_SIZE=3"), "{e0}");
    assert!(e1.to_string().contains("WORLD_SIZE=3"), "{e1}");
}
