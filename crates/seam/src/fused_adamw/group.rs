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
use crate::pinned::device_ptr;
use candle_core::cuda_backend::cudarc::driver::{
    CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg,
};
use candle_core::cuda_backend::WrapErr;
use candle_core::{DType, Tensor};
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

/// `t` on CUDA, contiguous, of `dtype` and `n` elements: the kernel reads it from its
/// first element's address.
fn check(t: &Tensor, dtype: DType, n: usize, what: &str) -> Result<()> {
    if !t.device().is_cuda() {
        return Err(input(format!("the {what} is not on CUDA")));
    }
    if !t.is_contiguous() || t.dtype() != dtype || t.elem_count() != n {
        return Err(input(format!(
            "the {what} must be contiguous {dtype:?} of {n} elements, got {:?} of {}",
            t.dtype(),
            t.elem_count()
        )));
    }
    Ok(())
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
    let scale_ptr = match scale {
        None => 0u64,
        Some(t) => {
            check(t, DType::F32, 2, "gradient scale ([norm, coef])")?;
            device_ptr(t, &stream)? + 4 // the coefficient
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
    Ok(())
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
    let gdtype = if bf16 { DType::BF16 } else { DType::F32 };
    let mut blocks = 0usize;
    for (k, it) in chunk.iter_mut().enumerate() {
        let n = it.p.elem_count();
        check(it.p, DType::F32, n, "parameter")?;
        check(it.g, gdtype, n, "gradient")?;
        let (p, g) = (device_ptr(it.p, stream)?, device_ptr(it.g, stream)?);
        let s16 = match it.copy {
            None => 0,
            Some(c) => {
                check(c, DType::BF16, n, "bf16 copy")?;
                device_ptr(c, stream)?
            }
        };
        let mom = &mut *it.moments;
        if mom.m.len() != n {
            return Err(input(format!(
                "moments of {} elements for a parameter of {n}",
                mom.m.len()
            )));
        }
        let (m, v) = (
            mom.m.device_ptr_mut(stream).0,
            mom.v.device_ptr_mut(stream).0,
        );
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
    let sp = s.dev.device_ptr(stream).0;
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
    Ok(())
}
