//! `train --trace FILE.json`: the predicted step's timeline as a Chrome
//! trace, and `--plot-kind timeline`.

use serde_json::Value;

use crate::harness::{assert_close, cmd, f, json, rejects, run, Scratch, L3_8B_H100};

/// LLaMA-3 8B on 64 H100s, TP 8 in the node with SP, PP 2 (1F1B), ZeRO-1
/// DP 4: the repository's 3-D example, with 8 micro-batches.
const PLAN_3D: [&str; 4] = [
    "train",
    "examples/train/llama-3-8b-h100-3d.toml",
    "--microbatches",
    "8",
];

/// Run `args` with `--trace` into a scratch file; (the trace, the report).
fn traced(args: &[&str]) -> (Value, Value) {
    let s = Scratch::new("trace");
    let path = s.dir().join("step.json");
    let p = path.to_str().unwrap();
    let report = json(&cmd(&[args, &["--json", "--trace", p]]));
    let text = std::fs::read_to_string(&path).expect("--trace wrote its file");
    (
        serde_json::from_str(&text).expect("the trace is JSON"),
        report,
    )
}

/// Seconds of the trace's critical-path "X" events (`ts`/`dur` in µs).
fn critical_path_s(trace: &Value) -> f64 {
    trace["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "X" && e["args"]["critical_path"] == true)
        .map(|e| e["dur"].as_f64().unwrap() / 1e6)
        .sum()
}

/// The trace parses, names its stages and streams, and its critical path
/// adds up to `train --json`'s `predicted.step_time_s` (within 1 %) — on the
/// 3-D plan, one without a pipeline, and an interleaved one.
#[test]
fn trace_critical_path_is_the_predicted_step() {
    let interleaved = [
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "64",
        "--batch-tokens",
        "4Mi",
        "--seq-len",
        "8192",
        "--tp",
        "8",
        "--pp",
        "4",
        "--dp",
        "2",
        "--schedule",
        "interleaved",
        "--virtual-stages",
        "2",
        "--microbatches",
        "8",
    ];
    let no_pipeline = [
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "8",
        "--tp",
        "8",
    ];
    for args in [&PLAN_3D[..], &interleaved, &no_pipeline] {
        let (trace, report) = traced(args);
        let step = f(&report, "predicted.step_time_s");
        assert_close(critical_path_s(&trace), step, 0.01, &format!("{args:?}"));
        let ev = trace["traceEvents"].as_array().unwrap();
        let stages = report["predicted"]["schedule"]["stages"].as_u64().unwrap();
        let processes = ev.iter().filter(|e| e["name"] == "process_name").count() as u64;
        assert_eq!(processes, stages, "{args:?}");
        assert!(ev
            .iter()
            .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "compute"));
        let passes = ev.iter().filter(|e| e["cat"] == "forward").count() as u64;
        let s = &report["predicted"]["schedule"];
        let chunks = s["virtual_stages"].as_u64().unwrap();
        assert_eq!(
            passes,
            stages * s["microbatches"].as_u64().unwrap() * chunks
        );
    }
}

/// The 3-D plan's trace shows the bubble on both stages and the data-parallel
/// reduction on the scale-out network.
#[test]
fn trace_shows_the_bubble_and_the_networks() {
    let (trace, _) = traced(&PLAN_3D);
    let ev = trace["traceEvents"].as_array().unwrap();
    for pid in [0, 1] {
        assert!(ev
            .iter()
            .any(|e| e["pid"] == pid && e["name"] == "pipeline bubble"));
    }
    assert!(ev
        .iter()
        .any(|e| e["name"] == "DP reduce-scatter + all-gather (InfiniBand)"));
}

/// No prediction (fp32 GEMMs): exit 2 and the report's reason; the input
/// file is never overwritten.
#[test]
fn trace_refuses_without_prediction_and_over_its_input() {
    let s = Scratch::new("trace-bad");
    let out = s.dir().join("x.json");
    let o = out.to_str().unwrap();
    rejects(
        &cmd(&[
            &["train"],
            &L3_8B_H100,
            &["--chips", "8", "--tp", "8", "--dtype", "fp32", "--trace", o],
        ]),
        &["--trace", "prediction not available", "fp32"],
    );
    assert!(!out.exists());
    let input = s.write(
        "plan.toml",
        std::fs::read(crate::harness::root().join(PLAN_3D[1])).unwrap(),
    );
    let before = std::fs::read_to_string(&input).unwrap();
    rejects(
        &["train", &input, "--trace", &input],
        &["input", "refusing"],
    );
    assert_eq!(std::fs::read_to_string(&input).unwrap(), before);
    // 2 stages × 1,048,576 micro-batches × 2 = 4,194,304 passes: more than
    // a timeline lays out (2^17), refused at once with the reason
    rejects(
        &[
            PLAN_3D[0],
            PLAN_3D[1],
            "--seq-len",
            "1",
            "--batch-tokens",
            "4Mi",
            "--microbatches",
            "1048576",
            "--trace",
            o,
        ],
        &["4194304 forward and backward passes", "131072"],
    );
    assert!(!out.exists());
}

/// `--plot-kind timeline` draws the step (every stage's compute track and
/// the bubble in the legend).
#[test]
fn timeline_plot_kind() {
    let s = Scratch::new("timeline-plot");
    let svg = s.dir().join("t.svg");
    let (code, _, err) = run(&cmd(&[
        &PLAN_3D,
        &["--plot", svg.to_str().unwrap(), "--plot-kind", "timeline"],
    ]));
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    for needle in [
        "stage 0",
        "stage 1",
        "pipeline bubble (idle)",
        "forward",
        "backward",
    ] {
        assert!(text.contains(needle), "{needle} missing from the SVG");
    }
}
