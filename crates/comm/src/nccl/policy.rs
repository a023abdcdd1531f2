//! When gather buffers are NCCL windows (`window`): the one decision, without CUDA so
//! that it is tested everywhere.

use crate::error::{CommError, Result};

/// The first NCCL whose symmetric kernels this relies on. 2.28.7's release notes fix
/// "potential data corruption with built-in symmetric kernels for small messages with size
/// granularity under 8 bytes or when multiple symmetric operations were aggregated in a
/// group"; 2.28.3 did both here (docs/results/windows-h200x4.md, calls 108 and 109).
pub const WINDOWS_MIN_NCCL: i32 = 22807;

/// Whether gather buffers are windows: as `COMM_NCCL_WINDOWS` (`env`) says, 1 or 0;
/// unset, where the runtime NCCL (`version`, as `ncclGetVersion` gives it) is 2.28.7 or
/// later. Asking for windows on an older NCCL is an error naming the variable.
pub(crate) fn windows_wanted(env: Option<&str>, version: Option<i32>) -> Result<bool> {
    let new_enough = version.is_some_and(|v| v >= WINDOWS_MIN_NCCL);
    let err = |msg: String| CommError::Env {
        name: "COMM_NCCL_WINDOWS".into(),
        msg,
    };
    match env {
        None | Some("") => Ok(new_enough),
        Some("0") => Ok(false),
        Some("1") if new_enough => Ok(true),
        Some("1") => Err(err(format!(
            "windows need NCCL 2.28.7 or later (before it, symmetric kernels corrupt grouped \
             and small gathers); this process loaded NCCL {}",
            dotted(version)
        ))),
        Some(v) => Err(err(format!(
            "{v:?}: 1 (gather buffers in NCCL windows) or 0"
        ))),
    }
}

/// Whether in-place all-gathers into gather buffers run on the copy engines (`super::ce`):
/// as `COMM_CE_GATHER` (`env`) says; unset or 0, not (NCCL's kernels). 1 needs gather
/// buffers in windows (`windows`) and NCCL 2.28 (`version`): the copies reach the peers'
/// buffers through the addresses in NCCL 2.28's window struct, whose layout later releases
/// may change. So do ranks on more than one node (`local_world`, launchers' LOCAL_WORLD_SIZE,
/// below `world`): the copies need every peer's memory mapped here. Anything else is an
/// error naming the variable.
pub(crate) fn ce_gather_wanted(
    env: Option<&str>,
    windows: bool,
    version: Option<i32>,
    (local_world, world): (Option<usize>, usize),
) -> Result<bool> {
    let err = |msg: String| CommError::Env {
        name: "COMM_CE_GATHER".into(),
        msg,
    };
    match env {
        None | Some("") | Some("0") => Ok(false),
        Some("1") if !version.is_some_and(|v| (22800..22900).contains(&v)) => Err(err(format!(
            "copy-engine gathers read NCCL 2.28's window layout; this process loaded NCCL {}",
            dotted(version)
        ))),
        Some("1") if !windows => Err(err(
            "copy-engine gathers need gather buffers in NCCL windows (COMM_NCCL_WINDOWS is 0, or NCCL is older than 2.28.7)".into(),
        )),
        Some("1") => match local_world {
            Some(l) if l < world => Err(err(format!(
                "copy-engine gathers need every rank on one node; LOCAL_WORLD_SIZE is {l}, WORLD_SIZE {world}"
            ))),
            _ => Ok(true),
        },
        Some(v) => Err(err(format!(
            "{v:?}: 1 (all-gathers into gather buffers by the copy engines) or 0 (by NCCL)"
        ))),
    }
}

/// 22809 as "2.28.9".
fn dotted(version: Option<i32>) -> String {
    version.map_or("of unknown version".into(), |v| {
        format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
    })
}

/// The loaded NCCL's version, dotted ("2.28.9"), for a run's log: which NCCL a figure was
/// measured with (`None` where none is loaded).
pub fn loaded_version() -> Option<String> {
    super::version().map(|v| dotted(Some(v)))
}

/// One line on where this process's gather buffers are, for a run's log: from the bytes
/// in windows (`window_bytes`), the loaded NCCL's version and `COMM_NCCL_WINDOWS`.
pub fn windows_note() -> String {
    let env = std::env::var("COMM_NCCL_WINDOWS").ok();
    note(super::window_bytes(), super::version(), env.as_deref())
}

/// [`windows_note`] of `bytes` in windows, NCCL `version` and `COMM_NCCL_WINDOWS` (`env`).
fn note(bytes: u64, version: Option<i32>, env: Option<&str>) -> String {
    let v = dotted(version);
    match (bytes, env) {
        (b, _) if b > 0 => format!(
            "gather buffers: {:.2} GiB in NCCL windows (NCCL {v}'s symmetric kernels; COMM_NCCL_WINDOWS=0 turns them off)",
            b as f64 / (1u64 << 30) as f64
        ),
        (_, Some("0")) => "gather buffers: not in NCCL windows (COMM_NCCL_WINDOWS=0)".into(),
        _ if version.is_some_and(|v| v < WINDOWS_MIN_NCCL) => format!(
            "gather buffers: not in NCCL windows: NCCL {v} is loaded, they need 2.28.7 or later (with 2.28.9, xl zero1 at world 2 took 2 % less and fsdp 6 % less: docs/results/gpus-s29.md)"
        ),
        _ => "gather buffers: none in NCCL windows".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_by_default_from_nccl_2_28_7_and_never_on_an_older_one() {
        assert!(!windows_wanted(None, Some(22803)).unwrap());
        assert!(windows_wanted(None, Some(22807)).unwrap());
        assert!(windows_wanted(Some(""), Some(22909)).unwrap());
        assert!(!windows_wanted(None, None).unwrap());
        assert!(!windows_wanted(Some("0"), Some(22909)).unwrap());
        assert!(windows_wanted(Some("1"), Some(22809)).unwrap());
        let e = windows_wanted(Some("1"), Some(22803))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("COMM_NCCL_WINDOWS") && e.contains("2.28.3"),
            "{e}"
        );
        let e = windows_wanted(Some("yes"), Some(22909))
            .unwrap_err()
            .to_string();
        assert!(e.contains("COMM_NCCL_WINDOWS") && e.contains("yes"), "{e}");
    }

    #[test]
    fn copy_engine_gathers_only_when_asked_and_only_in_windows_of_nccl_2_28() {
        let one = (Some(4), 4);
        let ok = |env: Option<&str>| ce_gather_wanted(env, true, Some(22809), one).unwrap();
        assert!(!ok(None) && !ok(Some("0")) && ok(Some("1")));
        assert!(ce_gather_wanted(Some("1"), true, Some(22809), (None, 4)).unwrap());
        let e = |env, win, v| {
            ce_gather_wanted(Some(env), win, v, one)
                .unwrap_err()
                .to_string()
        };
        let nodes = ce_gather_wanted(Some("1"), true, Some(22809), (Some(4), 8))
            .unwrap_err()
            .to_string();
        assert!(
            nodes.contains("COMM_CE_GATHER") && nodes.contains("LOCAL_WORLD_SIZE is 4"),
            "{nodes}"
        );
        let old = e("1", true, Some(22703));
        assert!(
            old.contains("COMM_CE_GATHER") && old.contains("2.27.3"),
            "{old}"
        );
        let new = e("1", true, Some(22903));
        assert!(new.contains("2.29.3"), "{new}");
        let off = e("1", false, Some(22809));
        assert!(off.contains("COMM_NCCL_WINDOWS"), "{off}");
        let bad = e("pull", true, Some(22809));
        assert!(
            bad.contains("COMM_CE_GATHER") && bad.contains("pull"),
            "{bad}"
        );
    }

    #[test]
    fn the_note_says_where_the_buffers_are_and_why() {
        let on = note(3 << 29, Some(22809), None);
        assert!(on.contains("1.50 GiB") && on.contains("2.28.9"), "{on}");
        let old = note(0, Some(22803), None);
        assert!(
            old.contains("2.28.3 is loaded") && old.contains("2.28.7"),
            "{old}"
        );
        let off = note(0, Some(22809), Some("0"));
        assert!(off.contains("COMM_NCCL_WINDOWS=0"), "{off}");
    }
}
