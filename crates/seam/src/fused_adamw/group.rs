//! Many parameters' fused AdamW in few launches (kernels/adamw.cu `adamw_table_*`, as
//! PyTorch's `multi_tensor_apply`): up to [`MAX`] tensors' addresses a launch, passed by
//! value, the launch's blocks spread over them. A launch a tensor ends in a partial wave
//! each time; the step's 339 (xl) did so 339 times. Each element is updated by the same
//! arithmetic as [`super::step`]'s kernels, so the bits are the same.
//!
//! ```ignore
//! let mut items = vec![Item { p: &p, g: &g, moments: &mut mom, copy: Some(&c) }];
//! group::step(&mut items, &scalars, None, Some(&nc))?; // one launch for all of them
//! ```

use super::{DeviceMoments, DeviceScalars};
use crate::error::{ModelError, Result};
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg, SyncOnDrop,
};
use candle_core::cuda_backend::{CudaStorage, WrapErr};
use candle_core::{DType, Storage, Tensor};
use std::sync::Arc;

/// Tensors a launch (AW_MAX in kernels/adamw.cu).
pub const MAX: usize = 64;
const THREADS: u32 = 256;
/// Elements a block (AW_BLOCK_ELEMS): four a thread.
const BLOCK_ELEMS: usize = 4 * THREADS as usize;

#[repr(C)]
#[derive(Clone, Copy)]
struct AdamwTable {
    p: [u64; MAX],
    g: [u64; MAX],
    m: [u64; MAX],
    v: [u64; MAX],
    s16: [u64; MAX],
    n: [u64; MAX],
    bstart: [u32; MAX + 1],
    count: u32,
    vec4: u64,
}
// SAFETY: plain old data with the kernel's layout (kernels/adamw.cu AdamwTable).
unsafe impl DeviceRepr for AdamwTable {}

/// One parameter's update in a group.
pub struct Item<'a> {
    /// The f32 parameter: contiguous, a whole tensor or a view of one (its storage is
    /// written in place).
    pub p: &'a Tensor,
    /// Its gradient: contiguous f32 or bf16 (anything else is refused: cast it first), as
    /// many elements.
    pub g: &'a Tensor,
    pub moments: &'a mut DeviceMoments,
    /// Where to write the updated parameter in bf16 (contiguous, as many elements).
    pub copy: Option<&'a Tensor>,
}

fn input(what: String) -> ModelError {
    ModelError::Input(format!("fused AdamW (grouped): {what}"))
}

/// A contiguous CUDA tensor's storage, checked to be `dtype` and `n` elements long.
fn cuda_of<'s>(
    st: &'s Storage,
    l: &candle_core::Layout,
    dtype: DType,
    n: usize,
    what: &str,
) -> Result<&'s CudaStorage> {
    let Storage::Cuda(cs) = st else {
        return Err(input(format!("the {what} is not on CUDA")));
    };
    if !l.is_contiguous() || cs.dtype() != dtype || l.shape().elem_count() != n {
        return Err(input(format!(
            "the {what} must be contiguous {dtype:?} of {n} elements, got {:?} of {}",
            cs.dtype(),
            l.shape().elem_count()
        )));
    }
    Ok(cs)
}

/// Queues every item's update: the scalars last uploaded to `s`, each gradient scaled by
/// `scale[1]` (a `[norm, coef]` f32 tensor) where given. Launched on `on`, else on the
/// first parameter's stream; the caller orders it after whatever wrote the items (as for
/// [`super::step`]). Items with f32 and bf16 gradients go in launches of their own, each
/// kind in the order given.
pub fn step(
    items: &mut [Item<'_>],
    s: &DeviceScalars,
    on: Option<&Arc<CudaStream>>,
    scale: Option<&Tensor>,
) -> Result<()> {
    let Some(first) = items.first() else {
        return Ok(());
    };
    let stream = match on {
        Some(st) => st.clone(),
        None => super::stream_of(first.p)?,
    };
    let sguard = scale.map(|t| t.storage_and_layout());
    let scale_ptr = match &sguard {
        None => 0u64,
        Some((st, l)) => {
            let cs = cuda_of(st, l, DType::F32, 2, "gradient scale ([norm, coef])")?;
            let (ptr, _) = cs.as_cuda_slice::<f32>()?.device_ptr(&stream);
            ptr + 4 * (l.start_offset() as u64 + 1)
        }
    };
    for bf16 in [false, true] {
        let mut of_kind: Vec<&mut Item> = items
            .iter_mut()
            .filter(|it| (it.g.dtype() == DType::BF16) == bf16)
            .collect();
        for chunk in of_kind.chunks_mut(MAX) {
            launch(chunk, bf16, s, &stream, scale_ptr)?;
        }
    }
    drop(sguard);
    Ok(())
}

/// The address of a contiguous f32 or bf16 tensor's first element, read on `stream`.
fn addr<'a>(
    cs: &'a CudaStorage,
    l: &candle_core::Layout,
    stream: &'a CudaStream,
) -> Result<(u64, SyncOnDrop<'a>)> {
    let size = cs.dtype().size_in_bytes() as u64;
    let (ptr, sync) = match cs.dtype() {
        DType::F32 => cs.as_cuda_slice::<f32>()?.device_ptr(stream),
        _ => cs.as_cuda_slice::<half::bf16>()?.device_ptr(stream),
    };
    Ok((ptr + size * l.start_offset() as u64, sync))
}

/// One launch over up to [`MAX`] items whose gradients are all bf16 (`bf16`) or all f32.
fn launch(
    chunk: &mut [&mut Item<'_>],
    bf16: bool,
    s: &DeviceScalars,
    stream: &Arc<CudaStream>,
    scale_ptr: u64,
) -> Result<()> {
    let count = chunk.len();
    let candle_core::Device::Cuda(dev) = chunk[0].p.device().clone() else {
        return Err(input("the parameter is not on CUDA".into()));
    };
    let mut t = AdamwTable {
        p: [0; MAX],
        g: [0; MAX],
        m: [0; MAX],
        v: [0; MAX],
        s16: [0; MAX],
        n: [0; MAX],
        bstart: [0; MAX + 1],
        count: count as u32,
        vec4: 0,
    };
    // The storages stay borrowed, and every address's read or write is recorded, until the
    // launch is queued.
    let guards: Vec<_> = chunk
        .iter()
        .map(|it| {
            (
                it.p.storage_and_layout(),
                it.g.storage_and_layout(),
                it.copy.map(|c| c.storage_and_layout()),
            )
        })
        .collect();
    let mut syncs: Vec<SyncOnDrop> = Vec::with_capacity(5 * chunk.len());
    let gdtype = if bf16 { DType::BF16 } else { DType::F32 };
    let mut blocks = 0usize;
    for (k, (it, (pg, gg, cg))) in chunk.iter_mut().zip(&guards).enumerate() {
        let n = pg.1.shape().elem_count();
        let addr = |cs, l| addr(cs, l, stream);
        let (p, sp) = addr(cuda_of(&pg.0, pg.1, DType::F32, n, "parameter")?, pg.1)?;
        let (g, sg) = addr(cuda_of(&gg.0, gg.1, gdtype, n, "gradient")?, gg.1)?;
        syncs.extend([sp, sg]);
        let s16 = match cg {
            None => 0,
            Some((st, l)) => {
                let (c, sc) = addr(cuda_of(st, l, DType::BF16, n, "bf16 copy")?, l)?;
                syncs.push(sc);
                c
            }
        };
        let mom = &mut *it.moments;
        if mom.m.len() != n {
            return Err(input(format!(
                "moments of {} elements for a parameter of {n}",
                mom.m.len()
            )));
        }
        let (m, sm) = mom.m.device_ptr_mut(stream);
        let (v, sv) = mom.v.device_ptr_mut(stream);
        syncs.extend([sm, sv]);
        let gsize = if bf16 { 2 } else { 4 };
        let aligned = p % 16 == 0 && m % 16 == 0 && v % 16 == 0 && g % (4 * gsize) == 0;
        if aligned && s16 % 8 == 0 {
            t.vec4 |= 1u64 << k;
        }
        (t.p[k], t.g[k], t.m[k], t.v[k], t.s16[k], t.n[k]) = (p, g, m, v, s16, n as u64);
        t.bstart[k] = u32::try_from(blocks).map_err(|_| input("too many elements".into()))?;
        blocks += n.div_ceil(BLOCK_ELEMS);
    }
    let total = u32::try_from(blocks).map_err(|_| input("too many elements".into()))?;
    t.bstart[count] = total;
    if total == 0 {
        return Ok(());
    }
    let kernel = if bf16 {
        "adamw_table_gbf16"
    } else {
        "adamw_table_f32"
    };
    let func = dev.get_or_load_custom_func(kernel, "model_adamw", super::PTX)?;
    let (sp, ss) = s.dev.device_ptr(stream);
    let cfg = LaunchConfig {
        grid_dim: (total, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(&func);
    b.arg(&t).arg(&sp).arg(&scale_ptr);
    crate::profile::mark_kernel_begin(kernel);
    // SAFETY: the table lists live device buffers: p, m, v of n f32, g of n elements of
    // the kernel's gradient type, s16 (where not 0) of n bf16; s holds the 6 scalars and
    // scale_ptr (where not 0) one f32.
    unsafe { b.launch(cfg) }.w()?;
    crate::profile::mark_kernel(kernel);
    drop((ss, syncs));
    drop(guards);
    Ok(())
}
