//! `bench model-check`'s probe of a captured graph's own memory: does a CUDA graph give the
//! memory of a tensor dropped inside the capture to a later allocation of the same capture?
//! A captured training step allocates its activations and gradients as graph memory
//! (`seam::graph`); what it peaks at depends on this. Each case captures a pattern of
//! allocations and frees on the compute stream, replays it once, and reads the graph
//! memory's high-water mark (`seam::graph::mem_high`) against the bytes live at once.

use anyhow::{anyhow, Result};
use candle_core::{DType, Device, Tensor};

const MIB: usize = 1 << 20;

/// `n` MiB of f32 zeros.
fn mib(n: usize, dev: &Device) -> candle_core::Result<Tensor> {
    Tensor::zeros(n * MIB / 4, DType::F32, dev)
}

/// One case: its name, the MiB live at once, and the pattern (returns a small tensor).
type Case = (
    &'static str,
    usize,
    fn(&Device) -> candle_core::Result<Tensor>,
);

const CASES: [Case; 3] = [
    ("alloc 1 GiB, drop, alloc 1 GiB", 1024, |d| {
        let a = mib(1024, d)?;
        let s = a.sum_all()?;
        drop(a);
        let b = mib(1024, d)?;
        s + b.sum_all()?
    }),
    ("8 x 128 MiB, drop all, alloc 1 GiB", 1024, |d| {
        let parts: Vec<Tensor> = (0..8).map(|_| mib(128, d)).collect::<Result<_, _>>()?;
        let mut s = parts[0].sum_all()?;
        for p in &parts[1..] {
            s = (s + p.sum_all()?)?;
        }
        drop(parts);
        let b = mib(1024, d)?;
        s + b.sum_all()?
    }),
    (
        "a chain of 8 x 256 MiB, each dropped after the next",
        512,
        |d| {
            let mut x = mib(256, d)?;
            for _ in 0..7 {
                x = x.affine(1.0, 1.0)?;
            }
            x.sum_all()
        },
    ),
];

/// One line per case: the graph's high-water mark against the MiB live at once.
pub fn run() -> Result<Vec<String>> {
    // A device that tracks no per-allocation events, as every captured step's.
    let nccl = crate::graphcheck::nccl_world_1()?;
    let dev = nccl.device().clone();
    let _cache = seam::graph::HtodCache::enable(&dev);
    let mut out = Vec::new();
    for (name, live, f) in CASES {
        f(&dev)?; // eager first: the layout uploads cached, as the step's warm-up does
        seam::graph::trim(&dev);
        seam::graph::reset_mem_high(&dev);
        let step = seam::graph::capture(&dev, || Ok(f(&dev)?))
            .map_err(|e| anyhow!("graph-reuse probe {name:?}: capture failed: {e}"))?;
        step.replay()?;
        let high = seam::graph::mem_high(&dev).unwrap_or(0) as usize / MIB;
        out.push(format!(
            "model-check graph memory ({name}): high-water mark {high} MiB, {live} MiB live at once: {}",
            if high <= live + live / 8 { "reused" } else { "NOT reused" }
        ));
        drop(step);
    }
    seam::graph::trim(&dev);
    Ok(out)
}
