//! Disaggregated serving (issue 26, part 4): a prefill pool and a decode pool
//! with their own layouts, the KV hand-off between them and the pools'
//! balance. Expected values are derived by hand in the comments.

use meshplan_core::inference::serving::disagg::{self, compose, DisaggRequest, KvLink, PoolTimes};
use meshplan_core::inference::{self, scenario::resolve, InferReport};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::Catalog;

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        ((got - want) / want).abs() <= rel,
        "{what}: got {got}, want {want} (rel {rel})"
    );
}

fn setup(toml: &str) -> inference::scenario::InferSetup {
    let sc = Scenario::parse(toml, "test.toml").unwrap();
    resolve(&sc, Catalog::builtin()).unwrap()
}

/// The plain `infer` of one worker: `chips` chips at tp, batch `b`.
fn worker(chips: u64, b: u64) -> InferReport {
    let s = setup(&format!(
        r#"
model = {{ name = "llama-3.1-70b" }}
hardware = {{ chip = "h200", chips = {chips} }}
parallelism = {{ tp = {chips} }}
inference = {{ engine = "vllm", prompt_len = 4096, gen_len = 1024, batch = {b} }}
"#
    ));
    inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).unwrap()
}

/// Llama-3.1-70B on H200 under vLLM: prefill tp8 × 2 workers, decode tp8 ×
/// 1 worker at batch 128; prompt 4096, output 1024.
#[test]
fn llama_70b_prefill_tp8x2_decode_tp8_by_hand() {
    let s = setup(
        r#"
model = { name = "llama-3.1-70b" }
hardware = { chip = "h200" }
inference = { engine = "vllm", prompt_len = 4096, gen_len = 1024, prefill = "tp=8,workers=2", decode = "tp=8,workers=1,batch=128" }
"#,
    );
    let d = s.disagg.expect("both pools given");
    let mut rec = Recorder::default();
    let r = disagg::evaluate(&s.model, &s.chip, &s.query, &d, &mut rec).unwrap();
    // KV per request: 2·K·H·L·bytes·T_in = 2·8·128·80·2·4096 = 1,342,177,280 B
    // (Llama-3.1-70B: L = 80 layers, K = 8 KV heads of H = 128, bf16)
    assert_eq!(r.point.kv_bytes_per_request, 1_342_177_280.0);
    // 24 chips > the 8-GPU NVLink domain: InfiniBand, 400 Gb/s = 50 GB/s per
    // GPU one way, 8 chips in parallel: 1.342e9/(8·50e9) = 3.355 ms (+ 5 µs α)
    assert_eq!(r.kv_link.level, "infiniband");
    close(r.point.kv_transfer_s, 3.355e-3 + 5e-6, 1e-3, "t_kv");
    assert_eq!(r.point.kv_transfer_exposed_s, r.point.kv_transfer_s);
    // pool balance: R_p = W_p/s_1 with s_1 the prefill of one prompt on one
    // tp8 worker; R_d = W_d·B_d/((T_out − 1)·t_d) with t_d its step at 128
    let s_1 = worker(8, 1).ttft_s.get();
    let t_d = worker(8, 128).decode_step_time_s.get();
    close(
        r.point.prefill_capacity_requests_per_s,
        2.0 / s_1,
        1e-12,
        "R_p",
    );
    close(
        r.point.decode_capacity_requests_per_s,
        128.0 / (1023.0 * t_d),
        1e-12,
        "R_d",
    );
    // the decode pool bounds: R = R_d; both pools' 24 chips count
    assert_eq!(r.point.bound_by, "decode");
    close(r.point.requests_per_s, 128.0 / (1023.0 * t_d), 1e-12, "R");
    close(
        r.point.output_tokens_per_s_per_chip,
        128.0 / (1023.0 * t_d) * 1024.0 / 24.0,
        1e-12,
        "tokens/s/chip",
    );
    close(r.point.tpot_s, t_d, 1e-12, "TPOT");
    // every step is in the derivation
    for id in [
        "serving.disagg.kv_transfer",
        "serving.disagg.prefill_capacity",
        "serving.disagg.decode_capacity",
        "serving.disagg.ttft",
    ] {
        assert!(rec.steps().iter().any(|x| x.id == id), "{id}");
    }
}

/// Both pools inside one 8-GPU node: the KV crosses NVLink (450 GB/s one
/// way per H200), 4 chips in parallel: 1.342e9/(4·450e9) = 0.7457 ms.
#[test]
fn pools_in_one_node_hand_off_over_nvlink() {
    let s = setup(
        r#"
model = { name = "llama-3.1-70b" }
hardware = { chip = "h200" }
inference = { engine = "vllm", prompt_len = 4096, gen_len = 1024, prefill = "tp=4", decode = "tp=4,batch=16" }
"#,
    );
    let r = disagg::evaluate(
        &s.model,
        &s.chip,
        &s.query,
        &s.disagg.unwrap(),
        &mut NoTrace,
    )
    .unwrap();
    assert_eq!(r.kv_link.level, "nvlink");
    assert_eq!(r.point.chips, 8);
    close(
        r.point.kv_transfer_s - r.kv_link.latency_s,
        1_342_177_280.0 / (4.0 * 450e9),
        1e-9,
        "t_kv",
    );
}

/// [`compose`] by hand: s_1 = 0.5 s, t_d = 20 ms, B_d = 64, W = (2, 1),
/// c = (4, 8), T_out = 101, KV 1 GB over 4 × 25 GB/s, t_fe = 0.1 s.
/// R_p = 2/0.5 = 4, R_d = 64/(100·0.02) = 32: prefill bounds, R = 0.95·4 =
/// 3.8; balance ⌈32·0.5/0.95⌉ = 17; ρ = 3.8·0.5/2 = 0.95, W̄ = 0.95·0.5/(2·0.05)
/// = 4.75 s; t_kv = 1e9/1e11 = 10 ms; TTFT = 0.1 + 4.75 + 0.5 + 0.01 +
/// 0.01 = 5.37 s; tokens/s/chip = 3.8·101/16 = 23.9875. Layer by layer over
/// L = 10: max(1 ms, 10 ms − 0.45 s) = 1 ms.
#[test]
fn compose_by_hand() {
    let t = PoolTimes {
        prefill_s: 0.5,
        decode_step_s: 0.02,
        decode_batch: 64,
        chips: (4, 8),
        workers: (2, 1),
    };
    let link = KvLink {
        level: "test".into(),
        bytes_per_s_per_chip_one_way: 25e9,
        parallel_chips: 4,
        latency_s: 0.0,
    };
    let mut q = DisaggRequest {
        gen_len: 101,
        layers: 10,
        kv_bytes: 1e9,
        frontend_s: 0.1,
        kv_overlap: false,
        rate: None,
        percentiles: true,
    };
    let p = compose(&t, &q, &link, &mut NoTrace);
    close(p.prefill_capacity_requests_per_s, 4.0, 1e-12, "R_p");
    close(p.decode_capacity_requests_per_s, 32.0, 1e-12, "R_d");
    assert_eq!(p.bound_by, "prefill");
    close(p.requests_per_s, 3.8, 1e-12, "R");
    assert_eq!(p.balanced_prefill_workers, 17);
    close(p.kv_transfer_s, 0.01, 1e-12, "t_kv");
    close(p.ttft_s.mean, 5.37, 1e-12, "TTFT");
    close(p.output_tokens_per_s_per_chip, 23.9875, 1e-12, "tok/s/chip");
    close(p.output_tokens_per_s_per_user, 50.0, 1e-12, "tok/s/user");
    q.kv_overlap = true;
    let p = compose(&t, &q, &link, &mut NoTrace);
    close(p.kv_transfer_exposed_s, 0.001, 1e-12, "exposed");
    // an offered rate below capacity is served as offered
    q.rate = Some(1.0);
    let p = compose(&t, &q, &link, &mut NoTrace);
    assert_eq!((p.requests_per_s, p.saturated), (1.0, false));
    q.rate = Some(10.0);
    assert!(compose(&t, &q, &link, &mut NoTrace).saturated);
}

#[test]
fn bad_pools_are_refused_with_their_flag() {
    let sc = |inf: &str| {
        Scenario::parse(
            &format!(
                "model = {{ name = \"llama-3.1-70b\" }}\nhardware = {{ chip = \"h200\" }}\ninference = {{ {inf} }}\n"
            ),
            "t.toml",
        )
        .unwrap()
    };
    let cat = Catalog::builtin();
    for (inf, msg) in [
        (r#"prefill = "tp=8""#, "needs both pools"),
        (r#"prefill = "tp=0", decode = "tp=8""#, "prefill"),
        (r#"prefill = "tp=8", decode = "tp=3""#, "TP = 3"),
        (r#"kv_overlap = true"#, "kv_overlap"),
    ] {
        let e = match resolve(&sc(inf), cat) {
            Err(e) => e.to_string(),
            Ok(s) => disagg::evaluate(
                &s.model,
                &s.chip,
                &s.query,
                &s.disagg.unwrap(),
                &mut NoTrace,
            )
            .unwrap_err()
            .to_string(),
        };
        assert!(e.contains(msg), "{inf}: {e}");
    }
    // a decode batch that does not fit one worker names its largest
    let s = resolve(&sc(r#"prefill = "tp=8", decode = "tp=2,batch=4096""#), cat).unwrap();
    let e = disagg::evaluate(
        &s.model,
        &s.chip,
        &s.query,
        &s.disagg.unwrap(),
        &mut NoTrace,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--decode") && e.contains("largest"), "{e}");
}
