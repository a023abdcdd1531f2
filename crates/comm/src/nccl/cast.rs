//! Mixed-precision all-gathers on the communication stream: the f32 inputs cast into this
//! rank's chunks of their bf16 outputs by kernels/cast.cu (up to eight runs a launch,
//! 16-byte reads), launched on the communication stream after it waits for compute, then
//! the outputs gathered in place as one NCCL group. The casts so overlap the compute
//! stream's work instead of queueing in it (FSDP casts every stage's shards twice a step).

use super::comm::NcclComm;
use crate::error::{CommError, Result};
use crate::{Communicator, Tensor, Work};
use candle_core::cuda_backend::cudarc::driver::{
    DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg,
};
use candle_core::{DType, Storage};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/cast.ptx"));

/// Runs a launch takes (`COMM_CAST_RUNS` in kernels/cast.cu).
const RUNS: usize = 8;

/// The kernel's argument: per run, source, destination and elements (unused runs zero).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Runs {
    src: [u64; RUNS],
    dst: [u64; RUNS],
    n: [u64; RUNS],
}

// SAFETY: plain data, laid out as kernels/cast.cu's `struct Runs`.
unsafe impl DeviceRepr for Runs {}

/// The device address of `t`'s first element (`T`-sized elements).
pub(super) fn address(t: &Tensor, size: u64, stream: &cudarc::driver::CudaStream) -> Result<u64> {
    let (st, l) = t.storage_and_layout();
    let Storage::Cuda(c) = &*st else {
        return Err(CommError::Candle(candle_core::Error::Msg(
            "cast: a CUDA tensor expected".into(),
        )));
    };
    let base = match t.dtype() {
        DType::F32 => c.as_cuda_slice::<f32>()?.device_ptr(stream).0,
        DType::BF16 => c.as_cuda_slice::<half::bf16>()?.device_ptr(stream).0,
        d => {
            let e = format!("cast: {d:?} tensor (f32 into bf16 only)");
            return Err(CommError::Candle(candle_core::Error::Msg(e)));
        }
    };
    Ok(base + size * l.start_offset() as u64)
}

impl NcclComm {
    /// [`Communicator::all_gather_cast_coalesced_async`] on the communication stream
    /// (pairs other than f32 into bf16 take the default path: cast on compute).
    pub(super) fn gather_cast(&self, pairs: &[(Tensor, Tensor)]) -> Result<Work> {
        let name = "all_gather_cast";
        let ours = |(i, o): &(Tensor, Tensor)| i.dtype() == DType::F32 && o.dtype() == DType::BF16;
        if pairs.is_empty() || !pairs.iter().all(ours) {
            return crate::all_gather_cast_on_compute(self, pairs);
        }
        let mut in_place = Vec::with_capacity(pairs.len());
        for (input, output) in pairs {
            self.check_cuda(name, input)?;
            self.check_cuda(name, output)?;
            let n = input.elem_count();
            if output.rank() != 1 || output.elem_count() != n * self.world {
                return Err(CommError::invalid(
                    name,
                    self.rank,
                    format!(
                        "output of shape {:?} is not one dimension of world ({}) × input ({n}) elements",
                        output.dims(),
                        self.world
                    ),
                ));
            }
            in_place.push((output.narrow(0, self.rank * n, n)?, output.clone()));
        }
        let dev = self.device().as_cuda_device()?;
        let func = dev.get_or_load_custom_func("comm_cast_f32_bf16", "comm_cast", PTX)?;
        self.before(&self.stream)?;
        let casts: Vec<(u64, u64, u64)> = in_place
            .iter()
            .zip(pairs)
            .map(|((chunk, _), (input, _))| {
                let src = address(input, 4, &self.stream)?;
                Ok((
                    src,
                    address(chunk, 2, &self.stream)?,
                    input.elem_count() as u64,
                ))
            })
            .collect::<Result<_>>()?;
        for group in casts.chunks(RUNS) {
            let mut runs = Runs::default();
            for (k, &(s, d, n)) in group.iter().enumerate() {
                (runs.src[k], runs.dst[k], runs.n[k]) = (s, d, n);
            }
            let most = group.iter().map(|c| c.2).max().unwrap_or(0);
            let cfg = LaunchConfig {
                grid_dim: (
                    most.div_ceil(4 * 256).clamp(1, 132 * 4) as u32,
                    group.len() as u32,
                    1,
                ),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = self.stream.launch_builder(&func);
            b.arg(&runs);
            // SAFETY: `Runs` is the kernel's argument; every run's source holds n f32 and
            // its destination (this rank's chunk of the output) n bf16, and both outlive
            // the cast (the returned Work holds them until the gathers after it).
            unsafe { b.launch(cfg) }.map_err(super::comm::drv("cuLaunchKernel (cast)"))?;
        }
        // The gathers wait for compute again (nothing was queued since). The inputs live
        // until the compute stream waits for the gathers, which come after the casts.
        let gathers = self.all_gather_coalesced_async(&in_place)?;
        let inputs: Vec<Tensor> = pairs.iter().map(|(i, _)| i.clone()).collect();
        Ok(Work::all(vec![gathers, Work::completed_holding(inputs)]))
    }
}
