//! Mixed-precision all-gathers on the communication stream: each f32 input cast into this
//! rank's chunk of its bf16 output by candle's own cast kernel, launched on the
//! communication stream after it waits for compute, then the outputs gathered in place
//! as one NCCL group. The casts so overlap the compute stream's work instead of queueing
//! in it (FSDP casts every stage's shards twice a step).

use super::comm::NcclComm;
use crate::error::{CommError, Result};
use crate::{Communicator, PendingWork, Tensor, Work};
use candle_core::cuda_backend::{kernels, CudaStorage, CudaStorageSlice};
use candle_core::{DType, InplaceOp2, Layout};
use cudarc::driver::{
    CudaFunction, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};

/// Casts its source (f32) into its destination (bf16, the same number of elements), on
/// `stream`.
struct CastOnStream<'a> {
    stream: &'a CudaStream,
    func: &'a CudaFunction,
}

impl InplaceOp2 for CastOnStream<'_> {
    fn name(&self) -> &'static str {
        "cast-on-comm-stream"
    }
    fn cpu_fwd(
        &self,
        _: &mut candle_core::CpuStorage,
        _: &Layout,
        _: &candle_core::CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<()> {
        candle_core::bail!("the communication stream's cast needs CUDA tensors")
    }
    fn cuda_fwd(
        &self,
        dst: &mut CudaStorage,
        dl: &Layout,
        src: &CudaStorage,
        sl: &Layout,
    ) -> candle_core::Result<()> {
        let n = dl.shape().elem_count();
        if sl.shape().elem_count() != n || !dl.is_contiguous() || !sl.is_contiguous() {
            candle_core::bail!("cast: contiguous buffers of one length expected");
        }
        let (CudaStorageSlice::BF16(d), CudaStorageSlice::F32(s)) = (&mut dst.slice, &src.slice)
        else {
            candle_core::bail!("cast: f32 into bf16 only");
        };
        let (dp, _g) = d.device_ptr_mut(self.stream);
        let (sp, _h) = s.device_ptr(self.stream);
        let (dp, sp) = (
            dp + 2 * dl.start_offset() as u64,
            sp + 4 * sl.start_offset() as u64,
        );
        // candle's `cast_f32_bf16(numel, num_dims, info, inp, out)`; no info: contiguous.
        let (dims, info) = (0usize, 0u64);
        let mut b = self.stream.launch_builder(self.func);
        b.arg(&n).arg(&dims).arg(&info).arg(&sp).arg(&dp);
        // SAFETY: the arguments match the kernel's signature; both buffers hold `n`
        // elements from their pointers and outlive the launch (the Work keeps them).
        unsafe { b.launch(LaunchConfig::for_num_elems(n as u32)) }
            .map(|_| ())
            .map_err(|e| candle_core::Error::Msg(format!("cast launch: {e:?}")))
    }
}

impl NcclComm {
    /// [`Communicator::all_gather_cast_coalesced_async`] on the communication stream
    /// (pairs other than f32 into bf16 take the default path: cast on compute).
    pub(super) fn gather_cast(&self, pairs: &[(Tensor, Tensor)]) -> Result<Work> {
        let name = "all_gather_cast";
        let ours = |(i, o): &(Tensor, Tensor)| i.dtype() == DType::F32 && o.dtype() == DType::BF16;
        if pairs.is_empty() || !pairs.iter().all(ours) {
            let sends = pairs
                .iter()
                .map(|(i, o)| Ok((i.to_dtype(o.dtype())?, o.clone())))
                .collect::<Result<Vec<_>>>()?;
            return self.all_gather_coalesced_async(&sends);
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
        let func = dev.get_or_load_func("cast_f32_bf16", &kernels::CAST)?;
        self.before()?;
        let cast = CastOnStream {
            stream: &self.stream,
            func: &func,
        };
        for ((chunk, _), (input, _)) in in_place.iter().zip(pairs) {
            chunk.inplace_op2(input, &cast)?;
        }
        // The gathers wait for compute again (nothing was queued since). The inputs live
        // until the compute stream waits for the gathers, which come after the casts.
        let gathers = self.all_gather_coalesced_async(&in_place)?;
        let inputs = pairs.iter().map(|(i, _)| i.clone()).collect();
        Ok(Work::all(vec![gathers, Work::new(Box::new(Held(inputs)))]))
    }
}

/// The casts' inputs, held until the gathers after them are waited for.
struct Held(#[allow(dead_code)] Vec<Tensor>);

impl PendingWork for Held {
    fn wait(self: Box<Self>) -> Result<()> {
        Ok(())
    }
    fn synchronize(self: Box<Self>) -> Result<()> {
        Ok(())
    }
    fn is_completed(&self) -> Result<bool> {
        Ok(true)
    }
}
