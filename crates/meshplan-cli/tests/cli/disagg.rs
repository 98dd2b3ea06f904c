//! `infer --prefill … --decode …` and `plan infer --disagg` (issue 26,
//! parts 4–5) from the command line: the flags are the scenario keys, bad
//! pools are refused with their flag, and `--plot` draws the Pareto front.

use crate::harness::{assert_close, f, json, rejects, run, Scratch};

const L70_H200: [&str; 8] = [
    "--model",
    "llama-3.1-70b",
    "--hw",
    "h200",
    "--prompt-len",
    "4096",
    "--gen-len",
    "1024",
];

/// The flags and the scenario file's keys give the same report.
#[test]
fn pool_flags_are_the_scenario_keys() {
    let mut a = vec!["infer", "--json", "--engine", "vllm"];
    a.extend(L70_H200);
    a.extend([
        "--prefill",
        "tp=4,workers=2",
        "--decode",
        "tp=8,workers=1,batch=128",
        "--kv-overlap",
    ]);
    let flags = json(&a);
    let file = json(&[
        "infer",
        "--json",
        "examples/infer/disagg-llama-70b-h200.toml",
    ]);
    assert_eq!(flags, file);
    // 2·4 + 8 chips; KV of a 4096-token prompt: 2·8·128·80·2·4096 B
    assert_eq!(f(&file, "chips"), 16.0);
    assert_close(
        f(&file, "kv_bytes_per_request"),
        1_342_177_280.0,
        1e-12,
        "KV",
    );
}

#[test]
fn bad_pools_are_refused() {
    let with = |extra: &[&'static str]| {
        let mut a = vec!["infer"];
        a.extend(L70_H200);
        a.extend(extra);
        a
    };
    rejects(&with(&["--prefill", "tp=8"]), &["--decode"]);
    rejects(
        &with(&["--prefill", "tp=x", "--decode", "tp=8"]),
        &["prefill", "tp=x"],
    );
    rejects(
        &with(&["--prefill", "tp=8", "--decode", "tp=3"]),
        &["--decode", "TP = 3"],
    );
    rejects(
        &with(&["--prefill", "tp=8", "--decode", "tp=8", "--chips", "8"]),
        &["16 chips", "8"],
    );
    rejects(
        &[
            "plan",
            "infer",
            "--model",
            "llama-3-8b",
            "--hw",
            "h100",
            "--chips",
            "8",
            "--disagg",
            "maybe",
        ],
        &["disagg", "maybe"],
    );
}

#[test]
fn plan_infer_plots_the_pareto_front() {
    let s = Scratch::new("disagg-plot");
    let svg = s.dir().join("p.svg");
    let svg = svg.to_str().unwrap();
    let (code, out, err) = run(&[
        "plan",
        "infer",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--max-chips",
        "8",
        "--tpot-slo",
        "50ms",
        "--disagg",
        "on",
        "--plot",
        svg,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("P tp"), "{out}");
    let text = std::fs::read_to_string(svg).unwrap();
    assert!(text.contains("output tokens/s per user"));
    assert!(text.contains("disaggregated (P/D pools)"));
    assert!(text.contains("TPOT SLO 50 ms"));
}
