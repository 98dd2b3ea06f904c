//! Issue 12, labels that are true. A prediction names every input outside
//! the ranges its profile was fitted on, in the human output and in
//! `--json` (`predicted.outside_fitted_range`: {input, value,
//! fitted_range}), and `calibrate` records the ranges of the runs it
//! fitted; the roofline figures called bounds bound the prediction (`train`
//! and every plan of `plan train`); `train --explain` keeps the report; chip
//! words match the chip (no "ICI" on an H100, no NVLink on an MI300X).

use serde_json::{json as j, Value};

use crate::harness::{at, f, json, run, Scratch};

/// The reproducer: context parallelism 2, ZeRO-2, sequence 8,192 on
/// the H100 InfiniBand profile (fitted on sequence 4096, ZeRO 0-1, cp 1).
const CP_ZERO2: &str = "train --model llama-3.1-8b --hw h100 --chips 64 --batch-tokens 4Mi \
    --seq-len 8192 --cp 2 --tp 4 --dp 8 --zero 2 --remat full";

/// A command line as words, `extra` appended.
fn args<'a>(line: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    line.split_whitespace()
        .chain(extra.iter().copied())
        .collect()
}

/// `predicted.outside_fitted_range` of a `train --json` run.
fn outside(line: &str) -> Vec<Value> {
    let v = json(&args(line, &["--json"]));
    at(&v, "predicted.outside_fitted_range")
        .as_array()
        .expect("a list")
        .clone()
}

#[test]
fn outside_inputs_are_named_in_json_and_text() {
    assert_eq!(
        outside(CP_ZERO2),
        [
            j!({"input": "sequence length", "value": 8192, "fitted_range": [4096, 4096]}),
            j!({"input": "ZeRO stage", "value": 2, "fitted_range": [0, 1]}),
            j!({"input": "cp", "value": 2, "fitted_range": [1, 1]}),
        ]
    );
    let (code, out, _) = run(&args(CP_ZERO2, &[]));
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
    let job =
        "train --model llama-3.1-8b --chips 64 --batch-tokens 1Mi --seq-len 4096 --tp 8 --dp 8";
    // a Playbook-like job: every input inside
    assert_eq!(
        outside(&format!("{job} --hw h100 --zero 1")),
        Vec::<Value>::new()
    );
    // another chip (its own curves, the end-to-end terms fitted on H100 runs) names the chip
    let o = outside(&format!("{job} --hw h200"));
    assert!(
        o.contains(&j!({"input": "chip", "value": "h200", "fitted_range": ["h100"]})),
        "{o:?}"
    );
    // a job beyond the fitted nodes names the node count
    let big = "train --model llama-3.1-8b --hw h100 --chips 8192 --batch-tokens 16Mi --seq-len 4096 --tp 8 --dp 1024";
    let o = outside(big);
    assert!(
        o.contains(&j!({"input": "nodes", "value": 1024, "fitted_range": [1, 768]})),
        "{o:?}"
    );
}

#[test]
fn calibrate_records_the_fitted_ranges() {
    let s = Scratch::new("ranges-calibrate");
    let data = "crates/meshplan-core/tests/fixtures/validation/playbook_subset.csv";
    let (code, p, err) = run(&args(
        "calibrate --chip h100 --bootstrap 0 --iters 20",
        &[data],
    ));
    assert_eq!(code, 0, "{err}");
    for needle in [
        "[fitted_on]",
        "seq_len = [4096, 4096]",
        "framework = [\"nanotron\"]",
    ] {
        assert!(p.contains(needle), "no {needle:?} in:\n{p}");
    }
    // and a prediction with that profile is checked against them
    let profile = s.write("p.toml", &p);
    let v = json(&args(
        "train --model llama-3.1-8b --hw h100 --chips 64 --batch-tokens 4Mi --seq-len 8192 --tp 8 --dp 8 --json --hw-profile",
        &[&profile],
    ));
    let o = at(&v, "predicted.outside_fitted_range").to_string();
    assert!(o.contains("\"sequence length\""), "{o}");
}

#[test]
fn the_lower_bound_bounds_the_prediction_and_nothing_else_is_called_a_bound() {
    let v = json(&args(CP_ZERO2, &["--json"]));
    assert!(
        f(&v, "predicted.step_time_s") >= f(&v, "step_time_lower_s"),
        "{v}"
    );
    // the no-overlap figure does not bound the prediction: not called a bound
    let (_, out, _) = run(&args(CP_ZERO2, &[]));
    let l = out.lines().find(|l| l.contains("nothing overlapped"));
    assert!(
        l.is_some_and(|l| !l.contains("bound") && !l.contains("upper")),
        "{out}"
    );
    // every ranked plan: predicted ≥ its roofline lower bound ("roofline ≥")
    let v = json(&args(
        "plan train --model llama-3.1-8b --hw h100 --chips 64 --batch-tokens 4Mi --seq-len 8192 --top 10 --json",
        &[],
    ));
    let plans = v["plans"].as_array().expect("plans");
    assert!(!plans.is_empty());
    for p in plans {
        let (pred, lower) = (f(p, "predicted_step_time_s"), f(p, "step_time_lower_s"));
        assert!(pred >= lower * (1.0 - 1e-12), "{pred} < {lower}");
    }
}

#[test]
fn train_explain_keeps_the_report_and_chip_words_match_the_chip() {
    let (code, out, _) = run(&args(CP_ZERO2, &["--explain"]));
    assert_eq!(code, 0);
    for needle in [
        "memory per device",
        "step time predicted",
        "collective",
        "Derivation",
    ] {
        assert!(out.contains(needle), "no {needle:?}:\n{out}");
    }
    let (_, out, _) = run(&args(
        "train --model llama-2-7b --hw h100 --chips 8 --explain",
        &[],
    ));
    assert!(!out.contains("ICI"), "{out}");
    for line in [
        "hw show mi300x",
        "train --model llama-2-7b --hw mi300x --chips 16",
    ] {
        let (code, out, err) = run(&args(line, &[]));
        assert_eq!(code, 0, "{err}");
        assert!(!out.contains("NVLink"), "{line}:\n{out}");
    }
}
