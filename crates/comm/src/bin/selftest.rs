//! `comm-selftest`: the conformance suite on the NCCL backend, one process per GPU.
//!
//!   comm-launch --nproc-per-node 2 -- comm-selftest
//!   comm-selftest --die-after-init   (this rank exits right after NCCL init: fault test)

use candle_core::Device;
use comm::{conformance, CommOptions, Communicator, DistEnv, NcclComm};

fn main() {
    let die = std::env::args().any(|a| a == "--die-after-init");
    let t0 = std::time::Instant::now();
    let r = (|| -> comm::Result<()> {
        let env = DistEnv::from_env()?;
        let opts = CommOptions::from_env()?;
        let shape_checks = opts.check_shapes;
        let c = NcclComm::new(&env, env.local_rank, opts)?;
        if die {
            eprintln!("rank {}: exiting on purpose after init", env.rank);
            std::process::exit(3);
        }
        let dev: Device = c.device().clone();
        let n = conformance::run_all(&c, &dev)?;
        if shape_checks && c.world_size() > 1 {
            conformance::mismatch_is_detected(&c, &dev)?;
        }
        println!(
            "rank {}/{}: {n} conformance checks passed{}",
            c.rank(),
            c.world_size(),
            if shape_checks {
                ", mismatch detected"
            } else {
                ""
            }
        );
        Ok(())
    })();
    if let Err(e) = r {
        eprintln!(
            "comm-selftest: FAILED after {:.1} s: {e}",
            t0.elapsed().as_secs_f64()
        );
        std::process::exit(1);
    }
}
