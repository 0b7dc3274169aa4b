//! `storprof datagen` and `storprof bench` arguments.
use clap::Args;

#[derive(Args, Debug)]
pub struct DatagenArgs {}

#[derive(Args, Debug)]
pub struct BenchArgs {}

pub fn run_datagen(_args: &DatagenArgs) -> anyhow::Result<()> {
    anyhow::bail!("datagen: not built yet")
}

pub fn run_bench(_args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("bench: not built yet")
}
