//! Which gradients travel together: the bucket plan of each strategy.
//!
//! Parameters are taken in reverse declaration order (the order backward produces
//! them). `Naive` and `Overlap` put each parameter in its own bucket, `Flat` puts all in
//! one, `Bucketed { bucket_mb }` fills buckets greedily up to `bucket_mb` MiB (as PyTorch's
//! `bucket_cap_mb`); a parameter larger than the cap gets a bucket of its own.
//! [`plan_tapered`] (ZeRO's reduce-scatters) makes buckets of whole stages, smallest where
//! the backward ends.

use crate::options::DdpOptions;
use crate::strategy::Strategy;

/// What the planner needs to know of one parameter.
#[derive(Debug, Clone)]
pub struct ParamInfo {
    pub numel: usize,
    /// The stage whose backward makes this gradient final (the earliest stage using it).
    pub ready_stage: usize,
}

/// Parameters reduced by one collective.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// Parameter indices, in the order their gradients sit in the bucket's buffer.
    pub params: Vec<usize>,
    pub numel: usize,
    /// The bucket can be launched once the backward of this stage has run.
    pub ready_stage: usize,
}

/// Buckets in launch order.
pub fn plan(strategy: Strategy, params: &[ParamInfo], elem_bytes: usize) -> Vec<Bucket> {
    let cap_elems = match strategy {
        Strategy::Naive | Strategy::Overlap => 1,
        Strategy::Flat => usize::MAX,
        Strategy::Bucketed { bucket_mb } => cap_elems(bucket_mb, elem_bytes),
    };
    let mut out: Vec<Bucket> = Vec::new();
    let mut cur = Bucket {
        params: Vec::new(),
        numel: 0,
        ready_stage: usize::MAX,
    };
    for i in (0..params.len()).rev() {
        let p = &params[i];
        if !cur.params.is_empty() && cur.numel + p.numel > cap_elems {
            out.push(std::mem::replace(
                &mut cur,
                Bucket {
                    params: Vec::new(),
                    numel: 0,
                    ready_stage: usize::MAX,
                },
            ));
        }
        cur.params.push(i);
        cur.numel += p.numel;
        cur.ready_stage = cur.ready_stage.min(p.ready_stage);
    }
    if !cur.params.is_empty() {
        out.push(cur);
    }
    out
}

/// Buckets of whole stages (a stage above the cap split by parameters), filled from the
/// first stage on: the first bucket at most a quarter of the cap, the second half, the rest
/// the cap; in launch order (the last stages' first). The buckets the backward makes final
/// last are small, so little of their reduce-scatter is left once it ends, and the next
/// forward's first gathers (first stages first) are short. No bucket waits for a stage it
/// holds only part of. `cap_elems` as [`plan`]'s.
pub fn plan_tapered(params: &[ParamInfo], cap_elems: usize) -> Vec<Bucket> {
    let cap = |made: usize| {
        match made {
            0 => cap_elems / 4,
            1 => cap_elems / 2,
            _ => cap_elems,
        }
        .max(1)
    };
    // Runs of consecutive parameters made final by the same stage, in declaration order.
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for i in 0..params.len() {
        match runs.last_mut() {
            Some(r) if params[r[0]].ready_stage == params[i].ready_stage => r.push(i),
            _ => runs.push(vec![i]),
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let numel = |ps: &[usize]| ps.iter().map(|&i| params[i].numel).sum::<usize>();
    for run in runs {
        if !cur.is_empty() && numel(&cur) + numel(&run) > cap(out.len()) {
            out.push(std::mem::take(&mut cur));
        }
        if numel(&run) <= cap(out.len()) {
            cur.extend(run);
            continue;
        }
        // A stage larger than the cap: its parameters greedily, as `plan` fills, and the
        // next stage in a bucket of its own.
        for i in run {
            if !cur.is_empty() && numel(&cur) + params[i].numel > cap(out.len()) {
                out.push(std::mem::take(&mut cur));
            }
            cur.push(i);
        }
        out.push(std::mem::take(&mut cur));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .rev()
        .map(|mut ps| {
            ps.reverse();
            Bucket {
                numel: numel(&ps),
                ready_stage: ps.iter().map(|&i| params[i].ready_stage).min().unwrap_or(0),
                params: ps,
            }
        })
        .collect()
}

/// The buckets of `opts`: [`plan_tapered`] for `Bucketed` with [`DdpOptions::taper`], else
/// [`plan`].
pub fn plan_for(opts: &DdpOptions, params: &[ParamInfo], elem_bytes: usize) -> Vec<Bucket> {
    match opts.strategy {
        Strategy::Bucketed { bucket_mb } if opts.taper => {
            plan_tapered(params, cap_elems(bucket_mb, elem_bytes))
        }
        s => plan(s, params, elem_bytes),
    }
}

/// `bucket_mb` MiB in elements of `elem_bytes` (at least 1).
fn cap_elems(bucket_mb: f64, elem_bytes: usize) -> usize {
    ((bucket_mb * 1024.0 * 1024.0) / elem_bytes as f64)
        .floor()
        .max(1.0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infos(numels: &[usize]) -> Vec<ParamInfo> {
        numels
            .iter()
            .enumerate()
            .map(|(i, &n)| ParamInfo {
                numel: n,
                ready_stage: i / 2,
            })
            .collect()
    }

    #[test]
    fn buckets_fill_in_reverse_order_up_to_the_cap() {
        // 1 MiB of f32 = 262,144 elements.
        let p = infos(&[100_000, 100_000, 100_000, 300_000, 50_000]);
        let b = plan(Strategy::Bucketed { bucket_mb: 1.0 }, &p, 4);
        let groups: Vec<Vec<usize>> = b.iter().map(|b| b.params.clone()).collect();
        assert_eq!(groups, vec![vec![4], vec![3], vec![2, 1], vec![0]]);
        assert_eq!(b[2].ready_stage, 0);
        assert_eq!(b[0].ready_stage, 2);
        let total: usize = b.iter().map(|b| b.numel).sum();
        assert_eq!(total, 650_000);
    }

    /// An LM's shape: an embedding (stage 0), then blocks of 3 parameters (stages 1..),
    /// then a head (the last stage).
    fn lm(blocks: usize) -> Vec<ParamInfo> {
        let mut p = vec![ParamInfo {
            numel: 10,
            ready_stage: 0,
        }];
        for b in 0..blocks {
            for n in [30, 10, 40] {
                p.push(ParamInfo {
                    numel: n,
                    ready_stage: b + 1,
                });
            }
        }
        p.push(ParamInfo {
            numel: 10,
            ready_stage: blocks + 1,
        });
        p
    }

    #[test]
    fn tapered_buckets_hold_whole_stages_and_are_smallest_where_the_backward_ends() {
        // Blocks of 80 elements; a cap of 400: the first stages' bucket at most 100, the
        // next 200, then 400.
        let p = lm(12);
        let b = plan_tapered(&p, 400);
        let sizes: Vec<usize> = b.iter().map(|b| b.numel).collect();
        // Launch order: the head and blocks 12..9, then 8..4, 3..2, and last the embedding
        // with block 1 (90 elements).
        assert_eq!(sizes, vec![330, 400, 160, 90]);
        let last = b.last().unwrap();
        assert_eq!(last.params, vec![3, 2, 1, 0]);
        assert_eq!(last.ready_stage, 0);
        // Every parameter once; each bucket's stages whole.
        let mut all: Vec<usize> = b.iter().flat_map(|b| b.params.clone()).collect();
        all.sort();
        assert_eq!(all, (0..p.len()).collect::<Vec<_>>());
        for bucket in &b {
            for &i in &bucket.params {
                let stage = p[i].ready_stage;
                let whole = (0..p.len()).filter(|&j| p[j].ready_stage == stage);
                assert!(
                    whole.into_iter().all(|j| bucket.params.contains(&j)),
                    "stage {stage} split"
                );
            }
            assert!(
                bucket.params.windows(2).all(|w| w[0] > w[1]),
                "backward order"
            );
        }
        // Launched latest stage first.
        assert!(b.windows(2).all(|w| w[0].ready_stage > w[1].ready_stage));
    }

    #[test]
    fn a_stage_above_the_cap_is_split_by_parameters() {
        let p = lm(2);
        // A cap of 120: the first bucket at most 30, the second 60, the rest 120. The
        // embedding (10) and block 1 (80) exceed 30.
        let b = plan_tapered(&p, 120);
        let groups: Vec<Vec<usize>> = b.iter().map(|b| b.params.clone()).collect();
        // Block 1 (80) exceeds the second bucket's 60: split, and block 2 starts anew.
        assert_eq!(groups, vec![vec![7, 6, 5, 4], vec![3], vec![2, 1], vec![0]]);
        assert_eq!(b.iter().map(|b| b.numel).sum::<usize>(), 180);
    }

    #[test]
    fn strategies_shape_their_plans() {
        let p = infos(&[3, 4, 5]);
        assert_eq!(plan(Strategy::Naive, &p, 4).len(), 3);
        assert_eq!(plan(Strategy::Overlap, &p, 4)[0].params, vec![2]);
        let flat = plan(Strategy::Flat, &p, 4);
        assert_eq!(flat.len(), 1);
        assert_eq!(flat[0].params, vec![2, 1, 0]);
        assert_eq!(flat[0].ready_stage, 0);
    }
}
