//! The run's memory, checked before the model is built. A GPU rank: its strategy's memory
//! plan (`model::plan`: f32 masters, bf16 copies, gradients, optimizer state, activations
//! of one micro-batch, communication buffers at the step's peak, an estimate) against the
//! memory free on its GPU; a refusal names the built strategies and world sizes that would
//! fit the same global batch. CPU ranks: the lower bound `model::budget::lm_step` against
//! the host's memory (all of this process's ranks).

use crate::config::TrainConfig;
use anyhow::Result;
use candle_core::Device;
use model::budget::{self, Mem};
use model::plan;

/// What the flags name: the model's size and the micro-batch.
fn flags(c: &TrainConfig, lm: &model::LmConfig, rows: usize) -> String {
    let n = lm.param_count() as f64;
    let params = if n >= 1e9 {
        format!("{:.2} B", n / 1e9)
    } else {
        format!("{:.2} M", n / 1e6)
    };
    format!(
        "the model {}({params} parameters) at {rows} sequences of {} tokens a micro-batch (--global-batch {})",
        size_name(c),
        lm.context,
        c.global_batch
    )
}

/// The size's name where the shape is one of the table's ("6.7B "), else "".
fn size_name(c: &TrainConfig) -> String {
    let m = &c.model;
    model::SIZES
        .iter()
        .find(|s| (s.1, s.2, s.3, s.4) == (m.d_model, m.d_ff, m.layers, m.heads))
        .map_or(String::new(), |s| format!("{} ", s.0))
}

/// The plan's input for this rank, and the sequences a micro-batch at world `w` (`None`
/// where the global batch does not split over w ranks and `accum` micro-batches).
fn plan_input(
    c: &TrainConfig,
    lm: &model::LmConfig,
    world: usize,
    captured: bool,
) -> (plan::Input, impl Fn(usize) -> Option<usize>) {
    let (global, accum) = (c.global_batch, c.accum.max(1));
    let rows_at = move |w: usize| {
        let split = w.checked_mul(accum)?;
        (global % split == 0 && global >= split).then(|| global / split)
    };
    let input = plan::Input {
        shape: lm.shape(),
        world,
        rows: c.global_batch / (world.max(1) * accum),
        accum,
        bf16: c.bf16,
        clip: c.clip > 0.0,
        captured,
        // A bad value plans as the default; the engine refuses it, naming the variable.
        sharded_masters: crate::engine::sharded_masters().unwrap_or(true),
        fsdp_gathers: crate::engine::fsdp_gathers().unwrap_or((0, 1)),
        fsdp_unit: crate::engine::fsdp_unit().unwrap_or(None),
        ce_slots: comm::nccl::ce_reduce_asked(),
        // A bad value plans as the default; the engine refuses it, naming the variable.
        ddp_split: ddp::split::asked().unwrap_or(None),
        checkpointed: c.activation_checkpointing,
    };
    (input, rows_at)
}

/// Refuses, before the model is built, a run that will not fit (see the module's doc);
/// `captured`: its steps are to be captured as CUDA graphs (not `--eager`).
pub fn fits(
    c: &TrainConfig,
    vocab: usize,
    world: usize,
    dev: &Device,
    captured: bool,
) -> Result<()> {
    let lm = c.model.lm_config(vocab)?;
    let (input, rows_at) = plan_input(c, &lm, world, captured);
    let flags = flags(c, &lm, input.rows);
    if !dev.is_cuda() {
        let here = budget::ranks_in_this_process(world);
        return budget::ensure_lm_step(&flags, &lm, input.rows, c.bf16, false, here);
    }
    budget::ensure_plan(&flags, &input, &c.strategy, dev, &rows_at)?;
    // The token ids still pass through the host.
    budget::ensure(&flags, budget::lm_ids(&lm, input.rows), Mem::Host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(model: &str, strategy: &str, global_batch: usize) -> TrainConfig {
        TrainConfig::for_tests(model, strategy, global_batch)
    }

    #[test]
    fn a_refusal_shows_the_plan_and_names_the_strategies_that_would_fit() {
        let c = config("6.7B", "bucketed:25", 32);
        let lm = c.model.lm_config(10_000).unwrap();
        let (input, rows_at) = plan_input(&c, &lm, 4, true);
        assert_eq!((input.rows, rows_at(8), rows_at(3)), (8, Some(4), None));
        let flags = flags(&c, &lm, input.rows);
        let s = (plan::Strategy::Ddp, "bucketed:25");
        let free = (80u64 << 30, "free on GPU 0 (test)");
        let e = plan::check(&flags, &input, s, free, &rows_at).unwrap_err();
        assert!(
            e.starts_with(
                "the model 6.7B (6.56 B parameters) at 8 sequences of 128 tokens a micro-batch \
                 (--global-batch 32): --strategy bucketed:25 at world 4 needs about"
            ),
            "{e}"
        );
        assert!(
            e.contains("estimate") && e.contains("free on GPU 0 (test)"),
            "{e}"
        );
        assert!(
            e.contains("Would fit") && e.contains("zero1 at world 2, 4, 8"),
            "{e}"
        );
        let zero1 = (plan::Strategy::Zero1, "zero1");
        assert!(plan::check(&flags, &input, zero1, free, &rows_at).is_ok());
    }

    #[test]
    fn cpu_ranks_keep_the_host_lower_bound() {
        let c = config("nano", "single", 4);
        assert!(fits(&c, 512, 1, &Device::Cpu, true).is_ok());
        let huge = config("13B", "bucketed:25", 8);
        let e = fits(&huge, 10_000, 8, &Device::Cpu, true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("13B") && e.contains("of memory"), "{e}");
    }

    #[test]
    fn zero1_takes_a_bucket_size_and_names_a_bad_one() {
        assert!(config("xl", "zero1:200", 16).validate(2).is_ok());
        assert!(config("xl", "zero1", 16).validate(2).is_ok());
        for bad in ["zero1:lots", "zero2:0", "fsdp:-5", "zero1:nan"] {
            let e = format!("{:#}", config("xl", bad, 16).validate(2).unwrap_err());
            // Named as written, not as the DDP strategy it is parsed through.
            assert!(e.contains(bad) && !e.contains("bucketed"), "{e}");
        }
        let xl = config("xl", "zero1:200", 16).model.lm_config(683).unwrap();
        let (input, _) = plan_input(&config("xl", "zero1:200", 16), &xl, 2, true);
        let z = plan::plan(&input, plan::Strategy::Zero1).peak();
        let of = plan::Strategy::of_train("zero1:200").unwrap();
        assert_eq!(plan::plan(&input, of).peak(), z, "zero1:MB plans as zero1");
    }

    #[test]
    fn fsdp_buckets_are_its_own_unless_named() {
        use crate::config::{zero_buckets, FSDP_BUCKET, ZERO1_BUCKET};
        assert_eq!(zero_buckets("fsdp").unwrap(), Some((3, FSDP_BUCKET)));
        assert_eq!(zero_buckets("zero2").unwrap(), Some((2, ZERO1_BUCKET)));
        let named = ddp::Strategy::Bucketed { bucket_mb: 50.0 };
        assert_eq!(zero_buckets("fsdp:50").unwrap(), Some((3, named)));
    }
}
