//! The learning rate: linear warm-up to `lr`, then a cosine down to `min_lr` at the last
//! step (the seeds' `get_lr_cosine_schedule`, nanoGPT's `get_lr`).

use crate::config::TrainConfig;

/// The learning rate of step `step` (0-based).
pub fn lr(c: &TrainConfig, step: u64) -> f64 {
    if step < c.warmup {
        return c.lr * (step + 1) as f64 / c.warmup as f64;
    }
    if step >= c.steps {
        return c.min_lr;
    }
    let span = (c.steps - c.warmup).max(1) as f64;
    let t = (step - c.warmup) as f64 / span;
    c.min_lr + 0.5 * (1.0 + (std::f64::consts::PI * t).cos()) * (c.lr - c.min_lr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::shape_by_name;

    #[test]
    fn warm_up_then_cosine() {
        let c = TrainConfig {
            model: shape_by_name("nano", None).unwrap(),
            bf16: false,
            strategy: "single".into(),
            steps: 110,
            global_batch: 8,
            accum: 1,
            lr: 1e-3,
            min_lr: 1e-4,
            warmup: 10,
            weight_decay: 0.1,
            beta1: 0.9,
            beta2: 0.95,
            clip: 1.0,
            eval_every: 10,
            eval_batches: 2,
            seed: 0,
            activation_checkpointing: false,
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(lr(&c, 0), 1e-4) && close(lr(&c, 9), 1e-3) && close(lr(&c, 10), 1e-3));
        assert!(close(lr(&c, 60), 5.5e-4));
        assert!(close(lr(&c, 110), 1e-4) && lr(&c, 109) > 1e-4);
        assert!((10..109).all(|s| lr(&c, s + 1) < lr(&c, s)));
        c.validate(2).unwrap_err();
        let mut d = c.clone();
        d.strategy = "bucketed:1".into();
        d.validate(2).unwrap();
        d.lr = 2e-3;
        // The strategy may change on resume; the learning rate may not.
        assert_eq!(c.differences(&d), vec!["lr: 0.001 vs 0.002".to_string()]);
        d.steps = 2 * c.steps;
        d.eval_every = 5;
        assert_eq!(
            c.differences(&d).len(),
            1,
            "steps and eval_every may change"
        );
        let ch = c.changes(&d);
        assert_eq!(ch.len(), 3, "{ch:?}");
        assert!(
            ch.iter()
                .any(|x| x.starts_with("steps: 110 → 220 (the cosine")),
            "{ch:?}"
        );
    }
}
