//! Result records: one JSON object per line, shared by the benchmarks and the report.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One all-reduce measurement (one backend, world size and message size).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AllReduceRecord {
    pub bench: String, // "allreduce"
    pub backend: String,
    pub world: usize,
    pub bytes: usize,
    pub iters: usize,
    /// Mean time per all-reduce, slowest rank, microseconds.
    pub time_us: f64,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    /// Every checked result was exact.
    pub correct: bool,
    pub device: String,
}

/// What the machine's interconnect allows, for the reference curve.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TopologyRecord {
    pub bench: String, // "topology"
    pub gpu: String,
    pub gpus: usize,
    /// Active NVLink links of GPU 0 and the speed of each, GB/s per direction.
    pub nvlinks: usize,
    pub link_gbs: f64,
    /// Theoretical all-reduce bus bandwidth: links × speed (GB/s).
    pub peak_busbw_gbs: f64,
    /// `nvidia-smi topo -m`, verbatim.
    pub matrix: String,
}

/// The PyTorch anchor's all-reduce lines (`torch_baseline.py allreduce`, mode "allreduce").
#[derive(Debug, Clone, Deserialize)]
pub struct TorchAllReduce {
    #[serde(default)]
    pub transport: Option<String>,
    /// "gloo" for the Gloo CPU anchor (gloo_allreduce.py); absent for NCCL.
    #[serde(default)]
    pub backend: Option<String>,
    pub world: usize,
    #[serde(rename = "MiB")]
    pub mib: f64,
    /// Time in ms (torch_baseline.py) or in µs (`us`, gloo_allreduce.py).
    #[serde(default)]
    pub ms: f64,
    #[serde(default)]
    pub us: Option<f64>,
    #[serde(rename = "busbw_GBs")]
    pub busbw_gbs: f64,
}

impl TorchAllReduce {
    /// Time per all-reduce in µs, whichever unit the anchor wrote.
    pub fn time_us(&self) -> f64 {
        self.us.unwrap_or(self.ms * 1e3)
    }
    pub fn is_gloo(&self) -> bool {
        self.backend.as_deref() == Some("gloo")
    }
}

pub fn busbw(algbw: f64, world: usize) -> f64 {
    algbw * 2.0 * (world as f64 - 1.0) / world as f64
}

/// The results file a benchmark appends its records to (`--out`), opened for appending
/// (parent directories created) before the run starts, so a directory or an unwritable
/// path fails at once, naming it; a failed write is an error naming it, never a warning.
pub struct Out {
    path: PathBuf,
    file: Mutex<File>,
}

impl Out {
    pub fn open(path: &Path) -> Result<Self> {
        let what = || format!("--out {}: cannot open for appending", path.display());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(what)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(what)?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends one record as a JSON line (one write, unbuffered: a crash loses nothing
    /// already appended).
    pub fn append(&self, rec: &impl Serialize) -> Result<()> {
        let mut line = serde_json::to_string(rec)?;
        line.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(line.as_bytes())
            .and_then(|()| f.flush())
            .with_context(|| format!("--out {}: writing a result failed", self.path.display()))
    }
}

/// Creates the directory `flag` names before the run, so an unusable one fails at once.
pub fn ensure_dir(dir: &Path, flag: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{flag} {}: cannot create the directory", dir.display()))
}

/// A sink that prints each record as a table row and appends it to `out`.
pub fn print_and_store<'a, R: Serialize + 'a>(
    out: &'a Out,
    row: fn(&R) -> String,
) -> impl FnMut(&R) -> Result<()> + 'a {
    move |r| {
        println!("{}", row(r));
        out.append(r)
    }
}

/// The NCCL and comm settings of this process's environment that change how collectives
/// run (`COMM_CUDA_EVENT_TRACKING=1;NCCL_MAX_CTAS=4`, sorted), for records to say what they
/// ran under; `None` when there are none. Debug output, NCCL_NVLS_ENABLE (always 0 on the
/// project's GPU machines) and COMM_TIMEOUT_S are left out.
pub fn nccl_tuning() -> Option<String> {
    nccl_tuning_of(std::env::vars())
}

fn nccl_tuning_of(vars: impl Iterator<Item = (String, String)>) -> Option<String> {
    let mut set: Vec<String> = vars
        .filter(|(k, _)| is_tuning(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    set.sort();
    (!set.is_empty()).then(|| set.join(";"))
}

/// Whether environment variable `k` changes how NCCL or comm run. Not: NCCL's logging,
/// the mandatory `NCCL_NVLS_ENABLE=0`, `NCCL_VERSION` (a label container images set;
/// NCCL never reads it) and comm's timeout.
fn is_tuning(k: &str) -> bool {
    (k.starts_with("NCCL_")
        && !k.starts_with("NCCL_DEBUG")
        && k != "NCCL_NVLS_ENABLE"
        && k != "NCCL_VERSION")
        || (k.starts_with("COMM_") && k != "COMM_TIMEOUT_S")
}

/// A recorded `nccl_tuning` string with what [`is_tuning`] now leaves out removed, so
/// records written before a variable was known to be a mere label read as untuned.
pub fn retune(env: Option<&str>) -> Option<String> {
    let kept: Vec<&str> = env?
        .split(';')
        .filter(|kv| is_tuning(kv.split('=').next().unwrap_or("")))
        .collect();
    (!kept.is_empty()).then(|| kept.join(";"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_tuning_lists_settings_but_not_debug_or_nvls() {
        let vars = [
            ("NCCL_PROTO", "Simple"),
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_NVLS_ENABLE", "0"),
            ("PATH", "/bin"),
            ("NCCL_MAX_CTAS", "4"),
            ("COMM_TIMEOUT_S", "60"),
            ("COMM_CUDA_EVENT_TRACKING", "1"),
            ("NCCL_VERSION", "2.28.3-1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(
            nccl_tuning_of(vars.iter().cloned()).as_deref(),
            Some("COMM_CUDA_EVENT_TRACKING=1;NCCL_MAX_CTAS=4;NCCL_PROTO=Simple")
        );
        assert_eq!(nccl_tuning_of(vars[1..4].iter().cloned()), None);
        assert_eq!(nccl_tuning_of(vars[5..6].iter().cloned()), None);
        assert_eq!(nccl_tuning_of(vars[7..].iter().cloned()), None);
        assert_eq!(retune(Some("NCCL_VERSION=2.28.3-1")), None);
        assert_eq!(
            retune(Some("NCCL_MAX_CTAS=4;NCCL_VERSION=2.28.3-1")).as_deref(),
            Some("NCCL_MAX_CTAS=4")
        );
        assert_eq!(retune(None), None);
    }

    #[test]
    fn busbw_matches_nccl_tests_formula() {
        assert_eq!(busbw(100.0, 2), 100.0);
        assert_eq!(busbw(100.0, 8), 175.0);
    }

    #[test]
    fn records_are_appended_one_line_each_and_read_back() {
        let dir = std::env::temp_dir().join(format!("bench-rec-{}", std::process::id()));
        let p = dir.join("r.jsonl");
        let r = AllReduceRecord {
            bench: "allreduce".into(),
            backend: "cpu".into(),
            world: 2,
            bytes: 1 << 20,
            iters: 5,
            time_us: 10.0,
            algbw_gbs: 1.0,
            busbw_gbs: 1.0,
            correct: true,
            device: "cpu".into(),
        };
        let out = Out::open(&p).unwrap();
        out.append(&r).unwrap();
        out.append(&serde_json::json!({"bench": "other", "x": 1}))
            .unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "one line per record");
        let back: AllReduceRecord = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(back, r);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// Serde's default for a count that older records do not carry.
pub(crate) fn one() -> usize {
    1
}

/// The PyTorch anchor's training-step lines (`torch_baseline.py single|ddp|zero`).
#[derive(Debug, Clone, Deserialize)]
pub struct TorchStep {
    pub mode: String,
    #[serde(default)]
    pub transport: Option<String>,
    #[serde(default)]
    pub compile: bool,
    #[serde(default)]
    pub fused: bool,
    #[serde(default)]
    pub opt: Option<String>,
    #[serde(default)]
    pub world: Option<usize>,
    /// Micro-batches per step (torch_train_best.py's `--accum`; 1 where absent).
    #[serde(default = "one")]
    pub accum: usize,
    /// Rows of the whole step over every rank and micro-batch (torch_train_best.py's
    /// `--global-batch`; absent in other anchors' lines).
    #[serde(default)]
    pub global_batch: Option<usize>,
    /// torch_train_best.py's `--parallel`: single, ddp or fsdp2.
    #[serde(default)]
    pub parallel: Option<String>,
    /// torch_best.py's variant: eager, compile, compile-ro (torch.compile's CUDA graphs).
    #[serde(default)]
    pub variant: Option<String>,
    /// TF32 matmuls on (torch_best.py under TF32=1).
    #[serde(default)]
    pub tf32: bool,
    pub size: String,
    pub dtype: String,
    pub step_ms: f64,
    #[serde(rename = "peak_GiB")]
    pub peak_gib: f64,
}
