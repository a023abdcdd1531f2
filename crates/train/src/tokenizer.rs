//! Byte-level BPE (GPT-2's scheme) trained with Hugging Face's `tokenizers` crate, saved as
//! `tokenizer.json`, loadable by `tokenizers` in Python too.

use crate::corpus::EOT;
use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer, TokenizerBuilder, TokenizerImpl};

type Bpe = TokenizerImpl<BPE, NormalizerWrapper, ByteLevel, ByteLevel, ByteLevel>;

/// Trains a byte-level BPE of at most `vocab` tokens (the 256 bytes, the merges and the
/// end-of-text token) on `docs`, and saves it as `path`. Deterministic for the same input.
pub fn train(docs: &[String], vocab: usize, path: &Path) -> Result<Tokenizer> {
    if vocab < 257 {
        bail!("vocabulary size {vocab} is too small: a byte-level BPE needs at least 257 tokens (256 bytes and {EOT})");
    }
    if vocab > u16::MAX as usize + 1 {
        bail!("vocabulary size {vocab} does not fit the uint16 token files (at most 65536)");
    }
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab)
        .min_frequency(2)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(vec![AddedToken::from(EOT, true)])
        .build();
    let mut tok: Bpe = TokenizerBuilder::new()
        .with_model(BPE::default())
        .with_normalizer(None)
        .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
        .with_post_processor(Some(ByteLevel::new(false, true, true)))
        .with_decoder(Some(ByteLevel::default()))
        .build()
        .map_err(|e| anyhow!("building the tokenizer: {e}"))?;
    tok.train(&mut trainer, docs.iter())
        .map_err(|e| anyhow!("training the tokenizer: {e}"))?;
    tok.save(path, true)
        .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    load(path)
}

/// Loads `tokenizer.json`, naming the file on failure.
pub fn load(path: &Path) -> Result<Tokenizer> {
    Tokenizer::from_file(path).map_err(|e| anyhow!("reading tokenizer {}: {e}", path.display()))
}

/// The end-of-text token's id.
pub fn eot_id(tok: &Tokenizer, path: &Path) -> Result<u32> {
    tok.token_to_id(EOT)
        .with_context(|| format!("tokenizer {} has no {EOT} token", path.display()))
}

/// Token ids of `docs`, each followed by the end-of-text token.
pub fn encode_docs(tok: &Tokenizer, docs: &[String], eot: u32) -> Result<Vec<u32>> {
    let enc = tok
        .encode_batch(docs.to_vec(), false)
        .map_err(|e| anyhow!("tokenizing: {e}"))?;
    let mut ids = Vec::new();
    for e in enc {
        ids.extend_from_slice(e.get_ids());
        ids.push(eot);
    }
    Ok(ids)
}

/// Text of `ids` (the end-of-text token shown as itself).
pub fn decode(tok: &Tokenizer, ids: &[u32]) -> Result<String> {
    tok.decode(ids, false).map_err(|e| anyhow!("decoding: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::stories;

    #[test]
    fn trains_round_trips_and_is_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let docs = stories(1, 50_000);
        let (p1, p2) = (dir.path().join("a.json"), dir.path().join("b.json"));
        let t = train(&docs, 400, &p1).unwrap();
        train(&docs, 400, &p2).unwrap();
        assert_eq!(std::fs::read(&p1).unwrap(), std::fs::read(&p2).unwrap());
        assert_eq!(t.get_vocab_size(true), 400);
        let eot = eot_id(&t, &p1).unwrap();
        let ids = encode_docs(&t, &docs[..3], eot).unwrap();
        // BPE compresses: fewer tokens than bytes.
        let bytes: usize = docs[..3].iter().map(|d| d.len()).sum();
        assert!(
            ids.len() * 2 < bytes,
            "{} tokens for {bytes} bytes",
            ids.len()
        );
        let first = ids.iter().position(|&i| i == eot).unwrap();
        assert_eq!(decode(&t, &ids[..first]).unwrap(), docs[0]);
        assert!(train(&docs, 100, &p1)
            .unwrap_err()
            .to_string()
            .contains("too small"));
    }
}
