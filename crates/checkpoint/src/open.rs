//! Reading: a checkpoint is its manifest. [`Checkpoint::open`] refuses a directory whose
//! files do not match it (missing, extra, wrong size); [`Checkpoint::load`] verifies a
//! file's checksum and the step and rank in its header, reading it once.

use crate::entry::Entry;
use crate::error::{bad, Result};
use crate::file::{Part, Pick, Sink};
use crate::manifest::*;
use crate::save::{entries, entry, header_meta, META_RANK, META_STEP};
use candle_core::Tensor;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A complete checkpoint: its manifest, checked against the directory.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    dir: PathBuf,
    manifest: Manifest,
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

    /// Reads `name` once, verified: listed, the size and CRC-32 the manifest says, and
    /// its header's step and rank the manifest's; with `pick`, the tensors it keeps (on the
    /// CPU), made as their bytes arrive.
    fn read(
        &self,
        name: &str,
        pick: Option<&mut Pick>,
        sink: Option<&mut Sink>,
    ) -> Result<HashMap<String, Tensor>> {
        let path = self.dir.join(name);
        let f = self
            .manifest
            .file(name)
            .ok_or_else(|| bad(&path, "not listed by manifest.json"))?;
        let c = crate::file::read(&path, pick, sink)?;
        let step = c.meta.get(META_STEP);
        let from = match step {
            Some(s) if *s != self.manifest.step.to_string() => format!(" (it is from step {s})"),
            _ => String::new(),
        };
        if c.sum.size != f.size {
            let msg = format!("{} bytes, manifest.json says {}", c.sum.size, f.size);
            return Err(bad(&path, msg + &from));
        }
        if c.sum.crc32 != f.crc32 {
            let msg = format!(
                "checksum mismatch: CRC-32 {:08x}, manifest.json says {:08x}: corrupt or from another save",
                c.sum.crc32, f.crc32
            );
            return Err(bad(&path, msg + &from));
        }
        let want_step = self.manifest.step.to_string();
        if step != Some(&want_step) {
            let msg = format!("header step {step:?}, manifest.json step {want_step}");
            return Err(bad(&path, msg));
        }
        let rank = c.meta.get(META_RANK);
        if rank != Some(&f.rank.to_string()) {
            let msg = format!("header rank {rank:?}, manifest.json rank {}", f.rank);
            return Err(bad(&path, msg));
        }
        c.tensors.map_err(|e| bad(&path, e))
    }

    /// The tensors of `name` (on the CPU), verified as in [`Self::verify`]; the file is read
    /// once, a tensor at a time.
    pub fn load(&self, name: &str) -> Result<HashMap<String, Tensor>> {
        self.read(
            name,
            Some(&mut |_: &str, _: &[usize], _: &_| Part::Whole),
            None,
        )
    }

    /// [`Self::load`], keeping of each tensor what `pick(name, shape, kept before it)`
    /// chooses ([`Part`]), in the file's order (by dtype, widest first, then by name): a
    /// rank reads its part of a tensor without holding the rest. The whole file is read
    /// and verified as by [`Self::load`]; nothing is returned from a file that fails.
    pub fn load_parts(
        &self,
        name: &str,
        mut pick: impl FnMut(&str, &[usize], &HashMap<String, Tensor>) -> Part,
    ) -> Result<HashMap<String, Tensor>> {
        self.read(name, Some(&mut pick), None)
    }

    /// Reads `name` once, handing each tensor `pick` keeps to `each` as it is made (a
    /// resume sets a parameter and drops its bytes before the next is read); verified as
    /// by [`Self::load`], but only once every tensor has been handed over: read a file
    /// verified before (by [`Self::load_parts`], skipping what this load takes), so that a
    /// file changed since is the only way to fail after `each` has taken a tensor.
    pub fn load_each(
        &self,
        name: &str,
        mut pick: impl FnMut(&str, &[usize], &HashMap<String, Tensor>) -> Part,
        mut each: impl FnMut(&str, Tensor) -> std::result::Result<(), String>,
    ) -> Result<()> {
        self.read(name, Some(&mut pick), Some(&mut each))?;
        Ok(())
    }

    /// Verifies every file: listed, the size and CRC-32 the manifest says, its header's
    /// step and rank the manifest's.
    pub fn verify(&self) -> Result<()> {
        for f in &self.manifest.files {
            self.read(&f.name, None, None)?;
        }
        Ok(())
    }

    /// One process rewrites the checkpoint (e.g. consolidates shards): writes `add` (as
    /// rank 0's files, durably), then the manifest atomically (same step and world size,
    /// `add` in, `remove` out), then deletes `remove`. A crash in between leaves either the
    /// old checkpoint or the new one, at worst beside files resume names as stale.
    pub fn replace(self, add: &[(&str, HashMap<String, Tensor>)], remove: &[&str]) -> Result<Self> {
        let add = add.iter().map(|(n, t)| (*n, entries(t))).collect();
        self.replace_entries(add, remove)
    }

    /// [`Self::replace`] with entries: tensors, or [`crate::Pieces`] made one at a time
    /// as a file is written.
    pub fn replace_entries(
        self,
        add: Vec<(&str, HashMap<String, Entry>)>,
        remove: &[&str],
    ) -> Result<Self> {
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
        for (name, entries) in add {
            let path = dir.join(name);
            check_name(&path, name)?;
            let tmp = temp_name(&dir, name, 0);
            let meta = header_meta(step, 0, world);
            let sum = crate::file::write(&path, &tmp, entries, meta)?;
            publish(&tmp, &path)?;
            files.push(entry(name, 0, sum));
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
