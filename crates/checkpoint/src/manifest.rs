//! The manifest (`manifest.json`, written last) and the durable file operations: write to
//! a temporary name + fsync, rename, fsync the directory.

use crate::error::{bad, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The manifest's file name in a checkpoint directory.
pub const MANIFEST: &str = "manifest.json";
/// `format` of every manifest this crate writes.
pub const FORMAT: &str = "ddp-rs checkpoint";
/// `version` of the manifest layout.
pub const VERSION: u32 = 1;

/// One file of a checkpoint, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// File name inside the checkpoint directory (`*.safetensors`).
    pub name: String,
    /// The rank that wrote it.
    pub rank: usize,
    /// Bytes.
    pub size: u64,
    /// CRC-32 (IEEE) of the whole file.
    pub crc32: u32,
}

/// What makes a checkpoint complete: every file, of one step, with its size and checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub step: u64,
    pub world_size: usize,
    /// Sorted by name.
    pub files: Vec<FileEntry>,
}

impl Manifest {
    pub fn new(step: u64, world_size: usize, mut files: Vec<FileEntry>) -> Self {
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            format: FORMAT.into(),
            version: VERSION,
            step,
            world_size,
            files,
        }
    }

    pub fn file(&self, name: &str) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.name == name)
    }

    /// Reads and checks `dir/manifest.json` (format, version, names, ranks, duplicates).
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => bad(
                &path,
                "missing: the checkpoint is incomplete (a save did not finish) or not a checkpoint",
            ),
            _ => bad(&path, e),
        })?;
        let m: Manifest = serde_json::from_slice(&text).map_err(|e| bad(&path, e))?;
        if m.format != FORMAT || m.version != VERSION {
            return Err(bad(
                &path,
                format!("unknown format {:?} version {}", m.format, m.version),
            ));
        }
        for (i, f) in m.files.iter().enumerate() {
            check_name(&path, &f.name)?;
            if f.rank >= m.world_size {
                return Err(bad(
                    &path,
                    format!("{} from rank {} of {}", f.name, f.rank, m.world_size),
                ));
            }
            if m.files[..i].iter().any(|g| g.name == f.name) {
                return Err(bad(&path, format!("{} listed twice", f.name)));
            }
        }
        Ok(m)
    }

    /// Writes `dir/manifest.json` atomically and durably (temp, fsync, rename, dir fsync).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(|e| bad(&dir.join(MANIFEST), e))?;
        write_atomic(&dir.join(MANIFEST), &text)
    }
}

/// A file name a checkpoint may hold: `*.safetensors`, no directory part, no leading dot.
pub fn check_name(at: &Path, name: &str) -> Result<()> {
    let ok = name.ends_with(".safetensors")
        && name.len() > ".safetensors".len()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0']);
    if ok {
        Ok(())
    } else {
        Err(bad(
            at,
            format!("bad file name {name:?} (want NAME.safetensors, no directory)"),
        ))
    }
}

/// `dir/.NAME.tmp-{rank}-{pid}`: never a name a checkpoint lists.
pub fn temp_name(dir: &Path, name: &str, rank: usize) -> PathBuf {
    dir.join(format!(".{name}.tmp-{rank}-{}", std::process::id()))
}

/// Creates (truncates) `path`, writes `bytes`, fsyncs it.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(|e| bad(path, e))?;
    f.write_all(bytes).map_err(|e| bad(path, e))?;
    f.sync_all().map_err(|e| bad(path, e))
}

/// Writes `path` whole or not at all: under a temporary name beside it (fsynced), renamed
/// over it, the directory fsynced. A kill or a full disk leaves the old file as it was;
/// a failure removes the temporary file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| bad(path, "not a file name"))?
        .to_string_lossy();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = temp_name(dir, &name, 0);
    let r = write_synced(&tmp, bytes)
        .and_then(|()| publish(&tmp, path))
        .and_then(|()| sync_dir(dir));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Renames `tmp` to `path` (the caller fsyncs the directory).
pub fn publish(tmp: &Path, path: &Path) -> Result<()> {
    std::fs::rename(tmp, path).map_err(|e| bad(path, format!("renaming {}: {e}", tmp.display())))
}

/// Makes the directory's entries (creations, renames, removals) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| bad(dir, format!("fsync of the directory: {e}")))
}

/// Removes `path` if it exists.
pub fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(bad(path, e)),
        _ => Ok(()),
    }
}

/// The `*.safetensors` files in `dir` (plain names, sorted).
pub fn data_files(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| bad(dir, e))? {
        let e = e.map_err(|e| bad(dir, e))?;
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".safetensors") && !name.starts_with('.') {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}
