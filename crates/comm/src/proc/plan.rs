//! What each collective sends to the next rank and receives from the previous one, as
//! lists of segments of one byte buffer (the ring schedule, computed alike on every rank).
//!
//! Ring reduce-scatter: at step t rank r sends chunk (r−t−1) and receives chunk (r−t−2),
//! adding it to its own; after n−1 steps rank r holds chunk r reduced over all ranks.
//! Ring all-gather: at step t rank r sends chunk (r−t) and receives chunk (r−t−1).
//! All-reduce is the two in a row. The chunk sent at a step is the one received at the step
//! before, segment by segment, so a send waits only for the segment it forwards: reduction
//! and transfer overlap. Each element is reduced in one fixed order and then copied, so
//! every rank ends with identical bits.

use crate::cpu::chunk;

/// Bytes per DATA frame: large enough to amortize a frame, small enough to pipeline.
pub const SEGMENT: usize = 512 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    pub off: usize,
    pub len: usize,
    /// The receive (index into `Plan::recvs`) that must be done before this is sent.
    pub after: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    Copy,
    /// Add into the buffer; `last`: this completes the element (Avg divides here).
    Reduce {
        last: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Recv {
    pub off: usize,
    pub len: usize,
    pub action: Action,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    pub sends: Vec<Send>,
    pub recvs: Vec<Recv>,
}

/// A byte range cut into segments (at least one, possibly empty, so every step still
/// sends a frame and the ring's ordering holds even for tiny buffers).
fn segments(range: std::ops::Range<usize>) -> Vec<(usize, usize)> {
    let mut out = vec![];
    let mut at = range.start;
    loop {
        let len = SEGMENT.min(range.end - at);
        out.push((at, len));
        at += len;
        if at >= range.end {
            return out;
        }
    }
}

fn wrap(x: isize, n: usize) -> usize {
    x.rem_euclid(n as isize) as usize
}

/// Appends ring steps: step t sends chunk `send(t)` and receives chunk `recv(t)`; a send
/// at a step after the first of the whole plan waits for the matching receive before it.
fn steps(
    p: &mut Plan,
    n_steps: usize,
    chunk_bytes: &dyn Fn(usize) -> std::ops::Range<usize>,
    send: impl Fn(usize) -> usize,
    recv: impl Fn(usize) -> usize,
    action: impl Fn(usize) -> Action,
    first_send_waits: bool,
) {
    for t in 0..n_steps {
        let prev_recvs = p.recvs.len();
        let send_segs = segments(chunk_bytes(send(t)));
        let waits = t > 0 || first_send_waits;
        let base = prev_recvs - if waits { send_segs.len() } else { 0 };
        for (j, (off, len)) in send_segs.into_iter().enumerate() {
            p.sends.push(Send {
                off,
                len,
                after: waits.then_some(base + j),
            });
        }
        for (off, len) in segments(chunk_bytes(recv(t))) {
            p.recvs.push(Recv {
                off,
                len,
                action: action(t),
            });
        }
    }
}

/// In-place all-reduce of `count` elements of `esz` bytes on rank `r` of `n`.
pub fn all_reduce(count: usize, esz: usize, n: usize, r: usize) -> Plan {
    let mut p = Plan::default();
    if n < 2 {
        return p;
    }
    let bytes = |c: usize| {
        let e = chunk(count, n, c);
        e.start * esz..e.end * esz
    };
    let r = r as isize;
    let last = n - 2;
    steps(
        &mut p,
        n - 1,
        &bytes,
        |t| wrap(r - t as isize - 1, n),
        |t| wrap(r - t as isize - 2, n),
        |t| Action::Reduce { last: t == last },
        false,
    );
    steps(
        &mut p,
        n - 1,
        &bytes,
        |t| wrap(r - t as isize, n),
        |t| wrap(r - t as isize - 1, n),
        |_| Action::Copy,
        true,
    );
    p
}

/// Reduce-scatter of n × `m` elements (rank r ends with chunk r reduced, in place).
pub fn reduce_scatter(m: usize, esz: usize, n: usize, r: usize) -> Plan {
    let mut p = Plan::default();
    if n < 2 {
        return p;
    }
    let bytes = |c: usize| c * m * esz..(c + 1) * m * esz;
    let r = r as isize;
    steps(
        &mut p,
        n - 1,
        &bytes,
        |t| wrap(r - t as isize - 1, n),
        |t| wrap(r - t as isize - 2, n),
        |t| Action::Reduce { last: t == n - 2 },
        false,
    );
    p
}

/// All-gather into n × `m` elements (chunk r already holds rank r's input).
pub fn all_gather(m: usize, esz: usize, n: usize, r: usize) -> Plan {
    let mut p = Plan::default();
    if n < 2 {
        return p;
    }
    let bytes = |c: usize| c * m * esz..(c + 1) * m * esz;
    let r = r as isize;
    steps(
        &mut p,
        n - 1,
        &bytes,
        |t| wrap(r - t as isize, n),
        |t| wrap(r - t as isize - 1, n),
        |_| Action::Copy,
        false,
    );
    p
}

/// Broadcast of `len` bytes from `root` down the chain root → root+1 → … (pipelined).
pub fn broadcast(len: usize, n: usize, r: usize, root: usize) -> Plan {
    let mut p = Plan::default();
    let pos = wrap(r as isize - root as isize, n);
    let segs = segments(0..len);
    if pos > 0 {
        p.recvs = segs
            .iter()
            .map(|&(off, len)| Recv {
                off,
                len,
                action: Action::Copy,
            })
            .collect();
    }
    if pos + 1 < n {
        p.sends = segs
            .iter()
            .enumerate()
            .map(|(j, &(off, len))| Send {
                off,
                len,
                after: (pos > 0).then_some(j),
            })
            .collect();
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_send_forwards_what_was_received_just_before() {
        for n in 2..6 {
            for r in 0..n {
                let p = all_reduce(3 * SEGMENT + 100, 4, n, r);
                assert_eq!(p.sends.len(), p.recvs.len());
                for s in &p.sends {
                    if let Some(a) = s.after {
                        assert_eq!((p.recvs[a].off, p.recvs[a].len), (s.off, s.len));
                    }
                }
                let rs = reduce_scatter(10, 4, n, r);
                let finals: Vec<_> = rs
                    .recvs
                    .iter()
                    .filter(|x| x.action == Action::Reduce { last: true })
                    .collect();
                assert_eq!(finals[0].off, r * 40, "rank {r} of {n} ends with chunk r");
            }
        }
        let b = broadcast(10, 3, 0, 0);
        assert!(b.recvs.is_empty() && b.sends.len() == 1);
        assert!(broadcast(10, 3, 2, 0).sends.is_empty());
    }
}
