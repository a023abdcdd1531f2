//! SIGINT, SIGTERM and SIGHUP caught (not fatal): the launcher's while ranks run, so that
//! it can forward them to every rank and stop the job; a program's (`train run`), so that
//! it can write a checkpoint before it exits.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signals the launcher catches and forwards.
pub(crate) const CAUGHT: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The last caught signal, 0 for none.
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe: one atomic store.
    PENDING.store(sig, Ordering::SeqCst);
}

/// Caught signals' previous dispositions; restored on drop.
pub struct Handlers {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

/// Installs the handlers. A signal already ignored (`nohup` ignores SIGHUP) stays ignored.
pub fn install() -> std::io::Result<Handlers> {
    PENDING.store(0, Ordering::SeqCst);
    let mut old = Vec::new();
    for sig in CAUGHT {
        // SAFETY: sigaction(2) with zeroed, then filled, plain-data structs; the handler
        // only does an atomic store.
        unsafe {
            let mut prev: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut prev) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if prev.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            old.push((sig, prev));
        }
    }
    Ok(Handlers { old })
}

impl Drop for Handlers {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restores the disposition saved by `install`.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
    }
}

/// The signal caught since `install`, if any.
pub fn pending() -> Option<libc::c_int> {
    match PENDING.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// "SIGTERM" for 15, and so on.
pub fn name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}
