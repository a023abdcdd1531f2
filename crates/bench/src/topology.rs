//! The machine's GPUs and NVLink topology, read through `nvidia-smi` (which asks NVML):
//! the GPU list, active links of GPU 0 with their speed, and `topo -m` verbatim. The
//! theoretical all-reduce bus bandwidth of a single-node NVLink (NVSwitch or direct)
//! system is the per-direction NVLink bandwidth of one GPU: links × per-link speed.

use crate::records::TopologyRecord;
use std::process::Command;

fn smi(args: &[&str]) -> Option<String> {
    let out = Command::new("nvidia-smi").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// GPU names from `nvidia-smi -L` (empty without a driver).
pub fn gpus() -> Vec<String> {
    smi(&["-L"])
        .map(|s| {
            s.lines()
                .filter_map(|l| {
                    l.split_once(": ")
                        .map(|(_, rest)| rest.split(" (UUID").next().unwrap_or(rest).to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Sums `Link N: X GB/s` lines of `nvidia-smi nvlink -s` output (inactive links skipped).
pub fn parse_nvlink_status(text: &str) -> (usize, f64) {
    let speeds: Vec<f64> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("Link ")?;
            let (_, speed) = rest.split_once(':')?;
            speed.trim().strip_suffix("GB/s")?.trim().parse().ok()
        })
        .collect();
    let per = if speeds.is_empty() {
        0.0
    } else {
        speeds.iter().sum::<f64>() / speeds.len() as f64
    };
    (speeds.len(), per)
}

pub fn probe() -> Option<TopologyRecord> {
    let gpus = gpus();
    let gpu = gpus.first()?.clone();
    let (nvlinks, link_gbs) = smi(&["nvlink", "-s", "-i", "0"])
        .map(|s| parse_nvlink_status(&s))
        .unwrap_or((0, 0.0));
    Some(TopologyRecord {
        bench: "topology".into(),
        gpu,
        gpus: gpus.len(),
        nvlinks,
        link_gbs,
        peak_busbw_gbs: nvlinks as f64 * link_gbs,
        matrix: smi(&["topo", "-m"]).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvlink_status_is_summed() {
        let text = "GPU 0: NVIDIA H200 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n\t Link 2: <inactive>\n";
        let (n, per) = parse_nvlink_status(text);
        assert_eq!(n, 2);
        assert!((per - 26.562).abs() < 1e-9);
    }
}
