//! Reading: a checkpoint is its manifest. [`Checkpoint::open`] refuses a directory whose
//! files do not match it (missing, extra, wrong size); [`Checkpoint::load`] verifies a
//! file's checksum and the step and rank in its header before parsing it.

use crate::error::{bad, Result};
use crate::manifest::*;
use crate::save::{encode, entry, META_RANK, META_STEP};
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A complete checkpoint: its manifest, checked against the directory.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    dir: PathBuf,
    manifest: Manifest,
}

/// The `key` entry of a safetensors header, if the bytes parse that far.
fn header_value(bytes: &[u8], key: &str) -> Option<String> {
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).ok()?;
    meta.metadata().as_ref()?.get(key).cloned()
}

impl Checkpoint {
    /// Reads `dir/manifest.json` and checks that every file it lists is there with its
    /// size, and that no other `*.safetensors` file is (a stale or foreign file), naming
    /// the file. Reads no data (see [`Self::load`], [`Self::verify`]).
    pub fn open(dir: &Path) -> Result<Self> {
        let manifest = Manifest::read(dir)?;
        for f in &manifest.files {
            let path = dir.join(&f.name);
            let size = match std::fs::metadata(&path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(bad(&path, "missing (listed by manifest.json)"))
                }
                Err(e) => return Err(bad(&path, e)),
            };
            if size != f.size {
                return Err(bad(
                    &path,
                    format!("{size} bytes, manifest.json says {}", f.size),
                ));
            }
        }
        if let Some(x) = data_files(dir)?
            .into_iter()
            .find(|n| manifest.file(n).is_none())
        {
            return Err(bad(
                &dir.join(x),
                format!(
                    "not in manifest.json (step {}): a stale or foreign file; remove it",
                    manifest.step
                ),
            ));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn step(&self) -> u64 {
        self.manifest.step
    }

    /// The world size that saved it.
    pub fn world_size(&self) -> usize {
        self.manifest.world_size
    }

    pub fn contains(&self, name: &str) -> bool {
        self.manifest.file(name).is_some()
    }

    /// The bytes of `name`, verified: listed, same size and CRC-32 as the manifest says,
    /// and its header's step and rank are the manifest's.
    pub fn read_bytes(&self, name: &str) -> Result<Vec<u8>> {
        let path = self.dir.join(name);
        let f = self
            .manifest
            .file(name)
            .ok_or_else(|| bad(&path, "not listed by manifest.json"))?;
        let bytes = std::fs::read(&path).map_err(|e| bad(&path, e))?;
        let step = header_value(&bytes, META_STEP);
        let from = |s: &Option<String>| match s {
            Some(s) if *s != self.manifest.step.to_string() => format!(" (it is from step {s})"),
            _ => String::new(),
        };
        if bytes.len() as u64 != f.size {
            let msg = format!("{} bytes, manifest.json says {}", bytes.len(), f.size);
            return Err(bad(&path, msg + &from(&step)));
        }
        let crc = crc32fast::hash(&bytes);
        if crc != f.crc32 {
            let msg = format!(
                "checksum mismatch: CRC-32 {crc:08x}, manifest.json says {:08x}: corrupt or from another save",
                f.crc32
            );
            return Err(bad(&path, msg + &from(&step)));
        }
        let want_step = self.manifest.step.to_string();
        if step.as_deref() != Some(want_step.as_str()) {
            let msg = format!("header step {step:?}, manifest.json step {want_step}");
            return Err(bad(&path, msg));
        }
        let rank = header_value(&bytes, META_RANK);
        if rank.as_deref() != Some(f.rank.to_string().as_str()) {
            let msg = format!("header rank {rank:?}, manifest.json rank {}", f.rank);
            return Err(bad(&path, msg));
        }
        Ok(bytes)
    }

    /// The tensors of `name` (on the CPU), verified as in [`Self::read_bytes`].
    pub fn load(&self, name: &str) -> Result<HashMap<String, Tensor>> {
        let bytes = self.read_bytes(name)?;
        candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
            .map_err(|e| bad(&self.dir.join(name), e))
    }

    /// Verifies every file (checksums and headers).
    pub fn verify(&self) -> Result<()> {
        for f in &self.manifest.files {
            self.read_bytes(&f.name)?;
        }
        Ok(())
    }

    /// One process rewrites the checkpoint (e.g. consolidates shards): writes `add` (as
    /// rank 0's files, durably), then the manifest atomically (same step and world size,
    /// `add` in, `remove` out), then deletes `remove`. A crash in between leaves either the
    /// old checkpoint or the new one, at worst beside files resume names as stale.
    pub fn replace(self, add: &[(&str, HashMap<String, Tensor>)], remove: &[&str]) -> Result<Self> {
        let dir = self.dir.clone();
        let (step, world) = (self.manifest.step, self.manifest.world_size);
        let mut files: Vec<FileEntry> = self
            .manifest
            .files
            .iter()
            .filter(|f| !remove.contains(&f.name.as_str()))
            .filter(|f| add.iter().all(|(n, _)| *n != f.name))
            .cloned()
            .collect();
        for (name, tensors) in add {
            let path = dir.join(name);
            check_name(&path, name)?;
            let bytes = encode(&path, tensors, step, 0, world)?;
            let tmp = temp_name(&dir, name, 0);
            write_synced(&tmp, &bytes)?;
            publish(&tmp, &path)?;
            files.push(entry(name, 0, &bytes));
        }
        sync_dir(&dir)?;
        let manifest = Manifest::new(step, world, files);
        manifest.write(&dir)?;
        for name in remove.iter().filter(|n| manifest.file(n).is_none()) {
            if self.manifest.file(name).is_some() {
                remove_if_present(&dir.join(name))?;
            }
        }
        sync_dir(&dir)?;
        Ok(Self { dir, manifest })
    }
}
