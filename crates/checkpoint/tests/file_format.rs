//! A checkpoint file is written and read a tensor at a time (`file.rs`), yet its bytes are
//! safetensors' own (`safetensors::serialize`, the header's keys sorted), any safetensors
//! reader reads it, and a flipped bit anywhere fails `load` as it fails `verify`.

use candle_core::{DType, Device, Tensor};
use checkpoint::{save, Checkpoint, CheckpointError, Files, META_RANK, META_STEP, META_WORLD};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ckpt-file-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Tensors of every width (f64 to u8), one not contiguous and one empty.
fn tensors() -> HashMap<String, Tensor> {
    let cpu = &Device::Cpu;
    let f: Vec<f32> = (0..15).map(|i| i as f32 * 0.37 - 2.0).collect();
    let m = Tensor::from_vec(f.clone(), (3, 5), cpu).unwrap();
    HashMap::from([
        ("m.f32".to_string(), m.clone()),
        ("m.t".to_string(), m.t().unwrap()),
        (
            "b.bf16".to_string(),
            Tensor::from_vec(f, 15, cpu)
                .unwrap()
                .to_dtype(DType::BF16)
                .unwrap(),
        ),
        (
            "a.f64".to_string(),
            Tensor::new(&[1.5f64, -0.25], cpu).unwrap(),
        ),
        ("ids".to_string(), Tensor::new(&[7u32, 0, 9], cpu).unwrap()),
        ("bytes".to_string(), Tensor::new(&[1u8, 2, 3], cpu).unwrap()),
        (
            "empty".to_string(),
            Tensor::zeros(0, DType::F32, cpu).unwrap(),
        ),
    ])
}

/// Saves `t` as `name` on one rank at `step`.
fn save_one(dir: &Path, name: &str, t: &HashMap<String, Tensor>, step: u64) {
    let c = comm::cpu_group(1, comm::CommOptions::default())
        .unwrap()
        .remove(0);
    save(&c, &Device::Cpu, dir, step, |f: &mut Files| {
        f.put(name, t)?;
        Ok::<(), CheckpointError>(())
    })
    .unwrap();
}

fn values(t: &Tensor) -> Vec<f64> {
    let t = t.flatten_all().unwrap().to_dtype(DType::F64).unwrap();
    t.to_vec1().unwrap()
}

#[test]
fn a_file_is_safetensors_own_bytes_with_the_header_sorted_and_any_reader_reads_it() {
    let dir = tmp("bytes");
    let t = tensors();
    save_one(&dir, "s.safetensors", &t, 4);
    let ours = std::fs::read(dir.join("s.safetensors")).unwrap();
    // safetensors::serialize's bytes, the header's JSON keys sorted in place.
    let meta = HashMap::from([
        (META_STEP.to_string(), "4".to_string()),
        (META_RANK.to_string(), "0".to_string()),
        (META_WORLD.to_string(), "1".to_string()),
    ]);
    let sorted: BTreeMap<&str, &Tensor> = t.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut theirs = safetensors::serialize(sorted, Some(meta)).unwrap();
    let n = u64::from_le_bytes(theirs[..8].try_into().unwrap()) as usize;
    let h: serde_json::Value = serde_json::from_slice(&theirs[8..8 + n]).unwrap();
    let mut h = serde_json::to_vec(&h).unwrap();
    h.resize(n, b' ');
    theirs[8..8 + n].copy_from_slice(&h);
    assert_eq!(ours.len(), theirs.len());
    assert!(
        ours == theirs,
        "the bytes differ from safetensors::serialize's"
    );
    // A plain safetensors reader, and the checkpoint's own, read every tensor back.
    let plain = candle_core::safetensors::load(dir.join("s.safetensors"), &Device::Cpu).unwrap();
    let ck = Checkpoint::open(&dir)
        .unwrap()
        .load("s.safetensors")
        .unwrap();
    for (name, want) in &t {
        for got in [&plain[name], &ck[name]] {
            assert_eq!(got.dims(), want.dims(), "{name}");
            assert_eq!(got.dtype(), want.dtype(), "{name}");
            assert_eq!(values(got), values(want), "{name}");
        }
    }
    assert_eq!(ck.len(), t.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn load_refuses_a_flipped_bit_in_any_tensor_and_in_the_header() {
    let dir = tmp("flip");
    save_one(&dir, "s.safetensors", &tensors(), 2);
    let path = dir.join("s.safetensors");
    let good = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    // The first data byte, one in the middle of the data, and a space of the header.
    let space = 8 + good[8..8 + n].iter().rposition(|&b| b == b' ').unwrap();
    for at in [8 + n, (8 + n + good.len()) / 2, space] {
        let mut b = good.clone();
        b[at] ^= 0x01;
        std::fs::write(&path, &b).unwrap();
        let e = Checkpoint::open(&dir).unwrap().load("s.safetensors");
        let e = e.map(|_| ()).unwrap_err().to_string();
        assert!(
            e.contains("s.safetensors") && e.contains("checksum mismatch"),
            "byte {at}: {e}"
        );
    }
    std::fs::write(&path, &good).unwrap();
    assert_eq!(
        Checkpoint::open(&dir)
            .unwrap()
            .load("s.safetensors")
            .unwrap()
            .len(),
        7
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
