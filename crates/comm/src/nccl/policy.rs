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

/// A use of the copy engines that [`ce_wanted`] decides on: its variable, its name in
/// errors, the calls it takes, the worlds where it is on by default.
pub(crate) struct CeUse {
    pub var: &'static str,
    name: &'static str,
    calls: &'static str,
    worlds: &'static [usize],
}

/// In-place all-gathers into gather buffers (`super::ce`), by default at [`CE_WORLDS`].
pub(crate) const CE_GATHER: CeUse = CeUse {
    var: "COMM_CE_GATHER",
    name: "copy-engine gathers",
    calls: "all-gathers into gather buffers",
    worlds: CE_WORLDS,
};

/// Deferred in-place bf16 reduce-scatters (`super::ce_reduce`), by default at
/// [`CE_REDUCE_WORLDS`].
pub(crate) const CE_REDUCE: CeUse = CeUse {
    var: "COMM_CE_REDUCE",
    name: "copy-engine reduce-scatters",
    calls: "in-place reduce-scatters",
    worlds: CE_REDUCE_WORLDS,
};

/// Whether use `u` of the copy engines is on, as its variable (`env`) says: 1 or 0; unset,
/// at its default worlds where it can run. It needs NCCL windows (`windows`) and NCCL 2.28
/// (`version`): the copies reach the peers' buffers through the addresses in NCCL 2.28's
/// window struct, whose layout later releases may change. And every rank on one node, as
/// the launcher says (`local_world`, its LOCAL_WORLD_SIZE, against `world`): the copies
/// need every peer's memory mapped here. Asking for it where it cannot run, or any other
/// value, is an error naming the variable.
pub(crate) fn ce_wanted(
    u: &CeUse,
    env: Option<&str>,
    windows: bool,
    version: Option<i32>,
    (local_world, world): (Option<usize>, usize),
) -> Result<bool> {
    let (name, calls) = (u.name, u.calls);
    let err = |msg: String| CommError::Env {
        name: u.var.into(),
        msg,
    };
    let nccl_2_28 = nccl_2_28(version);
    match env {
        None | Some("") => Ok(by_default(u.worlds, windows, version, (local_world, world))),
        Some("0") => Ok(false),
        Some("1") if !nccl_2_28 => Err(err(format!(
            "{name} read NCCL 2.28's window layout; this process loaded NCCL {}",
            dotted(version)
        ))),
        Some("1") if !windows => Err(err(format!(
            "{name} need NCCL windows (COMM_NCCL_WINDOWS is 0, or NCCL is older than 2.28.7)"
        ))),
        Some("1") => match local_world {
            Some(l) if l < world => Err(err(format!(
                "{name} need every rank on one node; LOCAL_WORLD_SIZE is {l}, WORLD_SIZE {world}"
            ))),
            _ => Ok(true),
        },
        Some(v) => Err(err(format!(
            "{v:?}: 1 ({calls} by the copy engines) or 0 (by NCCL)"
        ))),
    }
}

/// The worlds whose gathers run on the copy engines by default (`CE_GATHER`). At
/// world 2 (one peer, 357 GB/s into a GPU on H200) fsdp took 2.1-2.3 ms less a step with them
/// and zero1 0.04-0.08 ms less (calls 161, 162, 164); at world 4 (three peers at once,
/// 191-211 GB/s) fsdp took 8.1-11.5 ms more and zero1 the same (calls 162, 164;
/// docs/results/gpus-s30.md). Where ZeRO-1's and split DDP's launches (one with small f32
/// parameters outside its window, the other across a window per gradient) really ran on
/// them (session 38, docs/results/gpus-s38.md), at world 4 zero1 took 2.0 ms more with 8
/// rows a GPU and 1.1-1.35 ms less with 32, and split DDP 69.68 ms against 45.84.
pub const CE_WORLDS: &[usize] = &[2];

/// What `COMM_CE_REDUCE` asks for, for a memory plan: `Some(true)` for 1, `Some(false)` for
/// 0, `None` unset (or a bad value, which the communicator refuses, naming it).
pub fn ce_reduce_asked() -> Option<bool> {
    match std::env::var("COMM_CE_REDUCE").as_deref() {
        Ok("1") => Some(true),
        Ok("0") => Some(false),
        _ => None,
    }
}

/// The worlds whose deferred in-place bf16 reduce-scatters (ZeRO-1's) run on the copy engines
/// by default (`CE_REDUCE`). xl zero1 took 1.27 ms less a step at world 2 and 0.75 ms
/// less at world 4; fsdp, which waits for them during its backward and so does not defer
/// them, took 3.5 ms more at world 4 (call 166, nvidia-h200-x4; docs/results/gpus-s31.md).
pub const CE_REDUCE_WORLDS: &[usize] = &[2, 4];

/// The worlds where the communicator asks NCCL for its zero-CTA policy (`NCCL_CTA_POLICY_ZERO`,
/// through `ncclCommInitRankConfig`): NCCL then gathers into windows with the copy engines,
/// which a gather buffer asking for NCCL (`crate::Gatherer::Nccl`, ZeRO-1's) gets. At world 2,
/// with 4 of xl's 10 buckets gathered beside AdamW, zero1 took 38.67 ms against 39.87
/// (call 172) and 38.11 against 39.44 (call 173, nvidia-h200-x4), about 0.93× one GPU.
pub const NCCL_CE_WORLDS: &[usize] = &[2];

/// The CTA policy to ask NCCL for (2, zero-CTA) where the user set no `NCCL_CTA_POLICY`
/// (`env`), at [`NCCL_CE_WORLDS`] on one node (`local_world` against `world`), with windows
/// (`windows`) on NCCL 2.28 (`version`); `None`: NCCL's default or the user's variable.
pub(crate) fn nccl_cta_policy(
    env: Option<&str>,
    windows: bool,
    version: Option<i32>,
    worlds: (Option<usize>, usize),
) -> Option<i32> {
    (env.is_none() && by_default(NCCL_CE_WORLDS, windows, version, worlds)).then_some(2)
}

/// Whether NCCL 2.28 is loaded (`version`): the window layout the copy engines read.
fn nccl_2_28(version: Option<i32>) -> bool {
    version.is_some_and(|v| (22800..22900).contains(&v))
}

/// Whether a copy-engine use whose default `worlds` these are is on unset: at one of them,
/// every rank on one node (`local_world` against `world`), in windows (`windows`) of NCCL
/// 2.28 (`version`).
fn by_default(
    worlds: &[usize],
    windows: bool,
    version: Option<i32>,
    (local_world, world): (Option<usize>, usize),
) -> bool {
    nccl_2_28(version) && windows && local_world == Some(world) && worlds.contains(&world)
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
/// in windows (`window_bytes`), whether the copy engines gather into them (`ce_gathers`),
/// the loaded NCCL's version and `COMM_NCCL_WINDOWS`.
pub fn windows_note() -> String {
    let env = std::env::var("COMM_NCCL_WINDOWS").ok();
    let ce = super::ce_gathers();
    let mut n = note(super::window_bytes(), ce, super::version(), env.as_deref());
    if super::nccl_ce_gathers() {
        n += "; ZeRO-1's gathers by NCCL's copy engines (its zero-CTA policy; NCCL_CTA_POLICY=0: its symmetric kernels)";
    }
    if super::ce_reduces() {
        n += "; ZeRO-1's bf16 reduce-scatters by the copy engines (COMM_CE_REDUCE=0: by NCCL)";
    }
    n
}

/// [`windows_note`] of `bytes` in windows, gathered into by the copy engines (`ce`) or not,
/// NCCL `version` and `COMM_NCCL_WINDOWS` (`env`).
fn note(bytes: u64, ce: bool, version: Option<i32>, env: Option<&str>) -> String {
    let v = dotted(version);
    match (bytes, env) {
        (b, _) if b > 0 && ce => format!(
            "gather buffers: {:.2} GiB in NCCL windows, gathered into by the copy engines (COMM_CE_GATHER=0: by NCCL {v}'s symmetric kernels)",
            b as f64 / (1u64 << 30) as f64
        ),
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
    fn nccl_gathers_by_copy_engines_at_world_2_on_one_node_unless_the_user_says() {
        let v = Some(22809);
        assert_eq!(nccl_cta_policy(None, true, v, (Some(2), 2)), Some(2));
        assert_eq!(nccl_cta_policy(Some("0"), true, v, (Some(2), 2)), None);
        assert_eq!(nccl_cta_policy(None, false, v, (Some(2), 2)), None);
        assert_eq!(nccl_cta_policy(None, true, Some(22703), (Some(2), 2)), None);
        assert_eq!(nccl_cta_policy(None, true, v, (Some(1), 2)), None);
        assert_eq!(nccl_cta_policy(None, true, v, (Some(4), 4)), None);
    }

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
        let ok = |env: Option<&str>| ce_wanted(&CE_GATHER, env, true, Some(22809), one).unwrap();
        assert!(!ok(None) && !ok(Some("0")) && ok(Some("1")));
        assert!(ce_wanted(&CE_GATHER, Some("1"), true, Some(22809), (None, 4)).unwrap());
        // By default at world 2 only, on one node, in windows of NCCL 2.28, and quietly.
        let default =
            |win, v, local, world| ce_wanted(&CE_GATHER, None, win, v, (local, world)).unwrap();
        assert!(default(true, Some(22809), Some(2), 2));
        assert!(!default(true, Some(22809), Some(4), 4));
        assert!(!default(true, Some(22809), Some(1), 2));
        assert!(!default(true, Some(22809), None, 2));
        assert!(!default(false, Some(22803), Some(2), 2));
        assert!(!default(true, Some(22901), Some(2), 2));
        let e = |env, win, v| {
            ce_wanted(&CE_GATHER, Some(env), win, v, one)
                .unwrap_err()
                .to_string()
        };
        let nodes = ce_wanted(&CE_GATHER, Some("1"), true, Some(22809), (Some(4), 8))
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
        // The reduce-scatters: by default at worlds 2 and 4, asked for as the gathers are.
        let r = |env, world| ce_wanted(&CE_REDUCE, env, true, Some(22809), (Some(world), world));
        assert!(r(None, 2).unwrap() && r(None, 4).unwrap() && !r(None, 8).unwrap());
        assert!(r(Some("1"), 8).unwrap() && !r(Some("0"), 4).unwrap());
        let e2 = r(Some("yes"), 2).unwrap_err().to_string();
        assert!(
            e2.contains("COMM_CE_REDUCE") && e2.contains("reduce-scatters"),
            "{e2}"
        );
        let bad = e("pull", true, Some(22809));
        assert!(
            bad.contains("COMM_CE_GATHER") && bad.contains("pull"),
            "{bad}"
        );
    }

    #[test]
    fn the_note_says_where_the_buffers_are_and_why() {
        let on = note(3 << 29, false, Some(22809), None);
        assert!(on.contains("1.50 GiB") && on.contains("2.28.9"), "{on}");
        let ce = note(3 << 29, true, Some(22809), None);
        assert!(
            ce.contains("copy engines") && ce.contains("COMM_CE_GATHER=0"),
            "{ce}"
        );
        let old = note(0, false, Some(22803), None);
        assert!(
            old.contains("2.28.3 is loaded") && old.contains("2.28.7"),
            "{old}"
        );
        let off = note(0, false, Some(22809), Some("0"));
        assert!(off.contains("COMM_NCCL_WINDOWS=0"), "{off}");
    }
}
