//! `meshplan infer` end to end.

use assert_cmd::Command;

fn mp() -> Command {
    Command::cargo_bin("meshplan").unwrap()
}

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn json_has_required_keys_and_q2_answer() {
    let out = mp()
        .arg("infer")
        .arg(root().join("examples/infer/ch7-q2.toml"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in [
        "weights_bytes_per_device",
        "kv_cache_bytes_per_token",
        "kv_cache_bytes_per_sequence",
        "max_batch",
        "free_hbm_bytes_per_device",
        "weight_load_time_s",
        "decode_step_time_s",
        "prefill_time_s",
        "tokens_per_s",
        "bound_decode",
        "bound_prefill",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["max_batch"], 7);
    assert_eq!(v["kv_cache_bytes_per_token"], 262144.0);
    assert_eq!(v["bound_decode"], "kv-load");
}

#[test]
fn flags_override_and_binary_context_changes_answer() {
    let out = mp()
        .args([
            "infer",
            "--model",
            "book-ch7-18b",
            "--hw",
            "tpu-v5e@book",
            "--mesh",
            "4x4",
        ])
        .args([
            "--weights-dtype",
            "int8",
            "--kv-dtype",
            "int8",
            "--context",
            "128Ki",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["max_batch"], 6);
}

#[test]
fn explain_prints_derivation() {
    let out = mp()
        .arg("infer")
        .arg(root().join("examples/infer/ch7-q2.toml"))
        .arg("--explain")
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("⌊(N·HBM − N·w)/KV_seq⌋"), "{s}");
}

#[test]
fn bad_inputs_have_clear_messages() {
    let run = |args: &[&str]| {
        let o = mp()
            .args(["infer", "--model", "book-ch7-18b", "--hw", "tpu-v5e@book"])
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    assert!(run(&["--mesh", "4x16"]).contains("does not offer a 4x16 slice"));
    assert!(run(&["--mesh", "4x4", "--tp", "3"]).contains("does not divide"));
    assert!(run(&["--mesh", "1x1"]).contains("does not fit"));
    let o = mp()
        .args([
            "infer",
            "--model",
            "book-ch7-18b",
            "--hw",
            "tpu-v5e@book",
            "--mesh",
            "4x4",
            "--weights-dtype",
            "int8",
            "--context",
            "200k",
            "--kv-dtype",
            "int8",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning: context"));
}
