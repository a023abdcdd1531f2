//! Rendezvous over a small TCP store at `MASTER_ADDR:MASTER_PORT`.
//!
//! Rank 0 listens; every other rank connects (retrying until the deadline) and says
//! `HELLO <rank> <world>`. When all ranks have arrived, rank 0 sends each one the
//! payload (the NCCL unique id). If some rank never arrives, rank 0 tells the ranks that
//! did arrive which ones are missing, and every rank fails with that list: no silent hang.
//! Rank 0 reads all connections at once without blocking; one that says nothing, or
//! garbage, within a few seconds is dropped, so a port probe delays nobody.

use crate::env::DistEnv;
use crate::error::{CommError, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Runs the rendezvous for this rank and returns rank 0's payload on every rank.
/// `make_payload` runs on rank 0 only, after the listener is up.
pub fn rendezvous(
    env: &DistEnv,
    timeout: Duration,
    make_payload: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Vec<u8>> {
    if env.world_size == 1 {
        return make_payload();
    }
    if env.rank == 0 {
        serve(env, timeout, make_payload)
    } else {
        join(env, timeout)
    }
}

fn addr_of(env: &DistEnv) -> String {
    format!("{}:{}", env.master_addr, env.master_port)
}

fn store_err(env: &DistEnv, msg: impl Into<String>) -> CommError {
    CommError::Store {
        addr: addr_of(env),
        msg: msg.into(),
    }
}

/// How long a connection may take to say HELLO before it is dropped.
const HELLO_WAIT: Duration = Duration::from_secs(5);
/// A HELLO line is short; a longer line without a newline is garbage.
const MAX_HELLO: usize = 256;

/// An accepted connection that has not said HELLO yet. Connections are read without
/// blocking, all at once, so an idle or garbage one (a port probe) delays no rank.
struct Pending {
    stream: TcpStream,
    from: SocketAddr,
    buf: Vec<u8>,
    since: Instant,
}

impl Pending {
    /// `None` while the HELLO line is still incomplete.
    fn poll(&mut self) -> Option<std::io::Result<(usize, usize)>> {
        let mut chunk = [0u8; MAX_HELLO];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Some(Err(io_bad("closed before saying HELLO".into()))),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = self.buf.iter().position(|&c| c == b'\n') {
                        return Some(parse_hello(&String::from_utf8_lossy(&self.buf[..end])));
                    }
                    if self.buf.len() > MAX_HELLO {
                        return Some(Err(io_bad(format!(
                            "{MAX_HELLO} bytes without a HELLO line"
                        ))));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return (self.since.elapsed() > HELLO_WAIT)
                        .then(|| Err(io_bad(format!("no HELLO within {HELLO_WAIT:?}"))));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

fn io_bad(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

fn serve(
    env: &DistEnv,
    timeout: Duration,
    make_payload: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Vec<u8>> {
    let listener = TcpListener::bind(("0.0.0.0", env.master_port)).map_err(|e| {
        store_err(
            env,
            format!("rank 0 cannot listen on port {}: {e}", env.master_port),
        )
    })?;
    listener.set_nonblocking(true)?;
    let payload = make_payload()?;
    let deadline = crate::deadline_after(timeout);
    let mut peers: Vec<Option<TcpStream>> = (0..env.world_size).map(|_| None).collect();
    let mut pending: Vec<Pending> = Vec::new();
    let mut arrived = 1; // rank 0 itself
    while arrived < env.world_size {
        loop {
            match listener.accept() {
                Ok((stream, from)) => {
                    stream.set_nonblocking(true)?;
                    pending.push(Pending {
                        stream,
                        from,
                        buf: Vec::new(),
                        since: Instant::now(),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(store_err(env, format!("accept failed: {e}"))),
            }
        }
        let mut i = 0;
        while i < pending.len() {
            let Some(said) = pending[i].poll() else {
                i += 1;
                continue;
            };
            let Pending { stream, from, .. } = pending.swap_remove(i);
            match said {
                Ok((rank, world)) if world != env.world_size => {
                    let msg = format!(
                        "rank {rank} (from {from}) says WORLD_SIZE={world}, rank 0 has {}",
                        env.world_size
                    );
                    abort_all(&mut peers, &msg);
                    send_abort(stream, &msg);
                    return Err(store_err(env, msg));
                }
                Ok((rank, _)) if rank == 0 || rank >= env.world_size || peers[rank].is_some() => {
                    let msg = format!("rank {rank} (from {from}) is out of range or arrived twice");
                    abort_all(&mut peers, &msg);
                    send_abort(stream, &msg);
                    return Err(store_err(env, msg));
                }
                Ok((rank, _)) => {
                    stream.set_nonblocking(false)?;
                    peers[rank] = Some(stream);
                    arrived += 1;
                }
                Err(e) => tracing::warn!("ignoring a bad store connection from {from}: {e}"),
            }
        }
        if arrived == env.world_size {
            break;
        }
        if Instant::now() >= deadline {
            let missing: Vec<usize> = (1..env.world_size)
                .filter(|&r| peers[r].is_none())
                .collect();
            abort_all(
                &mut peers,
                &format!("ranks {missing:?} never reached the store within {timeout:?}"),
            );
            return Err(CommError::Timeout {
                what: format!("rendezvous at {}", addr_of(env)),
                rank: 0,
                timeout,
                missing,
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let header = format!("OK {}\n", payload.len());
    for (rank, peer) in peers.iter_mut().enumerate() {
        if let Some(s) = peer {
            s.write_all(header.as_bytes())
                .and_then(|_| s.write_all(&payload))
                .map_err(|e| {
                    store_err(env, format!("sending the id to rank {rank} failed: {e}"))
                })?;
        }
    }
    Ok(payload)
}

fn parse_hello(line: &str) -> std::io::Result<(usize, usize)> {
    let bad = || io_bad(format!("bad hello {line:?}"));
    let mut it = line.split_whitespace();
    if it.next() != Some("HELLO") {
        return Err(bad());
    }
    let rank = it.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let world = it.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    Ok((rank, world))
}

fn send_abort(mut s: TcpStream, msg: &str) {
    let _ = s.write_all(format!("ABORT {msg}\n").as_bytes());
}

fn abort_all(peers: &mut [Option<TcpStream>], msg: &str) {
    for s in peers.iter_mut().filter_map(Option::take) {
        send_abort(s, msg);
    }
}

fn join(env: &DistEnv, timeout: Duration) -> Result<Vec<u8>> {
    let deadline = crate::deadline_after(timeout);
    let addr = addr_of(env);
    let mut last_err = String::from("no attempt");
    let stream = loop {
        let attempt = addr
            .to_socket_addrs()
            .map_err(|e| store_err(env, format!("cannot resolve MASTER_ADDR: {e}")))?
            .find_map(|a| {
                TcpStream::connect_timeout(&a, Duration::from_millis(500))
                    .map_err(|e| last_err = e.to_string())
                    .ok()
            });
        if let Some(s) = attempt {
            break s;
        }
        if Instant::now() >= deadline {
            return Err(CommError::Timeout {
                what: format!("rendezvous at {addr} (last error: {last_err})"),
                rank: env.rank,
                timeout,
                missing: vec![0],
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut s = stream;
    s.write_all(format!("HELLO {} {}\n", env.rank, env.world_size).as_bytes())?;
    // Rank 0 answers once everyone is there, or at its own deadline: allow a grace period.
    s.set_read_timeout(Some(timeout.saturating_add(Duration::from_secs(5))))?;
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| {
        store_err(
            env,
            format!("rank {}: no answer from rank 0: {e}", env.rank),
        )
    })?;
    if let Some(msg) = line.strip_prefix("ABORT ") {
        return Err(store_err(
            env,
            format!("rank 0 aborted the rendezvous: {}", msg.trim()),
        ));
    }
    let len: usize = line
        .strip_prefix("OK ")
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            store_err(
                env,
                format!(
                    "rank {}: unexpected answer {line:?} (rank 0 gone?)",
                    env.rank
                ),
            )
        })?;
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).map_err(|e| {
        store_err(
            env,
            format!("rank {}: truncated id from rank 0: {e}", env.rank),
        )
    })?;
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
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
        let port = free_port();
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
        let port = free_port();
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
        let port = free_port();
        let t0 = Instant::now();
        let err = rendezvous(&env(1, 2, port), Duration::from_millis(500), || Ok(vec![]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing ranks [0]"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn world_size_mismatch_is_reported() {
        let port = free_port();
        let r0 = std::thread::spawn(move || {
            rendezvous(&env(0, 2, port), Duration::from_secs(5), || Ok(vec![]))
        });
        std::thread::sleep(Duration::from_millis(100));
        let e1 = rendezvous(&env(1, 3, port), Duration::from_secs(5), || Ok(vec![])).unwrap_err();
        let e0 = r0.join().unwrap().unwrap_err();
        assert!(e0.to_string().contains("WORLD_SIZE=3"), "{e0}");
        assert!(e1.to_string().contains("WORLD_SIZE=3"), "{e1}");
    }
}
