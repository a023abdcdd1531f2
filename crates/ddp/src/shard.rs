//! Splitting a global batch over ranks: rank r gets rows [r·b/w, (r+1)·b/w) of every
//! tensor of the batch (input, targets and the named extra tensors).

use crate::error::{DdpError, Result};
use seam::Batch;

/// Rank `rank`'s share of `global` (the first dimension of every tensor). Errors name a
/// rank outside the world, a tensor whose rows differ from the input's, and a batch that
/// does not divide by the world size.
pub fn shard_batch(global: &Batch, rank: usize, world: usize) -> Result<Batch> {
    if world == 0 || rank >= world {
        return Err(DdpError::Input(format!(
            "rank {rank} is outside a world of {world} ranks"
        )));
    }
    let b = global.rows()?;
    if b == 0 || b % world != 0 {
        return Err(DdpError::Input(format!(
            "global batch size {b} is not divisible by the world size {world}"
        )));
    }
    let per = b / world;
    Ok(global.narrow(rank * per, per)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    #[test]
    fn shards_and_rejects_indivisible_batches() {
        let dev = Device::Cpu;
        let g = Batch::new(
            Tensor::arange(0f32, 12.0, &dev)
                .unwrap()
                .reshape((6, 2))
                .unwrap(),
            Tensor::arange(0u32, 6, &dev).unwrap(),
        );
        let s = shard_batch(&g, 1, 3).unwrap();
        assert_eq!(s.targets.to_vec1::<u32>().unwrap(), vec![2, 3]);
        let e = shard_batch(&g, 0, 4).err().unwrap().to_string();
        assert!(
            e.contains("global batch size 6") && e.contains("world size 4"),
            "{e}"
        );
    }
}
