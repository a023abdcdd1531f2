//! Forward and backward's time on one GPU, in three parts:
//! - [`FIXED_S`]: what does not grow with the tokens;
//! - 6·Ψ a token at [`Rates::flops_at`]: the GEMMs and what runs beside them;
//! - the causal attention's work, 7·t·d_model·layers a token (two products of t/2 keys
//!   forward, five backward), at its own measured rate ([`ATTENTION_MS_H200`]).
//!
//! At 128 tokens a sequence the attention is 2 % of xl's forward and backward; at 1024,
//! 16 %. A rate of 6·Ψ a token alone, fitted at 128, put xl at 8 × 1024 tokens 4.5 % over
//! its measured step.

use super::Rates;
use crate::shape::Shape;

/// The part of forward and backward that does not grow with the tokens, in seconds: the
/// mean of an H200's xl (5.69 ms) and 6.7B (5.01 ms). Each is fitted from its step at
/// 8 × 1024 tokens against 8 × 128:
/// - xl: `train run` 215.58 ms (call 281), less 14.74 of AdamW and the rest (call 256) and
///   32.90 of attention (call 281's marks), leaves 167.94 ms against 25.97 at 1024 tokens
///   (call 256's 26.47, its attention out);
/// - 6.7B: 602.03 ms (call 288's two runs of 4ede8c1), less 45.86 (call 256) and 52.75
///   (call 287), leaves 503.42 against 67.31.
///
/// An H100's is not measured: the H200's.
pub const FIXED_S: f64 = 5.35e-3;

/// The attention's forward and backward on an H200, in ms, from `bench profile`'s marks at
/// 8 × 1024 tokens (call 289; the split into heads and D = dY · Y included):
/// `(size, forward, backward)`. Its rate by head width comes from them
/// ([`attention_h200`]). An H100's is not measured: the H200's.
pub const ATTENTION_MS_H200: [(&str, f64, f64); 2] = [("xl", 10.12, 21.81), ("6.7B", 16.32, 34.00)];

/// The attention's FLOP/s by head width, from [`ATTENTION_MS_H200`]: xl's heads of 64 at
/// 141 TFLOP/s, the 6.7B's of 128 at 153.
pub fn attention_h200() -> Vec<(usize, f64)> {
    let mut at: Vec<_> = ATTENTION_MS_H200
        .iter()
        .filter_map(|&(n, fwd, bwd)| {
            let s = Shape::by_name(n, 683, 1024)?;
            Some((s.head_dim(), work(&s, 8 * 1024) / ((fwd + bwd) * 1e-3)))
        })
        .collect();
    at.sort_by_key(|a| a.0);
    at
}

/// The attention's FLOPs for `tokens` of `shape` (sequences of `shape.context`).
fn work(shape: &Shape, tokens: usize) -> f64 {
    7.0 * (shape.context * shape.d_model * shape.layers) as f64 * tokens as f64
}

/// The attention's time for `tokens` of `shape` at `rates` by head width (linear between
/// two, the nearest's outside them; none without rates).
pub(super) fn attention_s(rates: &[(usize, f64)], shape: &Shape, tokens: usize) -> f64 {
    let e = shape.head_dim();
    let rate = match (rates.first(), rates.last()) {
        (Some(lo), _) if e <= lo.0 => lo.1,
        (_, Some(hi)) if e >= hi.0 => hi.1,
        (Some(_), Some(_)) => {
            let i = rates
                .iter()
                .position(|r| r.0 >= e)
                .unwrap_or(rates.len() - 1);
            let (a, b) = (rates[i - 1], rates[i]);
            a.1 + (b.1 - a.1) * (e - a.0) as f64 / (b.0 - a.0) as f64
        }
        _ => return 0.0,
    };
    work(shape, tokens) / rate
}

/// Of forward and backward measured at `fb_s` seconds for 8 × 128 tokens of `shape`, what
/// grows with the tokens: less `fixed_s` and the attention at `attention`. The rates of
/// 6·Ψ a token ([`Rates::flops`], [`Rates::by_size`]) are fitted to it.
pub(super) fn grows_s(fb_s: f64, fixed_s: f64, attention: &[(usize, f64)], shape: &Shape) -> f64 {
    fb_s - fixed_s - attention_s(attention, shape, 1024)
}

impl Rates {
    /// Forward and backward of `tokens` a GPU of `shape`, in seconds: [`Rates::fixed_s`],
    /// 6·Ψ a token at [`Rates::flops_at`] and the attention at [`Rates::attention`].
    pub fn compute(&self, shape: &Shape, tokens: usize) -> f64 {
        let psi = shape.params() as f64;
        self.fixed_s
            + 6.0 * psi * tokens as f64 / self.flops_at(psi)
            + self.attention_s(shape, tokens)
    }

    /// The attention's part of [`Rates::compute`], in seconds.
    pub fn attention_s(&self, shape: &Shape, tokens: usize) -> f64 {
        attention_s(&self.attention, shape, tokens)
    }
}
