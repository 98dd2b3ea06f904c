//! `meshplan._native`: the Python extension behind the `meshplan` package
//! (python/). Each function takes what the CLI takes — a scenario file and/or
//! names — reads and resolves it through `meshplan-io` (the CLI's own bounded
//! reader, model-file and scenario loading, so a config.json, a `[model]
//! file`, a FIFO or /dev/zero are treated exactly as on the command line),
//! calls the same core function the CLI calls and returns the report's serde
//! JSON (the Python side wraps it in a report object with `to_dict()`), plus
//! SVG plots from `meshplan-plot` where one applies. Bad input raises a
//! `meshplan.MeshplanError` subclass carrying the CLI's message; long calls
//! run off the interpreter's thread and answer Ctrl-C.

use meshplan_core::catalog::Catalog;
use meshplan_core::error::from_json;
use meshplan_core::fidelity::report::{validate as validate_runs, Thresholds};
use meshplan_core::hardware::report::hw_report;
use meshplan_core::inference::slo::Slos;
use meshplan_core::inference::{self, scenario::resolve as resolve_infer};
use meshplan_core::model::report::model_report;
use meshplan_core::overrides;
use meshplan_core::planner::{
    plan_infer as core_plan_infer, plan_train_with as core_plan_train_with, PlanInferRequest,
    PlanTrainRequest, SearchDims, TrainObjective,
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
use std::time::Duration;

create_exception!(
    _native,
    MeshplanError,
    PyException,
    "Bad input to meshplan (unknown name, malformed file, impossible hyperparameters); the message is the CLI's."
);
create_exception!(
    _native,
    InputError,
    MeshplanError,
    "Input meshplan cannot use: a malformed file or value, a bad unit, impossible hyperparameters, a missing section."
);
create_exception!(
    _native,
    UnknownNameError,
    InputError,
    "A model, chip or other catalog name that does not exist (the message lists the closest names)."
);
create_exception!(
    _native,
    FileError,
    MeshplanError,
    "A file that cannot be read: missing, unreadable, not a regular file (FIFO, device, directory) or over 64 MiB."
);

/// The core's error as the Python exception of its kind.
fn core_err(x: &meshplan_core::Error) -> PyErr {
    match x {
        meshplan_core::Error::UnknownName { .. } => UnknownNameError::new_err(x.to_string()),
        _ => InputError::new_err(x.to_string()),
    }
}

/// `meshplan-io`'s error: a file that cannot be read, or its text's.
fn io_err(x: meshplan_io::Error) -> PyErr {
    match x {
        meshplan_io::Error::File(f) => FileError::new_err(meshplan_io::one_line(&f)),
        meshplan_io::Error::Core(c) => core_err(&c),
    }
}

/// Any other bad input (arguments that are not valid JSON, …).
fn e<E: std::fmt::Display>(x: E) -> PyErr {
    InputError::new_err(x.to_string())
}

/// `meshplan_core::Result` → `PyResult` with the typed exception.
trait Core<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> Core<T> for meshplan_core::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(|x| core_err(&x))
    }
}

impl<T> Core<T> for meshplan_io::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(io_err)
    }
}

fn json<T: serde::Serialize>(r: &T) -> PyResult<String> {
    serde_json::to_string(r).map_err(e)
}

/// How often a long call looks for a signal (Ctrl-C) while it computes.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Run `work` on its own thread with the GIL released, checking for
/// signals every [`SIGNAL_POLL`]: Ctrl-C raises `KeyboardInterrupt` at
/// once. The core's searches have no cancellation hook, so an interrupted
/// one finishes on its thread in the background and its answer is dropped.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> PyResult<T> + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("meshplan".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|x| MeshplanError::new_err(format!("cannot start a thread: {x}")))?;
    let mut rx = rx;
    loop {
        // the receiver travels into the GIL-free wait and back (it is Send, not Sync)
        let (got, back) = py.allow_threads(move || (rx.recv_timeout(SIGNAL_POLL), rx));
        rx = back;
        match got {
            Ok(r) => return r,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(MeshplanError::new_err("meshplan: the computation panicked"))
            }
        }
    }
}

/// The scenario and catalog the CLI would build: the file (if any) and the
/// model (`model.name` of the overrides: a catalog name or a model file, as
/// `--model`; else the file's `[model] file`) loaded by `meshplan-io`, then
/// the other overrides (a JSON object of scenario sections, e.g.
/// `{"hardware": {"chips": 8}}`) written over it by the core's
/// `overrides::apply`, as the CLI's flags are; refused without a model, as
/// the CLI refuses it.
fn scenario(path: Option<&str>, overrides: &str) -> PyResult<(Scenario, Catalog)> {
    let mut over: serde_json::Value = serde_json::from_str(overrides).map_err(e)?;
    let model = over
        .get_mut("model")
        .and_then(|m| m.as_object_mut())
        .and_then(|m| m.remove("name"));
    let model = match model {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(m)) => Some(m),
        Some(other) => return Err(e(format!("model must be a name or a file, not {other}"))),
    };
    let mut cat = meshplan_io::catalog(None).py()?;
    let base = meshplan_io::target(&mut cat, path.map(Path::new), model.as_deref()).py()?;
    let sc = overrides::apply(&base, &over, &|section, key| format!("{section}.{key}")).py()?;
    sc.require_model("pass model=NAME or a scenario with [model]")
        .py()?;
    Ok((sc, cat))
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

/// `meshplan model show NAME --json`: NAME is a catalog name or a model
/// file (config.json, model or scenario TOML), `seq_len` a count as text
/// ("4096", "32Ki"), as on the command line.
#[pyfunction]
#[pyo3(signature = (name, seq_len=None, kv_dtype=None, causal=true))]
fn model(
    name: &str,
    seq_len: Option<&str>,
    kv_dtype: Option<&str>,
    causal: bool,
) -> PyResult<String> {
    let seq_len = seq_len.map(meshplan_io::seq_len).transpose().py()?;
    let mut cat = meshplan_io::catalog(None).py()?;
    let (found, scen) = meshplan_io::model_arg(&mut cat, name).py()?;
    let spec = cat.model_or_bare(&found).py()?;
    let kv = kv_dtype.map(DType::parse).transpose().py()?;
    let q = meshplan_core::scenario::model_query(scen.as_ref(), seq_len, kv, causal, name).py()?;
    json(&model_report(&spec, &q, &mut NoTrace))
}

/// `meshplan hw show CHIP --json`: a catalog name or a chip TOML file.
#[pyfunction]
fn hw(name: &str) -> PyResult<String> {
    let cat = meshplan_io::catalog(None).py()?;
    let chip = meshplan_io::chip_arg(&cat, name).py()?;
    json(&hw_report(&chip, &mut NoTrace))
}

/// What `train` returns: (report JSON, plots, the trace JSON when asked).
type TrainAnswer = (String, Vec<(String, String)>, Option<String>);

/// `meshplan train --json`: (report JSON, {kind: svg}, and with `trace`
/// the predicted step's Chrome trace JSON, as `--trace` writes it; no
/// prediction raises the report's reason).
#[pyfunction]
#[pyo3(signature = (scenario_path, overrides, trace=false))]
fn train(
    py: Python<'_>,
    scenario_path: Option<&str>,
    overrides: &str,
    trace: bool,
) -> PyResult<TrainAnswer> {
    let (sc, cat) = scenario(scenario_path, overrides)?;
    interruptible(py, move || {
        let s = resolve_with(&sc, &cat, None).py()?;
        let r = s.analyze(&mut NoTrace);
        let plots = every_plot(&kinds::TRAIN, |k| kinds::train(&s, &r, Some(k)));
        let chrome = trace
            .then(|| meshplan_core::timeline::of_setup(&s, &r))
            .transpose()
            .map_err(|x| e(format!("trace: {x}")))?
            .map(|t| json(&meshplan_core::timeline::chrome_trace(&t)))
            .transpose()?;
        Ok((json(&r)?, plots, chrome))
    })
}

/// `meshplan infer --json`: (report JSON, {kind: svg}); the serving sweep
/// with the SLO lines when `sweep` is set. `slos` is a JSON object
/// `{"ttft_slo": …, "tpot_slo": …}` (seconds or "50ms"), checked by the
/// core as the CLI's and the web API's are, whether or not a plot is drawn.
#[pyfunction]
#[pyo3(signature = (scenario_path, overrides, sweep=false, slos="{}"))]
fn infer(
    py: Python<'_>,
    scenario_path: Option<&str>,
    overrides: &str,
    sweep: bool,
    slos: &str,
) -> PyResult<(String, Vec<(String, String)>)> {
    let slos: Slos = from_json(slos, "infer() arguments").py()?;
    let (ttft_slo, tpot_slo) = slos.seconds().py()?;
    let (sc, cat) = scenario(scenario_path, overrides)?;
    interruptible(py, move || {
        let s = resolve_infer(&sc, &cat).py()?;
        let r = inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).py()?;
        let mut plots = Vec::new();
        if let Ok(svg) = plot::roofline_svg(&r) {
            plots.push(("roofline".to_string(), svg));
        }
        if sweep {
            let svg = plot::serving_svg(&s, ttft_slo, tpot_slo).map_err(e)?;
            plots.push(("serving".to_string(), svg));
        }
        Ok((json(&r)?, plots))
    })
}

/// `meshplan plan train --json`: (report JSON, {kind: svg}). `search` is
/// the core's `SearchDims` as JSON (`max_global_batch`, `dtypes`,
/// `allow_fp8`; `{}`: the workload's batch and dtype only).
#[pyfunction]
#[pyo3(signature = (scenario_path, overrides, objective="time", top=10, threads=None, search="{}"))]
fn plan_train(
    py: Python<'_>,
    scenario_path: Option<&str>,
    overrides: &str,
    objective: &str,
    top: usize,
    threads: Option<usize>,
    search: &str,
) -> PyResult<(String, Vec<(String, String)>)> {
    let dims: SearchDims = from_json(search, "plan_train() arguments").py()?;
    let (sc, cat) = scenario(scenario_path, overrides)?;
    let req = PlanTrainRequest {
        workload: resolve_workload(&sc, &cat, None).py()?,
        objective: TrainObjective::parse(objective).py()?,
        top,
        threads,
        explain_rank: None,
        cancel: None,
    };
    interruptible(py, move || {
        let r = core_plan_train_with(&req, &dims, &|_, _| {}).py()?;
        let plots = every_plot(&kinds::PLAN_TRAIN, |k| kinds::plan_train(&r, Some(k)));
        Ok((json(&r)?, plots))
    })
}

/// `meshplan plan infer --json`: `request` is the core's
/// `PlanInferRequest` as JSON without its scenario (`max_chips`,
/// `ttft_slo`, `tpot_slo`, `objective`, `top`, `explain_rank`, `threads`;
/// what is left out takes the core's defaults); the scenario is the file
/// with the overrides written over it, as for every other function.
#[pyfunction]
#[pyo3(signature = (scenario_path, overrides, request="{}"))]
fn plan_infer(
    py: Python<'_>,
    scenario_path: Option<&str>,
    overrides: &str,
    request: &str,
) -> PyResult<String> {
    let mut req: PlanInferRequest = from_json(request, "plan_infer() arguments").py()?;
    let (sc, cat) = scenario(scenario_path, overrides)?;
    req.scenario = sc;
    interruptible(py, move || json(&core_plan_infer(&req, &cat).py()?))
}

/// `meshplan check CLAIMS --json`: scenario files resolve relative to it;
/// a file without claims is refused, as on the command line.
#[pyfunction]
fn check(py: Python<'_>, path: &str) -> PyResult<String> {
    let cat = meshplan_io::catalog(None).py()?;
    let path = path.to_string();
    interruptible(py, move || {
        json(&meshplan_io::check_claims(Path::new(&path), &cat, false).py()?)
    })
}

/// `meshplan validate DATASET... --json`: two or more sources add the
/// leave-one-source-out (held-out) report, as on the command line.
#[pyfunction]
#[pyo3(signature = (paths, all=false))]
fn validate(py: Python<'_>, paths: Vec<String>, all: bool) -> PyResult<String> {
    let (mut runs, mut skipped) = (Vec::new(), Vec::new());
    for path in &paths {
        let (r, s) = meshplan_io::dataset(Path::new(path)).py()?;
        runs.extend(r);
        skipped.extend(s);
    }
    // no thresholds: a Python caller judges the returned report itself
    let t = Thresholds::default();
    interruptible(py, move || {
        json(&validate_runs(&runs, skipped, None, &t, all))
    })
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MeshplanError", m.py().get_type::<MeshplanError>())?;
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add("UnknownNameError", m.py().get_type::<UnknownNameError>())?;
    m.add("FileError", m.py().get_type::<FileError>())?;
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
