//! `meshplan plan train|infer`: ranked feasible plans, the profile or the
//! roofline ranking, `--explain-rank`, and verdicts for impossible requests.

use serde_json::Value;

use crate::harness::{assert_contains, cmd, f, json, root, run, u, Scratch, H100X64_4M};

const CH5_Q3: &str = "examples/plan/book-ch5-q3.toml";

/// `plan train` of LLaMA-2 13B on 64 H100s, 4M-token batches of 4k
/// sequences, keeping the `top` best plans.
fn h100_args(top: &str) -> Vec<&str> {
    cmd(&[
        &["plan", "train", "--model", "llama-2-13b"],
        &H100X64_4M,
        &["--top", top, "--json"],
    ])
}

#[test]
fn train_json_has_ranked_feasible_plans() {
    let v = json(&h100_args("5"));
    let plans = v["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 5);
    // H100 has an efficiency profile: ranked by the predicted step time,
    // the roofline lower bound beside it
    assert_eq!(v["ranked_by_prediction"], true);
    assert!(v["prediction_note"].is_null());
    assert!(v["profile"].as_str().unwrap().contains("built-in"));
    assert_eq!(v["framework"], "megatron");
    let mut prev = 0.0;
    for (i, p) in plans.iter().enumerate() {
        assert_eq!(u(p, "rank"), i as u64 + 1);
        assert_eq!(p["fits"], true);
        assert_eq!(p["feasible"], true);
        // ranked by the pessimistic end of the interval (docs/planner.md)
        let t = f(p, "predicted_step_time_s");
        let hi = p["ranking_interval_s"][1].as_f64().unwrap();
        assert!(hi >= t && f(p, "score") == hi, "{hi} vs {t}");
        assert!(hi >= prev, "ranked by the pessimistic end");
        prev = hi;
        assert!(p["regime"].is_array());
        assert!(f(p, "step_time_lower_s") > 0.0);
        let mfu = f(p, "predicted_mfu");
        assert!(mfu > 0.0 && mfu < 1.0, "{mfu}");
        // one memory model: the plan's memory fits the usable HBM
        assert!(f(p, "memory_per_device.total_bytes") <= f(p, "hbm_bytes"));
        assert!(f(p, "memory_margin_bytes") >= 0.0);
        assert!(u(p, "degrees.tp") >= 1);
        assert!(p["bound"].is_string());
    }
    assert!(u(&v, "candidates") > 10_000);
    assert!(u(&v, "dominated") > 0);
    assert!(u(&v, "rejected.memory") > 0);
    assert!(v["rejected"]["unpredictable"].is_u64());
    // issue 11: no second memory model, so no "predicted-memory" rejections
    assert!(
        v["rejected"].get("predicted-memory").is_none(),
        "{}",
        v["rejected"]
    );
    assert!(v["best_rejected_fix"].is_string());
    assert!(
        v["extrapolation_note"].is_null(),
        "64 GPUs are inside the fit"
    );
    assert!(f(&v, "search_time_s") < 5.0);
    assert!(v["verdict"].is_null());
}

/// Issue 11: with pp = 1 a plan may accumulate gradients over micro-batches.
#[test]
fn train_plans_may_accumulate_gradients() {
    let v = json(&h100_args("20"));
    let accumulating = v["plans"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| u(p, "degrees.pp") == 1 && u(p, "microbatches") > 1);
    assert!(accumulating, "{v}");
}

/// A user profile with slower matmuls predicts a longer step.
#[test]
fn train_hw_profile_file_changes_the_prediction() {
    let base = json(&h100_args("1"));
    let src = std::fs::read_to_string(root().join("data/profiles/h100.toml")).unwrap();
    let slow: Vec<String> = src
        .lines()
        .map(|l| {
            // the parameter, not its [sources] entry (a string)
            if l.starts_with("matmul_efficiency =") && !l.contains('"') {
                "matmul_efficiency = 0.3".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    let s = Scratch::new("plan-profile");
    let file = s.write("slow.toml", slow.join("\n"));
    let mut a = h100_args("1");
    a.extend(["--hw-profile", &file]);
    let v = json(&a);
    assert!(v["profile"].as_str().unwrap().contains("slow.toml"));
    let t0 = f(&base, "plans.0.predicted_step_time_s");
    let t1 = f(&v, "plans.0.predicted_step_time_s");
    assert!(t1 > t0 * 1.2, "{t1} vs {t0}");
    // a profile for another chip is an input error
    let (code, _, err) = run(&[
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
        &file,
    ]);
    assert_eq!(code, 2, "{err}");
}

/// A vendor TPU runs MaxText and its plans are ranked by the TPU profile's
/// predictions; the book's `@book` TPU keeps the book's accounting and the
/// roofline ranking, with a one-line note (`--framework maxtext` ranks by
/// predictions).
#[test]
fn train_on_tpu_ranks_by_maxtext_predictions_and_at_book_by_the_roofline() {
    let plan = |chip: &str| {
        run(&[
            "plan",
            "train",
            "--model",
            "llama-2-7b",
            "--hw",
            chip,
            "--mesh",
            "2x2x4",
            "--batch-tokens",
            "1M",
            "--seq-len",
            "4096",
            "--top",
            "2",
        ])
    };
    let (code, out, err) = plan("tpu-v5p");
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["maxtext accounting", "(pred.)"]);
    let (code, out, err) = plan("tpu-v5p@book");
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &["note: TPU plans are ranked by roofline bounds under the book's accounting; --framework maxtext ranks them by the TPU profile's predictions"],
    );
    assert!(!out.contains("(pred.)"), "{out}");
}

/// The derivation step of the per-device memory total.
fn derived_memory(v: &Value) -> f64 {
    let steps = v["derivation"].as_array().expect("derivation");
    let s = steps
        .iter()
        .find(|s| s["id"] == "train.memory.total")
        .expect("memory step");
    f(s, "value")
}

/// `--explain` is `--explain-rank 1`: the table, then the derivation of
/// that plan (its memory total is the plan's).
#[test]
fn train_explain_derives_the_ranked_plan() {
    let (code, out, err) = run(&["plan", "train", CH5_Q3, "--explain"]);
    assert_eq!(code, 0, "{err}");
    let table = out.find(" 1  16x16x16").expect("plan table");
    let derivation = out.find("Derivation:").expect("derivation");
    assert!(table < derivation, "{out}");
    assert_contains(&out, &["Step time bounds"]);
    let v1 = json(&["plan", "train", CH5_Q3, "--explain", "--json"]);
    let m1 = derived_memory(&v1);
    assert_eq!(m1, f(&v1, "plans.0.memory_per_device.total_bytes"));
    let v3 = json(&["plan", "train", CH5_Q3, "--explain-rank", "3", "--json"]);
    let m3 = derived_memory(&v3);
    assert_eq!(m3, f(&v3, "plans.2.memory_per_device.total_bytes"));
    // plans 1 and 3 differ in remat, so the derivations differ
    assert_ne!(m1, m3);
}

/// `--explain` derives what the winner was ranked on: t_rank = t_pred ·
/// p90 · u, the JSON's `score` and the end of its `ranking_interval_s`
/// (docs/planner.md, "Ranking with uncertainty").
#[test]
fn train_explain_derives_the_ranking_key() {
    let mut args = h100_args("3");
    args.push("--explain");
    let v = json(&args);
    let steps = v["derivation"].as_array().expect("derivation");
    let s = steps
        .iter()
        .find(|s| s["id"] == "plan.ranked_on")
        .expect("a plan.ranked_on step");
    let bind = |sym: &str| {
        s["bindings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["symbol"] == sym)
            .and_then(|b| b["value"].as_f64())
            .unwrap_or_else(|| panic!("no {sym} in {s}"))
    };
    let (t, p90, u) = (bind("t_pred"), bind("p90"), bind("u"));
    assert_eq!(t, f(&v, "plans.0.predicted_step_time_s"));
    // u is 1 for a plan without flags, 1.4 with any
    let flagged = !v["plans"][0]["regime"].as_array().unwrap().is_empty();
    assert_eq!(u, if flagged { 1.4 } else { 1.0 });
    let rank_s = s["value"].as_f64().unwrap();
    assert!((rank_s - t * p90 * u).abs() <= 1e-12 * rank_s);
    assert_eq!(rank_s, f(&v, "plans.0.score"));
}

#[test]
fn train_impossible_requests_are_verdicts() {
    let plan = |chips: &str| {
        json(&[
            "plan",
            "train",
            "--model",
            "llama-2-70b",
            "--hw",
            "h100",
            "--chips",
            chips,
            "--batch-tokens",
            "1M",
            "--seq-len",
            "4096",
            "--json",
        ])
    };
    // a prime chip count: more GPUs in a node than NVLink joins
    let v = plan("13");
    assert!(v["plans"].as_array().unwrap().is_empty());
    assert!(v["verdict"].as_str().unwrap().contains("NVLink"), "{v}");
    assert!(
        v["suggestions"][0].as_str().unwrap().contains("more chips"),
        "{v}"
    );
    // 70B on 2 GPUs: nothing fits
    let v = plan("2");
    assert!(
        v["verdict"].as_str().unwrap().contains("nothing fits"),
        "{v}"
    );
    // more chips than the TPU offers: a verdict, exit 0
    let (code, out, err) = run(&[
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
    ]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["VERDICT:", "offers no slice"]);
}

#[test]
fn train_unreadable_input_exits_two() {
    let (code, _, err) = run(&[
        "plan",
        "train",
        "--model",
        "no-such-model",
        "--hw",
        "h100",
        "--chips",
        "8",
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn infer_json() {
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
        assert!(f(p, "decode_step_time_s") <= 0.05, "meets the 50 ms SLO");
    }
    assert!(!v["pareto"].as_array().unwrap().is_empty());
    // 405B does not fit 4 v5e chips in any plan
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

/// `--max-global-batch`, `--dtypes`, `--allow-fp8` (issue 25): the search
/// says which batch and dtype each plan uses; bad values exit 2 naming the
/// flag (the core's message, as in Python and the web API).
#[test]
fn train_searches_the_batch_and_dtype_when_asked() {
    let base = [
        "plan",
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "8",
    ];
    let b = ["--batch-tokens", "64Ki", "--seq-len", "4096", "--top", "3"];
    let v = json(&cmd(&[
        &base,
        &b,
        &["--max-global-batch", "64 seqs", "--allow-fp8", "--json"],
    ]));
    assert_eq!(
        v["searched"]["batches_tokens"],
        serde_json::json!([65536, 131072, 262144])
    );
    assert_eq!(v["searched"]["dtypes"], serde_json::json!(["bf16", "fp8"]));
    let p = &v["plans"][0];
    // tokens/s = B / predicted step
    let bt = u(p, "variant.batch_tokens") as f64;
    let want = bt / f(p, "predicted_step_time_s");
    assert!((f(p, "variant.tokens_per_s") / want - 1.0).abs() < 1e-12);
    let (code, out, err) = run(&cmd(&[&base, &b, &["--max-global-batch", "64 seqs"]]));
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["also searched: global batch", "plan 1 uses"]);
    // --explain derives the per-token figures in the book's symbols
    let (code, out, err) = run(&cmd(&[
        &base,
        &b,
        &["--max-global-batch", "64 seqs", "--explain"],
    ]));
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["B / t_step", "N · t_rank / B"]);
    for (flag, value, msg) in [
        ("--max-global-batch", "1Ki", "below the batch"),
        ("--max-global-batch", "many", "--max-global-batch"),
        ("--dtypes", "bf16,int4", "--dtypes"),
    ] {
        let (code, _, err) = run(&cmd(&[&base, &b, &[flag, value]]));
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert_contains(&err, &[msg]);
    }
    let (code, _, err) = run(&cmd(&[
        &[
            "plan",
            "train",
            "--model",
            "llama-3-8b",
            "--hw",
            "a100",
            "--chips",
            "8",
        ],
        &b,
        &["--dtypes", "fp8"],
    ]));
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, &["no fp8 peak"]);
}
