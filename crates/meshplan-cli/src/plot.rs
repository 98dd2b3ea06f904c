//! `--plot FILE.svg`: write one of `meshplan-plot`'s SVG plots of the report
//! a command built. Flags and file writing only; the kinds and the drawing
//! are the plot crate's, the numbers the core's.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use meshplan_core::inference::slo::{SloValue, Slos};
use meshplan_core::inference::{scenario::InferSetup, InferReport};
use meshplan_core::planner::PlanTrainReport;
use meshplan_core::training::scenario::TrainSetup;
use meshplan_core::training::TrainReport;
use meshplan_plot::kinds;

/// `--plot` and `--plot-kind`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PlotArgs {
    /// Write an SVG plot of the report to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// train: memory | step-time | timeline; infer: serving | roofline; plan train:
    /// pareto | pareto-cost (default: the first).
    #[arg(long, value_name = "KIND", requires = "plot")]
    pub plot_kind: Option<String>,
}

/// The plot flags of `infer`: the kind and the SLO lines.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InferPlotArgs {
    /// `--plot`, `--plot-kind`.
    #[command(flatten)]
    pub plot: PlotArgs,
    /// TTFT SLO drawn on the serving plot ("500ms", or seconds).
    #[arg(long, value_name = "DURATION", requires = "plot")]
    pub ttft_slo: Option<String>,
    /// TPOT SLO drawn on the serving plot ("50ms", or seconds).
    #[arg(long, value_name = "DURATION", requires = "plot")]
    pub tpot_slo: Option<String>,
}

impl InferPlotArgs {
    /// The SLO flags as the core's [`Slos`], checked there as in every
    /// front end: (TTFT, TPOT) in seconds.
    pub fn slo_seconds(&self) -> Result<(Option<f64>, Option<f64>)> {
        let text = |x: &Option<String>| x.clone().map(SloValue::Text);
        Ok(Slos {
            ttft_slo: text(&self.ttft_slo),
            tpot_slo: text(&self.tpot_slo),
        }
        .seconds()?)
    }
}

/// Draw the plot (only when `--plot` is given) and write it.
fn write(
    a: &PlotArgs,
    draw: impl FnOnce(Option<&str>) -> meshplan_plot::Result<String>,
) -> Result<()> {
    let Some(path) = &a.plot else { return Ok(()) };
    let svg = draw(a.plot_kind.as_deref()).map_err(|e| anyhow::anyhow!("--plot: {e}"))?;
    let inputs = command_line_files(&["--plot"]);
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    write_output("--plot", path, &svg, &inputs)
}

/// The files named on this command line other than as the value of one
/// of `outputs` (`--plot FILE`, `--plot=FILE`): the command's inputs (its
/// scenario, data sets, profiles), which no output may replace. Works for
/// every command without each one listing its own.
pub fn command_line_files(outputs: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut skip = false;
    for a in std::env::args_os().skip(1) {
        if std::mem::take(&mut skip) {
            continue;
        }
        let text = a.to_string_lossy();
        if outputs.iter().any(|o| text == *o) {
            skip = true;
            continue;
        }
        if outputs.iter().any(|o| text.starts_with(&format!("{o}="))) {
            continue;
        }
        let p = PathBuf::from(&a);
        if p.is_file() {
            files.push(p);
        } else if let Some((_, v)) = text.split_once('=').filter(|_| text.starts_with("--")) {
            // --model=config.json
            let p = PathBuf::from(v);
            if p.is_file() {
                files.push(p);
            }
        }
    }
    files
}

/// Write `text` to `path` for `flag` (`--trace`), never over one of the
/// command's `inputs`, atomically: a temporary file beside it, renamed over
/// it, so a failed write leaves no half file behind.
pub fn write_output(flag: &str, path: &Path, text: &str, inputs: &[&Path]) -> Result<()> {
    if let Ok(out) = path.canonicalize() {
        if inputs
            .iter()
            .any(|i| i.canonicalize().is_ok_and(|i| i == out))
        {
            bail!(
                "{flag}: {} is an input of this command; refusing to overwrite it",
                path.display()
            );
        }
    }
    let name = path
        .file_name()
        .with_context(|| format!("{flag}: {} is not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("{flag}: cannot write {}", path.display()))
}

/// `train --plot`.
pub fn train(s: &TrainSetup, r: &TrainReport, a: &PlotArgs) -> Result<()> {
    write(a, |k| kinds::train(s, r, k))
}

/// `infer --plot`.
pub fn infer(
    s: &InferSetup,
    r: &InferReport,
    a: &InferPlotArgs,
    slos: (Option<f64>, Option<f64>),
) -> Result<()> {
    write(&a.plot, |k| kinds::infer(s, r, k, slos))
}

/// `plan infer --plot`.
pub fn plan_infer(r: &meshplan_core::planner::PlanInferReport, a: &PlotArgs) -> Result<()> {
    write(a, |k| kinds::plan_infer(r, k))
}

/// `plan train --plot`.
pub fn plan_train(r: &PlanTrainReport, a: &PlotArgs) -> Result<()> {
    write(a, |k| kinds::plan_train(r, k))
}
