//! Cross-rank agreement: every rank publishes its outcome of a phase (and what it wrote)
//! through the [`Communicator`], so all ranks decide alike and a failure names its rank.

use crate::error::{CheckpointError, Result};
use candle_core::{DType, Device, Tensor};
use comm::Communicator;
use serde::{de::DeserializeOwned, Serialize};
use std::path::Path;

/// All ranks' byte strings (one byte per f64 element: F64 collectives exist on every
/// backend, and these messages are small).
fn all_gather_bytes(comm: &dyn Communicator, dev: &Device, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
    let w = comm.world_size();
    let lens = Tensor::zeros(w, DType::F64, dev)?;
    comm.all_gather(&Tensor::new(&[mine.len() as f64], dev)?, &lens)?;
    let lens: Vec<f64> = lens.to_device(&Device::Cpu)?.to_vec1()?;
    let max = lens.iter().fold(0f64, |a, &b| a.max(b)) as usize;
    let mut buf = vec![0f64; max.max(1)];
    for (d, &b) in buf.iter_mut().zip(mine) {
        *d = b as f64;
    }
    let n = buf.len();
    let all = Tensor::zeros(w * n, DType::F64, dev)?;
    comm.all_gather(&Tensor::from_vec(buf, n, dev)?, &all)?;
    let all: Vec<f64> = all.to_device(&Device::Cpu)?.to_vec1()?;
    Ok((0..w)
        .map(|r| {
            all[r * n..r * n + lens[r] as usize]
                .iter()
                .map(|&x| x as u8)
                .collect()
        })
        .collect())
}

/// Every rank's outcome of `phase`: `Ok(value)` (shared with all) or its error message.
/// Returns all ranks' values if every rank succeeded; else this rank's own error if it
/// failed, or an error naming the first rank that did.
pub fn agree<T: Serialize + DeserializeOwned>(
    comm: &dyn Communicator,
    dev: &Device,
    dir: &Path,
    phase: &'static str,
    mine: Result<T>,
) -> Result<Vec<T>> {
    let report: std::result::Result<&T, String> = mine.as_ref().map_err(|e| e.to_string());
    let bytes = serde_json::to_vec(&report).unwrap_or_default(); // unreadable: a failure
    let all = all_gather_bytes(comm, dev, &bytes)?;
    mine?;
    let mut out = Vec::with_capacity(all.len());
    for (rank, b) in all.iter().enumerate() {
        let r: std::result::Result<T, String> =
            serde_json::from_slice(b).unwrap_or_else(|e| Err(format!("unreadable report ({e})")));
        match r {
            Ok(v) => out.push(v),
            Err(msg) => {
                return Err(CheckpointError::Peer {
                    dir: dir.to_path_buf(),
                    phase,
                    rank,
                    seen: comm.rank(),
                    msg,
                })
            }
        }
    }
    Ok(out)
}

/// This rank's reading of the checkpoint in `dir` for a resume, returned once every rank
/// has reported its own: a rank that failed returns its own error, the others one naming
/// it, so a bad checkpoint changes nothing on any rank.
pub fn agree_on_read<T, E>(
    comm: &dyn Communicator,
    dev: &Device,
    dir: &Path,
    read: std::result::Result<T, E>,
) -> std::result::Result<T, E>
where
    E: std::fmt::Display + From<CheckpointError>,
{
    let report = read
        .as_ref()
        .map(|_| ())
        .map_err(|e| crate::error::bad(dir, e));
    let agreed = agree(comm, dev, dir, "resume", report);
    let v = read?;
    agreed?;
    Ok(v)
}
