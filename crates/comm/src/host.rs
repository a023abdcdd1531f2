//! Raw access to a CPU tensor's bytes for the CPU backends, without copies or dtype
//! conversions: [`read_bytes`] holds the storage's read lock for the duration of a closure,
//! [`write_bytes`] its write lock (through candle's `InplaceOp1`, the sanctioned way to get
//! `&mut` access to a tensor's storage). Only the tensor's own contiguous run of elements
//! is exposed, never the rest of a larger buffer it is a view of.

use crate::error::{CommError, Result};
use crate::validate::not_cpu;
use candle_core::{CpuStorage, InplaceOp1, Layout, Storage, Tensor};
use std::cell::RefCell;

/// The tensor's elements as bytes: start offset and length from its layout (which must be
/// contiguous; `validate::check_buffer` ensures it before any backend gets here).
fn cpu_bytes<'a>(s: &'a CpuStorage, layout: &Layout, count: usize) -> Result<&'a [u8]> {
    macro_rules! view {
        ($v:expr) => {{
            let v = &$v[layout.start_offset()..layout.start_offset() + count];
            let n = std::mem::size_of_val(v);
            // SAFETY: a slice of plain numbers (f32, f64, bf16, f16: no padding, any bit
            // pattern valid) viewed as its bytes, for as long as the slice is borrowed.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), n) }
        }};
    }
    Ok(match s {
        CpuStorage::F32(v) => view!(v),
        CpuStorage::F64(v) => view!(v),
        CpuStorage::BF16(v) => view!(v),
        CpuStorage::F16(v) => view!(v),
        other => return Err(unsupported(other)),
    })
}

/// A storage of a dtype the CPU backends do not carry.
fn unsupported(s: &CpuStorage) -> CommError {
    let dtype = candle_core::backend::BackendStorage::dtype(s);
    candle_core::Error::Msg(format!("CPU backend: unsupported dtype {dtype:?}")).into()
}

fn cpu_bytes_mut<'a>(s: &'a mut CpuStorage, layout: &Layout, count: usize) -> Result<&'a mut [u8]> {
    macro_rules! view {
        ($v:expr) => {{
            let v = &mut $v[layout.start_offset()..layout.start_offset() + count];
            let n = std::mem::size_of_val(v);
            // SAFETY: as in `cpu_bytes`; every bit pattern written is a valid number.
            unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), n) }
        }};
    }
    Ok(match s {
        CpuStorage::F32(v) => view!(v),
        CpuStorage::F64(v) => view!(v),
        CpuStorage::BF16(v) => view!(v),
        CpuStorage::F16(v) => view!(v),
        other => return Err(unsupported(other)),
    })
}

/// Runs `f` on the tensor's bytes under the storage's read lock.
pub(crate) fn read_bytes<R>(
    op: &'static str,
    rank: usize,
    t: &Tensor,
    f: impl FnOnce(&[u8]) -> Result<R>,
) -> Result<R> {
    let (guard, layout) = t.storage_and_layout();
    match &*guard {
        Storage::Cpu(s) => f(cpu_bytes(s, layout, t.elem_count())?),
        _ => Err(not_cpu(op, rank, t)),
    }
}

/// A contiguous CPU tensor's bytes (f32, f64, bf16, f16), borrowed under the storage's read
/// lock for `f` (e.g. to write them to a file without a copy); `None` for a tensor of
/// another device, dtype or layout, which the caller copies instead.
pub fn with_cpu_bytes<R>(t: &Tensor, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    let (guard, layout) = t.storage_and_layout();
    match &*guard {
        Storage::Cpu(s) if layout.is_contiguous() => {
            cpu_bytes(s, layout, t.elem_count()).ok().map(f)
        }
        _ => None,
    }
}

/// [`with_cpu_bytes`] with the bytes writable (under the storage's write lock): e.g. to read
/// a file into a tensor made for it. `None` (and `f` not run) where `with_cpu_bytes` gives
/// `None`; else `f`'s result.
pub fn with_cpu_bytes_mut<R>(
    t: &Tensor,
    f: impl FnOnce(&mut [u8]) -> std::io::Result<R>,
) -> Option<std::io::Result<R>> {
    if !t.is_contiguous() {
        return None;
    }
    // `f` runs only where `cpu_bytes_mut` takes the storage (a CPU one of its dtypes).
    let mut ran = false;
    let r = write_bytes("read into a tensor", 0, t, |b| {
        ran = true;
        Ok(f(b))
    });
    match r {
        Ok(read) => Some(read),
        Err(e) if ran => Some(Err(std::io::Error::other(e.to_string()))),
        Err(_) => None,
    }
}

/// `InplaceOp1` running a closure once on the storage's bytes; the closure's own error (a
/// `CommError`) is kept aside and handed back as is, not flattened into candle's.
struct WriteOp<F, R> {
    count: usize,
    f: RefCell<Option<F>>,
    out: RefCell<Option<Result<R>>>,
}

impl<F: FnOnce(&mut [u8]) -> Result<R>, R> InplaceOp1 for WriteOp<F, R> {
    fn name(&self) -> &'static str {
        "comm-host-write"
    }
    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let r = match cpu_bytes_mut(storage, layout, self.count) {
            Ok(bytes) => match self.f.borrow_mut().take() {
                Some(f) => f(bytes),
                None => return Err(candle_core::Error::Msg("comm-host-write ran twice".into())),
            },
            Err(e) => Err(e),
        };
        *self.out.borrow_mut() = Some(r);
        Ok(())
    }
}

/// Runs `f` on the tensor's bytes under the storage's write lock.
pub(crate) fn write_bytes<R>(
    op: &'static str,
    rank: usize,
    t: &Tensor,
    f: impl FnOnce(&mut [u8]) -> Result<R>,
) -> Result<R> {
    if !t.device().is_cpu() {
        return Err(not_cpu(op, rank, t));
    }
    let w = WriteOp {
        count: t.elem_count(),
        f: RefCell::new(Some(f)),
        out: RefCell::new(None),
    };
    t.inplace_op1(&w)?;
    w.out
        .into_inner()
        .unwrap_or_else(|| Err(CommError::invalid(op, rank, "the tensor was not written")))
}

/// A pointer to another rank's buffer, passed between threads of one process. Only the
/// collective that published it dereferences it, while its owner waits for that
/// collective to end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawBuf {
    pub ptr: usize,
    pub len: usize,
}

impl RawBuf {
    pub fn of(b: &[u8]) -> Self {
        Self {
            ptr: b.as_ptr() as usize,
            len: b.len(),
        }
    }
    pub fn of_mut(b: &mut [u8]) -> Self {
        Self {
            ptr: b.as_mut_ptr() as usize,
            len: b.len(),
        }
    }
    pub fn empty() -> Self {
        Self { ptr: 0, len: 0 }
    }
}
