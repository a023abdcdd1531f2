//! The smallest complete program (README, "Use it in your own project"): a candle-nn MLP
//! trained with DDP on 2 in-process CPU ranks. On GPUs, one process per GPU gets its
//! communicator from the launcher's environment instead:
//! `let (env, comm) = comm::init_from_env(comm::Backend::Nccl, Default::default())?;`
//! (`--features cuda`) and builds the model on `comm.device()`.
//!
//!   cargo run -p ddp --example minimal

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{linear, loss::cross_entropy, VarBuilder, VarMap};
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use seam::{AdamW, AdamWConfig, Batch, ParamSet, Sequential, StagedModel};
use std::sync::Arc;

fn mlp(dev: &Device) -> seam::Result<Sequential> {
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, dev);
    let (l1, l2, l3) = (
        linear(16, 32, vb.pp("l1"))?,
        linear(32, 32, vb.pp("l2"))?,
        linear(32, 4, vb.pp("l3"))?,
    );
    Sequential::builder(ParamSet::from_varmap(&varmap)?)
        .stage("l1", move |x: &Tensor| l1.forward(x)?.gelu())
        .stage("l2", move |x: &Tensor| l2.forward(x)?.gelu())
        .stage("l3", l3)
        .loss(|logits, b| cross_entropy(logits, &b.targets))
}

fn train(comm: Arc<dyn comm::Communicator>) -> anyhow::Result<f32> {
    let (rank, world, dev) = (comm.rank(), comm.world_size(), Device::Cpu);
    let model = mlp(&dev)?;
    // Checks that every rank has the same model, copies rank 0's weights to all.
    let mut ddp = Ddp::new(
        comm,
        &model,
        DdpOptions::new(Strategy::Bucketed { bucket_mb: 25.0 }),
    )?;
    let mut opt = AdamW::new(AdamWConfig::default())?;
    let mut loss = 0.0;
    for step in 0..10 {
        // The global batch (the same on every rank here; a real loader reads the shard).
        let x = ((Tensor::arange(0f32, 128.0, &dev)? + step as f64)? / 16.0)?.sin()?;
        let y = Tensor::new(&[0u32, 1, 2, 3, 3, 2, 1, 0], &dev)?;
        let global = Batch::new(x.reshape((8, 16))?, y);
        let local = shard_batch(&global, rank, world)?; // this rank's rows
        loss = ddp.forward_backward(&model, &local)?.to_scalar::<f32>()?; // all-reduces overlap backward
        opt.step(
            model.params().vars(),
            &ddp.finish_gradient_synchronization()?,
        )?;
    }
    Ok(loss)
}

fn main() -> anyhow::Result<()> {
    let comms = comm::cpu_group(2, comm::CommOptions::default())?;
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| std::thread::spawn(move || train(Arc::new(c))))
        .collect();
    for (rank, h) in handles.into_iter().enumerate() {
        let loss = h
            .join()
            .map_err(|_| anyhow::anyhow!("rank {rank} panicked"))??;
        println!("rank {rank}: last loss {loss:.4}");
    }
    Ok(())
}
