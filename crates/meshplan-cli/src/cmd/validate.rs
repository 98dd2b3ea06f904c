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
    #[arg(required = true)]
    pub dataset: Vec<PathBuf>,
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
    /// Measurements: calibration CSV (columns in docs/fidelity.md), or a Playbook CSV / published JSON.
    pub measurements: PathBuf,
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

/// Run `calibrate`: the fitted profile TOML on stdout, the fit on stderr.
pub fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let cat = io::catalog()?;
    let chip = cat.chip(&a.chip)?.clone();
    let src = read_file(&a.measurements)?;
    let name = a.measurements.display().to_string();
    let runs =
        if src.lines().next().unwrap_or("").contains("figure_marker") || name.ends_with(".json") {
            load(&a.measurements)?.0
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
                let mut inputs = vec![a.measurements.as_path()];
                inputs.extend(a.from.as_deref());
                crate::plot::write_output("--output", p, &r.profile.to_toml(), &inputs)?;
            }
            None => out!("{}", r.profile.to_toml()),
        }
    }
    Ok(ExitCode::SUCCESS)
}
