//! The convention flags of issue 24 (`--params-given`,
//! `--checkpoints-per-layer`) and the keys they feed, through the binary:
//! values derived by hand in each test, bad values refused with the flag's
//! name.

use crate::harness::{assert_close, assert_contains, f, json, rejects, run, u};

#[test]
fn params_given_is_used_as_given_with_the_exact_count_beside_it() {
    let v = json(&[
        "model",
        "show",
        "llama-3.1-70b",
        "--params-given",
        "70e9",
        "--json",
    ]);
    assert_eq!(u(&v, "params_total"), 70_000_000_000);
    // exact: (2·8192·64·128 + 2·8192·8·128)·80 attention + 3·8192·28672·80
    // MLP + 2·128,256·8192 vocabulary + (2·80 + 1)·8192 norms
    let exact = (2 * 8192 * 64 * 128 + 2 * 8192 * 8 * 128) * 80
        + 3 * 8192 * 28672 * 80
        + 2 * 128_256 * 8192
        + (2 * 80 + 1) * 8192;
    assert_eq!(u(&v, "params_total_exact"), exact);
    let (code, out, err) = run(&["model", "show", "llama-3.1-70b", "--params-given", "70e9"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["params total, exact", "params_given"]);
    rejects(
        &["model", "show", "llama-3.1-70b", "--params-given", "7e9"],
        &["params_given", "0.5×–2×"],
    );
    rejects(
        &["model", "show", "llama-3.1-70b", "--params-given", "lots"],
        &["--params-given"],
    );
}

#[test]
fn infer_weights_only_chips_under_the_given_count() {
    // book ch8: 70e9·2 B / 16e9 = 8.75 v5e for bf16 weights
    let v = json(&[
        "infer",
        "--model",
        "llama-3.1-70b",
        "--params-given",
        "70e9",
        "--hw",
        "tpu-v5e@book",
        "--mesh",
        "4x4",
        "--json",
    ]);
    assert_close(
        f(&v, "min_chips_weights_exact"),
        8.75,
        1e-12,
        "weights-only",
    );
}

#[test]
fn train_k_checkpoints_per_layer() {
    let v = json(&[
        "train",
        "--model",
        "llama-3.1-70b",
        "--params-given",
        "70e9",
        "--hw",
        "tpu-v5p@book",
        "--mesh",
        "16x20x28",
        "--fsdp",
        "8960",
        "--batch-tokens",
        "4M",
        "--checkpoints-per-layer",
        "4",
        "--json",
    ]);
    // 4·2·4e6·8192·80 = 20.97152e12 B; + 70e9·(2 + 8) = 21.67152e12 B
    assert_close(f(&v, "sizing.activation_bytes"), 20.97152e12, 1e-12, "A");
    assert_close(
        f(&v, "sizing.min_chips_params_optimizer_activations_exact"),
        21.67152e12 / 96e9,
        1e-12,
        "chips",
    );
    assert_eq!(u(&v, "sizing.checkpoints_per_layer"), 4);
    rejects(
        &[
            "train",
            "--model",
            "llama-3.1-70b",
            "--hw",
            "tpu-v5p@book",
            "--chips",
            "64",
            "--checkpoints-per-layer",
            "0",
        ],
        &["checkpoints_per_layer"],
    );
}
