//! Multi-rank checkpoints whose files are tied to one step (issue 22).
//!
//! A checkpoint is a directory of `*.safetensors` files written by any ranks plus
//! `manifest.json`, written last by rank 0:
//!
//! ```json
//! {"format": "ddp-rs checkpoint", "version": 1, "step": 3, "world_size": 2,
//!  "files": [{"name": "params.safetensors", "rank": 0, "size": 1234, "crc32": 305419896}, …]}
//! ```
//!
//! Every file's safetensors header also records `checkpoint.step`, `checkpoint.rank` and
//! `checkpoint.world_size`. [`save`] (collective, through the [`comm::Communicator`]):
//! rank 0 removes the old manifest (directory fsynced; agreed), every rank writes its files
//! to temporary names and fsyncs them, the ranks agree every write succeeded, rename, fsync
//! the directory, agree, and rank 0 writes the manifest (temp, fsync, rename, directory
//! fsync). The checkpoint is complete only if its manifest is: [`Checkpoint::open`] refuses
//! a missing manifest, a missing file, a file of another size and any `*.safetensors` the
//! manifest does not list; [`Checkpoint::load`] verifies the CRC-32 and the header's step
//! and rank. Errors name the file. The crate knows nothing of models or optimizers. For state
//! larger than a host holds twice: [`Files::put_entries`] writes a tensor made in
//! [`Pieces`], one at a time; [`Checkpoint::load_parts`] keeps only the elements a rank
//! asks for ([`Part`]), still verifying the whole file.
//!
//! ```ignore
//! checkpoint::save(comm, &dev, dir, step, |files| {
//!     files.put(&format!("shard-{}.safetensors", files.rank()), &tensors)
//! })?;
//! let ck = checkpoint::Checkpoint::open(dir)?;
//! let t = ck.load("shard-0.safetensors")?;
//! ```

mod agree;
mod entry;
pub mod error;
mod file;
mod manifest;
mod open;
mod save;

pub use agree::{agree, agree_on_read};
pub use entry::{Entry, Pieces};
pub use error::{CheckpointError, Result};
pub use file::Part;
pub use manifest::{write_atomic, FileEntry, Manifest, FORMAT, MANIFEST, VERSION};
pub use open::Checkpoint;
pub use save::{invalidate, save, Files, META_RANK, META_STEP, META_WORLD};
