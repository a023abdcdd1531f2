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
    Ok(())
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
}
