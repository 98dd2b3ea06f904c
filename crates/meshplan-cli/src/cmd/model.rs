//! `meshplan model list|show` and `meshplan hw list|show`: the catalogs and
//! one model's or chip's figures.

use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::hardware::report::{hw_report, hw_report_for, ChipList, HwQuery};
use meshplan_core::model::report::{model_list, model_report};
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::units::DType;

use crate::args::ListArgs;
use crate::io;
use crate::output::{emit, OutputArgs};

/// Model subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ModelCmd {
    /// List the models in the catalog with their sizes and hyperparameters.
    List(ListArgs),
    /// Show one model's parameter counts, FLOPs per token and KV-cache size.
    Show(ShowArgs),
}

/// Arguments of `meshplan model show`.
#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// A catalog name (e.g. llama-2-13b), a Hugging Face config.json, a model
    /// TOML file in catalog format, or a scenario TOML file with a [model] section.
    #[arg(value_name = "MODEL")]
    pub model: String,
    /// Sequence length T for attention FLOPs and KV per sequence; accepts
    /// 4096, 32k (= 32,000) or 32Ki (= 32,768).
    #[arg(long, value_name = "TOKENS", value_parser = parse_seq_len, allow_hyphen_values = true)]
    pub seq_len: Option<u64>,
    /// Data type of the KV cache: fp32, bf16, fp16, fp8, int8 or int4.
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype, allow_hyphen_values = true)]
    pub kv_dtype: Option<DType>,
    /// Count attention FLOPs for bidirectional (non-causal) attention.
    #[arg(long)]
    pub non_causal: bool,
    /// A bare parameter count to use as P ("70e9", the book's convention);
    /// the exact count is shown beside it.
    #[arg(long, value_name = "COUNT")]
    pub params_given: Option<String>,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Hardware subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum HwCmd {
    /// List the chips in the catalog.
    List(ListArgs),
    /// Show one chip's figures and critical intensities.
    Show(HwShowArgs),
}

/// Arguments of `meshplan hw show`.
#[derive(clap::Args, Debug)]
pub struct HwShowArgs {
    /// A catalog name (NAME@book for the book's numbers) or a chip TOML file.
    #[arg(value_name = "CHIP")]
    pub chip: String,
    /// GPUs in one model-parallel group (TP × PP × EP …) for the network's
    /// data-parallel bandwidth (`network.dp_bandwidth_bytes_per_s`); default
    /// 1 (pure data parallelism).
    #[arg(long, value_name = "GPUS", value_parser = parse_gpus, allow_hyphen_values = true)]
    pub model_parallel: Option<u64>,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `--seq-len`: a whole, positive token count.
fn parse_seq_len(s: &str) -> std::result::Result<u64, String> {
    meshplan_io::seq_len(s).map_err(|e| e.to_string())
}

/// `--model-parallel`: a whole count ("64"); 0 is refused by the core's
/// query check, with the message every front end gives.
fn parse_gpus(s: &str) -> std::result::Result<u64, String> {
    meshplan_core::units::parse_count(s).map_err(|e| e.to_string())
}

/// `--kv-dtype`.
fn parse_dtype(s: &str) -> std::result::Result<DType, String> {
    DType::parse(s).map_err(|e| e.to_string())
}

/// Run `model`.
pub fn run_model(c: ModelCmd) -> Result<ExitCode> {
    let mut cat = io::catalog()?;
    match c {
        ModelCmd::List(a) => emit(&model_list(cat.models()), None, a.out("model")?)?,
        ModelCmd::Show(a) => {
            let (name, scen) = io::model_arg(&mut cat, &a.model)?;
            let mut spec = cat.model_or_bare(&name)?;
            if let Some(g) = &a.params_given {
                spec.arch.params_given = Some(
                    meshplan_core::units::parse_count(g)
                        .map_err(|e| anyhow::anyhow!("--params-given: {e}"))?,
                );
                spec.arch.validate()?;
            }
            let spec = &spec;
            let q = meshplan_core::scenario::model_query(
                scen.as_ref(),
                a.seq_len,
                a.kv_dtype,
                !a.non_causal,
                &a.model,
            )?;
            let mut rec = Recorder::default();
            let r = model_report(spec, &q, &mut rec);
            emit(&r, a.out.explain.then(|| rec.steps()), &a.out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `hw`.
pub fn run_hw(c: HwCmd) -> Result<ExitCode> {
    let cat = io::catalog()?;
    match c {
        HwCmd::List(a) => {
            let chips = cat
                .chips()
                .into_iter()
                .map(|ch| hw_report(ch, &mut NoTrace))
                .collect();
            emit(&ChipList { chips }, None, a.out("hw")?)?;
        }
        HwCmd::Show(a) => {
            let chip = meshplan_io::chip_arg(&cat, &a.chip)?;
            let mut rec = Recorder::default();
            let q = HwQuery {
                model_parallel: a.model_parallel,
            };
            let r = hw_report_for(&chip, &q, &mut rec)?;
            emit(&r, a.out.explain.then(|| rec.steps()), &a.out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
