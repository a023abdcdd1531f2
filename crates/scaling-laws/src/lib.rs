//! Compute-optimal scaling laws from IsoFLOP training runs (Chinchilla, Hoffmann et al. 2022).
//!
//! Load runs with [`data::load_runs`] (or build [`data::Run`]s), then call
//! [`pipeline::analyze`] to fit all three approaches — 1: lowest-loss run per budget,
//! 2: IsoFLOP parabola vertex per budget, 3: parametric L(N, D) = E + A/N^α + B/D^β with a
//! Huber loss and L-BFGS — plus bootstrap intervals. [`report::build_report`] turns the
//! result into the JSON/table report and [`plot::write_plots`] draws SVGs.
//!
//! ```no_run
//! use scaling_laws::{data::load_runs, pipeline::{analyze, Options}, report::build_report};
//! let runs = load_runs("data/isoflops_curves.json".as_ref())?;
//! let report = build_report(&analyze(&runs, &Options::default())?);
//! println!("N_opt ∝ C^{:.3}", report.approach1.n_exponent);
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod bootstrap;
pub mod data;
pub mod dedup;
pub mod error;
pub mod huber;
pub mod intervals;
pub mod isoflop;
pub mod optimizer;
pub mod parabola;
pub mod parametric;
pub mod pipeline;
pub mod plot;
pub mod powerlaw;
pub mod progress;
pub mod report;
pub mod synthetic;
