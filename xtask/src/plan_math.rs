//! The formulas of `cargo xtask plan` (CS336 assignment 2, "communication_accounting"):
//! parameter and memory counts of an FFN-only Transformer, FSDP sharding, the compute-bound
//! batch of an FSDP × TP mesh (scaling book, Transformer training chapter) and the optimal
//! DDP bucket size. Pure functions; the inputs are validated by `plan`.

/// GB as in the assignment: 1e9 bytes.
pub const GB: f64 = 1e9;

/// The model: `num_blocks` blocks, each with two FFN matrices d_model×d_ff and d_ff×d_model
/// (attention and the other weights are ignored, as in the assignment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    pub d_model: u64,
    pub d_ff: u64,
    pub num_blocks: u64,
}

impl Model {
    /// The seeds' XXL configuration.
    pub const XXL: Model = Model {
        d_model: 16384,
        d_ff: 53248,
        num_blocks: 126,
    };

    /// P = num_blocks · 2 · d_ff · d_model.
    pub fn parameters(&self) -> u128 {
        self.num_blocks as u128 * 2 * self.d_ff as u128 * self.d_model as u128
    }

    /// FP32 master weights, FP32 gradients, FP32 Adam m and v: 4 copies × 4 bytes × P.
    pub fn state_bytes(&self) -> u128 {
        16 * self.parameters()
    }

    /// Bytes of bf16 activations saved for backward per token: per block the FFN input
    /// (d_model), the first matmul's output (d_ff) and the activation's output (d_ff),
    /// 2 bytes each: num_blocks · 2 · (d_model + 2·d_ff).
    pub fn activation_bytes_per_token(&self) -> u128 {
        self.num_blocks as u128 * 2 * (self.d_model as u128 + 2 * self.d_ff as u128)
    }

    /// None unless P, the FP32 state and the activations of `tokens` tokens (and their sum)
    /// fit in a u64 of bytes: guards the unchecked arithmetic of the other methods.
    pub fn checked(&self, tokens: u64) -> Option<()> {
        let (l, d, f) = (
            self.num_blocks as u128,
            self.d_model as u128,
            self.d_ff as u128,
        );
        let state = l.checked_mul(2 * f)?.checked_mul(d)?.checked_mul(16)?;
        let act = l
            .checked_mul(2 * (d + 2 * f))?
            .checked_mul(tokens as u128)?;
        (state.checked_add(act)? <= u64::MAX as u128).then_some(())
    }

    /// Activations saved for backward for a batch of `tokens` tokens.
    pub fn activation_bytes(&self, tokens: u64) -> u128 {
        self.activation_bytes_per_token() * tokens as u128
    }
}

/// ⌈a / b⌉ for b > 0.
pub fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

/// Bytes of a device of `gb` GB (GB = 1e9 bytes), rounded to a byte.
pub fn device_bytes(gb: f64) -> u128 {
    (gb * GB).round() as u128
}

/// How many devices of `device` bytes hold `bytes`: ⌈bytes / device⌉.
pub fn devices_needed(bytes: u128, device: u128) -> u128 {
    ceil_div(bytes, device)
}

/// Per-device memory with `n` FSDP shards: state / n + activations (not sharded).
pub fn fsdp_per_device(state: u128, act: u128, n: u128) -> f64 {
    state as f64 / n as f64 + act as f64
}

/// Smallest N_FSDP with state / N + act ≤ device: ⌈state / (device − act)⌉, or None when
/// the activations alone fill the device.
pub fn min_fsdp(state: u128, act: u128, device: u128) -> Option<u128> {
    (act < device).then(|| ceil_div(state, device - act).max(1))
}

/// The assignment's (b) variant: half the activations (every second layer) sharded too:
/// state / N + act/2 + act / (2N) ≤ device ⇔ N ≥ (state + act/2) / (device − act/2).
pub fn min_fsdp_half_act(state: u128, act: u128, device: u128) -> Option<u128> {
    let (num, den) = (2 * state + act, 2 * device);
    (act < den).then(|| ceil_div(num, den - act).max(1))
}

/// Hardware of the compute-bound calculation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hardware {
    pub name: &'static str,
    /// C: bf16 FLOP/s per device.
    pub flops: f64,
    /// W: link bandwidth per mesh axis, bytes/s.
    pub bandwidth: f64,
    /// M_X, M_Y: links per device along the FSDP and TP axes (scaling book notation).
    pub m_x: f64,
    pub m_y: f64,
    /// Where the numbers come from.
    pub source: &'static str,
}

pub const HARDWARE: [Hardware; 3] = [
    Hardware {
        name: "tpu-v5p",
        flops: 4.6e14,
        bandwidth: 2.0 * 9e10,
        m_x: 2.0,
        m_y: 1.0,
        source: "TPU v5p as in the assignment and the scaling book: C = 4.6e14 bf16 FLOP/s, \
                 W_ici = 2 × 9e10 B/s, M_X = 2, M_Y = 1 (3D torus)",
    },
    Hardware {
        name: "h100",
        flops: 989e12,
        bandwidth: 450e9,
        m_x: 1.0,
        m_y: 1.0,
        source: "H100 SXM: C = 989e12 dense bf16 FLOP/s, NVLink 450e9 B/s per direction, \
                 M_X = M_Y = 1 (one switched NVLink domain)",
    },
    Hardware {
        name: "h200",
        flops: 989e12,
        bandwidth: 450e9,
        m_x: 1.0,
        m_y: 1.0,
        source: "H200 SXM: C = 989e12 dense bf16 FLOP/s (as H100), NVLink 450e9 B/s per \
                 direction, M_X = M_Y = 1 (one switched NVLink domain)",
    },
];

/// The preset named `name`.
pub fn hardware(name: &str) -> Option<Hardware> {
    HARDWARE.iter().copied().find(|h| h.name == name)
}

/// The compute-bound batch of an FSDP (X) × TP (Y) mesh for one FFN layer of width F.
/// Scaling book, per layer and device: T_math = 4·B·D·F / (N·C),
/// T_FSDP = 4·D·F / (Y·W·M_X), T_TP = 4·B·D / (X·W·M_Y), N = X·Y.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeshBound {
    /// α = C / W.
    pub alpha: f64,
    pub devices: u64,
    /// α² / (M_X·M_Y·F): compute-bound when B/N exceeds it (with the best X for that B).
    pub per_device_threshold: f64,
    /// Smallest whole per-device batch above the threshold, and the global batch.
    pub per_device_min: u64,
    pub global_min: u64,
    /// X* = sqrt(B·N·M_X / (F·M_Y)) at the global minimum batch.
    pub best_x_at_min: f64,
    /// For the given X, Y: T_math > T_FSDP ⇔ B/N > α / (M_X·Y).
    pub fixed_fsdp_threshold: f64,
    pub fixed_per_device_min: u64,
    /// T_math > T_TP ⇔ F > α·Y / M_Y (independent of B).
    pub fixed_tp_f_needed: f64,
    pub fixed_tp_ok: bool,
}

/// Smallest integer strictly above `x`.
fn above(x: f64) -> u64 {
    (x.floor() as u64).saturating_add(1)
}

pub fn mesh_bound(hw: &Hardware, d_ff: u64, x: u64, y: u64) -> MeshBound {
    let f = d_ff as f64;
    let alpha = hw.flops / hw.bandwidth;
    let n = x * y;
    let threshold = alpha * alpha / (hw.m_x * hw.m_y * f);
    let per_device_min = above(threshold);
    let global_min = per_device_min.saturating_mul(n);
    let fixed = alpha / (hw.m_x * y as f64);
    let tp_f = alpha * y as f64 / hw.m_y;
    MeshBound {
        alpha,
        devices: n,
        per_device_threshold: threshold,
        per_device_min,
        global_min,
        best_x_at_min: (global_min as f64 * n as f64 * hw.m_x / (f * hw.m_y)).sqrt(),
        fixed_fsdp_threshold: fixed,
        fixed_per_device_min: above(fixed),
        fixed_tp_f_needed: tp_f,
        fixed_tp_ok: f > tp_f,
    }
}

/// DDP time model with buckets of s_b bytes for a model of s bytes, bandwidth w (B/s) and
/// per-bucket overhead o (s): T(s_b) = (s + s_b) / w + s·o / s_b.
pub fn bucket_time(s: f64, w: f64, o: f64, s_b: f64) -> f64 {
    (s + s_b) / w + s * o / s_b
}

/// dT/ds_b = 1/w − s·o/s_b² = 0 ⇒ s_b* = sqrt(s·o·w); returns (s_b*, T(s_b*)).
pub fn bucket_optimum(s: f64, w: f64, o: f64) -> (f64, f64) {
    let sb = (s * o * w).sqrt();
    (sb, bucket_time(s, w, o, sb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxl_parameters_and_state_exact() {
        let m = Model::XXL;
        assert_eq!(m.parameters(), 219_848_638_464);
        assert_eq!(m.state_bytes(), 3_517_578_215_424);
        assert_eq!(format!("{:.1}", m.state_bytes() as f64 / GB), "3517.6");
        assert_eq!(
            m.activation_bytes_per_token(),
            126 * 2 * (16384 + 2 * 53248)
        );
    }

    #[test]
    fn gpus_needed_for_xxl() {
        let m = Model::XXL;
        assert_eq!(devices_needed(m.state_bytes(), device_bytes(80.0)), 44);
    }

    #[test]
    fn fsdp_hand_example() {
        // 100 GB of state, 15 GB of activations, 40 GB devices: 100/N + 15 ≤ 40 ⇔ N ≥ 4.
        let (s, a, d) = (100 * 10u128.pow(9), 15 * 10u128.pow(9), device_bytes(40.0));
        assert_eq!(min_fsdp(s, a, d), Some(4));
        assert_eq!(fsdp_per_device(s, a, 4), 40e9);
        assert!(fsdp_per_device(s, a, 3) > 40e9);
        // One byte more state no longer fits on 4.
        assert_eq!(min_fsdp(s + 1, a, d), Some(5));
        // Activations that fill the device: no N fits.
        assert_eq!(min_fsdp(s, d, d), None);
        // Half the activations sharded: (100 + 7.5) / (40 − 7.5) = 3.3 → 4; with 50 GB
        // of activations (25 unsharded): (100 + 25) / (40 − 25) = 8.33 → 9.
        assert_eq!(min_fsdp_half_act(s, a, d), Some(4));
        assert_eq!(min_fsdp_half_act(s, 50 * 10u128.pow(9), d), Some(9));
        // XXL, no activations, 95 GB: ⌈3517.578 / 95⌉ = 38.
        assert_eq!(
            min_fsdp(Model::XXL.state_bytes(), 0, device_bytes(95.0)),
            Some(38)
        );
    }

    #[test]
    fn bucket_hand_example() {
        // s = 400 MB, o = 1 ms, w = 100 GB/s: s·o·w = 4e16, s_b* = 2e8 B;
        // T = (4e8 + 2e8) / 1e11 + 4e8·1e-3 / 2e8 = 0.006 + 0.002 = 0.008 s.
        let (sb, t) = bucket_optimum(4e8, 1e11, 1e-3);
        assert!((sb - 2e8).abs() < 1e-3);
        assert!((t - 0.008).abs() < 1e-12);
        for other in [1e8, 1.9e8, 2.1e8, 4e8] {
            assert!(bucket_time(4e8, 1e11, 1e-3, other) > t);
        }
    }

    #[test]
    fn tpu_mesh_bound() {
        let hw = hardware("tpu-v5p").unwrap();
        let b = mesh_bound(&hw, 53248, 16, 4);
        // α = 4.6e14 / 1.8e11 = 2555.6; α² / (2·1·53248) = 61.33.
        assert!((b.alpha - 2555.555).abs() < 1e-2);
        assert!((b.per_device_threshold - 61.33).abs() < 1e-2);
        assert_eq!((b.devices, b.per_device_min, b.global_min), (64, 62, 3968));
        // Fixed X = 16, Y = 4: α / (M_X·Y) = 319.4 → 320; F > 4α = 10222 holds.
        assert_eq!(b.fixed_per_device_min, 320);
        assert!(b.fixed_tp_ok);
        assert!(hardware("a100").is_none());
    }
}
