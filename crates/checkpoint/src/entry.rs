//! What one tensor of a checkpoint file is made from: a tensor (on any device), or
//! [`Pieces`] made one at a time as the file is written, so that a rank saves state it
//! could not hold on the host at once (its AdamW moments, copied from the device span by
//! span).
//!
//! ```ignore
//! let m = Pieces::new(DType::F32, n, spans.iter().map(|s| moments_of(s)));
//! files.put_entries("shard-0-of-4.safetensors", HashMap::from([("exp_avg".into(), Entry::Pieces(m))]))?;
//! ```

use crate::error::{bad, Result};
use candle_core::{DType, Device, Tensor};
use safetensors::{Dtype, View};
use std::path::Path;

/// One tensor of a file.
pub enum Entry<'a> {
    /// A tensor (any device; copied to the host alone where it is not a contiguous CPU
    /// tensor).
    Tensor(Tensor),
    /// A 1-D tensor made in pieces.
    Pieces(Pieces<'a>),
}

/// A 1-D tensor of `len` elements of `dtype`: the elements of its pieces (each a tensor of
/// any shape, on any device), one after another, each made, written and dropped before the
/// next is made.
pub struct Pieces<'a> {
    dtype: DType,
    len: usize,
    pieces: Box<dyn Iterator<Item = Result<Tensor>> + 'a>,
}

impl<'a> Pieces<'a> {
    pub fn new(
        dtype: DType,
        len: usize,
        pieces: impl Iterator<Item = Result<Tensor>> + 'a,
    ) -> Self {
        Self {
            dtype,
            len,
            pieces: Box::new(pieces),
        }
    }
}

impl Entry<'_> {
    pub(crate) fn dtype(&self) -> Dtype {
        match self {
            Entry::Tensor(t) => View::dtype(t),
            Entry::Pieces(p) => p.dtype.into(),
        }
    }

    pub(crate) fn shape(&self) -> Vec<usize> {
        match self {
            Entry::Tensor(t) => t.dims().to_vec(),
            Entry::Pieces(p) => vec![p.len],
        }
    }

    pub(crate) fn nbytes(&self) -> usize {
        match self {
            Entry::Tensor(t) => View::data_len(t),
            Entry::Pieces(p) => p.len * p.dtype.size_in_bytes(),
        }
    }

    /// Its bytes, given to `put` a tensor (or a piece) at a time. A piece of another dtype,
    /// or pieces of another length than declared, is an error naming `at` and `name`;
    /// `put`'s errors name `to`.
    pub(crate) fn write(
        self,
        (at, name, to): (&Path, &str, &Path),
        put: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<()> {
        let p = match self {
            Entry::Tensor(t) => return write_tensor(&t, to, put),
            Entry::Pieces(p) => p,
        };
        let mut n = 0;
        for piece in p.pieces {
            let piece = piece?;
            if piece.dtype() != p.dtype || n + piece.elem_count() > p.len {
                return Err(bad(
                    at,
                    format!(
                        "tensor {name:?}: a piece of {} {:?} elements after {n}, for {} of {:?}",
                        piece.elem_count(),
                        piece.dtype(),
                        p.len,
                        p.dtype
                    ),
                ));
            }
            n += piece.elem_count();
            write_tensor(&piece, to, put)?;
        }
        if n != p.len {
            let msg = format!("tensor {name:?}: pieces of {n} elements, for {}", p.len);
            return Err(bad(at, msg));
        }
        Ok(())
    }
}

/// `t`'s bytes: a contiguous CPU tensor's as they lie; any other tensor copied (from its
/// device, or into one run) first, alone.
fn write_tensor(
    t: &Tensor,
    to: &Path,
    put: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<()> {
    let io = |e: std::io::Error| bad(to, e);
    match comm::with_cpu_bytes(t, |b| put(b)) {
        Some(r) => r.map_err(io),
        None => {
            let host = t.to_device(&Device::Cpu)?;
            put(&View::data(&host)).map_err(io)
        }
    }
}
