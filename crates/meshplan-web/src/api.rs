//! The JSON endpoints. Each reads a request (a scenario as the scenario
//! file's sections in JSON, plus the endpoint's options), resolves it with
//! the core's scenario code and calls the core function the CLI command
//! of the same name calls; the answer carries the report exactly as
//! `--json` prints it, its document (the CLI's human output, as blocks and
//! as text), the derivation when asked and the plots (docs/web.md).

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::Json;
use meshplan_core::inference::{self, scenario::resolve as resolve_infer};
use meshplan_core::planner::{
    plan_infer as core_plan_infer, plan_train as core_plan_train, ChipBudget, InferObjective,
    InferSearch, PlanTrainRequest, TrainObjective,
};
use meshplan_core::scenario::{Count, Scenario};
use meshplan_core::trace::{NoTrace, Recorder, Step};
use meshplan_core::training::analyze_with;
use meshplan_core::training::scenario::{resolve_with, resolve_workload};
use meshplan_core::view::{self, Render};
use meshplan_core::Catalog;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ApiError, AppState, MAX_SEARCH_CHIPS, MAX_TOP};

type Answer = Result<Json<Value>, ApiError>;

/// The model and scenario every request carries (the same two fields in
/// each request, not a flattened struct: serde cannot refuse unknown keys
/// across `flatten`).
pub struct Target<'a> {
    /// The scenario: `model`, `hardware`, `training`, `inference`,
    /// `parallelism` sections as in a scenario TOML file.
    pub scenario: &'a Scenario,
    /// A pasted Hugging Face `config.json`: the model (instead of
    /// `scenario.model.name`), imported as `meshplan --model config.json` does.
    pub model_config: Option<&'a str>,
}

/// `POST /api/train` and `POST /api/infer`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct EvalRequest {
    /// The scenario (see [`Target`]).
    #[serde(default)]
    pub scenario: Scenario,
    /// A pasted `config.json` (see [`Target`]).
    #[serde(default)]
    pub model_config: Option<String>,
    /// Include the derivation in the book's symbols (`--explain`).
    #[serde(default)]
    pub explain: bool,
    /// Infer only: TTFT SLO line on the serving plot ("500ms" or seconds).
    #[serde(default)]
    pub ttft_slo: Option<Duration>,
    /// Infer only: TPOT SLO line on the serving plot.
    #[serde(default)]
    pub tpot_slo: Option<Duration>,
}

/// `POST /api/plan/train` and `POST /api/plan/infer`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The scenario (see [`Target`]).
    #[serde(default)]
    pub scenario: Scenario,
    /// A pasted `config.json` (see [`Target`]).
    #[serde(default)]
    pub model_config: Option<String>,
    /// Objective (`--objective`): time | cost | memory-headroom for
    /// training, throughput | cost | latency for serving.
    #[serde(default)]
    pub objective: Option<String>,
    /// Plans to list (`--top`, default 10, at most [`MAX_TOP`]).
    #[serde(default)]
    pub top: Option<usize>,
    /// Serving only: any slice up to this many chips (`--max-chips`).
    #[serde(default)]
    pub max_chips: Option<Count>,
    /// Serving only: TTFT SLO (`--ttft-slo`).
    #[serde(default)]
    pub ttft_slo: Option<Duration>,
    /// Serving only: TPOT SLO (`--tpot-slo`).
    #[serde(default)]
    pub tpot_slo: Option<Duration>,
}

/// A duration as seconds or as the CLI writes it ("500ms", "1.3 ms").
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum Duration {
    Seconds(f64),
    Text(String),
}

impl Duration {
    fn seconds(&self) -> Result<f64, ApiError> {
        match self {
            Duration::Seconds(s) if s.is_finite() && *s > 0.0 => Ok(*s),
            Duration::Seconds(s) => Err(ApiError::bad_request(format!(
                "SLO {s} s: expected a positive number of seconds"
            ))),
            Duration::Text(t) => Ok(meshplan_core::units::parse_seconds(t)?.get()),
        }
    }
}

fn secs(d: &Option<Duration>) -> Result<Option<f64>, ApiError> {
    d.as_ref().map(Duration::seconds).transpose()
}

/// The answer of every evaluation: the `--json` report, its document, the
/// CLI's human text, the derivation (text) and the plots by kind.
#[derive(Serialize)]
struct Evaluated<'a, R: Serialize> {
    report: &'a R,
    doc: view::Doc,
    text: String,
    derivation: Option<String>,
    plots: Vec<(&'static str, String)>,
}

fn answer<R: Serialize + Render>(
    r: &R,
    steps: Option<&[Step]>,
    plots: Vec<(&'static str, meshplan_plot::Result<String>)>,
) -> Answer {
    let doc = r.doc();
    let text = view::render_text(&doc);
    let ok = Evaluated {
        report: r,
        doc,
        text,
        derivation: steps.map(meshplan_core::trace::render_text),
        // a plot that cannot be drawn (nothing to plot) is left out, as in
        // the Python package
        plots: plots
            .into_iter()
            .filter_map(|(k, s)| s.ok().map(|s| (k, s)))
            .collect(),
    };
    serde_json::to_value(&ok)
        .map(Json)
        .map_err(|e| ApiError::internal(&format!("cannot serialize the report: {e}")))
}

/// Parse a JSON body: 415 unless `application/json` (a cross-site form
/// cannot send that without a preflight), 413 past the body limit, 400
/// with the field path (`scenario.training.batch_tokens: …`) otherwise.
fn parse<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("application/json")
    {
        return Err(ApiError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            message: format!("Content-Type '{ct}': the API takes application/json"),
        });
    }
    let body = body.map_err(|r| ApiError {
        status: r.status(),
        message: match r.status() {
            StatusCode::PAYLOAD_TOO_LARGE => format!(
                "request body over {} bytes (a scenario and a config.json are far smaller)",
                crate::MAX_BODY_BYTES
            ),
            _ => r.body_text(),
        },
    })?;
    // serde would also read a struct from an array; the API documents objects
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::bad_request(
            "request body: expected a JSON object like {\"scenario\": {\"model\": {\"name\": …}}}",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(&body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ApiError::bad_request(format!("request body: {inner}"))
        } else {
            ApiError::bad_request(format!("{path}: {inner}"))
        }
    })
}

impl Target<'_> {
    /// The scenario and the catalog it resolves against: with a pasted
    /// config.json, a copy of the catalog holding that model, named as the
    /// scenario's model. Files are never read: a `[model] file` is refused.
    fn resolve<'c>(&self, cat: &'c Catalog) -> Result<(Scenario, Cow<'c, Catalog>), ApiError> {
        let mut sc = self.scenario.clone();
        if let Some(f) = &sc.model.file {
            return Err(ApiError::bad_request(format!(
                "scenario.model.file = \"{f}\": the web API reads no files; paste the config.json as model_config"
            )));
        }
        let Some(text) = self.model_config else {
            return Ok((sc, Cow::Borrowed(cat)));
        };
        let mut cat = cat.clone();
        let mut no_files = |p: &str| Err(format!("the web API reads no files ('{p}')"));
        let (name, _) = meshplan_core::scenario::add_model_file_with(
            &mut cat,
            text,
            "config.json",
            &mut no_files,
        )?;
        sc.model.name = Some(name);
        Ok((sc, Cow::Owned(cat)))
    }

    /// [`Self::resolve`], refusing a scenario without a model as the CLI does.
    fn resolve_model<'c>(
        &self,
        cat: &'c Catalog,
    ) -> Result<(Scenario, Cow<'c, Catalog>), ApiError> {
        let (sc, cat) = self.resolve(cat)?;
        if sc.model.name.is_none() && !sc.model.has_overrides() {
            return Err(ApiError::bad_request(
                "no model given: set scenario.model.name (a catalog model) or paste a config.json",
            ));
        }
        Ok((sc, cat))
    }
}

/// `meshplan train`: memory, collectives, step time; memory and step-time plots.
pub fn eval_train(cat: &Catalog, q: &EvalRequest) -> Answer {
    let (sc, cat) = target(&q.scenario, &q.model_config).resolve_model(cat)?;
    let s = resolve_with(&sc, &cat, None)?;
    let prof = s.profile.as_ref();
    let mut rec = Recorder::default();
    let r = if q.explain {
        analyze_with(&s.spec, &s.chip, &s.topo, &s.cfg, prof, &mut rec)
    } else {
        analyze_with(&s.spec, &s.chip, &s.topo, &s.cfg, prof, &mut NoTrace)
    };
    let plots = vec![
        ("memory", meshplan_plot::memory_svg(&r)),
        ("step-time", meshplan_plot::step_time_svg(&r)),
    ];
    answer(&r, q.explain.then(|| rec.steps()), plots)
}

/// `meshplan infer`: KV cache, rooflines, latency; roofline and serving plots.
pub fn eval_infer(cat: &Catalog, q: &EvalRequest) -> Answer {
    let (sc, cat) = target(&q.scenario, &q.model_config).resolve_model(cat)?;
    let s = resolve_infer(&sc, &cat)?;
    let mut rec = Recorder::default();
    let r = if q.explain {
        inference::evaluate(&s.model, &s.chip, &s.query, &mut rec)?
    } else {
        inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace)?
    };
    let plots = vec![
        ("roofline", meshplan_plot::roofline_svg(&r)),
        (
            "serving",
            meshplan_plot::serving_svg(&s, secs(&q.ttft_slo)?, secs(&q.tpot_slo)?),
        ),
    ];
    answer(&r, q.explain.then(|| rec.steps()), plots)
}

fn target<'a>(scenario: &'a Scenario, model_config: &'a Option<String>) -> Target<'a> {
    Target {
        scenario,
        model_config: model_config.as_deref(),
    }
}

fn top(q: &PlanRequest) -> Result<usize, ApiError> {
    match q.top.unwrap_or(10) {
        t if t > MAX_TOP => Err(ApiError::bad_request(format!(
            "top = {t}: the web page lists at most {MAX_TOP} plans (the CLI has no limit)"
        ))),
        t => Ok(t),
    }
}

fn too_many_chips(n: u64) -> Result<(), ApiError> {
    if n > MAX_SEARCH_CHIPS {
        return Err(ApiError::bad_request(format!(
            "{n} chips: the web page searches at most {MAX_SEARCH_CHIPS} chips (use `meshplan plan` for more)"
        )));
    }
    Ok(())
}

/// `meshplan plan train`: ranked plans; Pareto plots.
pub fn search_train(cat: &Catalog, q: &PlanRequest) -> Answer {
    if q.max_chips.is_some() || q.ttft_slo.is_some() || q.tpot_slo.is_some() {
        return Err(ApiError::bad_request(
            "max_chips, ttft_slo and tpot_slo are serving-search options (/api/plan/infer)",
        ));
    }
    let (sc, cat) = target(&q.scenario, &q.model_config).resolve_model(cat)?;
    let workload = resolve_workload(&sc, &cat, None)?;
    too_many_chips(workload.chips)?;
    let req = PlanTrainRequest {
        workload,
        objective: TrainObjective::parse(q.objective.as_deref().unwrap_or("time"))?,
        top: top(q)?,
        threads: None,
        explain_rank: None,
    };
    let r = core_plan_train(&req, &|_, _| {})?;
    let plots = vec![
        (
            "pareto",
            meshplan_plot::pareto_svg(&r, meshplan_plot::ParetoAxis::Memory),
        ),
        (
            "pareto-cost",
            meshplan_plot::pareto_svg(&r, meshplan_plot::ParetoAxis::Cost),
        ),
    ];
    answer(&r, None, plots)
}

/// `meshplan plan infer`: ranked serving plans.
pub fn search_infer(cat: &Catalog, q: &PlanRequest) -> Answer {
    let (sc, cat) = target(&q.scenario, &q.model_config).resolve_model(cat)?;
    let spec = sc.model.resolve(&cat)?;
    let chip = sc.hardware.resolve_chip(&cat)?;
    let mut s = InferSearch::from_scenario(&sc, &spec, &chip, q.max_chips.map(|c| c.0))?;
    match s.chips {
        ChipBudget::Exactly(n) | ChipBudget::AtMost(n) => too_many_chips(n)?,
    }
    let top = top(q)?;
    s.ttft_slo = secs(&q.ttft_slo)?;
    s.tpot_slo = secs(&q.tpot_slo)?;
    s.objective = InferObjective::parse(q.objective.as_deref().unwrap_or("throughput"))?;
    s.top_k = top.max(1);
    let r = core_plan_infer(&s, top, None)?;
    answer(&r, None, Vec::new())
}

/// One endpoint: its request type, its core call, and whether it is a
/// search (run one at a time: each keeps every core busy).
pub trait Endpoint {
    /// The JSON body.
    type Request: DeserializeOwned + Send + 'static;
    /// Whether requests wait for the one search permit.
    const SEARCH: bool;
    /// The answer, computed by the core.
    fn answer(cat: &Catalog, q: &Self::Request) -> Answer;
}

/// `POST /api/train`.
pub struct Train;
/// `POST /api/infer`.
pub struct Infer;
/// `POST /api/plan/train`.
pub struct PlanTrain;
/// `POST /api/plan/infer`.
pub struct PlanInfer;

macro_rules! endpoint {
    ($t:ty, $q:ty, $search:expr, $f:path) => {
        impl Endpoint for $t {
            type Request = $q;
            const SEARCH: bool = $search;
            fn answer(cat: &Catalog, q: &$q) -> Answer {
                $f(cat, q)
            }
        }
    };
}
endpoint!(Train, EvalRequest, false, eval_train);
endpoint!(Infer, EvalRequest, false, eval_infer);
endpoint!(PlanTrain, PlanRequest, true, search_train);
endpoint!(PlanInfer, PlanRequest, true, search_infer);

/// The handler of every POST endpoint: parse, then compute on the blocking
/// pool (a search keeps a core busy for up to a second; the async workers
/// keep answering), where a panic is caught and answered as a 500.
pub async fn handle<E: Endpoint>(
    State(st): State<Arc<AppState>>,
    h: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let q: E::Request = parse(&h, body)?;
    let _permit = if E::SEARCH {
        Some(st.searches.acquire().await)
    } else {
        None
    };
    let st2 = st.clone();
    tokio::task::spawn_blocking(move || E::answer(&st2.catalog, &q))
        .await
        .map_err(|_| ApiError::internal("the computation panicked"))?
}

/// `GET /api/catalog`: the model and chip names for the page's pickers.
pub async fn catalog(State(st): State<Arc<AppState>>) -> Json<Value> {
    let names = |v: Vec<(&str, &str)>| -> Vec<Value> {
        v.into_iter()
            .map(|(n, d)| serde_json::json!({ "name": n, "display_name": d }))
            .collect()
    };
    let c = &st.catalog;
    Json(serde_json::json!({
        "models": names(c.models().iter().map(|m| (m.name.as_str(), m.display_name.as_str())).collect()),
        "chips": names(c.chips().iter().map(|h| (h.name.as_str(), h.display_name.as_str())).collect()),
    }))
}
