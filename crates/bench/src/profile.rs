//! `bench profile`: where one training step's time and memory go, per component.
//!
//! The model marks the end of each component ([`model::profile::mark`]); here a hook
//! records, at every mark, a CUDA event on the compute stream (the wall clock on the CPU)
//! and the memory in use. After a warm-up, one step (forward only, or forward + backward +
//! AdamW) runs with the hook; the GPU time of a component is the time between its mark and
//! the previous one. A second pass records the memory in use at each mark instead.
//! Outputs: a table (calls per step, total, share; GEMM-bound components
//! flagged), JSON lines, a flame graph (folded stacks step;fwd;block;attn;… rendered by
//! `inferno`) and a memory timeline SVG.

use crate::memory;
use crate::single::Precision;
use anyhow::{anyhow, Result};
use candle_core::{DType, Device};
use model::{AdamW, AdamWConfig, Batch, StagedModel, TransformerLm};
use plotters::prelude::*;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ProfileRecord {
    pub bench: String, // "profile"
    pub size: String,
    pub dtype: String,
    pub mode: String,
    /// Tokens a sequence (8 sequences); absent in records before session 48: 128.
    #[serde(default = "default_context")]
    pub context: usize,
    pub label: String,
    pub calls: usize,
    pub total_ms: f64,
    pub share: f64,
    /// The component is one or two GEMMs (plus at most a residual add).
    pub matmul: bool,
}

fn default_context() -> usize {
    128
}

/// Memory in use at one mark of the step (pass 2).
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRecord {
    pub bench: String, // "profile-memory"
    pub size: String,
    pub dtype: String,
    pub mode: String,
    pub index: usize,
    pub label: String,
    pub gib: f64,
}

/// A timestamp: a CUDA event on candle's stream, or the wall clock.
enum Stamp {
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaEvent),
    Cpu(std::time::Instant),
}

fn stamp(dev: &Device) -> Result<Stamp> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = dev {
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        return Ok(Stamp::Cuda(d.cuda_stream().record_event(flags)?));
    }
    let _ = dev;
    Ok(Stamp::Cpu(std::time::Instant::now()))
}

fn elapsed_ms(a: &Stamp, b: &Stamp) -> Result<f64> {
    match (a, b) {
        #[cfg(feature = "cuda")]
        (Stamp::Cuda(a), Stamp::Cuda(b)) => Ok(a.elapsed_ms(b)? as f64),
        (Stamp::Cpu(a), Stamp::Cpu(b)) => Ok((*b - *a).as_secs_f64() * 1e3),
        #[allow(unreachable_patterns)]
        _ => Err(anyhow!("mixed timestamps")),
    }
}

const GEMMS: [&str; 7] = [
    "qkv_proj", "scores", "value", "out_proj", "w1_w3", "w2", "proj",
];

type Points = Rc<RefCell<Vec<(String, Stamp)>>>;
type MemPoints = Rc<RefCell<Vec<(String, Option<u64>)>>>;

/// Profiles one step of `size` in `dtype` at `context` tokens a sequence (the size's own
/// unless given); `step` false: forward only. Prints the table, appends JSON lines to
/// `out`, writes the SVGs into `svg_dir`.
pub fn run(
    size: &str,
    dtype: Precision,
    step: bool,
    context: Option<usize>,
    dev: &Device,
    out: &crate::records::Out,
    svg_dir: &Path,
) -> Result<()> {
    let mut cfg = crate::ddp::config(size)?;
    cfg.context = context.unwrap_or(cfg.context);
    let mut lm = TransformerLm::new(cfg, 0, dev)?;
    if dtype == Precision::Bf16 {
        lm.set_compute_dtype(DType::BF16);
    }
    let b = crate::ddp::batch_for(&lm, 0, 8, dev)?;
    // Not step::TrainStep: a profile marks each component of an eager step (graph replays
    // have no host points between kernels to mark).
    let mut opt = AdamW::new(AdamWConfig::default())?;
    let last = lm.num_stages() - 1;
    let one = |lm: &TransformerLm, b: &Batch, opt: &mut AdamW| -> Result<()> {
        let tape = model::forward(lm, b)?;
        if step {
            let g = tape.backward(|s, _| {
                // The embedding stage marks its own backward ("bwd/embedding").
                if s == last {
                    model::profile::mark("bwd/head");
                }
                Ok::<(), model::ModelError>(())
            })?;
            opt.step_params(lm.params(), &g)?;
            model::profile::mark("optimizer");
        }
        Ok(())
    };
    for _ in 0..2 {
        one(&lm, &b, &mut opt)?;
    }
    // Pass 1 records CUDA events only (timing); pass 2 memory only, so neither
    // measurement slows the other.
    let points: Points = Rc::new(RefCell::new(Vec::new()));
    let (p, d) = (points.clone(), dev.clone());
    model::profile::set_hook(Some(Box::new(move |label| {
        if let Ok(s) = stamp(&d) {
            p.borrow_mut().push((label.to_string(), s));
        }
    })));
    model::profile::mark("start");
    let r = one(&lm, &b, &mut opt);
    model::profile::set_hook(None);
    r?;
    let mem_points: MemPoints = Rc::default();
    let (p, d) = (mem_points.clone(), dev.clone());
    model::profile::set_hook(Some(Box::new(move |label| {
        p.borrow_mut()
            .push((label.to_string(), memory::current(&d)))
    })));
    model::profile::mark("start");
    let r = one(&lm, &b, &mut opt);
    model::profile::set_hook(None);
    r?;
    let pts = points.borrow();
    // A segment ending at a kernel's end mark (`k:name`, its start marked `kb:name`) is that
    // kernel; the rest of a component (segments ending at a kernel's start or at the
    // component's mark) is its GEMMs and candle ops. All belong to the component whose mark
    // comes next.
    let mut by: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    let mut stacks: BTreeMap<String, f64> = BTreeMap::new();
    let mut pending: Vec<(String, f64)> = Vec::new();
    let mut other = 0.0;
    for w in pts.windows(2) {
        let dt = elapsed_ms(&w[0].1, &w[1].1)?;
        if let Some(k) = w[1].0.strip_prefix("k:") {
            pending.push((k.to_string(), dt));
            continue;
        }
        if w[1].0.starts_with("kb:") {
            other += dt;
            continue;
        }
        let comp = w[1].0.as_str();
        let path = format!("step;{}", comp.replace('/', ";"));
        let rest_t = dt + std::mem::take(&mut other);
        let mut t = rest_t;
        for (k, kt) in pending.drain(..) {
            *stacks.entry(format!("{path};{k}")).or_default() += kt;
            t += kt;
        }
        let rest = if GEMMS.iter().any(|g| comp.ends_with(g)) {
            "cublas_gemm_and_candle_ops"
        } else {
            "candle_ops"
        };
        *stacks.entry(format!("{path};{rest}")).or_default() += rest_t;
        let e = by.entry(comp.to_string()).or_default();
        e.0 += 1;
        e.1 += t;
    }
    let total: f64 = by.values().map(|v| v.1).sum();
    let mode = if step { "step" } else { "fwd" };
    let mut recs: Vec<ProfileRecord> = by
        .iter()
        .map(|(l, &(calls, ms))| ProfileRecord {
            bench: "profile".into(),
            size: size.into(),
            dtype: dtype.name().into(),
            mode: mode.into(),
            context: lm.config().context,
            label: l.to_string(),
            calls,
            total_ms: ms,
            share: ms / total,
            matmul: GEMMS.iter().any(|g| l.ends_with(g)),
        })
        .collect();
    recs.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    println!(
        "{size} {} {mode}, 8 x {} tokens: {total:.2} ms in {} marks",
        dtype.name(),
        lm.config().context,
        pts.len()
    );
    println!(
        "{:<28} {:>6} {:>10} {:>7} {:>6}",
        "component", "calls", "total(ms)", "share", "gemm"
    );
    let mut sink = crate::records::print_and_store(out, |r: &ProfileRecord| {
        format!(
            "{:<28} {:>6} {:>10.3} {:>6.1}% {:>6}",
            r.label,
            r.calls,
            r.total_ms,
            100.0 * r.share,
            if r.matmul { "yes" } else { "" }
        )
    });
    for r in &recs {
        sink(r)?;
    }
    let mm: f64 = recs.iter().filter(|r| r.matmul).map(|r| r.total_ms).sum();
    println!(
        "GEMM-bound components: {mm:.2} ms of {total:.2} ({:.1}%)",
        100.0 * mm / total
    );
    std::fs::create_dir_all(svg_dir)?;
    let stem = format!("{size}-{}-{mode}", dtype.name());
    flame(&stacks, &svg_dir.join(format!("flame-{stem}.svg")), &stem)?;
    let mem: Vec<(usize, f64)> = mem_points
        .borrow()
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.1.map(|b| (i, b as f64 / (1u64 << 30) as f64)))
        .collect();
    for (&(i, gib), (label, _)) in mem.iter().zip(mem_points.borrow().iter()) {
        let rec = MemoryRecord {
            bench: "profile-memory".into(),
            size: size.into(),
            dtype: dtype.name().into(),
            mode: mode.into(),
            index: i,
            label: label.to_string(),
            gib,
        };
        out.append(&rec)?;
    }
    if !mem.is_empty() {
        timeline(&mem, &svg_dir.join(format!("memory-{stem}.svg")), &stem)?;
        let peak = mem.iter().map(|m| m.1).fold(0.0, f64::max);
        println!(
            "memory in use: start {:.2} GiB, peak at a mark {peak:.2} GiB",
            mem[0].1
        );
    }
    Ok(())
}

/// Folded stacks (µs) rendered as a flame graph: step → fwd/bwd → block → attn/ffn →
/// component → kernel (the fused kernels by name; GEMMs and candle's ops as one frame).
/// The folded lines themselves go beside it (`.folded`): the SVG leaves out frames
/// narrower than 0.1 px.
fn flame(stacks: &BTreeMap<String, f64>, path: &Path, title: &str) -> Result<()> {
    let lines: Vec<String> = stacks
        .iter()
        .map(|(s, ms)| format!("{s} {}", (ms * 1e3).round() as u64))
        .collect();
    std::fs::write(path.with_extension("folded"), lines.join("\n") + "\n")?;
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!("{title}: GPU time per component (µs)");
    opts.count_name = "µs".into();
    let f = std::fs::File::create(path)?;
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(|s| s.as_str()), f)
        .map_err(|e| anyhow!("flame graph {}: {e}", path.display()))
}

/// Memory in use at every mark of the step.
fn timeline(mem: &[(usize, f64)], path: &Path, title: &str) -> Result<()> {
    let e = |x: &dyn std::fmt::Display| anyhow!("plotting {}: {x}", path.display());
    let root = SVGBackend::new(path, (900, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let ymax = mem.iter().map(|m| m.1).fold(0.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: memory in use (GiB)"), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..mem.len() as f64, 0f64..ymax.max(1e-6))
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("mark (component boundary) in step order")
        .y_desc("GiB")
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(LineSeries::new(
            mem.iter().map(|&(i, g)| (i as f64, g)),
            &BLUE,
        ))
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}
