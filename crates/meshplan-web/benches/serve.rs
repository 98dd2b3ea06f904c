//! `meshplan serve` answering through its router (no socket: the HTTP
//! parsing a socket adds is microseconds): a train and an infer evaluation
//! with their plots (target < 50 ms each) and the 405B / 16,384-H100 plan
//! search of meshplan-core's planner benchmark (target < 1 s), each the whole
//! request — JSON in, scenario resolved, core report, plots, JSON out.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use meshplan_core::Catalog;
use serde_json::{json, Value};
use tower::ServiceExt;

fn main() {
    divan::main();
}

/// Post `body` to `path` and wait for the whole answer.
fn answer(rt: &tokio::runtime::Runtime, app: &axum::Router, path: &str, body: &Value) -> usize {
    let req = Request::post(path)
        .header(header::HOST, "127.0.0.1")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    rt.block_on(async {
        let res = app.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap()
            .len()
    })
}

fn bench(b: divan::Bencher, path: &str, body: Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let app = meshplan_web::router(Catalog::builtin().clone(), true);
    b.bench(|| answer(&rt, &app, path, &body));
}

/// LLaMA-3 8B on 64 H100s (the README's 3D example), memory, step-time and
/// timeline plots.
#[divan::bench(sample_count = 20)]
fn train_eval(b: divan::Bencher) {
    let sc = json!({
        "model": { "name": "llama-3-8b" },
        "hardware": { "chip": "h100", "mesh": "8x8" },
        "training": { "batch_tokens": "4Mi", "seq_len": 8192, "remat": "selective" },
        "parallelism": { "dp": 4, "tp": 8, "pp": 2, "zero": 1, "microbatches": 128, "sequence_parallel": true },
    });
    bench(b, "/api/train", json!({ "scenario": sc }));
}

/// The book's ch7 LLaMA-2 13B on 8 TPU v5e, roofline and serving plots.
#[divan::bench(sample_count = 20)]
fn infer_eval(b: divan::Bencher) {
    let sc = json!({
        "model": { "name": "llama-2-13b" },
        "hardware": { "chip": "tpu-v5e@book", "mesh": "2x4" },
        "inference": { "batch": 8, "context": 8192 },
    });
    bench(
        b,
        "/api/infer",
        json!({ "scenario": sc, "tpot_slo": "50ms" }),
    );
}

/// LLaMA-3.1 405B on 16,384 H100s, 16Mi-token batch, T = 8192: the search
/// meshplan-core's `plan` benchmark times, through the API (all cores).
#[divan::bench(sample_count = 5)]
fn plan_train_405b_16384(b: divan::Bencher) {
    let sc = json!({
        "model": { "name": "llama-3.1-405b" },
        "hardware": { "chip": "h100", "chips": 16384 },
        "training": { "batch_tokens": "16Mi", "seq_len": 8192 },
    });
    bench(b, "/api/plan/train", json!({ "scenario": sc }));
}
