//! Runs one collective's [`Plan`] over the ring links: a sender thread writes frames to the
//! next rank while this thread reads frames from the previous rank and reduces or copies
//! them into the buffer; a send that forwards a segment waits for that segment's receive.
//!
//! Failure, so that every rank fails within the timeout naming the cause:
//! - the previous rank closed its connection (exited, killed): this rank names it;
//! - the next rank closed its connection: named too (after a short grace in which an ABORT
//!   explaining an earlier cause may still arrive from the previous rank);
//! - an ABORT frame from the previous rank: its text is this rank's error (and is forwarded);
//! - the deadline passed: while waiting, senders send BEAT frames, so a rank whose previous
//!   rank has been silent for a while names it as hung or absent, and a rank whose previous
//!   rank is alive waits a grace period for the ABORT that the silent rank's successor sends.

use super::plan::Plan;
use super::recv::{drain_for_mismatch, Receiver};
use super::wire::{self, Header, IoStop, BEAT, DATA, SIG};
use crate::ReduceOp;
use candle_core::DType;
use std::net::TcpStream;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The two sockets of a rank in the ring.
pub struct Links {
    pub next: TcpStream,
    pub prev: TcpStream,
    pub rank: usize,
    pub world: usize,
}

impl Links {
    pub fn next_rank(&self) -> usize {
        (self.rank + 1) % self.world
    }
    pub fn prev_rank(&self) -> usize {
        (self.rank + self.world - 1) % self.world
    }
}

/// What a failed collective reports.
pub enum Failure {
    /// An ABORT arrived: its text, to return and to forward as is.
    Aborted { mismatch: bool, text: String },
    /// This rank found the problem; the text names the culprit (forwarded to the next rank).
    Here {
        mismatch: bool,
        text: String,
        missing: Vec<usize>,
        timed_out: bool,
    },
}

/// One collective's parameters.
pub struct Call<'a> {
    pub seq: u64,
    pub op: &'static str,
    pub sig: &'a str,
    pub dtype: DType,
    pub reduce: ReduceOp,
    pub timeout: Duration,
}

#[derive(Default)]
pub(super) struct Progress {
    pub done: usize,
    pub finished: bool,
    pub stop: bool,
    pub send_failed_at: Option<Instant>,
}

pub(super) struct Sync {
    pub p: Mutex<Progress>,
    pub cv: Condvar,
}

impl Sync {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.p.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How often a waiting sender says it is alive, and how long silence must last to blame.
fn beat(timeout: Duration) -> Duration {
    (timeout / 8).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

enum SendEnd {
    Ok,
    /// Stopped because the receiver failed; `clean`: at a frame boundary.
    Stopped {
        clean: bool,
    },
    Failed(String),
}

fn sender(
    next: &mut TcpStream,
    buf: usize,
    plan: &Plan,
    c: &Call,
    sync: &Sync,
    deadline: Instant,
    next_rank: usize,
) -> SendEnd {
    let hb = beat(c.timeout);
    let stop = || sync.lock().stop || Instant::now() >= deadline;
    let fail = |e: IoStop, clean_if_stopped: bool| -> SendEnd {
        let stopped_by_us = sync.lock().stop;
        match e {
            IoStop::Stopped if stopped_by_us => SendEnd::Stopped { clean: clean_if_stopped },
            IoStop::Stopped => SendEnd::Failed(format!(
                "rank {next_rank} read nothing from this rank for {:?} during {} #{} (hung or stopped)",
                c.timeout, c.op, c.seq
            )),
            IoStop::Closed(d) => SendEnd::Failed(format!(
                "rank {next_rank} closed its connection during {} #{} ({d}): it exited or was killed",
                c.op, c.seq
            )),
            IoStop::Failed(e) => SendEnd::Failed(format!("sending to rank {next_rank}: {e}")),
        }
    };
    let head = |kind, len: usize| Header {
        kind,
        seq: c.seq,
        len: len as u64,
    };
    if let Err(e) = wire::write_frame(next, head(SIG, c.sig.len()), c.sig.as_bytes(), stop) {
        return fail(e, false);
    }
    // Waits until `cond` holds, sending a BEAT every `hb`; false when stopped.
    let wait = |next: &mut TcpStream, cond: &dyn Fn(&Progress) -> bool| -> Result<(), SendEnd> {
        let mut g = sync.lock();
        loop {
            if cond(&g) {
                return Ok(());
            }
            if g.stop {
                return Err(SendEnd::Stopped { clean: true });
            }
            let (ng, to) = sync
                .cv
                .wait_timeout(g, hb)
                .unwrap_or_else(|e| e.into_inner());
            g = ng;
            if to.timed_out() && !cond(&g) && !g.stop {
                drop(g);
                if let Err(e) = wire::write_frame(next, head(BEAT, 0), &[], stop) {
                    return Err(fail(e, false));
                }
                g = sync.lock();
            }
        }
    };
    for s in &plan.sends {
        if let Some(a) = s.after {
            if let Err(end) = wait(next, &|p: &Progress| p.done > a) {
                return end;
            }
        }
        // SAFETY: `buf` outlives this thread (scoped); the plan never has the receiver
        // write a segment that is being sent (see plan.rs).
        let bytes = unsafe { std::slice::from_raw_parts((buf + s.off) as *const u8, s.len) };
        if let Err(e) = wire::write_frame(next, head(DATA, s.len), bytes, stop) {
            return fail(e, false);
        }
    }
    match wait(next, &|p: &Progress| p.finished) {
        Ok(()) => SendEnd::Ok,
        Err(end) => end,
    }
}

/// Runs `plan` on `buf`. On failure the caller forwards and shuts the links down.
pub fn run(
    links: &mut Links,
    buf: &mut [u8],
    plan: &Plan,
    c: &Call,
) -> Result<(), (Failure, bool)> {
    let (next_rank, prev_rank, rank, world) = (
        links.next_rank(),
        links.prev_rank(),
        links.rank,
        links.world,
    );
    let deadline = crate::deadline_after(c.timeout);
    let hb = beat(c.timeout);
    let sync = Sync {
        p: Mutex::new(Progress::default()),
        cv: Condvar::new(),
    };
    let base = buf.as_mut_ptr() as usize;
    let Links { next, prev, .. } = links;
    let (got, sent) = std::thread::scope(|s| {
        let next_for_sender = &mut *next;
        let sync_ref = &sync;
        let h = s.spawn(move || {
            let end = sender(
                next_for_sender,
                base,
                plan,
                c,
                sync_ref,
                deadline,
                next_rank,
            );
            if let SendEnd::Failed(_) = end {
                sync_ref.lock().send_failed_at = Some(Instant::now());
                sync_ref.cv.notify_all();
            }
            end
        });
        let got = Receiver {
            prev,
            c,
            sync: &sync,
            deadline,
            hb,
            prev_rank,
            rank,
            world,
            heard: Instant::now(),
        }
        .run(base, buf.len(), plan);
        {
            let mut g = sync.lock();
            if got.is_err() {
                g.stop = true;
            }
            g.finished = true;
            sync.cv.notify_all();
        }
        let sent = h
            .join()
            .unwrap_or_else(|_| SendEnd::Failed("the sender thread panicked".into()));
        (got, sent)
    });
    {
        match (got, sent) {
            (
                Err(Failure::Here {
                    mismatch: true,
                    text,
                    ..
                }),
                SendEnd::Stopped { clean: true },
            ) => {
                // Tell the next rank, then collect what the previous one found, so every
                // rank names every signature seen (several ranks may detect at once).
                let seq = c.seq;
                wire::send_abort(next, seq, &wire::abort_text(true, &text), hb * 4);
                let text = drain_for_mismatch(prev, text, (hb * 8).min(c.timeout));
                Err((
                    Failure::Aborted {
                        mismatch: true,
                        text,
                    },
                    false,
                ))
            }
            (Err(f), SendEnd::Stopped { clean }) => Err((f, clean)),
            (Err(f), _) => Err((f, false)),
            (Ok(()), SendEnd::Failed(text)) => Err((
                Failure::Here {
                    mismatch: false,
                    text: format!("rank {rank}: {text}"),
                    missing: vec![next_rank],
                    timed_out: false,
                },
                false,
            )),
            (Ok(()), _) => Ok(()),
        }
    }
}
