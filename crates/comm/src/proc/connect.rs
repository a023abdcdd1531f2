//! Connecting the ring: listen on a free port, learn every rank's address through the
//! rendezvous store, connect to the next rank and accept the previous one. A connection
//! on the listener that does not introduce itself as the previous rank (a port probe, a
//! stray client) is dropped; the whole setup is bounded by the timeout.

use super::ring::Links;
use crate::error::{CommError, Result};
use crate::store::rendezvous_addrs;
use crate::DistEnv;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

fn err(rank: usize, msg: String) -> CommError {
    CommError::Broken {
        rank,
        reason: format!("connecting the CPU ring: {msg}"),
    }
}

/// The ring's links, or `None` for a single rank.
pub fn ring(env: &DistEnv, timeout: Duration) -> Result<Option<Links>> {
    let (rank, world) = (env.rank, env.world_size);
    if world == 1 {
        return Ok(None);
    }
    let listener = TcpListener::bind(("0.0.0.0", 0))
        .map_err(|e| err(rank, format!("cannot listen on a free port: {e}")))?;
    let port = listener.local_addr()?.port();
    let addrs = rendezvous_addrs(env, timeout, port)?;
    let deadline = crate::deadline_after(timeout);
    let (next_rank, prev_rank) = ((rank + 1) % world, (rank + world - 1) % world);
    let next = connect(
        &addrs[next_rank],
        rank,
        next_rank,
        world,
        (deadline, timeout),
    )?;
    let prev = accept(&listener, rank, prev_rank, world, (deadline, timeout))?;
    for s in [&next, &prev] {
        s.set_nodelay(true)?;
    }
    Ok(Some(Links {
        next,
        prev,
        rank,
        world,
    }))
}

fn connect(
    addr: &str,
    rank: usize,
    to: usize,
    world: usize,
    (deadline, timeout): (Instant, Duration),
) -> Result<TcpStream> {
    let mut last = String::from("no attempt");
    loop {
        let found = addr
            .to_socket_addrs()
            .map_err(|e| {
                err(
                    rank,
                    format!("cannot resolve rank {to}'s address {addr}: {e}"),
                )
            })?
            .find_map(|a| {
                TcpStream::connect_timeout(&a, Duration::from_millis(500))
                    .map_err(|e| last = e.to_string())
                    .ok()
            });
        if let Some(mut s) = found {
            s.write_all(format!("RING {rank} {world}\n").as_bytes())?;
            return Ok(s);
        }
        if Instant::now() >= deadline {
            return Err(CommError::Timeout {
                what: format!("connecting to rank {to} at {addr} (last error: {last})"),
                rank,
                timeout,
                missing: vec![to],
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `RING <rank> <world>\n` within a few seconds; anything else is `None`.
fn introduction(s: &mut TcpStream) -> Option<(usize, usize)> {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 64 {
        s.read_exact(&mut byte).ok()?;
        if byte[0] == b'\n' {
            let text = String::from_utf8(line).ok()?;
            let mut it = text.split_whitespace();
            (it.next() == Some("RING")).then_some(())?;
            let r = it.next()?.parse().ok()?;
            let w = it.next()?.parse().ok()?;
            return Some((r, w));
        }
        line.push(byte[0]);
    }
    None
}

fn accept(
    listener: &TcpListener,
    rank: usize,
    from: usize,
    world: usize,
    (deadline, timeout): (Instant, Duration),
) -> Result<TcpStream> {
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((mut s, peer)) => {
                s.set_nonblocking(false)?;
                match introduction(&mut s) {
                    Some((r, w)) if r == from && w == world => {
                        s.set_read_timeout(None)?;
                        return Ok(s);
                    }
                    Some((r, w)) => {
                        return Err(err(
                            rank,
                            format!(
                            "{peer} says it is rank {r} of {w}; expected rank {from} of {world}"
                        ),
                        ))
                    }
                    None => tracing::warn!("ignoring a stray connection from {peer}"),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(err(rank, format!("accept failed: {e}"))),
        }
        if Instant::now() >= deadline {
            return Err(CommError::Timeout {
                what: format!("waiting for rank {from} to connect to the ring"),
                rank,
                timeout,
                missing: vec![from],
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
