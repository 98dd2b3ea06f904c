//! The plots each report offers, by name: what the CLI's `--plot-kind`,
//! the Python package and the web page ask for. The first kind of each list
//! is the default.

use meshplan_core::inference::{scenario::InferSetup, InferReport};
use meshplan_core::planner::{PlanInferReport, PlanTrainReport};
use meshplan_core::training::scenario::TrainSetup;
use meshplan_core::training::TrainReport;

use crate::{
    infer_pareto_svg, memory_svg, pareto_svg, roofline_svg, serving_svg, step_time_svg,
    timeline_svg, ParetoAxis, PlotError, Result,
};

/// Plots of a training report.
pub const TRAIN: [&str; 3] = ["memory", "step-time", "timeline"];
/// Plots of a serving report.
pub const INFER: [&str; 2] = ["serving", "roofline"];
/// Plots of a training plan search.
pub const PLAN_TRAIN: [&str; 2] = ["pareto", "pareto-cost"];
/// Plots of a serving plan search.
pub const PLAN_INFER: [&str; 1] = ["pareto"];

/// The kind asked for (the first of `kinds` when none is), or an error
/// that lists the kinds `command` offers.
fn pick<'a>(command: &str, kinds: &[&'a str], kind: Option<&str>) -> Result<&'a str> {
    let Some(k) = kind else { return Ok(kinds[0]) };
    kinds.iter().find(|x| **x == k).copied().ok_or_else(|| {
        PlotError(format!(
            "unknown plot kind '{k}' for {command}: {}",
            kinds.join(" | ")
        ))
    })
}

/// A training report's plot: `memory` (default), `step-time` or
/// `timeline` (the predicted step; `s`, the report's setup, places its
/// streams on their links; an error saying why when nothing is predicted).
pub fn train(s: &TrainSetup, r: &TrainReport, kind: Option<&str>) -> Result<String> {
    match pick("train", &TRAIN, kind)? {
        "memory" => memory_svg(r),
        "step-time" => step_time_svg(r),
        _ => timeline_svg(&meshplan_core::timeline::of_setup(s, r).map_err(PlotError)?),
    }
}

/// A serving report's plot: `serving` (default; the batch sweep with the
/// SLO lines, seconds) or `roofline`.
pub fn infer(
    s: &InferSetup,
    r: &InferReport,
    kind: Option<&str>,
    slo: (Option<f64>, Option<f64>),
) -> Result<String> {
    match pick("infer", &INFER, kind)? {
        "serving" => serving_svg(s, slo.0, slo.1),
        _ => roofline_svg(r),
    }
}

/// A plan search's plot: `pareto` (step time vs memory, default) or
/// `pareto-cost`.
pub fn plan_train(r: &PlanTrainReport, kind: Option<&str>) -> Result<String> {
    match pick("plan train", &PLAN_TRAIN, kind)? {
        "pareto" => pareto_svg(r, ParetoAxis::Memory),
        _ => pareto_svg(r, ParetoAxis::Cost),
    }
}

/// A serving plan search's plot: `pareto` (output tokens/s per chip
/// against tokens/s per user, aggregated and disaggregated plans).
pub fn plan_infer(r: &PlanInferReport, kind: Option<&str>) -> Result<String> {
    pick("plan infer", &PLAN_INFER, kind)?;
    infer_pareto_svg(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_default_to_the_first_and_unknown_ones_are_listed() {
        assert_eq!(pick("train", &TRAIN, None).unwrap(), "memory");
        assert_eq!(
            pick("train", &TRAIN, Some("step-time")).unwrap(),
            "step-time"
        );
        let e = pick("infer", &INFER, Some("pie")).unwrap_err().0;
        assert_eq!(e, "unknown plot kind 'pie' for infer: serving | roofline");
    }
}
