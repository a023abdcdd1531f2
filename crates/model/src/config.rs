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

/// The named sizes: (name, d_model, d_ff, layers, heads): small … xl, 2.7B, and the
/// Llama-shaped 6.7B and 13B (head width 128). The table lives in `memplan` (which xtask
/// reads without building candle).
pub use memplan::SIZES;

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

    /// One of [`SIZES`]: small, medium, large, xl, 2.7B, 6.7B, 13B.
    pub fn by_name(name: &str) -> Result<Self> {
        let (_, d, f, l, h) = SIZES
            .iter()
            .find(|s| s.0.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                ModelError::Config(format!(
                    "unknown model size {name:?}; known sizes: {}",
                    memplan::size_names()
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

    /// The shape the memory plan ([`crate::plan`]) and the parameter counts work on.
    pub fn shape(&self) -> memplan::Shape {
        memplan::Shape {
            vocab: self.vocab,
            context: self.context,
            d_model: self.d_model,
            d_ff: self.d_ff,
            layers: self.layers,
            heads: self.heads,
        }
    }

    /// Parameters of one block: two norms, qkv, output projection, SwiGLU (w1, w3, w2).
    pub fn block_params(&self) -> usize {
        usize::try_from(self.shape().block_params()).unwrap_or(usize::MAX)
    }

    /// Embedding + blocks + final norm + untied head (saturating: never overflows).
    pub fn param_count(&self) -> usize {
        usize::try_from(self.shape().params()).unwrap_or(usize::MAX)
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
        // Llama-shaped, as torch_best.py's "6.7B" and "13B": head width 128.
        assert_eq!(n("6.7B"), 6_558_191_616);
        assert_eq!(n("13B"), 12_790_584_320);
        for name in ["6.7B", "13b"] {
            let c = LmConfig::by_name(name).unwrap();
            assert_eq!((c.head_dim(), c.vocab, c.context), (128, VOCAB, CONTEXT));
        }
    }

    #[test]
    fn unknown_size_is_named() {
        let e = LmConfig::by_name("huge").unwrap_err().to_string();
        assert!(
            e.contains("\"huge\"") && e.contains("xl, 2.7B, 6.7B, 13B"),
            "{e}"
        );
        assert!(LmConfig::new(100, 10, 1, 3)
            .unwrap_err()
            .to_string()
            .contains("not divisible"));
    }
}
