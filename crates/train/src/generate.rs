//! Sampled continuations: temperature and top-k sampling from the model's last-position
//! logits, the window sliding over the last `context` tokens, stopping at end-of-text.

use crate::rng::SplitMix64;
use anyhow::Result;
use candle_core::{Device, Tensor};
use model::TransformerLm;
use tokenizers::Tokenizer;

pub struct SampleOpts {
    pub max_new: usize,
    /// 0: greedy.
    pub temperature: f64,
    /// 0: the whole vocabulary.
    pub top_k: usize,
}

/// Picks a token from `logits` (one position).
pub fn pick(logits: &[f32], o: &SampleOpts, rng: &mut SplitMix64) -> u32 {
    let argmax = || {
        (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .unwrap_or(0) as u32
    };
    if o.temperature <= 0.0 {
        return argmax();
    }
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    if o.top_k > 0 {
        idx.truncate(o.top_k);
    }
    let top = logits[idx[0]] as f64;
    let w: Vec<f64> = idx
        .iter()
        .map(|&i| ((logits[i] as f64 - top) / o.temperature).exp())
        .collect();
    let total: f64 = w.iter().sum();
    let mut u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
    for (k, &wi) in w.iter().enumerate() {
        if u < wi {
            return idx[k] as u32;
        }
        u -= wi;
    }
    idx[idx.len() - 1] as u32
}

/// The end-of-run samples: each of [`PROMPTS`] and its continuation, drawn with one
/// generator seeded from the run's `seed`; `before_stage` as [`continue_text`]'s.
pub fn samples(
    m: &TransformerLm,
    tok: &Tokenizer,
    eot: u32,
    o: &SampleOpts,
    seed: u64,
    dev: &Device,
    mut before_stage: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<(String, String)>> {
    let mut rng = SplitMix64::new(seed ^ 0x5A3F1E);
    PROMPTS
        .iter()
        .map(|&p| {
            let cont = continue_text(m, tok, eot, (p, o), &mut rng, dev, &mut before_stage)?;
            Ok((p.to_string(), cont))
        })
        .collect()
}

/// The continuation of `prompt` (the new text only). `before_stage(s)` runs before each
/// stage of every forward (`TransformerLm::logits_with`: where FSDP gathers the weights,
/// every rank samples together, with the same `rng`).
pub fn continue_text(
    m: &TransformerLm,
    tok: &Tokenizer,
    eot: u32,
    (prompt, o): (&str, &SampleOpts),
    rng: &mut SplitMix64,
    dev: &Device,
    mut before_stage: impl FnMut(usize) -> Result<()>,
) -> Result<String> {
    let mut ids: Vec<u32> = tok
        .encode(prompt, false)
        .map_err(|e| anyhow::anyhow!("tokenizing the prompt {prompt:?}: {e}"))?
        .get_ids()
        .to_vec();
    if ids.is_empty() {
        ids.push(eot);
    }
    let n0 = ids.len();
    let ctx = m.config().context;
    for _ in 0..o.max_new {
        let w = &ids[ids.len().saturating_sub(ctx)..];
        let input = Tensor::from_vec(w.to_vec(), (1, w.len()), dev)?;
        let logits = m.logits_with(&input, |s| {
            before_stage(s).map_err(|e| model::ModelError::Input(format!("{e:#}")))
        })?;
        let last: Vec<f32> = logits
            .squeeze(0)?
            .get(w.len() - 1)?
            .to_device(&Device::Cpu)?
            .to_vec1()?;
        let next = pick(&last, o, rng);
        if next == eot {
            break;
        }
        ids.push(next);
    }
    crate::tokenizer::decode(tok, &ids[n0..])
}

/// Prompts for the end of a run.
pub const PROMPTS: &[&str] = &[
    "Once upon a time, there was a",
    "Lily had three",
    "One sunny day,",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_top_k_and_temperature() {
        let l = [0.0f32, 5.0, 4.9, -1.0];
        let mut r = SplitMix64::new(1);
        let g = SampleOpts {
            max_new: 1,
            temperature: 0.0,
            top_k: 0,
        };
        assert_eq!(pick(&l, &g, &mut r), 1);
        let k2 = SampleOpts {
            max_new: 1,
            temperature: 1.0,
            top_k: 2,
        };
        let mut seen = [0; 4];
        for _ in 0..2000 {
            seen[pick(&l, &k2, &mut r) as usize] += 1;
        }
        // Only the top two, about equally (e^0.1 : 1).
        assert_eq!((seen[0], seen[3]), (0, 0));
        assert!((900..1200).contains(&seen[1]), "{seen:?}");
    }
}
