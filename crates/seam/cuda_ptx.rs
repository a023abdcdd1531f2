//! With the `cuda` feature, compiles kernels/*.cu to PTX with the CUDA 13.0 nvcc
//! (`cargo xtask toolchain` installs it; CUDA_ROOT points at it) for CUDA_COMPUTE_CAP
//! (default 90). The PTX is embedded and JIT-compiled by the driver at first use.
//! Shared by the build scripts of seam (kernels/adamw.cu), model (kernels/fused.cu) and
//! comm (kernels/cast.cu),
//! which include this file with `#[path]` and pass their kernel names.

use std::path::PathBuf;
use std::process::Command;

/// Compiles each of `kernels` (sources under kernels/) to `$OUT_DIR/<name>.ptx`.
pub fn compile(kernels: &[&str]) {
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-env-changed=CUDA_ROOT");
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let nvcc = std::env::var("CUDA_ROOT")
        .map(|r| PathBuf::from(r).join("bin/nvcc"))
        .unwrap_or_else(|_| PathBuf::from("nvcc"));
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "90".into());
    for name in kernels {
        let src = format!("kernels/{name}.cu");
        let ptx = out.join(format!("{name}.ptx"));
        let st = Command::new(&nvcc)
            .args(["--ptx", "-O3", &format!("-arch=sm_{cap}"), "-o"])
            .arg(&ptx)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} ({e}): run `cargo xtask toolchain` and export its environment",
                    nvcc.display()
                )
            });
        assert!(st.success(), "nvcc failed on {src}");
    }
}
