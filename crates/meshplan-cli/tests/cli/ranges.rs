//! Issue 12, honest labels: a prediction names every input outside the
//! ranges its profile was fitted on, in the human output and in `--json`
//! (`predicted.outside_fitted_range`: {input, value, fitted_range}), and
//! `calibrate` records the ranges of the runs it fitted.

use crate::harness::{at, json, run, Scratch};

/// The reproducer: context parallelism 2, ZeRO-2, sequence 8,192 on
/// the H100 InfiniBand profile (fitted on sequence 4096, ZeRO 0-1, cp 1).
const CP_ZERO2: [&str; 21] = [
    "train",
    "--model",
    "llama-3.1-8b",
    "--hw",
    "h100",
    "--chips",
    "64",
    "--batch-tokens",
    "4Mi",
    "--seq-len",
    "8192",
    "--cp",
    "2",
    "--tp",
    "4",
    "--dp",
    "8",
    "--zero",
    "2",
    "--remat",
    "full",
];

#[test]
fn outside_inputs_are_named_in_json_and_text() {
    let mut a = CP_ZERO2.to_vec();
    a.push("--json");
    let v = json(&a);
    let o = at(&v, "predicted.outside_fitted_range");
    assert_eq!(
        o,
        &serde_json::json!([
            {"input": "sequence length", "value": 8192, "fitted_range": [4096, 4096]},
            {"input": "ZeRO stage", "value": 2, "fitted_range": [0, 1]},
            {"input": "cp", "value": 2, "fitted_range": [1, 1]},
        ])
    );
    let (code, out, _) = run(&CP_ZERO2);
    assert_eq!(code, 0);
    for needle in [
        "3 inputs outside the ranges the profile was fitted on",
        "  sequence length ",
        "8192 (fitted: 4096)",
        "2 (fitted: 0–1)",
        "  cp ",
    ] {
        assert!(out.contains(needle), "no {needle:?} in:\n{out}");
    }
    assert!(!out.contains("within"), "{out}");
}

#[test]
fn inside_and_transferred_and_job_size() {
    // a Playbook-like job on the EFA profile's own framework: all inside
    let v = json(&[
        "train",
        "--model",
        "llama-3.1-8b",
        "--hw",
        "h100",
        "--chips",
        "64",
        "--batch-tokens",
        "1Mi",
        "--seq-len",
        "4096",
        "--tp",
        "8",
        "--dp",
        "8",
        "--zero",
        "1",
        "--json",
    ]);
    assert_eq!(
        at(&v, "predicted.outside_fitted_range"),
        &serde_json::json!([])
    );
    // another chip (a profile transferred from the H100 fit) names the chip
    let v = json(&[
        "train",
        "--model",
        "llama-3.1-8b",
        "--hw",
        "h200",
        "--chips",
        "64",
        "--batch-tokens",
        "1Mi",
        "--seq-len",
        "4096",
        "--tp",
        "8",
        "--dp",
        "8",
        "--json",
    ]);
    let o = at(&v, "predicted.outside_fitted_range").as_array().unwrap();
    assert!(
        o.iter()
            .any(|e| e["input"] == "chip" && e["value"] == "h200"),
        "{o:?}"
    );
    // a job beyond the fitted nodes names the node count
    let v = json(&[
        "train",
        "--model",
        "llama-3.1-8b",
        "--hw",
        "h100",
        "--chips",
        "8192",
        "--batch-tokens",
        "16Mi",
        "--seq-len",
        "4096",
        "--tp",
        "8",
        "--dp",
        "1024",
        "--json",
    ]);
    let o = at(&v, "predicted.outside_fitted_range").as_array().unwrap();
    assert!(
        o.iter()
            .any(|e| e["input"] == "nodes" && e["value"] == 1024),
        "{o:?}"
    );
}

#[test]
fn calibrate_records_the_fitted_ranges() {
    let s = Scratch::new("ranges-calibrate");
    let (code, p, err) = run(&[
        "calibrate",
        "crates/meshplan-core/tests/fixtures/validation/playbook_subset.csv",
        "--chip",
        "h100",
        "--bootstrap",
        "0",
        "--iters",
        "20",
    ]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "[fitted_on]",
        "seq_len = [4096, 4096]",
        "framework = [\"nanotron\"]",
    ] {
        assert!(p.contains(needle), "no {needle:?} in:\n{p}");
    }
    let out = s.write("p.toml", &p);
    // and a prediction with that profile is checked against them
    let v = json(&[
        "train",
        "--model",
        "llama-3.1-8b",
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
        "--dp",
        "8",
        "--hw-profile",
        &out,
        "--json",
    ]);
    let o = at(&v, "predicted.outside_fitted_range").as_array().unwrap();
    assert!(o.iter().any(|e| e["input"] == "sequence length"), "{o:?}");
}
