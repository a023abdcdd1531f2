//! The order of one copy-engine gather's operations on one rank (`super::ce`), without
//! CUDA, so that the protocol is checked everywhere: the tests below run every rank's
//! streams of several gathers in a row, interleaved at random, and check that none waits
//! for ever, that every part arrives before its rank goes on, that no part lands in a
//! buffer whose rank has not reached that gather, and that the flags end at 0. The
//! copy-engine reduce-scatters (`super::ce_reduce`) run the same order, its `first` after
//! their adds: ce_schedule_reduce_tests.rs checks that arrangement the same way.

/// A flag in a rank's window: set by rank `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Flag {
    /// `from` has reached the gather: its buffer may be written, its part is ready.
    Ready(usize),
    /// `from` has pushed its part into this rank's buffer.
    Done(usize),
}

/// One stream operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Set `flag` to 1 in rank `at`'s window (a peer's, through its mapping here).
    Set { at: usize, flag: Flag },
    /// Wait until `flag` in this rank's window is 1.
    Wait(Flag),
    /// Set `flag` in this rank's window back to 0.
    Reset(Flag),
    /// Copy this rank's parts into rank `to`'s buffer.
    Push { to: usize },
}

/// One gather on rank `me`: `first` on the communication stream, then each peer's
/// operations (in rank order, `me` skipped) on a stream of its own (forked after `first`),
/// or all of them on one stream, the peers from `me + 1` on (`one_stream`); then, once they
/// have all ended, `last` on the communication stream; the gather's completion is recorded
/// after.
#[derive(Debug)]
pub(crate) struct Schedule {
    pub first: Vec<Op>,
    /// The peer streams' operations: one list per stream.
    pub peers: Vec<Vec<Op>>,
    pub last: Vec<Op>,
}

/// Whether a rank's copies go one at a time, on one stream, as `COMM_CE_ONE_STREAM` (`env`)
/// says: unset or 0, no (a stream per peer, every peer's copy at once); 1, yes, so that a
/// GPU takes in from about one peer at a time (session 41: at world 4 three copies at once
/// brought in 200-230 GB/s, one copy from one peer 358 at world 2). Any other value is an
/// error naming the variable.
pub(crate) fn one_stream(env: Option<&str>) -> crate::error::Result<bool> {
    match env {
        None | Some("") | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(v) => Err(crate::error::CommError::Env {
            name: "COMM_CE_ONE_STREAM".into(),
            msg: format!("{v:?}: 1 (a rank's copies one at a time, on one stream) or 0"),
        }),
    }
}

/// Rank `me`'s schedule of a gather over `world` ranks.
pub(crate) fn schedule(me: usize, world: usize, one_stream: bool) -> Schedule {
    let peers: Vec<usize> = match one_stream {
        true => (1..world).map(|j| (me + j) % world).collect(),
        false => (0..world).filter(|&q| q != me).collect(),
    };
    let ops: Vec<Vec<Op>> = peers
        .iter()
        .map(|&q| {
            vec![
                Op::Wait(Flag::Ready(q)),
                Op::Reset(Flag::Ready(q)),
                Op::Push { to: q },
                Op::Set {
                    at: q,
                    flag: Flag::Done(me),
                },
            ]
        })
        .collect();
    Schedule {
        first: peers
            .iter()
            .map(|&q| Op::Set {
                at: q,
                flag: Flag::Ready(me),
            })
            .collect(),
        peers: match one_stream {
            true => vec![ops.concat()],
            false => ops,
        },
        last: peers
            .iter()
            .flat_map(|&q| [Op::Wait(Flag::Done(q)), Op::Reset(Flag::Done(q))])
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// One stream of one rank: its operations, each tagged (`T`: an op with its gather, or
    /// with its step and launch), and what must have happened before each may start
    /// (`after`: (stream, count of its ops)).
    pub(super) struct Stream<T> {
        pub ops: Vec<T>,
        /// Per op: the ops of other streams of this rank that must be done first.
        pub after: Vec<Vec<(usize, usize)>>,
        pub done: usize,
    }

    impl<T> Default for Stream<T> {
        fn default() -> Self {
            Self {
                ops: Vec::new(),
                after: Vec::new(),
                done: 0,
            }
        }
    }

    /// The next op to run, as (rank, stream, op), counted as done: one chosen by `rng` among
    /// the streams whose next op has what must come first done and is `ready(rank, op)`.
    /// `None` once every stream has ended; an error where none can run but some have not.
    pub(super) fn next<T: Copy>(
        ranks: &mut [Vec<Stream<T>>],
        rng: &mut Rng,
        ready: impl Fn(usize, &T) -> bool,
    ) -> Result<Option<(usize, usize, T)>, String> {
        let mut runnable = vec![];
        for (r, streams) in ranks.iter().enumerate() {
            for (k, st) in streams.iter().enumerate() {
                let Some(op) = st.ops.get(st.done) else {
                    continue;
                };
                let deps = st.after[st.done].iter().all(|&(j, n)| streams[j].done >= n);
                if deps && ready(r, op) {
                    runnable.push((r, k));
                }
            }
        }
        if runnable.is_empty() {
            return match ranks.iter().flatten().any(|s| s.done < s.ops.len()) {
                true => Err("deadlock".into()),
                false => Ok(None),
            };
        }
        let (r, k) = runnable[rng.below(runnable.len())];
        let st = &mut ranks[r][k];
        st.done += 1;
        Ok(Some((r, k, st.ops[st.done - 1])))
    }

    /// Every rank's streams for `gathers` gathers in a row (stream 0: the communication
    /// stream; 1..world: the peers' streams), in stream order, with the fork and join
    /// of each gather as cross-stream dependencies.
    fn streams(me: usize, world: usize, gathers: usize, one: bool) -> Vec<Stream<(usize, Op)>> {
        let mut s: Vec<Stream<_>> = (0..world).map(|_| Stream::default()).collect();
        for g in 0..gathers {
            let sch = schedule(me, world, one);
            // The join of the last gather: S waits for every peer stream's ops so far.
            for op in sch.first {
                let join: Vec<_> = (1..world).map(|j| (j, s[j].ops.len())).collect();
                s[0].ops.push((g, op));
                s[0].after.push(join);
            }
            let fork = (0, s[0].ops.len());
            for (j, ops) in sch.peers.into_iter().enumerate() {
                for op in ops {
                    s[j + 1].ops.push((g, op));
                    s[j + 1].after.push(vec![fork]);
                }
            }
            for op in sch.last {
                let join: Vec<_> = (1..world).map(|j| (j, s[j].ops.len())).collect();
                s[0].ops.push((g, op));
                s[0].after.push(join);
            }
        }
        s
    }

    /// A tiny deterministic generator (xorshift), so that a failure repeats.
    pub(super) struct Rng(pub u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Runs `world` ranks through `gathers` gathers, one runnable op at a time chosen by
    /// `seed`; returns an error naming what broke.
    fn run(world: usize, gathers: usize, seed: u64, one: bool) -> Result<(), String> {
        let mut ranks: Vec<Vec<_>> = (0..world)
            .map(|r| streams(r, world, gathers, one))
            .collect();
        let mut flags: HashMap<(usize, Flag), u32> = HashMap::new();
        // The gather each rank's communication stream has reached (its first op run),
        // and the pushes each rank's buffer received, by gather.
        let mut reached = vec![None::<usize>; world];
        let mut finished = vec![0usize; world];
        let mut arrived: HashMap<(usize, usize), usize> = HashMap::new();
        let mut rng = Rng(seed | 1);
        loop {
            let picked = next(&mut ranks, &mut rng, |r, &(_, op)| match op {
                Op::Wait(f) => flags.get(&(r, f)).copied().unwrap_or(0) == 1,
                _ => true,
            });
            let picked = picked.map_err(|e| format!("{e} (world {world}, seed {seed})"))?;
            let Some((r, k, (g, op))) = picked else {
                break;
            };
            if k == 0 && reached[r] != Some(g) {
                reached[r] = Some(g);
            }
            match op {
                Op::Set { at, flag } => {
                    let f = flags.entry((at, flag)).or_insert(0);
                    if *f != 0 {
                        return Err(format!("rank {r} set {flag:?} at {at} twice (gather {g})"));
                    }
                    *f = 1;
                }
                Op::Wait(_) => {}
                Op::Reset(f) => {
                    flags.insert((r, f), 0);
                }
                Op::Push { to } => {
                    if reached[to] != Some(g) {
                        return Err(format!(
                            "rank {r} pushed gather {g} into rank {to}, which is at {:?}",
                            reached[to]
                        ));
                    }
                    *arrived.entry((to, g)).or_insert(0) += 1;
                }
            }
            // A communication stream whose gather's last op ran: that gather is complete.
            let st = &ranks[r][0];
            let end = st.done == st.ops.len() || st.ops[st.done].0 != g;
            if k == 0 && end && st.done > 0 && finished[r] == g {
                let got = arrived.get(&(r, g)).copied().unwrap_or(0);
                if got != world - 1 {
                    return Err(format!("rank {r} finished gather {g} with {got} parts"));
                }
                finished[r] = g + 1;
            }
        }
        let stuck: Vec<_> = flags.iter().filter(|(_, &v)| v != 0).collect();
        if !stuck.is_empty() {
            return Err(format!("flags left set: {stuck:?}"));
        }
        match finished.iter().all(|&f| f == gathers) {
            true => Ok(()),
            false => Err(format!("gathers finished by rank: {finished:?}")),
        }
    }

    #[test]
    fn every_interleaving_tried_ends_with_every_part_in_place_and_the_flags_at_zero() {
        for one in [false, true] {
            for world in [2, 3, 4, 8] {
                for seed in 0..200 {
                    run(world, 4, seed, one).unwrap();
                }
            }
        }
    }

    #[test]
    fn one_stream_takes_the_peers_from_the_next_rank_on_and_bad_values_name_the_variable() {
        let pushes = |me| -> Vec<usize> {
            let sch = schedule(me, 4, true);
            assert_eq!(sch.peers.len(), 1);
            sch.peers[0]
                .iter()
                .filter_map(|op| match op {
                    Op::Push { to } => Some(*to),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(pushes(0), [1, 2, 3]);
        assert_eq!(pushes(2), [3, 0, 1]);
        assert_eq!(schedule(2, 4, false).peers.len(), 3);
        assert!(!one_stream(None).unwrap() && !one_stream(Some("0")).unwrap());
        assert!(one_stream(Some("1")).unwrap());
        let e = one_stream(Some("yes")).unwrap_err().to_string();
        assert!(e.contains("COMM_CE_ONE_STREAM") && e.contains("yes"), "{e}");
    }
}

#[cfg(test)]
#[path = "ce_schedule_reduce_tests.rs"]
mod reduce_tests;
