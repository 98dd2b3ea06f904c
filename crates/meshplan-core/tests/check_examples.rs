//! Every shipped claims file, every verdict: a formula regression flips a
//! PASS into a FAIL (or a FAIL into a PASS) here.

mod common;

use std::path::{Path, PathBuf};

use meshplan_core::check::{check, ClaimResult, SlipKind, Verdict};
use meshplan_core::Catalog;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn results(rel: &str) -> Vec<ClaimResult> {
    let f = common::claims_file(&root().join(rel));
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
    use SlipKind::*;
    let cases: &[(&str, &[(&str, SlipKind)])] = &[
        (
            "examples/claims/seed-000-ch5.toml",
            &[
                ("ex3.2-slice-chips", DigitTypo),
                ("ex3.2-activations-sum", OtherQuantity),
                ("ex3.3-memory-per-device", OtherQuantity),
                ("ex3.3-batch-per-chip", RoundedInputs),
            ],
        ),
        (
            "examples/claims/seed-002-ch7.toml",
            &[
                ("q1-params", DigitTypo),
                ("q2-max-batch-exact", DigitTypo),
                ("q3-load-time", RoundedInputs),
                ("q5-forward-flops", ForwardVsTraining),
                ("q6-load-time", RoundedInputs),
            ],
        ),
        (
            "examples/playbook/seed-003.toml",
            &[("a2-optimizer-bytes-per-param-playbook", Factor)],
        ),
    ];
    for (file, claims) in cases {
        let r = results(file);
        for (id, kind) in *claims {
            let c = r
                .iter()
                .find(|c| c.id == *id)
                .unwrap_or_else(|| panic!("{file}: {id}"));
            assert_eq!(c.verdict, F, "{file}: {id}");
            assert_eq!(
                c.hint.as_ref().map(|h| h.kind),
                Some(*kind),
                "{file}: {id}: {:?}",
                c.hint
            );
        }
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

/// Every shipped claims file parses and checks, and a claim id names one
/// claim across all of them (`check examples/book/*.toml` lists the claims
/// of many files in one table, and docs/book-coverage.md cites them by id).
#[test]
fn every_example_parses_and_ids_are_unique() {
    let mut seen = std::collections::HashMap::new();
    for dir in ["examples/claims", "examples/book", "examples/playbook"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml") {
                let rel = p
                    .strip_prefix(root())
                    .unwrap_or(Path::new(""))
                    .display()
                    .to_string();
                for (id, _) in run(&rel) {
                    if let Some(other) = seen.insert(id.clone(), rel.clone()) {
                        panic!("claim id {id} is in {other} and {rel}");
                    }
                }
            }
        }
    }
}

/// examples/book/ch1.toml: written from the book's text; every FAIL is a
/// slip of the book, annotated in the claim's note.
#[test]
fn book_ch1() {
    assert_verdicts(
        "examples/book/ch1.toml",
        &[
            ("ch1-v5e-critical-intensity", P),
            ("ch1-dot-product-intensity", P),
            ("ch1-matmul-critical-batch", P),
            ("ch1-two-chip-contraction", P),
            ("ch1-q1-int8-critical-batch", P),
            ("ch1-q1-int8-flops", P),
            ("ch1-q1-int8-bytes", P),
            ("ch1-q2-int8-weights-bf16-compute", P),
            ("ch1-q3-critical-batch-d4096", P),
            ("ch1-q3-critical-batch-d1024", P),
            ("ch1-q4-per-sample-weights", P),
            ("ch1-q5-h100-critical-batch", P),
            ("ch1-h100-1e12-flops", P),
            ("ch1-v6e-1e12-flops", P),
            ("ch1-footnote-local-batch", P),
            ("ch1-q1-int8-intensity", P),
            ("ch1-q5-h100-bf16-peak", P),
        ],
    );
}

/// examples/book/ch2.toml: written from the book's text; every FAIL is a
/// slip of the book, annotated in the claim's note.
#[test]
fn book_ch2() {
    assert_verdicts(
        "examples/book/ch2.toml",
        &[
            ("ch2-q1-load-time", P),
            ("ch2-q2-v5e-hosts", P),
            ("ch2-q2-v5e-cores", P),
            ("ch2-q2-v5e-flops", P),
            ("ch2-q2-v5e-hbm", P),
            ("ch2-q2-v5p-hosts", P),
            ("ch2-q2-v5p-cores", P),
            ("ch2-q2-v5p-flops", P),
            ("ch2-q2-v5p-hbm", P),
            ("ch2-q3-pcie", P),
            ("ch2-q3-pcie-roofline", P),
            ("ch2-q4-critical-batch", F),
            ("ch2-q6-pcie-load", P),
            ("ch2-q6-hbm-load", P),
            ("ch2-q6-flops", P),
            ("ch2-vpu-alus", P),
            ("ch2-mxu-flops-per-cycle", P),
            ("ch2-q1-weight-bytes", P),
            ("ch2-q1-weight-bytes-per-chip", P),
            ("ch2-q5-array-bytes", P),
            ("ch2-q6-array-bytes", P),
            ("ch2-q6-bytes-per-chip", P),
            ("ch2-q6-flops-count", P),
            ("ch2-vpu-flops", P),
            ("ch2-v5e-chip-flops", P),
            ("ch2-q6-hosts", P),
            ("ch2-q6-vector-bytes", P),
        ],
    );
}

/// examples/book/ch3.toml: written from the book's text; every FAIL is a
/// slip of the book, annotated in the claim's note.
#[test]
fn book_ch3() {
    assert_verdicts(
        "examples/book/ch3.toml",
        &[
            ("ch3-pop-local-shape", P),
            ("ch3-pop-bytes-per-device", P),
            ("ch3-pop-load-time", P),
            ("ch3-pop-int8-per-device", P),
            ("ch3-pop-int8-total", P),
            ("ch3-pop2-allgather", P),
            ("ch3-pop2-ideal", P),
            ("ch3-pop2-latency-bound", P),
            ("ch3-q1-replication", P),
            ("ch3-q2-allgather-x", P),
            ("ch3-q2-allgather-xy", F),
            ("ch3-q2-allreduce-z", F),
            ("ch3-q3-latency", P),
            ("ch3-q3-bound", P),
            ("ch3-q4-strategy1-comms", P),
            ("ch3-q4-strategy2-comms", P),
            ("ch3-aside-a-local-rows", P),
            ("ch3-aside-a-local-cols", P),
            ("ch3-aside-b-local-rows", P),
            ("ch3-aside-b-local-cols", P),
            ("ch3-pop2-shard-bytes", P),
            ("ch3-pop2-array-bytes", P),
            ("ch3-pop2-small-shard-bytes", P),
            ("ch3-pop2-small-hop-time", P),
            ("ch3-q2-allgather-y", P),
            ("ch3-q2-allgather-xy-latency", F),
            ("ch3-q3-array-bytes", P),
            ("ch3-q3-shard-bytes", P),
            ("ch3-q4-alpha", P),
            ("ch3-pop2-latency-term", P),
        ],
    );
}

/// examples/book/ch4.toml: written from the book's text; every FAIL is a
/// slip of the book, annotated in the claim's note.
#[test]
fn book_ch4() {
    assert_verdicts(
        "examples/book/ch4.toml",
        &[
            ("ch4-q1-params", F),
            ("ch4-q1-kv-per-token", P),
            ("ch4-q2-flops-per-device", P),
            ("ch4-q3-einsum-flops", P),
            ("ch4-q4-prefill-attention-intensity", P),
            ("ch4-q4-generate-attention-intensity", P),
            ("ch4-q5-attention-equals-qkvo", P),
            ("ch4-q7-deepseek-mfu", P),
            ("ch4-q7-available-flops", P),
            ("ch4-q8-moe-critical-batch", P),
            ("ch4-attention-dominates-d8k", P),
            ("ch4-attention-dominates-gemma", F),
            ("ch4-block-remat-bytes", P),
            ("ch4-kv-cache-8k-sequence", P),
            ("ch4-q4-prefill-critical-len", F),
            ("ch4-q7-model-flops", P),
            ("ch4-no-remat-activations", P),
            ("ch4-q1-attention-fraction", P),
        ],
    );
}

/// examples/book/ch6.toml: written from the book's text; every FAIL is a
/// slip of the book, annotated in the claim's note.
#[test]
fn book_ch6() {
    assert_verdicts(
        "examples/book/ch6.toml",
        &[
            ("ch6-params-total", P),
            ("ch6-params-ffw", P),
            ("ch6-params-vocab", P),
            ("ch6-params-attention", P),
            ("ch6-flops-per-token", P),
            ("ch6-total-flops", P),
            ("ch6-train-time-s", P),
            ("ch6-train-time-days", F),
            ("ch6-sequences", P),
            ("ch6-batch-per-chip", P),
            ("ch6-fsdp-bound", P),
            ("ch6-fsdp-comms-bound", P),
            ("ch6-fsdp-tp-bound", P),
            ("ch6-x-opt", P),
            ("ch6-token-time-one-chip", P),
            ("ch6-single-tpu-years", P),
            ("ch6-memory-params", P),
            ("ch6-memory-optimizer", P),
            ("ch6-tp-max", P),
        ],
    );
}

/// examples/book/ch8.toml: written from the book's text; every FAIL is a
/// slip of the book, annotated in the claim's note.
#[test]
fn book_ch8() {
    assert_verdicts(
        "examples/book/ch8.toml",
        &[
            ("ch8-flops-per-dollar-h100", P),
            ("ch8-flops-per-dollar-v5p", P),
            ("ch8-flops-per-dollar-v5e", F),
            ("ch8-kv-per-token-int8", P),
            ("ch8-kv-per-token-bf16-table", F),
            ("ch8-batch-kv", F),
            ("ch8-weights-plus-kv", P),
            ("ch8-min-chips", P),
            ("ch8-min-chips-slice", P),
            ("ch8-step-time", P),
            ("ch8-tokens-per-chip", P),
            ("ch8-critical-batch-int8-weights", P),
            ("ch8-min-slice-bf16", P),
            ("ch8-min-slice-int4", P),
            ("ch8-free-hbm-bf16-4x4", P),
            ("ch8-prefill-time", P),
            ("ch8-kv-per-sequence-32k", F),
            ("ch8-kv-batch-240-32k", P),
            ("ch8-chips-batch-240-32k", F),
            ("ch8-step-time-4x4", F),
            ("ch8-tokens-per-s", F),
            ("ch8-critical-batch-bf16", P),
            ("ch8-critical-batch-int8-int8", P),
            ("ch8-weights-bf16", P),
            ("ch8-weights-int8", P),
            ("ch8-weights-int4", P),
            ("ch8-kv-per-token-int8-table", F),
            ("ch8-kv-per-token-int4-table", F),
            ("ch8-min-slice-int8", P),
            ("ch8-free-hbm-int8-4x2", P),
            ("ch8-free-hbm-int4-2x2", P),
            ("ch8-kv-caches-bf16-4x4", P),
            ("ch8-kv-caches-int8-4x2", P),
            ("ch8-kv-caches-int4-2x2", P),
            ("ch8-full-hbm-step", P),
            ("ch8-int4-weights-step", P),
            ("ch8-qps-bf16", P),
            ("ch8-qps-int8", F),
            ("ch8-qps-int4", F),
            ("ch8-qps-total", F),
            ("ch8-free-hbm-bf16-4x8", P),
            ("ch8-batch-bf16-4x8", P),
            ("ch8-qps-total-4x8", F),
            ("ch8-qps-bf16-4x8", F),
            ("ch8-qps-int8-4x4", F),
            ("ch8-qps-int4-2x4", F),
            ("ch8-tp-limit-generate", F),
            ("ch8-t-hbm-4x8", P),
            ("ch8-t-math-4x8", F),
            ("ch8-prefill-generate-ratio", P),
            ("ch8-ici-bound-two-axes", P),
            ("ch8-t-ici-4x8", F),
        ],
    );
}

/// examples/book/ch9.toml: written from the book's text; every FAIL is a
/// slip of the book, annotated in the claim's note.
#[test]
fn book_ch9() {
    assert_verdicts(
        "examples/book/ch9.toml",
        &[
            ("ch9-matmul-time", P),
            ("ch9-reduce-scatter-time", P),
            ("ch9-reduce-scatter-bytes", P),
        ],
    );
}

/// examples/book/ch12.toml: written from the book's text; every FAIL is a
/// slip of the book, annotated in the claim's note.
#[test]
fn book_ch12() {
    assert_verdicts(
        "examples/book/ch12.toml",
        &[
            ("ch12-q1-h100-cuda-cores", P),
            ("ch12-q1-b200-cuda-cores", P),
            ("ch12-q1-v5p-alus", P),
            ("ch12-q2-vector-flops-boost", P),
            ("ch12-q3-h100-intensity", P),
            ("ch12-q3-b200-intensity", P),
            ("ch12-q3-h100-fp8-intensity", P),
            ("ch12-q3-b200-fp8-intensity", P),
            ("ch12-q4-b200-small-matmul", P),
            ("ch12-q4-b200-large-matmul", P),
            ("ch12-q7-add-intensity", P),
            ("ch12-q7-vector-intensity", P),
            ("ch12-quiz2-q3-allgather", P),
            ("ch12-pop1-allgather", P),
            ("ch12-quiz4-q5-two-nodes", P),
            ("ch12-superpod-node-level", P),
            ("ch12-superpod-leaf-level", P),
            ("ch12-superpod-spine-level", P),
            ("ch12-dp-in-node", P),
            ("ch12-dp-across-nodes", P),
            ("ch12-llama3-batch", P),
            ("ch12-deepseek-h800", P),
            ("ch12-two-node-dp", F),
            ("ch12-quiz5-pipelining", P),
            ("ch12-b200-tp", P),
            ("ch12-b200-dp", P),
            ("ch12-registers-per-sm", P),
            ("ch12-h100-tensor-cores", P),
            ("ch12-v5p-mxus", P),
            ("ch12-q4-bytes", P),
            ("ch12-q7-add-64k", P),
            ("ch12-q7-add-1gi", P),
            ("ch12-nvlink-per-gpu", P),
            ("ch12-node-to-leaf", P),
            ("ch12-su-to-spine", P),
            ("ch12-v5p-egress", P),
            ("ch12-gb200-node-egress", P),
            ("ch12-quiz2-q3-bytes", P),
            ("ch12-llama-mlp-shard", P),
            ("ch12-deepseek-dp-batch", P),
            ("ch12-deepseek-tokens-per-gpu", P),
            ("ch12-llama3-tokens-per-gpu", P),
            ("ch12-quiz5-q2-weights-optimizer", P),
            ("ch12-quiz5-q2-flops", P),
            ("ch12-quiz5-q2-seconds", P),
            ("ch12-quiz5-q2-days", P),
            ("ch12-quiz5-q2-tp-limit", F),
            ("ch12-quiz5-q2-dp-degree", P),
            ("ch12-quiz5-q2-memory-tp8", P),
            ("ch12-quiz5-q2-tokens-per-gpu", P),
            ("ch12-quiz5-q3-16b", P),
            ("ch12-quiz5-q3-70b", P),
            ("ch12-quiz5-q3-314b", P),
            ("ch12-quiz5-q3-spine-bound", F),
            ("ch12-quiz5-q3-70b-bound", P),
            ("ch12-quiz5-q3-314b-bound", P),
            ("ch12-gpu-to-gpu-ib", P),
            ("ch12-tp-beyond-node", P),
            ("ch12-tp-in-node-f28000", P),
            ("ch12-tp-two-nodes", P),
            ("ch12-quiz5-q2-min-gpus", P),
        ],
    );
}

/// In the chapter files written from the book's text, every FAIL is one of
/// the book's own slips or approximations and says so: its note starts with
/// `BOOK ` (`BOOK SLIP: …`, `BOOK APPROXIMATION: …`), the prefix `check` itself
/// takes as an expected FAIL; and every claim quotes the book (`from`).
#[test]
fn book_chapter_failures_are_annotated_slips() {
    for ch in [1, 2, 3, 4, 6, 8, 9, 12] {
        let rel = format!("examples/book/ch{ch}.toml");
        for c in results(&rel) {
            assert!(c.from.is_some(), "{rel}: {} has no `from`", c.id);
            if c.verdict == Verdict::Fail {
                let note = c.note.clone().unwrap_or_default();
                assert!(
                    note.starts_with("BOOK "),
                    "{rel}: {} fails without a slip note",
                    c.id
                );
            }
            assert_ne!(c.verdict, Verdict::CannotCheck, "{rel}: {}", c.id);
        }
    }
}

/// Issue 22: claims on the calibrated prediction and a serving TPOT; the one
/// that quotes the step at the assumed 40 % MFU as the prediction fails.
#[test]
fn predicted() {
    assert_verdicts(
        "examples/claims/predicted.toml",
        &[
            ("step-time", P),
            ("mfu", P),
            ("throughput", P),
            ("step-time-at-40-mfu", F),
            ("tpot", P),
            ("ttft", P),
        ],
    );
}
