//! `bench ddp` on the CPU backend: the carve-out and coalescing sweeps and the gradient
//! dtype on the wire reach the records (the carve-out itself is a no-op without CUDA), and bad values are
//! named.

use std::process::Command;

fn bench(args: &[&str], out: &std::path::Path) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("bench runs");
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text)
}

/// Runs a bench that must succeed into a fresh `out`; its records and its output.
fn records(args: &[&str], out: &std::path::Path) -> (Vec<serde_json::Value>, String) {
    let _ = std::fs::remove_file(out);
    let (ok, text) = bench(args, out);
    assert!(ok, "{text}");
    let recs = std::fs::read_to_string(out)
        .expect("records written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let _ = std::fs::remove_file(out);
    (recs, text)
}

const TINY: [&str; 14] = [
    "ddp",
    "--backend",
    "cpu",
    "--ranks",
    "2",
    "--size",
    "tiny",
    "--strategies",
    "bucketed",
    "--buckets-mb",
    "1",
    "--warmup",
    "1",
    "--steps",
];

#[test]
fn carveout_sweep_and_grad_dtype_reach_the_records() {
    let out = std::env::temp_dir().join(format!("bench-ddp-{}.jsonl", std::process::id()));
    let mut args = TINY.to_vec();
    args.extend(["1", "--sm-carveout", "0,16", "--grads", "bf16"]);
    let (recs, text) = records(&args, &out);
    let carve: Vec<u64> = recs
        .iter()
        .map(|r| r["sm_carveout"].as_u64().unwrap())
        .collect();
    assert_eq!(carve, [0, 16], "{text}");
    for r in &recs {
        assert_eq!(r["dtype"], "fp32");
        assert_eq!(r["grad_dtype"], "bf16", "an fp32 model with --grads bf16");
    }
    assert!(text.contains("bucketed:1/c16"), "{text}");
}

#[test]
fn empty_carveout_list_is_named() {
    let out = std::env::temp_dir().join(format!("bench-ddp-bad-{}.jsonl", std::process::id()));
    let mut args = TINY.to_vec();
    args.extend(["1", "--sm-carveout", ""]);
    let (ok, text) = bench(&args, &out);
    let _ = std::fs::remove_file(&out);
    assert!(!ok && text.contains("--sm-carveout"), "{text}");
}

#[test]
fn coalesce_sweep_reaches_the_records_with_fewer_launches() {
    let out = std::env::temp_dir().join(format!("bench-ddp-g-{}.jsonl", std::process::id()));
    let mut args = TINY[..7].to_vec();
    args.extend(["--strategies", "overlap", "--warmup", "1", "--steps", "1"]);
    args.extend(["--coalesce", "false,true"]);
    let (recs, text) = records(&args, &out);
    let got: Vec<(bool, u64, u64)> = recs
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (
                r["coalesce"].as_bool().unwrap(),
                n("collectives"),
                n("launches"),
            )
        })
        .collect();
    assert_eq!(got.len(), 2, "{text}");
    assert_eq!(got[0].1, got[0].2, "one launch per parameter: {got:?}");
    assert_eq!(got[1].1, got[0].1, "{got:?}");
    assert!(got[1].2 < got[1].1, "coalesced: fewer launches: {got:?}");
    assert!(text.contains("overlap/g"), "{text}");
}
