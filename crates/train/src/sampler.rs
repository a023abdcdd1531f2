//! Random context-length windows of a token file. Window `i` of step `s` starts at a
//! position drawn from SplitMix64 seeded by (seed, s, i) alone, so the global batch of a
//! step is the same whatever the world size and however it is split: rank r's micro-batch
//! m takes windows `(m·W + r)·b … + b` (b = global / (W·accumulation)), disjoint across
//! ranks and micro-batches, their union the world-1 batch. The sampler's state is the step.

use crate::rng::{mix, SplitMix64};
use crate::tokens::TokenFile;
use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use seam::Batch;
use std::ops::Range;

#[derive(Debug, Clone, Copy)]
pub struct Sampler {
    pub seed: u64,
    pub context: usize,
    /// Valid start positions: 0..starts (a window needs context + 1 tokens).
    starts: u64,
}

impl Sampler {
    /// Refuses a file shorter than one window plus its last target, naming it.
    pub fn new(file: &TokenFile, context: usize, seed: u64) -> Result<Self> {
        if file.len() <= context {
            bail!(
                "token file {} has {} tokens, not more than the context {context}: no window fits",
                file.path().display(),
                file.len()
            );
        }
        Ok(Self {
            seed,
            context,
            starts: (file.len() - context) as u64,
        })
    }

    /// Start of window `i` of step `step`.
    pub fn start(&self, step: u64, i: usize) -> usize {
        let s = mix(self.seed.wrapping_add(mix(step.wrapping_add(1))));
        SplitMix64::new(s.wrapping_add(i as u64)).below(self.starts) as usize
    }

    /// Windows `rows` of step `step` as a batch: input (rows, context) and the next tokens.
    pub fn batch(
        &self,
        file: &TokenFile,
        step: u64,
        rows: Range<usize>,
        dev: &Device,
    ) -> Result<Batch> {
        let (n, c) = (rows.len(), self.context);
        let (mut x, mut y) = (Vec::with_capacity(n * c), Vec::with_capacity(n * c));
        for i in rows {
            let w = file.window(self.start(step, i), c + 1);
            x.extend_from_slice(&w[..c]);
            y.extend_from_slice(&w[1..]);
        }
        Ok(Batch::new(
            Tensor::from_vec(x, (n, c), dev)?,
            Tensor::from_vec(y, (n, c), dev)?,
        ))
    }
}

/// The windows of rank `rank`'s micro-batch `micro` in a global batch of `global` windows
/// split over `world` ranks and `accum` micro-batches (which must divide it).
pub fn shard(global: usize, world: usize, accum: usize, rank: usize, micro: usize) -> Range<usize> {
    let b = global / (world * accum);
    let at = (micro * world + rank) * b;
    at..at + b
}

/// Checks that `global` splits evenly, naming the numbers.
pub fn check_split(global: usize, world: usize, accum: usize) -> Result<()> {
    if world == 0 {
        bail!("--world 0: a run takes at least 1 rank");
    }
    let split = world.checked_mul(accum).unwrap_or(0);
    if global == 0 || split == 0 || !global.is_multiple_of(split) {
        bail!("--global-batch {global} does not split into {world} ranks × {accum} micro-batches (--accum) of equal size");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens;

    fn file(n: u32) -> (tempfile::TempDir, TokenFile) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.bin");
        tokens::write(&p, &(0..n).map(|i| i % 1000).collect::<Vec<_>>()).unwrap();
        let f = TokenFile::open(&p, 1000).unwrap();
        (d, f)
    }

    #[test]
    fn ranks_draw_disjoint_parts_of_the_same_global_batch() {
        let (_d, f) = file(5000);
        let s = Sampler::new(&f, 16, 42).unwrap();
        let dev = Device::Cpu;
        let rows = |t: &Tensor| t.to_vec2::<u32>().unwrap();
        for step in [0u64, 1, 17] {
            let whole = s.batch(&f, step, 0..24, &dev).unwrap();
            for (world, accum) in [(1, 1), (2, 1), (4, 3), (3, 2), (8, 1)] {
                check_split(24, world, accum).unwrap();
                let mut union = vec![None; 24];
                for rank in 0..world {
                    for m in 0..accum {
                        let r = shard(24, world, accum, rank, m);
                        let b = s.batch(&f, step, r.clone(), &dev).unwrap();
                        for (k, (x, y)) in
                            rows(&b.input).into_iter().zip(rows(&b.targets)).enumerate()
                        {
                            assert!(union[r.start + k].is_none(), "window {} twice", r.start + k);
                            assert_eq!(&x[1..], &y[..15]);
                            union[r.start + k] = Some(x);
                        }
                    }
                }
                let union: Vec<Vec<u32>> = union.into_iter().map(Option::unwrap).collect();
                assert_eq!(union, rows(&whole.input), "world {world} accum {accum}");
            }
        }
        // Steps and seeds differ; the windows are spread over the file.
        let a = (0..24).map(|i| s.start(0, i)).collect::<Vec<_>>();
        assert_ne!(a, (0..24).map(|i| s.start(1, i)).collect::<Vec<_>>());
        let s2 = Sampler::new(&f, 16, 43).unwrap();
        assert_ne!(a, (0..24).map(|i| s2.start(0, i)).collect::<Vec<_>>());
        assert!(a.iter().all(|&x| x + 17 <= 5000) && *a.iter().max().unwrap() > 2500);
        assert!(check_split(24, 5, 1)
            .unwrap_err()
            .to_string()
            .contains("does not split"));
    }

    #[test]
    fn a_context_longer_than_the_file_is_refused_naming_it() {
        let (_d, f) = file(16);
        let e = Sampler::new(&f, 16, 0).unwrap_err().to_string();
        assert!(e.contains("x.bin") && e.contains("context 16"), "{e}");
        assert!(Sampler::new(&f, 15, 0).is_ok());
    }
}
