//! `COMM_TIMEOUT_S`: out-of-range and malformed values are refused naming the variable,
//! and no timeout, however large, makes a deadline overflow.

use comm::store::rendezvous;
use comm::{cpu_group, CommOptions, Communicator, DistEnv, MAX_TIMEOUT};
use std::sync::mpsc;
use std::time::Duration;

fn opts(v: &str) -> comm::Result<CommOptions> {
    CommOptions::from_lookup(|k| (k == "COMM_TIMEOUT_S").then(|| v.to_string()))
}

#[test]
fn bad_timeouts_are_refused_naming_the_variable() {
    for v in [
        "inf", "-inf", "1e19", "1e30", "NaN", "-1", "0", "-0", "", "soon", "604801", "1e-9", "0.09",
    ] {
        let err = opts(v)
            .err()
            .unwrap_or_else(|| panic!("{v:?} accepted"))
            .to_string();
        assert!(
            err.contains("COMM_TIMEOUT_S") && err.contains(&format!("{v:?}")),
            "{v:?}: {err}"
        );
    }
    assert_eq!(opts("1.5").unwrap().timeout, Duration::from_millis(1500));
    assert_eq!(opts("604800").unwrap().timeout, MAX_TIMEOUT);
    assert_eq!(opts("0.1").unwrap().timeout, comm::MIN_TIMEOUT);
}

/// Runs `f` in a thread; fails instead of hanging.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(10))
        .expect("panicked or hung")
}

#[test]
fn the_largest_timeouts_do_not_overflow_deadlines() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for timeout in [Duration::MAX, MAX_TIMEOUT] {
        let ranks: Vec<_> = (0..2)
            .map(|rank| {
                let env = DistEnv {
                    rank,
                    world_size: 2,
                    local_rank: rank,
                    master_addr: "127.0.0.1".into(),
                    master_port: port,
                };
                std::thread::spawn(move || rendezvous(&env, timeout, || Ok(b"id".to_vec())))
            })
            .collect();
        let got = bounded(move || {
            ranks
                .into_iter()
                .map(|h| h.join().map(|r| r.map_err(|e| e.to_string())))
                .collect::<Vec<_>>()
        });
        for r in got {
            assert_eq!(r.expect("a rank panicked").unwrap(), b"id");
        }
        let o = CommOptions {
            timeout,
            ..CommOptions::default()
        };
        let ok = bounded(move || {
            let hs: Vec<_> = cpu_group(2, o)
                .unwrap()
                .into_iter()
                .map(|c| std::thread::spawn(move || c.barrier().is_ok()))
                .collect();
            hs.into_iter().all(|h| h.join().unwrap_or(false))
        });
        assert!(ok, "barrier with timeout {timeout:?}");
    }
}
