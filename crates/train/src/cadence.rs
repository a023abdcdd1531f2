//! `--ckpt-every`: a checkpoint every N steps (`200`), or every so many minutes of training
//! (`30m`; `90s` and `2h` too). Steps are the same count on every rank; a clock is not, so a
//! time cadence goes through the step: each rank's [`Clock`] asks
//! (`step::TrainStep::request_checkpoint`), the ranks agree through the step's flag, and
//! every rank checkpoints after the step the agreed flag names (`StepOut::checkpoint`).
//!
//! ```
//! use train::cadence::Cadence;
//! assert_eq!("200".parse::<Cadence>().unwrap(), Cadence::Steps(200));
//! assert_eq!("30m".parse::<Cadence>().unwrap(), Cadence::Every(std::time::Duration::from_secs(1800)));
//! assert!("0".parse::<Cadence>().is_err() && "5 parsecs".parse::<Cadence>().is_err());
//! ```

use anyhow::{anyhow, bail, Result};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cadence {
    Steps(u64),
    Every(Duration),
}

impl std::str::FromStr for Cadence {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad =
            || anyhow!("--ckpt-every {s:?}: steps (200) or a time (30m, 90s, 2h), more than 0");
        let t = s.trim();
        let i = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
        let (num, unit) = (t[..i].trim(), &t[i..]);
        if unit.is_empty() {
            return match num.parse::<u64>() {
                Ok(0) => bail!("--ckpt-every must be positive"),
                Ok(n) => Ok(Cadence::Steps(n)),
                Err(_) => Err(bad()),
            };
        }
        let x: f64 = num.parse().map_err(|_| bad())?;
        let secs = match unit {
            "s" => x,
            "m" | "min" => x * 60.0,
            "h" => x * 3600.0,
            _ => return Err(bad()),
        };
        // Above a year is no cadence; it also keeps from_secs_f64 from overflowing.
        if !(secs > 0.0 && secs <= 365.0 * 86_400.0) {
            return Err(bad());
        }
        Ok(Cadence::Every(Duration::from_secs_f64(secs)))
    }
}

impl Cadence {
    /// Whether step `done` is a checkpoint step by count.
    pub fn by_steps(&self, done: u64) -> bool {
        matches!(self, Cadence::Steps(n) if done.is_multiple_of(*n))
    }

    /// What a failure can cost, for the run's first lines (`steps`: the run's length).
    pub fn describe(&self, steps: u64) -> String {
        match *self {
            Cadence::Steps(n) => {
                let every = n.min(steps.max(1));
                format!("a checkpoint every {every} steps (--ckpt-every) and at the end: a failure loses at most the {every} steps since the last one")
            }
            Cadence::Every(d) => format!(
                "a checkpoint every {} of training (--ckpt-every; the ranks agree on the step) and at the end: a failure loses at most about {} and one step",
                human(d),
                human(d)
            ),
        }
    }
}

fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    match s {
        s if s >= 3600.0 => format!("{:.3} h", s / 3600.0),
        s if s >= 60.0 => format!("{:.3} min", s / 60.0),
        s if s >= 1.0 => format!("{s:.3} s"),
        s => format!("{:.3} ms", s * 1e3),
    }
    .replace(".000", "")
}

/// One rank's clock for a time cadence: due once per interval since the last checkpoint.
pub struct Clock {
    every: Option<Duration>,
    since: Instant,
    asked: bool,
}

impl Clock {
    pub fn new(c: Cadence) -> Self {
        let every = match c {
            Cadence::Every(d) => Some(d),
            Cadence::Steps(_) => None,
        };
        Self {
            every,
            since: Instant::now(),
            asked: false,
        }
    }

    /// Whether this rank should ask for a checkpoint now (once until [`Self::saved`]).
    pub fn due(&mut self) -> bool {
        let due = !self.asked && self.every.is_some_and(|d| self.since.elapsed() >= d);
        self.asked |= due;
        due
    }

    pub fn saved(&mut self) {
        self.since = Instant::now();
        self.asked = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bad_cadences() {
        let secs = |s: &str| match s.parse::<Cadence>().unwrap() {
            Cadence::Every(d) => d.as_secs_f64(),
            c => panic!("{s}: {c:?}"),
        };
        assert_eq!(secs("90s"), 90.0);
        assert_eq!(secs("1.5m"), 90.0);
        assert_eq!(secs("2h"), 7200.0);
        for bad in ["-1m", "0m", "nanm", "infh", "1e30s", "m", "10d", "", "1.5"] {
            let e = bad.parse::<Cadence>().unwrap_err().to_string();
            assert!(e.contains("--ckpt-every"), "{bad}: {e}");
        }
        assert!(Cadence::Steps(50).by_steps(100) && !Cadence::Steps(50).by_steps(101));
        assert!(!"5m".parse::<Cadence>().unwrap().by_steps(300));
    }

    #[test]
    fn a_clock_is_due_once_per_interval() {
        let mut c = Clock::new(Cadence::Every(Duration::ZERO));
        assert!(c.due());
        assert!(!c.due(), "asked already");
        c.saved();
        assert!(c.due());
        let mut never = Clock::new(Cadence::Steps(1));
        assert!(!never.due());
    }
}
