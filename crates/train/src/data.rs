//! A data directory: `tokenizer.json`, `train.bin`, `val.bin` (uint16 token files) and
//! `meta.json` (vocabulary size, token counts, a hash of the tokenizer, the unigram
//! entropy). `prepare` makes one from the embedded corpus or a text file; `Dataset::open`
//! checks that its parts belong together.

use crate::{corpus, tokenizer, tokens};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub vocab_size: usize,
    pub eot: u32,
    pub train_tokens: usize,
    pub val_tokens: usize,
    /// FNV-1a of tokenizer.json's bytes: the tokenizer that wrote the token files.
    pub tokenizer_hash: String,
    /// Entropy of the train split's token frequencies, in nats per token: the loss of the
    /// best model that ignores context.
    pub unigram_entropy: f64,
    pub source: String,
}

/// Where the text comes from.
pub enum Source<'a> {
    /// The embedded story grammar: seed and size in bytes.
    Stories { seed: u64, bytes: usize },
    /// A text file; documents are separated by blank lines.
    Text(&'a Path),
}

pub fn fnv1a(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{h:016x}")
}

/// Entropy in nats of the unigram distribution of `ids`.
pub fn unigram_entropy(ids: &[u32], vocab: usize) -> f64 {
    let mut c = vec![0u64; vocab];
    for &i in ids {
        c[i as usize] += 1;
    }
    let n = ids.len() as f64;
    c.iter()
        .filter(|&&k| k > 0)
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.ln()
        })
        .sum()
}

/// Generates or reads the documents, trains the tokenizer (`vocab` tokens at most),
/// writes the token files (every 20th document to validation) and meta.json into `dir`.
pub fn prepare(dir: &Path, source: Source, vocab: usize) -> Result<Meta> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (docs, name) = match source {
        Source::Stories { seed, bytes } => {
            let docs = corpus::stories(seed, bytes);
            if docs.len() < 2 {
                bail!("{bytes} bytes of stories make only {} document(s); at least 2 are needed for a train and a validation split", docs.len());
            }
            (
                docs,
                format!("embedded stories, seed {seed}, {bytes} bytes"),
            )
        }
        Source::Text(p) => {
            let bytes =
                std::fs::read(p).with_context(|| format!("reading text file {}", p.display()))?;
            let text = String::from_utf8(bytes).map_err(|e| {
                anyhow::anyhow!("text file {} is not UTF-8: {}", p.display(), e.utf8_error())
            })?;
            let docs: Vec<String> = text
                .split("\n\n")
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(String::from)
                .collect();
            if docs.len() < 2 {
                bail!("text file {} has {} documents (separated by blank lines); at least 2 are needed for a train and a validation split", p.display(), docs.len());
            }
            (docs, format!("{}", p.display()))
        }
    };
    let tok_path = dir.join("tokenizer.json");
    let tok = tokenizer::train(&docs, vocab, &tok_path)?;
    if tok.get_vocab_size(true) <= 257 {
        bail!("{name} is too small to train a tokenizer: no pair of bytes occurs twice within a word, so byte-level BPE learned no merge");
    }
    let eot = tokenizer::eot_id(&tok, &tok_path)?;
    let every = if docs.len() >= 20 { 20 } else { docs.len() };
    let (mut tr, mut va) = (Vec::new(), Vec::new());
    for (i, d) in docs.into_iter().enumerate() {
        if i % every == every - 1 {
            va.push(d)
        } else {
            tr.push(d)
        }
    }
    let train_ids = tokenizer::encode_docs(&tok, &tr, eot)?;
    let val_ids = tokenizer::encode_docs(&tok, &va, eot)?;
    tokens::write(&dir.join("train.bin"), &train_ids)?;
    tokens::write(&dir.join("val.bin"), &val_ids)?;
    let vocab_size = tok.get_vocab_size(true);
    let meta = Meta {
        vocab_size,
        eot,
        train_tokens: train_ids.len(),
        val_tokens: val_ids.len(),
        tokenizer_hash: fnv1a(&std::fs::read(&tok_path)?),
        unigram_entropy: unigram_entropy(&train_ids, vocab_size),
        source: name,
    };
    std::fs::write(dir.join("meta.json"), serde_json::to_string_pretty(&meta)?)
        .with_context(|| format!("writing {}", dir.join("meta.json").display()))?;
    Ok(meta)
}

/// An opened data directory.
pub struct Dataset {
    pub dir: PathBuf,
    pub meta: Meta,
    pub tokenizer: Tokenizer,
    pub train: tokens::TokenFile,
    pub val: tokens::TokenFile,
}

impl Dataset {
    pub fn open(dir: &Path) -> Result<Self> {
        let mp = dir.join("meta.json");
        let meta: Meta =
            serde_json::from_slice(&std::fs::read(&mp).with_context(|| {
                format!("reading {} (run `train prepare` first?)", mp.display())
            })?)
            .with_context(|| format!("parsing {}", mp.display()))?;
        let tp = dir.join("tokenizer.json");
        let bytes = std::fs::read(&tp).with_context(|| format!("reading {}", tp.display()))?;
        let tokenizer = tokenizer::load(&tp)?;
        let hash = fnv1a(&bytes);
        let v = tokenizer.get_vocab_size(true);
        if hash != meta.tokenizer_hash || v != meta.vocab_size {
            bail!(
                "tokenizer {} does not match the token files: {} says they were written by a tokenizer of {} tokens with hash {}, this one has {v} tokens and hash {hash}",
                tp.display(), mp.display(), meta.vocab_size, meta.tokenizer_hash
            );
        }
        let train = tokens::TokenFile::open(&dir.join("train.bin"), v)?;
        let val = tokens::TokenFile::open(&dir.join("val.bin"), v)?;
        for (f, n) in [(&train, meta.train_tokens), (&val, meta.val_tokens)] {
            if f.len() != n {
                bail!(
                    "token file {} has {} tokens, {} says {n}: not the file `train prepare` wrote with this tokenizer (another data set's? truncated?)",
                    f.path().display(), f.len(), mp.display()
                );
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            meta,
            tokenizer,
            train,
            val,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_then_open_and_mismatches_are_named() {
        let d = tempfile::tempdir().unwrap();
        let m = prepare(
            d.path(),
            Source::Stories {
                seed: 3,
                bytes: 60_000,
            },
            300,
        )
        .unwrap();
        let ds = Dataset::open(d.path()).unwrap();
        assert_eq!(
            (&ds.meta.tokenizer_hash, ds.meta.vocab_size),
            (&m.tokenizer_hash, 300)
        );
        assert!((ds.meta.unigram_entropy - m.unigram_entropy).abs() < 1e-12);
        assert_eq!(
            (ds.train.len(), ds.val.len()),
            (m.train_tokens, m.val_tokens)
        );
        assert!(m.val_tokens * 10 < m.train_tokens && m.val_tokens > 0);
        // The stories' unigram entropy is well above 0 and below ln V.
        assert!(
            m.unigram_entropy > 3.0 && m.unigram_entropy < (300f64).ln(),
            "{m:?}"
        );
        assert!((unigram_entropy(&[1, 1, 2, 2], 3) - 2f64.ln()).abs() < 1e-12);
        // Another tokenizer in the directory: refused, naming it.
        let other = tempfile::tempdir().unwrap();
        prepare(
            other.path(),
            Source::Stories {
                seed: 4,
                bytes: 60_000,
            },
            280,
        )
        .unwrap();
        std::fs::copy(
            other.path().join("tokenizer.json"),
            d.path().join("tokenizer.json"),
        )
        .unwrap();
        let e = Dataset::open(d.path()).err().unwrap().to_string();
        assert!(
            e.contains("tokenizer.json") && e.contains("does not match"),
            "{e}"
        );
    }
}
