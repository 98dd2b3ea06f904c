//! `meshplan infer`: the book's ch7 answers, the weight-load times, the
//! does-not-fit verdict and bad input.

use crate::harness::{assert_close, assert_contains, f, json, run, u};

const Q2: &str = "examples/infer/ch7-q2.toml";

/// The book's ch7 18B model on a TPU v5e with `extra` flags.
fn ch7(extra: &[&str]) -> (i32, String, String) {
    let mut a = vec!["infer", "--model", "book-ch7-18b", "--hw", "tpu-v5e@book"];
    a.extend_from_slice(extra);
    run(&a)
}

#[test]
fn json_has_required_keys_and_the_q2_answer() {
    let v = json(&["infer", Q2, "--json"]);
    for k in [
        "weights_bytes_per_device",
        "kv_cache_bytes_per_token",
        "kv_cache_bytes_per_sequence",
        "max_batch",
        "free_hbm_bytes_per_device",
        "weight_load_time_s",
        "weight_load_time_even_s",
        "decode_step_time_s",
        "prefill_time_s",
        "tokens_per_s",
        "bound_decode",
        "bound_prefill",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    // issue 11: the per-device load time is now `weight_load_time_s`
    assert!(v.get("weight_load_time_per_device_s").is_none());
    // Book ch7 Q2: "7" sequences of 128k tokens; 2·K·H·L·1 B = 262,144 B/token
    assert_eq!(u(&v, "max_batch"), 7);
    assert_eq!(f(&v, "kv_cache_bytes_per_token"), 262_144.0);
    assert_eq!(v["bound_decode"], "kv-load");
}

#[test]
fn flags_override_and_binary_context_changes_the_answer() {
    let (code, out, err) = ch7(&[
        "--mesh",
        "4x4",
        "--weights-dtype",
        "int8",
        "--kv-dtype",
        "int8",
        "--context",
        "128Ki",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // 131,072-token sequences: (16·16e9 − 18.385e9)/(131,072·262,144 B) = 6.9 → 6
    assert_eq!(u(&v, "max_batch"), 6);
}

#[test]
fn explain_prints_the_derivation() {
    let (code, out, err) = run(&["infer", Q2, "--explain"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["Derivation:", "⌊(N·HBM − N·w)/KV_seq⌋"]);
}

/// Issue 11: the load time is the most loaded chip's (weights per device /
/// W_hbm); the even spread is kept beside it. Book ch7 Q6 (E = 16 experts
/// over Z = 16, Y = 8): attention and embeddings are replicated over Z, so
/// the most loaded chip holds more than P/N.
#[test]
fn weight_load_time_is_the_most_loaded_chips() {
    let v = json(&["infer", "examples/infer/ch7-q6.toml", "--json"]);
    let w_hbm = 8.2e11; // tpu-v5e@book
    assert_close(
        f(&v, "weight_load_time_s"),
        f(&v, "weights_bytes_per_device") / w_hbm,
        1e-12,
        "most loaded chip",
    );
    assert_close(
        f(&v, "weight_load_time_even_s"),
        f(&v, "weights_bytes") / (u(&v, "chips") as f64 * w_hbm),
        1e-12,
        "even spread",
    );
    assert!(f(&v, "weight_load_time_s") > f(&v, "weight_load_time_even_s"));
    assert!(f(&v, "decode_step_time_s") >= f(&v, "weight_load_time_s"));
}

/// Issue 11: a model that does not fit is an answer (exit 0, a verdict), not
/// an error.
#[test]
fn does_not_fit_is_a_verdict() {
    let (code, out, err) = ch7(&["--mesh", "1x1"]);
    assert_eq!(code, 0, "{err}");
    // bf16 18.385e9 params = 36.77 GB on one 16 GB chip
    assert_contains(&out, &["DOES NOT FIT:", "36.77 GB", "16 GB"]);
    let (code, out, _) = ch7(&["--mesh", "1x1", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fits"], false);
    assert_eq!(u(&v, "max_batch"), 0);
}

#[test]
fn bad_inputs_have_clear_messages() {
    for (extra, needle) in [
        (&["--mesh", "4x16"][..], "does not offer a 4x16 slice"),
        (&["--mesh", "4x4", "--tp", "3"], "does not divide"),
    ] {
        let (code, _, err) = ch7(extra);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
    }
    // a context beyond the model's maximum is a note in the report (on
    // stdout since issue 11, in "warnings" in JSON), not an error
    let long = [
        "--mesh",
        "4x4",
        "--weights-dtype",
        "int8",
        "--context",
        "200k",
        "--kv-dtype",
        "int8",
    ];
    let (code, out, err) = ch7(&long);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &["note: context 200000 exceeds book-ch7-18b's maximum of 131072 tokens"],
    );
    let (code, out, _) = ch7(&[&long[..], &["--json"]].concat());
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["warnings"][0].as_str().unwrap().contains("exceeds"),
        "{v}"
    );
}

/// Bug: `--chips N` on a TPU should pick the offered slice of N chips (as
/// `train` and `plan` do, and as `meshplan infer --help` says), but `infer`
/// takes N as a one-axis mesh: `meshplan infer --model llama-2-7b --hw
/// tpu-v5e --chips 8` fails with "does not offer a 8 slice" although 2x4 is
/// offered.
#[test]
fn tpu_chips_pick_the_offered_slice() {
    let v = json(&[
        "infer",
        "--model",
        "llama-2-7b",
        "--hw",
        "tpu-v5e",
        "--chips",
        "8",
        "--json",
    ]);
    assert_eq!(u(&v, "chips"), 8);
}
