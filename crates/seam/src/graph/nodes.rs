//! Splicing work into a capture with each small memset turned into a kernel.
//!
//! Why: cuBLASLt zeroes a 4-byte counter before many of its Hopper GEMMs (the split-K and
//! stream-K kernels, which are the faster ones: keeping only the others costs xl's
//! `--accum 4` step 10.5 ms of GEMM time, session 24 call 122). Captured, each is a memset
//! node, and between two kernels of a replay it costs about 4.6 µs of idle GPU, where a
//! kernel after a kernel starts within 0.1 µs. xl's step has 240 of them at `--accum 1`
//! and 1344 at `--accum 4`: 1.2 and 6.2 ms (call 119). A graph with allocation nodes (the
//! step's) cannot lose nodes, so the memsets are changed before they reach it: [`splice`]
//! captures the work on a side stream into a graph of its own, and adds its nodes to the
//! main capture, each small memset as a kernel that writes the same bytes
//! (kernels/memset.cu) and each kernel as it was, with its launch attributes (clusters).
//! `SEAM_GRAPH_MEMSETS=keep` turns this off.

use candle_core::cuda_backend::cudarc::driver::{result, sys, CudaStream};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/memset.ptx"));
/// Memsets of at most this many bytes become kernels.
const SMALL: usize = 4096;

pub(super) fn check(what: &str, r: sys::CUresult) -> Result<(), String> {
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        r => Err(format!("{what}: {r:?}")),
    }
}

/// Queues what `f` queues into `main`'s capture, through a capture of its own on `side`
/// whose small memsets become kernels. `Ok(false)`, with nothing queued, where there is
/// nothing to change (no memset, a memset over 4 KiB, a node other than kernels
/// and memsets, or `SEAM_GRAPH_MEMSETS=keep`): the caller then queues the work on `main`
/// itself.
pub fn splice(
    d: &candle_core::CudaDevice,
    main: &Arc<CudaStream>,
    side: &Arc<CudaStream>,
    f: impl FnOnce(&Arc<CudaStream>) -> candle_core::Result<()>,
) -> Result<bool, String> {
    if std::env::var("SEAM_GRAPH_MEMSETS").is_ok_and(|v| v == "keep") {
        return Ok(false);
    }
    side.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(|e| format!("side capture: {e:?}"))?;
    let queued = f(side);
    // SAFETY: ends the capture begun above, on this thread.
    let g = unsafe { result::stream::end_capture(side.cu_stream()) }
        .map_err(|e| format!("side capture: {e:?}"))?;
    let spliced = match queued {
        Err(e) => Err(format!("the spliced work failed: {e}")),
        Ok(()) if g.is_null() => Ok(false),
        Ok(()) => copy_into_capture(d, main, g),
    };
    if !g.is_null() {
        // SAFETY: the side graph is ours; its nodes were copied, not moved.
        let _ = unsafe { result::graph::destroy(g) };
    }
    spliced
}

/// Adds `g`'s nodes to `main`'s capture after what it has queued so far (see [`splice`]).
fn copy_into_capture(
    d: &candle_core::CudaDevice,
    main: &Arc<CudaStream>,
    g: sys::CUgraph,
) -> Result<bool, String> {
    // Only kernels and small memsets, at least one memset: else the work is left as it is
    // captured (a large memset is better on the copy path than in one block of threads).
    let all = nodes(g)?;
    let mut types = Vec::with_capacity(all.len());
    for &n in &all {
        let t = node_type(n)?;
        match t {
            sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL => {}
            sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMSET if memset_params(n)?.1 <= SMALL => {}
            _ => return Ok(false),
        }
        types.push(t);
    }
    if !types.contains(&sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMSET) {
        return Ok(false);
    }
    let func = d
        .get_or_load_custom_func("graph_memset", "seam_memset", PTX)
        .map_err(|e| format!("graph_memset: {e}"))?
        .cu_function();
    let (graph, start) = capturing_graph(main, "splice")?;
    // Copy in dependency order: a node once all its side dependencies have their copies.
    let mut copies: HashMap<usize, sys::CUgraphNode> = HashMap::new();
    let mut sinks = Vec::new();
    while copies.len() < all.len() {
        let before = copies.len();
        for (&n, &t) in all.iter().zip(&types) {
            if copies.contains_key(&(n as usize)) {
                continue;
            }
            let up = neighbours(n, true)?;
            if !up.iter().all(|u| copies.contains_key(&(*u as usize))) {
                continue;
            }
            let deps: Vec<_> = if up.is_empty() {
                start.clone()
            } else {
                up.iter().map(|u| copies[&(*u as usize)]).collect()
            };
            let copy = if t == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMSET {
                memset_kernel(graph, &deps, n, func)?
            } else {
                kernel_copy(graph, &deps, n)?
            };
            copies.insert(n as usize, copy);
            if neighbours(n, false)?.is_empty() {
                sinks.push(copy);
            }
        }
        if copies.len() == before {
            return Err("splice: the side graph has a cycle".into());
        }
    }
    // SAFETY: nodes of the capturing graph; null edge data: default edges.
    check("capture dependencies", unsafe {
        sys::cuStreamUpdateCaptureDependencies_v2(
            main.cu_stream(),
            sinks.as_mut_ptr(),
            std::ptr::null(),
            sinks.len(),
            sys::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES as u32,
        )
    })?;
    Ok(true)
}

/// A memset node's parameters and its size in bytes.
fn memset_params(n: sys::CUgraphNode) -> Result<(sys::CUDA_MEMSET_NODE_PARAMS, usize), String> {
    // SAFETY: plain old data, filled in by the driver.
    let mut p: sys::CUDA_MEMSET_NODE_PARAMS = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is a memset node of a live graph.
    check("memset node", unsafe {
        sys::cuGraphMemsetNodeGetParams(n, &mut p)
    })?;
    let bytes = p.elementSize as usize * p.width * p.height;
    Ok((p, bytes))
}

/// A copy of kernel node `n` (its parameters and launch attributes) in `graph` after `deps`.
fn kernel_copy(
    graph: sys::CUgraph,
    deps: &[sys::CUgraphNode],
    n: sys::CUgraphNode,
) -> Result<sys::CUgraphNode, String> {
    // SAFETY: plain old data, filled in by the driver.
    let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is a kernel node of a live graph; its argument buffers live as long as it.
    check("kernel node", unsafe {
        sys::cuGraphKernelNodeGetParams_v2(n, &mut p)
    })?;
    let mut k = std::ptr::null_mut();
    // SAFETY: the driver copies the arguments; `deps` are nodes of `graph`.
    check("kernel node", unsafe {
        sys::cuGraphAddKernelNode_v2(&mut k, graph, deps.as_ptr(), deps.len(), &p)
    })?;
    // SAFETY: both are kernel nodes of one context.
    check("kernel attributes", unsafe {
        sys::cuGraphKernelNodeCopyAttributes(k, n)
    })?;
    Ok(k)
}

/// A `graph_memset` kernel node in `graph` after `deps` doing what memset node `n` does.
fn memset_kernel(
    graph: sys::CUgraph,
    deps: &[sys::CUgraphNode],
    n: sys::CUgraphNode,
    func: sys::CUfunction,
) -> Result<sys::CUgraphNode, String> {
    let (p, _) = memset_params(n)?;
    let (mut dst, mut pitch, mut value, mut esize, mut width, mut height) = (
        p.dst,
        p.pitch as u64,
        p.value,
        p.elementSize,
        p.width as u64,
        p.height as u64,
    );
    let mut args: [*mut c_void; 6] = [
        (&mut dst) as *mut _ as *mut c_void,
        (&mut pitch) as *mut _ as *mut c_void,
        (&mut value) as *mut _ as *mut c_void,
        (&mut esize) as *mut _ as *mut c_void,
        (&mut width) as *mut _ as *mut c_void,
        (&mut height) as *mut _ as *mut c_void,
    ];
    let kp = sys::CUDA_KERNEL_NODE_PARAMS {
        func,
        gridDimX: 1,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 256,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: args.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    };
    let mut k = std::ptr::null_mut();
    // SAFETY: the arguments match graph_memset's signature; the driver copies them.
    check("memset kernel node", unsafe {
        sys::cuGraphAddKernelNode_v2(&mut k, graph, deps.as_ptr(), deps.len(), &kp)
    })?;
    Ok(k)
}

/// `node`'s neighbours: its dependencies (`up`) or the nodes that depend on it.
fn neighbours(node: sys::CUgraphNode, up: bool) -> Result<Vec<sys::CUgraphNode>, String> {
    let get = |out: *mut sys::CUgraphNode, n: &mut usize| {
        // SAFETY: `out` is null (count only) or holds `n` slots; no edge data asked for.
        unsafe {
            if up {
                sys::cuGraphNodeGetDependencies_v2(node, out, std::ptr::null_mut(), n)
            } else {
                sys::cuGraphNodeGetDependentNodes_v2(node, out, std::ptr::null_mut(), n)
            }
        }
    };
    let mut n = 0usize;
    check("graph edges", get(std::ptr::null_mut(), &mut n))?;
    if n == 0 {
        // The driver refuses a non-null array of no entries.
        return Ok(Vec::new());
    }
    let mut v = vec![std::ptr::null_mut(); n];
    check("graph edges", get(v.as_mut_ptr(), &mut n))?;
    v.truncate(n);
    Ok(v)
}

/// The graph `stream` is capturing into and the nodes its next work will depend on; an
/// error naming `who` where it is not capturing.
pub(super) fn capturing_graph(
    stream: &CudaStream,
    who: &str,
) -> Result<(sys::CUgraph, Vec<sys::CUgraphNode>), String> {
    let (mut status, mut id, mut graph) = (
        sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        0u64,
        std::ptr::null_mut(),
    );
    let (mut deps, mut edges, mut ndeps) = (std::ptr::null(), std::ptr::null(), 0usize);
    // SAFETY: out-pointers to locals; the arrays returned stay valid until the next capture
    // call on `stream`, and are copied at once.
    check("capture info", unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            stream.cu_stream(),
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            &mut edges,
            &mut ndeps,
        )
    })?;
    if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
        return Err(format!("{who}: the stream is not capturing"));
    }
    let start = if ndeps == 0 {
        Vec::new()
    } else {
        // SAFETY: the driver returned `ndeps` nodes at `deps`.
        unsafe { std::slice::from_raw_parts(deps, ndeps) }.to_vec()
    };
    Ok((graph, start))
}

/// The graph's nodes.
pub(super) fn nodes(graph: sys::CUgraph) -> Result<Vec<sys::CUgraphNode>, String> {
    let mut n = 0usize;
    // SAFETY: a null node array asks for the count only.
    check("graph nodes", unsafe {
        sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut n)
    })?;
    let mut v = vec![std::ptr::null_mut(); n];
    // SAFETY: `v` holds `n` slots.
    check("graph nodes", unsafe {
        sys::cuGraphGetNodes(graph, v.as_mut_ptr(), &mut n)
    })?;
    v.truncate(n);
    Ok(v)
}

/// A node's type.
pub(super) fn node_type(node: sys::CUgraphNode) -> Result<sys::CUgraphNodeType, String> {
    let mut t = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
    // SAFETY: `node` belongs to a live graph.
    check("graph node type", unsafe {
        sys::cuGraphNodeGetType(node, &mut t)
    })?;
    Ok(t)
}
