//! Watching a started job's ranks: the first failure stops the others (and says whether a
//! restart may help); a signal to the launcher is forwarded to every rank's process group.

use super::{bad, signals, Failed, USER_ERROR_EXIT};
use crate::error::CommError;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

pub(super) fn supervise(
    children: &mut [(usize, Child)],
    grace: Duration,
) -> std::result::Result<(), Failed> {
    let mut running = children.len();
    while running > 0 {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(sig) = signals::pending() {
            return Err(Failed::Final(stop(children, sig, grace)));
        }
        running = 0;
        let mut failed: Vec<(usize, ExitStatus)> = Vec::new();
        for (rank, child) in children.iter_mut() {
            match child.try_wait().map_err(|e| Failed::Final(e.into()))? {
                None => running += 1,
                Some(st) if !st.success() => failed.push((*rank, st)),
                Some(_) => {}
            }
        }
        if !failed.is_empty() {
            // A rank still dying when the others were polled (its sockets already closed,
            // so a peer failed and was reaped first) is waited for and counted: under load
            // a SIGKILLed rank with many threads stays unreapable for a while after its
            // peers see it gone.
            for (rank, child) in children.iter_mut() {
                if failed.iter().any(|(r, _)| r == rank) || !exiting(child.id()) {
                    continue;
                }
                match child.wait().map_err(|e| Failed::Final(e.into()))? {
                    st if !st.success() => failed.push((*rank, st)),
                    _ => {}
                }
            }
            kill_all(children);
            // A rank killed by a signal is the likely cause of the others' failing (they
            // exit naming it): name it first.
            failed.sort_by_key(|(r, st)| (st.signal().is_none(), *r));
            let (rank, st) = failed[0];
            let also: Vec<String> = failed[1..]
                .iter()
                .map(|(r, s)| format!("rank {r} ({s})"))
                .collect();
            let also = if also.is_empty() {
                String::new()
            } else {
                format!("; also failed: {}", also.join(", "))
            };
            let retry = !failed
                .iter()
                .any(|(_, s)| s.code() == Some(USER_ERROR_EXIT));
            let err = bad(format!(
                "rank {rank} failed ({st}){also}; stopped the other ranks"
            ));
            return Err(Failed::Rank { err, retry });
        }
    }
    Ok(())
}

/// Whether process `pid` is exiting (the kernel's PF_EXITING in the flags of
/// /proc/<pid>/stat): killed or returned, not yet reapable. False where it cannot be read.
fn exiting(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| stat_exiting(&s))
}

/// [`exiting`] from the text of /proc/<pid>/stat: its flags are the 7th field after the
/// command name's closing parenthesis (the name may hold spaces and parentheses).
fn stat_exiting(stat: &str) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Some((_, after)) = stat.rsplit_once(')') else {
        return false;
    };
    let flags = after
        .split_whitespace()
        .nth(6)
        .and_then(|f| f.parse::<u64>().ok());
    flags.is_some_and(|f| f & PF_EXITING != 0)
}

/// Forwards `sig` to every rank's process group, waits up to `grace` for the ranks to
/// exit, then kills the groups.
fn stop(children: &mut [(usize, Child)], sig: libc::c_int, grace: Duration) -> CommError {
    let name = signals::name(sig);
    eprintln!("comm-launch: got {name}; forwarding it to every rank, SIGKILL after {grace:?}");
    signal_groups(children, sig);
    let deadline = Instant::now().checked_add(grace);
    let mut stragglers = Vec::new();
    loop {
        stragglers.clear();
        for (rank, c) in children.iter_mut() {
            if let Ok(None) = c.try_wait() {
                stragglers.push(*rank);
            }
        }
        if stragglers.is_empty() || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_all(children);
    CommError::Interrupted {
        signal: name,
        signo: sig,
        detail: if stragglers.is_empty() {
            "forwarded it to every rank; all exited".into()
        } else {
            format!("forwarded it to every rank; killed ranks {stragglers:?} after {grace:?}")
        },
    }
}

fn signal_groups(children: &[(usize, Child)], sig: libc::c_int) {
    for (_, c) in children {
        // SAFETY: plain kill(2) on the rank's process group (pgid = its pid). The group
        // outlives its leader while any member (something the rank started) is alive.
        unsafe { libc::kill(-(c.id() as i32), sig) };
    }
}

/// SIGKILLs every rank's process group (what the ranks started included), reaps the ranks.
pub(super) fn kill_all(children: &mut [(usize, Child)]) {
    signal_groups(children, libc::SIGKILL);
    for (_, c) in children.iter_mut() {
        let _ = c.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::{exiting, stat_exiting};

    #[test]
    fn an_exiting_process_is_told_from_its_stat_line() {
        // Fields after the name: state ppid pgrp session tty_nr tpgid flags ...
        let line = |flags: u64| format!("42 (b) (x) R 1 42 42 0 -1 {flags} 0 0 0 0 1 1");
        assert!(stat_exiting(&line(0x404044)));
        assert!(!stat_exiting(&line(0x400040)));
        assert!(!stat_exiting("42 (no closing"));
        assert!(!stat_exiting("42 (b) R 1 42"));
        // This process is running, and a pid that no process has cannot be read.
        assert!(!exiting(std::process::id()));
        assert!(!exiting(u32::MAX));
    }
}
