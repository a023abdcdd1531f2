//! Enforces the timeout on collectives in flight, like PyTorch's NCCL watchdog.
//!
//! Every queued collective registers its completion event. A background thread checks
//! the oldest one (the communication stream completes in order) and NCCL's asynchronous
//! error. If a collective outlives the timeout, or NCCL reports an error, the watchdog
//! prints a clear message, aborts the communicator (so kernels in flight return) and ends
//! the process with exit code 1, so that the launcher stops the other ranks.

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

pub struct Watchdog {
    queue: Arc<Mutex<VecDeque<Pending>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn start(raw: Arc<RawComm>, rank: usize, timeout: Duration) -> Self {
        let queue: Arc<Mutex<VecDeque<Pending>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (q, s) = (queue.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("nccl-watchdog-{rank}"))
            .spawn(move || watch(raw, rank, timeout, q, s))
            .expect("spawning the watchdog thread");
        Self {
            queue,
            stop,
            thread: Some(thread),
        }
    }

    pub fn push(&self, p: Pending) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(p);
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
    queue: Arc<Mutex<VecDeque<Pending>>>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(2));
        if let Err(e) = raw.async_error() {
            fatal(&raw, rank, e.to_string());
        }
        let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(front) = q.front() {
            match front.event.try_is_complete() {
                Ok(true) => {
                    q.pop_front();
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
