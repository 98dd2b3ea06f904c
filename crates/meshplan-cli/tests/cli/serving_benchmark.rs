//! `infer --concurrency N` / `--request-rate R` (issue 26): the benchmark
//! spellings of `--workload`, their bad input, their `--explain` steps;
//! `plan infer` keeps a bf16 model in bf16 unless `--allow-quantization`.

use crate::harness::{assert_close, json, rejects, run};

const C64: &str = "examples/infer/llama-70b-8xh100-c64.toml";

/// `--concurrency N` is `--workload concurrency=N`, `--request-rate R` is
/// `--workload rate=R`: the same report.
#[test]
fn benchmark_flags_are_the_workload() {
    for (flag, v, w) in [
        ("--concurrency", "16", "concurrency=16"),
        ("--request-rate", "2.5", "rate=2.5"),
    ] {
        let a = json(&["infer", C64, flag, v, "--json"]);
        let b = json(&["infer", C64, "--workload", w, "--json"]);
        assert_eq!(
            a["serving"]["continuous"], b["serving"]["continuous"],
            "{flag}"
        );
        assert_eq!(a["serving"]["continuous"]["workload"], w);
    }
}

/// The closed loop of 64 users on one TP-8 replica closes by Little's law,
/// N = R·E2E, with E2E = TTFT + (T_out − 1)·TPOT (T_out = 500), and hands
/// out 1/TPOT tokens/s to each user.
#[test]
fn the_example_closes_by_littles_law() {
    let v = json(&["infer", C64, "--json"]);
    let c = &v["serving"]["continuous"];
    let g = |k: &str| c[k].as_f64().unwrap();
    let (ttft, tpot) = (
        c["ttft_s"]["mean"].as_f64().unwrap(),
        c["tpot_s"]["mean"].as_f64().unwrap(),
    );
    assert_close(
        g("requests_per_s") * (ttft + 499.0 * tpot),
        64.0,
        1e-6,
        "Little",
    );
    assert_close(
        c["e2e_s"]["mean"].as_f64().unwrap(),
        ttft + 499.0 * tpot,
        1e-9,
        "E2E",
    );
    assert_close(
        g("output_tokens_per_s_per_user"),
        1.0 / tpot,
        1e-9,
        "per user",
    );
    assert_eq!(c["limited_by"], "none");
    assert_eq!(c["slots"].as_u64(), Some(882));
}

#[test]
fn explain_shows_the_benchmark_terms() {
    let (code, out, err) = run(&["infer", C64, "--explain"]);
    assert_eq!(code, 0, "{err}");
    for s in [
        "Closed loop",
        "B = min(max_num_seqs, KV capacity)",
        "TPOT = min(t_d/(1 − ρ_o), t_full)",
        "TTFT = t_fe + W_q + s_1",
        "E2E = TTFT + (T_out − 1)·TPOT",
    ] {
        assert!(out.contains(s), "missing {s:?}");
    }
}

#[test]
fn bad_benchmark_flags_are_refused() {
    rejects(
        &["infer", C64, "--concurrency", "0"],
        &["--concurrency", "at least 1"],
    );
    rejects(
        &["infer", C64, "--request-rate", "0"],
        &["--request-rate", "above 0"],
    );
    rejects(
        &["infer", C64, "--request-rate", "inf"],
        &["--request-rate", "finite"],
    );
    rejects(
        &["infer", C64, "--concurrency", "4", "--workload", "static"],
        &["--concurrency", "--workload"],
    );
    rejects(
        &["infer", C64, "--concurrency", "4", "--request-rate", "1"],
        &["--concurrency", "--request-rate"],
    );
}

/// `--workload lockstep=N` (fixed lengths): under SGLang, which prefills a
/// waiting wave before any decode, the 64 users run in waves and the
/// report and `--explain` say so; under vLLM the wave's 64,000 prompt
/// tokens span several mixed steps, the waves do not persist and the
/// numbers are the staggered loop's. A lockstep of no users is refused.
#[test]
fn lockstep_waves_are_reported_and_explained() {
    let sglang = [
        "infer",
        C64,
        "--engine",
        "sglang",
        "--workload",
        "lockstep=64",
    ];
    let (code, out, err) = run(&[&sglang[..], &["--explain"]].concat());
    assert_eq!(code, 0, "{err}");
    for s in [
        "lockstep=64 (in lockstep waves)",
        "Closed loop at fixed lengths: N users in lockstep waves",
        "TTFT_j = t_fe + T_wave·⌈j·n_b/N⌉/n_b",
        "TPOT_j = t_d + (T_wave − t_j)/(T_out − 1)",
    ] {
        assert!(out.contains(s), "missing {s:?}");
    }
    let v = json(&[&sglang[..], &["--json"]].concat());
    assert_eq!(v["serving"]["continuous"]["lockstep"], true);
    let waves = json(&["infer", C64, "--workload", "lockstep=64", "--json"]);
    let stag = json(&["infer", C64, "--json"]);
    let (w, s) = (
        &waves["serving"]["continuous"],
        &stag["serving"]["continuous"],
    );
    assert!(w.get("lockstep").is_none(), "{w}");
    assert_eq!(w["ttft_s"], s["ttft_s"]);
    assert_eq!(w["requests_per_s"], s["requests_per_s"]);
    let (code, out, _) = run(&["infer", C64, "--workload", "lockstep=64"]);
    assert_eq!(code, 0);
    assert!(out.contains("(waves do not persist: staggered)"), "{out}");
    rejects(
        &["infer", C64, "--workload", "lockstep=0"],
        &["lockstep=0", "lockstep=N"],
    );
}

/// A bf16 model is searched in bf16 (the report says so); with
/// `--allow-quantization` int8/fp8 plans appear.
#[test]
fn plan_infer_quantises_only_when_allowed() {
    let base = [
        "plan",
        "infer",
        "--model",
        "llama-3.1-70b",
        "--hw",
        "h100",
        "--max-chips",
        "16",
        "--tpot-slo",
        "50ms",
        "--json",
    ];
    let v = json(&base);
    assert!(v["dtypes"]
        .as_str()
        .unwrap()
        .contains("--allow-quantization"));
    for p in v["points"].as_array().unwrap() {
        assert_eq!(
            (p["weights_dtype"].as_str(), p["kv_dtype"].as_str()),
            (Some("bf16"), Some("bf16"))
        );
    }
    let mut q = base.to_vec();
    q.push("--allow-quantization");
    let v = json(&q);
    assert!(v["points"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["weights_dtype"] != "bf16"));
}
