//! The sizing, inference-threshold and convention keys of issue 24: each
//! computed by meshplan from a scenario, as every front end runs it, and
//! compared with a value derived by hand (in the comment) or printed by
//! the book. The book's claims files for these keys keep their verdicts.

mod common;

use std::path::PathBuf;

use meshplan_core::check::{check, Verdict};
use meshplan_core::inference::{self, InferReport};
use meshplan_core::model::report::{model_report, ModelQuery, ModelReport};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::training::{self, TrainReport};
use meshplan_core::Catalog;

#[track_caller]
fn close(what: &str, got: f64, want: f64, rel_tol: f64) {
    let rel = (got / want - 1.0).abs();
    assert!(
        rel <= rel_tol,
        "{what}: meshplan {got} vs {want}: off by {rel:.2e} > {rel_tol}"
    );
}

fn scenario(src: &str) -> Scenario {
    Scenario::parse(src, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn train(src: &str) -> TrainReport {
    let s = training::scenario::resolve(&scenario(src), Catalog::builtin())
        .unwrap_or_else(|e| panic!("{e}"));
    s.analyze(&mut NoTrace)
}

fn infer(src: &str) -> InferReport {
    let s = inference::scenario::resolve(&scenario(src), Catalog::builtin())
        .unwrap_or_else(|e| panic!("{e}"));
    inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).unwrap_or_else(|e| panic!("{e}"))
}

fn model(src: &str, seq_len: u64) -> ModelReport {
    let spec = scenario(src)
        .model
        .resolve(Catalog::builtin())
        .unwrap_or_else(|e| panic!("{e}"));
    let q = ModelQuery {
        seq_len,
        ..ModelQuery::default()
    };
    model_report(&spec, &q, &mut NoTrace)
}

/// The book's ch6 question: LLaMA 3-70B as 70e9 parameters, 4M-token
/// batch, bf16 params, fp32 Adam moments (8 bytes), 4 bf16 checkpoints of
/// [B, D] per layer, on TPU v5p (96 GB), over the 8960-chip pod.
const CH6: &str = r#"
model = { name = "llama-3.1-70b", params_given = "70e9" }
hardware = { chip = "tpu-v5p@book", mesh = "16x20x28" }
training = { batch_tokens = "4M", seq_len = 4096, optimizer = "adam", optimizer_dtype = "fp32", checkpoints_per_layer = 4 }
parallelism = { fsdp = 8960 }
"#;

#[test]
fn ch6_k_checkpoints_and_the_fewest_chips_without_gradients() {
    let r = train(CH6);
    let s = &r.sizing;
    // activations: k·bytes·B·D·L = 4·2·4e6·8192·80 = 20,971,520,000,000 B
    // (book: "2 * 8192 * 4e6 * 3 * 80 … ~20.9TB", its total uses 4)
    assert_eq!(s.checkpoints_per_layer, Some(4));
    close("activation_bytes", s.activation_bytes, 20.97152e12, 1e-12);
    close(
        "checkpoint_bytes_per_bd",
        s.checkpoint_bytes_per_bd,
        20.97152e12 / 4.0,
        1e-12,
    );
    // params + optimizer: 70e9·(2 + 8) = 700e9 B (book: 140 GB + 560 GB)
    close("params_optimizer", s.params_optimizer_bytes, 700e9, 1e-12);
    // 700e9/96e9 = 7.2917 → 8 chips
    close(
        "min_chips_params_optimizer_exact",
        s.min_chips_params_optimizer_exact,
        700e9 / 96e9,
        1e-12,
    );
    assert_eq!(s.min_chips_params_optimizer, 8);
    // no gradients: 700e9 + 20.97152e12 = 21.67152e12 B → /96e9 = 225.745
    // (book: "21.6e12 / 96e9 = 225 TPUs")
    close(
        "params_optimizer_activations",
        s.params_optimizer_activations_bytes,
        21.67152e12,
        1e-12,
    );
    close(
        "min_chips_params_optimizer_activations_exact",
        s.min_chips_params_optimizer_activations_exact,
        225.745,
        1e-5,
    );
    assert_eq!(s.min_chips_params_optimizer_activations, 226);
    close(
        "book's 225",
        s.min_chips_params_optimizer_activations_exact,
        225.0,
        0.005,
    );
    // per chip of 8960: 21.67152e12/8960 = 2.4187 GB (book: "about 2.4GB")
    close(
        "per chip",
        s.params_optimizer_activations_bytes_per_chip,
        21.67152e12 / 8960.0,
        1e-12,
    );
    // with gradients (bf16, 2·70e9 more) the older minimum counts more
    close("memory_bytes", s.memory_bytes, 21.67152e12 + 140e9, 1e-12);
    assert_eq!(s.min_chips_memory, 228); // 21.81152e12/96e9 = 227.2
}

#[test]
fn k_checkpoints_set_the_book_accounting_per_device() {
    // pure FSDP over 8960: activations per device = k·bytes·(B/N)·D·L
    // = 4·2·(4e6/8960)·8192·80 = 2,340,571,428.6 B
    let r = train(CH6);
    close(
        "activations per device",
        r.memory_per_device.activations_bytes.get(),
        4.0 * 2.0 * 4e6 / 8960.0 * 8192.0 * 80.0,
        1e-12,
    );
    // and the remat policy alone (full: 1 checkpoint) is a quarter of that
    let one = train(&CH6.replace(", checkpoints_per_layer = 4", ""));
    close(
        "remat full",
        one.memory_per_device.activations_bytes.get(),
        2.0 * 4e6 / 8960.0 * 8192.0 * 80.0,
        1e-12,
    );
    assert_eq!(one.sizing.checkpoints_per_layer, None);
}

#[test]
fn zero_checkpoints_is_a_clear_error() {
    let sc = scenario(&CH6.replace("checkpoints_per_layer = 4", "checkpoints_per_layer = 0"));
    let Err(e) = training::scenario::resolve(&sc, Catalog::builtin()) else {
        panic!("k = 0 is refused");
    };
    assert!(e.to_string().contains("checkpoints_per_layer"), "{e}");
}

#[test]
fn ch5_largest_model_pure_data_parallelism_holds() {
    // ch5 takeaway: "num_params = HBM per device / 10" (bf16 params + fp32
    // Adam moments) = 96e9/10 = 9.6e9 on a v5p ("roughly 9B")
    let r = train(
        r#"
model = { name = "book-ch5-llama-2-13b" }
hardware = { chip = "tpu-v5p@book", mesh = "1x1x1" }
training = { batch_tokens = 4096, seq_len = 4096, optimizer = "adam", optimizer_dtype = "fp32" }
"#,
    );
    close(
        "max params",
        r.sizing.max_params_per_chip_params_optimizer,
        9.6e9,
        1e-12,
    );
    // LLaMA-2 13B: 13,015,449,600·10 = 130.15 GB > 96 GB → 2 chips (ch5 Q3.1)
    close(
        "params_optimizer",
        r.sizing.params_optimizer_bytes,
        130.154496e9,
        1e-12,
    );
    assert_eq!(r.sizing.min_chips_params_optimizer, 2);
}

/// ch8: batch 32, prompts of 8192, generations of 4096, int8 on v5e 4x4.
const CH8: &str = r#"
model = { name = "llama-3.1-70b" }
hardware = { chip = "tpu-v5e@book", mesh = "4x4" }
inference = { weights_dtype = "int8", kv_dtype = "int8", batch = 32, prompt_len = 8192, gen_len = 4096 }
"#;

#[test]
fn ch8_continuous_batching_turnover() {
    let r = infer(CH8);
    // book: "32 / 4096 sequences evicted per step", "32 * (8192 + 4096) /
    // 4096 = 96 tokens evicted per step"
    close(
        "completions",
        r.aggregates.completions_per_step,
        32.0 / 4096.0,
        1e-15,
    );
    close(
        "evicted",
        r.aggregates.kv_tokens_evicted_per_step,
        96.0,
        1e-15,
    );
}

#[test]
fn weights_only_chip_count_with_the_given_and_exact_counts() {
    // book ch8 table: ceil(70e9·sizeof(dtype)/16e9): bf16 8.75, int8 4.38
    let given = CH8.replace(
        r#"name = "llama-3.1-70b""#,
        r#"name = "llama-3.1-70b", params_given = "70e9""#,
    );
    let r = infer(&given);
    close(
        "int8 given",
        r.aggregates.min_chips_weights_exact,
        4.375,
        1e-12,
    );
    let bf16 = infer(&given.replace(r#"weights_dtype = "int8""#, r#"weights_dtype = "bf16""#));
    close(
        "bf16 given",
        bf16.aggregates.min_chips_weights_exact,
        8.75,
        1e-12,
    );
    // exact: 70,553,706,496 int8 bytes / 16e9 = 4.40961
    let exact = infer(CH8);
    close(
        "int8 exact",
        exact.aggregates.min_chips_weights_exact,
        70_553_706_496.0 / 16e9,
        1e-12,
    );
    assert_eq!(exact.params_total, 70_553_706_496);
    assert_eq!(r.params_total, 70_000_000_000);
}

#[test]
fn kv_thresholds_by_hand() {
    let r = infer(CH8);
    let a = &r.aggregates;
    // LLaMA 3-70B int8 KV per token: 2·L·K·H = 2·80·8·128 = 163,840 B;
    // int8 weights: 70,553,706,496 B; B = 32, T = 8192 + 4096 = 12,288.
    let w = 70_553_706_496.0;
    let kv = 163_840.0;
    close(
        "T* (KV = weights at B)",
        a.kv_equals_weights_context_len.unwrap(),
        w / (32.0 * kv),
        1e-12,
    );
    close(
        "B* (KV = weights at T)",
        a.kv_equals_weights_batch.unwrap(),
        w / (12_288.0 * kv),
        1e-12,
    );
    // KV load of one sequence = its token's FLOPs: T = 2·P·W/(C·KV)
    // = 2·70.55e9·8.2e11/(1.97e14·163,840) = 3585 (bf16 FLOPs on v5e@book:
    // C = 1.97e14, W_hbm = 8.2e11)
    close(
        "T* (KV = FLOPs)",
        a.kv_load_equals_flops_context_len.unwrap(),
        2.0 * w * 8.2e11 / (1.97e14 * kv),
        1e-9,
    );
}

#[test]
fn model_ratio_keys_and_the_moe_factor() {
    // LLaMA 3-70B: attention 80·(2·8192·64·128 + 2·8192·8·128) =
    // 12,079,595,520 of 70,553,706,496 = 0.171211
    let m = model(r#"model = { name = "llama-3.1-70b" }"#, 4096);
    close(
        "attention share",
        m.attention_params_fraction,
        12_079_595_520.0 / 70_553_706_496.0,
        1e-12,
    );
    assert_eq!(m.moe_factor_book, 1.0);
    assert_eq!(m.moe_factor_exact, 1.0);
    // book ch7 Q5: E = 16, k = 2 → E/k = 8; exact P/P_active =
    // 211,662,929,920 / 31,274,303,488 = 6.76795
    let moe = model(r#"model = { name = "book-ch7-18b-moe" }"#, 4096);
    assert_eq!(moe.moe_factor_book, 8.0);
    close(
        "P/P_active",
        moe.moe_factor_exact,
        211_662_929_920.0 / 31_274_303_488.0,
        1e-12,
    );
}

#[test]
fn attention_crossover_width_is_t_over_8_for_the_books_mha() {
    // MHA (K = N, N·H = D) with a plain F = 4D MLP: T* = (2·D·2D + 2·D·4D)
    // /(2·D) = 6D; gated F = 4D: (4D² + 12D²)/(2D) = 8D (book: "T < 8·D").
    // At T = 32,768 the crossover width is T/8 = 4096 for the gated model.
    let m = model(
        r#"model = { n_layers = 2, d_model = 1024, d_ff = 4096, n_heads = 8, vocab = 1000 }"#,
        32_768,
    );
    close(
        "T*",
        m.attention_equals_matmuls_seq_len,
        8.0 * 1024.0,
        1e-12,
    );
    close(
        "D*",
        m.attention_equals_matmuls_d_model,
        32_768.0 / 8.0,
        1e-12,
    );
}

#[test]
fn params_given_replaces_p_and_keeps_the_exact_count_beside_it() {
    let m = model(
        r#"model = { name = "llama-3.1-70b", params_given = "70e9" }"#,
        4096,
    );
    assert_eq!(m.params_total, 70_000_000_000);
    assert_eq!(m.params_total_exact, 70_553_706_496);
    assert_eq!(m.params_active, 70_000_000_000); // dense: P_active = P
                                                 // the breakdown stays exact: attention 12,079,595,520
    assert_eq!(m.params_attention, 12_079_595_520);
    // the derivation names the convention
    let spec = scenario(r#"model = { name = "llama-3.1-70b", params_given = "70e9" }"#)
        .model
        .resolve(Catalog::builtin())
        .unwrap();
    let mut rec = Recorder::default();
    model_report(&spec, &ModelQuery::default(), &mut rec);
    assert!(rec.steps().iter().any(|s| s.id == "params.given"));
    // a count far from the architecture's is refused, with the reason
    let Err(e) = scenario(r#"model = { name = "llama-3.1-70b", params_given = "7e9" }"#)
        .model
        .resolve(Catalog::builtin())
    else {
        panic!("7e9 for a 70B architecture is refused");
    };
    assert!(e.to_string().contains("params_given"), "{e}");
}

/// The claims files of these keys keep their verdicts (the FAILs are the
/// book's annotated slips).
#[test]
fn claims_files_keep_their_verdicts() {
    use Verdict::{Fail as F, Pass as P};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files: [(&str, &[Verdict]); 5] = [
        ("examples/book/ch4-thresholds.toml", &[P, P, F, P, F]),
        ("examples/book/ch5-sizing.toml", &[P, P, P, P]),
        (
            "examples/book/ch6-sizing.toml",
            &[P, P, P, P, P, P, F, P, P],
        ),
        ("examples/book/ch7-moe-factor.toml", &[P, F]),
        ("examples/book/ch8-sizing.toml", &[P, P, F, F, F, P, P, P]),
    ];
    for (rel, want) in files {
        let f = common::claims_file(&root.join(rel));
        let r = check(&f, Catalog::builtin(), false).unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<Verdict> = r.claims.iter().map(|c| c.verdict).collect();
        assert_eq!(got, want, "{rel}");
        for c in r.claims.iter().filter(|c| c.verdict == F) {
            let note = c.note.as_deref().unwrap_or("");
            assert!(
                note.starts_with("BOOK "),
                "{rel}: {} fails unannotated",
                c.id
            );
        }
    }
}

#[test]
fn params_given_scales_an_moes_active_count_alike() {
    // DeepSeek-V3: 671,026,419,200 total, 37,552,297,472 active; given
    // "671e9" keeps P_active/P: 37,552,297,472 · 671e9/671,026,419,200
    // (rounded to a whole parameter)
    let m = model(
        r#"model = { name = "deepseek-v3", params_given = "671e9" }"#,
        4096,
    );
    assert_eq!(m.params_total, 671_000_000_000);
    assert_eq!(m.params_total_exact, 671_026_419_200);
    let want = (37_552_297_472.0 * 671e9 / 671_026_419_200.0_f64).round();
    assert_eq!(m.params_active as f64, want);
    // the book's factor is the same; the exact one barely moves
    assert_eq!(m.moe_factor_book, 32.0);
    close(
        "P/P_active",
        m.moe_factor_exact,
        671_026_419_200.0 / 37_552_297_472.0,
        1e-9,
    );
}

#[test]
fn k_checkpoints_need_the_book_accounting() {
    // H100 defaults to Megatron's tensor list, which k cannot describe:
    // refused with the way out, never silently ignored
    let src = r#"
model = { name = "llama-3-8b" }
hardware = { chip = "h100", chips = 8 }
training = { checkpoints_per_layer = 4 }
"#;
    let Err(e) = training::scenario::resolve(&scenario(src), Catalog::builtin()) else {
        panic!("k under megatron is refused");
    };
    assert!(e.to_string().contains("framework = \"book\""), "{e}");
    let ok = train(&src.replace(
        "checkpoints_per_layer = 4",
        "checkpoints_per_layer = 4, framework = \"book\"",
    ));
    // 4·2·B·D·L with the default B = 2^20 tokens, D = 4096, L = 32
    close(
        "A",
        ok.sizing.activation_bytes,
        4.0 * 2.0 * 1_048_576.0 * 4096.0 * 32.0,
        1e-12,
    );
}
