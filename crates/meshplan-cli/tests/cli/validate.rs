//! `meshplan validate` and `meshplan calibrate` (issue 7): the fixture
//! subset, threshold exit codes, a calibrate round trip through
//! `--hw-profile`, and bad input (exit 2, never a panic).

use std::io::Read;
use std::process::Stdio;

use crate::harness::{
    assert_contains, assert_no_panic, f, json, meshplan, parse, run, u, Scratch, SUBSET,
};

const FULL: &str = "crates/meshplan-core/tests/fixtures/validation/playbook_h100_runs.csv";
const PUBLISHED: &str = "crates/meshplan-core/tests/fixtures/validation/published_runs.json";

#[test]
fn subset_json_and_thresholds() {
    let v = json(&["validate", SUBSET, "--json"]);
    // issue 11: {summary, runs, skipped, failures}
    assert_eq!(v["runs"].as_array().unwrap().len(), 327);
    assert!(v["skipped"].is_array());
    assert_eq!(v["failures"].as_array().unwrap().len(), 0);
    // reached on the subset: step median 8.3 %, OOM 91.4 % (92.0 % before
    // issue 11's one memory model; the core's regression bound is 91 %)
    assert!(f(&v, "summary.step.median") < 0.09);
    assert!(f(&v, "summary.oom_accuracy") > 0.91);
    // thresholds: met → 0, missed → 1 with the reason on stderr
    let (ok, _, err) = run(&[
        "validate",
        SUBSET,
        "--min-oom-accuracy",
        "0.9",
        "--max-memory-error",
        "0.2",
    ]);
    assert_eq!(ok, 0, "{err}");
    let (bad, _, err) = run(&["validate", SUBSET, "--max-median-error", "0.05"]);
    assert_eq!(bad, 1);
    assert_contains(&err, &["validate: median step-time error"]);
    let (bad, _, err) = run(&["validate", SUBSET, "--min-oom-accuracy", "0.99"]);
    assert_eq!(bad, 1);
    assert!(err.starts_with("validate: "), "{err}");
    // a missed threshold is listed in the JSON too
    let args = ["validate", SUBSET, "--json", "--max-median-error", "0.05"];
    let (bad, out, _) = run(&args);
    assert_eq!(bad, 1);
    let v = parse(&args, &out);
    assert_eq!(
        v["failures"].as_array().unwrap().len(),
        1,
        "{}",
        v["failures"]
    );
}

/// The issue-7 targets on the whole Playbook set, held by the CLI's threshold
/// flags the way a CI job would use them.
#[test]
fn full_playbook_meets_targets() {
    let v = json(&[
        "validate",
        FULL,
        "--json",
        "--max-median-error",
        "0.10",
        "--max-memory-error",
        "0.10",
        "--min-oom-accuracy",
        "0.90",
    ]);
    assert_eq!(u(&v, "summary.step.n"), 1716, "clean completed runs");
}

#[test]
fn published_pairs() {
    let (code, out, err) = run(&["validate", PUBLISHED]);
    assert_eq!(code, 0, "{err}");
    // the per-source summary names the profile picked by the run's interconnect
    assert_contains(
        &out,
        &[
            "recompute pair kor22-175b",
            "[h100@infiniband]",
            "[a100-80gb@infiniband]",
        ],
    );
    // Korthikanti ratios within 5 %, Megatron-Core median within 10 %
    let (code, _, err) = run(&["validate", PUBLISHED, "--max-median-error", "0.10"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&["validate", PUBLISHED, "--json"]);
    let pairs = v["summary"]["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 4, "22B, 175B, 530B, 1T");
    for p in pairs {
        assert!(f(p, "error").abs() < 0.05, "{p}");
    }
}

/// Two data sets, three sources: the held-out (leave-one-source-out) figures
/// beside the in-sample ones; one source alone says it is in-sample only.
#[test]
fn held_out_with_several_sources() {
    let v = json(&["validate", SUBSET, PUBLISHED, "--json"]);
    let h = &v["held_out"];
    let folds = h["folds"].as_array().unwrap();
    assert_eq!(folds.len(), 3, "kor22, mcore24, playbook");
    for fo in folds {
        let held = fo["source"].as_str().unwrap();
        let trained: Vec<&str> = fo["trained_on"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x.as_str())
            .collect();
        assert!(!trained.contains(&held), "{fo}");
        assert_eq!(trained.len(), 2, "{fo}");
    }
    for k in ["kor22", "mcore24", "playbook"] {
        assert!(f(h, &format!("held_out.by_source.{k}.median")) >= 0.0);
        assert!(f(h, &format!("in_sample.by_source.{k}.median")) >= 0.0);
    }
    assert!(u(h, "held_out.pooled.n") > 100);
    let (code, out, err) = run(&["validate", SUBSET]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["in-sample only"]);
}

/// `meshplan calibrate SUBSET --chip h100 --bootstrap 0 --iters N [extra…]`.
fn calibrate_subset(iters: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "calibrate",
        SUBSET,
        "--chip",
        "h100",
        "--bootstrap",
        "0",
        "--iters",
        iters,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn calibrate_round_trip_through_hw_profile() {
    let (code, toml, err) = calibrate_subset("150", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(toml.contains("matmul_efficiency"), "{toml}");
    let s = Scratch::new("calibrate");
    let p = s.write("cal.toml", &toml);
    let (code, _, err) = run(&["validate", SUBSET, "--hw-profile", &p]);
    assert_eq!(code, 0, "{err}");
}

/// `--hold-out`: fit on the even half, report the held-apart half (90 of
/// the subset's 177 clean runs) before and after.
#[test]
fn calibrate_hold_out() {
    let (code, toml, err) = calibrate_subset("100", &["--hold-out"]);
    assert_eq!(code, 0, "{err}");
    assert!(toml.contains("matmul_efficiency"));
    assert_contains(
        &err,
        &[
            "held-apart half (90 runs, not fitted on)",
            "calibrate: 87 runs with step time",
        ],
    );
    // issue 11: the same as one JSON object
    let (code, out, err) = calibrate_subset("100", &["--hold-out", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = parse(&["calibrate", "--json"], &out);
    assert_eq!(u(&v, "held_out.runs"), 90);
    assert_eq!(u(&v, "calibration.n_time"), 87);
    assert_eq!(v["profile"]["chip"], "h100");
    assert!(f(&v, "profile.matmul_efficiency") > 0.0);
    assert!(f(&v, "calibration.time_median_after") <= f(&v, "calibration.time_median_before"));
}

#[test]
fn bad_inputs_exit_2_without_panic() {
    let s = Scratch::new("validate-bad");
    let junk = s.write("junk.csv", "a,b\n1,2\n");
    let badjson = s.write("bad.json", "{not json");
    let badprof = s.write("bad.toml", "chip = \"h100\"\nmatmul_efficiency = \"x\"\n");
    for args in [
        vec!["validate", "no/such/file.csv"],
        vec!["validate", &badjson],
        vec!["validate", SUBSET, "--hw-profile", &badprof],
        vec!["calibrate", &junk, "--chip", "h100"],
        vec!["calibrate", SUBSET, "--chip", "no-such-chip"],
    ] {
        let (code, _, err) = run(&args);
        assert_no_panic(&args, &err);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
}

/// `meshplan … | head`: the reader goes away after a few lines. The command
/// must end quietly (status 0, no panic message), not panic on the closed pipe.
#[test]
fn closed_stdout_pipe_ends_quietly() {
    let mut child = meshplan()
        .args(["validate", FULL, "--all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    let mut out = child.stdout.take().unwrap();
    out.read_exact(&mut first).unwrap();
    drop(out); // the reader stops, as `head` does; the report is far larger than a pipe buffer
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_no_panic(&["validate", FULL, "--all"], &err);
    assert_eq!(status.code(), Some(0), "{err}");
}

const MB: &str = "crates/meshplan-core/tests/fixtures/microbench";

/// `calibrate --gemm/--attention/--nccl` (issue 25 item 4) on the sample
/// files writes a profile that `train --profile` uses: the GEMM sample runs
/// at 0.5 of peak against the built-in H100 GEMM curve's 0.8129 (x½ 17.5 →
/// 0; both times the same Megatron-Core matmul_stack_share), so
/// Llama-3.1-8B's GEMMs (smallest dimension ≥ 4,096 at tp = 1) take
/// 1.6258·x/(x + 17.5) ∈ [1.6258 × 4096/4113.5, 1.6258] times longer; the attention
/// sample's 0.35 against the built-in 0.200007 gives 0.200007/0.35.
#[test]
fn calibrate_from_microbenchmarks_feeds_train_profile() {
    let g = format!("{MB}/gemm_half_peak.csv");
    let a = format!("{MB}/attention_35pct.csv");
    let n1 = format!("all_reduce={MB}/nccl_all_reduce_1node.log");
    let n2 = format!("{MB}/nccl_all_reduce_2nodes.log");
    let (code, toml, err) = run(&[
        "calibrate",
        "--chip",
        "h100",
        "--gemm",
        &g,
        "--attention",
        &a,
        "--nccl",
        &n1,
        "--nccl",
        &n2,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&err, &["matmul_efficiency", "intra_node_efficiency"]);
    assert!(toml
        .contains("microbench: crates/meshplan-core/tests/fixtures/microbench/gemm_half_peak.csv"));
    let s = Scratch::new("microbench");
    let p = s.write("cal.toml", &toml);
    let model = [
        "train",
        "--model",
        "llama-3.1-8b",
        "--hw",
        "h100",
        "--chips",
        "8",
        "--batch-tokens",
        "1Mi",
        "--seq-len",
        "4096",
        "--json",
    ];
    let before = json(&model);
    let mut with = model.to_vec();
    with.extend(["--profile", &p]);
    let after = json(&with);
    let part = |v: &serde_json::Value, k: &str| f(v, &format!("predicted.time_breakdown_s.{k}"));
    let mm = part(&after, "matmul") / part(&before, "matmul");
    assert!(
        (1.6258 * 4096.0 / 4113.5 - 1e-9..=1.6258 + 1e-9).contains(&mm),
        "{mm}"
    );
    let at = part(&after, "attention") / part(&before, "attention");
    assert!((at - 0.200007 / 0.35).abs() < 1e-6, "{at}");
    // --json: the report with the fitted fields
    let j = ["calibrate", "--chip", "h100", "--gemm", &g, "--json"];
    let v = json(&j);
    assert_eq!(v["fitted"][0]["field"], "matmul_efficiency");
    assert!((f(&v, "profile.matmul_efficiency") - 0.5).abs() < 1e-6);
}

/// Bad microbenchmark input: exit 2 with file:line, never a panic.
#[test]
fn calibrate_microbenchmarks_bad_input() {
    let s = Scratch::new("microbench-bad");
    let bad = s.write("g.csv", "m,n,k,time_us\n1024,1024,oops,5\n");
    let (code, _, err) = run(&["calibrate", "--chip", "h100", "--gemm", &bad]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, &["g.csv:2", "`k`", "bad number"]);
    assert_no_panic(&["calibrate"], &err);
    let log = s.write("x.log", "hello\n");
    let (code, _, err) = run(&["calibrate", "--chip", "h100", "--nccl", &log]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, &["x.log:1", "KIND="]);
    // end-to-end measurements and microbenchmarks are separate calibrations
    let g = format!("{MB}/gemm_half_peak.csv");
    let (code, _, err) = run(&["calibrate", SUBSET, "--chip", "h100", "--gemm", &g]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["calibrate", "--chip", "h100"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["calibrate", "--chip", "h100", "--gemm", &g, "--hold-out"]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, &["--hold-out"]);
}
