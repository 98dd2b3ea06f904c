//! `meshplan collective|roofline|shard|mfu`: the book's building blocks.
//! The flags are the core's query, as written (parsed there).

use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::{trace::Recorder, view::Render};
use serde::Serialize;

use crate::output::{emit, OutputArgs};

/// A building-block command's flags: the core's query itself (it derives
/// `clap::Args`, one flag per field; a claim's `args` use the same keys),
/// and the output options.
#[derive(clap::Args, Debug)]
pub struct BlockArgs<Q: clap::Args> {
    /// The question.
    #[command(flatten)]
    pub q: Q,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Answer the query and print the report.
pub fn run<Q: clap::Args, R: Serialize + Render>(
    a: &BlockArgs<Q>,
    f: impl FnOnce(&Q, &meshplan_core::Catalog, &mut Recorder) -> meshplan_core::Result<R>,
) -> Result<ExitCode> {
    let mut rec = Recorder::default();
    let r = f(&a.q, &crate::io::catalog()?, &mut rec)?;
    emit(&r, a.out.explain.then(|| rec.steps()), &a.out)?;
    Ok(ExitCode::SUCCESS)
}
