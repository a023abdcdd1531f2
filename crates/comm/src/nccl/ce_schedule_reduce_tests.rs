//! The copy-engine reduce-scatters' order (`super::super::ce_reduce`: a gather's `peers` and
//! `last` at each launch, its `first` after the adds, the "ready" flags starting at 1), run
//! on every rank through several steps of several launches, interleaved at random, with the
//! adds on a stream of their own as the parts arrive or on compute at the wait: none waits
//! for ever, no part lands in a slot whose last parts are not yet added, every part is in
//! before its adds, compute goes past a wait only after its adds, and the flags end as they
//! began.

use super::tests::{next, Rng, Stream};
use super::*;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug)]
enum Sim {
    Ce(Op),
    Add,
    /// Compute passes the wait of a launch whose adds ran on their own stream.
    Join,
}

/// An op of a launch, tagged (step, launch).
type Tagged = ((usize, usize), Sim);

/// Rank `me`'s streams (0: communication; 1..world: the peers'; world: compute; world + 1:
/// the adds', used `at_arrival`) for `steps` steps of `launches` launches, each waited for
/// after the last is queued.
fn streams(
    me: usize,
    world: usize,
    (steps, launches): (usize, usize),
    (at_arrival, one): (bool, bool),
) -> Vec<Stream<Tagged>> {
    let mut s: Vec<Stream<Tagged>> = (0..=world + 1).map(|_| Stream::default()).collect();
    let (compute, adds) = (world, world + 1);
    for step in 0..steps {
        let mut ends = Vec::new();
        for l in 0..launches {
            let sch = schedule(me, world, one);
            // The launch's stream waits for compute first (`before`), then forks.
            let fork = vec![(0, s[0].ops.len()), (compute, s[compute].ops.len())];
            for (j, ops) in sch.peers.into_iter().enumerate() {
                for op in ops {
                    s[j + 1].ops.push(((step, l), Sim::Ce(op)));
                    s[j + 1].after.push(fork.clone());
                }
            }
            for op in sch.last {
                let mut join: Vec<_> = (1..world).map(|j| (j, s[j].ops.len())).collect();
                join.push((compute, fork[1].1));
                s[0].ops.push(((step, l), Sim::Ce(op)));
                s[0].after.push(join);
            }
            let end = s[0].ops.len();
            if at_arrival {
                // The adds' stream waits for the launch's end, adds, frees the slots.
                s[adds].ops.push(((step, l), Sim::Add));
                s[adds].after.push(vec![(0, end)]);
                for op in schedule(me, world, one).first {
                    s[adds].ops.push(((step, l), Sim::Ce(op)));
                    s[adds].after.push(vec![]);
                }
            }
            ends.push((end, s[adds].ops.len()));
        }
        // The waits: compute waits for each launch's end, adds, frees the slots; or waits
        // for the adds' stream.
        for (l, (end, added)) in ends.into_iter().enumerate() {
            if at_arrival {
                s[compute].ops.push(((step, l), Sim::Join));
                s[compute].after.push(vec![(adds, added)]);
                continue;
            }
            s[compute].ops.push(((step, l), Sim::Add));
            s[compute].after.push(vec![(0, end)]);
            for op in schedule(me, world, one).first {
                s[compute].ops.push(((step, l), Sim::Ce(op)));
                s[compute].after.push(vec![]);
            }
        }
    }
    s
}

fn run(
    world: usize,
    steps: usize,
    launches: usize,
    seed: u64,
    (at_arrival, one): (bool, bool),
) -> Result<(), String> {
    let mut ranks: Vec<Vec<Stream<Tagged>>> = (0..world)
        .map(|r| streams(r, world, (steps, launches), (at_arrival, one)))
        .collect();
    // Flags by (rank, launch, flag): "ready" from every peer starts at 1.
    let mut flags: HashMap<(usize, usize, Flag), u32> = HashMap::new();
    for r in 0..world {
        for l in 0..launches {
            for q in (0..world).filter(|&q| q != r) {
                flags.insert((r, l, Flag::Ready(q)), 1);
            }
        }
    }
    let mut added = vec![vec![0usize; launches]; world];
    let mut arrived: HashMap<(usize, usize, usize), usize> = HashMap::new();
    let mut rng = Rng(seed | 1);
    loop {
        let picked = next(&mut ranks, &mut rng, |r, &((_, l), op)| match op {
            Sim::Ce(Op::Wait(f)) => flags.get(&(r, l, f)) == Some(&1),
            _ => true,
        });
        let picked = picked.map_err(|e| format!("{e} (world {world}, seed {seed})"))?;
        let Some((r, _, ((step, l), op))) = picked else {
            break;
        };
        match op {
            Sim::Ce(Op::Set { at, flag }) => {
                let f = flags.entry((at, l, flag)).or_insert(0);
                if *f != 0 {
                    return Err(format!("rank {r} set {flag:?} at {at} twice (step {step})"));
                }
                *f = 1;
            }
            Sim::Ce(Op::Wait(_)) => {}
            Sim::Ce(Op::Reset(f)) => {
                flags.insert((r, l, f), 0);
            }
            Sim::Ce(Op::Push { to }) => {
                if added[to][l] != step {
                    let e = "whose slots hold parts not yet added";
                    return Err(format!("rank {r} pushed step {step} into rank {to} {e}"));
                }
                *arrived.entry((to, step, l)).or_insert(0) += 1;
            }
            Sim::Add => {
                let got = arrived.get(&(r, step, l)).copied().unwrap_or(0);
                if got != world - 1 {
                    return Err(format!("rank {r} added step {step} with {got} parts"));
                }
                added[r][l] += 1;
            }
            Sim::Join => {
                if added[r][l] != step + 1 {
                    return Err(format!(
                        "rank {r}'s compute went past step {step}'s wait before its adds"
                    ));
                }
            }
        }
    }
    for ((r, l, f), v) in &flags {
        let start = matches!(f, Flag::Ready(_)) as u32;
        if *v != start {
            return Err(format!("rank {r}, launch {l}: {f:?} ends at {v}"));
        }
    }
    Ok(())
}

#[test]
fn every_interleaving_tried_adds_every_part_once_and_leaves_the_flags_as_found() {
    for world in [2, 3, 4, 8] {
        for seed in 0..100 {
            // Adds at arrival or at the wait; a rank's copies on a stream per peer or on
            // one (COMM_CE_ONE_STREAM).
            run(world, 3, 3, seed, (seed % 2 == 0, seed % 4 >= 2)).unwrap();
        }
    }
}
