//! GPUs' dense peak FLOP/s, from NVIDIA's data sheets (the figures without sparsity), for
//! the model FLOPs utilization (MFU) that `train` and `bench` print: measured tokens/s ×
//! [`crate::Shape::flops_per_token`] ÷ the peak. A GPU not in the table has no MFU, rather
//! than a guessed one.
//!
//! ```
//! let p = memplan::peak::of("NVIDIA H200").unwrap();
//! assert_eq!(p.bf16, 989e12);
//! assert!(memplan::peak::of("Tesla T4").is_none());
//! ```

/// One GPU's dense peaks, FLOP/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    /// bf16 (and fp16) on the tensor cores.
    pub bf16: f64,
    /// TF32 on the tensor cores.
    pub tf32: f64,
    /// fp32 on the CUDA cores.
    pub fp32: f64,
}

/// By a part of the name the driver reports (`NVIDIA H100 80GB HBM3`), the first that
/// matches: the PCIe and NVL H100s before the SXM one. The GH200's GPU is an H200's.
const TABLE: [(&str, Peak); 5] = [
    ("H100 PCIE", peak(756e12, 378e12, 51e12)),
    ("H100 NVL", peak(835e12, 417.5e12, 60e12)),
    ("H100", peak(989e12, 494.7e12, 67e12)),
    ("H200", peak(989e12, 494.7e12, 67e12)),
    ("A100", peak(312e12, 156e12, 19.5e12)),
];

const fn peak(bf16: f64, tf32: f64, fp32: f64) -> Peak {
    Peak { bf16, tf32, fp32 }
}

/// The dense peaks of the GPU the driver names `name`; `None` for one not in the table.
pub fn of(name: &str) -> Option<Peak> {
    let n = name.to_ascii_uppercase();
    TABLE.iter().find(|(k, _)| n.contains(k)).map(|(_, p)| *p)
}

#[cfg(test)]
mod tests {
    use super::of;

    #[test]
    fn each_name_the_driver_reports_takes_its_own_row() {
        let bf16 = |n: &str| of(n).map(|p| p.bf16 / 1e12);
        assert_eq!(bf16("NVIDIA H100 80GB HBM3"), Some(989.0));
        assert_eq!(bf16("NVIDIA H100 PCIe"), Some(756.0));
        assert_eq!(bf16("NVIDIA H100 NVL"), Some(835.0));
        assert_eq!(bf16("NVIDIA H200"), Some(989.0));
        assert_eq!(bf16("NVIDIA GH200 480GB"), Some(989.0));
        assert_eq!(bf16("NVIDIA A100-SXM4-80GB"), Some(312.0));
        assert_eq!(bf16("NVIDIA GeForce RTX 4090"), None);
    }
}
