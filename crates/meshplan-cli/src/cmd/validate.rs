//! `meshplan validate` and `meshplan calibrate` (docs/fidelity.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use meshplan_core::fidelity::data::{self, Run};
use meshplan_core::fidelity::report::{calibrate_runs, validate, Thresholds};
use meshplan_core::fidelity::stats::svg_scatter;
use meshplan_core::fidelity::EfficiencyProfile;
use meshplan_core::view::Render;

use crate::io::{self, read_file};
use crate::output::{doc_text, emit, print_json, progress, Format, OutputArgs};

/// Arguments of `meshplan validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// Playbook CSV (models from `playbook_models.toml` beside it, else the embedded copy)
    /// or published-runs JSON; with several (two or more sources), also the
    /// held-out (leave-one-source-out) figures.
    #[arg(required_unless_present = "serving")]
    pub dataset: Vec<PathBuf>,
    /// Compare serving predictions with the published serving measurements
    /// (data/serving/measurements.csv): per metric (TTFT, TPOT, tokens/s per
    /// GPU) and per chip, engine, dense/MoE and agg/disagg (docs/inference.md,
    /// "Serving validation"). Takes no data set.
    #[arg(long, conflicts_with_all = ["dataset", "plot", "hw_profile"])]
    pub serving: bool,
    /// Write a predicted-vs-measured step-time scatter (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Use this profile (TOML from `meshplan calibrate`) for its chip.
    #[arg(long, value_name = "FILE")]
    pub hw_profile: Option<PathBuf>,
    /// The thresholds (exit 1 when one fails).
    #[command(flatten)]
    pub thresholds: Thresholds,
    /// List every run (data sets of up to 40 runs are always listed).
    #[arg(long)]
    pub all: bool,
    /// Output (validate has no derivation: --explain is refused).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `meshplan calibrate`.
#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// Measurements: calibration CSV (columns in docs/fidelity.md), or a
    /// Playbook CSV / published JSON. Not with the microbenchmark files.
    #[arg(
        required_unless_present_any = ["gemm", "attention", "nccl"],
        conflicts_with_all = ["gemm", "attention", "nccl"]
    )]
    pub measurements: Option<PathBuf>,
    /// GEMM sweep CSV (m,n,k,dtype,time_us; docs/fidelity.md): fits
    /// matmul_efficiency and matmul_half_dim. Repeatable.
    #[arg(long, value_name = "FILE.csv")]
    pub gemm: Vec<PathBuf>,
    /// Attention sweep CSV (batch,seq,keys,heads,head_dim,causal,time_us):
    /// fits attention_efficiency. Repeatable.
    #[arg(long, value_name = "FILE.csv")]
    pub attention: Vec<PathBuf>,
    /// nccl-tests log (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
    /// alltoall_perf stdout; `KIND=FILE` when neither the log nor the file
    /// name says which): one node fits intra_node_efficiency and
    /// collective_latency_s, several nodes the inter-node ones. Repeatable.
    #[arg(long, value_name = "[KIND=]FILE")]
    pub nccl: Vec<String>,
    /// Chip (catalog name) the measurements are from.
    #[arg(long)]
    pub chip: String,
    /// Start from this profile instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Nelder–Mead iterations per stage.
    #[arg(long, default_value_t = 400)]
    pub iters: usize,
    /// Bootstrap resamples for the uncertainties (0 = none).
    #[arg(long, default_value_t = 8)]
    pub bootstrap: usize,
    /// Fit on half of the runs only (a fixed split by run id) and report the
    /// error on the other, held-apart half before and after the fit.
    #[arg(long)]
    pub hold_out: bool,
    /// Print the report (the fitted profile under "profile") as JSON instead
    /// of the profile TOML.
    #[arg(long)]
    pub json: bool,
    /// Write the fitted profile TOML to FILE (atomically, never over the
    /// measurements or --from) instead of stdout; the fit stays on stderr.
    #[arg(long, value_name = "FILE.toml", conflicts_with = "json")]
    pub output: Option<PathBuf>,
}

/// Any supported data set, with the Playbook model table beside a CSV.
fn load(path: &Path) -> anyhow::Result<(Vec<Run>, Vec<String>)> {
    Ok(meshplan_io::dataset(path)?)
}

fn user_profile(p: Option<&Path>) -> anyhow::Result<Option<EfficiencyProfile>> {
    p.map(|p| {
        Ok(EfficiencyProfile::parse(
            &read_file(p)?,
            &p.display().to_string(),
        )?)
    })
    .transpose()
}

/// Run `validate`.
pub fn run(a: ValidateArgs) -> anyhow::Result<ExitCode> {
    if a.out.explain {
        anyhow::bail!("validate has no derivation (--explain): its numbers are predictions, see `meshplan train --explain` for one run");
    }
    if a.serving {
        return run_serving(&a);
    }
    let (mut runs, mut skipped) = (Vec::new(), Vec::new());
    for p in &a.dataset {
        let (r, s) = load(p)?;
        runs.extend(r);
        skipped.extend(s);
    }
    let user = user_profile(a.hw_profile.as_deref())?;
    let r = validate(&runs, skipped, user.as_ref(), &a.thresholds, a.all);
    if let Some(p) = &a.plot {
        let mut inputs: Vec<&Path> = a.dataset.iter().map(PathBuf::as_path).collect();
        inputs.extend(a.hw_profile.as_deref());
        crate::plot::write_output("--plot", p, &svg_scatter(&r.runs), &inputs)?;
    }
    emit(&r, None, &a.out)?;
    for f in &r.failures {
        errln!("validate: {f}");
    }
    Ok(if r.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `validate --serving`: the serving comparison (every row with --all).
fn run_serving(a: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let mut s = meshplan_core::inference::validation::compare(&io::catalog()?)?;
    s.list_rows = a.all;
    emit(&s, None, &a.out)?;
    Ok(ExitCode::SUCCESS)
}

/// Run `calibrate`: the fitted profile TOML on stdout, the fit on stderr.
pub fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let cat = io::catalog()?;
    let chip = cat.chip(&a.chip)?.clone();
    let Some(measurements) = a.measurements.clone() else {
        return run_microbench(&a, &chip);
    };
    let src = read_file(&measurements)?;
    let name = measurements.display().to_string();
    let runs =
        if src.lines().next().unwrap_or("").contains("figure_marker") || name.ends_with(".json") {
            load(&measurements)?.0
        } else {
            let lookup = |n: &str| cat.model(n).ok().map(|m| m.arch.clone());
            data::parse_calibration_csv(&src, &chip.name, &lookup)?
        };
    let start = match user_profile(a.from.as_deref())? {
        Some(p) => p,
        None => EfficiencyProfile::builtin(&chip.name)
            .or_else(|| EfficiencyProfile::builtin("h100"))
            .context("no built-in profile")?,
    };
    // the fit takes seconds: a spinner on a terminal, nothing in a pipe
    let spin = progress(!a.json, "{spinner} fitting the profile ({elapsed})");
    let r = calibrate_runs(
        &runs,
        &chip,
        &start,
        a.iters,
        a.bootstrap,
        a.hold_out,
        &name,
    );
    if let Some(s) = spin {
        s.finish_and_clear();
    }
    let r = r?;
    if a.json {
        print_json(&r)?;
    } else {
        errln!("{}", doc_text(&r.doc(), Format::Text).trim_end());
        match &a.output {
            Some(p) => {
                let mut inputs = vec![measurements.as_path()];
                inputs.extend(a.from.as_deref());
                crate::plot::write_output("--output", p, &r.profile.to_toml(), &inputs)?;
            }
            None => out!("{}", r.profile.to_toml()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `calibrate` from microbenchmarks: the profile `train` uses for the chip
/// (or `--from`) with the fields the files give fitted; the profile TOML on
/// stdout (or `--output`), the fitted fields on stderr.
fn run_microbench(
    a: &CalibrateArgs,
    chip: &meshplan_core::hardware::Chip,
) -> anyhow::Result<ExitCode> {
    if a.hold_out {
        anyhow::bail!("--hold-out splits end-to-end runs; microbenchmarks have none");
    }
    let inputs = meshplan_io::microbench(&a.gemm, &a.attention, &a.nccl)?;
    let start = match user_profile(a.from.as_deref())? {
        Some(p) => p,
        None => {
            meshplan_core::step::predict::active_profile(chip, None)?
                .with_context(|| {
                    format!(
                        "no efficiency profile to start from for {}: give --from FILE",
                        chip.name
                    )
                })?
                .profile
        }
    };
    let r = meshplan_core::fidelity::microbench::calibrate(chip, &start, &inputs)?;
    if a.json {
        print_json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    errln!("calibrated from microbenchmarks ({}):", chip.name);
    for f in &r.fitted {
        errln!("  {:<24} {:>12.6e} -> {:.6e}", f.field, f.before, f.after);
    }
    for c in &r.collectives {
        errln!(
            "  {} {}: {} GPUs on {} node(s), alpha {:.2} us, busbw {:.1} GB/s ({:.3} of nominal), rms {:.1} %",
            c.file,
            c.collective,
            c.ranks,
            c.nodes,
            c.alpha_s * 1e6,
            c.busbw_gbs,
            c.efficiency,
            100.0 * c.rms_rel_residual
        );
    }
    let toml = r.profile.to_toml();
    match &a.output {
        Some(p) => {
            let mut inputs: Vec<&Path> = a
                .gemm
                .iter()
                .chain(&a.attention)
                .map(PathBuf::as_path)
                .collect();
            let nccl: Vec<PathBuf> = a
                .nccl
                .iter()
                .map(|s| PathBuf::from(s.split_once('=').map_or(s.as_str(), |x| x.1)))
                .collect();
            inputs.extend(nccl.iter().map(PathBuf::as_path));
            inputs.extend(a.from.as_deref());
            crate::plot::write_output("--output", p, &toml, &inputs)?;
        }
        None => out!("{toml}"),
    }
    Ok(ExitCode::SUCCESS)
}
