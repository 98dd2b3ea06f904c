//! `meshplan model list|show`: real values, each derived by hand in the test
//! from the book's formulas (never copied from meshplan's output).

use serde_json::Value;

use crate::harness::{assert_contains, f, json, root, run, u, Scratch};

#[test]
fn list_shows_the_catalog() {
    let (code, out, err) = run(&["model", "list"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &[
            "llama-2-13b",
            "book-ch7-18b",
            "deepseek-v3",
            "mixtral-8x7b",
            "params",
        ],
    );
    let v = json(&["model", "list", "--json"]);
    let models = v["models"].as_array().expect("models array");
    assert!(models.len() >= 20, "{}", models.len());
    let ch7 = models
        .iter()
        .find(|m| m["name"] == "book-ch7-18b")
        .expect("ch7 model listed");
    // Book ch7 Q1: (3DF + 2D(N+K)H)·L + DV = 18,385,207,296.
    assert_eq!(u(ch7, "params_total"), 18_385_207_296);
}

#[test]
fn show_llama_2_13b_table() {
    let (code, out, err) = run(&["model", "show", "llama-2-13b"]);
    assert_eq!(code, 0, "{err}");
    // Published count (HF safetensors index): 13,015,864,320.
    assert_contains(&out, &["13,015,864,320 params", "GFLOPs", "GiB", "GB"]);
}

#[test]
fn show_book_ch7_json_matches_independent_derivation() {
    let v = json(&[
        "model",
        "show",
        "book-ch7-18b",
        "--kv-dtype",
        "int8",
        "--json",
    ]);
    let (l, d, ff, n, k, h, vocab) = (64u64, 4096u64, 16384u64, 32u64, 8u64, 256u64, 32128u64);
    // Book ch. 7: (3DF + 2D(N+K)H)·L + DV (tied embeddings, norms ignored).
    let total = (3 * d * ff + 2 * d * (n + k) * h) * l + d * vocab;
    assert_eq!(u(&v, "params_total"), total);
    assert_eq!(u(&v, "params_active"), total);
    assert_eq!(u(&v, "params_embedding"), d * vocab);
    // KV per token: 2·K·H·L·1 byte (int8) = 262,144 B (book: "262 kB").
    assert_eq!(f(&v, "kv_cache_bytes_per_token"), (2 * k * h * l) as f64);
    // Forward: 2·P (matmuls; the tied output projection is a matmul too)
    // plus causal attention 2·N·2H·L·T/2 at the default T = 4096.
    let t = 4096u64;
    let fwd = 2 * total + 2 * n * 2 * h * l * t / 2;
    assert_eq!(f(&v, "flops_per_token_forward"), fwd as f64);
    assert_eq!(f(&v, "flops_per_token_training"), 3.0 * fwd as f64);
    assert_eq!(v["kv_dtype"], "int8");
}

#[test]
fn show_seq_len_suffixes_and_non_causal() {
    let show = |extra: &[&str]| {
        let mut a = vec!["model", "show", "book-ch7-18b", "--json"];
        a.extend_from_slice(extra);
        json(&a)
    };
    let a = show(&["--seq-len", "32Ki"]);
    assert_eq!(u(&a, "seq_len"), 32_768);
    let b = show(&["--seq-len", "32k"]);
    assert_eq!(u(&b, "seq_len"), 32_000);
    let c = show(&["--seq-len", "32k", "--non-causal"]);
    // Non-causal attention is twice the causal attention FLOPs.
    let att = |v: &Value| f(v, "flops_per_token_forward_attention");
    assert_eq!(att(&c), 2.0 * att(&b));
    // KV per sequence of 32,768 tokens in bf16 = T·2·K·H·L·2 B.
    assert_eq!(
        f(&a, "kv_cache_bytes_per_sequence"),
        32_768.0 * 2.0 * 8.0 * 256.0 * 64.0 * 2.0
    );
}

#[test]
fn show_explain_contains_formula() {
    let (code, out, err) = run(&["model", "show", "llama-2-13b", "--explain"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["2·K·H·L·bytes", "D = 5,120", "Derivation:"]);
    let (code, md, _) = run(&[
        "model",
        "show",
        "llama-2-13b",
        "--explain",
        "--explain-format",
        "markdown",
    ]);
    assert_eq!(code, 0);
    assert!(md.contains('$'), "markdown has LaTeX math: {md}");
    let v = json(&["model", "show", "llama-2-13b", "--explain", "--json"]);
    let steps = v["derivation"].as_array().expect("derivation array");
    assert!(steps.iter().any(|s| s["id"] == "kv.bytes_per_token"), "{v}");
}

#[test]
fn show_hf_config() {
    let p = root().join("crates/meshplan-core/tests/fixtures/hf/llama-2-7b.json");
    let v = json(&["model", "show", p.to_str().unwrap(), "--json"]);
    // meta-llama/Llama-2-7b-hf model.safetensors.index.json total_size / 2 bytes.
    assert_eq!(u(&v, "params_total"), 6_738_415_616);
}

#[test]
fn show_example_scenarios() {
    let v = json(&["model", "show", "examples/llama-2-13b-v5p.toml", "--json"]);
    // Book ch. 5: (3DF + 4DNH)·L + 2DV = 13,015,449,600.
    let (l, d, ff, n, h, vocab) = (40u64, 5120u64, 13824u64, 40u64, 128u64, 32000u64);
    assert_eq!(
        u(&v, "params_total"),
        (3 * d * ff + 4 * d * n * h) * l + 2 * d * vocab
    );
    // The scenario's [training] seq_len = "32Ki" is the default T.
    assert_eq!(u(&v, "seq_len"), 32_768);
    let v = json(&[
        "model",
        "show",
        "examples/llama-2-13b-v5p.toml",
        "--seq-len",
        "2048",
        "--json",
    ]);
    assert_eq!(u(&v, "seq_len"), 2048, "flags override the scenario");

    let v = json(&["model", "show", "examples/custom-model.toml", "--json"]);
    // The book's ch7 18B model written out: (3DF + 2D(N+K)H)·L + DV.
    assert_eq!(u(&v, "params_total"), 18_385_207_296);
    // [inference] kv_dtype = "int8" in the file: 2·K·H·L·1 B = 2·8·256·64.
    assert_eq!(f(&v, "kv_cache_bytes_per_token"), 262_144.0);
}

#[test]
fn show_catalog_format_file_and_user_catalog() {
    let s = Scratch::new("usercat");
    let file = s.write(
        "models/tiny-test.toml",
        r#"name = "tiny-test"
source = "test"
[arch]
n_layers = 2
d_model = 64
d_ff = 256
n_heads = 4
n_kv_heads = 2
d_head = 16
vocab = 1000
mlp = "plain"
norms_per_layer = 0
final_norm = false
"#,
    );
    // L·(2DF + 2DNH + 2DKH) + 2DV, untied, plain MLP, no norms.
    let expect = 2 * (2 * 64 * 256 + 2 * 64 * 4 * 16 + 2 * 64 * 2 * 16) + 2 * 64 * 1000;
    let v = json(&["model", "show", &file, "--json"]);
    assert_eq!(u(&v, "params_total"), expect);
    let cat = s.dir().to_str().unwrap();
    let v = json(&["--catalog", cat, "model", "show", "tiny-test", "--json"]);
    assert_eq!(u(&v, "params_total"), expect);
    let (code, out, _) = run(&["model", "list", "--catalog", cat]);
    assert_eq!(code, 0);
    assert!(out.contains("tiny-test"), "{out}");
}

#[test]
fn show_llama_2_13b_breakdown_hand_derived() {
    // LLaMA-2 13B: L=40 D=5120 F=13824 N=K=40 H=128 V=32000, untied, gated
    // MLP, RMSNorm ×2 per layer + final norm.
    //   embedding   = 2·V·D          = 2·32000·5120            = 327,680,000
    //   attention   = L·4·D·N·H      = 40·4·5120·5120          = 4,194,304,000
    //   MLP         = L·3·D·F        = 40·3·5120·13824         = 8,493,465,600
    //   norms       = L·2·D + D      = 409,600 + 5,120         = 414,720
    //   total       = sum                                       = 13,015,864,320
    //   per layer   = 104,857,600 + 212,336,640 + 10,240       = 317,204,480
    //   forward matmul FLOPs = 2·(attn + MLP + V·D)
    //               = 2·(4,194,304,000 + 8,493,465,600 + 163,840,000) = 25,703,219,200
    //   attention FLOPs at T=4096, causal = 2·N·2H·L·T/2 = 2·40·256·40·2048 = 1,677,721,600
    //   KV/token bf16 = 2·K·H·L·2 B = 819,200 B; per sequence ×4096 = 3,355,443,200 B
    //   weights bf16 = 2·13,015,864,320 B = 26,031,728,640 B
    let v = json(&["model", "show", "llama-2-13b", "--json"]);
    assert_eq!(u(&v, "params_embedding"), 327_680_000);
    assert_eq!(u(&v, "params_attention"), 4_194_304_000);
    assert_eq!(u(&v, "params_mlp"), 8_493_465_600);
    assert_eq!(u(&v, "params_norms"), 414_720);
    assert_eq!(u(&v, "params_total"), 13_015_864_320);
    assert_eq!(u(&v, "params_non_embedding"), 13_015_864_320 - 327_680_000);
    assert_eq!(u(&v, "params_per_dense_layer"), 317_204_480);
    assert_eq!(u(&v, "params_per_moe_layer"), 0);
    assert_eq!(f(&v, "flops_per_token_forward_matmul"), 25_703_219_200.0);
    assert_eq!(f(&v, "flops_per_token_forward_attention"), 1_677_721_600.0);
    assert_eq!(
        f(&v, "flops_per_token_forward"),
        25_703_219_200.0 + 1_677_721_600.0
    );
    assert_eq!(f(&v, "kv_cache_bytes_per_sequence"), 3_355_443_200.0);
    let (code, out, err) = run(&["model", "show", "llama-2-13b"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &[
            "327,680,000 params",
            "4,194,304,000 params",
            "8,493,465,600 params",
            "414,720 params",
            "12,688,184,320 params",
            "317,204,480 params",
            "(difference 0 params)",
            "4,096 tokens (causal)",
            // (25,703,219,200 + 1,677,721,600) = 27.38e9; ×3 for training = 82.14e9
            "27.38 GFLOPs/token",
            "82.14 GFLOPs/token",
            "819,200 B/token",
            // 3,355,443,200 B = 3.355 GB = 3.125 GiB
            "3.355 GB (3.125 GiB)",
            // 26,031,728,640 B / 2^30 = 24.24 GiB
            "26.03 GB (24.24 GiB)",
        ],
    );
}

#[test]
fn show_seq_len_accepts_the_whole_u64_range() {
    let v = json(&[
        "model",
        "show",
        "llama-2-13b",
        "--seq-len",
        "1.8e19",
        "--json",
    ]);
    assert_eq!(u(&v, "seq_len"), 18_000_000_000_000_000_000);
    // 1.9e19 > u64::MAX ≈ 1.845e19
    let (code, _, err) = run(&["model", "show", "llama-2-13b", "--seq-len", "1.9e19"]);
    assert_eq!(code, 2, "{err}");
}
