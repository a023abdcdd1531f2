//! When gather buffers are NCCL windows (`window`): the one decision, without CUDA so
//! that it is tested everywhere.

use crate::error::{CommError, Result};

/// The first NCCL whose symmetric kernels this relies on. 2.28.7's release notes fix
/// "potential data corruption with built-in symmetric kernels for small messages with size
/// granularity under 8 bytes or when multiple symmetric operations were aggregated in a
/// group"; 2.28.3 did both here (docs/results/fsdp-h200x4.md, calls 108 and 109).
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
            version.map_or("of unknown version".into(), |v| v.to_string())
        ))),
        Some(v) => Err(err(format!(
            "{v:?}: 1 (gather buffers in NCCL windows) or 0"
        ))),
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
            e.contains("COMM_NCCL_WINDOWS") && e.contains("22803"),
            "{e}"
        );
        let e = windows_wanted(Some("yes"), Some(22909))
            .unwrap_err()
            .to_string();
        assert!(e.contains("COMM_NCCL_WINDOWS") && e.contains("yes"), "{e}");
    }
}
