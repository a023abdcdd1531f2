//! The compute kernels of a capture raised above the lowest stream priority
//! (`SEAM_GRAPH_COMPUTE_PRIORITY`, levels above it; unset or 0: left as captured).
//!
//! Why: candle computes on CUDA's per-thread stream, whose priority is the lowest and cannot
//! be changed, so inside a replay its kernels rank with any other stream at the lowest
//! priority. At world 4 comm's copy-engine adds (`comm_sum_parts`, up to 528 blocks) run
//! beside the backward on such a stream, and the backward waits 20-41 µs for SMs while they
//! hold them (session 38, call 205: 1.3-1.5 ms of gaps a step). The graph is instantiated
//! with use-node-priority (`super::capture`), so a kernel node's priority attribute decides
//! which pending blocks get a freed SM first. [`raise_lowest`] sets every kernel node still
//! at the lowest priority `levels` above it, short of the highest (NCCL's stream): a stream
//! meant to yield to the compute kernels must then be created between the two (comm's
//! `COMM_CE_ADDS_PRIORITY`).
//!
//! Off by default: at world 2 it changes nothing beside comm's adds, whose blocks are all
//! resident from the start; with the adds in short blocks (`COMM_CE_ADDS_BLOCKS=all`) it
//! closes the backward's gaps but slows its kernels as much, and DDP waits for the adds
//! after the backward (docs/results/gpus-s39.md).

#[cfg(feature = "cuda")]
use super::nodes::{capturing_graph, check, node_type, nodes};
#[cfg(feature = "cuda")]
use candle_core::cuda_backend::cudarc::driver::{result, sys, CudaStream};

/// `SEAM_GRAPH_COMPUTE_PRIORITY` (`env`): levels above the lowest priority, 0 to 5; unset or
/// empty, 0. Any other value is an error naming the variable.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn levels(env: Option<&str>) -> Result<i32, String> {
    match env {
        None | Some("") => Ok(0),
        Some(v) => match v.parse::<i32>() {
            Ok(n) if (0..=5).contains(&n) => Ok(n),
            _ => Err(format!(
                "SEAM_GRAPH_COMPUTE_PRIORITY={v:?}: levels above the lowest stream priority, 0 to 5"
            )),
        },
    }
}

#[cfg(feature = "cuda")]
/// How many kernel nodes the capture on `stream` has, and how many of them were raised
/// from the lowest priority to `levels` above it (never past the highest).
pub fn raise_lowest(stream: &CudaStream, levels: i32) -> Result<(usize, usize), String> {
    let (least, greatest) =
        result::stream::get_priority_range().map_err(|e| format!("priority range: {e:?}"))?;
    // Greater priorities are lower numbers.
    let to = (least - levels).max(greatest);
    let (graph, _) = capturing_graph(stream, "priorities")?;
    let attr = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PRIORITY;
    let (mut kernels, mut raised) = (0, 0);
    for n in nodes(graph)? {
        if node_type(n)? != sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
            continue;
        }
        kernels += 1;
        // SAFETY: plain old data, filled in by the driver.
        let mut v: sys::CUkernelNodeAttrValue = unsafe { std::mem::zeroed() };
        // SAFETY: `n` is a kernel node of the live capture graph.
        check("kernel priority", unsafe {
            sys::cuGraphKernelNodeGetAttribute(n, attr, &mut v)
        })?;
        // SAFETY: the priority member is the one this attribute sets.
        if unsafe { v.priority } != least || to == least {
            continue;
        }
        v.priority = to;
        // SAFETY: as above; the driver copies the value.
        check("kernel priority", unsafe {
            sys::cuGraphKernelNodeSetAttribute(n, attr, &v)
        })?;
        raised += 1;
    }
    Ok((kernels, raised))
}

#[cfg(test)]
mod tests {
    use super::levels;

    #[test]
    fn levels_are_read_from_the_variable_and_bad_values_name_it() {
        assert_eq!(levels(None), Ok(0));
        assert_eq!(levels(Some("")), Ok(0));
        assert_eq!(levels(Some("2")), Ok(2));
        for bad in ["6", "-1", "high"] {
            let e = levels(Some(bad)).unwrap_err();
            assert!(
                e.contains("SEAM_GRAPH_COMPUTE_PRIORITY") && e.contains(bad),
                "{e}"
            );
        }
    }
}
