//! The four ways of synchronising gradients, and how each is spelled on a command line.

use crate::error::{DdpError, Result};
use std::fmt;
use std::str::FromStr;

/// How gradients are averaged across ranks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy {
    /// After backward, one all-reduce per parameter gradient.
    Naive,
    /// After backward, one all-reduce of all gradients flattened into one buffer.
    Flat,
    /// Each gradient is all-reduced asynchronously as soon as its stage's backward ends.
    Overlap,
    /// Gradients grouped into buckets of at most `bucket_mb` MiB in reverse parameter
    /// order; a bucket is all-reduced asynchronously as soon as all its gradients exist.
    Bucketed { bucket_mb: f64 },
}

impl Strategy {
    /// Checks the strategy's parameters: a bucket size must be a positive, finite number
    /// of MiB (`Ddp::new` calls it, so a NaN or negative size built in code fails there,
    /// naming the size, instead of surfacing later as a cross-rank mismatch).
    pub fn validate(&self) -> Result<()> {
        match *self {
            Strategy::Bucketed { bucket_mb } if !(bucket_mb.is_finite() && bucket_mb > 0.0) => {
                Err(DdpError::Input(format!(
                    "bucket size {bucket_mb} MB must be a positive, finite number of MiB"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether collectives are launched during backward (true) or after it.
    pub fn eager(&self) -> bool {
        matches!(self, Strategy::Overlap | Strategy::Bucketed { .. })
    }
    /// A number that identifies the strategy, for the cross-rank consistency check.
    pub(crate) fn code(&self) -> f64 {
        match self {
            Strategy::Naive => 1.0,
            Strategy::Flat => 2.0,
            Strategy::Overlap => 3.0,
            Strategy::Bucketed { bucket_mb } => 4.0 + bucket_mb,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Naive => write!(f, "naive"),
            Strategy::Flat => write!(f, "flat"),
            Strategy::Overlap => write!(f, "overlap"),
            Strategy::Bucketed { bucket_mb } => write!(f, "bucketed:{bucket_mb}"),
        }
    }
}

impl FromStr for Strategy {
    type Err = DdpError;
    /// `naive`, `flat`, `overlap`, `bucketed:MB` (e.g. `bucketed:25`).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            DdpError::Input(format!(
                "unknown strategy {s:?} (expected naive, flat, overlap or bucketed:MB, e.g. bucketed:25)"
            ))
        };
        match s {
            "naive" => Ok(Strategy::Naive),
            "flat" => Ok(Strategy::Flat),
            "overlap" => Ok(Strategy::Overlap),
            _ => {
                let mb = s.strip_prefix("bucketed:").ok_or_else(bad)?;
                let bucket_mb: f64 = mb.parse().map_err(|_| bad())?;
                let st = Strategy::Bucketed { bucket_mb };
                st.validate().map_err(|_| {
                    DdpError::Input(format!(
                        "bucket size {mb:?} MB in {s:?} must be a positive number"
                    ))
                })?;
                Ok(st)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for s in ["naive", "flat", "overlap", "bucketed:25", "bucketed:0.5"] {
            assert_eq!(s.parse::<Strategy>().unwrap().to_string(), s);
        }
        let e = "bucketed:-1".parse::<Strategy>().unwrap_err().to_string();
        assert!(e.contains("\"-1\""), "{e}");
        let e = "ring".parse::<Strategy>().unwrap_err().to_string();
        assert!(e.contains("\"ring\""), "{e}");
    }
}
