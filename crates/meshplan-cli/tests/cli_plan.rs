//! `meshplan plan train|infer` end to end.

use assert_cmd::Command;

fn meshplan() -> Command {
    Command::cargo_bin("meshplan").unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = meshplan().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "no progress bar on piped output");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn plan_train_json_has_ranked_feasible_plans() {
    let v = json(&[
        "plan",
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
        "--top",
        "5",
        "--json",
    ]);
    let plans = v["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 5);
    let mut prev = 0.0;
    for p in plans {
        assert_eq!(p["fits"], true);
        assert_eq!(p["feasible"], true);
        let t = p["step_time_lower_s"].as_f64().unwrap();
        assert!(t >= prev);
        prev = t;
        assert!(p["degrees"]["tp"].as_u64().unwrap() >= 1);
        assert!(p["memory_per_device"]["total_bytes"].as_f64().unwrap() > 0.0);
        assert!(p["bound"].is_string());
    }
    assert!(v["candidates"].as_u64().unwrap() > 10_000);
    assert!(v["rejected"]["memory"].as_u64().unwrap() > 0);
    assert!(v["search_time_s"].as_f64().unwrap() < 5.0);
    assert!(v["verdict"].is_null());
}

#[test]
fn plan_train_scenario_and_explain() {
    let out = meshplan()
        .args([
            "plan",
            "train",
            "../../examples/plan/book-ch5-q3.toml",
            "--explain",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("Plan #1"), "{s}");
    assert!(s.contains("Step time bounds"), "{s}");
    let out = meshplan()
        .args([
            "plan",
            "train",
            "../../examples/plan/book-ch5-q3.toml",
            "--explain-rank",
            "3",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Plan #3"));
}

#[test]
fn plan_train_bad_input_is_a_verdict() {
    // prime chip count
    let v = json(&[
        "plan",
        "train",
        "--model",
        "llama-2-70b",
        "--hw",
        "h100",
        "--chips",
        "13",
        "--batch-tokens",
        "1M",
        "--seq-len",
        "4096",
        "--json",
    ]);
    assert!(v["plans"].as_array().unwrap().is_empty());
    assert!(v["verdict"].as_str().unwrap().contains("NVLink"));
    assert!(v["suggestions"][0].as_str().unwrap().contains("more chips"));
    // nothing fits
    let v = json(&[
        "plan",
        "train",
        "--model",
        "llama-2-70b",
        "--hw",
        "h100",
        "--chips",
        "2",
        "--batch-tokens",
        "1M",
        "--seq-len",
        "4096",
        "--json",
    ]);
    assert!(v["verdict"].as_str().unwrap().contains("nothing fits"));
    // more chips than the TPU offers
    let out = meshplan()
        .args([
            "plan",
            "train",
            "--model",
            "llama-2-70b",
            "--hw",
            "tpu-v5p",
            "--chips",
            "100000",
            "--batch-tokens",
            "1M",
            "--seq-len",
            "4096",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("offers no slice"));
    // unreadable input: exit 2
    meshplan()
        .args([
            "plan",
            "train",
            "--model",
            "no-such-model",
            "--hw",
            "h100",
            "--chips",
            "8",
        ])
        .assert()
        .code(2);
}

#[test]
fn plan_infer_json() {
    let v = json(&[
        "plan",
        "infer",
        "--model",
        "llama-3.1-70b",
        "--hw",
        "tpu-v5e",
        "--max-chips",
        "64",
        "--prompt-len",
        "2048",
        "--gen-len",
        "512",
        "--tpot-slo",
        "50ms",
        "--json",
    ]);
    let plans = v["plans"].as_array().unwrap();
    assert!(!plans.is_empty());
    for p in plans {
        assert_eq!(p["batch_fits"], true);
        assert!(p["decode_step_time_s"].as_f64().unwrap() <= 0.05);
    }
    assert!(!v["pareto"].as_array().unwrap().is_empty());
    let v = json(&[
        "plan",
        "infer",
        "--model",
        "llama-3.1-405b",
        "--hw",
        "tpu-v5e",
        "--chips",
        "4",
        "--json",
    ]);
    assert!(v["plans"].as_array().unwrap().is_empty());
    assert!(v["verdict"].is_string());
}
