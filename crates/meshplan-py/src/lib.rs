//! `meshplan._native`: the Python extension behind the `meshplan` package
//! (python/). Each function takes what the CLI takes — a scenario file and/or
//! names — resolves it with the core's own scenario code, calls the same
//! core function the CLI calls and returns the report's serde JSON (the
//! Python side wraps it in a report object with `to_dict()`), plus SVG plots
//! from `meshplan-plot` where one applies. Bad input raises
//! `meshplan.MeshplanError` carrying the core's message.

use meshplan_core::catalog::Catalog;
use meshplan_core::check::{check as check_claims, parse_claims};
use meshplan_core::error::from_json;
use meshplan_core::fidelity::report::{load_dataset, validate as validate_runs, Thresholds};
use meshplan_core::hardware::report::hw_report;
use meshplan_core::inference::slo::Slos;
use meshplan_core::inference::{self, scenario::resolve as resolve_infer};
use meshplan_core::model::report::model_report;
use meshplan_core::overrides;
use meshplan_core::planner::{
    plan_infer as core_plan_infer, plan_train as core_plan_train, PlanInferRequest,
    PlanTrainRequest, TrainObjective,
};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::scenario::{resolve_with, resolve_workload};
use meshplan_core::units::DType;
use meshplan_plot::{self as plot, kinds};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::path::Path;

create_exception!(
    _native,
    MeshplanError,
    PyException,
    "Bad input to meshplan (unknown name, malformed file, impossible hyperparameters); the message is the CLI's."
);

fn e<E: std::fmt::Display>(x: E) -> PyErr {
    MeshplanError::new_err(x.to_string())
}

fn read(path: &str) -> PyResult<String> {
    std::fs::read_to_string(path).map_err(|x| e(format!("cannot read '{path}': {x}")))
}

fn json<T: serde::Serialize>(r: &T) -> PyResult<String> {
    serde_json::to_string(r).map_err(e)
}

/// The scenario the CLI would build: the file (if any), then the overrides
/// (a JSON object of scenario sections, e.g. `{"hardware": {"chips": 8}}`)
/// written over it by the core's `overrides::apply`, as the CLI's flags are;
/// refused without a model, as the CLI refuses it.
fn scenario(path: Option<&str>, overrides: &str) -> PyResult<Scenario> {
    let base = match path {
        Some(p) => Scenario::parse(&read(p)?, p).map_err(e)?,
        None => Scenario::default(),
    };
    let over: serde_json::Value = serde_json::from_str(overrides).map_err(e)?;
    let sc =
        overrides::apply(&base, &over, &|section, key| format!("{section}.{key}")).map_err(e)?;
    sc.require_model("pass model=NAME or a scenario with [model]")
        .map_err(e)?;
    Ok(sc)
}

/// Every plot of a report that can be drawn, as (kind, SVG).
fn every_plot(
    names: &[&str],
    draw: impl Fn(&str) -> plot::Result<String>,
) -> Vec<(String, String)> {
    names
        .iter()
        .filter_map(|k| draw(k).ok().map(|svg| (k.to_string(), svg)))
        .collect()
}

fn catalog() -> &'static Catalog {
    Catalog::builtin()
}

/// `meshplan model show NAME --json`: (report JSON).
#[pyfunction]
#[pyo3(signature = (name, seq_len=None, kv_dtype=None, causal=true))]
fn model(
    name: &str,
    seq_len: Option<u64>,
    kv_dtype: Option<&str>,
    causal: bool,
) -> PyResult<String> {
    let spec = catalog().model(name).map_err(e)?;
    let kv = kv_dtype.map(DType::parse).transpose().map_err(e)?;
    let q = meshplan_core::scenario::model_query(None, seq_len, kv, causal, name).map_err(e)?;
    json(&model_report(spec, &q, &mut NoTrace))
}

/// `meshplan hw show CHIP --json`.
#[pyfunction]
fn hw(name: &str) -> PyResult<String> {
    let chip = catalog().chip(name).map_err(e)?;
    json(&hw_report(chip, &mut NoTrace))
}

/// What `train` returns: (report JSON, plots, the trace JSON when asked).
type TrainAnswer = (String, Vec<(String, String)>, Option<String>);

/// `meshplan train --json`: (report JSON, {kind: svg}, and with `trace`
/// the predicted step's Chrome trace JSON, as `--trace` writes it; no
/// prediction raises the report's reason).
#[pyfunction]
#[pyo3(signature = (scenario_path, overrides, trace=false))]
fn train(scenario_path: Option<&str>, overrides: &str, trace: bool) -> PyResult<TrainAnswer> {
    let sc = scenario(scenario_path, overrides)?;
    let s = resolve_with(&sc, catalog(), None).map_err(e)?;
    let r = s.analyze(&mut NoTrace);
    let plots = every_plot(&kinds::TRAIN, |k| kinds::train(&s, &r, Some(k)));
    let chrome = trace
        .then(|| meshplan_core::timeline::of_setup(&s, &r))
        .transpose()
        .map_err(|x| e(format!("trace: {x}")))?
        .map(|t| json(&meshplan_core::timeline::chrome_trace(&t)))
        .transpose()?;
    Ok((json(&r)?, plots, chrome))
}

/// `meshplan infer --json`: (report JSON, {kind: svg}); the serving sweep
/// with the SLO lines when `sweep` is set. `slos` is a JSON object
/// `{"ttft_slo": …, "tpot_slo": …}` (seconds or "50ms"), checked by the
/// core as the CLI's and the web API's are, whether or not a plot is drawn.
#[pyfunction]
#[pyo3(signature = (scenario_path, overrides, sweep=false, slos="{}"))]
fn infer(
    scenario_path: Option<&str>,
    overrides: &str,
    sweep: bool,
    slos: &str,
) -> PyResult<(String, Vec<(String, String)>)> {
    let slos: Slos = from_json(slos, "infer() arguments").map_err(e)?;
    let (ttft_slo, tpot_slo) = slos.seconds().map_err(e)?;
    let sc = scenario(scenario_path, overrides)?;
    let s = resolve_infer(&sc, catalog()).map_err(e)?;
    let r = inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).map_err(e)?;
    let mut plots = Vec::new();
    if let Ok(svg) = plot::roofline_svg(&r) {
        plots.push(("roofline".to_string(), svg));
    }
    if sweep {
        let svg = plot::serving_svg(&s, ttft_slo, tpot_slo).map_err(e)?;
        plots.push(("serving".to_string(), svg));
    }
    Ok((json(&r)?, plots))
}

/// `meshplan plan train --json`: (report JSON, {kind: svg}).
#[pyfunction]
#[pyo3(signature = (scenario_path, overrides, objective="time", top=10, threads=None))]
fn plan_train(
    scenario_path: Option<&str>,
    overrides: &str,
    objective: &str,
    top: usize,
    threads: Option<usize>,
) -> PyResult<(String, Vec<(String, String)>)> {
    let sc = scenario(scenario_path, overrides)?;
    let req = PlanTrainRequest {
        workload: resolve_workload(&sc, catalog(), None).map_err(e)?,
        objective: TrainObjective::parse(objective).map_err(e)?,
        top,
        threads,
        explain_rank: None,
    };
    let r = core_plan_train(&req, &|_, _| {}).map_err(e)?;
    let plots = every_plot(&kinds::PLAN_TRAIN, |k| kinds::plan_train(&r, Some(k)));
    Ok((json(&r)?, plots))
}

/// `meshplan plan infer --json`: `request` is the core's
/// `PlanInferRequest` as JSON without its scenario (`max_chips`,
/// `ttft_slo`, `tpot_slo`, `objective`, `top`, `explain_rank`, `threads`;
/// what is left out takes the core's defaults); the scenario is the file
/// with the overrides written over it, as for every other function.
#[pyfunction]
#[pyo3(signature = (scenario_path, overrides, request="{}"))]
fn plan_infer(scenario_path: Option<&str>, overrides: &str, request: &str) -> PyResult<String> {
    let mut req: PlanInferRequest = from_json(request, "plan_infer() arguments").map_err(e)?;
    req.scenario = scenario(scenario_path, overrides)?;
    json(&core_plan_infer(&req, catalog()).map_err(e)?)
}

/// `meshplan check CLAIMS --json`: scenario files resolve relative to it.
#[pyfunction]
fn check(path: &str) -> PyResult<String> {
    let src = read(path)?;
    let dir = Path::new(path)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut resolve = |p: &str| {
        let full = dir.join(p);
        std::fs::read_to_string(&full)
            .map(|t| (full.display().to_string(), t))
            .map_err(|x| format!("cannot read '{}': {x}", full.display()))
    };
    let f = parse_claims(&src, path, &mut resolve).map_err(e)?;
    json(&check_claims(&f, catalog(), false).map_err(e)?)
}

/// `meshplan validate DATASET... --json`: two or more sources add the
/// leave-one-source-out (held-out) report, as on the command line.
#[pyfunction]
#[pyo3(signature = (paths, all=false))]
fn validate(paths: Vec<String>, all: bool) -> PyResult<String> {
    let (mut runs, mut skipped) = (Vec::new(), Vec::new());
    for path in &paths {
        let src = read(path)?;
        let side = Path::new(path).with_file_name("playbook_models.toml");
        let models = if side.is_file() {
            Some(read(&side.display().to_string())?)
        } else {
            None
        };
        let (r, s) = load_dataset(&src, path, models.as_deref()).map_err(e)?;
        runs.extend(r);
        skipped.extend(s);
    }
    // no thresholds: a Python caller judges the returned report itself
    let t = Thresholds::default();
    json(&validate_runs(&runs, skipped, None, &t, all))
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MeshplanError", m.py().get_type::<MeshplanError>())?;
    m.add_function(wrap_pyfunction!(model, m)?)?;
    m.add_function(wrap_pyfunction!(hw, m)?)?;
    m.add_function(wrap_pyfunction!(train, m)?)?;
    m.add_function(wrap_pyfunction!(infer, m)?)?;
    m.add_function(wrap_pyfunction!(plan_train, m)?)?;
    m.add_function(wrap_pyfunction!(plan_infer, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    Ok(())
}
