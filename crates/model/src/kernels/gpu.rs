//! One launcher for the kernels of kernels/fused.cu: every kernel takes its input buffers,
//! one output buffer (or those of [`launch_outs`]), then `(int n0, int n1, int n2, float f)`.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaFunction, CudaSlice, CudaView, DeviceRepr, LaunchArgs, LaunchConfig, PushKernelArg,
};
use candle_core::cuda_backend::{CudaStorage, WrapErr};
use candle_core::{DType, Layout, Result};
use half::bf16;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/fused.ptx"));

/// The kernel-name suffix of a compute dtype.
pub fn suffix(dtype: DType) -> Result<&'static str> {
    match dtype {
        DType::F32 => Ok("f32"),
        DType::BF16 => Ok("bf16"),
        d => candle_core::bail!("fused kernels: dtype {d:?} is not supported (f32, bf16)"),
    }
}

enum View<'a> {
    F32(CudaView<'a, f32>),
    Bf16(CudaView<'a, bf16>),
    U32(CudaView<'a, u32>),
}

fn view<'a>(s: &'a CudaStorage, l: &Layout) -> Result<View<'a>> {
    let r = l.start_offset()..l.start_offset() + l.shape().elem_count();
    Ok(match s.dtype() {
        DType::F32 => View::F32(s.as_cuda_slice::<f32>()?.slice(r)),
        DType::BF16 => View::Bf16(s.as_cuda_slice::<bf16>()?.slice(r)),
        DType::U32 => View::U32(s.as_cuda_slice::<u32>()?.slice(r)),
        d => candle_core::bail!("fused kernels: unsupported input dtype {d:?}"),
    })
}

/// What to launch: `grid` blocks of `block` threads.
pub struct Launch<'a> {
    pub kernel: String,
    pub ins: &'a [(&'a CudaStorage, &'a Layout)],
    pub out_dtype: DType,
    pub out_len: usize,
    pub grid: usize,
    pub block: usize,
    pub n: [usize; 3],
    pub f: f32,
}

fn push<'a>(b: &mut LaunchArgs<'a>, views: &'a [View<'a>]) {
    for v in views {
        match v {
            View::F32(x) => b.arg(x),
            View::Bf16(x) => b.arg(x),
            View::U32(x) => b.arg(x),
        };
    }
}

fn go<T: DeviceRepr>(
    l: &Launch,
    dev: &candle_core::CudaDevice,
    views: &[View],
    n: &[i32; 3],
    extra: Option<&CudaSlice<f32>>,
    shared: u32,
) -> Result<CudaSlice<T>> {
    let (func, stream) = (function(l, dev, shared)?, dev.cuda_stream());
    // SAFETY: every kernel writes all `out_len` elements of its output.
    let mut out = unsafe { stream.alloc::<T>(l.out_len) }.w()?;
    let mut b = stream.launch_builder(&func);
    push(&mut b, views);
    b.arg(&mut out);
    if let Some(e) = extra {
        b.arg(e);
    }
    run(l, b, n, shared)?;
    Ok(out)
}

/// `l`'s kernel, opted in to `shared` bytes of dynamic shared memory.
fn function(l: &Launch, dev: &candle_core::CudaDevice, shared: u32) -> Result<CudaFunction> {
    let func = dev
        .get_or_load_custom_func(&l.kernel, "model_fused", PTX)?
        .into_cuda_function();
    if shared > 48 * 1024 {
        // Past 48 KiB a kernel must opt in to its dynamic shared memory.
        use candle_core::cuda_backend::cudarc::driver::sys::CUfunction_attribute_enum as Attr;
        func.set_attribute(
            Attr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared as i32,
        )
        .w()?;
        // And it asks for all of the SM's L1 as shared memory, so that more than one block
        // fits on an SM.
        func.set_attribute(
            Attr::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            100,
        )
        .w()?;
    }
    Ok(func)
}

/// `l`'s device (its first input's), its inputs as views and `l.n` as the kernels' ints.
fn inputs<'a>(l: &'a Launch) -> Result<(candle_core::CudaDevice, Vec<View<'a>>, [i32; 3])> {
    let dev = l.ins[0].0.device.clone();
    let views = l
        .ins
        .iter()
        .map(|(s, lay)| view(s, lay))
        .collect::<Result<Vec<_>>>()?;
    Ok((dev, views, dims(l)?))
}

/// `l.n` as the kernels' int arguments.
fn dims(l: &Launch) -> Result<[i32; 3]> {
    let mut n = [0i32; 3];
    for (d, s) in n.iter_mut().zip(l.n) {
        *d = i32::try_from(s)
            .map_err(|_| candle_core::Error::Msg(format!("{}: size {s} exceeds i32", l.kernel)))?;
    }
    Ok(n)
}

/// Pushes the argument tail (n, f) and launches `l`'s grid.
fn run<'a>(l: &'a Launch, mut b: LaunchArgs<'a>, n: &'a [i32; 3], shared: u32) -> Result<()> {
    b.arg(&n[0]).arg(&n[1]).arg(&n[2]).arg(&l.f);
    let cfg = LaunchConfig {
        grid_dim: (l.grid.max(1) as u32, 1, 1),
        block_dim: (l.block as u32, 1, 1),
        shared_mem_bytes: shared,
    };
    crate::profile::mark_kernel_begin(&l.kernel);
    // SAFETY: the argument list matches the kernel's signature (fused.cu) and the caller
    // sized the buffers for `n`.
    unsafe { b.launch(cfg) }.w()?;
    crate::profile::mark_kernel(&l.kernel);
    Ok(())
}

/// Launches `l` with bf16 output buffers the caller allocated (`outs`, passed after the
/// inputs in order; `l.out_dtype` and `l.out_len` are not read): for a kernel that writes
/// more than one buffer, or a buffer that an earlier launch wrote part of.
pub fn launch_outs(l: Launch, outs: &mut [&mut CudaSlice<bf16>], shared: u32) -> Result<()> {
    let (dev, views, n) = inputs(&l)?;
    let (func, stream) = (function(&l, &dev, shared)?, dev.cuda_stream());
    let mut b = stream.launch_builder(&func);
    push(&mut b, &views);
    for o in outs.iter_mut() {
        b.arg(&mut **o);
    }
    run(&l, b, &n, shared)
}

/// Zeroes `bytes` (a multiple of 16) at device address `ptr` with a kernel (`l2_flush`): the
/// GEMM tuner's cold L2.
pub(crate) fn l2_flush(dev: &candle_core::CudaDevice, ptr: u64, bytes: usize) -> Result<()> {
    let func = dev.get_or_load_custom_func("l2_flush", "model_fused", PTX)?;
    let words = (bytes / 16) as u64;
    let mut b = func.builder();
    b.arg(&ptr).arg(&words);
    let cfg = LaunchConfig {
        grid_dim: (1024, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `ptr` holds `bytes` writable bytes (the caller's scratch); the arguments match
    // the kernel's (uint4 *, unsigned long long).
    unsafe { b.launch(cfg) }.w()?;
    Ok(())
}

/// Whether every input is 16-byte aligned with rows of `cols` elements that keep it so:
/// the condition of the kernels that move 16 bytes per lane (`*_v`).
pub fn rows16(ins: &[(&CudaStorage, &Layout)], cols: usize) -> bool {
    ins.iter()
        .all(|(s, l)| row16(l.start_offset(), s.dtype(), cols))
}

/// [`rows16`] for one buffer: its first element at `offset` and rows of `cols` elements of
/// `dtype` all start on 16 bytes.
pub fn row16(offset: usize, dtype: DType, cols: usize) -> bool {
    let size = dtype.size_in_bytes();
    (offset * size).is_multiple_of(16) && (cols * size).is_multiple_of(16)
}

/// A launch's output buffer as a tensor of `shape` (outside autograd).
pub fn tensor(s: CudaStorage, shape: impl Into<candle_core::Shape>) -> candle_core::Tensor {
    candle_core::Tensor::from_storage(
        candle_core::Storage::Cuda(s),
        shape,
        candle_core::op::BackpropOp::none(),
        false,
    )
}

/// Launches `l` on the stream of its first input; returns the new output buffer.
pub fn launch(l: Launch) -> Result<CudaStorage> {
    launch_extra(l, None, 0)
}

/// [`launch`] for a kernel that also writes a second, f32 buffer `extra` (passed right
/// after the output; the caller sized it) and takes `shared` bytes of dynamic shared memory.
pub fn launch_extra(l: Launch, extra: Option<&CudaSlice<f32>>, shared: u32) -> Result<CudaStorage> {
    let (dev, views, n) = inputs(&l)?;
    Ok(match l.out_dtype {
        DType::F32 => {
            CudaStorage::wrap_cuda_slice(go::<f32>(&l, &dev, &views, &n, extra, shared)?, dev)
        }
        DType::BF16 => {
            CudaStorage::wrap_cuda_slice(go::<bf16>(&l, &dev, &views, &n, extra, shared)?, dev)
        }
        d => candle_core::bail!("{}: output dtype {d:?} unsupported", l.kernel),
    })
}

/// An f32 buffer of `len` on x's device, not zero-filled: the kernel that takes it writes
/// every element before anything reads it.
pub fn scratch(x: &candle_core::Tensor, len: usize) -> Result<candle_core::Tensor> {
    let candle_core::Device::Cuda(dev) = x.device() else {
        candle_core::bail!("a fused kernel's scratch: not on CUDA");
    };
    // SAFETY: written in full by the kernel it is passed to before any read.
    let buf = unsafe { dev.cuda_stream().alloc::<f32>(len) }.w()?;
    Ok(tensor(CudaStorage::wrap_cuda_slice(buf, dev.clone()), len))
}

/// Runs `f` with the CUDA slice behind the f32 tensor `t`.
pub fn with_slice<R>(
    t: &candle_core::Tensor,
    f: impl FnOnce(&CudaSlice<f32>) -> Result<R>,
) -> Result<R> {
    let (st, _) = t.storage_and_layout();
    let candle_core::Storage::Cuda(cs) = &*st else {
        candle_core::bail!("a fused kernel's f32 buffer: not on CUDA");
    };
    f(cs.as_cuda_slice::<f32>()?)
}
