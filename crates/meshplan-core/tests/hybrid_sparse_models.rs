//! Issue 26 part 3: hybrid linear attention (Qwen3-Next-80B-A3B: Gated
//! DeltaNet in 3 of every 4 layers) and sparse attention (DeepSeek-V3.2-Exp:
//! a lightning indexer picks 2048 keys per query on top of MLA). Every figure
//! is computed by meshplan and compared with a value derived by hand from the
//! models' Hugging Face configs (the derivation in the comment above it) or
//! with the publisher's rounded count.

use std::path::Path;

use meshplan_core::hf;
use meshplan_core::model::{flops, kv, params, Arch, ModelSpec};
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::units::DType;
use meshplan_core::Catalog;

fn model(name: &str) -> &'static ModelSpec {
    Catalog::builtin().model(name).unwrap()
}

fn fixture(file: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf")
        .join(file);
    std::fs::read_to_string(p).unwrap()
}

fn import(file: &str) -> ModelSpec {
    hf::import(&fixture(file), file, "x").unwrap_or_else(|e| panic!("{e}"))
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

// ------------------------------------------------------------ parameters

/// Qwen3-Next-80B-A3B (D = 2048, V = 151,936, L = 48: 36 linear, 12 full):
/// * embeddings 2·V·D = 622,329,856
/// * Gated DeltaNet layer: in_proj_qkvz 2048·(2·2048 + 2·4096) = 25,165,824,
///   in_proj_ba 2048·64 = 131,072, conv (2·2048 + 4096)·4 = 32,768,
///   dt_bias + A_log 64, gated norm 128, out_proj 4096·2048 = 8,388,608
///   → 33,718,464
/// * gated attention layer: q (with gate) 2048·16·256·2 = 16,777,216,
///   k, v 2048·2·256 = 1,048,576 each, o 4096·2048 = 8,388,608, q/k norm
///   2·256 → 27,263,488
/// * MoE layer: 512·3·2048·512 = 1,610,612,736 routed + 3,145,728 shared
///   + 512·2048 = 1,048,576 router; norms 2·2048
///
/// total = 622,329,856 + 36·33,718,464 + 12·27,263,488
///       + 48·(1,614,807,040 + 4,096) + 2,048 = 79,674,292,992 ("80B");
///
/// active = total − 48·502·3,145,728 = 3,874,831,104; without the two V×D
/// embeddings 3,252,501,248, which Qwen's "3B activated" rounds.
#[test]
fn qwen3_next_parameters() {
    let c = params::count(&model("qwen3-next-80b-a3b").arch, &mut NoTrace);
    assert_eq!(c.total, 79_674_292_992);
    assert_eq!(c.active, 3_874_831_104);
    assert_eq!(c.embedding, 622_329_856);
    assert_eq!(c.attention, 36 * 33_718_464 + 12 * 27_263_488);
    assert!(rel(c.total as f64, 80e9) < 0.005);
    assert!(rel((c.active - c.embedding) as f64, 3e9) < 0.1);
    // matmul weights a token goes through: 36·2048·(12288 + 64 + 4096)
    // + 12·(16,777,216 + 2·1,048,576 + 8,388,608) + 48·(11·3·2048·512 +
    // 512·2048) + V·D = 3,562,274,816
    assert_eq!(c.matmul_active, 3_562_274_816);
}

/// DeepSeek-V3.2-Exp = DeepSeek-V3 (671,026,419,200, exact in
/// data/models/deepseek-v3.toml) + per layer the indexer's
/// wq_b 1536·64·128 = 12,582,912, wk 7168·128 = 917,504, k LayerNorm 256,
/// weights_proj 7168·64 = 458,752 → 13,959,424 · 61 = 851,524,864
/// → 671,877,944,064 ("671B" within 0.13 %); activated 37,552,297,472 +
/// 851,524,864 = 38,403,822,336 ("37B": within 4 %, 1.3 % without the
/// 926,679,040 input embedding).
#[test]
fn deepseek_v32_parameters() {
    let c = params::count(&model("deepseek-v3.2-exp").arch, &mut NoTrace);
    assert_eq!(c.total, 671_877_944_064);
    assert_eq!(c.active, 38_403_822_336);
    assert!(rel(c.total as f64, 671e9) < 0.002);
    assert!(rel((c.active - 926_679_040) as f64, 37e9) < 0.015);
    // the indexer's LayerNorm (2·H_I) is not a matmul weight
    let v3 = params::count(&model("deepseek-v3").arch, &mut NoTrace);
    assert_eq!(c.matmul_active - v3.matmul_active, 61 * (13_959_424 - 256));
}

// ------------------------------------------------------------ HF import

/// The configs import to the catalog entries (the attention variants and
/// every count; the catalog writes DeepSeek's shared width out, the import
/// leaves it 0 = the expert width).
#[test]
fn hf_configs_import_to_the_catalog_models() {
    for (file, name) in [
        ("qwen3-next-80b-a3b.json", "qwen3-next-80b-a3b"),
        ("deepseek-v3.2-exp.json", "deepseek-v3.2-exp"),
    ] {
        let m = import(file);
        let (got, want) = (&m.arch, &model(name).arch);
        assert_eq!(got.linear_attention, want.linear_attention, "{file}");
        assert_eq!(got.sparse_attention, want.sparse_attention, "{file}");
        assert_eq!(got.attn_output_gate, want.attn_output_gate, "{file}");
        assert_eq!(
            params::count(got, &mut NoTrace),
            params::count(want, &mut NoTrace),
            "{file}"
        );
        assert_eq!(m.max_seq_len, model(name).max_seq_len, "{file}");
    }
}

/// `layer_types` (transformers' expanded form) gives the same interval as
/// `full_attention_interval`; a list that is not "every n-th layer full"
/// and an interval of 0 are clear errors, not panics.
#[test]
fn qwen3_next_layer_types() {
    let src = fixture("qwen3-next-80b-a3b.json");
    let kinds: Vec<String> = (0..48)
        .map(|i| {
            if (i + 1) % 4 == 0 {
                "\"full_attention\"".into()
            } else {
                "\"linear_attention\"".into()
            }
        })
        .collect();
    let listed = src.replace(
        "\"full_attention_interval\": 4",
        &format!("\"layer_types\": [{}]", kinds.join(", ")),
    );
    let m = hf::import(&listed, "q.json", "q").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.arch, model("qwen3-next-80b-a3b").arch);
    assert_eq!(m.arch.full_attention_layers(), 12);
    let mut irregular = kinds.clone();
    irregular.swap(3, 4);
    let bad = src.replace(
        "\"full_attention_interval\": 4",
        &format!("\"layer_types\": [{}]", irregular.join(", ")),
    );
    let e = hf::import(&bad, "q.json", "q").unwrap_err().to_string();
    assert!(e.contains("layer_types") && e.contains("every p-th"), "{e}");
    let zero = src.replace(
        "\"full_attention_interval\": 4",
        "\"full_attention_interval\": 0",
    );
    let e = hf::import(&zero, "q.json", "q").unwrap_err().to_string();
    assert!(e.contains("full_attention_interval"), "{e}");
    let no_topk = fixture("deepseek-v3.2-exp.json").replace("\"index_topk\": 2048,", "");
    let e = hf::import(&no_topk, "d.json", "d").unwrap_err().to_string();
    assert!(e.contains("index_topk"), "{e}");
}

// ------------------------------------------------------------ KV / state

/// Qwen3-Next, bf16, S = 32,768: the 12 full layers cache 2·K·H = 2·2·256
/// = 1024 elements per token → 12·32,768·1024·2 B = 805,306,368 B; each of
/// the 36 linear layers holds 32·128·128 = 524,288 state elements plus the
/// conv's last 3 inputs of 2·2048 + 4096 = 8192 channels (24,576) →
/// 36·548,864·2 B = 39,518,208 B; in all 844,824,576 B. Per token only the
/// full layers count: 12·1024·2 = 24,576 B.
#[test]
fn qwen3_next_kv_and_state() {
    let a = &model("qwen3-next-80b-a3b").arch;
    let s = kv::bytes_per_sequence(a, 32_768, DType::Bf16, &mut NoTrace).get();
    assert_eq!(s, 844_824_576.0);
    assert_eq!(
        kv::bytes_per_token(a, DType::Bf16, &mut NoTrace).get(),
        24_576.0
    );
    // the state is fixed: one more token adds only the full layers' KV
    let s1 = kv::bytes_per_sequence(a, 32_769, DType::Bf16, &mut NoTrace).get();
    assert_eq!(s1 - s, 24_576.0);
    // a decode step reads all of it (no sparse selection)
    let r = kv::bytes_read_per_decode_step(a, 32_768, DType::Bf16, &mut NoTrace).get();
    assert_eq!(r, s);
}

/// DeepSeek-V3.2-Exp, bf16 latent, S = 131,072: per token 61 layers of
/// (512 + 64)·2 B = 70,272 B latent plus the indexer's fp8 key and fp32
/// scale 61·(128 + 4) = 8,052 B → 78,324 B; per sequence 131,072·78,324 =
/// 10,266,083,328 B. A decode step reads the 2048 picked latent rows and
/// every indexer key: 2048·70,272 + 131,072·8,052 = 1,199,308,800 B.
#[test]
fn deepseek_v32_kv_and_indexer_cache() {
    let a = &model("deepseek-v3.2-exp").arch;
    assert_eq!(
        kv::bytes_per_token(a, DType::Bf16, &mut NoTrace).get(),
        78_324.0
    );
    let s = kv::bytes_per_sequence(a, 131_072, DType::Bf16, &mut NoTrace).get();
    assert_eq!(s, 10_266_083_328.0);
    let r = kv::bytes_read_per_decode_step(a, 131_072, DType::Bf16, &mut NoTrace).get();
    assert_eq!(r, 1_199_308_800.0);
    // below k_sel every row is read
    let short = kv::bytes_per_sequence(a, 1000, DType::Bf16, &mut NoTrace).get();
    let r = kv::bytes_read_per_decode_step(a, 1000, DType::Bf16, &mut NoTrace).get();
    assert_eq!(r, short);
}

// ------------------------------------------------------------ FLOPs

fn attention_flops(a: &Arch, t: u64, causal: bool) -> f64 {
    let p = params::count(a, &mut NoTrace);
    flops::per_token(a, &p, t, causal, &mut NoTrace)
        .forward_attention
        .get()
}

/// Qwen3-Next decode at T = 32,768: the full layers 2·N·(H_qk+H_v)·L_full·T
/// = 2·16·512·12·32,768 = 6,442,450,944; the linear layers, whatever T,
/// 36·(6·32·128·128 + 2·8192·4) = 36·3,211,264 = 115,605,504.
#[test]
fn qwen3_next_attention_flops() {
    let a = &model("qwen3-next-80b-a3b").arch;
    assert_eq!(
        attention_flops(a, 32_768, false),
        6_442_450_944.0 + 115_605_504.0
    );
    // doubling T doubles only the full layers' part
    let d = attention_flops(a, 65_536, false) - attention_flops(a, 32_768, false);
    assert_eq!(d, 6_442_450_944.0);
    assert_eq!(flops::linear_layer_flops(a), 3_211_264.0);
}

/// DeepSeek-V3.2 decode at T = 131,072: MLA over k_sel = 2048 keys,
/// 2·128·(192 + 128)·61·2048 = 10,234,101,760, plus the indexer over every
/// key, 2·64·128·61·131,072 = 130,996,502,528 (dense MLA would cost
/// 81,920·61·131,072 = 654,982,512,640). Causal prefill of T = 4096: each
/// query attends on average 2048 − 2048²/(2·4096) = 1536 keys →
/// 81,920·61·1536 = 7,675,576,320, the indexer T/2 = 2048 keys →
/// 16,384·61·2048 = 2,046,820,352.
#[test]
fn deepseek_v32_attention_flops() {
    let a = &model("deepseek-v3.2-exp").arch;
    assert_eq!(
        attention_flops(a, 131_072, false),
        10_234_101_760.0 + 130_996_502_528.0
    );
    let dense = attention_flops(&model("deepseek-v3").arch, 131_072, false);
    assert_eq!(dense, 654_982_512_640.0);
    assert_eq!(
        attention_flops(a, 4096, true),
        7_675_576_320.0 + 2_046_820_352.0
    );
}

// ------------------------------------------------------------ explain

/// `--explain` shows the formulas in the book's symbols plus the new ones.
#[test]
fn explain_names_the_new_symbols() {
    let q = &model("qwen3-next-80b-a3b").arch;
    let mut r = Recorder::default();
    let p = params::count(q, &mut r);
    flops::per_token(q, &p, 8192, false, &mut r);
    kv::bytes_per_sequence(q, 8192, DType::Bf16, &mut r);
    let att = r.find("params.attention").unwrap();
    assert!(att.formula.contains("L_lin·A_lin") && att.formula.contains("output gate"));
    assert_eq!(att.value, p.attention as f64);
    let f = r.find("flops.forward_attention").unwrap();
    assert!(f.formula.contains("6·N_lv·H_lk·H_lv"), "{}", f.formula);
    let s = r.find("kv.bytes_per_sequence").unwrap();
    assert!(
        s.formula.contains("linear-attention state"),
        "{}",
        s.formula
    );

    let d = &model("deepseek-v3.2-exp").arch;
    let mut r = Recorder::default();
    let p = params::count(d, &mut r);
    flops::per_token(d, &p, 8192, false, &mut r);
    kv::bytes_read_per_decode_step(d, 8192, DType::Bf16, &mut r);
    assert!(r
        .find("params.attention")
        .unwrap()
        .formula
        .contains("indexer"));
    assert!(r
        .find("flops.forward_attention")
        .unwrap()
        .formula
        .contains("k_sel"));
    assert!(r.find("kv.bytes_read_per_decode_step").is_some());
}

/// Bad hybrid/sparse descriptions are clear errors.
#[test]
fn invalid_descriptions_are_errors() {
    let mut a = model("qwen3-next-80b-a3b").arch.clone();
    a.linear_attention.as_mut().unwrap().n_value_heads = 0;
    let e = a.validate().unwrap_err().to_string();
    assert!(e.contains("n_value_heads"), "{e}");
    let mut d = model("deepseek-v3.2-exp").arch.clone();
    d.sparse_attention.as_mut().unwrap().index_topk = 0;
    let e = d.validate().unwrap_err().to_string();
    assert!(e.contains("index_topk"), "{e}");
}

// ------------------------------------------------------------ properties

use meshplan_core::model::{LinearAttention, SparseAttention};
use proptest::prelude::*;

/// A small hybrid and/or sparse model from arbitrary dimensions.
fn arb_variant() -> impl Strategy<Value = Arch> {
    (
        (1u64..=24, 1u64..=512, 1u64..=8, 1u64..=4, 1u64..=128),
        proptest::option::of((1u64..=6, 1u64..=8, 1u64..=8, 1u64..=64, 1u64..=64, 1u64..=5)),
        proptest::option::of((1u64..=4096, 1u64..=16, 1u64..=64)),
        any::<bool>(),
    )
        .prop_map(|((l, d, k, g, h), lin, sparse, gate)| {
            let mut a = Arch::dense(l, d, 4 * d, k * g, k, h, 1000);
            a.attn_output_gate = gate;
            a.linear_attention = lin.map(|(n, nk, nv, hk, hv, kc)| LinearAttention {
                full_attention_interval: n,
                n_key_heads: nk,
                n_value_heads: nv,
                key_head_dim: hk,
                value_head_dim: hv,
                conv_kernel: kc,
            });
            a.sparse_attention = sparse.map(|(t, n, hi)| SparseAttention {
                index_topk: t,
                index_n_heads: n,
                index_head_dim: hi,
            });
            a
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every variant validates, counts and prices finitely; the KV of a
    /// sequence grows by exactly the per-token KV per token (the linear
    /// state is fixed); a decode step never reads more than is held; layer
    /// kinds add up to L.
    #[test]
    fn variants_are_consistent(a in arb_variant(), s in 1u64..200_000) {
        a.validate().unwrap();
        prop_assert_eq!(a.full_attention_layers() + a.linear_attention_layers(), a.n_layers);
        let p = params::count(&a, &mut NoTrace);
        prop_assert!(p.active <= p.total && p.matmul_active <= p.total + a.vocab * a.d_model);
        let f = flops::per_token(&a, &p, s, true, &mut NoTrace);
        prop_assert!(f.forward.get().is_finite() && f.forward.get() > 0.0);
        let per_tok = kv::bytes_per_token(&a, DType::Bf16, &mut NoTrace).get();
        let s0 = kv::bytes_per_sequence(&a, s, DType::Bf16, &mut NoTrace).get();
        let s1 = kv::bytes_per_sequence(&a, s + 1, DType::Bf16, &mut NoTrace).get();
        prop_assert!(((s1 - s0) - per_tok).abs() <= 1e-9 * per_tok.max(1.0));
        let read = kv::bytes_read_per_decode_step(&a, s, DType::Bf16, &mut NoTrace).get();
        prop_assert!(read <= s0 && read > 0.0);
        // below k_sel sparse attention reads every key: it costs dense
        // attention plus the indexer's 2·N_I·H_I·L_full·S (non-causal)
        if let Some(i) = &a.sparse_attention {
            let dense = Arch { sparse_attention: None, ..a.clone() };
            let t = s.min(i.index_topk);
            let extra = flops::attention_flops_per_query(&a, t, false)
                - flops::attention_flops_per_query(&dense, t, false);
            let want = 2.0 * (i.index_n_heads * i.index_head_dim * a.full_attention_layers()) as f64 * t as f64;
            prop_assert!((extra - want).abs() <= 1e-9 * want.max(1.0), "{} vs {}", extra, want);
        }
    }
}
