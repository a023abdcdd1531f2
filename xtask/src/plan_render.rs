//! Output of `cargo xtask plan`: every formula with its numbers substituted (text), or
//! one JSON object with all results (`--json`).

use crate::plan::Inputs;
use crate::plan_math::{
    bucket_optimum, device_bytes, devices_needed, fsdp_per_device, mesh_bound, min_fsdp,
    min_fsdp_half_act, GB,
};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// 219848638464 → "219,848,638,464".
pub fn group(n: u128) -> String {
    let s = n.to_string();
    let first = match s.len() % 3 {
        0 => 3,
        r => r,
    };
    let mut out = s[..first].to_string();
    for chunk in s.as_bytes()[first..].chunks(3) {
        out.push(',');
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
    }
    out
}

/// `x` with `dec` decimals and thousands separators: 3517.578 → "3,517.6".
pub fn num(x: f64, dec: usize) -> String {
    let s = format!("{:.*}", dec, x.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let sign = if x < 0.0 { "-" } else { "" };
    let int = group(int.parse().unwrap_or(0));
    if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    }
}

/// Bytes in GB (1e9) with one decimal.
pub fn gb(bytes: f64) -> String {
    num(bytes / GB, 1)
}

/// The human-readable plan.
pub fn text(i: &Inputs) -> String {
    let m = i.model;
    let (p, state) = (m.parameters(), m.state_bytes());
    let act = m.activation_bytes(i.tokens);
    let (sf, af) = (state as f64, act as f64);
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(w, "Communication/memory accounting (CS336 assignment 2); model from {}: d_model = {}, d_ff = {}, num_blocks = {}", i.model_source, group(m.d_model.into()), group(m.d_ff.into()), group(m.num_blocks.into()));
    let _ = writeln!(w, "Each block: two FFN matrices (d_model×d_ff, d_ff×d_model); attention and other weights ignored. GB = 1e9 bytes.\n");

    let _ = writeln!(w, "Parameters");
    let _ = writeln!(
        w,
        "  P = num_blocks · 2 · d_ff · d_model = {} · 2 · {} · {} = {}\n",
        m.num_blocks,
        group(m.d_ff.into()),
        group(m.d_model.into()),
        group(p)
    );

    let _ = writeln!(w, "FP32 master weights + gradients + Adam m and v");
    let _ = writeln!(
        w,
        "  M_state = 4 copies · 4 B · P = 16 · {} B = {} B = {} GB",
        group(p),
        group(state),
        gb(sf)
    );
    let _ = writeln!(w, "  (each copy 4 · P B = {} GB)\n", gb(sf / 4.0));

    let _ = writeln!(
        w,
        "BF16 activations saved for backward, batch B = {} tokens",
        group(i.tokens.into())
    );
    let _ = writeln!(w, "  per block the FFN saves its input (B·d_model), the first matmul's output (B·d_ff) and the activation's output (B·d_ff), 2 B each");
    let _ = writeln!(w, "  M_act = num_blocks · 2 B · B · (d_model + 2·d_ff) = {} · 2 · {} · ({} + 2·{}) B = {} B = {} GB", m.num_blocks, group(i.tokens.into()), group(m.d_model.into()), group(m.d_ff.into()), group(act), gb(af));
    let _ = writeln!(
        w,
        "  (= {} B per token)\n",
        group(m.activation_bytes_per_token())
    );

    let g = device_bytes(i.gpu_gb);
    let _ = writeln!(w, "{} GB GPUs needed", num(i.gpu_gb, 0));
    let _ = writeln!(
        w,
        "  weights + grads + optimizer:   ⌈{} / {}⌉ = {}",
        gb(sf),
        num(i.gpu_gb, 0),
        devices_needed(state, g)
    );
    let _ = writeln!(
        w,
        "  ... + activations:             ⌈({} + {}) / {}⌉ = {}\n",
        gb(sf),
        gb(af),
        num(i.gpu_gb, 0),
        devices_needed(state + act, g)
    );

    let d = device_bytes(i.device_gb);
    let _ = writeln!(w, "FSDP over N_FSDP devices (weights, grads, optimizer state sharded; activations not); device memory {} GB (--device-gb; the assignment's TPU v5p has 95 GB)", num(i.device_gb, 1));
    let _ = writeln!(
        w,
        "  M_dev(N_FSDP) = M_state / N_FSDP + M_act = {} GB / N_FSDP + {} GB",
        gb(sf),
        gb(af)
    );
    match min_fsdp(state, act, d) {
        Some(n) => {
            let _ = writeln!(w, "  smallest N_FSDP with M_dev ≤ {} GB: ⌈M_state / (M_device − M_act)⌉ = ⌈{} / ({} − {})⌉ = {}  (M_dev = {} GB)", num(i.device_gb, 1), gb(sf), num(i.device_gb, 1), gb(af), n, gb(fsdp_per_device(state, act, n)));
        }
        None => {
            let _ = writeln!(w, "  no N_FSDP fits: the unsharded activations ({} GB) alone fill a {} GB device; lower --tokens", gb(af), num(i.device_gb, 1));
        }
    }
    if let Some(n) = min_fsdp_half_act(state, act, d) {
        let _ = writeln!(w, "  variant with half the activations sharded too (assignment (b), every second layer): M_state/N + M_act/2 + M_act/(2N) ≤ M_device ⇒ N_FSDP = {n}");
    }
    let _ = writeln!(w);

    let h = &i.hw;
    let b = mesh_bound(h, m.d_ff, i.fsdp, i.tp);
    let _ = writeln!(w, "Compute-bound batch of an FSDP × TP mesh (scaling book, Transformer training chapter), hardware {}", h.name);
    let _ = writeln!(w, "  numbers used: {}", h.source);
    if !i.hw_overrides.is_empty() {
        let _ = writeln!(w, "  overridden by flags: {}", i.hw_overrides.join(", "));
    }
    let _ = writeln!(w, "  C = {:.3e} FLOP/s, W = {:.3e} B/s, M_X = {}, M_Y = {}, X = {} (FSDP), Y = {} (TP), N = X·Y = {}", h.flops, h.bandwidth, h.m_x, h.m_y, i.fsdp, i.tp, b.devices);
    let _ = writeln!(
        w,
        "  per layer: T_math = 4·B·D·F/(N·C), T_FSDP = 4·D·F/(Y·W·M_X), T_TP = 4·B·D/(X·W·M_Y)"
    );
    let _ = writeln!(w, "  the best X* = sqrt(B·N·M_X/(F·M_Y)) equalises T_FSDP and T_TP; then T_math > T_comms ⇔ B/N > α²/(M_X·M_Y·F), α = C/W");
    let _ = writeln!(
        w,
        "  α = {:.3e} / {:.3e} = {};  α²/(M_X·M_Y·F) = {}² / ({} · {} · {}) = {} tokens",
        h.flops,
        h.bandwidth,
        num(b.alpha, 1),
        num(b.alpha, 1),
        h.m_x,
        h.m_y,
        group(m.d_ff.into()),
        num(b.per_device_threshold, 1)
    );
    let _ = writeln!(w, "  ⇒ compute-bound from a per-device batch of {} tokens; global batch {} · {} = {} tokens (needs X ≈ X* = {:.1})", b.per_device_min, b.per_device_min, b.devices, group(b.global_min.into()), b.best_x_at_min);
    let _ = writeln!(w, "  with the mesh fixed at X = {}, Y = {}: T_math > T_FSDP ⇔ B/N > α/(M_X·Y) = {} ⇒ {} tokens per device ({} global);", i.fsdp, i.tp, num(b.fixed_fsdp_threshold, 1), b.fixed_per_device_min, group(b.fixed_per_device_min.saturating_mul(b.devices).into()));
    let _ = writeln!(
        w,
        "    T_math > T_TP ⇔ F > α·Y/M_Y = {} (F = {}: {})",
        num(b.fixed_tp_f_needed, 0),
        group(m.d_ff.into()),
        if b.fixed_tp_ok {
            "holds"
        } else {
            "fails: TP-bound at any batch"
        }
    );

    if let Some((s, bw, ov)) = i.ddp {
        let (sb, t) = bucket_optimum(s, bw, ov);
        let _ = writeln!(
            w,
            "\nDDP bucket size for s = {} B, w = {:.3e} B/s, o = {:.3e} s",
            num(s, 0),
            bw,
            ov
        );
        let _ = writeln!(
            w,
            "  T(s_b) = (s + s_b)/w + s·o/s_b;  dT/ds_b = 0 ⇒ s_b* = sqrt(s·o·w) = {} B ({} MB)",
            num(sb, 0),
            num(sb / 1e6, 1)
        );
        let _ = writeln!(w, "  T(s_b*) = s/w + 2·sqrt(s·o/w) = {:.6} s", t);
    }
    o
}

/// All results as one JSON object.
pub fn json(i: &Inputs) -> Value {
    let m = i.model;
    let (state, act) = (m.state_bytes(), m.activation_bytes(i.tokens));
    let (g, d) = (device_bytes(i.gpu_gb), device_bytes(i.device_gb));
    let n = min_fsdp(state, act, d);
    let h = &i.hw;
    let b = mesh_bound(h, m.d_ff, i.fsdp, i.tp);
    let mut v = json!({
        "model": {"d_model": m.d_model, "d_ff": m.d_ff, "num_blocks": m.num_blocks, "source": i.model_source},
        "parameters": m.parameters() as u64,
        "state": {"bytes": state as u64, "gb": state as f64 / GB, "formula": "16 * P (fp32 weights, grads, Adam m, v)"},
        "activations": {"tokens": i.tokens, "bytes_per_token": m.activation_bytes_per_token() as u64,
            "bytes": act as u64, "gb": act as f64 / GB, "formula": "num_blocks * 2 * B * (d_model + 2*d_ff)"},
        "gpus": {"gpu_gb": i.gpu_gb, "state_only": devices_needed(state, g) as u64,
            "with_activations": devices_needed(state + act, g) as u64},
        "fsdp": {"device_gb": i.device_gb, "min_n_fsdp": n.map(|x| x as u64),
            "per_device_gb_at_min": n.map(|x| fsdp_per_device(state, act, x) / GB),
            "min_n_fsdp_half_activations_sharded": min_fsdp_half_act(state, act, d).map(|x| x as u64)},
        "mesh": {"hardware": h.name, "flops": h.flops, "bandwidth": h.bandwidth, "m_x": h.m_x, "m_y": h.m_y,
            "overrides": i.hw_overrides, "x_fsdp": i.fsdp, "y_tp": i.tp, "devices": b.devices, "alpha": b.alpha,
            "per_device_threshold": b.per_device_threshold, "per_device_min": b.per_device_min,
            "global_min": b.global_min, "best_x_at_min": b.best_x_at_min,
            "fixed_mesh_per_device_threshold": b.fixed_fsdp_threshold,
            "fixed_mesh_per_device_min": b.fixed_per_device_min,
            "fixed_mesh_tp_f_needed": b.fixed_tp_f_needed, "fixed_mesh_tp_ok": b.fixed_tp_ok},
    });
    if let Some((s, w, o)) = i.ddp {
        let (sb, t) = bucket_optimum(s, w, o);
        v["ddp_bucket"] = json!({"s_bytes": s, "w": w, "o": o, "bucket_bytes": sb, "time_s": t});
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_math::{hardware, Model};

    fn xxl() -> Inputs {
        Inputs {
            model: Model::XXL,
            model_source: "test".into(),
            tokens: 2048,
            gpu_gb: 80.0,
            device_gb: 95.0,
            hw: hardware("tpu-v5p").unwrap(),
            hw_overrides: vec![],
            fsdp: 16,
            tp: 4,
            ddp: Some((4e8, 1e11, 1e-3)),
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(group(219_848_638_464), "219,848,638,464");
        assert_eq!(group(5), "5");
        assert_eq!(num(3517.578, 1), "3,517.6");
        assert_eq!(num(-1234.5, 0), "-1,234");
        assert_eq!(gb(3_517_578_215_424.0), "3,517.6");
    }

    #[test]
    fn xxl_text_and_json() {
        let t = text(&xxl());
        assert!(t.contains("= 219,848,638,464\n"), "{t}");
        assert!(t.contains("= 3,517.6 GB"), "{t}");
        assert!(t.contains("s_b* = sqrt(s·o·w) = 200,000,000 B"), "{t}");
        let v = json(&xxl());
        assert_eq!(v["parameters"], 219_848_638_464u64);
        assert_eq!(v["state"]["bytes"], 3_517_578_215_424u64);
        assert_eq!(v["gpus"]["state_only"], 44);
        assert_eq!(v["mesh"]["per_device_min"], 62);
        assert!((v["ddp_bucket"]["bucket_bytes"].as_f64().unwrap() - 2e8).abs() < 1.0);
    }
}
