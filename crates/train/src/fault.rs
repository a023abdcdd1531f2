//! Fault injection for the restart tests: `TRAIN_FAULT_KILL="rank:step:attempt,..."` makes
//! rank `rank` SIGKILL itself once step `step` is queued, in launcher attempt `attempt`
//! (`launch::restart_count`, 0 without a restart). A real kill -9, as a preempted or crashed
//! process dies: nothing of the step is flushed, no checkpoint is written. Unset: nothing.

/// Whether `spec` names (rank, step, attempt).
fn asks(spec: &str, rank: usize, step: u64, attempt: u64) -> bool {
    spec.split(',').any(|one| {
        let f: Vec<&str> = one.trim().split(':').collect();
        matches!(f[..], [r, s, a] if r.parse() == Ok(rank) && s.parse() == Ok(step) && a.parse() == Ok(attempt))
    })
}

/// SIGKILLs this process where `TRAIN_FAULT_KILL` asks for rank `rank` at step `step`.
pub fn kill_if_asked(rank: usize, step: u64) {
    let Ok(spec) = std::env::var("TRAIN_FAULT_KILL") else {
        return;
    };
    let attempt = crate::launch::restart_count();
    if asks(&spec, rank, step, attempt) {
        eprintln!("train: TRAIN_FAULT_KILL: rank {rank} kills itself (SIGKILL) at step {step}");
        let me = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-9", &me])
            .status();
        // `kill` missing: die by a signal all the same.
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_spec_names_rank_step_and_attempt() {
        let s = "1:7:0, 0:13:1";
        assert!(super::asks(s, 1, 7, 0));
        assert!(super::asks(s, 0, 13, 1));
        assert!(!super::asks(s, 1, 7, 1), "another attempt");
        assert!(!super::asks(s, 0, 7, 0), "another rank");
        assert!(!super::asks("junk", 0, 7, 0));
    }
}
