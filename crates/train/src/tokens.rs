//! Token files: uint16 little-endian token ids, nothing else (nanoGPT's `train.bin`), read
//! through a memory map so a file of any size costs no memory up front.

use anyhow::{bail, Context, Result};
use memmap2::Mmap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `ids` as uint16 little-endian to `path` (temp file, fsync, rename).
pub fn write(path: &Path, ids: &[u32]) -> Result<()> {
    let mut bytes = Vec::with_capacity(ids.len() * 2);
    for (i, &id) in ids.iter().enumerate() {
        let v = u16::try_from(id)
            .with_context(|| format!("{}: token {i} has id {id}, beyond uint16", path.display()))?;
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    let tmp = path.with_extension("bin.tmp");
    let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(&bytes)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

/// A memory-mapped token file whose ids were all checked to be below the vocabulary size.
pub struct TokenFile {
    path: PathBuf,
    map: Mmap,
}

impl TokenFile {
    /// Opens and checks `path`: not empty, an even number of bytes, every id < `vocab`.
    pub fn open(path: &Path, vocab: usize) -> Result<Self> {
        let f =
            File::open(path).with_context(|| format!("opening token file {}", path.display()))?;
        let len = f
            .metadata()
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        if len == 0 {
            bail!("token file {} is empty", path.display());
        }
        if len % 2 != 0 {
            bail!(
                "token file {} has {len} bytes, an odd number: not uint16 tokens",
                path.display()
            );
        }
        // SAFETY: the map is read-only; the file is ours to read, and a token file that
        // another process truncates while we train is outside what we support.
        let map =
            unsafe { Mmap::map(&f) }.with_context(|| format!("mapping {}", path.display()))?;
        let t = Self {
            path: path.to_path_buf(),
            map,
        };
        if let Some((i, id)) = (0..t.len())
            .map(|i| (i, t.get(i)))
            .find(|&(_, id)| id as usize >= vocab)
        {
            bail!(
                "token file {} holds id {id} at token {i}, out of range for the vocabulary of {vocab} (another tokenizer's file?)",
                path.display()
            );
        }
        Ok(t)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.map.len() / 2
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> u16 {
        u16::from_le_bytes([self.map[2 * i], self.map[2 * i + 1]])
    }

    /// Tokens `start..start + n`, as u32.
    pub fn window(&self, start: usize, n: usize) -> Vec<u32> {
        self.map[2 * start..2 * (start + n)]
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as u32)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        write(&p, &[1, 2, 65535, 7]).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), [1, 0, 2, 0, 255, 255, 7, 0]);
        let t = TokenFile::open(&p, 65536).unwrap();
        assert_eq!((t.len(), t.window(1, 3)), (4, vec![2, 65535, 7]));
        let e = TokenFile::open(&p, 1000).err().unwrap().to_string();
        assert!(
            e.contains("t.bin") && e.contains("id 65535 at token 2"),
            "{e}"
        );
        assert!(write(&p, &[70000])
            .unwrap_err()
            .to_string()
            .contains("beyond uint16"));
        let empty = dir.path().join("empty.bin");
        std::fs::write(&empty, b"").unwrap();
        let e = TokenFile::open(&empty, 10).err().unwrap().to_string();
        assert!(e.contains("empty.bin") && e.contains("empty"), "{e}");
        let odd = dir.path().join("odd.bin");
        std::fs::write(&odd, [1u8, 0, 2]).unwrap();
        let e = TokenFile::open(&odd, 10).err().unwrap().to_string();
        assert!(e.contains("odd.bin") && e.contains("odd number"), "{e}");
        let e = TokenFile::open(&dir.path().join("none.bin"), 10)
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("none.bin"));
    }
}
