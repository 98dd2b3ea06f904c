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

#[test]
fn predicted_section_and_hw_profile() {
    let args = [
        "train",
        "--model",
        "llama-2-13b",
        "--hw",
        "h100",
        "--chips",
        "64",
        "--batch-tokens",
        "4M",
        "--seq-len",
        "4096",
        "--tp",
        "8",
        "--dp",
        "8",
        "--zero",
        "1",
        "--train-tokens",
        "1T",
    ];
    let mut j = args.to_vec();
    j.push("--json");
    let (rc, s) = meshplan(&j);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    let p = &v["predicted"];
    for k in [
        "step_time_s",
        "mfu",
        "tokens_per_s",
        "tokens_per_s_per_device",
        "peak_memory_bytes",
        "usable_memory_bytes",
        "train_time_s",
        "chip_hours",
        "cost_usd",
        "micro_batch_size",
        "grad_accumulation",
    ] {
        assert!(p[k].is_number(), "predicted.{k}");
    }
    assert_eq!(p["profile"], "h100");
    assert_eq!(p["profile_origin"], "built-in, infiniband network");
    assert!(p["fits"].is_boolean());
    // the roofline fields are still there and the prediction is not below the compute bound
    let lower = v["step_time_lower_s"].as_f64().unwrap();
    assert!(p["step_time_s"].as_f64().unwrap() > 0.5 * lower);
    assert!(p["mfu"].as_f64().unwrap() < v["mfu_at_lower_bound"].as_f64().unwrap());
    // human output: predicted step and MFU beside the bounds
    let (rc, h) = meshplan(&args);
    assert_eq!(rc, 0);
    assert!(h.contains("step time predicted"), "{h}");
    assert!(h.contains("MFU predicted"), "{h}");
    assert!(h.contains("step time lower (overlap)"), "{h}");
    // --hw-profile: the user's file is used
    let mut j2 = j.clone();
    j2.extend(["--hw-profile", "data/profiles/h100.toml"]);
    let (rc, s2) = meshplan(&j2);
    assert_eq!(rc, 0);
    let v2: serde_json::Value = serde_json::from_str(&s2).unwrap();
    assert_eq!(
        v2["predicted"]["profile_origin"],
        "file data/profiles/h100.toml"
    );
    // the file is used as written (its own EFA network: measured NVLink and
    // EFA curves), while the built-in profile switches to the chip's
    // InfiniBand sub-profile, so the two predictions differ
    let s_file = v2["predicted"]["step_time_s"].as_f64().unwrap();
    assert!(s_file > 0.0 && s_file != p["step_time_s"].as_f64().unwrap());
    // unsupported combination: a note, no number
    let j3 = [
        "train",
        "--model",
        "llama-2-13b",
        "--hw",
        "h100",
        "--chips",
        "64",
        "--batch-tokens",
        "4M",
        "--seq-len",
        "4096",
        "--tp",
        "8",
        "--dp",
        "4",
        "--cp",
        "2",
        "--json",
    ];
    let (rc, s3) = meshplan(&j3);
    assert_eq!(rc, 0);
    let v3: serde_json::Value = serde_json::from_str(&s3).unwrap();
    // context parallelism is predicted (ring attention), its K/V exchange reported
    let cp = v3["predicted"]["time_breakdown_s"]["cp_comm"]
        .as_f64()
        .unwrap();
    assert!(cp > 0.0, "{s3}");
    // TPU (the book's chip): no profile, a one-line note
    let (rc, s4) = meshplan(&["train", "examples/train/ch5-q3-fsdp-tp.toml", "--json"]);
    assert_eq!(rc, 0);
    let v4: serde_json::Value = serde_json::from_str(&s4).unwrap();
    assert!(v4["predicted"].is_null());
    assert_eq!(
        v4["prediction_note"],
        "no efficiency profile for this chip: times are roofline bounds"
    );
}

/// Zero degrees, chips, lengths or microbatches are bad input (exit 2 with a
/// message naming the flag), never a panic; they once reached a `% 0`.
#[test]
fn zero_values_are_rejected_without_panic() {
    let base = ["train", "--model", "llama-2-7b", "--hw", "h100"];
    for extra in [
        &["--chips", "8", "--tp", "0"][..],
        &["--chips", "8", "--pp", "0"],
        &["--chips", "8", "--dp", "0"],
        &["--chips", "0"],
        &["--chips", "8", "--seq-len", "0"],
        &["--chips", "8", "--batch-tokens", "0"],
        &["--chips", "8", "--pp", "2", "--microbatches", "0"],
    ] {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let out = Command::new(env!("CARGO_BIN_EXE_meshplan"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains("at least"), "{args:?}: {err}");
    }
}
