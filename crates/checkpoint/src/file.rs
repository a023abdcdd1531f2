//! One checkpoint file, in the safetensors format, written and read one tensor at a time:
//! a save or a load holds at most one tensor's bytes on the host beside the tensors
//! themselves, never the whole file (docs/results/gpus-s44.md).
//!
//! The bytes are `safetensors::serialize`'s for the same tensors (ordered by dtype, widest
//! first, then by name), but for the header's JSON keys, which are sorted: safetensors
//! writes them from a `HashMap`, in an order that differs from process to process, so that
//! identical saves gave files (and CRC-32s) that differed.

use crate::error::{bad, Result};
use candle_core::safetensors::Load;
use candle_core::{Device, Tensor};
use safetensors::tensor::{Metadata, TensorInfo, TensorView};
use safetensors::View;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

/// safetensors' bound on a header's length.
const MAX_HEADER: u64 = 100_000_000;
/// The reads' and writes' buffer.
const CHUNK: usize = 8 << 20;

/// A file's length and CRC-32, as the manifest records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sum {
    pub size: u64,
    pub crc32: u32,
}

/// The header for `tensors` and `meta` (JSON keys sorted, padded with spaces to a multiple
/// of 8 bytes), and the tensors in the order of their data in the file.
fn header<'a>(
    at: &Path,
    tensors: &'a HashMap<String, Tensor>,
    meta: HashMap<String, String>,
) -> Result<(Vec<u8>, Vec<&'a Tensor>)> {
    let mut order: Vec<(&String, &Tensor)> = tensors.iter().collect();
    order.sort_by(|(a, x), (b, y)| View::dtype(*y).cmp(&View::dtype(*x)).then(a.cmp(b)));
    let mut infos = Vec::with_capacity(order.len());
    let mut offset = 0;
    for (name, t) in &order {
        let n = View::data_len(*t);
        let info = TensorInfo {
            dtype: View::dtype(*t),
            shape: t.dims().to_vec(),
            data_offsets: (offset, offset + n),
        };
        infos.push((name.to_string(), info));
        offset += n;
    }
    let m = Metadata::new(Some(meta), infos).map_err(|e| bad(at, e))?;
    // serde_json's map is ordered by key (no preserve_order in this workspace).
    let sorted = serde_json::to_value(&m).map_err(|e| bad(at, e))?;
    let mut h = serde_json::to_vec(&sorted).map_err(|e| bad(at, e))?;
    h.resize(h.len().next_multiple_of(8), b' ');
    if h.len() as u64 > MAX_HEADER {
        return Err(bad(at, format!("a header of {} bytes", h.len())));
    }
    Ok((h, order.into_iter().map(|(_, t)| t).collect()))
}

/// The length and CRC-32 of the bytes written to it (a sink: `io::copy` sums into it).
struct Tally {
    crc: crc32fast::Hasher,
    size: u64,
}

impl Tally {
    fn new() -> Self {
        Tally {
            crc: crc32fast::Hasher::new(),
            size: 0,
        }
    }

    fn sum(self) -> Sum {
        Sum {
            size: self.size,
            crc32: self.crc.finalize(),
        }
    }
}

impl Write for Tally {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.crc.update(b);
        self.size += b.len() as u64;
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes to `to`, every byte summed.
struct Summing<W> {
    to: W,
    tally: Tally,
}

impl<W: Write> Summing<W> {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.tally.write_all(b)?;
        self.to.write_all(b)
    }
}

/// Writes `tensors` (any device; copied to the host one at a time) with `meta` in the
/// header to the new file `to`, fsynced; on failure `to` is removed. `at`: the name errors
/// about the tensors give.
pub(crate) fn write(
    at: &Path,
    to: &Path,
    tensors: &HashMap<String, Tensor>,
    meta: HashMap<String, String>,
) -> Result<Sum> {
    let (h, order) = header(at, tensors, meta)?;
    let f = File::create(to).map_err(|e| bad(to, e))?;
    write_into(f, to, &h, order).inspect_err(|_| {
        let _ = std::fs::remove_file(to);
    })
}

/// [`write`]'s bytes into the file `f` (at `to`), fsynced.
fn write_into(f: File, to: &Path, h: &[u8], order: Vec<&Tensor>) -> Result<Sum> {
    let mut w = Summing {
        to: BufWriter::with_capacity(CHUNK, f),
        tally: Tally::new(),
    };
    let io = |e: std::io::Error| bad(to, e);
    w.put(&(h.len() as u64).to_le_bytes()).map_err(io)?;
    w.put(h).map_err(io)?;
    for t in order {
        // A contiguous CPU tensor's bytes are written as they lie; any other tensor is
        // copied (from its device, or into one run) first, alone.
        match comm::with_cpu_bytes(t, |b| w.put(b)) {
            Some(r) => r.map_err(io)?,
            None => {
                let host = t.to_device(&Device::Cpu)?;
                w.put(&View::data(&host)).map_err(io)?
            }
        }
    }
    let f = w.to.into_inner().map_err(|e| bad(to, e.error()))?;
    f.sync_all().map_err(io)?;
    Ok(w.tally.sum())
}

/// A file read whole: its length and CRC-32, its header's metadata where the header
/// parses that far, and its tensors (on the CPU) or why they could not be read. Nothing
/// in it has been checked against a manifest.
pub(crate) struct Contents {
    pub sum: Sum,
    pub meta: HashMap<String, String>,
    pub tensors: std::result::Result<HashMap<String, Tensor>, String>,
}

/// Reads `path` once, from start to end, summing every byte; with `tensors`, makes each
/// tensor as its bytes arrive (else only sums them).
pub(crate) fn read(path: &Path, tensors: bool) -> Result<Contents> {
    let f = File::open(path).map_err(|e| bad(path, e))?;
    let len = f.metadata().map_err(|e| bad(path, e))?.len();
    let mut r = Summed {
        from: BufReader::with_capacity(CHUNK, f),
        tally: Tally::new(),
    };
    let io = |e: std::io::Error| bad(path, e);
    let mut meta = HashMap::new();
    let parsed = parse(&mut r, len, tensors, &mut meta).map_err(io)?;
    // The rest (all of it where the header did not parse), summed.
    std::io::copy(&mut r.from, &mut r.tally).map_err(io)?;
    Ok(Contents {
        sum: r.tally.sum(),
        meta,
        tensors: parsed,
    })
}

/// The header (its metadata into `meta`) and, with `tensors`, the tensors; an I/O error is
/// the outer error, a malformed file the inner one.
fn parse<R: Read>(
    r: &mut Summed<R>,
    len: u64,
    tensors: bool,
    meta: &mut HashMap<String, String>,
) -> std::io::Result<std::result::Result<HashMap<String, Tensor>, String>> {
    let mut n = [0u8; 8];
    if len < 8 {
        return Ok(Err(format!("{len} bytes: no safetensors header")));
    }
    r.take(&mut n)?;
    let n = u64::from_le_bytes(n);
    if n > MAX_HEADER || n > len - 8 {
        return Ok(Err(format!("a header of {n} bytes in a file of {len}")));
    }
    let mut h = vec![0u8; n as usize];
    r.take(&mut h)?;
    let v: serde_json::Value = match serde_json::from_slice(&h) {
        Ok(v) => v,
        Err(e) => return Ok(Err(format!("the safetensors header: {e}"))),
    };
    // The metadata first, by itself, so that a file whose tensors do not parse still says
    // which step it is from.
    if let Some(m) = v.get("__metadata__").and_then(|m| m.as_object()) {
        for (k, v) in m {
            if let Some(s) = v.as_str() {
                meta.insert(k.clone(), s.to_string());
            }
        }
    }
    let m: Metadata = match serde_json::from_value(v) {
        Ok(m) => m,
        Err(e) => return Ok(Err(format!("the safetensors header: {e}"))),
    };
    if 8 + n + m.data_len() as u64 != len {
        return Ok(Err(format!(
            "{len} bytes, its header says {}",
            8 + n + m.data_len() as u64
        )));
    }
    let mut out = HashMap::new();
    if !tensors {
        return Ok(Ok(out));
    }
    let mut buf = Vec::new();
    for name in m.offset_keys() {
        let info = m.info(&name).expect("a key of this header");
        // A float tensor is read straight into its storage; any other through a buffer.
        let made = candle_core::DType::try_from(info.dtype)
            .ok()
            .and_then(|d| Tensor::zeros(info.shape.clone(), d, &Device::Cpu).ok());
        let direct = made
            .and_then(|t| comm::with_cpu_bytes_mut(&t, |b| r.take(b)).map(|read| read.map(|()| t)));
        let t = match direct {
            Some(read) => Ok(read?),
            None => {
                buf.resize(info.data_offsets.1 - info.data_offsets.0, 0);
                r.take(&mut buf)?;
                TensorView::new(info.dtype, info.shape.clone(), &buf)
                    .map_err(|e| e.to_string())
                    .and_then(|v| v.load(&Device::Cpu).map_err(|e| e.to_string()))
            }
        };
        match t {
            Ok(t) => out.insert(name, t),
            Err(e) => return Ok(Err(format!("tensor {name:?}: {e}"))),
        };
    }
    Ok(Ok(out))
}

/// Reads from `from`, every byte summed.
struct Summed<R> {
    from: R,
    tally: Tally,
}

impl<R: Read> Summed<R> {
    fn take(&mut self, b: &mut [u8]) -> std::io::Result<()> {
        self.from.read_exact(b)?;
        self.tally.write_all(b)
    }
}
