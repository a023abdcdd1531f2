//! The LM's named sizes and its parameter tensors in the model's declaration order
//! (`model::TransformerLm::new`: embedding; per block norm1, qkv, o, norm2, w1, w3, w2;
//! final norm; untied head). The one table of sizes: `model::config` re-exports it.

/// The named sizes: (name, d_model, d_ff, layers, heads). The last two are Llama-shaped
/// (head width 128), as the PyTorch anchor's (torch_best.py), for sharding.
pub const SIZES: &[(&str, usize, usize, usize, usize)] = &[
    ("small", 768, 3072, 12, 12),
    ("medium", 1024, 4096, 24, 16),
    ("large", 1280, 5120, 36, 20),
    ("xl", 1600, 6400, 48, 25),
    ("2.7B", 2560, 10240, 32, 32),
    ("6.7B", 4096, 11008, 32, 32),
    ("13B", 5120, 13824, 40, 40),
];

/// The sizes' names, in order, comma-separated (for messages and help).
pub fn size_names() -> String {
    SIZES.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
}

/// What a parameter tensor is, which decides its gradient's dtype: the embedding table's
/// and the norms' gradients are f32 whatever the compute dtype, the GEMM weights' (the
/// head's too) are in the compute dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Embedding,
    Norm,
    Linear,
}

/// The LM's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub vocab: usize,
    pub context: usize,
    pub d_model: usize,
    pub d_ff: usize,
    pub layers: usize,
    pub heads: usize,
}

/// a · b, saturating (a plan of an absurd shape says "does not fit", never panics).
pub(crate) fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

pub(crate) fn u(x: usize) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// The sum of `xs`, saturating.
pub(crate) fn sum(xs: impl IntoIterator<Item = u64>) -> u64 {
    xs.into_iter().fold(0, u64::saturating_add)
}

impl Shape {
    /// The named size `name` (any case) at `vocab` and `context`; `None` if unknown.
    pub fn by_name(name: &str, vocab: usize, context: usize) -> Option<Self> {
        let &(_, d_model, d_ff, layers, heads) =
            SIZES.iter().find(|s| s.0.eq_ignore_ascii_case(name))?;
        Some(Self {
            vocab,
            context,
            d_model,
            d_ff,
            layers,
            heads,
        })
    }

    /// One block's tensors (norm1, qkv, o, norm2, w1, w3, w2) as (elements, kind).
    pub fn block_tensors(&self) -> [(u64, Kind); 7] {
        let (d, f) = (u(self.d_model), u(self.d_ff));
        let lin = |a: u64, b: u64| (mul(a, b), Kind::Linear);
        [
            (d, Kind::Norm),
            lin(mul(3, d), d),
            lin(d, d),
            (d, Kind::Norm),
            lin(f, d),
            lin(f, d),
            lin(d, f),
        ]
    }

    /// Every parameter tensor in declaration order, as (elements, kind).
    pub fn tensors(&self) -> Vec<(u64, Kind)> {
        let table = mul(u(self.vocab), u(self.d_model));
        let mut out = vec![(table, Kind::Embedding)];
        for _ in 0..self.layers {
            out.extend(self.block_tensors());
        }
        out.push((u(self.d_model), Kind::Norm));
        out.push((table, Kind::Linear));
        out
    }

    /// Parameters of one block: two norms, qkv, output projection, SwiGLU (w1, w3, w2).
    pub fn block_params(&self) -> u64 {
        self.block_tensors()
            .iter()
            .fold(0, |a, t| a.saturating_add(t.0))
    }

    /// Embedding + blocks + final norm + untied head (saturating at u64::MAX).
    pub fn params(&self) -> u64 {
        let table = mul(u(self.vocab), u(self.d_model));
        mul(table, 2)
            .saturating_add(mul(u(self.layers), self.block_params()))
            .saturating_add(u(self.d_model))
    }

    /// Training FLOPs a token of a window of `context` tokens, as nanoGPT's and torchtitan's
    /// MFU count them (PaLM's appendix B): 6 a weight of every matrix multiply (the blocks'
    /// and the untied head's; not the embedding's lookup nor the norms' weights), and
    /// 12 · layers · context · d_model for the attention's scores and their use (the causal
    /// mask not discounted). Activation checkpointing's recompute is not counted.
    pub fn flops_per_token(&self) -> f64 {
        let matmul = self
            .tensors()
            .iter()
            .filter(|t| t.1 == Kind::Linear)
            .map(|t| t.0 as f64)
            .sum::<f64>();
        let attention = 12.0 * (self.layers * self.context * self.d_model) as f64;
        6.0 * matmul + attention
    }

    /// The head width d_model / heads (0 without heads).
    pub fn head_dim(&self) -> usize {
        self.d_model.checked_div(self.heads).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(name: &str) -> u64 {
        Shape::by_name(name, 10_000, 128).unwrap().params()
    }

    #[test]
    fn parameter_counts_equal_the_pytorch_anchor() {
        // torch_best.py's LM: Embedding(V, d); per block two RMSNorm(d), qkv (3d, d),
        // o (d, d), w1, w3 (f, d), w2 (d, f), no biases; RMSNorm(d); head (V, d).
        assert_eq!(n("small"), 128_625_408);
        assert_eq!(n("xl"), 1_998_235_200);
        assert_eq!(n("2.7B"), 3_406_809_600);
        assert_eq!(n("6.7B"), 6_558_191_616);
        assert_eq!(n("13B"), 12_790_584_320);
        let s = Shape::by_name("13b", 10_000, 128).unwrap();
        assert_eq!(s.head_dim(), 128);
        let sum: u64 = s.tensors().iter().map(|t| t.0).sum();
        assert_eq!(sum, s.params());
        assert_eq!(s.tensors().len(), 40 * 7 + 3);
    }

    #[test]
    fn flops_per_token_count_the_matrix_weights_and_the_attention() {
        let s = Shape::by_name("xl", 683, 1024).unwrap();
        let (v, d, l) = (683.0, 1600.0, 48.0);
        // Every weight but the embedding table's and the norms' (2 a block, 1 at the end).
        let matmul = s.params() as f64 - v * d - d * (2.0 * l + 1.0);
        assert_eq!(matmul, 48.0 * (4.0 * d * d + 3.0 * d * 6400.0) + v * d);
        assert_eq!(s.flops_per_token(), 6.0 * matmul + 12.0 * l * 1024.0 * d);
    }

    #[test]
    fn absurd_shapes_saturate_instead_of_panicking() {
        let s = Shape {
            vocab: usize::MAX,
            context: 1,
            d_model: usize::MAX,
            d_ff: usize::MAX,
            layers: usize::MAX,
            heads: 0,
        };
        assert_eq!(s.params(), u64::MAX);
        assert_eq!(s.head_dim(), 0);
        assert!(Shape::by_name("huge", 1, 1).is_none());
        assert!(size_names().ends_with("2.7B, 6.7B, 13B"));
    }
}
