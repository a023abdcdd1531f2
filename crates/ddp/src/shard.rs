//! Splitting a global batch over ranks: rank r gets rows [r·b/w, (r+1)·b/w).

use crate::error::{DdpError, Result};
use seam::Batch;

/// Rank `rank`'s share of `global` (first dimension of input and targets).
pub fn shard_batch(global: &Batch, rank: usize, world: usize) -> Result<Batch> {
    let b = global.input.dims().first().copied().unwrap_or(0);
    let bt = global.targets.dims().first().copied().unwrap_or(0);
    if world == 0 || rank >= world {
        return Err(DdpError::Input(format!(
            "rank {rank} is outside a world of {world} ranks"
        )));
    }
    if b != bt {
        return Err(DdpError::Input(format!(
            "the batch has {b} inputs but {bt} targets"
        )));
    }
    if b == 0 || b % world != 0 {
        return Err(DdpError::Input(format!(
            "global batch size {b} is not divisible by the world size {world}"
        )));
    }
    let per = b / world;
    Ok(Batch {
        input: global.input.narrow(0, rank * per, per)?,
        targets: global.targets.narrow(0, rank * per, per)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    #[test]
    fn shards_and_rejects_indivisible_batches() {
        let dev = Device::Cpu;
        let g = Batch {
            input: Tensor::arange(0f32, 12.0, &dev)
                .unwrap()
                .reshape((6, 2))
                .unwrap(),
            targets: Tensor::arange(0u32, 6, &dev).unwrap(),
        };
        let s = shard_batch(&g, 1, 3).unwrap();
        assert_eq!(s.targets.to_vec1::<u32>().unwrap(), vec![2, 3]);
        let e = shard_batch(&g, 0, 4).err().unwrap().to_string();
        assert!(
            e.contains("global batch size 6") && e.contains("world size 4"),
            "{e}"
        );
    }
}
