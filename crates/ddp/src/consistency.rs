//! Before training: every rank must hold the same model and options, and start from rank
//! 0's weights (PyTorch DDP's `_verify_param_shape_across_processes` and initial broadcast).

use crate::error::{DdpError, Result};
use candle_core::{DType, Device, Tensor};
use comm::Communicator;
use seam::StagedModel;

/// What must agree across ranks, as numbers (so one all-gather compares them).
const FIELDS: [&str; 8] = [
    "options valid",
    "parameter count",
    "element count",
    "parameter shapes",
    "stage count",
    "strategy",
    "gradient dtype",
    "gradient options (sum_micro_batches, find_unused_parameters, split, tail_stages / DDP_TAIL_STAGES, late_gathers / DDP_SPLIT_LATE_STAGES, last_bucket_mb / DDP_LAST_BUCKET_MB, gather_rows / DDP_ROWS)",
];

/// FNV-1a over names and shapes, folded to 48 bits so f64 carries it exactly.
fn shape_hash(model: &dyn StagedModel) -> f64 {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    };
    let p = model.params();
    for (name, v) in p.names().iter().zip(p.vars()) {
        eat(name.as_bytes());
        for d in v.dims() {
            eat(&(*d as u64).to_le_bytes());
        }
    }
    (h & ((1 << 48) - 1)) as f64
}

/// Fails on every rank, naming the first rank and field that differ from rank 0. `local`
/// is this rank's own check of its options: a rank whose check failed returns that error,
/// every other rank an error naming it; when every rank agrees, `local`'s value.
pub fn check_same_everywhere<T>(
    comm: &dyn Communicator,
    model: &dyn StagedModel,
    device: &Device,
    strategy_code: f64,
    grad_dtype: Option<DType>,
    grad_options: f64,
    local: Result<T>,
) -> Result<T> {
    let p = model.params();
    let dtype_code = match grad_dtype {
        None => 0.0,
        Some(DType::BF16) => 1.0,
        Some(DType::F16) => 2.0,
        Some(d) => 3.0 + d.size_in_bytes() as f64,
    };
    let valid = local.is_ok();
    let mine = [
        if valid { 1.0 } else { 0.0 },
        p.len() as f64,
        p.numel() as f64,
        shape_hash(model),
        model.num_stages() as f64,
        if valid { strategy_code } else { 0.0 },
        dtype_code,
        grad_options,
    ];
    let w = comm.world_size();
    let input = Tensor::new(&mine[..], device)?;
    let output = Tensor::zeros(w * FIELDS.len(), DType::F64, device)?;
    comm.all_gather(&input, &output)?;
    let all: Vec<f64> = output.to_device(&Device::Cpu)?.to_vec1()?;
    let value = local?;
    if let Some(r) = (0..w).find(|&r| all[r * FIELDS.len()] != 1.0) {
        return Err(DdpError::Mismatch(format!(
            "rank {r}'s DDP options are invalid (rank {r} reports why; seen on rank {})",
            comm.rank()
        )));
    }
    let rank0 = &all[..FIELDS.len()];
    for r in 1..w {
        let other = &all[r * FIELDS.len()..(r + 1) * FIELDS.len()];
        if let Some(f) = (0..FIELDS.len()).find(|&f| other[f] != rank0[f]) {
            if f == 3 {
                // Every rank sees the same table, so every rank takes this branch: name
                // the first parameter that differs.
                let shapes: Vec<Vec<usize>> = p.vars().iter().map(|v| v.dims().to_vec()).collect();
                check_params_match(comm, device, "DDP", Some(p.names()), &shapes)?;
            }
            let detail = match f {
                1 | 2 | 4 => format!(
                    "rank {r} has {} {} but rank 0 has {}",
                    FIELDS[f], other[f], rank0[f]
                ),
                _ => format!("rank {r}'s {} differs from rank 0's", FIELDS[f]),
            };
            return Err(DdpError::Mismatch(format!(
                "{detail} (seen on rank {}); every rank must build the same model with the same DDP options",
                comm.rank()
            )));
        }
    }
    Ok(value)
}

/// FNV-1a of one parameter's name (if any) and shape, folded to 48 bits (exact in f64).
fn param_hash(name: Option<&str>, dims: &[usize]) -> f64 {
    let mut h: u64 = 0xcbf29ce484222325;
    let bytes = name
        .unwrap_or("")
        .bytes()
        .chain(dims.iter().flat_map(|d| (*d as u64).to_le_bytes()));
    for b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    (h & ((1 << 48) - 1)) as f64
}

/// Every rank must list the same parameters in the same order: after the counts agree,
/// one all-gather of a hash per parameter (its name when `names` is given, and its shape)
/// names the first parameter and rank that differ from rank 0, on every rank. `what`
/// names the caller ("Zero1", "ShardedOptimizer group 1").
pub fn check_params_match(
    comm: &dyn Communicator,
    device: &Device,
    what: &str,
    names: Option<&[String]>,
    shapes: &[Vec<usize>],
) -> Result<()> {
    let w = comm.world_size();
    let counts = Tensor::new(&[shapes.len() as f64][..], device)?;
    let all_counts = Tensor::zeros(w, DType::F64, device)?;
    comm.all_gather(&counts, &all_counts)?;
    let all_counts: Vec<f64> = all_counts.to_device(&Device::Cpu)?.to_vec1()?;
    if let Some(r) = (1..w).find(|&r| all_counts[r] != all_counts[0]) {
        return Err(DdpError::Mismatch(format!(
            "{what}: rank {r} has {} parameters, rank 0 {} (seen on rank {})",
            all_counts[r],
            all_counts[0],
            comm.rank()
        )));
    }
    let n = shapes.len();
    let mine: Vec<f64> = (0..n)
        .map(|i| param_hash(names.map(|v| v[i].as_str()), &shapes[i]))
        .collect();
    let all = Tensor::zeros(w * n, DType::F64, device)?;
    comm.all_gather(&Tensor::new(&mine[..], device)?, &all)?;
    let all: Vec<f64> = all.to_device(&Device::Cpu)?.to_vec1()?;
    for r in 1..w {
        if let Some(i) = (0..n).find(|&i| all[r * n + i] != all[i]) {
            let here = match names {
                Some(v) => format!("{} {:?}", v[i], shapes[i]),
                None => format!("of shape {:?}", shapes[i]),
            };
            return Err(DdpError::Mismatch(format!(
                "{what}: parameter {i} (on rank {}: {here}) differs between rank 0 and rank {r} (name or shape); every rank must list the same parameters in the same order",
                comm.rank()
            )));
        }
    }
    Ok(())
}

/// Overwrites every parameter with rank 0's value.
pub fn broadcast_params(comm: &dyn Communicator, model: &dyn StagedModel) -> Result<()> {
    for v in model.params().vars() {
        comm.broadcast(v.as_tensor(), 0)?;
    }
    Ok(())
}
