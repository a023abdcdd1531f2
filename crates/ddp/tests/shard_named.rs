//! A batch of several named tensors (ids, a mask, labels, per-row weights) shards across
//! 2 and 4 ranks row by row, every tensor alike; the shards put back together are the
//! global batch. A tensor with other rows than the input, or a batch that does not divide
//! by the world size, is an error naming it.

use candle_core::{Device, Tensor};
use ddp::shard_batch;
use seam::Batch;

fn global() -> Batch {
    let dev = Device::Cpu;
    let ids = Tensor::arange(0u32, 8 * 5, &dev)
        .unwrap()
        .reshape((8, 5))
        .unwrap();
    let mask = Tensor::arange(100f32, 140.0, &dev)
        .unwrap()
        .reshape((8, 5))
        .unwrap();
    let labels = Tensor::arange(200u32, 208, &dev).unwrap();
    let weights = Tensor::arange(300f32, 308.0, &dev).unwrap();
    Batch::new(ids, labels)
        .with("mask", mask)
        .with("weights", weights)
}

fn rows(t: &Tensor) -> Vec<f32> {
    t.to_dtype(candle_core::DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

#[test]
fn every_named_tensor_is_sharded_by_rows_on_2_and_4_ranks() {
    let g = global();
    for world in [2, 4] {
        let shards: Vec<Batch> = (0..world)
            .map(|r| shard_batch(&g, r, world).unwrap())
            .collect();
        for (name, whole) in g.tensors() {
            let mut joined = Vec::new();
            for (r, s) in shards.iter().enumerate() {
                let t = s.get(name).unwrap();
                assert_eq!(t.dims()[0], 8 / world, "{name} rank {r}");
                assert_eq!(s.rows().unwrap(), 8 / world);
                joined.extend(rows(t));
            }
            assert_eq!(
                joined,
                rows(whole),
                "{name}: the shards in rank order are the batch"
            );
        }
        // Rank 1's mask holds the mask rows of its own ids.
        let s = &shards[1];
        let first_id = rows(&s.input)[0] as usize;
        assert_eq!(rows(s.get("mask").unwrap())[0], 100.0 + first_id as f32);
    }
}

#[test]
fn a_tensor_with_other_rows_or_an_indivisible_batch_is_an_error_naming_it() {
    let dev = Device::Cpu;
    let bad = global().with(
        "mask",
        Tensor::zeros((6, 5), candle_core::DType::F32, &dev).unwrap(),
    );
    let e = shard_batch(&bad, 0, 2).err().unwrap().to_string();
    assert!(
        e.contains("batch tensor mask has 6 rows (shape [6, 5]) but the input has 8"),
        "{e}"
    );
    let e = shard_batch(&global(), 0, 3).err().unwrap().to_string();
    assert!(
        e.contains("global batch size 8 is not divisible by the world size 3"),
        "{e}"
    );
    let e = global().get("masks").err().unwrap().to_string();
    assert!(
        e.contains("no tensor masks") && e.contains("\"mask\""),
        "{e}"
    );
}
