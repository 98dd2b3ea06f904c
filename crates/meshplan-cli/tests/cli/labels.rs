//! Issue 12, labels that are true: the roofline figures called bounds bound
//! the prediction (`train` and every plan of `plan train`), `train
//! --explain` keeps the report, and chip words match the chip (H100 is not
//! "ICI-bound", MI300X's scale-up link is Infinity Fabric, not NVLink).

use crate::harness::{f, json, run};

/// The plan: cp 2 + ZeRO-2 at sequence 8,192 on 64 H100s.
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
fn the_lower_bound_bounds_the_prediction_and_nothing_else_is_called_a_bound() {
    let mut a = CP_ZERO2.to_vec();
    a.push("--json");
    let v = json(&a);
    let lower = f(&v, "step_time_lower_s");
    assert!(f(&v, "predicted.step_time_s") >= lower, "{v}");
    // the no-overlap figure is not a bound of the prediction: it is not called one
    let (_, out, _) = run(&CP_ZERO2);
    assert!(
        out.contains("roofline step time, nothing overlapped"),
        "{out}"
    );
    for l in out.lines().filter(|l| l.contains("nothing overlapped")) {
        assert!(!l.contains("bound") && !l.contains("upper"), "{l}");
    }
    // every ranked plan: predicted ≥ its roofline lower bound, printed as "roofline ≥"
    let v = json(&[
        "plan",
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
        "--top",
        "10",
        "--json",
    ]);
    let plans = v["plans"].as_array().expect("plans");
    assert!(!plans.is_empty());
    for p in plans {
        let pred = p["predicted_step_time_s"].as_f64().expect("predicted");
        let lower = p["step_time_lower_s"].as_f64().expect("lower bound");
        assert!(pred >= lower * (1.0 - 1e-12), "{pred} < {lower}");
    }
}

#[test]
fn train_explain_keeps_the_report() {
    let (code, out, _) = run(&CP_ZERO2
        .iter()
        .copied()
        .chain(["--explain"])
        .collect::<Vec<_>>());
    assert_eq!(code, 0);
    for needle in [
        "memory per device",
        "step time predicted",
        "collective",
        "Derivation",
    ] {
        assert!(out.contains(needle), "no {needle:?}:\n{out}");
    }
}

#[test]
fn chip_words_match_the_chip() {
    let (_, out, _) = run(&[
        "train",
        "--model",
        "llama-2-7b",
        "--hw",
        "h100",
        "--chips",
        "8",
        "--explain",
    ]);
    assert!(!out.contains("ICI"), "{out}");
    for args in [
        vec!["hw", "show", "mi300x"],
        vec![
            "train",
            "--model",
            "llama-2-7b",
            "--hw",
            "mi300x",
            "--chips",
            "16",
        ],
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        assert!(!out.contains("NVLink"), "{args:?}:\n{out}");
    }
}
