//! `meshplan train` end to end.

use std::process::Command;

fn meshplan(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meshplan"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn json_has_required_keys() {
    let (rc, s) = meshplan(&["train", "examples/train/ch5-q3-fsdp-tp.toml", "--json"]);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    for k in [
        "params_bytes",
        "grads_bytes",
        "optimizer_bytes",
        "activations_bytes",
        "total_bytes",
    ] {
        assert!(v["memory_per_device"][k].is_number(), "{k}");
    }
    for k in [
        "fits",
        "flops_per_step",
        "step_time_lower_s",
        "step_time_upper_s",
        "step_time_at_mfu_s",
        "bound",
        "comms",
        "feasible",
        "reasons",
        "rules",
    ] {
        assert!(!v[k].is_null(), "{k}");
    }
    let t = v["step_time_at_mfu_s"].as_f64().unwrap();
    assert!((t - 0.3115).abs() < 0.001, "{t}");
    let c = &v["comms"][0];
    for k in ["kind", "axis", "bytes", "seconds"] {
        assert!(!c[k].is_null(), "{k}");
    }
}

#[test]
fn flags_override_and_infeasible_exit_zero() {
    let (rc, s) = meshplan(&[
        "train",
        "examples/train/ch5-q3-fsdp-tp.toml",
        "--tp",
        "3",
        "--json",
    ]);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(v["feasible"], false);
    assert!(v["reasons"].as_array().unwrap().len() >= 2);
}

#[test]
fn bad_input_exits_two() {
    let (rc, _) = meshplan(&[
        "train",
        "--model",
        "no-such-model",
        "--hw",
        "tpu-v5p",
        "--mesh",
        "4x4x4",
    ]);
    assert_eq!(rc, 2);
}

#[test]
fn explain_shows_rules() {
    let (rc, s) = meshplan(&["train", "examples/train/ch5-q3-fsdp-tp.toml", "--explain"]);
    assert_eq!(rc, 0);
    assert!(s.contains("√((B/F)·(M_X/M_Y)·N)"), "{s}");
    assert!(s.contains("FSDP+TP:   yes"), "{s}");
}
