//! Per-rank argument checks shared by the backends, so bad input fails the same way on
//! CPU and GPU, before anything is sent.

use crate::error::{CommError, Result};
use candle_core::{DType, Tensor};

/// The dtypes collectives accept.
pub fn check_dtype(op: &'static str, rank: usize, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::F32 | DType::F64 | DType::BF16 | DType::F16 => Ok(()),
        d => Err(CommError::invalid(
            op,
            rank,
            format!("dtype {d:?} is not supported (f32, f64, bf16, f16)"),
        )),
    }
}

/// A buffer must be one contiguous run of its storage (views from `narrow` on dim 0 are fine).
pub fn check_buffer(op: &'static str, rank: usize, t: &Tensor) -> Result<()> {
    check_dtype(op, rank, t)?;
    if !t.is_contiguous() {
        return Err(CommError::invalid(
            op,
            rank,
            format!("tensor of shape {:?} is not contiguous", t.dims()),
        ));
    }
    Ok(())
}

/// A buffer of the CPU backends (threads and processes): [`check_buffer`]'s, on the CPU.
pub fn check_cpu_buffer(op: &'static str, rank: usize, t: &Tensor) -> Result<()> {
    check_buffer(op, rank, t)?;
    if !t.device().is_cpu() {
        return Err(not_cpu(op, rank, t));
    }
    Ok(())
}

/// The error of a tensor not on the CPU where a CPU backend needs one.
pub(crate) fn not_cpu(op: &'static str, rank: usize, t: &Tensor) -> CommError {
    let at = t.device().location();
    CommError::invalid(
        op,
        rank,
        format!("the CPU backend needs CPU tensors, got {at:?}"),
    )
}

/// Input and output of reduce-scatter / all-gather: same dtype and device, and
/// `big` = world × `small` elements.
pub fn check_pair(
    op: &'static str,
    rank: usize,
    world: usize,
    small: &Tensor,
    big: &Tensor,
) -> Result<()> {
    check_buffer(op, rank, small)?;
    check_buffer(op, rank, big)?;
    if small.dtype() != big.dtype() {
        return Err(CommError::invalid(
            op,
            rank,
            format!(
                "input dtype {:?} differs from output dtype {:?}",
                small.dtype(),
                big.dtype()
            ),
        ));
    }
    if !small.device().same_device(big.device()) {
        return Err(CommError::invalid(
            op,
            rank,
            "input and output are on different devices",
        ));
    }
    if big.elem_count() != small.elem_count() * world {
        return Err(CommError::invalid(
            op,
            rank,
            format!(
                "the large buffer has {} elements, expected world_size {} × {} = {}",
                big.elem_count(),
                world,
                small.elem_count(),
                small.elem_count() * world
            ),
        ));
    }
    in_place(op, rank, small, big).map(|_| ())
}

/// Whether `small` and `big` share one storage, as an in-place reduce-scatter or all-gather
/// has them (NCCL's rule, every backend's): then `small` must be this rank's chunk of
/// `big`, starting `rank × small` elements into it; any other overlap is refused.
pub fn in_place(op: &'static str, rank: usize, small: &Tensor, big: &Tensor) -> Result<bool> {
    let at = |t: &Tensor| {
        let (g, l) = t.storage_and_layout();
        (
            &*g as *const candle_core::Storage as usize,
            l.start_offset(),
        )
    };
    let ((s, s0), (b, b0)) = (at(small), at(big));
    if s != b {
        return Ok(false);
    }
    if s0 != b0 + rank * small.elem_count() {
        return Err(CommError::invalid(
            op,
            rank,
            format!(
                "input and output share a buffer, but the small one starts {} elements into the large one, not at this rank's chunk ({} × {})",
                s0 as i64 - b0 as i64,
                rank,
                small.elem_count()
            ),
        ));
    }
    Ok(true)
}

pub fn check_root(op: &'static str, rank: usize, world: usize, root: usize) -> Result<()> {
    if root >= world {
        return Err(CommError::invalid(
            op,
            rank,
            format!("root {root} is not below world_size {world}"),
        ));
    }
    Ok(())
}

/// Each (input, buffer) pair of an all-reduce into another buffer
/// (`Communicator::reduce_scatter_deferred_with`, `Deferred::gather`): the input and this rank's chunk of the
/// buffer (a view), after checking that both have the same elements, a multiple of the
/// world size, and the same dtype and device.
pub(crate) fn chunks<C: crate::Communicator + ?Sized>(
    op: &'static str,
    comm: &C,
    pairs: &[(Tensor, Tensor)],
) -> Result<Vec<(Tensor, Tensor)>> {
    let (rank, world) = (comm.rank(), comm.world_size());
    let mut out = Vec::with_capacity(pairs.len());
    for (input, buf) in pairs {
        let n = buf.elem_count();
        if input.elem_count() != n || !n.is_multiple_of(world) {
            let e = format!(
                "input of {} elements and buffer of {n}: expected the same number, a multiple of world_size {world}",
                input.elem_count()
            );
            return Err(CommError::invalid(op, rank, e));
        }
        check_buffer(op, rank, buf)?;
        let chunk = buf
            .flatten_all()?
            .narrow(0, rank * (n / world), n / world)?;
        check_pair(op, rank, world, &chunk, input)?;
        out.push((input.clone(), chunk));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn rejects_bad_buffers_naming_the_problem() {
        let d = Device::Cpu;
        let ints = Tensor::zeros(4, DType::U32, &d).unwrap();
        assert!(check_buffer("all_reduce", 0, &ints)
            .unwrap_err()
            .to_string()
            .contains("U32"));
        let t = Tensor::zeros((3, 4), DType::F32, &d).unwrap().t().unwrap();
        assert!(check_buffer("all_reduce", 1, &t)
            .unwrap_err()
            .to_string()
            .contains("not contiguous"));
        let small = Tensor::zeros(3, DType::F32, &d).unwrap();
        let big = Tensor::zeros(7, DType::F32, &d).unwrap();
        let e = check_pair("all_gather", 0, 2, &small, &big)
            .unwrap_err()
            .to_string();
        assert!(e.contains("7 elements") && e.contains("= 6"), "{e}");
        assert!(check_root("broadcast", 0, 2, 2).is_err());
    }

    #[test]
    fn in_place_needs_the_small_buffer_at_this_ranks_chunk() {
        let big = Tensor::zeros(6, DType::F32, &Device::Cpu).unwrap();
        let other = Tensor::zeros(2, DType::F32, &Device::Cpu).unwrap();
        assert!(!in_place("all_gather", 1, &other, &big).unwrap());
        let mine = big.narrow(0, 2, 2).unwrap();
        assert!(in_place("all_gather", 1, &mine, &big).unwrap());
        let e = check_pair("reduce_scatter", 2, 3, &mine, &big)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("starts 2 elements") && e.contains("(2 × 2)"),
            "{e}"
        );
    }
}
