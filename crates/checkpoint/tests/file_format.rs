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

#[test]
fn load_parts_keeps_the_elements_asked_for_and_still_verifies_the_whole_file() {
    use checkpoint::Part;
    let dir = tmp("parts");
    let t = tensors();
    save_one(&dir, "s.safetensors", &t, 3);
    let ck = Checkpoint::open(&dir).unwrap();
    let keep = |k: &str, shape: &[usize], _: &HashMap<String, Tensor>| match k {
        "m.f32" | "m.t" => {
            assert_eq!(shape, [t[k].dims()[0], t[k].dims()[1]]);
            Part::Elements(vec![1..3, 3..4, 9..15])
        }
        "b.bf16" | "ids" => Part::Elements(vec![0..0, 2..3]),
        "a.f64" => Part::Whole,
        _ => Part::Skip,
    };
    let got = ck.load_parts("s.safetensors", keep).unwrap();
    let mut names: Vec<&String> = got.keys().collect();
    names.sort();
    assert_eq!(names, ["a.f64", "b.bf16", "ids", "m.f32", "m.t"]);
    assert_eq!(values(&got["a.f64"]), values(&t["a.f64"]));
    for (k, at) in [
        ("m.f32", vec![1, 2, 3, 9, 10, 11, 12, 13, 14]),
        ("ids", vec![2]),
    ] {
        let all = values(&t[k]);
        let want: Vec<f64> = at.iter().map(|&i| all[i]).collect();
        assert_eq!(values(&got[k]), want, "{k}");
        assert_eq!(got[k].dtype(), t[k].dtype(), "{k}");
    }
    // The transposed tensor was written row-major: its elements are the transpose's.
    let tr = values(&t["m.t"]);
    assert_eq!(values(&got["m.t"])[..2], tr[1..3]);
    assert_eq!(values(&got["b.bf16"]), [values(&t["b.bf16"])[2]]);
    // Ranges out of order, or past the tensor's end, are refused, naming the tensor.
    for bad in [vec![3..5, 2..4], vec![0..1, 14..16]] {
        let e = ck.load_parts("s.safetensors", |k, _, _| match k {
            "m.f32" => Part::Elements(bad.clone()),
            _ => Part::Skip,
        });
        let e = e.map(|_| ()).unwrap_err().to_string();
        assert!(
            e.contains("\"m.f32\"") && e.contains("element ranges"),
            "{e}"
        );
    }
    // A flipped bit in bytes skipped (the last byte of the data) fails as in `load`.
    let path = dir.join("s.safetensors");
    let mut b = std::fs::read(&path).unwrap();
    *b.last_mut().unwrap() ^= 0x01;
    std::fs::write(&path, &b).unwrap();
    let e = Checkpoint::open(&dir)
        .unwrap()
        .load_parts("s.safetensors", |_, _, _| Part::Elements(vec![]));
    let e = e.map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("checksum mismatch"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tensor_written_in_pieces_has_the_bytes_of_the_whole_and_wrong_pieces_fail_the_save() {
    use checkpoint::{Entry, Pieces};
    let cpu = &Device::Cpu;
    let v: Vec<f32> = (0..21).map(|i| i as f32 * 0.5 - 3.0).collect();
    let whole = Tensor::from_vec(v.clone(), 21, cpu).unwrap();
    let (a, b) = (tmp("whole"), tmp("pieces"));
    save_one(
        &a,
        "s.safetensors",
        &HashMap::from([("x".into(), whole.clone())]),
        1,
    );
    // Three pieces: a 2-D one, a transposed (not contiguous) one, an empty one, a 1-D one.
    let p0 = Tensor::from_vec(v[..6].to_vec(), (2, 3), cpu).unwrap();
    let p1 = Tensor::from_vec(v[6..12].to_vec(), (3, 2), cpu).unwrap();
    let p1 = p1.t().unwrap().contiguous().unwrap().t().unwrap();
    let p2 = Tensor::zeros(0, DType::F32, cpu).unwrap();
    let p3 = Tensor::from_vec(v[12..].to_vec(), 9, cpu).unwrap();
    let save_pieces = |dir: &Path, pieces: Vec<Tensor>, len: usize| {
        let c = comm::cpu_group(1, comm::CommOptions::default())
            .unwrap()
            .remove(0);
        save(&c, cpu, dir, 1, |f: &mut Files| {
            let p = Pieces::new(DType::F32, len, pieces.into_iter().map(Ok));
            f.put_entries(
                "s.safetensors",
                HashMap::from([("x".into(), Entry::Pieces(p))]),
            )
        })
    };
    save_pieces(&b, vec![p0.clone(), p1, p2, p3.clone()], 21).unwrap();
    let read = |d: &Path| std::fs::read(d.join("s.safetensors")).unwrap();
    assert!(
        read(&a) == read(&b),
        "pieces wrote other bytes than the whole"
    );
    // Too few elements, too many, another dtype: the save fails naming the tensor, and
    // leaves no file.
    let half = p3.to_dtype(DType::BF16).unwrap();
    for (pieces, what) in [
        (vec![p0.clone()], "pieces of 6 elements, for 21"),
        (
            vec![p0.clone(), p3.clone(), p3.clone()],
            "a piece of 9 F32 elements after 15",
        ),
        (vec![p0.clone(), half], "a piece of 9 BF16 elements after 6"),
    ] {
        let c = tmp("bad-pieces");
        let e = save_pieces(&c, pieces, 21).unwrap_err().to_string();
        assert!(e.contains("\"x\"") && e.contains(what), "{e}");
        let left: Vec<_> = std::fs::read_dir(&c).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&c).unwrap();
    }
    for d in [a, b] {
        std::fs::remove_dir_all(d).unwrap();
    }
}
