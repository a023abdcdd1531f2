//! The optimizer state a rank reads back from a sharded checkpoint: the moments of the
//! flat elements it will keep, and no others. Each shard file is read once and verified
//! whole (size, CRC-32, step, model); of its moments only the elements the rank asked for
//! are held ([`checkpoint::Part::Elements`]), so a rank of W holds about 1/W of the
//! moments, never the whole model's (a 13B model's are 104 GB). Every rank still checks
//! the whole layout: every element's moments in exactly one shard.
//!
//! ```ignore
//! let state = read_optimizer(&ck, sig, &[(start, len)])?; // this rank's runs
//! let (m, v) = state.moments(start, len)?;
//! ```

use super::sharded::{bad, read_meta, shard_name, Signature, OPTIMIZER};
use ::checkpoint::error::Result;
use ::checkpoint::{Checkpoint, Part, Pieces};
use candle_core::{DType, Tensor};
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

/// The moments of the flat elements a rank asked for (runs of the parameters' elements in
/// declaration order), as read: each file's part, uncopied.
pub struct Consolidated {
    pub step: u64,
    /// (flat start, len, part, where in the part), sorted by flat start.
    index: Vec<(usize, usize, usize, usize)>,
    /// `exp_avg` and `exp_avg_sq` of each file's part (1-D, f32, on the CPU).
    parts: Vec<(Tensor, Tensor)>,
}

impl Consolidated {
    /// The whole flat state: every element's moments, in order.
    pub fn whole(step: u64, exp_avg: Vec<f32>, exp_avg_sq: Vec<f32>) -> Result<Self> {
        let n = exp_avg.len();
        if exp_avg_sq.len() != n {
            let msg = format!("moments of {n} and {} elements", exp_avg_sq.len());
            return Err(bad(Path::new("optimizer state"), msg));
        }
        let cpu = &candle_core::Device::Cpu;
        Ok(Self {
            step,
            index: vec![(0, n, 0, 0)],
            parts: vec![(
                Tensor::from_vec(exp_avg, n, cpu)?,
                Tensor::from_vec(exp_avg_sq, n, cpu)?,
            )],
        })
    }

    /// From parts already read: `pieces` (flat start, len, part, where in the part) of
    /// `parts` (`exp_avg`, `exp_avg_sq`: 1-D, on the CPU; made f32 where they are not).
    pub(super) fn from_parts(
        step: u64,
        mut pieces: Vec<(usize, usize, usize, usize)>,
        parts: Vec<(Tensor, Tensor)>,
    ) -> Result<Self> {
        pieces.sort();
        let f32 = |t: Tensor| t.to_dtype(DType::F32);
        let parts = (parts.into_iter())
            .map(|(m, v)| Ok((f32(m)?, f32(v)?)))
            .collect::<Result<_>>()?;
        Ok(Self {
            step,
            index: pieces,
            parts,
        })
    }

    /// The moments (`exp_avg`, `exp_avg_sq`) of flat elements `start..start + len`, copied
    /// out; every one of them must have been read.
    pub fn moments(&self, start: usize, len: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        let (mut m, mut v) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let (mut at, end) = (start, start + len);
        let mut k = self.index.partition_point(|p| p.0 + p.1 <= start);
        while at < end {
            let Some(&(s, l, part, off)) = self.index.get(k).filter(|p| p.0 <= at) else {
                return Err(bad(
                    Path::new("optimizer state"),
                    format!("elements {start}..{end} were not read"),
                ));
            };
            let b = end.min(s + l);
            let r = off + at - s..off + b - s;
            let (pm, pv) = &self.parts[part];
            f32s(pm, |x| m.extend_from_slice(&x[r.clone()]))?;
            f32s(pv, |x| v.extend_from_slice(&x[r]))?;
            (at, k) = (b, k + 1);
        }
        Ok((m, v))
    }

    /// One moment of every element read, in flat order, as pieces of the parts (views,
    /// uncopied): a file of it holds one part's bytes at a time.
    pub fn pieces(&self, which: seam::Moment) -> Pieces<'_> {
        let len = self.index.iter().map(|p| p.1).sum();
        let each = self.index.iter().map(move |&(_, l, part, off)| {
            let (m, v) = &self.parts[part];
            let t = match which {
                seam::Moment::ExpAvg => m,
                seam::Moment::ExpAvgSq => v,
            };
            Ok(t.narrow(0, off, l)?)
        });
        Pieces::new(DType::F32, len, each)
    }
}

/// The elements of a 1-D contiguous f32 CPU tensor, lent to `f`.
fn f32s(t: &Tensor, f: impl FnOnce(&[f32])) -> Result<()> {
    let (s, l) = t.storage_and_layout();
    let candle_core::Storage::Cpu(c) = &*s else {
        return Err(bad(Path::new("optimizer state"), "a part not on the CPU"));
    };
    let x = c.as_slice::<f32>()?;
    f(&x[l.start_offset()..l.start_offset() + t.elem_count()]);
    Ok(())
}

/// Reads the moments of the flat elements `want` ((start, len) runs, in any order, apart;
/// `[(0, sig.numel)]` for all): from `optimizer.safetensors` if the manifest lists it, else
/// from the manifest's shards (ranks 0..W of its world size W). Checks every file against
/// `sig`, and that the shards hold every element's moments exactly once. Each file's part
/// is kept as it was read.
pub fn read_optimizer(
    ck: &Checkpoint,
    sig: Signature,
    want: &[(usize, usize)],
) -> Result<Consolidated> {
    let n = sig.numel;
    let held = wanted(ck.dir(), want, n)?;
    let files: Vec<(String, Option<usize>)> = match ck.contains(OPTIMIZER) {
        true => vec![(OPTIMIZER.to_string(), None)],
        false => (0..ck.world_size())
            .map(|r| (shard_name(r, ck.world_size()), Some(r)))
            .collect(),
    };
    let (mut layout, mut pieces, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (name, rank)) in files.iter().enumerate() {
        let path = ck.dir().join(name);
        if !ck.contains(name) {
            let msg = "not listed by manifest.json (no optimizer state)";
            return Err(bad(&path, msg));
        }
        let (mut plan, mut counts) = (None, Vec::new());
        let mut t = ck.load_parts(name, |k, shape, before| match k {
            "meta" | "runs" => Part::Whole,
            "exp_avg" | "exp_avg_sq" => {
                counts.push(shape.iter().product::<usize>());
                let p = plan
                    .get_or_insert_with(|| make_plan(before, rank.is_some(), counts[0], &held, n));
                match p {
                    Ok(p) if counts.iter().all(|&c| c == counts[0]) => {
                        Part::Elements(p.ranges.clone())
                    }
                    _ => Part::Skip,
                }
            }
            _ => Part::Skip,
        })?;
        let (fw, fr) = read_meta(ck, name, &t, sig)?;
        if let Some(r) = rank {
            if (fw, fr) != (ck.world_size(), *r) {
                return Err(bad(&path, format!("meta says rank {fr} of {fw}")));
            }
        }
        let p = match plan {
            Some(p) => p.map_err(|e| bad(&path, e))?,
            None => return Err(bad(&path, "no tensor \"exp_avg\"")),
        };
        if counts != [counts[0]; 2] {
            return Err(bad(&path, format!("moments of {counts:?} elements")));
        }
        let mut f32_part = |k: &str| -> Result<Tensor> {
            let x = t
                .remove(k)
                .ok_or_else(|| bad(&path, format!("no tensor {k:?}")))?;
            Ok(x.to_dtype(DType::F32)?)
        };
        parts.push((f32_part("exp_avg")?, f32_part("exp_avg_sq")?));
        let mut off = 0;
        for (&s, &l) in p.starts.iter().zip(&p.lens) {
            pieces.push((s, l, parts.len() - 1, off));
            off += l;
        }
        layout.extend(p.runs.into_iter().map(|(s, l)| (s, l, i)));
    }
    check_layout(ck, &files, layout, n)?;
    Consolidated::from_parts(ck.step(), pieces, parts)
}

/// `want` sorted by start; refused if runs overlap or pass the model's `n` elements.
pub(super) fn wanted(dir: &Path, want: &[(usize, usize)], n: usize) -> Result<Vec<(usize, usize)>> {
    let mut held = want.to_vec();
    held.sort();
    let mut end = 0;
    for &(s, l) in &held {
        if s < end || s + l > n {
            let msg = format!("runs {want:?} overlap or pass the model's {n} elements");
            return Err(bad(dir, msg));
        }
        end = s + l;
    }
    Ok(held)
}

/// What one file gives: its runs (clamped to the model), and the element ranges of its
/// moments to keep, each with its flat start and length.
struct Plan {
    runs: Vec<(usize, usize)>,
    ranges: Vec<Range<usize>>,
    starts: Vec<usize>,
    lens: Vec<usize>,
}

/// The [`Plan`] for a file whose moments have `count` elements: a shard's `runs` tensor
/// (from `before`), or one run of all `n` (the consolidated file).
fn make_plan(
    before: &HashMap<String, Tensor>,
    shard: bool,
    count: usize,
    held: &[(usize, usize)],
    n: usize,
) -> std::result::Result<Plan, String> {
    let runs: Vec<(usize, usize)> = match shard {
        false => vec![(0, n)],
        true => before
            .get("runs")
            .ok_or("no tensor \"runs\" before the moments")?
            .to_dtype(DType::I64)
            .and_then(|r| r.to_vec2::<i64>())
            .map_err(|e| format!("runs: {e}"))?
            .into_iter()
            .map(|r| (r[0].max(0) as usize, r[1].max(0) as usize))
            .collect(),
    };
    let total: usize = runs.iter().map(|r| r.1).sum();
    if total != count {
        return Err(format!("{count} moments for runs of {total} elements"));
    }
    let mut p = Plan {
        runs: Vec::with_capacity(runs.len()),
        ranges: Vec::new(),
        starts: Vec::new(),
        lens: Vec::new(),
    };
    let mut off = 0;
    for (s, l) in runs {
        // Elements past the model (a chunk's padding) are dropped.
        let e = (s + l).min(n);
        p.runs.push((s.min(n), e.saturating_sub(s)));
        for (a, b) in within(held, s, e) {
            p.ranges.push(off + a - s..off + b - s);
            p.starts.push(a);
            p.lens.push(b - a);
        }
        off += l;
    }
    Ok(p)
}

/// The flat elements of `held` (sorted, apart) in `s..e`, as (start, end) runs.
pub(super) fn within(held: &[(usize, usize)], s: usize, e: usize) -> Vec<(usize, usize)> {
    let k = held.partition_point(|h| h.0 + h.1 <= s);
    (held[k..].iter())
        .take_while(|h| h.0 < e)
        .map(|&(hs, hl)| (s.max(hs), e.min(hs + hl)))
        .collect()
}

/// Every element `0..n` in exactly one file's runs (`layout`: start, len, file index).
fn check_layout(
    ck: &Checkpoint,
    files: &[(String, Option<usize>)],
    mut layout: Vec<(usize, usize, usize)>,
    n: usize,
) -> Result<()> {
    layout.retain(|r| r.1 > 0);
    layout.sort();
    let mut end = 0;
    for (s, l, f) in layout {
        if s < end {
            let msg = format!("element {s} is in two shards");
            return Err(bad(&ck.dir().join(&files[f].0), msg));
        }
        if s > end {
            break;
        }
        end = s + l;
    }
    if end < n {
        let msg = format!("no shard holds the moments of element {end}");
        return Err(bad(ck.dir(), msg));
    }
    Ok(())
}
