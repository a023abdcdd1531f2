//! The process's GEMM algorithm choices, one per shape for every stream (`lt` picks and
//! records them): listed and restored as [`super::Choice`] rows, and the identity (GPU
//! model, cuBLASLt version) a table of them holds for.

use super::lt::Key;
use super::Choice;
use candle_core::cuda_backend::cudarc::cublaslt::sys;
use candle_core::cuda_backend::WrapErr;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The chosen candidate per shape, for every stream of the process: timed once, or set
/// from a saved table ([`set_choices`]).
pub(super) fn chosen() -> &'static Mutex<HashMap<Key, usize>> {
    static C: OnceLock<Mutex<HashMap<Key, usize>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

impl Key {
    pub(super) fn dtype(&self) -> &'static str {
        match (self.bf16, self.tf32) {
            (true, _) if self.out_f32 => "bf16>f32",
            (true, _) => "bf16",
            (false, true) => "tf32",
            (false, false) => "f32",
        }
    }
}

pub fn choices() -> Vec<Choice> {
    let c = chosen().lock().unwrap_or_else(|e| e.into_inner());
    let mut v: Vec<Choice> = c
        .iter()
        .map(|(k, &index)| Choice {
            m: k.m,
            n: k.n,
            k: k.k,
            ta: k.ta,
            tb: k.tb,
            dtype: k.dtype().into(),
            add: k.add,
            sms: k.sms,
            index,
        })
        .collect();
    v.sort_by_key(|c| (c.m, c.n, c.k, c.ta, c.tb, c.dtype.clone(), c.add, c.sms));
    v
}

/// Takes `table` as the process's choices; a shape it names is not timed again. Plans made
/// before keep their algorithm.
pub fn set_choices(table: &[Choice]) -> candle_core::Result<()> {
    let mut c = chosen().lock().unwrap_or_else(|e| e.into_inner());
    for x in table {
        let (bf16, tf32, out_f32) = match x.dtype.as_str() {
            "bf16" => (true, false, false),
            "bf16>f32" => (true, false, true),
            "tf32" => (false, true, false),
            "f32" => (false, false, false),
            d => candle_core::bail!(
                "GEMM choice {}x{}x{}: dtype {d:?} (bf16, bf16>f32, tf32, f32)",
                x.m,
                x.n,
                x.k
            ),
        };
        let key = Key {
            m: x.m,
            n: x.n,
            k: x.k,
            ta: x.ta,
            tb: x.tb,
            bf16,
            tf32,
            add: x.add,
            out_f32,
            sms: x.sms,
        };
        c.insert(key, x.index);
    }
    Ok(())
}

/// The GPU's name and cuBLASLt's version: where a table of choices holds.
pub fn identity(dev: &candle_core::CudaDevice) -> candle_core::Result<String> {
    let name = dev.cuda_stream().context().name().w()?;
    // SAFETY: a version query with no arguments.
    let v = unsafe { sys::cublasLtGetVersion() };
    Ok(format!("{name}, cuBLASLt {v}"))
}
