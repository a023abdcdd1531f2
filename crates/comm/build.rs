//! Compiles kernels/cast.cu (the mixed-precision gathers' casts) and kernels/sum.cu (the
//! copy-engine reduce-scatters' adds) to PTX under the `cuda` feature (the shared step:
//! crates/seam/cuda_ptx.rs).

#[path = "../seam/cuda_ptx.rs"]
mod cuda_ptx;

fn main() {
    cuda_ptx::compile(&["cast", "sum"]);
}
