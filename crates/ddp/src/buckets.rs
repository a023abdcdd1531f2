//! Which gradients travel together: the bucket plan of each strategy.
//!
//! Parameters are taken in reverse declaration order (the order backward produces
//! them). `Naive` and `Overlap` put each parameter in its own bucket, `Flat` puts all in
//! one, `Bucketed { bucket_mb }` fills buckets greedily up to `bucket_mb` MiB (as PyTorch's
//! `bucket_cap_mb`); a parameter larger than the cap gets a bucket of its own.

use crate::error::{DdpError, Result};
use crate::strategy::Strategy;
use seam::StagedModel;

/// The first stage whose backward produces each parameter's gradient; an error names a
/// parameter no stage uses.
pub(crate) fn ready_stages(model: &dyn StagedModel) -> Result<Vec<usize>> {
    let ready = seam::staged::final_stages(model);
    match ready.iter().position(Option::is_none) {
        Some(i) => Err(DdpError::Input(format!(
            "parameter {} is used by no stage",
            model.params().names()[i]
        ))),
        None => Ok(ready.into_iter().flatten().collect()),
    }
}

/// What the planner needs to know of one parameter.
#[derive(Debug, Clone)]
pub struct ParamInfo {
    pub numel: usize,
    /// The stage whose backward makes this gradient final (the earliest stage using it).
    pub ready_stage: usize,
    /// In a bucket of its own (stage 0's gradients from rows, `ddp::rows`: the bucket is
    /// launched only in a step that does not take them so).
    pub alone: bool,
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
        let full = cur.numel + p.numel > cap_elems
            || p.alone
            || cur.params.iter().any(|&j| params[j].alone);
        if !cur.params.is_empty() && full {
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

/// `buckets` (a plan) with the model's first stages apart in a bucket of their own, launched
/// last: as many stages, from the first, as `cap_mb` MiB of `elem_bytes` elements hold (at
/// least the first stage's), taken out of whichever buckets hold them, where that leaves
/// other buckets. The bucket that held the first stage's neighbours then becomes ready a
/// stage or more before the backward ends, and the backward's tail holds the small bucket's
/// collective only (`ddp::tail`). A parameter in a bucket of its own (`ParamInfo::alone`)
/// stays there.
pub fn last_apart(
    buckets: Vec<Bucket>,
    params: &[ParamInfo],
    cap_mb: f64,
    elem_bytes: usize,
) -> Vec<Bucket> {
    let cap = cap_elems(cap_mb, elem_bytes);
    let movable = |i: usize| !params[i].alone;
    let all: Vec<usize> = (buckets.iter())
        .flat_map(|b| b.params.iter().copied())
        .filter(|&i| movable(i))
        .collect();
    let mut stages: Vec<usize> = all.iter().map(|&i| params[i].ready_stage).collect();
    stages.sort_unstable();
    stages.dedup();
    let Some(&first) = stages.first() else {
        return buckets;
    };
    let numel_to = |s: usize| -> usize {
        (all.iter())
            .filter(|&&i| params[i].ready_stage <= s)
            .map(|&i| params[i].numel)
            .sum()
    };
    let upto = (stages.iter().copied())
        .take_while(|&s| numel_to(s) <= cap)
        .last()
        .unwrap_or(first);
    let apart = |i: usize| movable(i) && params[i].ready_stage <= upto;
    if all.iter().all(|&i| apart(i)) {
        return buckets;
    }
    let bucket = |ps: Vec<usize>| Bucket {
        numel: ps.iter().map(|&i| params[i].numel).sum(),
        ready_stage: ps.iter().map(|&i| params[i].ready_stage).min().unwrap_or(0),
        params: ps,
    };
    let mut out: Vec<Bucket> = (buckets.iter())
        .map(|b| bucket(b.params.iter().copied().filter(|&i| !apart(i)).collect()))
        .filter(|b| !b.params.is_empty())
        .collect();
    out.push(bucket(all.into_iter().filter(|&i| apart(i)).collect()));
    out
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
                alone: false,
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

    #[test]
    fn a_parameter_marked_alone_gets_a_bucket_of_its_own() {
        let mut p = infos(&[10, 10, 10, 10]);
        p[1].alone = true;
        let b = plan(Strategy::Bucketed { bucket_mb: 1.0 }, &p, 4);
        let groups: Vec<Vec<usize>> = b.iter().map(|b| b.params.clone()).collect();
        assert_eq!(groups, vec![vec![3, 2], vec![1], vec![0]]);
    }

    #[test]
    fn the_first_stages_go_apart_up_to_the_cap() {
        // Stages 0, 0, 1, 1, 2, 2 (infos). One bucket of everything, launched at stage 0.
        let p = infos(&[10, 20, 30, 40, 50, 60]);
        let all = plan(Strategy::Flat, &p, 4);
        let mib = |n: usize| (n * 4) as f64 / (1 << 20) as f64;
        // Room for stages 0 and 1 (100 elements): they go apart, launched last.
        let b = last_apart(all.clone(), &p, mib(100), 4);
        let groups: Vec<Vec<usize>> = b.iter().map(|b| b.params.clone()).collect();
        assert_eq!(groups, vec![vec![5, 4], vec![3, 2, 1, 0]]);
        assert_eq!((b[0].ready_stage, b[0].numel), (2, 110));
        assert_eq!((b[1].ready_stage, b[1].numel), (0, 100));
        // Less room than stage 0 takes: stage 0 alone all the same.
        let b = last_apart(all.clone(), &p, mib(5), 4);
        assert_eq!(b[1].params, vec![1, 0]);
        // Room for every stage: the plan as it was.
        assert_eq!(last_apart(all.clone(), &p, mib(1000), 4), all);
        assert!(last_apart(Vec::new(), &p, 1.0, 4).is_empty());
        // Buckets of 100 elements cut stage 1 in two ([5], [4, 3], [2, 1, 0]): stage 1's
        // parameter in the bucket before the last comes out too, and that bucket is then
        // ready at stage 2, before the backward's last stages.
        let b = plan(
            Strategy::Bucketed {
                bucket_mb: mib(100),
            },
            &p,
            4,
        );
        let groups: Vec<Vec<usize>> = b.iter().map(|b| b.params.clone()).collect();
        assert_eq!(groups, vec![vec![5], vec![4, 3], vec![2, 1, 0]]);
        let b = last_apart(b, &p, mib(100), 4);
        let groups: Vec<Vec<usize>> = b.iter().map(|b| b.params.clone()).collect();
        assert_eq!(groups, vec![vec![5], vec![4], vec![3, 2, 1, 0]]);
        assert_eq!(b[1].ready_stage, 2);
        // A parameter alone in its bucket stays there.
        let mut q = p.clone();
        q[0].alone = true;
        let b = last_apart(plan(Strategy::Flat, &p, 4), &q, mib(100), 4);
        let groups: Vec<Vec<usize>> = b.iter().map(|b| b.params.clone()).collect();
        assert_eq!(groups, vec![vec![5, 4, 0], vec![3, 2, 1]]);
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
