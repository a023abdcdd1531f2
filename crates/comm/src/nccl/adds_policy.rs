//! The switches of the copy-engine reduce-scatters' adds (`super::ce_adds`): where they run,
//! how many blocks a run takes, and their stream's priority, each from its environment
//! variable, and whether chained gathers take a lane of their own (`super::ce_lane`); tested
//! without CUDA.

use crate::error::{CommError, Result};

/// Where the copy-engine reduce-scatters' adds run, as `COMM_CE_ADDS` (`env`) says:
/// `arrival` (unset): on a stream of their own as soon as a launch's parts have arrived, so
/// that all but the last launch's adds run beside the backward; `wait`: on the compute stream
/// when the step waits for the gradients (after the backward). Any other value is an error
/// naming the variable.
pub(crate) fn adds_at_arrival(env: Option<&str>) -> Result<bool> {
    match env {
        None | Some("") | Some("arrival") => Ok(true),
        Some("wait") => Ok(false),
        Some(v) => Err(CommError::Env {
            name: "COMM_CE_ADDS".into(),
            msg: format!(
                "{v:?}: arrival (the adds on their own stream as the parts arrive) or wait (on the compute stream, when the gradients are waited for)"
            ),
        }),
    }
}

/// The most blocks a run of the copy-engine adds takes (each 256 threads, a grid-stride
/// loop), as `COMM_CE_ADDS_BLOCKS` (`env`) says: unset, 528 (4 an SM of an H100 or H200);
/// a number from 1 to 528 caps it, to measure what the adds take from the backward beside
/// them; `all`, no cap: a block for every 2048 elements, each one pass, so that a kernel of
/// a higher priority gets SMs as the adds' short blocks end (`COMM_CE_ADDS_PRIORITY`).
/// Any other value is an error naming the variable.
pub(crate) fn adds_blocks(env: Option<&str>) -> Result<u32> {
    const MOST: u32 = 132 * 4;
    match env {
        None | Some("") => Ok(MOST),
        Some("all") => Ok(u32::MAX),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=MOST).contains(&n) => Ok(n),
            _ => Err(CommError::Env {
                name: "COMM_CE_ADDS_BLOCKS".into(),
                msg: format!("{v:?}: the most blocks a run of the adds takes, 1 to {MOST}, or all"),
            }),
        },
    }
}

/// The adds' stream's levels above the lowest priority, as `COMM_CE_ADDS_PRIORITY` (`env`)
/// says: unset, 0; 1 to 5 (`super::device::adds_stream`). Any other value is an error
/// naming the variable.
pub(crate) fn adds_priority(env: Option<&str>) -> Result<i32> {
    match env.filter(|v| !v.is_empty()).map(|v| (v, v.parse::<i32>())) {
        None => Ok(0),
        Some((_, Ok(n))) if (0..=5).contains(&n) => Ok(n),
        Some((v, _)) => Err(CommError::Env {
            name: "COMM_CE_ADDS_PRIORITY".into(),
            msg: format!("{v:?}: levels above the lowest stream priority, 0 to 5"),
        }),
    }
}

/// `COMM_CE_GATHER_LANE`: `Some(true)` for 1, `Some(false)` for 0, `None` unset or empty;
/// another value is an error naming the variable.
pub(super) fn gather_lane(env: Option<&str>) -> Result<Option<bool>> {
    match env {
        None | Some("") => Ok(None),
        Some("1") => Ok(Some(true)),
        Some("0") => Ok(Some(false)),
        Some(v) => Err(CommError::Env {
            name: "COMM_CE_GATHER_LANE".into(),
            msg: format!(
                "{v:?}: 1 (chained gathers on streams of their own) or 0 (on the communication stream)"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adds_take_at_most_528_blocks_a_run_unless_capped() {
        assert_eq!(adds_blocks(None).unwrap(), 528);
        assert_eq!(adds_blocks(Some("132")).unwrap(), 132);
        assert_eq!(adds_blocks(Some("all")).unwrap(), u32::MAX);
        for bad in ["0", "529", "many"] {
            let e = adds_blocks(Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains("COMM_CE_ADDS_BLOCKS") && e.contains("1 to 528"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_adds_run_at_arrival_unless_asked_to_wait() {
        assert!(adds_at_arrival(None).unwrap());
        assert!(adds_at_arrival(Some("arrival")).unwrap());
        assert!(!adds_at_arrival(Some("wait")).unwrap());
        let e = adds_at_arrival(Some("later")).unwrap_err().to_string();
        assert!(e.contains("COMM_CE_ADDS") && e.contains("\"later\""), "{e}");
    }

    #[test]
    fn the_adds_stream_is_raised_only_as_asked() {
        assert_eq!(adds_priority(None).unwrap(), 0);
        assert_eq!(adds_priority(Some("1")).unwrap(), 1);
        let e = adds_priority(Some("9")).unwrap_err().to_string();
        assert!(
            e.contains("COMM_CE_ADDS_PRIORITY") && e.contains("\"9\""),
            "{e}"
        );
    }

    #[test]
    fn the_gather_lane_switch_is_1_0_or_unset_and_anything_else_names_the_variable() {
        assert_eq!(super::gather_lane(None).unwrap(), None);
        assert_eq!(super::gather_lane(Some("0")).unwrap(), Some(false));
        assert_eq!(super::gather_lane(Some("1")).unwrap(), Some(true));
        let e = super::gather_lane(Some("yes")).unwrap_err().to_string();
        assert!(e.contains("COMM_CE_GATHER_LANE"), "{e}");
    }
}
