//! `cargo xtask plan`: the communication/memory accounting calculator (CS336 assignment 2,
//! "communication_accounting"); with `--model SIZE`, the memory plan per data-parallel
//! strategy of the project's LM instead (`plan_model`). Reads the model from flags or `--config file.json`
//! (defaults: the seeds' XXL), validates every input naming the flag or field at fault,
//! and prints each formula with its numbers (`plan_render`), or one JSON object (`--json`).

use crate::plan_math::{hardware, Hardware, Model, HARDWARE};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// JSON file with d_model, d_ff and num_blocks (or num_layers); other fields are
    /// ignored and flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Model width [default: 16384, XXL].
    #[arg(long, allow_negative_numbers = true)]
    pub d_model: Option<i64>,
    /// FFN width [default: 53248, XXL].
    #[arg(long, allow_negative_numbers = true)]
    pub d_ff: Option<i64>,
    /// Transformer blocks [default: 126, XXL].
    #[arg(long, allow_negative_numbers = true)]
    pub num_blocks: Option<i64>,
    /// Batch B in tokens whose activations are saved for backward (one 2,048-token sequence).
    #[arg(long, default_value_t = 2048, allow_negative_numbers = true)]
    pub tokens: i64,
    /// Memory of the GPUs counted in "how many GPUs" (GB = 1e9 bytes).
    #[arg(long, default_value_t = 80.0, allow_negative_numbers = true)]
    pub gpu_gb: f64,
    /// Device memory the FSDP shards must fit (the assignment's TPU v5p: 95 GB).
    #[arg(long, default_value_t = 95.0, allow_negative_numbers = true)]
    pub device_gb: f64,
    /// Hardware preset of the compute-bound batch: tpu-v5p, h100 or h200.
    #[arg(long, default_value = "tpu-v5p")]
    pub hardware: String,
    /// FSDP mesh axis X.
    #[arg(long, default_value_t = 16, allow_negative_numbers = true)]
    pub fsdp: i64,
    /// Tensor-parallel mesh axis Y.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true)]
    pub tp: i64,
    /// Override the preset's bf16 FLOP/s per device (C).
    #[arg(long, allow_negative_numbers = true)]
    pub flops: Option<f64>,
    /// Override the preset's link bandwidth per axis in bytes/s (W).
    #[arg(long, allow_negative_numbers = true)]
    pub bandwidth: Option<f64>,
    /// Override the preset's links per device along the FSDP axis (M_X).
    #[arg(long, allow_negative_numbers = true)]
    pub mx: Option<f64>,
    /// Override the preset's links per device along the TP axis (M_Y).
    #[arg(long, allow_negative_numbers = true)]
    pub my: Option<f64>,
    /// DDP bucket optimum: model size s in bytes (with --w and --o).
    #[arg(long, allow_negative_numbers = true)]
    pub ddp_bytes: Option<f64>,
    /// DDP bucket optimum: measured bandwidth w in bytes/s.
    #[arg(long, allow_negative_numbers = true)]
    pub w: Option<f64>,
    /// DDP bucket optimum: measured per-bucket overhead o in seconds.
    #[arg(long, allow_negative_numbers = true)]
    pub o: Option<f64>,
    /// Print all results as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub lm: crate::plan_model::LmArgs,
}

/// Validated inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub model: Model,
    /// Where the model came from ("XXL defaults", the config path, "flags").
    pub model_source: String,
    pub tokens: u64,
    pub gpu_gb: f64,
    pub device_gb: f64,
    pub hw: Hardware,
    /// Which of C, W, M_X, M_Y were overridden by flags.
    pub hw_overrides: Vec<&'static str>,
    pub fsdp: u64,
    pub tp: u64,
    /// (s, w, o) when all three DDP flags are given.
    pub ddp: Option<(f64, f64, f64)>,
}

fn pos_int(what: &str, v: i64) -> Result<u64> {
    if v <= 0 {
        bail!("{what} must be a positive integer, got {v}");
    }
    Ok(v as u64)
}

fn pos_f(what: &str, v: f64) -> Result<f64> {
    if !(v.is_finite() && v > 0.0) {
        bail!("{what} must be a finite number > 0, got {v}");
    }
    Ok(v)
}

/// The model fields of a JSON config; names the file and field on any error.
fn read_config(path: &std::path::Path) -> Result<[Option<i64>; 3]> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--config {}: cannot read", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("--config {}: not valid JSON", path.display()))?;
    let obj = v
        .as_object()
        .with_context(|| format!("--config {}: expected a JSON object", path.display()))?;
    let field = |names: &[&str]| -> Result<Option<i64>> {
        let Some((name, x)) = names.iter().find_map(|n| obj.get(*n).map(|x| (n, x))) else {
            return Ok(None);
        };
        match x.as_i64() {
            Some(i) => Ok(Some(i)),
            None => bail!(
                "--config {}: field {name} must be a positive integer, got {x}",
                path.display()
            ),
        }
    };
    Ok([
        field(&["d_model"])?,
        field(&["d_ff"])?,
        field(&["num_blocks", "num_layers"])?,
    ])
}

impl PlanArgs {
    /// Checks every input; errors name the flag or config field.
    pub fn resolve(&self) -> Result<Inputs> {
        let xxl = Model::XXL;
        let defaults = [xxl.d_model, xxl.d_ff, xxl.num_blocks].map(|x| x as i64);
        let flags = [self.d_model, self.d_ff, self.num_blocks];
        let names = ["d_model", "d_ff", "num_blocks"];
        let (vals, source) = match &self.config {
            Some(p) => {
                let cfg = read_config(p)?;
                let mut vals = [0u64; 3];
                for i in 0..3 {
                    let flag = format!("--{}", names[i].replace('_', "-"));
                    vals[i] = match (flags[i], cfg[i]) {
                        (Some(f), _) => pos_int(&flag, f)?,
                        (None, Some(c)) => {
                            pos_int(&format!("--config {}: field {}", p.display(), names[i]), c)?
                        }
                        (None, None) => bail!(
                            "--config {}: no field {} (and no {flag} flag)",
                            p.display(),
                            names[i]
                        ),
                    };
                }
                (vals, format!("config {}", p.display()))
            }
            None => {
                let mut vals = [0u64; 3];
                for i in 0..3 {
                    let flag = format!("--{}", names[i].replace('_', "-"));
                    vals[i] = pos_int(&flag, flags[i].unwrap_or(defaults[i]))?;
                }
                let src = if flags.iter().all(Option::is_none) {
                    "the seeds' XXL defaults"
                } else {
                    "flags (XXL defaults for the rest)"
                };
                (vals, src.to_string())
            }
        };
        let model = Model {
            d_model: vals[0],
            d_ff: vals[1],
            num_blocks: vals[2],
        };
        let Some(mut hw) = hardware(&self.hardware) else {
            let known: Vec<&str> = HARDWARE.iter().map(|h| h.name).collect();
            bail!(
                "--hardware: unknown '{}' (known: {})",
                self.hardware,
                known.join(", ")
            );
        };
        let mut hw_overrides = Vec::new();
        for (flag, name, v, slot) in [
            ("--flops", "C", self.flops, &mut hw.flops),
            ("--bandwidth", "W", self.bandwidth, &mut hw.bandwidth),
            ("--mx", "M_X", self.mx, &mut hw.m_x),
            ("--my", "M_Y", self.my, &mut hw.m_y),
        ] {
            if let Some(v) = v {
                *slot = pos_f(flag, v)?;
                hw_overrides.push(name);
            }
        }
        let ddp = match (self.ddp_bytes, self.w, self.o) {
            (None, None, None) => None,
            (Some(s), Some(w), Some(o)) => {
                Some((pos_f("--ddp-bytes", s)?, pos_f("--w", w)?, pos_f("--o", o)?))
            }
            _ => {
                let missing: Vec<&str> = [
                    ("--ddp-bytes", self.ddp_bytes),
                    ("--w", self.w),
                    ("--o", self.o),
                ]
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(n, _)| *n)
                .collect();
                bail!(
                    "the DDP bucket optimum needs --ddp-bytes, --w and --o together; missing {}",
                    missing.join(", ")
                )
            }
        };
        let tokens = pos_int("--tokens", self.tokens)?;
        if model.checked(tokens).is_none() {
            bail!(
                "d_model = {}, d_ff = {}, num_blocks = {}, --tokens {tokens}: the byte counts \
                 overflow 64 bits",
                model.d_model,
                model.d_ff,
                model.num_blocks
            );
        }
        let (fsdp, tp) = (pos_int("--fsdp", self.fsdp)?, pos_int("--tp", self.tp)?);
        if fsdp.checked_mul(tp).is_none_or(|n| n > 1 << 32) {
            bail!("--fsdp {fsdp} × --tp {tp}: more than 2^32 devices");
        }
        Ok(Inputs {
            model,
            model_source: source,
            tokens,
            gpu_gb: pos_f("--gpu-gb", self.gpu_gb)?,
            device_gb: pos_f("--device-gb", self.device_gb)?,
            hw,
            hw_overrides,
            fsdp,
            tp,
            ddp,
        })
    }
}

/// The measured rates `--gpu` names (H100's without it).
fn rates(gpu: Option<&str>) -> Result<memplan::time::Rates> {
    match gpu {
        None => Ok(memplan::time::Rates::h100()),
        Some(g) => memplan::time::Rates::for_gpu(g).ok_or_else(|| {
            anyhow::anyhow!("--gpu {g:?}: rates are measured for h100 and h200 only")
        }),
    }
}

/// `cargo xtask plan`.
pub fn run(args: &PlanArgs) -> Result<()> {
    if let Some((i, free)) = args.lm.resolve()? {
        match args.json {
            true => println!(
                "{}",
                serde_json::to_string_pretty(&crate::plan_model::json(&i, free))?
            ),
            false if args.lm.project => print!(
                "{}",
                memplan::time::table(
                    &rates(args.lm.gpu.as_deref())?,
                    &i.shape,
                    i.rows * i.shape.context
                )
            ),
            false => print!("{}", crate::plan_model::text(&i, free)),
        }
        return Ok(());
    }
    let inputs = args.resolve()?;
    if args.json {
        let v = crate::plan_render::json(&inputs);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", crate::plan_render::text(&inputs));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: PlanArgs,
    }

    fn parse(args: &[&str]) -> Result<Inputs> {
        let mut v = vec!["plan"];
        v.extend_from_slice(args);
        T::try_parse_from(v)?.a.resolve()
    }

    fn err(args: &[&str]) -> String {
        format!("{:#}", parse(args).expect_err("should fail"))
    }

    #[test]
    fn defaults_are_xxl_on_tpu() {
        let i = parse(&[]).unwrap();
        assert_eq!(i.model, Model::XXL);
        assert_eq!((i.tokens, i.fsdp, i.tp, i.device_gb), (2048, 16, 4, 95.0));
        assert_eq!(i.hw.name, "tpu-v5p");
        assert!(i.ddp.is_none());
    }

    #[test]
    fn bad_flags_name_the_flag() {
        assert!(err(&["--d-model", "0"]).contains("--d-model"));
        assert!(err(&["--d-ff", "-5"]).contains("--d-ff must be a positive integer, got -5"));
        assert!(err(&["--num-blocks", "-1"]).contains("--num-blocks"));
        assert!(err(&["--tokens", "0"]).contains("--tokens"));
        assert!(err(&["--device-gb", "-95"]).contains("--device-gb"));
        assert!(err(&["--gpu-gb", "0"]).contains("--gpu-gb"));
        assert!(err(&["--tp", "0"]).contains("--tp"));
        assert!(err(&["--flops", "-1"]).contains("--flops"));
        let e = err(&["--hardware", "a100"]);
        assert!(
            e.contains("--hardware: unknown 'a100'") && e.contains("h200"),
            "{e}"
        );
        let e = err(&["--ddp-bytes", "1e9", "--w", "1e10"]);
        assert!(e.contains("missing --o"), "{e}");
        assert!(err(&["--ddp-bytes", "1e9", "--w", "0", "--o", "1e-4"]).contains("--w"));
        assert!(err(&["--d-model", "abc"]).contains("--d-model"));
        let huge = i64::MAX.to_string();
        assert!(err(&["--d-model", &huge, "--d-ff", &huge]).contains("overflow"));
        assert!(err(&["--fsdp", &huge, "--tp", "4"]).contains("--fsdp"));
    }

    #[test]
    fn config_file_and_its_errors() {
        let dir = std::env::temp_dir().join(format!("xtask-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.to_string_lossy().to_string()
        };
        let good = write(
            "good.json",
            r#"{"d_model": 1024, "d_ff": 4096, "num_layers": 24, "vocab_size": 10000}"#,
        );
        let i = parse(&["--config", &good]).unwrap();
        assert_eq!(
            (i.model.d_model, i.model.d_ff, i.model.num_blocks),
            (1024, 4096, 24)
        );
        assert_eq!(i.model.parameters(), 24 * 2 * 4096 * 1024);
        // Flags override the file.
        let i = parse(&["--config", &good, "--d-ff", "2048"]).unwrap();
        assert_eq!(i.model.d_ff, 2048);

        let neg = write(
            "neg.json",
            r#"{"d_model": -1, "d_ff": 4096, "num_blocks": 2}"#,
        );
        let e = err(&["--config", &neg]);
        assert!(
            e.contains("field d_model must be a positive integer"),
            "{e}"
        );
        let frac = write(
            "frac.json",
            r#"{"d_model": 1.5, "d_ff": 4, "num_blocks": 2}"#,
        );
        assert!(err(&["--config", &frac]).contains("field d_model"));
        let missing = write("missing.json", r#"{"d_model": 8, "d_ff": 32}"#);
        assert!(err(&["--config", &missing]).contains("no field num_blocks"));
        let bad = write("bad.json", "{ not json");
        assert!(err(&["--config", &bad]).contains("not valid JSON"));
        let arr = write("arr.json", "[1, 2]");
        assert!(err(&["--config", &arr]).contains("expected a JSON object"));
        let absent = dir.join("absent.json").to_string_lossy().to_string();
        assert!(err(&["--config", &absent]).contains("cannot read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
