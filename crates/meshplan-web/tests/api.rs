//! The JSON API through the router (no socket): the answers carry the
//! reports the core builds from the same scenario given as a TOML file (the
//! CLI's input), published numbers for a pasted config.json, and every kind
//! of bad request is a 4xx JSON error with the core's message, never a 5xx.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::analyze_with;
use meshplan_core::Catalog;
use serde_json::{json, Value};
use tower::ServiceExt;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn app() -> axum::Router {
    meshplan_web::router(Catalog::builtin().clone(), true)
}

async fn send(req: Request<Body>) -> (StatusCode, Value, axum::http::HeaderMap) {
    let res = app().oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (parts.status, v, parts.headers)
}

fn post_raw(path: &str, ct: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(path)
        .header(header::HOST, "127.0.0.1:8787")
        .header(header::CONTENT_TYPE, ct)
        .body(body.into())
        .unwrap()
}

async fn post(path: &str, body: Value) -> (StatusCode, Value) {
    let (s, v, _) = send(post_raw(path, "application/json", body.to_string())).await;
    (s, v)
}

/// An example scenario file: (its TOML text, the same as JSON).
fn example(rel: &str) -> (String, Value) {
    let text = std::fs::read_to_string(format!("{ROOT}/examples/{rel}")).unwrap();
    let v: Value = toml::from_str(&text).unwrap();
    (text, v)
}

/// Equal JSON, floats to 12 significant digits: serde_json's default float
/// parsing (this test's) may miss the last bit of what the server wrote.
fn same(a: &Value, b: &Value, path: &str) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{path}"
            );
            for (k, v) in x {
                same(v, &y[k], &format!("{path}.{k}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{path}");
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                same(v, w, &format!("{path}[{i}]"));
            }
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                "{path}: {x} vs {y}"
            );
        }
        _ => assert_eq!(a, b, "{path}"),
    }
}

fn plot_kinds(ans: &Value) -> Vec<&str> {
    ans["plots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn train_answers_the_reports_of_the_scenario_file() {
    let (text, sc) = example("train/llama-3-8b-h100-3d.toml");
    let (s, ans) = post("/api/train", json!({ "scenario": sc })).await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    // the same scenario read as the CLI reads the file
    let parsed = Scenario::parse(&text, "file").unwrap();
    let t =
        meshplan_core::training::scenario::resolve_with(&parsed, Catalog::builtin(), None).unwrap();
    let p = t.profile.as_ref();
    let r = analyze_with(&t.spec, &t.chip, &t.topo, &t.cfg, p, &mut NoTrace);
    same(&ans["report"], &serde_json::to_value(&r).unwrap(), "report");
    let doc = meshplan_core::view::Render::doc(&r);
    assert_eq!(ans["text"], meshplan_core::view::render_text(&doc));
    assert_eq!(ans["derivation"], Value::Null);
    assert_eq!(plot_kinds(&ans), ["memory", "step-time", "timeline"]);
    assert!(ans["plots"][0][1].as_str().unwrap().starts_with("<svg"));
    // the timeline is the one the CLI's --plot-kind timeline draws
    let timeline = meshplan_plot::kinds::train(&t, &r, Some("timeline")).unwrap();
    assert_eq!(ans["plots"][2][1], timeline.as_str());
}

/// Without a prediction (fp32 GEMMs) the train tab has no timeline plot
/// and no error: the report's prediction note says why.
#[tokio::test]
async fn train_without_a_prediction_has_no_timeline() {
    let (_, mut sc) = example("train/llama-3-8b-h100-3d.toml");
    sc["training"]["compute_dtype"] = json!("fp32");
    let (s, ans) = post("/api/train", json!({ "scenario": sc })).await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    assert_eq!(plot_kinds(&ans), ["memory", "step-time"]);
    let note = ans["report"]["prediction_note"].as_str().unwrap();
    assert!(note.contains("fp32"), "{note}");
}

#[tokio::test]
async fn infer_answers_the_reports_of_the_scenario_file() {
    let (text, sc) = example("infer/ch7-pq1-llama2-13b.toml");
    let (s, ans) = post(
        "/api/infer",
        json!({ "scenario": sc, "explain": true, "tpot_slo": "50ms", "ttft_slo": 0.5 }),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    let parsed = Scenario::parse(&text, "file").unwrap();
    let i = meshplan_core::inference::scenario::resolve(&parsed, Catalog::builtin()).unwrap();
    let r = meshplan_core::inference::evaluate(&i.model, &i.chip, &i.query, &mut NoTrace).unwrap();
    same(&ans["report"], &serde_json::to_value(&r).unwrap(), "report");
    assert!(ans["derivation"].as_str().unwrap().contains('='));
    assert_eq!(plot_kinds(&ans), ["roofline", "serving"]);
}

#[tokio::test]
async fn a_pasted_config_json_is_the_model() {
    let config = std::fs::read_to_string(format!(
        "{ROOT}/crates/meshplan-core/tests/fixtures/hf/llama-3.1-8b.json"
    ))
    .unwrap();
    let scenario =
        json!({ "model": { "name": "ignored" }, "hardware": { "chip": "h100", "chips": 8 } });
    let (s, ans) = post(
        "/api/train",
        json!({ "scenario": scenario, "model_config": config }),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    // Published: Hub API safetensors.total of meta-llama/Llama-3.1-8B.
    assert_eq!(ans["report"]["params"], 8_030_261_248u64);
    // named after the config's model_type (it has no _name_or_path), as
    // the CLI names a config.json outside a named folder; never "config"
    assert_eq!(ans["report"]["model"], "llama");
}

#[tokio::test]
async fn plan_searches_answer_ranked_plans() {
    let body = json!({
        "scenario": { "model": { "name": "llama-2-13b" }, "hardware": { "chip": "h100", "chips": 64 },
                      "training": { "batch_tokens": "4Mi", "seq_len": 4096 } },
        "top": 3,
    });
    let (s, ans) = post("/api/plan/train", body).await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    let plans = ans["report"]["plans"].as_array().unwrap();
    assert!(!plans.is_empty() && plans.len() <= 3);
    assert_eq!(plot_kinds(&ans)[0], "pareto");

    // the batch and dtype search (issue 25): the core's report, as the CLI's
    let body = json!({
        "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": 8 },
                      "training": { "batch_tokens": "64Ki", "seq_len": 4096 } },
        "top": 2, "max_global_batch": "128Ki", "allow_fp8": true,
    });
    let (s, ans) = post("/api/plan/train", body).await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    let searched = &ans["report"]["searched"];
    assert_eq!(searched["batches_tokens"], json!([65536, 131072]));
    assert_eq!(searched["dtypes"], json!(["bf16", "fp8"]));
    assert!(
        ans["report"]["plans"][0]["variant"]["tokens_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );

    let body = json!({
        "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": 8 } },
        "objective": "latency", "top": 2, "tpot_slo": "50ms",
    });
    let (s, ans) = post("/api/plan/infer", body).await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    assert!(!ans["report"]["plans"].as_array().unwrap().is_empty());
}

/// Each bad request, its status and a piece of its message.
#[tokio::test]
async fn bad_requests_are_4xx_json_with_the_core_message() {
    let m = |name: &str| json!({ "model": { "name": name }, "hardware": { "chip": "h100", "chips": 8 } });
    let cases: Vec<(&str, Value, StatusCode, &str)> = vec![
        (
            "/api/train",
            json!({ "scenario": m("llama-3-8bb") }),
            StatusCode::BAD_REQUEST,
            "did you mean 'llama-3-8b'",
        ),
        (
            "/api/train",
            json!({ "scenario": { "hardware": { "chip": "h100" } } }),
            StatusCode::BAD_REQUEST,
            "no model given",
        ),
        (
            "/api/train",
            json!({ "scenario": { "model": { "name": "llama-3-8b" }, "training": { "batch_tokens": "xx" } } }),
            StatusCode::BAD_REQUEST,
            "scenario.training.batch_tokens",
        ),
        (
            "/api/train",
            json!({ "scenario": m("llama-3-8b"), "colour": 1 }),
            StatusCode::BAD_REQUEST,
            "unknown field `colour`",
        ),
        (
            "/api/train",
            json!({ "scenario": { "model": { "file": "/etc/passwd" } } }),
            StatusCode::BAD_REQUEST,
            "reads no files",
        ),
        (
            "/api/train",
            json!({ "scenario": m("llama-3-8b"), "model_config": "{" }),
            StatusCode::BAD_REQUEST,
            "config.json",
        ),
        (
            "/api/train",
            json!([1, 2]),
            StatusCode::BAD_REQUEST,
            "request body",
        ),
        (
            "/api/train",
            json!({ "scenario": m("llama-3-8b"), "tpot_slo": "50ms" }),
            StatusCode::BAD_REQUEST,
            "serving options",
        ),
        (
            "/api/infer",
            json!({ "scenario": m("llama-3-8b"), "tpot_slo": "soon" }),
            StatusCode::BAD_REQUEST,
            "duration",
        ),
        (
            "/api/infer",
            json!({ "scenario": m("llama-3-8b"), "tpot_slo": -1 }),
            StatusCode::BAD_REQUEST,
            "positive",
        ),
        (
            "/api/infer",
            json!({ "scenario": m("llama-3-8b"), "top": 3 }),
            StatusCode::BAD_REQUEST,
            "unknown field `top`",
        ),
        (
            "/api/plan/train",
            json!({ "scenario": m("llama-3-8b"), "top": 1000 }),
            StatusCode::BAD_REQUEST,
            "at most 100 plans",
        ),
        (
            "/api/plan/train",
            json!({ "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": "1Mi" } } }),
            StatusCode::BAD_REQUEST,
            "at most 65536 chips",
        ),
        (
            "/api/plan/train",
            json!({ "scenario": m("llama-3-8b"), "max_chips": 8 }),
            StatusCode::BAD_REQUEST,
            "serving-search options",
        ),
        (
            "/api/plan/train",
            json!({ "scenario": m("llama-3-8b"), "objective": "speed" }),
            StatusCode::BAD_REQUEST,
            "speed",
        ),
        (
            "/api/plan/train",
            json!({ "scenario": m("llama-3-8b"), "max_global_batch": "1Ki" }),
            StatusCode::BAD_REQUEST,
            "below the batch",
        ),
        (
            "/api/plan/train",
            json!({ "scenario": m("llama-3-8b"), "dtypes": "bf16,int4" }),
            StatusCode::BAD_REQUEST,
            "--dtypes",
        ),
        (
            "/api/plan/infer",
            json!({ "scenario": m("llama-3-8b"), "allow_fp8": true }),
            StatusCode::BAD_REQUEST,
            "training-search options",
        ),
        (
            "/api/plan/infer",
            json!({ "scenario": m("llama-3-8b"), "max_chips": "1M" }),
            StatusCode::BAD_REQUEST,
            "at most 65536 chips",
        ),
        (
            "/api/plan/infer",
            json!({ "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100" } } }),
            StatusCode::BAD_REQUEST,
            "chips",
        ),
    ];
    for (path, body, status, msg) in cases {
        let (s, ans) = post(path, body.clone()).await;
        let e = ans["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{path} {body}: {ans}"));
        assert_eq!(s, status, "{path} {body}: {e}");
        assert!(e.contains(msg), "{path} {body}: {e}");
    }
}

#[tokio::test]
async fn transport_errors_are_json_too() {
    let ok = json!({ "scenario": { "model": { "name": "llama-3-8b" } } }).to_string();
    let (s, v, _) = send(post_raw("/api/train", "text/plain", ok.clone())).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(v["error"].as_str().unwrap().contains("application/json"));
    let big = format!(
        "{{\"scenario\": {{}}, \"model_config\": \"{}\"}}",
        "x".repeat(2 << 20)
    );
    let (s, v, _) = send(post_raw("/api/train", "application/json", big)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(v["error"].as_str().unwrap().contains("bytes"));
    let (s, v, _) = send(post_raw("/api/train", "application/json", "{not json")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let get = |path: &str, host: &str| {
        Request::get(path)
            .header(header::HOST, host)
            .body(Body::empty())
            .unwrap()
    };
    let (s, v, _) = send(get("/api/nothing", "localhost:8787")).await;
    assert_eq!((s, v["error"].is_string()), (StatusCode::NOT_FOUND, true));
    let (s, v, _) = send(get("/api/train", "localhost:8787")).await;
    assert_eq!(
        (s, v["error"].is_string()),
        (StatusCode::METHOD_NOT_ALLOWED, true)
    );
    // DNS rebinding: another site's name pointed at 127.0.0.1
    let (s, v, _) = send(get("/", "evil.example:8787")).await;
    assert_eq!(s, StatusCode::MISDIRECTED_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("evil.example"));
}

#[tokio::test]
async fn odd_bodies_never_answer_5xx() {
    let bodies = [
        "null", "0", "\"\"", "{}", "{\"scenario\": null}", "{\"scenario\": 5}",
        "{\"scenario\": {\"hardware\": {\"chips\": -1}}}",
        "{\"scenario\": {\"model\": {\"name\": \"llama-3-8b\"}, \"hardware\": {\"chip\": \"h100\", \"chips\": 0}}}",
        "{\"scenario\": {\"model\": {\"name\": \"llama-3-8b\"}, \"hardware\": {\"chip\": \"h100\", \"chips\": 1e300}}}",
        "{\"scenario\": {\"model\": {\"name\": \"llama-3-8b\"}, \"hardware\": {\"chip\": \"h100\", \"mesh\": \"0x8\"}}}",
        "{\"scenario\": {\"model\": {\"name\": \"llama-3-8b\"}, \"hardware\": {\"chip\": \"h100\", \"chips\": 8}, \"parallelism\": {\"tp\": 0}}}",
        "{\"scenario\": {\"model\": {\"name\": \"llama-3-8b\"}, \"hardware\": {\"chip\": \"h100\", \"chips\": 8}, \"inference\": {\"batch\": \"1e18\"}}}",
        "{\"scenario\": {\"model\": {\"n_layers\": 1}}}",
    ];
    for path in [
        "/api/train",
        "/api/infer",
        "/api/plan/train",
        "/api/plan/infer",
    ] {
        for b in bodies {
            let (s, v, _) = send(post_raw(path, "application/json", b)).await;
            assert!(s.is_success() || s.is_client_error(), "{path} {b}: {s} {v}");
            if !s.is_success() {
                assert!(v["error"].is_string(), "{path} {b}: {v}");
            }
        }
    }
}

#[tokio::test]
async fn the_page_and_catalog_are_served_with_a_strict_policy() {
    let get = |path: &str| {
        Request::get(path)
            .header(header::HOST, "127.0.0.1:8787")
            .body(Body::empty())
            .unwrap()
    };
    for (path, ct) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/style.css", "text/css"),
    ] {
        let res = app().oneshot(get(path)).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let h = res.headers();
        assert!(h[header::CONTENT_TYPE].to_str().unwrap().starts_with(ct));
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"));
    }
    let (s, v, _) = send(get("/api/catalog")).await;
    assert_eq!(s, StatusCode::OK);
    let names = |k: &str| -> Vec<String> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names("models").contains(&"llama-3.1-405b".to_string()));
    assert!(names("chips").contains(&"h100".to_string()));
}

/// `POST /api/plan/infer` is the core's one serving request: the same
/// answer as `meshplan_core::planner::plan_infer` of the body (what the CLI
/// runs for the same flags, crates/meshplan-cli/tests/cli/serving_request.rs),
/// defaults included — no `top` lists the core's default number of plans.
#[tokio::test]
async fn plan_infer_is_the_core_request_with_its_defaults() {
    use meshplan_core::inference::defaults;
    use meshplan_core::planner::{plan_infer, PlanInferRequest};
    let body = json!({
        "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": 8 } },
        "tpot_slo": "50ms",
    });
    let (s, ans) = post("/api/plan/infer", body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    let req: PlanInferRequest = serde_json::from_value(body).unwrap();
    let core = plan_infer(&req, Catalog::builtin()).unwrap();
    let timeless = |mut v: Value| {
        v.as_object_mut().unwrap().remove("search_time_s");
        v
    };
    same(
        &timeless(ans["report"].clone()),
        &timeless(serde_json::to_value(&core).unwrap()),
        "report",
    );
    let points = ans["report"]["points"].as_array().unwrap();
    assert_eq!(points.len(), defaults::PLAN_TOP);
    assert_eq!(ans["report"]["prompt_len"], defaults::PROMPT_LEN);
    assert_eq!(ans["report"]["gen_len"], defaults::GEN_LEN);
}

/// `allow_quantization` reaches the core's request: with it the answer is
/// the core's for the same body (quantized dtypes searched), without it the
/// search says it kept the model's bf16; on `/api/plan/train` it is a
/// serving-only option (400).
#[tokio::test]
async fn plan_infer_takes_allow_quantization() {
    use meshplan_core::planner::{plan_infer, PlanInferRequest};
    let sc =
        json!({ "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": 8 } });
    let body = json!({ "scenario": sc, "tpot_slo": "50ms", "allow_quantization": true });
    let (s, ans) = post("/api/plan/infer", body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    let req: PlanInferRequest = serde_json::from_value(body).unwrap();
    let core = serde_json::to_value(plan_infer(&req, Catalog::builtin()).unwrap()).unwrap();
    assert_eq!(ans["report"]["dtypes"], core["dtypes"]);
    let (_, plain) = post(
        "/api/plan/infer",
        json!({ "scenario": sc, "tpot_slo": "50ms" }),
    )
    .await;
    assert_ne!(plain["report"]["dtypes"], ans["report"]["dtypes"]);
    let (s, _) = post(
        "/api/plan/train",
        json!({ "scenario": sc, "allow_quantization": true }),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

/// `disagg` reaches the core's request: the answer lists the core's
/// disaggregated plans for the same body; a bad mode is a 400 naming it; on
/// `/api/plan/train` it is a serving-only option (400).
#[tokio::test]
async fn plan_infer_takes_disagg() {
    use meshplan_core::planner::{plan_infer, PlanInferRequest};
    let sc = json!({ "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100" } });
    let body = json!({ "scenario": sc, "max_chips": 8, "tpot_slo": "50ms", "disagg": "on" });
    let (s, ans) = post("/api/plan/infer", body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{ans}");
    let req: PlanInferRequest = serde_json::from_value(body).unwrap();
    let core = serde_json::to_value(plan_infer(&req, Catalog::builtin()).unwrap()).unwrap();
    // the same plans in the same order, every figure to the last bit
    let plans = |v: &Value| -> Vec<String> {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                format!(
                    "{} {} {} {} {}",
                    p["disagg"], p["chips"], p["tp"], p["batch"], p["engine"]
                )
            })
            .collect()
    };
    assert_eq!(plans(&ans["report"]), plans(&core));
    assert!(ans["report"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p.get("disagg").is_some()));
    assert_eq!(ans["report"]["disagg"], "on");
    let (s, bad) = post(
        "/api/plan/infer",
        json!({ "scenario": sc, "max_chips": 8, "disagg": "maybe" }),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(bad.to_string().contains("maybe"), "{bad}");
    let (s, _) = post("/api/plan/train", json!({ "scenario": sc, "disagg": "on" })).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

/// Every SLO no plan can be judged by — as a number or as text — is a 400
/// with the core's one message on both serving endpoints (JSON has no NaN
/// or infinity: those travel as text).
#[tokio::test]
async fn every_bad_slo_is_a_400_with_the_core_message() {
    let sc =
        json!({ "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": 8 } });
    let bad = [
        json!(-1),
        json!(0),
        json!(0.0),
        json!(1.7976931348623157e308),
        json!(1e5),
        json!("0s"),
        json!("inf"),
        json!("nan"),
        json!("-1"),
        json!("2 days"),
    ];
    for path in ["/api/infer", "/api/plan/infer"] {
        for v in &bad {
            for name in ["ttft_slo", "tpot_slo"] {
                let mut body = json!({ "scenario": sc });
                body[name] = v.clone();
                let (s, ans) = post(path, body).await;
                let e = ans["error"].as_str().unwrap_or_default();
                assert_eq!(s, StatusCode::BAD_REQUEST, "{path} {name}={v}: {ans}");
                assert!(
                    e.contains(&format!("cannot read {name} from '"))
                        && e.contains("expected a positive duration of at most 86400 s"),
                    "{path} {name}={v}: {e}"
                );
            }
        }
    }
}
