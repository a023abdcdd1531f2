//! Enforces the timeout on collectives, like PyTorch's NCCL watchdog.
//!
//! Every queued collective registers its completion event, and every host call into NCCL
//! is marked while it runs (NCCL may block inside the call, connecting to a peer that is
//! gone). A background thread checks the oldest event (the communication stream completes
//! in order), the call in progress, and NCCL's asynchronous error. If either outlives the
//! timeout, or NCCL reports an error, the watchdog prints a clear message, aborts the
//! communicator and ends the process with exit code 1, so the launcher stops the others.

use super::raw::RawComm;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Pending {
    pub seq: u64,
    pub op: &'static str,
    pub event: Arc<cudarc::driver::CudaEvent>,
    pub deadline: Instant,
}

/// What the watchdog thread watches.
#[derive(Default)]
struct Watched {
    queue: VecDeque<Pending>,
    /// A host call into NCCL in progress: (op, seq, deadline).
    in_call: Option<(&'static str, u64, Instant)>,
}

pub struct Watchdog {
    watched: Arc<Mutex<Watched>>,
    timeout: Duration,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn start(raw: Arc<RawComm>, rank: usize, timeout: Duration) -> Self {
        let watched: Arc<Mutex<Watched>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (w, s) = (watched.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("nccl-watchdog-{rank}"))
            .spawn(move || watch(raw, rank, timeout, w, s))
            .expect("spawning the watchdog thread");
        Self {
            watched,
            timeout,
            stop,
            thread: Some(thread),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push(&self, p: Pending) {
        self.lock().queue.push_back(p);
    }

    /// Marks the start (`Some((op, seq))`) or the end (`None`) of a host call into NCCL.
    pub fn in_call(&self, call: Option<(&'static str, u64)>) {
        self.lock().in_call = call.map(|(op, seq)| (op, seq, crate::deadline_after(self.timeout)));
    }
}

fn fatal(raw: &RawComm, rank: usize, msg: String) -> ! {
    eprintln!("[comm rank {rank}] FATAL: {msg}; aborting the NCCL communicator and exiting");
    raw.abort();
    std::process::exit(1);
}

fn watch(
    raw: Arc<RawComm>,
    rank: usize,
    timeout: Duration,
    watched: Arc<Mutex<Watched>>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(2));
        if let Err(e) = raw.async_error() {
            fatal(&raw, rank, e.to_string());
        }
        let mut w = watched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((op, seq, deadline)) = w.in_call {
            if Instant::now() > deadline {
                fatal(&raw, rank, format!("{op} (collective #{seq}) was still being queued after {timeout:?}: NCCL cannot reach a peer rank"));
            }
        }
        while let Some(front) = w.queue.front() {
            match front.event.try_is_complete() {
                Ok(true) => {
                    w.queue.pop_front();
                }
                Ok(false) if Instant::now() > front.deadline => fatal(
                    &raw,
                    rank,
                    format!(
                        "{} (collective #{}) did not complete within {timeout:?}: a peer rank failed, hung, or never called it",
                        front.op, front.seq
                    ),
                ),
                Ok(false) => break,
                Err(e) => fatal(&raw, rank, format!("CUDA error while waiting for {} (collective #{}): {e:?}", front.op, front.seq)),
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
