//! Which attention kernel the LM's bf16 block runs (`model::kernels::attn`), by sequence
//! length and head width: the one rule the model and the plan both read.

/// A fused attention kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attention {
    /// One block per (batch, head), keeping the probabilities (b, h, t, t): t a multiple of
    /// 32 (query strips of 16 in pairs) up to 128; the rule takes it at 32 and 96.
    Whole,
    /// Tiles of 64 queries or keys, keeping each row's log-sum-exp (b, h, t) f32: t a
    /// multiple of 64. At 8 × 128 tokens on one H200 it took the step below `Whole`'s at
    /// every head width: xl 0.15-0.31 ms, the 2.7B 0.72, the 6.7B 1.97, at 0.16-0.25 GiB
    /// less (calls 327-330, docs/results/gpus-s58.md).
    Tiled,
}

/// The kernel for a bf16 step of sequence `t` and head width `e` (one instance per multiple
/// of 16 up to 128), if one applies; `None`: the block composes GEMMs and softmax kernels.
pub fn attention(bf16: bool, t: usize, e: usize) -> Option<Attention> {
    if !(bf16 && e.is_multiple_of(16) && (16..=128).contains(&e)) {
        None
    } else if t.is_multiple_of(64) && t > 0 {
        Some(Attention::Tiled)
    } else {
        whole(t).then_some(Attention::Whole)
    }
}

/// Whether [`Attention::Whole`] can take sequence `t` (a multiple of 32 up to 128), where
/// the rule gives another kernel (`MODEL_ATTN_TILED=0` takes it there, to measure against).
pub fn whole(t: usize) -> bool {
    t.is_multiple_of(32) && (32..=128).contains(&t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_length_and_width_has_its_kernel() {
        assert_eq!(attention(true, 128, 64), Some(Attention::Tiled));
        assert_eq!(attention(true, 64, 80), Some(Attention::Tiled));
        assert_eq!(attention(true, 32, 128), Some(Attention::Whole));
        assert_eq!(attention(true, 96, 64), Some(Attention::Whole));
        assert!(whole(128) && !whole(192) && !whole(48));
        assert_eq!(attention(true, 192, 128), Some(Attention::Tiled));
        assert_eq!(attention(true, 2048, 80), Some(Attention::Tiled));
        assert_eq!(attention(true, 160, 64), None);
        assert_eq!(attention(true, 1024, 136), None);
        assert_eq!(attention(true, 1024, 72), None);
        assert_eq!(attention(false, 128, 64), None);
    }
}
