//! Hugging Face `config.json` import (issue 2, point 4).
//!
//! Every fixture under `tests/fixtures/hf/` is a hand-written copy of a real
//! model's config; its expected parameter count is a published figure (the
//! source is quoted above each assertion, and in `fixtures/hf/EXPECTED.md`).
//! Adversarial configs must give an error, never a panic.

use std::path::{Path, PathBuf};

use meshplan_core::hf;
use meshplan_core::model::{kv, params, ModelSpec};
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Error;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf")
}

fn load(file: &str) -> ModelSpec {
    let p = fixture_dir().join(file);
    let src = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    hf::import(&src, file, file.trim_end_matches(".json")).unwrap_or_else(|e| panic!("{e}"))
}

/// (total, active) parameters of an imported fixture.
fn counts(file: &str) -> (u64, u64) {
    let c = params::count(&load(file).arch, &mut NoTrace);
    (c.total, c.active)
}

fn kv_per_token(file: &str, dtype: DType) -> f64 {
    kv::bytes_per_token(&load(file).arch, dtype, &mut NoTrace).get()
}

// ---------------------------------------------------------------- totals

/// Each fixture's total parameters against a published figure (the source
/// above each row) and, for MoE models, the active parameters derived exactly
/// and the publisher's rounded figure with the distance allowed from it
/// (dense models: active = total).
#[test]
fn totals_match_published_counts() {
    #[allow(clippy::type_complexity)]
    let cases: &[(&str, u64, Option<(u64, f64, f64)>)] = &[
        // Published: 6,738,415,616 = LlamaForCausalLM.num_parameters() and GGUF
        // general.parameter_count for meta-llama/Llama-2-7b-hf (the Hub safetensors
        // total 6,738,417,664 adds 32 rotary inv_freq buffers of 64, not parameters).
        ("llama-2-7b.json", 6_738_415_616, None),
        // Published: Hub API safetensors.total of meta-llama/Llama-3.1-8B.
        ("llama-3.1-8b.json", 8_030_261_248, None),
        // Published: Hub safetensors total of mistralai/Mistral-7B-v0.1 (= GGUF general.parameter_count).
        ("mistral-7b.json", 7_241_732_096, None),
        // Published: Hub safetensors total of mistralai/Mixtral-8x7B-v0.1.
        // Active derived (top-2 of 8 experts, router and embeddings counted); Mistral AI's
        // announcement publishes "12.9B per token" (rounded to 0.1B): within 0.5 %.
        (
            "mixtral-8x7b.json",
            46_702_792_704,
            Some((12_879_925_248, 12.9e9, 5e-3)),
        ),
        // Published: Hub safetensors total of Qwen/Qwen2.5-7B (same for -Instruct).
        // Needs the implied q/k/v biases of model_type qwen2.
        ("qwen2.5-7b.json", 7_615_616_512, None),
        // Published: Hub API safetensors.total of Qwen/Qwen3-8B (q_norm/k_norm included).
        ("qwen3-8b.json", 8_190_735_360, None),
        // Published: Hub API safetensors.total of Qwen/Qwen3-30B-A3B.
        // Active derived exactly (8 of 128 experts); the model card says "3.3B activated": within 2 %.
        (
            "qwen3-30b-a3b.json",
            30_532_122_624,
            Some((3_353_032_704, 3.3e9, 0.02)),
        ),
        // Published: Hub API safetensors.total (BF16) of Qwen/Qwen3-235B-A22B.
        // Active derived exactly; the model card says "22B activated": within 1 %.
        (
            "qwen3-235b-a22b.json",
            235_093_634_560,
            Some((22_190_763_520, 22e9, 0.01)),
        ),
        // Published: Hub API safetensors.total of google/gemma-2-9b (head_dim 256 ≠ D/N, tied, 4 norms/layer).
        ("gemma-2-9b.json", 9_241_705_984, None),
        // Published: Hub API safetensors.total of google/gemma-3-1b-it.
        ("gemma-3-1b.json", 999_885_952, None),
        // Published: GPT2LMHeadModel.num_parameters() for openai-community/gpt2
        // (the Hub total also counts 12 attn.bias mask buffers).
        ("gpt2.json", 124_439_808, None),
        // Published: Hub safetensors total of microsoft/Phi-3-mini-4k-instruct.
        ("phi-3-mini-4k-instruct.json", 3_821_079_552, None),
    ];
    for &(file, total, moe) in cases {
        let (t, active) = counts(file);
        assert_eq!(t, total, "{file}: total");
        match moe {
            None => assert_eq!(active, total, "{file}: a dense model's active = total"),
            Some((exact, published, within)) => {
                assert_eq!(active, exact, "{file}: active");
                let off = (active as f64 / published - 1.0).abs();
                assert!(
                    off < within,
                    "{file}: active {active} vs published {published}"
                );
            }
        }
    }
}

#[test]
fn gemma_3_27b_text_config_defaults() {
    // Derived from a published figure: Hub safetensors total 27,432,406,640 of
    // google/gemma-3-27b-it (Gemma3ForConditionalGeneration) minus the SigLIP
    // vision tower (416,866,032) and the multimodal projector (6,194,304).
    // text_config has no vocab_size: Gemma3TextConfig's default 262,208 applies.
    let m = load("gemma-3-27b.json");
    assert_eq!(m.arch.vocab, 262_208);
    assert_eq!(
        params::count(&m.arch, &mut NoTrace).total,
        27_432_406_640 - 416_866_032 - 6_194_304
    );
    assert_eq!(params::count(&m.arch, &mut NoTrace).total, 27_009_346_304);
    // Also defaulted: max_position_embeddings 131,072 and sliding_window_pattern 6.
    assert_eq!(m.max_seq_len, 131_072);
    let sw = m
        .arch
        .sliding_window
        .as_ref()
        .expect("gemma-3 has local layers");
    assert_eq!((sw.window, sw.global_every), (1024, 6));
    assert!(m.notes.contains("vision"), "{}", m.notes);
}

#[test]
fn deepseek_v3() {
    let m = load("deepseek-v3.json");
    let c = params::count(&m.arch, &mut NoTrace);
    // Derived: per-tensor count of the main model (layers 0–60, embed, norm,
    // lm_head; MTP module excluded). DeepSeek-V3 Technical Report (arXiv
    // 2412.19437) publishes "671B total, 37B activated": within 0.1 % / 1.5 %.
    assert_eq!(c.total, 671_026_419_200);
    assert_eq!(c.active, 37_552_297_472);
    assert!((c.total as f64 / 671e9 - 1.0).abs() < 1e-3);
    assert!((c.active as f64 / 37e9 - 1.0).abs() < 0.015);
    assert!(m.notes.contains("multi-token"), "{}", m.notes);
}

#[test]
fn pythia_160m() {
    let m = load("pythia-160m.json");
    let c = params::count(&m.arch, &mut NoTrace);
    // Published: EleutherAI Pythia README: 162,322,944 total, 85,056,000 non-embedding.
    assert_eq!(c.total, 162_322_944);
    assert_eq!(c.non_embedding(), 85_056_000);
}

/// Every fixture imports, and every fixture has an exact expectation above
/// (so a new fixture without a test fails here).
#[test]
fn every_fixture_is_pinned() {
    let pinned = [
        "deepseek-v3.2-exp.json",
        "deepseek-v3.json",
        "gemma-2-9b.json",
        "gemma-3-1b.json",
        "gemma-3-27b.json",
        "gpt2.json",
        "llama-2-7b.json",
        "llama-3.1-8b.json",
        "mistral-7b.json",
        "mixtral-8x7b.json",
        "phi-3-mini-4k-instruct.json",
        "pythia-160m.json",
        "qwen2.5-7b.json",
        "qwen3-235b-a22b.json",
        "qwen3-30b-a3b.json",
        "qwen3-8b.json",
        "qwen3-next-80b-a3b.json",
    ];
    let mut found: Vec<String> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    found.sort();
    assert_eq!(
        found, pinned,
        "add an exact-count test for each new fixture"
    );
    let mut types = std::collections::BTreeSet::new();
    for f in pinned {
        let m = load(f);
        m.arch.validate().unwrap();
        let c = params::count(&m.arch, &mut NoTrace);
        assert!(c.active <= c.total && c.total > 0, "{f}");
        types.insert(
            m.source
                .split("model_type ")
                .nth(1)
                .unwrap()
                .trim_end_matches(')')
                .to_string(),
        );
    }
    // Every supported model_type has at least one fixture.
    for t in hf::SUPPORTED {
        assert!(types.contains(*t), "no fixture for model_type {t}");
    }
}

// ---------------------------------------------------------------- KV cache

#[test]
fn kv_bytes_per_token_by_hand() {
    // Llama-2-7B, bf16: 2 (K,V) · K=32 · H=128 · L=32 · 2 B = 524,288 B/token.
    assert_eq!(kv_per_token("llama-2-7b.json", DType::Bf16), 524_288.0);
    // Mistral-7B, bf16: 2 · 8 · 128 · 32 · 2 = 131,072 (the window does not change per-token size).
    assert_eq!(kv_per_token("mistral-7b.json", DType::Bf16), 131_072.0);
    // Mixtral-8x7B: same attention as Mistral-7B.
    assert_eq!(kv_per_token("mixtral-8x7b.json", DType::Bf16), 131_072.0);
    // Llama-3.1-8B: 2 · 8 · 128 · 32 · 2 = 131,072.
    assert_eq!(kv_per_token("llama-3.1-8b.json", DType::Bf16), 131_072.0);
    // Qwen3-8B: 2 · 8 · 128 · 36 · 2 = 147,456.
    assert_eq!(kv_per_token("qwen3-8b.json", DType::Bf16), 147_456.0);
    // Gemma-2-9B: 2 · 8 · 256 · 42 · 2 = 344,064 (as if every layer were global).
    assert_eq!(kv_per_token("gemma-2-9b.json", DType::Bf16), 344_064.0);
    // DeepSeek-V3 MLA caches the latent and the shared rope key:
    // (kv_lora_rank 512 + qk_rope 64) · 61 layers elements = 35,136; bf16 70,272 B.
    assert_eq!(
        kv_per_token("deepseek-v3.json", DType::Bf16),
        ((512 + 64) * 61 * 2) as f64
    );
    // GPT-2 (MHA): 2 · L · D = 2 · 12 · 768 elements, fp32 4 B.
    assert_eq!(
        kv_per_token("gpt2.json", DType::Fp32),
        (2 * 12 * 768 * 4) as f64
    );
}

#[test]
fn kv_per_sequence_honours_windows() {
    // Mistral-7B at 8192 tokens: every layer keeps only its 4096-token window.
    let m = load("mistral-7b.json");
    let s = kv::bytes_per_sequence(&m.arch, 8192, DType::Bf16, &mut NoTrace).get();
    assert_eq!(s, 4096.0 * 131_072.0);
    // Gemma-3-27B at 32k: 62 layers, every 6th global → 10 global (32,768 tokens)
    // and 52 local (1,024 tokens); 2 · K=16 · H=128 elements per layer·token, bf16.
    let g = load("gemma-3-27b.json");
    let s = kv::bytes_per_sequence(&g.arch, 32_768, DType::Bf16, &mut NoTrace).get();
    assert_eq!(s, ((10 * 32_768 + 52 * 1024) * 2 * 16 * 128 * 2u64) as f64);
    // Llama-2-7B has no window: S × per-token.
    let l = load("llama-2-7b.json");
    let s = kv::bytes_per_sequence(&l.arch, 4096, DType::Bf16, &mut NoTrace).get();
    assert_eq!(s, 4096.0 * 524_288.0);
    // Qwen2.5 has sliding_window set but use_sliding_window false: no window.
    assert!(load("qwen2.5-7b.json").arch.sliding_window.is_none());
}

// ---------------------------------------------------------------- errors

fn import_err(src: &str) -> Error {
    match hf::import(src, "config.json", "x") {
        Ok(m) => panic!("expected an error, imported {:?}", m.arch),
        Err(e) => e,
    }
}

/// A small valid llama config with `patch` merged in (null deletes a key).
fn llama_with(patch: serde_json::Value) -> String {
    let mut v = serde_json::json!({
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 100,
        "tie_word_embeddings": false
    });
    for (k, x) in patch.as_object().unwrap() {
        if x.is_null() {
            v.as_object_mut().unwrap().remove(k);
        } else {
            v[k] = x.clone();
        }
    }
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn small_llama_counts_by_hand() {
    let m = hf::import(&llama_with(serde_json::json!({})), "c.json", "tiny").unwrap();
    // 2V·D + L·(D·N·H + 2·D·K·H + N·H·D + 3·D·F + 2·D) + D, with H = 64/4 = 16.
    let (d, f, n, k, h, l, v) = (64u64, 128, 4, 2, 16, 2, 100);
    let want = 2 * v * d + l * (d * n * h + 2 * d * k * h + n * h * d + 3 * d * f + 2 * d) + d;
    assert_eq!(params::count(&m.arch, &mut NoTrace).total, want);
}

#[test]
fn unknown_model_type_lists_supported() {
    let e = import_err(r#"{"model_type": "bert", "hidden_size": 768}"#);
    assert!(matches!(e, Error::UnsupportedModelType { .. }), "{e:?}");
    let s = e.to_string();
    assert!(s.contains("'bert'"), "{s}");
    for t in hf::SUPPORTED {
        assert!(s.contains(t), "{t} missing from: {s}");
    }
}

#[test]
fn missing_model_type() {
    for src in [r#"{"hidden_size": 64}"#, r#"{"model_type": 7}"#, "[]", "3"] {
        let s = import_err(src).to_string();
        assert!(s.contains("model_type") && s.contains("llama"), "{s}");
    }
}

#[test]
fn missing_required_field_is_named() {
    for key in [
        "hidden_size",
        "num_attention_heads",
        "num_hidden_layers",
        "vocab_size",
        "intermediate_size",
    ] {
        let e = import_err(&llama_with(serde_json::json!({ key: null })));
        match &e {
            Error::Parse { field, .. } => assert_eq!(field.as_deref(), Some(key), "{e}"),
            _ => panic!("{e:?}"),
        }
        assert!(e.to_string().contains(key), "{e}");
    }
    // MoE and MLA fields too.
    let mix = r#"{"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100, "num_experts_per_tok": 2}"#;
    assert!(import_err(mix).to_string().contains("num_local_experts"));
    // A gemma3 config without its text_config.
    assert!(import_err(r#"{"model_type": "gemma3"}"#)
        .to_string()
        .contains("text_config"));
}

#[test]
fn malformed_json_reports_line() {
    let src =
        "{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 64,\n  \"num_hidden_layers\" 2\n}";
    match import_err(src) {
        Error::Parse { file, line, .. } => {
            assert_eq!(file, "config.json");
            assert_eq!(line, 4);
        }
        e => panic!("{e:?}"),
    }
    // Truncated file.
    match import_err("{\n\"model_type\": \"llama\",\n") {
        Error::Parse { line, .. } => assert!(line >= 2, "line {line}"),
        e => panic!("{e:?}"),
    }
    // Empty file.
    assert!(matches!(import_err(""), Error::Parse { .. }));
}

#[test]
fn bad_value_reports_field_and_line() {
    // pretty-printed keys are sorted: line of "hidden_size" in the text.
    let src = llama_with(serde_json::json!({"hidden_size": -64}));
    let want_line = src
        .lines()
        .position(|l| l.contains("\"hidden_size\""))
        .unwrap()
        + 1;
    match import_err(&src) {
        Error::Parse {
            field,
            line,
            message,
            ..
        } => {
            assert_eq!(field.as_deref(), Some("hidden_size"));
            assert_eq!(line, want_line);
            assert!(message.contains("-64"), "{message}");
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn adversarial_configs_are_errors() {
    use serde_json::json;
    let cases = [
        ("zero layers", json!({"num_hidden_layers": 0}), "n_layers"),
        ("zero hidden", json!({"hidden_size": 0}), "d_model"),
        (
            "zero heads",
            json!({"num_attention_heads": 0}),
            "num_attention_heads",
        ),
        (
            "zero kv heads",
            json!({"num_key_value_heads": 0}),
            "n_kv_heads",
        ),
        ("zero vocab", json!({"vocab_size": 0}), "vocab"),
        ("zero ffn", json!({"intermediate_size": 0}), "d_ff"),
        ("N % K != 0", json!({"num_key_value_heads": 3}), "divisible"),
        ("K > N", json!({"num_key_value_heads": 8}), "n_kv_heads"),
        (
            "D % N != 0, no head_dim",
            json!({"hidden_size": 66}),
            "divisible",
        ),
        (
            "negative",
            json!({"num_hidden_layers": -2}),
            "num_hidden_layers",
        ),
        ("float", json!({"hidden_size": 64.5}), "hidden_size"),
        ("string", json!({"vocab_size": "32000"}), "vocab_size"),
        (
            "bool",
            json!({"intermediate_size": true}),
            "intermediate_size",
        ),
        (
            "array",
            json!({"num_attention_heads": [4]}),
            "num_attention_heads",
        ),
        ("object", json!({"hidden_size": {"a": 1}}), "hidden_size"),
        (
            "bad bool",
            json!({"tie_word_embeddings": "yes"}),
            "tie_word_embeddings",
        ),
        ("beyond u64", json!({"vocab_size": 1e30}), "vocab_size"),
        (
            "overflowing product",
            json!({"vocab_size": u64::MAX, "hidden_size": u64::MAX / 4 * 4}),
            "overflow",
        ),
        (
            "huge layers",
            json!({"num_hidden_layers": u64::MAX}),
            "overflow",
        ),
        (
            "huge ffn",
            json!({"intermediate_size": u64::MAX}),
            "overflow",
        ),
        ("huge head_dim", json!({"head_dim": u64::MAX}), "overflow"),
        (
            "huge heads",
            json!({"num_attention_heads": u64::MAX, "num_key_value_heads": u64::MAX, "head_dim": 1}),
            "overflow",
        ),
    ];
    for (what, patch, needle) in cases {
        let e = import_err(&llama_with(patch));
        assert!(e.to_string().contains(needle), "{what}: {e}");
    }
}

#[test]
fn adversarial_family_specific() {
    let errs = [
        // MoE: k > E, E = 0, huge E.
        r#"{"model_type":"mixtral","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"vocab_size":100,"num_local_experts":2,"num_experts_per_tok":3}"#,
        r#"{"model_type":"mixtral","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"vocab_size":100,"num_local_experts":0,"num_experts_per_tok":0}"#,
        r#"{"model_type":"mixtral","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"vocab_size":100,"num_local_experts":18446744073709551615,"num_experts_per_tok":2}"#,
        // qwen3_moe with dense layers is not representable.
        r#"{"model_type":"qwen3_moe","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,
            "vocab_size":100,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"decoder_sparse_step":2}"#,
        // DeepSeek: more dense layers than layers; huge MLA ranks; zero kv rank.
        r#"{"model_type":"deepseek_v3","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"vocab_size":100,"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":4,
            "v_head_dim":8,"n_routed_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"first_k_dense_replace":3}"#,
        r#"{"model_type":"deepseek_v3","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"vocab_size":100,"kv_lora_rank":18446744073709551615,"qk_nope_head_dim":8,
            "qk_rope_head_dim":18446744073709551615,"v_head_dim":8,"n_routed_experts":4,"num_experts_per_tok":2,
            "moe_intermediate_size":32}"#,
        r#"{"model_type":"deepseek_v3","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"vocab_size":100,"kv_lora_rank":0,"qk_nope_head_dim":8,"qk_rope_head_dim":4,
            "v_head_dim":8,"n_routed_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32}"#,
        // GPT-2 with an n_embd whose 4× default inner width overflows u64.
        r#"{"model_type":"gpt2","n_embd":18446744073709551615,"n_layer":1,"n_head":1,"vocab_size":10,"n_positions":8}"#,
        // gpt_neox / gpt2 with D not divisible by N.
        r#"{"model_type":"gpt2","n_embd":10,"n_layer":1,"n_head":3,"vocab_size":10,"n_positions":8}"#,
        r#"{"model_type":"gpt_neox","hidden_size":10,"num_hidden_layers":1,"num_attention_heads":4,
            "intermediate_size":40,"vocab_size":10}"#,
        // Gemma: negative window, zero pattern, text_config not an object.
        r#"{"model_type":"gemma2","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"sliding_window":-1}"#,
        r#"{"model_type":"gemma3_text","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"sliding_window_pattern":0}"#,
        r#"{"model_type":"gemma3","text_config":[1,2]}"#,
        // Mistral: window 0.
        r#"{"model_type":"mistral","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
            "num_hidden_layers":2,"vocab_size":100,"sliding_window":0}"#,
    ];
    for src in errs {
        let e = import_err(src);
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn gemma3_layer_types_instead_of_pattern() {
    // Newer transformers write layer_types; "every 3rd layer global" ⇒ global_every 3.
    let src = r#"{"model_type":"gemma3_text","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
        "num_hidden_layers":6,"sliding_window":16,
        "layer_types":["sliding_attention","sliding_attention","full_attention",
                       "sliding_attention","sliding_attention","full_attention"]}"#;
    let m = hf::import(src, "c.json", "g").unwrap();
    assert_eq!(m.arch.sliding_window.unwrap().global_every, 3);
    assert_eq!(m.arch.vocab, 262_208);
    // An irregular pattern cannot be represented: error, not a wrong answer.
    let bad = src.replace(
        r#""sliding_attention","sliding_attention","full_attention"]"#,
        r#""full_attention","sliding_attention","sliding_attention"]"#,
    );
    assert!(import_err(&bad).to_string().contains("layer_types"));
}
