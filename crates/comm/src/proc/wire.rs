//! Framing and deadline-bounded socket I/O of the process backend's ring links.
//!
//! Every message is a frame: a 24-byte header (magic, kind, collective sequence number,
//! payload length) and its payload. Kinds: `SIG` (what the sender is calling, compared by
//! the receiver), `DATA` (a segment), `BEAT` (the sender is alive and waiting: lets the
//! receiver tell a stalled ring from a dead peer) and `ABORT` (the sender failed; the
//! payload says why, so every rank can name the rank that caused it).
//! Reads and writes run in slices of at most [`SLICE`], checking a stop condition between
//! slices, so no socket call blocks past a collective's deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub const MAGIC: u32 = 0x4752_4e47; // "GNRG"
pub const HEADER: usize = 24;
pub const SIG: u32 = 1;
pub const DATA: u32 = 2;
pub const BEAT: u32 = 3;
pub const ABORT: u32 = 4;
/// Longest a single socket call blocks before the caller re-checks its deadline and flags.
pub const SLICE: Duration = Duration::from_millis(50);
/// The largest SIG or ABORT payload accepted (a DATA frame's size is known in advance).
pub const MAX_TEXT: u64 = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: u32,
    pub seq: u64,
    pub len: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.kind.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b
    }
    pub fn decode(b: &[u8; HEADER]) -> Result<Self, String> {
        let word = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let long = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if word(0) != MAGIC {
            return Err(format!(
                "bad frame magic {:#x} (stream out of step)",
                word(0)
            ));
        }
        let kind = word(4);
        if !(SIG..=ABORT).contains(&kind) {
            return Err(format!("unknown frame kind {kind}"));
        }
        Ok(Header {
            kind,
            seq: long(8),
            len: long(16),
        })
    }
}

/// Why a socket call gave up.
#[derive(Debug)]
pub enum IoStop {
    /// The peer closed the connection (exited, was killed) or reset it.
    Closed(String),
    /// The caller's stop condition fired (deadline or a flag), possibly mid-frame.
    Stopped,
    /// Any other socket error.
    Failed(std::io::Error),
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

fn is_closed(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::BrokenPipe
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::UnexpectedEof
            | ErrorKind::NotConnected
    )
}

/// Reads exactly `buf.len()` bytes; between slices, `stop()` may end the wait.
pub fn read_full(
    s: &mut TcpStream,
    buf: &mut [u8],
    mut stop: impl FnMut() -> bool,
) -> Result<(), IoStop> {
    let mut at = 0;
    s.set_read_timeout(Some(SLICE)).map_err(IoStop::Failed)?;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(IoStop::Closed("end of stream".into())),
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if stop() {
                    return Err(IoStop::Stopped);
                }
            }
            Err(e) if is_closed(&e) => return Err(IoStop::Closed(e.to_string())),
            Err(e) => return Err(IoStop::Failed(e)),
        }
    }
    Ok(())
}

/// Writes all of `buf`; between slices, `stop()` may abandon it (possibly mid-frame).
pub fn write_full(
    s: &mut TcpStream,
    buf: &[u8],
    mut stop: impl FnMut() -> bool,
) -> Result<(), IoStop> {
    let mut at = 0;
    s.set_write_timeout(Some(SLICE)).map_err(IoStop::Failed)?;
    while at < buf.len() {
        match s.write(&buf[at..]) {
            Ok(0) => return Err(IoStop::Closed("the connection accepts no more data".into())),
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if stop() {
                    return Err(IoStop::Stopped);
                }
            }
            Err(e) if is_closed(&e) => return Err(IoStop::Closed(e.to_string())),
            Err(e) => return Err(IoStop::Failed(e)),
        }
    }
    Ok(())
}

/// Writes a whole frame: header then payload.
pub fn write_frame(
    s: &mut TcpStream,
    h: Header,
    payload: &[u8],
    mut stop: impl FnMut() -> bool,
) -> Result<(), IoStop> {
    write_full(s, &h.encode(), &mut stop)?;
    write_full(s, payload, stop)
}

/// Best effort, bounded by `within`: tells the next rank why this one stops.
pub fn send_abort(s: &mut TcpStream, seq: u64, why: &str, within: Duration) {
    let end = Instant::now() + within;
    let text = &why.as_bytes()[..why.len().min(MAX_TEXT as usize)];
    let h = Header {
        kind: ABORT,
        seq,
        len: text.len() as u64,
    };
    let _ = write_frame(s, h, text, || Instant::now() >= end);
}

/// An ABORT payload: a one-letter kind (`M`ismatch or `F`ailure), a space, the text.
pub fn abort_text(mismatch: bool, msg: &str) -> String {
    format!("{} {msg}", if mismatch { 'M' } else { 'F' })
}

/// Splits an ABORT payload into (is a mismatch, message).
pub fn parse_abort(b: &[u8]) -> (bool, String) {
    let s = String::from_utf8_lossy(b);
    match s.split_once(' ') {
        Some(("M", m)) => (true, m.to_string()),
        Some(("F", m)) => (false, m.to_string()),
        _ => (false, s.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_garbage_is_named() {
        let h = Header {
            kind: DATA,
            seq: 7,
            len: 1 << 33,
        };
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
        let e = Header::decode(&[1u8; HEADER]).unwrap_err();
        assert!(e.contains("magic"), "{e}");
        assert_eq!(
            parse_abort(abort_text(true, "rank 1: x").as_bytes()),
            (true, "rank 1: x".to_string())
        );
    }
}
