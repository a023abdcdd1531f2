//! Model sizes (the seeds' table) and their exact parameter counts.

use crate::error::{ModelError, Result};

pub const VOCAB: usize = 10_000;
pub const CONTEXT: usize = 128;

/// Shape of the Transformer LM.
#[derive(Debug, Clone, PartialEq)]
pub struct LmConfig {
    pub vocab: usize,
    pub context: usize,
    pub d_model: usize,
    pub d_ff: usize,
    pub layers: usize,
    pub heads: usize,
    pub rope_theta: f64,
    pub norm_eps: f64,
}

/// The named sizes: (name, d_model, d_ff, layers, heads).
pub const SIZES: &[(&str, usize, usize, usize, usize)] = &[
    ("small", 768, 3072, 12, 12),
    ("medium", 1024, 4096, 24, 16),
    ("large", 1280, 5120, 36, 20),
    ("xl", 1600, 6400, 48, 25),
    ("2.7B", 2560, 10240, 32, 32),
];

impl LmConfig {
    pub fn new(d_model: usize, d_ff: usize, layers: usize, heads: usize) -> Result<Self> {
        let c = Self {
            vocab: VOCAB,
            context: CONTEXT,
            d_model,
            d_ff,
            layers,
            heads,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
        };
        c.validate()?;
        Ok(c)
    }

    /// One of small, medium, large, xl, 2.7B.
    pub fn by_name(name: &str) -> Result<Self> {
        let (_, d, f, l, h) = SIZES
            .iter()
            .find(|s| s.0.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<&str> = SIZES.iter().map(|s| s.0).collect();
                ModelError::Config(format!(
                    "unknown model size {name:?}; known sizes: {}",
                    names.join(", ")
                ))
            })?;
        Self::new(*d, *f, *l, *h)
    }

    /// A few-thousand-parameter model for CPU tests (still the full architecture).
    pub fn tiny(vocab: usize) -> Self {
        Self {
            vocab,
            context: 32,
            d_model: 32,
            d_ff: 64,
            layers: 2,
            heads: 4,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(ModelError::Config(m));
        if self.vocab == 0
            || self.context == 0
            || self.d_model == 0
            || self.d_ff == 0
            || self.layers == 0
            || self.heads == 0
        {
            return bad(format!("every dimension must be positive: {self:?}"));
        }
        if !self.d_model.is_multiple_of(self.heads) {
            return bad(format!(
                "d_model {} is not divisible by heads {}",
                self.d_model, self.heads
            ));
        }
        if !(self.d_model / self.heads).is_multiple_of(2) {
            return bad(format!(
                "head dimension {} must be even for RoPE",
                self.d_model / self.heads
            ));
        }
        Ok(())
    }

    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads
    }

    /// Parameters of one block: two norms, qkv, output projection, SwiGLU (w1, w3, w2).
    pub fn block_params(&self) -> usize {
        let (d, f) = (self.d_model, self.d_ff);
        2 * d + 3 * d * d + d * d + 3 * d * f
    }

    /// Embedding + blocks + final norm + untied head.
    pub fn param_count(&self) -> usize {
        self.vocab * self.d_model
            + self.layers * self.block_params()
            + self.d_model
            + self.vocab * self.d_model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_equal_the_pytorch_anchor() {
        let n = |s: &str| LmConfig::by_name(s).unwrap().param_count();
        assert_eq!(n("small"), 128_625_408);
        assert_eq!(n("medium"), 423_183_360);
        assert_eq!(n("large"), 969_411_840);
        assert_eq!(n("xl"), 1_998_235_200);
        assert_eq!(n("2.7B"), 3_406_809_600);
    }

    #[test]
    fn unknown_size_is_named() {
        let e = LmConfig::by_name("huge").unwrap_err().to_string();
        assert!(e.contains("\"huge\"") && e.contains("xl"), "{e}");
        assert!(LmConfig::new(100, 10, 1, 3)
            .unwrap_err()
            .to_string()
            .contains("not divisible"));
    }
}
