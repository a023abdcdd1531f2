//! Compiles kernels/{adamw,gradnorm,accum,memset}.cu to PTX under the `cuda` feature (the
//! shared step: crates/seam/cuda_ptx.rs).

#[path = "cuda_ptx.rs"]
mod cuda_ptx;

fn main() {
    cuda_ptx::compile(&["adamw", "gradnorm", "accum", "memset"]);
}
