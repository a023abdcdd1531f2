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
        serve(env, timeout, Payload::Early(Box::new(make_payload)))
    } else {
        join(env, timeout, None)
    }
}

/// Rendezvous for the CPU process backend: every rank offers the port its ring listener
/// is on, and every rank gets all ranks' `host:port` in rank order. Rank 0's host is
/// MASTER_ADDR; another rank's is the address rank 0 sees its store connection come from
/// (the interface that reaches the master). A rank that offers no port (it runs another
/// backend) fails the rendezvous on every rank, naming it.
pub fn rendezvous_addrs(env: &DistEnv, timeout: Duration, port: u16) -> Result<Vec<String>> {
    let own = format!("{}:{port}", env.master_addr);
    if env.world_size == 1 {
        return Ok(vec![own]);
    }
    let payload = if env.rank == 0 {
        serve(env, timeout, Payload::Addrs(own))?
    } else {
        join(env, timeout, Some(port))?
    };
    let text =
        String::from_utf8(payload).map_err(|_| store_err(env, "address list is not text"))?;
    let addrs: Vec<String> = text.lines().map(String::from).collect();
    if addrs.len() != env.world_size {
        return Err(store_err(
            env,
            format!(
                "rank 0 sent {} addresses for {} ranks",
                addrs.len(),
                env.world_size
            ),
        ));
    }
    Ok(addrs)
}

/// What rank 0 hands out: an id made before anyone arrives (NCCL), or every rank's
/// address, known once all have arrived (CPU processes).
enum Payload<'a> {
    Early(Box<dyn FnOnce() -> Result<Vec<u8>> + 'a>),
    Addrs(String),
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
    fn poll(&mut self) -> Option<std::io::Result<Hello>> {
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

fn serve(env: &DistEnv, timeout: Duration, payload: Payload) -> Result<Vec<u8>> {
    let listener = TcpListener::bind(("0.0.0.0", env.master_port)).map_err(|e| {
        store_err(
            env,
            format!("rank 0 cannot listen on port {}: {e}", env.master_port),
        )
    })?;
    listener.set_nonblocking(true)?;
    let (mut payload, own) = match payload {
        Payload::Early(make) => (make()?, None),
        Payload::Addrs(own) => (Vec::new(), Some(own)),
    };
    let mut addrs: Vec<String> = vec![own.clone().unwrap_or_default(); env.world_size];
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
                Ok(Hello { rank, world, .. }) if world != env.world_size => {
                    let msg = format!(
                        "rank {rank} (from {from}) says WORLD_SIZE={world}, rank 0 has {}",
                        env.world_size
                    );
                    abort_all(&mut peers, &msg);
                    send_abort(stream, &msg);
                    return Err(store_err(env, msg));
                }
                Ok(Hello { rank, .. })
                    if rank == 0 || rank >= env.world_size || peers[rank].is_some() =>
                {
                    let msg = format!("rank {rank} (from {from}) is out of range or arrived twice");
                    abort_all(&mut peers, &msg);
                    send_abort(stream, &msg);
                    return Err(store_err(env, msg));
                }
                Ok(Hello { rank, port, .. }) if port.is_some() != own.is_some() => {
                    let (it, us) = match port {
                        Some(_) => ("the CPU process backend", "NCCL"),
                        None => ("NCCL", "the CPU process backend"),
                    };
                    let msg = format!(
                        "rank {rank} (from {from}) uses {it}, rank 0 uses {us}: every rank must use the same backend"
                    );
                    abort_all(&mut peers, &msg);
                    send_abort(stream, &msg);
                    return Err(store_err(env, msg));
                }
                Ok(Hello { rank, port, .. }) => {
                    if let Some(p) = port {
                        addrs[rank] = SocketAddr::new(from.ip(), p).to_string();
                    }
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
    if own.is_some() {
        payload = addrs.join("\n").into_bytes();
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

/// `HELLO rank world [port]`: the port is the CPU process backend's ring listener.
struct Hello {
    rank: usize,
    world: usize,
    port: Option<u16>,
}

fn parse_hello(line: &str) -> std::io::Result<Hello> {
    let bad = || io_bad(format!("bad hello {line:?}"));
    let mut it = line.split_whitespace();
    if it.next() != Some("HELLO") {
        return Err(bad());
    }
    let rank = it.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let world = it.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let port = match it.next() {
        None => None,
        Some(p) => Some(p.parse().map_err(|_| bad())?),
    };
    Ok(Hello { rank, world, port })
}

fn send_abort(mut s: TcpStream, msg: &str) {
    let _ = s.write_all(format!("ABORT {msg}\n").as_bytes());
}

fn abort_all(peers: &mut [Option<TcpStream>], msg: &str) {
    for s in peers.iter_mut().filter_map(Option::take) {
        send_abort(s, msg);
    }
}

fn join(env: &DistEnv, timeout: Duration, port: Option<u16>) -> Result<Vec<u8>> {
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
    let offer = port.map(|p| format!(" {p}")).unwrap_or_default();
    s.write_all(format!("HELLO {} {}{offer}\n", env.rank, env.world_size).as_bytes())?;
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
