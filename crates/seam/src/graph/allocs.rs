//! What a captured graph allocates: its allocation and free nodes, walked in the order
//! `cuGraphGetNodes` returns them, the order they were added (so it does; CUDA's
//! documentation does not promise it).
//!
//! Why: the captured step's memory (`CU_GRAPH_MEM_ATTR_USED_MEM_HIGH`, [`super::mem_high`])
//! is the physical memory CUDA maps behind these nodes, laid out once for the whole graph.
//! The most bytes live at once in capture order is what the lifetimes themselves ask for;
//! what the graph's memory holds beyond it is CUDA's layout.

#[cfg(feature = "cuda")]
use super::nodes::{check, node_type, nodes};
#[cfg(feature = "cuda")]
use candle_core::cuda_backend::cudarc::driver::sys;

/// A captured graph's allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraphAllocs {
    /// Allocation nodes.
    pub count: usize,
    /// Their bytes, all added.
    pub bytes: u64,
    /// The most bytes live at once, walking the nodes in capture order (an allocation lives
    /// from its node to the free node of its address).
    pub live_peak: u64,
    /// Bytes of allocations no node frees: the graph's outputs, live after each replay.
    pub unfreed: u64,
}

/// An allocation node (address, bytes) or a free node (address). Without CUDA only the
/// tests walk any.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) enum Node {
    Alloc(u64, u64),
    Free(u64),
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl GraphAllocs {
    /// The tally of `nodes` in their order. A free of an address no allocation node made
    /// (memory from before the capture) counts nothing.
    pub(super) fn tally(nodes: impl IntoIterator<Item = Node>) -> Self {
        let mut live = std::collections::HashMap::<u64, u64>::new();
        let (mut now, mut out) = (0u64, Self::default());
        for n in nodes {
            match n {
                Node::Alloc(at, bytes) => {
                    now += bytes;
                    now -= live.insert(at, bytes).unwrap_or(0);
                    out.count += 1;
                    out.bytes += bytes;
                    out.live_peak = out.live_peak.max(now);
                }
                Node::Free(at) => now -= live.remove(&at).unwrap_or(0),
            }
        }
        out.unfreed = live.values().sum();
        out
    }
}

/// [`GraphAllocs`] of a captured graph.
#[cfg(feature = "cuda")]
pub(super) fn walk(graph: sys::CUgraph) -> Result<GraphAllocs, String> {
    use sys::CUgraphNodeType as T;
    let mut seen = Vec::new();
    for node in nodes(graph)? {
        match node_type(node)? {
            T::CU_GRAPH_NODE_TYPE_MEM_ALLOC => {
                // SAFETY: plain old data, filled by the driver below.
                let mut p: sys::CUDA_MEM_ALLOC_NODE_PARAMS = unsafe { std::mem::zeroed() };
                // SAFETY: `node` is an allocation node of a live graph.
                check("allocation node", unsafe {
                    sys::cuGraphMemAllocNodeGetParams(node, &mut p)
                })?;
                seen.push(Node::Alloc(p.dptr, p.bytesize as u64));
            }
            T::CU_GRAPH_NODE_TYPE_MEM_FREE => {
                let mut at: sys::CUdeviceptr = 0;
                // SAFETY: `node` is a free node of a live graph.
                check("free node", unsafe {
                    sys::cuGraphMemFreeNodeGetParams(node, &mut at)
                })?;
                seen.push(Node::Free(at));
            }
            _ => {}
        }
    }
    Ok(GraphAllocs::tally(seen))
}

#[cfg(test)]
mod tests {
    use super::{GraphAllocs, Node::*};

    #[test]
    fn the_peak_is_the_most_live_at_once_in_node_order() {
        // a (100) and b (50) live together, a freed, c (120) with b: peak 170; d (7) never
        // freed; a free of memory from before the capture counts nothing.
        let t = GraphAllocs::tally([
            Alloc(1, 100),
            Alloc(2, 50),
            Free(1),
            Free(99),
            Alloc(3, 120),
            Free(2),
            Alloc(4, 7),
            Free(3),
        ]);
        assert_eq!(
            t,
            GraphAllocs {
                count: 4,
                bytes: 277,
                live_peak: 170,
                unfreed: 7
            }
        );
        // An address used again after its free starts a new allocation.
        let t = GraphAllocs::tally([Alloc(1, 10), Free(1), Alloc(1, 30), Alloc(2, 5)]);
        assert_eq!((t.live_peak, t.unfreed, t.count), (35, 35, 3));
    }
}
