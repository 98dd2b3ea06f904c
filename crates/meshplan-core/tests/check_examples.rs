//! Every shipped claims file, every verdict: a formula regression flips a
//! PASS into a FAIL (or a FAIL into a PASS) here.

use std::path::{Path, PathBuf};

use meshplan_core::check::{check, parse_claims, ClaimResult, SlipKind, Verdict};
use meshplan_core::Catalog;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn results(rel: &str) -> Vec<ClaimResult> {
    let path = root().join(rel);
    let src = std::fs::read_to_string(&path).unwrap();
    let dir = path.parent().unwrap().to_path_buf();
    let mut resolve = |p: &str| {
        let f = dir.join(p);
        std::fs::read_to_string(&f)
            .map(|t| (f.display().to_string(), t))
            .map_err(|e| e.to_string())
    };
    let f = parse_claims(&src, rel, &mut resolve).unwrap_or_else(|e| panic!("{e}"));
    let r = check(&f, Catalog::builtin(), true).unwrap_or_else(|e| panic!("{e}"));
    r.claims
}

fn run(rel: &str) -> Vec<(String, Verdict)> {
    results(rel)
        .into_iter()
        .map(|c| (c.id, c.verdict))
        .collect()
}

fn assert_verdicts(rel: &str, expected: &[(&str, Verdict)]) {
    let got = run(rel);
    let ids: Vec<&str> = got.iter().map(|(i, _)| i.as_str()).collect();
    let want: Vec<&str> = expected.iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, want, "{rel}: claim ids changed");
    for ((id, v), (_, w)) in got.iter().zip(expected) {
        assert_eq!(v, w, "{rel}: claim {id}");
    }
}

use Verdict::{Fail as F, Pass as P};

#[test]
fn seed_000_ch5() {
    assert_verdicts(
        "examples/claims/seed-000-ch5.toml",
        &[
            ("ex1-params", P),
            ("ex1-params-approx", P),
            ("ex2-param-bytes", P),
            ("ex2-optimizer-bytes", P),
            ("ex2-activations", P),
            ("ex3-hbm", P),
            ("ex3-peak", P),
            ("ex3-w-ici", P),
            ("ex3-alpha", P),
            ("ex3.1-pure-dp", P),
            ("ex3.1-dp-lower-bound", P),
            ("ex3.2-params-per-device", P),
            ("ex3.2-state-bytes", P),
            ("ex3.2-activations", P),
            ("ex3.2-activations-sum", F),
            ("ex3.2-fsdp-max-chips", P),
            ("ex3.2-slice-chips", F),
            ("ex3.2-fsdp-bound", P),
            ("ex3.3-params-per-device", P),
            ("ex3.3-state-bytes", P),
            ("ex3.3-activations", P),
            ("ex3.3-memory-per-device", F),
            ("ex3.3-x-opt", P),
            ("ex3.3-x-chosen", P),
            ("ex3.3-y-chosen", P),
            ("ex3.3-batch-per-chip", F),
            ("ex3.3-min-batch", P),
            ("ex3.3-bound", P),
            ("ex3.3-step-time", P),
        ],
    );
}

#[test]
fn seed_002_ch7() {
    assert_verdicts(
        "examples/claims/seed-002-ch7.toml",
        &[
            ("q1-params", F),
            ("q1-params-approx", P),
            ("q1-kv-int8", P),
            ("q1-kv-int8-approx", P),
            ("q2-hbm", P),
            ("q2-max-batch-exact", F),
            ("q2-max-batch", P),
            ("q2-max-batch-k1", P),
            ("q3-hbm-bw", P),
            ("q3-load-time", F),
            ("q4-w-ici", P),
            ("q4-c-int8", P),
            ("q4-tp-limit-prefill", P),
            ("q4-tp-limit-generate", F),
            ("q4-step-time", P),
            ("q5-params-total", P),
            ("q5-params-active", P),
            ("q5-kv-unchanged", P),
            ("q5-forward-flops", F),
            ("q6-weights-per-device", P),
            ("q6-load-time", F),
            ("q6-free-hbm", P),
            ("q6-min-slice", F),
        ],
    );
}

#[test]
fn playbook_seed_003() {
    assert_verdicts(
        "examples/playbook/seed-003.toml",
        &[
            ("pp-activations-same-per-gpu", F),
            ("pp-activations-afab", P),
            ("pp-activations-1f1b", P),
            ("a3-flops-per-layer-gated", P),
            ("a3-flops-per-layer-plain", P),
            ("a3-flops-per-layer-claimed-32-for-plain", F),
            ("a2-optimizer-bytes-per-param-errata", P),
            ("a2-optimizer-bytes-per-param-playbook", F),
        ],
    );
}

/// The book's official answers: every one PASSes except where the book
/// itself slipped or simplified (each such claim carries a note saying why).
#[test]
fn book_ch5() {
    assert_verdicts(
        "examples/book/ch5.toml",
        &[
            ("ch5-q1-params_total", P),
            ("ch5-q1-params_ffw", P),
            ("ch5-q1-params_attention", P),
            ("ch5-q1-params_vocab", P),
            ("ch5-q2-params_plus_optimizer_bytes", P),
            ("ch5-q2-activation_bytes", P),
            ("ch5-q3a-pure_dp_feasible", P),
            ("ch5-q3b-total_memory_bytes", P),
            ("ch5-q3b-slice_hbm_bytes", P),
            ("ch5-q3b-fsdp_min_batch_tokens", P),
            ("ch5-q3b-pure_fsdp_ok", P),
            ("ch5-q3c-min_batch_per_chip", P),
            ("ch5-q3c-x_opt", P),
            ("ch5-q3c-chosen_mesh-x", P),
            ("ch5-q3c-chosen_mesh-y", P),
            ("ch5-q3c-step_time", P),
            ("ch5-ex1-min_batch_per_chip_1_axis", P),
            ("ch5-ex1-min_batch_per_chip_3_axes", P),
            ("ch5-ex1-min_batch_per_pod", P),
            ("ch5-ex2-max_chips", P),
            ("ch5-ex3-chips", P),
            ("ch5-ex3-train_time", P),
            ("ch5-ex4-max_tp_llama3_70b", P),
            ("ch5-ex4-max_tp_gemma_7b", P),
            ("ch5-ex5-x_opt", P),
            ("ch5-ex5-chosen_mesh-x", P),
            ("ch5-ex5-chosen_mesh-y", P),
            ("ch5-ex6-min_batch_per_chip_fsdp_tp", P),
            ("ch5-ex6-min_batch_per_chip_fsdp_only", P),
            ("ch5-ex7-min_batch_per_slice", P),
            ("ch5-ex8-max_chips_fsdp", P),
            ("ch5-ex8-min_batch_per_chip_fsdp_tp", P),
            ("ch5-ex8-max_chips_fsdp_tp", P),
            ("ch5-ex8-per_chip_batch_2_pods", P),
        ],
    );
}

/// The book's official answers: every one PASSes except where the book
/// itself slipped or simplified (each such claim carries a note saying why).
#[test]
fn book_ch7() {
    assert_verdicts(
        "examples/book/ch7.toml",
        &[
            ("ch7-pq1a-step_time", P),
            ("ch7-pq1b-step_time", P),
            ("ch7-ex1-kv_cache_bytes", P),
            ("ch7-ex2-step_time_b1", P),
            ("ch7-ex2-throughput_b1", P),
            ("ch7-ex2-step_time_b240", P),
            ("ch7-ex2-throughput_b240", P),
            ("ch7-ex3-step_time_b64", F),
            ("ch7-ex3-throughput_b64", F),
            ("ch7-ex3-step_time_b240", P),
            ("ch7-ex3-throughput_b240", P),
            ("ch7-ex4-max_model_parallelism", F),
            ("ch7-ex5-latency_bound_buffer_bytes", P),
            ("ch7-ex5-activation_bytes", P),
            ("ch7-ex5-regime", P),
            ("ch7-ex6-prefill_compute_bound_length", P),
            ("ch7-ex6-generation_intensity", P),
            ("ch7-q1a-params", P),
            ("ch7-q1b-kv_bytes_per_token", P),
            ("ch7-q2a-max_batch", P),
            ("ch7-q2b-max_batch", P),
            ("ch7-q3-weight_load_time", P),
            ("ch7-q5a-params_total", P),
            ("ch7-q5a-params_activated", P),
            ("ch7-q5b-critical_batch", P),
            ("ch7-q5c-kv_bytes_per_token", P),
            ("ch7-q5d-forward_flops_per_token", P),
            ("ch7-q7-crossover_chips", F),
            ("ch7-q7-optimal_axes-x", P),
            ("ch7-q7-optimal_axes-yz", P),
        ],
    );
}

/// The wrong numbers of the seeds get the hint of their slip.
#[test]
fn seed_failures_name_their_slip() {
    let cases: &[(&str, &str, Option<SlipKind>)] = &[
        (
            "examples/claims/seed-000-ch5.toml",
            "ex3.2-slice-chips",
            Some(SlipKind::DigitTypo),
        ),
        (
            "examples/claims/seed-000-ch5.toml",
            "ex3.2-activations-sum",
            Some(SlipKind::OtherQuantity),
        ),
        (
            "examples/claims/seed-000-ch5.toml",
            "ex3.3-memory-per-device",
            Some(SlipKind::OtherQuantity),
        ),
        (
            "examples/claims/seed-000-ch5.toml",
            "ex3.3-batch-per-chip",
            Some(SlipKind::RoundedInputs),
        ),
        (
            "examples/claims/seed-002-ch7.toml",
            "q1-params",
            Some(SlipKind::DigitTypo),
        ),
        (
            "examples/claims/seed-002-ch7.toml",
            "q2-max-batch-exact",
            Some(SlipKind::DigitTypo),
        ),
        (
            "examples/claims/seed-002-ch7.toml",
            "q3-load-time",
            Some(SlipKind::RoundedInputs),
        ),
        (
            "examples/claims/seed-002-ch7.toml",
            "q5-forward-flops",
            Some(SlipKind::ForwardVsTraining),
        ),
        (
            "examples/claims/seed-002-ch7.toml",
            "q6-load-time",
            Some(SlipKind::RoundedInputs),
        ),
        (
            "examples/playbook/seed-003.toml",
            "a2-optimizer-bytes-per-param-playbook",
            Some(SlipKind::Factor),
        ),
    ];
    for (file, id, kind) in cases {
        let r = results(file);
        let c = r
            .iter()
            .find(|c| c.id == *id)
            .unwrap_or_else(|| panic!("{id}"));
        assert_eq!(c.verdict, F, "{id}");
        assert_eq!(c.hint.as_ref().map(|h| h.kind), *kind, "{id}: {:?}", c.hint);
    }
}

/// The values behind the key verdicts (a formula change shows here first).
#[test]
fn seed_values() {
    let r = results("examples/claims/seed-000-ch5.toml");
    let v = |id: &str| {
        r.iter()
            .find(|c| c.id == id)
            .and_then(|c| c.meshplan.as_ref()?.as_f64())
            .unwrap()
    };
    assert_eq!(v("ex3.2-slice-chips"), 4096.0);
    assert!((v("ex3.2-activations") - 1.92e9).abs() < 1e3);
    assert!((v("ex3.3-memory-per-device") - 1.9581312e9).abs() < 1e3);
    assert!((v("ex3.3-batch-per-chip") - 3e6 / 4096.0).abs() < 1e-9);
    assert!((v("ex3.2-fsdp-max-chips") - 9e6 / 2550.0).abs() < 1e-6);
}

#[test]
fn every_example_parses() {
    for dir in ["examples/claims", "examples/book", "examples/playbook"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml") {
                let rel = p
                    .strip_prefix(root())
                    .unwrap_or(Path::new(""))
                    .display()
                    .to_string();
                let _ = run(&rel);
            }
        }
    }
}
