//! The receiving half of a ring collective: frames from the previous rank (BEATs skipped,
//! an ABORT turned into this rank's failure), the signature check, and each segment copied
//! or reduced into the buffer; after a mismatch, the previous rank's ABORT is awaited so
//! every rank names every signature.

use super::plan::{Action, Plan};
use super::ring::{Call, Failure, Sync};
use super::wire::{self, Header, IoStop, BEAT, DATA, SIG};
use crate::reduce::{accumulate, Aligned};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub(super) struct Receiver<'a> {
    pub prev: &'a mut TcpStream,
    pub c: &'a Call<'a>,
    pub sync: &'a Sync,
    pub deadline: Instant,
    pub hb: Duration,
    pub prev_rank: usize,
    pub rank: usize,
    pub world: usize,
    pub heard: Instant,
}

impl Receiver<'_> {
    fn here(&self, text: String, missing: Vec<usize>, timed_out: bool) -> Failure {
        Failure::Here {
            mismatch: false,
            text: format!("rank {}: {text}", self.rank),
            missing,
            timed_out,
        }
    }

    /// Reads into `b`; `Err` says why it stopped.
    fn read(&mut self, b: &mut [u8]) -> Result<(), Failure> {
        let (deadline, heard, hb, sync) = (self.deadline, self.heard, self.hb, self.sync);
        let stop = || {
            let now = Instant::now();
            let send_failed = sync.lock().send_failed_at.is_some_and(|t| now > t + hb * 3);
            // Past the deadline: blame a silent previous rank at once; if it is alive (it
            // sent a BEAT lately), wait a grace for the ABORT naming the real cause.
            send_failed || (now >= deadline && (now - heard > hb * 3 || now >= deadline + hb * 6))
        };
        match wire::read_full(self.prev, b, stop) {
            Ok(()) => Ok(()),
            Err(IoStop::Closed(d)) => Err(self.here(
                format!("rank {} closed its connection during {} #{} ({d}): it exited or was killed", self.prev_rank, self.c.op, self.c.seq),
                vec![self.prev_rank],
                false,
            )),
            Err(IoStop::Stopped) if self.sync.lock().send_failed_at.is_some() => {
                Err(self.here("stopped: sending failed".into(), vec![], false))
            }
            Err(IoStop::Stopped) if Instant::now() - self.heard > self.hb * 3 => Err(self.here(
                format!("rank {} sent nothing for {:?} during {} #{} (timeout {:?}): it is hung, stopped, or never called it", self.prev_rank, Instant::now() - self.heard, self.c.op, self.c.seq, self.c.timeout),
                vec![self.prev_rank],
                true,
            )),
            Err(IoStop::Stopped) => Err(self.here(
                format!("{} #{} did not complete within {:?}; rank {} is alive but the ring stalled further back", self.c.op, self.c.seq, self.c.timeout, self.prev_rank),
                vec![],
                true,
            )),
            Err(IoStop::Failed(e)) => Err(self.here(format!("reading from rank {}: {e}", self.prev_rank), vec![self.prev_rank], false)),
        }
    }

    /// The next non-BEAT frame's header; ABORT frames become failures.
    fn frame(&mut self, want: u32) -> Result<Header, Failure> {
        loop {
            let mut raw = [0u8; wire::HEADER];
            self.read(&mut raw)?;
            self.heard = Instant::now();
            let h = Header::decode(&raw).map_err(|e| {
                self.here(format!("from rank {}: {e}", self.prev_rank), vec![], false)
            })?;
            if h.kind == BEAT {
                continue;
            }
            if h.kind == wire::ABORT {
                let mut text = vec![0u8; h.len.min(wire::MAX_TEXT) as usize];
                self.read(&mut text)?;
                let (mismatch, text) = wire::parse_abort(&text);
                return Err(Failure::Aborted { mismatch, text });
            }
            if h.seq != self.c.seq || h.kind != want {
                return Err(Failure::Here { mismatch: true, text: format!("rank {} is at collective #{} (frame kind {}), rank {} at {} #{}: the ranks called different collectives", self.prev_rank, h.seq, h.kind, self.rank, self.c.op, self.c.seq), missing: vec![], timed_out: false });
            }
            return Ok(h);
        }
    }

    pub fn run(mut self, base: usize, total: usize, plan: &Plan) -> Result<(), Failure> {
        if self.world < 2 {
            return Ok(());
        }
        let h = self.frame(SIG)?;
        if h.len > wire::MAX_TEXT {
            return Err(self.here(
                format!("rank {} sent a {}-byte signature", self.prev_rank, h.len),
                vec![],
                false,
            ));
        }
        let mut theirs = vec![0u8; h.len as usize];
        self.read(&mut theirs)?;
        let theirs = String::from_utf8_lossy(&theirs).to_string();
        if theirs != self.c.sig {
            return Err(Failure::Here {
                mismatch: true,
                text: format!(
                    "rank {}: {theirs}; rank {}: {}",
                    self.prev_rank, self.rank, self.c.sig
                ),
                missing: vec![],
                timed_out: false,
            });
        }
        let mut scratch = Aligned::new(super::plan::SEGMENT);
        for (i, r) in plan.recvs.iter().enumerate() {
            let h = self.frame(DATA)?;
            if h.len != r.len as u64 || r.off + r.len > total {
                return Err(self.here(
                    format!(
                        "rank {} sent a {}-byte segment, {} expected",
                        self.prev_rank, h.len, r.len
                    ),
                    vec![],
                    false,
                ));
            }
            // SAFETY: within `buf` (checked above); the sender never reads this segment
            // while it is written (plan.rs).
            let dst = unsafe { std::slice::from_raw_parts_mut((base + r.off) as *mut u8, r.len) };
            match r.action {
                Action::Copy => self.read(dst)?,
                Action::Reduce { last } => {
                    let src = &mut scratch.bytes_mut()[..r.len];
                    self.read(src)?;
                    accumulate(
                        self.c.dtype,
                        dst,
                        &scratch.bytes()[..r.len],
                        self.c.reduce,
                        self.world,
                        last,
                    );
                }
            }
            let mut g = self.sync.lock();
            g.done = i + 1;
            self.sync.cv.notify_all();
        }
        Ok(())
    }
}

/// After a signature mismatch: reads the previous rank's frames for up to `within`,
/// skipping data, until its ABORT arrives; returns `own` merged with its text (one
/// "rank k: …" entry per rank, in rank order).
pub(super) fn drain_for_mismatch(prev: &mut TcpStream, own: String, within: Duration) -> String {
    let end = Instant::now() + within;
    let stop = || Instant::now() >= end;
    let mut sink = vec![0u8; super::plan::SEGMENT];
    loop {
        let mut raw = [0u8; wire::HEADER];
        if wire::read_full(prev, &mut raw, stop).is_err() {
            return own;
        }
        let Ok(h) = Header::decode(&raw) else {
            return own;
        };
        let mut left = h.len as usize;
        if h.kind == wire::ABORT {
            let mut text = vec![0u8; left.min(wire::MAX_TEXT as usize)];
            if wire::read_full(prev, &mut text, stop).is_err() {
                return own;
            }
            let (mismatch, theirs) = wire::parse_abort(&text);
            return if mismatch { merge(&own, &theirs) } else { own };
        }
        while left > 0 {
            let n = left.min(sink.len());
            if wire::read_full(prev, &mut sink[..n], stop).is_err() {
                return own;
            }
            left -= n;
        }
    }
}

/// Union of two "rank k: …; rank j: …" lists, in rank order.
fn merge(a: &str, b: &str) -> String {
    let mut all: Vec<&str> = a.split("; ").chain(b.split("; ")).collect();
    let key = |e: &&str| {
        e.strip_prefix("rank ")
            .and_then(|r| r.split(':').next())
            .and_then(|r| r.parse::<usize>().ok())
            .unwrap_or(usize::MAX)
    };
    all.sort_by_key(key);
    all.dedup();
    all.join("; ")
}
