//! Stray connections to rank 0's rendezvous store (a port probe that says nothing, a
//! client speaking another protocol) are dropped without delaying the real ranks.

use comm::store::rendezvous;
use comm::DistEnv;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn env(rank: usize, world: usize, port: u16) -> DistEnv {
    DistEnv {
        rank,
        world_size: world,
        local_rank: rank,
        master_addr: "127.0.0.1".into(),
        master_port: port,
    }
}

/// Connects to the store, retrying until rank 0 listens.
fn connect(port: u16) -> TcpStream {
    let t0 = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            return s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "store never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn idle_and_garbage_connections_do_not_delay_the_rendezvous() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let world = 3;
    // Far past the wait below: a rendezvous stuck behind a stray connection would wait it.
    let timeout = Duration::from_secs(600);
    let (tx, rx) = mpsc::channel();
    let tx0 = tx.clone();
    std::thread::spawn(move || {
        let _ = tx0.send((
            0,
            rendezvous(&env(0, world, port), timeout, || Ok(b"id".to_vec())),
        ));
    });
    // Before any rank: a silent probe, an HTTP request, and bytes with no newline at all.
    let idle = connect(port);
    let mut http = connect(port);
    http.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut noise = connect(port);
    noise.write_all(&[0xAB; 1000]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    for rank in 1..world {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((
                rank,
                rendezvous(&env(rank, world, port), timeout, || Ok(vec![])),
            ));
        });
    }
    for _ in 0..world {
        let (rank, got) = rx
            .recv_timeout(Duration::from_secs(300))
            .expect("rendezvous hung behind a stray connection");
        assert_eq!(got.unwrap(), b"id", "rank {rank}");
    }
    drop((idle, http, noise));
}
