//! `plan infer` and `infer` through the core's one serving request
//! ([`PlanInferRequest`]): the CLI's answer is the core's `plan_infer` of
//! the same request, its defaults included, and every SLO no plan can be
//! judged by (NaN, ≤ 0, infinite, over a day) is refused at once with the
//! core's one message — also the infinite SLO on the serving plot, which
//! used to spin forever.

use std::process::Stdio;
use std::time::{Duration, Instant};

use meshplan_core::inference::{defaults, slo::MAX_SLO_S};
use meshplan_core::planner::{plan_infer, InferObjective, PlanInferRequest};
use meshplan_core::Catalog;
use serde_json::{json, Value};

use crate::harness::{json, meshplan, Scratch};

/// Llama-3 8B on 8 H100s, TPOT at most 50 ms: nothing else given.
const PLAN: [&str; 9] = [
    "plan",
    "infer",
    "--model",
    "llama-3-8b",
    "--hw",
    "h100",
    "--chips",
    "8",
    "--tpot-slo=50ms",
];

/// The same request as the core takes it (the web API's body, Python's
/// keyword arguments).
fn core_request() -> PlanInferRequest {
    serde_json::from_value(json!({
        "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": 8 } },
        "tpot_slo": "50ms",
    }))
    .unwrap()
}

/// The report without its wall time.
fn timeless(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("search_time_s");
    v
}

/// Equal JSON, floats to 12 significant digits (a JSON round trip may move
/// the last bit).
fn same(a: &Value, b: &Value, path: &str) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(x), keys(y), "{path}");
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

#[test]
fn plan_infer_is_the_core_request_with_its_defaults() {
    let cli = timeless(json(&[&PLAN[..], &["--json"]].concat()));
    let core = plan_infer(&core_request(), Catalog::builtin()).unwrap();
    same(&cli, &timeless(serde_json::to_value(&core).unwrap()), "");
    // no --top, --prompt-len, --gen-len, --objective: the core's defaults
    assert_eq!(cli["prompt_len"], defaults::PROMPT_LEN);
    assert_eq!(cli["gen_len"], defaults::GEN_LEN);
    assert_eq!(cli["objective"], json!(InferObjective::default()));
    assert_eq!(cli["points"].as_array().unwrap().len(), defaults::PLAN_TOP);
}

/// Run `meshplan ARGS` with a deadline: (exit code, stderr, seconds).
fn run_within(args: &[&str], limit: Duration) -> (i32, String, f64) {
    let t0 = Instant::now();
    let mut child = meshplan()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("meshplan runs");
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.code().unwrap_or(-1), err, t0.elapsed().as_secs_f64());
        }
        if t0.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each SLO no plan can be judged by, as text (the CLI's only spelling).
const BAD_SLOS: [&str; 9] = [
    "inf",
    "1.7976931348623157e308",
    "nan",
    "-1",
    "0",
    "0s",
    "-50ms",
    "2 days",
    "soon",
];

#[test]
fn every_bad_slo_is_refused_promptly_by_infer_and_plan_infer() {
    let s = Scratch::new("slo");
    let svg = s.dir().join("s.svg");
    let svg = svg.to_str().unwrap();
    for v in BAD_SLOS {
        let tpot = format!("--tpot-slo={v}");
        let ttft = format!("--ttft-slo={v}");
        let infer = |slo: &str| {
            vec![
                "infer",
                "--model",
                "llama-3-8b",
                "--hw",
                "h100",
                "--chips",
                "1",
                "--plot",
                svg,
                "--plot-kind",
                "serving",
            ]
            .into_iter()
            .chain([slo])
            .map(str::to_string)
            .collect::<Vec<_>>()
        };
        for (args, name) in [
            (infer(&tpot), "tpot_slo"),
            (infer(&ttft), "ttft_slo"),
            (
                PLAN[..8]
                    .iter()
                    .copied()
                    .chain([tpot.as_str()])
                    .map(str::to_string)
                    .collect(),
                "tpot_slo",
            ),
            (
                PLAN[..8]
                    .iter()
                    .copied()
                    .chain([ttft.as_str()])
                    .map(str::to_string)
                    .collect(),
                "ttft_slo",
            ),
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, err, secs) = run_within(&args, Duration::from_secs(60));
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(
                err.contains(&format!("cannot read {name} from '"))
                    && err.contains("expected a positive duration of at most 86400 s"),
                "{args:?}: {err}"
            );
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert!(secs < 30.0, "{args:?} took {secs} s");
        }
    }
}

/// The largest SLO accepted still draws the serving plot (the ceiling is
/// [`MAX_SLO_S`], one day, and the axis then spans it).
#[test]
fn a_one_day_slo_draws_the_serving_plot() {
    let s = Scratch::new("slo-day");
    let svg = s.dir().join("s.svg");
    let day = format!("--tpot-slo={MAX_SLO_S}");
    let (code, err, _) = run_within(
        &[
            "infer",
            "--model",
            "llama-3-8b",
            "--hw",
            "h100",
            "--chips",
            "1",
            "--plot",
            svg.to_str().unwrap(),
            "--plot-kind",
            "serving",
            &day,
            "--ttft-slo=1 day",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("TPOT SLO"));
}
