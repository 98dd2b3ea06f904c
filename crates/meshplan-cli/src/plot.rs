//! `--plot FILE.svg`: write one of `meshplan-plot`'s SVG plots of the report
//! a command built. Flags and file writing only; the drawing is the plot
//! crate's, the numbers the core's.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use meshplan_core::inference::scenario::InferSetup;
use meshplan_core::planner::PlanTrainReport;
use meshplan_core::training::TrainReport;
use meshplan_plot as plot;

/// `--plot` and `--plot-kind` of `train`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TrainPlotArgs {
    /// Write an SVG plot of the report to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// memory (per device, by term, against HBM) | step-time (compute, bubble, each collective).
    #[arg(long, value_name = "KIND", default_value = "memory", requires = "plot")]
    pub plot_kind: String,
}

/// `--plot`, `--plot-kind` and the SLO lines of `infer`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InferPlotArgs {
    /// Write an SVG plot to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// serving (TPOT, TTFT and tokens/s vs batch) | roofline (each op marked).
    #[arg(
        long,
        value_name = "KIND",
        default_value = "serving",
        requires = "plot"
    )]
    pub plot_kind: String,
    /// TTFT SLO drawn on the serving plot (seconds).
    #[arg(long, value_name = "SECONDS", requires = "plot")]
    pub ttft_slo: Option<f64>,
    /// TPOT SLO drawn on the serving plot (seconds).
    #[arg(long, value_name = "SECONDS", requires = "plot")]
    pub tpot_slo: Option<f64>,
}

/// `--plot` and `--plot-kind` of `plan train`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PlanPlotArgs {
    /// Write an SVG plot of the listed plans to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// pareto (step time vs memory per device) | pareto-cost (step time vs cost).
    #[arg(long, value_name = "KIND", default_value = "pareto", requires = "plot")]
    pub plot_kind: String,
}

fn write(path: &PathBuf, svg: plot::Result<String>) -> Result<()> {
    let svg = svg.map_err(|e| anyhow::anyhow!("cannot draw the plot: {e}"))?;
    std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))
}

/// `train --plot`.
pub fn train(r: &TrainReport, a: &TrainPlotArgs) -> Result<()> {
    let Some(path) = &a.plot else { return Ok(()) };
    let svg = match a.plot_kind.as_str() {
        "memory" => plot::memory_svg(r),
        "step-time" => plot::step_time_svg(r),
        k => bail!("unknown --plot-kind '{k}' for train: memory | step-time"),
    };
    write(path, svg)
}

/// `infer --plot`.
pub fn infer(
    s: &InferSetup,
    r: &meshplan_core::inference::InferReport,
    a: &InferPlotArgs,
) -> Result<()> {
    let Some(path) = &a.plot else { return Ok(()) };
    let svg = match a.plot_kind.as_str() {
        "serving" => plot::serving_svg(s, a.ttft_slo, a.tpot_slo),
        "roofline" => plot::roofline_svg(r),
        k => bail!("unknown --plot-kind '{k}' for infer: serving | roofline"),
    };
    write(path, svg)
}

/// `plan train --plot`.
pub fn plan_train(r: &PlanTrainReport, a: &PlanPlotArgs) -> Result<()> {
    let Some(path) = &a.plot else { return Ok(()) };
    let svg = match a.plot_kind.as_str() {
        "pareto" => plot::pareto_svg(r, plot::ParetoAxis::Memory),
        "pareto-cost" => plot::pareto_svg(r, plot::ParetoAxis::Cost),
        k => bail!("unknown --plot-kind '{k}' for plan train: pareto | pareto-cost"),
    };
    write(path, svg)
}
