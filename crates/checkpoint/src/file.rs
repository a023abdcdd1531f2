//! One checkpoint file, in the safetensors format, written and read one tensor at a time:
//! a save or a load holds at most one tensor's bytes on the host beside the tensors
//! themselves, never the whole file (docs/results/gpus-s44.md).
//!
//! The bytes are `safetensors::serialize`'s for the same tensors (ordered by dtype, widest
//! first, then by name), but for the header's JSON keys, which are sorted: safetensors
//! writes them from a `HashMap`, in an order that differs from process to process, so that
//! identical saves gave files (and CRC-32s) that differed.

use crate::entry::Entry;
use crate::error::{bad, Result};
use candle_core::safetensors::Load;
use candle_core::{Device, Tensor};
use safetensors::tensor::{Metadata, TensorInfo, TensorView};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::ops::Range;
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

/// The header for `entries` and `meta` (JSON keys sorted, padded with spaces to a multiple
/// of 8 bytes), and the entries' names in the order of their data in the file.
fn header(
    at: &Path,
    entries: &HashMap<String, Entry>,
    meta: HashMap<String, String>,
) -> Result<(Vec<u8>, Vec<String>)> {
    let mut order: Vec<(&String, &Entry)> = entries.iter().collect();
    order.sort_by(|(a, x), (b, y)| y.dtype().cmp(&x.dtype()).then(a.cmp(b)));
    let mut infos = Vec::with_capacity(order.len());
    let mut offset = 0;
    for (name, e) in &order {
        let n = e.nbytes();
        let info = TensorInfo {
            dtype: e.dtype(),
            shape: e.shape(),
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
    Ok((h, order.into_iter().map(|(n, _)| n.clone()).collect()))
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

/// Writes `entries` (tensors on any device, copied to the host one at a time; pieces made
/// one at a time) with `meta` in the header to the new file `to`, fsynced; on failure `to`
/// is removed. `at`: the name errors about the tensors give.
pub(crate) fn write(
    at: &Path,
    to: &Path,
    entries: HashMap<String, Entry>,
    meta: HashMap<String, String>,
) -> Result<Sum> {
    let (h, order) = header(at, &entries, meta)?;
    let f = File::create(to).map_err(|e| bad(to, e))?;
    write_into(f, (at, to), &h, entries, order).inspect_err(|_| {
        let _ = std::fs::remove_file(to);
    })
}

/// [`write`]'s bytes into the file `f` (at `to`), fsynced.
fn write_into(
    f: File,
    (at, to): (&Path, &Path),
    h: &[u8],
    mut entries: HashMap<String, Entry>,
    order: Vec<String>,
) -> Result<Sum> {
    let mut w = Summing {
        to: BufWriter::with_capacity(CHUNK, f),
        tally: Tally::new(),
    };
    let io = |e: std::io::Error| bad(to, e);
    w.put(&(h.len() as u64).to_le_bytes()).map_err(io)?;
    w.put(h).map_err(io)?;
    for name in order {
        let e = entries.remove(&name).expect("a name of the header");
        e.write((at, &name, to), &mut |b| w.put(b))?;
    }
    let f = w.to.into_inner().map_err(|e| bad(to, e.error()))?;
    f.sync_all().map_err(io)?;
    Ok(w.tally.sum())
}

/// What a load keeps of one tensor ([`crate::Checkpoint::load_parts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// The tensor, whole.
    Whole,
    /// Nothing: its bytes are summed as they pass, never held.
    Skip,
    /// These elements (row-major indices; ranges ascending and apart), as one 1-D tensor
    /// of them in that order, as safetensors' `get_slice` gives a tensor-parallel rank its
    /// part. The bytes between are summed as they pass, never held.
    Elements(Vec<Range<usize>>),
}

/// Chooses, for each tensor in the file's order, what a load keeps, from its name, its
/// shape and the tensors kept before it in the file.
pub(crate) type Pick<'a> = dyn FnMut(&str, &[usize], &HashMap<String, Tensor>) -> Part + 'a;

/// Takes each tensor kept as it is made, instead of the load keeping it.
pub(crate) type Sink<'a> = dyn FnMut(&str, Tensor) -> std::result::Result<(), String> + 'a;

/// A file read whole: its length and CRC-32, its header's metadata where the header
/// parses that far, and the tensors kept (on the CPU) or why they could not be read.
/// Nothing in it has been checked against a manifest.
pub(crate) struct Contents {
    pub sum: Sum,
    pub meta: HashMap<String, String>,
    pub tensors: std::result::Result<HashMap<String, Tensor>, String>,
}

/// Reads `path` once, from start to end, summing every byte; with `pick`, keeps what it
/// chooses of each tensor as the bytes arrive (else only sums them), or hands it to `sink`.
pub(crate) fn read(
    path: &Path,
    pick: Option<&mut Pick>,
    sink: Option<&mut Sink>,
) -> Result<Contents> {
    let f = File::open(path).map_err(|e| bad(path, e))?;
    let len = f.metadata().map_err(|e| bad(path, e))?.len();
    let mut r = Summed {
        from: BufReader::with_capacity(CHUNK, f),
        tally: Tally::new(),
    };
    let io = |e: std::io::Error| bad(path, e);
    let mut meta = HashMap::new();
    let parsed = parse(&mut r, len, (pick, sink), &mut meta).map_err(io)?;
    // The rest (all of it where the header did not parse), summed.
    std::io::copy(&mut r.from, &mut r.tally).map_err(io)?;
    Ok(Contents {
        sum: r.tally.sum(),
        meta,
        tensors: parsed,
    })
}

/// The header (its metadata into `meta`) and, with `pick`, the tensors kept (those `sink`
/// does not take); an I/O error is the outer error, a malformed file (or a part outside its
/// tensor, or the sink's error) the inner one.
fn parse<R: Read>(
    r: &mut Summed<R>,
    len: u64,
    (pick, mut sink): (Option<&mut Pick>, Option<&mut Sink>),
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
    let Some(pick) = pick else {
        return Ok(Ok(out));
    };
    for name in m.offset_keys() {
        let info = m.info(&name).expect("a key of this header");
        let t = match pick(&name, &info.shape, &out) {
            Part::Skip => {
                r.skip((info.data_offsets.1 - info.data_offsets.0) as u64)?;
                continue;
            }
            Part::Whole => keep(r, info, None)?,
            Part::Elements(e) => keep(r, info, Some(&e))?,
        };
        let taken = match (t, sink.as_mut()) {
            (Ok(t), Some(sink)) => sink(&name, t),
            (Ok(t), None) => {
                out.insert(name.clone(), t);
                Ok(())
            }
            (Err(e), _) => Err(e),
        };
        if let Err(e) = taken {
            return Ok(Err(format!("tensor {name:?}: {e}")));
        }
    }
    Ok(Ok(out))
}

/// Reads one tensor's bytes from `r`, keeping all of it, or the elements `parts`.
fn keep<R: Read>(
    r: &mut Summed<R>,
    info: &TensorInfo,
    parts: Option<&[Range<usize>]>,
) -> std::io::Result<std::result::Result<Tensor, String>> {
    let nbytes = info.data_offsets.1 - info.data_offsets.0;
    let bits = info.dtype.bitsize();
    let count: usize = info.shape.iter().product();
    let (shape, spans): (Vec<usize>, Vec<Range<usize>>) = match parts {
        None => (info.shape.clone(), std::iter::once(0..nbytes).collect()),
        Some(p) => {
            if let Some(e) = check_parts(p, count, bits) {
                return Ok(Err(e));
            }
            let bytes = p.iter().map(|e| e.start * bits / 8..e.end * bits / 8);
            (vec![p.iter().map(|e| e.len()).sum()], bytes.collect())
        }
    };
    let held: usize = spans.iter().map(|s| s.len()).sum();
    // A float tensor is read straight into its storage; any other through a buffer.
    let made = candle_core::DType::try_from(info.dtype)
        .ok()
        .and_then(|d| Tensor::zeros(shape.clone(), d, &Device::Cpu).ok());
    let direct = made.and_then(|t| {
        comm::with_cpu_bytes_mut(&t, |b| r.take_spans(&spans, nbytes, b)).map(|x| x.map(|()| t))
    });
    if let Some(t) = direct {
        return Ok(Ok(t?));
    }
    let mut buf = vec![0u8; held];
    r.take_spans(&spans, nbytes, &mut buf)?;
    Ok(TensorView::new(info.dtype, shape, &buf)
        .map_err(|e| e.to_string())
        .and_then(|v| v.load(&Device::Cpu).map_err(|e| e.to_string())))
}

/// Why element ranges `p` cannot be taken from a tensor of `count` elements of `bits`.
fn check_parts(p: &[Range<usize>], count: usize, bits: usize) -> Option<String> {
    if !bits.is_multiple_of(8) {
        return Some(format!("elements of {bits} bits cannot be taken apart"));
    }
    let mut end = 0;
    for e in p {
        if e.start < end || e.end < e.start || e.end > count {
            return Some(format!(
                "element ranges {p:?}: not ascending and apart within its {count} elements"
            ));
        }
        end = e.end;
    }
    None
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

    /// Sums `n` bytes as they pass, holding none.
    fn skip(&mut self, n: u64) -> std::io::Result<()> {
        let got = std::io::copy(&mut (&mut self.from).take(n), &mut self.tally)?;
        match got == n {
            true => Ok(()),
            false => Err(std::io::ErrorKind::UnexpectedEof.into()),
        }
    }

    /// Reads `nbytes`, the byte ranges `spans` of them (ascending, apart) into `into` one
    /// after another, the rest summed as it passes.
    fn take_spans(
        &mut self,
        spans: &[Range<usize>],
        nbytes: usize,
        into: &mut [u8],
    ) -> std::io::Result<()> {
        let (mut at, mut filled) = (0, 0);
        for s in spans {
            self.skip((s.start - at) as u64)?;
            self.take(&mut into[filled..filled + s.len()])?;
            (at, filled) = (s.end, filled + s.len());
        }
        self.skip((nbytes - at) as u64)
    }
}
