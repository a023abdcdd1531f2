//! Saving: every rank writes its files to temporary names (fsynced), the ranks agree that
//! every write succeeded, the files are renamed (directory fsynced), the ranks agree
//! again, and rank 0 writes the manifest last. The old manifest is removed (and agreed)
//! before anything is written, so a crash mid-save leaves no manifest beside new files.

use crate::agree::agree;
use crate::entry::Entry;
use crate::error::{bad, CheckpointError, Result};
use crate::manifest::*;
use candle_core::{Device, Tensor};
use comm::Communicator;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Safetensors header keys every checkpoint file carries.
pub const META_STEP: &str = "checkpoint.step";
pub const META_RANK: &str = "checkpoint.rank";
pub const META_WORLD: &str = "checkpoint.world_size";

/// This rank's files of one save, written under temporary names until the ranks agree.
pub struct Files {
    dir: PathBuf,
    step: u64,
    rank: usize,
    world: usize,
    written: Vec<(PathBuf, FileEntry)>,
}

/// The header's metadata of every checkpoint file.
pub(crate) fn header_meta(step: u64, rank: usize, world: usize) -> HashMap<String, String> {
    HashMap::from([
        (META_STEP.to_string(), step.to_string()),
        (META_RANK.to_string(), rank.to_string()),
        (META_WORLD.to_string(), world.to_string()),
    ])
}

impl Files {
    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn world_size(&self) -> usize {
        self.world
    }

    pub fn step(&self) -> u64 {
        self.step
    }

    /// Writes `tensors` as `name` (`*.safetensors`) under a temporary name, fsynced; it
    /// appears under `name` only once every rank's files are written.
    pub fn put(&mut self, name: &str, tensors: &HashMap<String, Tensor>) -> Result<()> {
        self.put_entries(name, entries(tensors))
    }

    /// [`Self::put`] of entries: tensors, or [`crate::Pieces`] made one at a time as the
    /// file is written.
    pub fn put_entries(&mut self, name: &str, entries: HashMap<String, Entry>) -> Result<()> {
        let path = self.dir.join(name);
        check_name(&path, name)?;
        if self.written.iter().any(|(_, f)| f.name == name) {
            return Err(bad(&path, "written twice in one save"));
        }
        let tmp = temp_name(&self.dir, name, self.rank);
        let meta = header_meta(self.step, self.rank, self.world);
        let sum = crate::file::write(&path, &tmp, entries, meta)?;
        self.written.push((tmp, entry(name, self.rank, sum)));
        Ok(())
    }

    fn entries(&self) -> Vec<FileEntry> {
        self.written.iter().map(|(_, f)| f.clone()).collect()
    }

    /// Removes this rank's temporary files (a failed save).
    fn discard(&self) {
        for (tmp, _) in &self.written {
            let _ = std::fs::remove_file(tmp);
        }
    }

    /// Renames every temporary file to its name, then fsyncs the directory.
    fn publish(&self) -> Result<()> {
        for (tmp, f) in &self.written {
            publish(tmp, &self.dir.join(&f.name))?;
        }
        sync_dir(&self.dir)
    }
}

/// `tensors` as a file's entries.
pub(crate) fn entries(tensors: &HashMap<String, Tensor>) -> HashMap<String, Entry<'static>> {
    (tensors.iter())
        .map(|(k, t)| (k.clone(), Entry::Tensor(t.clone())))
        .collect()
}

pub(crate) fn entry(name: &str, rank: usize, sum: crate::file::Sum) -> FileEntry {
    FileEntry {
        name: name.to_string(),
        rank,
        size: sum.size,
        crc32: sum.crc32,
    }
}

/// Creates `dir`; rank 0 also removes its manifest (then fsyncs the directory) and
/// returns the files that manifest listed (they belong to the checkpoint being replaced).
fn prepare(dir: &Path, rank: usize) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).map_err(|e| bad(dir, e))?;
    if !std::fs::metadata(dir).map_err(|e| bad(dir, e))?.is_dir() {
        return Err(bad(dir, "not a directory"));
    }
    remove_stale_temps(dir, rank)?;
    if rank != 0 || !dir.join(MANIFEST).exists() {
        return Ok(Vec::new());
    }
    // An unreadable old manifest lists nothing; its files count as strays below.
    let old = Manifest::read(dir)
        .map(|m| m.files.into_iter().map(|f| f.name).collect())
        .unwrap_or_default();
    std::fs::remove_file(dir.join(MANIFEST)).map_err(|e| bad(&dir.join(MANIFEST), e))?;
    sync_dir(dir)?;
    Ok(old)
}

/// Removes this rank's temporary files that an earlier process left in `dir` (killed
/// mid-save): `.NAME.tmp-{rank}-{pid}` of another pid. They are never part of a
/// checkpoint, and can be as large as one.
fn remove_stale_temps(dir: &Path, rank: usize) -> Result<()> {
    let mine = format!(".tmp-{rank}-");
    let pid = std::process::id().to_string();
    for e in std::fs::read_dir(dir).map_err(|e| bad(dir, e))?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let stale = name.starts_with('.')
            && name
                .rsplit_once(&mine)
                .is_some_and(|(_, p)| p != pid && p.chars().all(|c| c.is_ascii_digit()));
        if stale {
            remove_if_present(&e.path())?;
        }
    }
    Ok(())
}

/// Invalidates the checkpoint in `dir` (if any) on every rank's behalf: rank 0 removes
/// its manifest and fsyncs the directory; returns once all ranks agree. Use it before
/// saving several checkpoints that belong together (e.g. one per parameter group).
pub fn invalidate(comm: &dyn Communicator, dev: &Device, dir: &Path) -> Result<()> {
    let r = prepare(dir, comm.rank()).map(|_| ());
    agree(comm, dev, dir, "invalidating the old checkpoint", r).map(|_| ())
}

/// Rank 0's last phase: removes the replaced checkpoint's files that this save did not
/// rewrite, refuses strays (other `*.safetensors` here), writes the manifest.
fn finish(dir: &Path, old: &[String], m: &Manifest) -> Result<()> {
    for name in old.iter().filter(|n| m.file(n).is_none()) {
        check_name(&dir.join(MANIFEST), name)?;
        remove_if_present(&dir.join(name))?;
    }
    if let Some(s) = data_files(dir)?.iter().find(|n| m.file(n).is_none()) {
        return Err(bad(
            &dir.join(s),
            "not written by this save nor listed by the checkpoint it replaces; \
             refusing to leave it beside the new checkpoint (remove it or save elsewhere)",
        ));
    }
    sync_dir(dir)?;
    m.write(dir)
}

/// Saves one checkpoint of `step` into `dir`; every rank must call it (collective). `f`
/// writes this rank's files through [`Files::put`]. Returns the manifest once every rank's
/// files are durable and rank 0 has written the manifest; on any rank's failure no rank
/// publishes a manifest, and each returns its own error or one naming the failed rank.
pub fn save<E, F>(
    comm: &dyn Communicator,
    dev: &Device,
    dir: &Path,
    step: u64,
    f: F,
) -> Result<Manifest, E>
where
    E: From<CheckpointError> + std::fmt::Display,
    F: FnOnce(&mut Files) -> Result<(), E>,
{
    let (rank, world) = (comm.rank(), comm.world_size());
    let p = prepare(dir, rank);
    let old = agree(comm, dev, dir, "invalidating the old checkpoint", p)?.swap_remove(0);
    let mut files = Files {
        dir: dir.to_path_buf(),
        step,
        rank,
        world,
        written: Vec::new(),
    };
    let wrote = f(&mut files);
    let mine = match &wrote {
        Ok(()) => Ok(files.entries()),
        Err(e) => Err(bad(dir, e)),
    };
    let all = match (agree(comm, dev, dir, "writing", mine), wrote) {
        (_, Err(e)) => {
            files.discard();
            return Err(e);
        }
        (Err(e), _) => {
            files.discard();
            return Err(e.into());
        }
        (Ok(all), Ok(())) => all,
    };
    let entries: Vec<FileEntry> = all.into_iter().flatten().collect();
    let m = Manifest::new(step, world, entries);
    if let Some(w) = m.files.windows(2).find(|w| w[0].name == w[1].name) {
        files.discard();
        let msg = format!("written by ranks {} and {}", w[0].rank, w[1].rank);
        return Err(bad(&dir.join(&w[0].name), msg).into());
    }
    agree(comm, dev, dir, "renaming", files.publish())?;
    let done = if rank == 0 {
        finish(dir, &old, &m)
    } else {
        Ok(())
    };
    agree(comm, dev, dir, "writing the manifest", done)?;
    Ok(m)
}
