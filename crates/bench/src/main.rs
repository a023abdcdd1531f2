//! `bench`: the project's benchmarks and report writer.
//!
//!   bench allreduce --backend nccl --ranks 2,4,6,8   (spawns one process per GPU per rank count)
//!   bench allreduce --backend cpu  --ranks 2,4       (in-process threads)
//!   bench ddp --backend nccl --ranks 2 --size xl --dtype fp32,bf16   (one process per GPU)
//!   bench zero1 --backend nccl --ranks 2 --size xl   (DDP vs ShardedOptimizer vs Zero1)
//!   bench zero1-check --backend nccl --ranks 2       (checkpoint save/resume, tiny LM)
//!   comm-launch --nproc-per-node 4 -- bench zero1-check --backend cpu   (CPU processes)
//!   bench ddp-check --backend nccl --ranks 2 --model tiny   (DDP against one process)
//!   bench contention --size xl --dtype bf16 --phase forward --hog-sms 0,16 --sm-carveout 0,16
//!   bench adamw --size xl                            (AdamW's update alone, GPU 0)
//!   bench slowdown --base trace-xl-fp32-naive.json trace-xl-fp32-bucketed-1.json ...
//!   bench report --results out/results.jsonl --torch out/torch.jsonl --out report/
//!                [--isoflops data/isoflops_curves.json]

mod accumcheck;
mod adamw;
#[cfg(feature = "cuda")]
mod adamwcheck;
mod allreduce;
mod allreduce_run;
mod budget;
mod cli;
mod cmd;
mod contention;
mod ddp;
mod ddp_check;
mod ddp_record;
mod gemmcheck;
mod gradnorm;
mod graph_reuse;
mod graphcheck;
mod group;
use seam::memory;
mod modelcheck;
mod profile;
mod records;
mod report;
mod rmsnorm;
mod scatter;
mod single;
mod single_record;
mod single_step;
mod slowdown;
mod step_timing;
mod telemetry;
mod timer;
mod topology;
mod trace;
mod zero1;
mod zero1_check;

use anyhow::{bail, Context, Result};
use candle_core::Device;
use clap::Parser;
use cli::{BackendArg, Cli, Cmd};

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("bench: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(mut cli: Cli) -> Result<()> {
    // --threads is the in-process CPU backend.
    if let Cmd::Allreduce(a) = &mut cli.cmd {
        if a.threads && a.backend == BackendArg::Auto {
            a.backend = BackendArg::Cpu;
        }
    }
    if let Some(b) = cli.cmd.backend_mut() {
        *b = b.resolve();
    }
    match cli.cmd {
        Cmd::Allreduce(a) => allreduce_run::run(a),
        Cmd::Single {
            size,
            dtype: cmd::Dtypes { dtype },
            mode,
            warmup,
            steps,
            batch,
            cpu,
            tf32,
            step: flags,
            gemm_choices,
            save_gemm_choices,
            out,
        } => {
            let cpu = cli::on_cpu(cpu);
            let what = match flags.vocab {
                Some(v) => format!("--batch {batch} --vocab {v}"),
                None => format!("--batch {batch}"),
            };
            budget::ensure_lm(&what, !cpu, 1, &size, &dtype, batch, flags.vocab)?;
            model::tf32::set_tf32(tf32 && !cpu);
            let device = if cpu {
                Device::Cpu
            } else {
                comm::nccl::cuda_device(0).context("GPU 0")?
            };
            let save = save_gemm_choices.as_deref();
            single_step::gemm_table_in(gemm_choices.as_deref(), save, &device)?;
            let out = records::Out::open(&out)?;
            let gpu_peak = seam::device::name(&device)?.and_then(|n| model::plan::peak::of(&n));
            println!("{}", single::header());
            for s in &size {
                for &d in &dtype {
                    // The GPU's dense peak (memplan::peak; none for a GPU not in it), TFLOP/s:
                    // fp32 (no tensor cores), TF32 and bf16 tensor cores.
                    let peak = gpu_peak.map(|p| match d {
                        single::Precision::Fp32 if tf32 => p.tf32 / 1e12,
                        single::Precision::Fp32 => p.fp32 / 1e12,
                        single::Precision::Bf16 => p.bf16 / 1e12,
                    });
                    let r = if mode == single::Mode::Step {
                        single_step::run(s, d, warmup, steps, batch, &device, peak, flags)?
                    } else {
                        let (g, v) = (flags.graph, flags.vocab);
                        single::run(s, d, mode, warmup, steps, batch, &device, peak, g, v)?
                    };
                    println!("{}", single::row(&r));
                    out.append(&r)?;
                }
            }
            single_step::gemm_table_out(save, &device)
        }
        Cmd::Ddp {
            backend,
            ranks,
            size,
            dtype: cmd::Dtypes { dtype },
            strategies,
            buckets_mb,
            warmup,
            steps,
            batch,
            grads,
            sm_carveout,
            coalesce,
            trace_dir,
            graph,
            clip,
            out,
        } => {
            let nccl = matches!(backend, BackendArg::Nccl);
            if trace_dir.is_some() && !nccl {
                bail!("--trace-dir: tracing needs CUDA events (--backend nccl)");
            }
            let flags = format!("--ranks {ranks} × --batch {batch}");
            budget::ensure_lm(&flags, nccl, ranks, &size, &dtype, batch, None)?;
            let out = records::Out::open(&out)?;
            if let Some(d) = &trace_dir {
                records::ensure_dir(d, "--trace-dir")?;
            }
            let cfg = ddp::DdpBenchConfig {
                sizes: size,
                dtypes: dtype,
                strategies: ddp::strategies(&strategies, &buckets_mb)?,
                warmup,
                steps,
                batch,
                grads,
                sm_carveouts: sm_carveout,
                coalesce,
                trace_dir,
                graph,
                clip,
            };
            ddp::run(nccl, ranks, &cfg, &out)
        }
        Cmd::Zero1 {
            backend,
            ranks,
            size,
            dtype: cmd::Dtypes { dtype },
            modes,
            bucket_mb,
            sm_carveout,
            coalesce,
            warmup,
            steps,
            batch,
            graph,
            out,
        } => {
            let nccl = matches!(backend, BackendArg::Nccl);
            let flags = format!("--ranks {ranks} × --batch {batch}");
            budget::ensure_lm(
                &flags,
                nccl,
                ranks,
                std::slice::from_ref(&size),
                &dtype,
                batch,
                None,
            )?;
            let out = records::Out::open(&out)?;
            let cfg = zero1::ZeroBenchConfig {
                size,
                dtypes: dtype,
                modes,
                bucket_mb,
                sm_carveout,
                coalesce,
                warmup,
                steps,
                batch,
                graph,
            };
            zero1::run(nccl, ranks, &cfg, &out)
        }
        Cmd::Zero1Check {
            backend,
            ranks,
            steps,
            save_at,
            global_batch,
            dir,
            tol,
        } => {
            let cfg = zero1_check::CheckConfig {
                steps,
                save_at,
                global_batch,
                dir,
                tol,
            };
            group::run(
                backend == BackendArg::Nccl,
                ranks,
                "zero1-check",
                None,
                |r| zero1_check::run_rank(r.comm, &r.device, &cfg),
            )
        }
        Cmd::DdpCheck(a) => {
            a.validate()?;
            let nccl = a.backend == BackendArg::Nccl;
            group::run(nccl, a.ranks, "ddp-check", None, |r| {
                ddp_check::run_rank(&a, r.comm, &r.device)
            })
        }
        Cmd::ModelCheck => modelcheck::print_all(),
        Cmd::Profile {
            size,
            dtype: cmd::Dtypes { dtype },
            mode,
            context,
            out,
            svg_dir,
            cpu,
        } => {
            let out = records::Out::open(&out)?;
            records::ensure_dir(&svg_dir, "--svg-dir")?;
            let dev = if cli::on_cpu(cpu) {
                Device::Cpu
            } else {
                comm::nccl::cuda_device(0).context("GPU 0")?
            };
            for s in &size {
                for &d in &dtype {
                    for m in &mode {
                        let step = match m.as_str() {
                            "step" => true,
                            "fwd" => false,
                            other => bail!("--mode: {other:?} is not fwd or step"),
                        };
                        profile::run(s, d, step, context, &dev, &out, &svg_dir)?;
                    }
                }
            }
            Ok(())
        }
        Cmd::Adamw { size, iters, out } => adamw::main(&size, iters, &out),
        Cmd::Gradnorm {
            size,
            dtype,
            iters,
            out,
        } => gradnorm::main(&size, dtype == single::Precision::Bf16, iters, &out),
        Cmd::Rmsnorm { rows, iters, out } => {
            // The widest case (8192 columns): input, output, gradients, about 5 f32 copies.
            let need = (rows as u64).checked_mul(8192 * 4 * 5);
            budget::ensure(&format!("--rows {rows}"), need, budget::Mem::Gpu)?;
            let out = records::Out::open(&out)?;
            let gpu = Device::new_cuda(0).context("the RMSNorm benchmark needs GPU 0")?;
            println!(
                "{:>6} {:>10} {:>10} {:>12}",
                "cols", "variant", "fwd(ms)", "fwd+bwd(ms)"
            );
            for (cols, name, fwd, both) in rmsnorm::run(&gpu, rows, iters)? {
                println!("{cols:>6} {name:>10} {fwd:>10.3} {both:>12.3}");
                let rec = serde_json::json!({
                    "bench": "rmsnorm", "rows": rows, "cols": cols, "variant": name,
                    "iters": iters, "fwd_ms": fwd, "fwd_bwd_ms": both,
                });
                out.append(&rec)?;
            }
            Ok(())
        }
        Cmd::Contention {
            size,
            dtype: cmd::Dtypes { dtype },
            hog,
            hog_sms,
            sm_carveout,
            phase,
            hog_share,
            warmup,
            steps,
            batch,
            out,
        } => {
            let flags = format!("--batch {batch}");
            budget::ensure_lm(&flags, true, 1, &size, &dtype, batch, None)?;
            let out = records::Out::open(&out)?;
            let device = comm::nccl::cuda_device(0).context("GPU 0")?;
            println!("{}", contention::header());
            for s in &size {
                for &d in &dtype {
                    let cfg = contention::Config {
                        size: s,
                        dtype: d,
                        hogs: &hog,
                        hog_sms: &hog_sms,
                        carveouts: &sm_carveout,
                        phase,
                        hog_share,
                        warmup,
                        steps,
                        batch,
                    };
                    for r in contention::run(&device, &cfg)? {
                        println!("{}", contention::row(&r));
                        out.append(&r)?;
                    }
                }
            }
            Ok(())
        }
        Cmd::Slowdown { base, traces } => {
            let b = slowdown::load(&base)?;
            println!("{}", slowdown::header());
            for t in &traces {
                let name = t.file_name().unwrap_or_default().to_string_lossy();
                let d = slowdown::breakdown(&b, &slowdown::load(t)?)
                    .with_context(|| format!("{} against {}", t.display(), base.display()))?;
                println!("{}", slowdown::row(&name, &d));
            }
            Ok(())
        }
        Cmd::Report {
            results,
            torch,
            out,
            isoflops,
        } => {
            let isoflops = report::resolve_isoflops(&isoflops);
            let skipped = report::write_report(&results, torch.as_deref(), &isoflops, &out)?;
            for s in skipped.iter().take(1000) {
                eprintln!("bench report: warning: skipped {s}");
            }
            if skipped.len() > 1000 {
                eprintln!("bench report: warning: … and {} more", skipped.len() - 1000);
            }
            println!("wrote {}", out.join("report.md").display());
            if !skipped.is_empty() {
                println!(
                    "{} input lines skipped (listed on stderr and in the report)",
                    skipped.len()
                );
            }
            Ok(())
        }
    }
}
