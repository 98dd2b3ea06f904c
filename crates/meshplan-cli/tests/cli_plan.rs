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
    // H100 has an efficiency profile: ranked by the predicted step time,
    // the roofline lower bound beside it
    assert_eq!(v["ranked_by_prediction"], true);
    assert!(v["prediction_note"].is_null());
    assert!(v["profile"].as_str().unwrap().contains("built-in"));
    let mut prev = 0.0;
    for p in plans {
        assert_eq!(p["fits"], true);
        assert_eq!(p["feasible"], true);
        let t = p["predicted_step_time_s"].as_f64().unwrap();
        assert!(t >= prev);
        prev = t;
        assert!(p["step_time_lower_s"].as_f64().unwrap() > 0.0);
        let mfu = p["predicted_mfu"].as_f64().unwrap();
        assert!(mfu > 0.0 && mfu < 1.0, "{mfu}");
        assert!(
            p["predicted_peak_memory_bytes"].as_f64().unwrap()
                <= p["predicted"]["usable_memory_bytes"].as_f64().unwrap()
        );
        assert_eq!(p["predicted"]["fits"], true);
        assert!(p["degrees"]["tp"].as_u64().unwrap() >= 1);
        assert!(p["memory_per_device"]["total_bytes"].as_f64().unwrap() > 0.0);
        assert!(p["bound"].is_string());
    }
    assert!(v["candidates"].as_u64().unwrap() > 10_000);
    assert!(v["rejected"]["memory"].as_u64().unwrap() > 0);
    assert!(v["rejected"]["predicted-memory"].as_u64().unwrap() > 0);
    assert!(v["rejected"]["unpredictable"].is_u64());
    assert!(v["search_time_s"].as_f64().unwrap() < 5.0);
    assert!(v["verdict"].is_null());
}

#[test]
fn plan_train_hw_profile_and_tpu_note() {
    let args = [
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
        "1",
        "--json",
    ];
    let base = json(&args);
    // a user profile with slower matmuls predicts a longer step
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/profiles/h100.toml"
    ))
    .unwrap();
    let slow: String = src
        .lines()
        .map(|l| {
            // the parameter, not its [sources] entry (a string)
            if l.starts_with("matmul_efficiency =") && !l.contains('"') {
                "matmul_efficiency = 0.3".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dir = std::env::temp_dir().join(format!("meshplan-plan-prof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("slow.toml");
    std::fs::write(&f, slow).unwrap();
    let mut a: Vec<&str> = args.to_vec();
    let fs = f.to_str().unwrap();
    a.extend(["--hw-profile", fs]);
    let v = json(&a);
    assert!(v["profile"].as_str().unwrap().contains("slow.toml"));
    let t0 = base["plans"][0]["predicted_step_time_s"].as_f64().unwrap();
    let t1 = v["plans"][0]["predicted_step_time_s"].as_f64().unwrap();
    assert!(t1 > t0 * 1.2, "{t1} vs {t0}");
    // a profile for another chip is an input error
    let out = meshplan()
        .args([
            "plan",
            "train",
            "--model",
            "llama-2-13b",
            "--hw",
            "a100-80gb",
            "--chips",
            "64",
            "--batch-tokens",
            "4M",
            "--hw-profile",
            fs,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // TPU: no profile, roofline ranking, one-line note
    let out = meshplan()
        .args([
            "plan",
            "train",
            "--model",
            "llama-2-7b",
            "--hw",
            "tpu-v5p",
            "--mesh",
            "2x2x4",
            "--batch-tokens",
            "1M",
            "--seq-len",
            "4096",
            "--top",
            "2",
        ])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("note: no efficiency profile for this chip: times are roofline bounds"),
        "{s}"
    );
    assert!(!s.contains("(pred.)"), "{s}");
    let _ = std::fs::remove_dir_all(&dir);
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
