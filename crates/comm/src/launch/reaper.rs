//! Ranks die with the launcher, even when it is killed with SIGKILL.
//!
//! Two mechanisms, each enough for the rank itself:
//! - every rank is started with `PR_SET_PDEATHSIG = SIGKILL` (Linux): the kernel kills it
//!   when the thread that forked it exits. `run` forks from the calling thread and returns
//!   only when the ranks are gone, so that thread outlives them;
//! - a watchdog process, forked from the launcher once the ranks are up, waits on a pipe
//!   whose only writer is the launcher. When the launcher dies the pipe closes and the
//!   watchdog SIGKILLs every rank's process group, so what the ranks started goes too.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes the child get SIGKILL when the launcher dies (Linux's parent-death signal).
pub(crate) fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getpid(2) in the parent; in the child only async-signal-safe calls
        // (prctl, getppid) and no allocation.
        let parent = unsafe { libc::getpid() };
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The launcher died between fork and prctl: the signal will never come.
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// A forked process that SIGKILLs the ranks' process groups if the launcher dies.
pub(crate) struct Watchdog {
    pid: libc::pid_t,
    /// Write end of the pipe; closing it without writing means "the launcher died".
    fd: libc::c_int,
}

impl Watchdog {
    /// Forks the watchdog for these process groups (the ranks' pids).
    pub(crate) fn start(groups: &[u32]) -> io::Result<Self> {
        let groups: Vec<libc::pid_t> = groups.iter().map(|&g| g as libc::pid_t).collect();
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2(2) into a 2-element array. Close-on-exec: ranks started later by
        // this process must not hold the write end.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: in the child, only async-signal-safe calls (close, sigaction-style
        // signal, read, kill, _exit) on memory allocated before the fork.
        match unsafe { libc::fork() } {
            -1 => {
                let e = io::Error::last_os_error();
                unsafe {
                    libc::close(fds[0]);
                    libc::close(fds[1]);
                }
                Err(e)
            }
            0 => unsafe {
                libc::close(fds[1]);
                // Not the terminal's user: the launcher handles those signals.
                for sig in super::signals::CAUGHT {
                    libc::signal(sig, libc::SIG_IGN);
                }
                // Hold none of the caller's stdio open.
                for fd in 0..3 {
                    libc::close(fd);
                }
                let mut byte = 0u8;
                let n = loop {
                    let n = libc::read(fds[0], (&mut byte as *mut u8).cast(), 1);
                    if n == -1 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    break n;
                };
                if n != 1 {
                    for &g in &groups {
                        libc::kill(-g, libc::SIGKILL);
                    }
                }
                libc::_exit(0)
            },
            pid => {
                unsafe { libc::close(fds[0]) };
                Ok(Self { pid, fd: fds[1] })
            }
        }
    }

    /// The launcher is done with the ranks: the watchdog exits without killing anything.
    /// It is killed too, so that a watchdog that cannot run (stopped, frozen) does not hold
    /// the launcher: with the ranks gone it has nothing left to do.
    pub(crate) fn stand_down(self) {
        // SAFETY: write/close our pipe end, kill and reap our child (not yet reaped, so its
        // pid is still ours).
        unsafe {
            libc::write(self.fd, b"d".as_ptr().cast(), 1);
            libc::close(self.fd);
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A watchdog that was stopped (SIGSTOP) does not hold the launcher at the end, and
    /// standing down kills no rank.
    #[test]
    fn stand_down_returns_though_the_watchdog_is_stopped() {
        let mut rank = Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        let dog = Watchdog::start(&[rank.id()]).unwrap();
        // SAFETY: our own child.
        assert_eq!(unsafe { libc::kill(dog.pid, libc::SIGSTOP) }, 0);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            dog.stand_down();
            let _ = tx.send(());
        });
        // Returns at once when it works; the bound only turns a hang into a failure.
        let done = rx.recv_timeout(Duration::from_secs(120));
        let alive = rank.try_wait().unwrap().is_none();
        let _ = rank.kill();
        let _ = rank.wait();
        assert!(done.is_ok(), "stand_down hung on a stopped watchdog");
        assert!(alive, "standing down killed the rank");
    }
}
