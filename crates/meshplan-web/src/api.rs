//! The JSON endpoints. Each reads a request (a scenario as the scenario
//! file's sections in JSON, plus the endpoint's options), resolves it with
//! the core's scenario code and calls the core function the CLI command
//! of the same name calls; the answer carries the report exactly as
//! `--json` prints it, its document (the CLI's human output, as blocks and
//! as text), the derivation when asked and the plots (docs/web.md).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use meshplan_core::inference::{self, scenario::resolve as resolve_infer};
use meshplan_core::planner::{
    plan_infer as core_plan_infer, plan_train_with as core_plan_train_with, Cancel, ChipBudget,
    PlanInferRequest, PlanTrainRequest, SearchDims, TrainObjective,
};
use meshplan_core::trace::{NoTrace, Recorder, Step};
use meshplan_core::training::scenario::{resolve_with, resolve_workload};
use meshplan_core::view::{self, Render};
use meshplan_core::Catalog;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::request::{parse, slos, too_many_chips, too_many_plans, EvalRequest, PlanRequest};
use crate::{ApiError, AppState};

type Answer = Result<Json<Value>, ApiError>;

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

/// The 200 answer of an evaluation or search (see [`Evaluated`]).
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

/// `meshplan train`: memory, collectives, step time; memory, step-time and
/// (with a prediction) timeline plots.
pub fn eval_train(cat: &Catalog, q: &EvalRequest) -> Answer {
    q.no_slos()?;
    let (sc, cat) = q.resolve(cat)?;
    let s = resolve_with(&sc, &cat, None)?;
    let mut rec = Recorder::default();
    let r = if q.explain {
        s.analyze(&mut rec)
    } else {
        s.analyze(&mut NoTrace)
    };
    // the timeline is left out (as any plot that cannot be drawn) when
    // nothing is predicted
    let plots = vec![
        ("memory", meshplan_plot::memory_svg(&r)),
        ("step-time", meshplan_plot::step_time_svg(&r)),
        (
            "timeline",
            meshplan_plot::kinds::train(&s, &r, Some("timeline")),
        ),
    ];
    answer(&r, q.explain.then(|| rec.steps()), plots)
}

/// `meshplan infer`: KV cache, rooflines, latency; roofline and serving plots.
pub fn eval_infer(cat: &Catalog, q: &EvalRequest) -> Answer {
    // the SLOs are checked first, as the CLI and Python check them
    let (ttft_slo, tpot_slo) = slos(&q.ttft_slo, &q.tpot_slo).seconds()?;
    let (sc, cat) = q.resolve(cat)?;
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
            meshplan_plot::serving_svg(&s, ttft_slo, tpot_slo),
        ),
    ];
    answer(&r, q.explain.then(|| rec.steps()), plots)
}

/// `meshplan plan train`: ranked plans; Pareto plots. The search stops
/// early once `cancel` is set (the client left; the answer is dropped).
pub fn search_train(cat: &Catalog, q: &PlanRequest, cancel: &Cancel) -> Answer {
    if q.max_chips.is_some()
        || q.ttft_slo.is_some()
        || q.tpot_slo.is_some()
        || q.allow_quantization.is_some()
        || q.disagg.is_some()
    {
        return Err(ApiError::bad_request(
            "max_chips, ttft_slo, tpot_slo, allow_quantization and disagg are serving-search options (/api/plan/infer)",
        ));
    }
    let (sc, cat) = q.resolve(cat)?;
    let workload = resolve_workload(&sc, &cat, None)?;
    too_many_chips(workload.chips)?;
    let req = PlanTrainRequest {
        workload,
        objective: TrainObjective::parse(q.objective.as_deref().unwrap_or("time"))?,
        top: q.top()?,
        threads: None,
        explain_rank: None,
        cancel: Some(cancel.clone()),
    };
    let dims = SearchDims {
        max_global_batch: q.max_global_batch.clone(),
        dtypes: q.dtypes.clone(),
        allow_fp8: q.allow_fp8.unwrap_or(false),
    };
    let r = core_plan_train_with(&req, &dims, &|_, _| {})?;
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

/// `meshplan plan infer`: ranked serving plans, from the core's
/// [`PlanInferRequest`] (its defaults and checks), within the web API's
/// limits on chips and plans.
pub fn search_infer(cat: &Catalog, q: &PlanRequest) -> Answer {
    if q.max_global_batch.is_some() || q.dtypes.is_some() || q.allow_fp8.is_some() {
        return Err(ApiError::bad_request(
            "max_global_batch, dtypes and allow_fp8 are training-search options (/api/plan/train)",
        ));
    }
    let (scenario, cat) = q.resolve(cat)?;
    let req = PlanInferRequest {
        scenario,
        max_chips: q.max_chips,
        ttft_slo: q.ttft_slo.clone(),
        tpot_slo: q.tpot_slo.clone(),
        objective: q.objective.clone(),
        allow_quantization: q.allow_quantization,
        top: q.top,
        explain_rank: None,
        threads: None,
        disagg: q.disagg.clone(),
    };
    if req.top() > crate::MAX_TOP {
        return Err(too_many_plans(req.top()));
    }
    let chip = req.scenario.hardware.resolve_chip(&cat)?;
    match req.chip_budget(&chip)? {
        ChipBudget::Exactly(n) | ChipBudget::AtMost(n) => too_many_chips(n)?,
    }
    let r = core_plan_infer(&req, &cat)?;
    answer(&r, None, Vec::new())
}

/// One endpoint: its request type, its core call, and whether it is a
/// search (run one at a time: each keeps every core busy).
pub trait Endpoint {
    /// The JSON body.
    type Request: DeserializeOwned + Send + 'static;
    /// Whether requests wait for the one search permit.
    const SEARCH: bool;
    /// The answer, computed by the core; a search polls `cancel`.
    fn answer(cat: &Catalog, q: &Self::Request, cancel: &Cancel) -> Answer;
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
    ($t:ty, $q:ty, $search:expr, |$cat:ident, $r:ident, $c:ident| $body:expr) => {
        impl Endpoint for $t {
            type Request = $q;
            const SEARCH: bool = $search;
            fn answer($cat: &Catalog, $r: &$q, $c: &Cancel) -> Answer {
                $body
            }
        }
    };
}
endpoint!(Train, EvalRequest, false, |cat, q, _c| eval_train(cat, q));
endpoint!(Infer, EvalRequest, false, |cat, q, _c| eval_infer(cat, q));
endpoint!(PlanTrain, PlanRequest, true, |cat, q, c| search_train(
    cat, q, c
));
endpoint!(PlanInfer, PlanRequest, true, |cat, q, _c| search_infer(
    cat, q
));

/// Sets the flag when dropped: the handler's future holds it, so a client
/// that leaves (hyper drops the future) cancels the search it started.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The handler of every POST endpoint: parse, then compute on the blocking
/// pool (a search keeps a core busy for up to a second; the async workers
/// keep answering), where a panic is caught and answered as a 500.
pub async fn handle<E: Endpoint>(
    State(st): State<Arc<AppState>>,
    busy: Option<axum::Extension<crate::idle::Busy>>,
    h: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let q: E::Request = parse(&h, body)?;
    // computing is not idling: the connection's idle timeout waits
    let _busy = busy.as_ref().map(|b| b.enter());
    let searches = E::SEARCH.then(|| st.searches.clone());
    let st2 = st.clone();
    let cancel = Cancel::default();
    let _left = CancelOnDrop(cancel.clone());
    compute(searches, move || E::answer(&st2.catalog, &q, &cancel)).await?
}

/// Run `work` on the blocking pool; with `permits` (searches), first take
/// the one permit and hand it to the worker, which holds it until `work`
/// returns. A client that leaves drops this future, not the worker: a
/// search it started is cancelled (the handler's [`CancelOnDrop`]) and
/// keeps the permit until it has really stopped, so
/// repeated clicks queue instead of stacking searches on the cores; a
/// client that leaves while still waiting for the permit starts nothing.
pub(crate) async fn compute<T: Send + 'static>(
    permits: Option<Arc<tokio::sync::Semaphore>>,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let permit = match permits {
        Some(p) => Some(
            p.acquire_owned()
                .await
                .map_err(|_| ApiError::internal("the search permit was closed"))?,
        ),
        None => None,
    };
    tokio::task::spawn_blocking(move || {
        let _held = permit;
        work()
    })
    .await
    .map_err(|_| ApiError::internal("the computation panicked"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A search whose client left (its future dropped) keeps the permit
    /// until the worker finishes; then the permit is free again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_permit_is_held_until_the_work_stops() {
        let sem = Arc::new(tokio::sync::Semaphore::new(1));
        let (release, wait) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel::<()>();
        let fut = compute(Some(sem.clone()), move || {
            started_tx.send(()).unwrap();
            // bounded: the test releases it, or it gives up after 5 s
            let _ = wait.recv_timeout(Duration::from_secs(5));
        });
        let task = tokio::spawn(fut);
        tokio::task::spawn_blocking(move || started.recv_timeout(Duration::from_secs(5)))
            .await
            .unwrap()
            .expect("the work started");
        // the client leaves
        task.abort();
        let _ = task.await;
        assert_eq!(sem.available_permits(), 0, "released while still computing");
        release.send(()).unwrap();
        for _ in 0..500 {
            if sem.available_permits() == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the permit was not given back after the work stopped");
    }
}
