//! `meshplan collective|roofline|shard|mfu`: the book's building blocks.
//! The flags go, as written, into the core's query (parsed there).

use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::{trace::Recorder, view::Render};
use serde::{de::DeserializeOwned, Serialize};

use crate::output::{emit, OutputArgs};

/// Flags every building-block command takes.
#[derive(clap::Args, Debug, Serialize)]
pub struct Common {
    #[arg(long, help = "Chip: a catalog name (NAME@book for the book's numbers)")]
    pub hw: Option<String>,
    #[arg(long, help = "Dtype (default: as written in arrays, else bf16)")]
    pub dtype: Option<String>,
    #[arg(long, help = "Dimension sizes: \"I=1024,J=4096\"")]
    pub dims: Option<String>,
    #[command(flatten)]
    #[serde(skip)]
    pub out: OutputArgs,
}

/// `meshplan collective`.
#[derive(clap::Args, Debug, Serialize)]
pub struct CollectiveArgs {
    #[arg(help = "allgather, reducescatter, allreduce, alltoall, permute (_X: axes)")]
    pub op: String,
    #[arg(long, help = "V in bytes (\"32MiB\"), or \"bf16[E_X, F]\"")]
    pub array: String,
    #[arg(long, help = "Mesh: \"X=4,Y=4\", \"4x4\", \"2*16x16x16\"")]
    pub mesh: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub c: Common,
}

/// `meshplan roofline`.
#[derive(clap::Args, Debug, Serialize)]
pub struct RooflineArgs {
    #[arg(help = "\"bf16[B, D] * int8[D, F]\", \"fp32[N] + fp32[N]\", attention, \"load A\"")]
    pub what: Option<String>,
    #[arg(long, help = "Raw FLOPs (with --bytes, instead of an op)")]
    pub flops: Option<String>,
    #[arg(long, help = "Raw bytes")]
    pub bytes: Option<String>,
    #[arg(long, help = "Bytes come from: hbm (default), host, ici, nvlink, dcn")]
    pub from: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub c: Common,
}

/// `meshplan shard`.
#[derive(clap::Args, Debug, Serialize)]
pub struct ShardArgs {
    #[arg(help = "\"A[I_X, J_Y]\" or \"A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]\"")]
    pub what: String,
    #[arg(long, help = "Mesh: \"X=4,Y=2\" or a slice shape \"4x4\"")]
    pub mesh: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub c: Common,
}

/// `meshplan mfu`.
#[derive(clap::Args, Debug, Serialize)]
pub struct MfuArgs {
    #[arg(long, help = "Model: a catalog name, or a parameter count (\"70B\")")]
    pub model: String,
    #[arg(long, help = "Tokens trained (\"15T\")")]
    pub tokens: String,
    #[arg(long, help = "Wall-clock time (\"54 days\"), with --chips")]
    pub time: Option<String>,
    #[arg(long, help = "Chips used")]
    pub chips: Option<String>,
    #[arg(long, help = "Chip-hours (\"2.79M\"), instead of --time and --chips")]
    pub chip_hours: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub c: Common,
}

/// Turn the flags into the core's query, answer it and print the report.
pub fn run<Q: DeserializeOwned, R: Serialize + Render>(
    a: &impl Serialize,
    out: &OutputArgs,
    f: impl FnOnce(&Q, &meshplan_core::Catalog, &mut Recorder) -> meshplan_core::Result<R>,
) -> Result<ExitCode> {
    let q: Q = serde_json::from_value(serde_json::to_value(a)?)?;
    let mut rec = Recorder::default();
    let r = f(&q, &crate::io::catalog()?, &mut rec)?;
    emit(&r, out.explain.then(|| rec.steps()), out)?;
    Ok(ExitCode::SUCCESS)
}
