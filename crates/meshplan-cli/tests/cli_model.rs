//! End-to-end tests of `meshplan model …` and `meshplan hw …`: run the binary,
//! check real values (derived independently in the test from the book's
//! formulas), and feed it hostile input (exit code 2, a useful message, never
//! a panic).

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn meshplan() -> Command {
    Command::cargo_bin("meshplan").expect("binary builds")
}

/// Workspace root (examples/, crates/…/fixtures).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Run and return (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = meshplan().args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run, require success, parse stdout as one JSON object.
fn json(args: &[&str]) -> Value {
    let (code, out, err) = run(args);
    assert_eq!(code, 0, "{args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("missing numeric key {k} in {v}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("missing integer key {k} in {v}"))
}

/// A scratch directory unique to this test process and `tag`.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("meshplan-cli-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

// ------------------------------------------------------------------ model

#[test]
fn model_list_shows_catalog() {
    let (code, out, err) = run(&["model", "list"]);
    assert_eq!(code, 0, "{err}");
    for name in ["llama-2-13b", "book-ch7-18b", "deepseek-v3", "mixtral-8x7b"] {
        assert!(out.contains(name), "{name} missing from list:\n{out}");
    }
    assert!(out.contains("params"), "units missing:\n{out}");
    let v = json(&["model", "list", "--json"]);
    let models = v["models"].as_array().expect("models array");
    assert!(models.len() >= 20, "{}", models.len());
    let ch7 = models
        .iter()
        .find(|m| m["name"] == "book-ch7-18b")
        .expect("ch7 model listed");
    assert_eq!(u(ch7, "params_total"), 18_385_207_296);
}

#[test]
fn model_show_llama_2_13b_table() {
    let (code, out, err) = run(&["model", "show", "llama-2-13b"]);
    assert_eq!(code, 0, "{err}");
    // Published count (HF safetensors index): 13,015,864,320.
    assert!(out.contains("13,015,864,320 params"), "{out}");
    assert!(out.contains("GFLOPs"), "{out}");
    assert!(out.contains("GiB") && out.contains("GB"), "{out}");
}

#[test]
fn model_show_book_ch7_json_matches_independent_derivation() {
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
    assert_eq!(total, 18_385_207_296);
    assert_eq!(u(&v, "params_total"), total);
    assert_eq!(u(&v, "params_active"), total);
    assert_eq!(u(&v, "params_embedding"), d * vocab);
    // KV per token: 2·K·H·L·1 byte (int8).
    assert_eq!(f(&v, "kv_cache_bytes_per_token"), (2 * k * h * l) as f64);
    assert_eq!(f(&v, "kv_cache_bytes_per_token"), 262_144.0);
    // Forward: 2·P (matmuls; tied output projection is a matmul too) plus
    // causal attention 2·N·2H·L·T/2 at the default T = 4096.
    let t = 4096u64;
    let fwd = 2 * total + 2 * n * 2 * h * l * t / 2;
    assert_eq!(f(&v, "flops_per_token_forward"), fwd as f64);
    assert_eq!(f(&v, "flops_per_token_training"), 3.0 * fwd as f64);
    assert_eq!(v["kv_dtype"], "int8");
}

#[test]
fn model_show_seq_len_suffixes_and_non_causal() {
    let a = json(&[
        "model",
        "show",
        "book-ch7-18b",
        "--seq-len",
        "32Ki",
        "--json",
    ]);
    assert_eq!(u(&a, "seq_len"), 32_768);
    let b = json(&[
        "model",
        "show",
        "book-ch7-18b",
        "--seq-len",
        "32k",
        "--json",
    ]);
    assert_eq!(u(&b, "seq_len"), 32_000);
    let c = json(&[
        "model",
        "show",
        "book-ch7-18b",
        "--seq-len",
        "32k",
        "--non-causal",
        "--json",
    ]);
    // Non-causal attention is twice the causal attention FLOPs.
    let att = |v: &Value| f(v, "flops_per_token_forward_attention");
    assert_eq!(att(&c), 2.0 * att(&b));
    // KV per sequence of 32,768 tokens in bf16 = 32768 · 2·8·256·64·2 B.
    assert_eq!(
        f(&a, "kv_cache_bytes_per_sequence"),
        32_768.0 * 2.0 * 8.0 * 256.0 * 64.0 * 2.0
    );
}

#[test]
fn model_show_explain_contains_formula() {
    let (code, out, err) = run(&["model", "show", "llama-2-13b", "--explain"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2·K·H·L·bytes"), "{out}");
    assert!(out.contains("D = 5,120"), "{out}");
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
    assert!(!steps.is_empty());
    assert!(v.to_string().contains("kv.bytes_per_token"));
}

#[test]
fn model_show_hf_config() {
    let p = root().join("crates/meshplan-core/tests/fixtures/hf/llama-2-7b.json");
    let v = json(&["model", "show", p.to_str().unwrap(), "--json"]);
    // meta-llama/Llama-2-7b-hf model.safetensors.index.json total_size / 2 bytes.
    assert_eq!(u(&v, "params_total"), 6_738_415_616);
}

#[test]
fn model_show_examples() {
    let p = root().join("examples/llama-2-13b-v5p.toml");
    let v = json(&["model", "show", p.to_str().unwrap(), "--json"]);
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
        p.to_str().unwrap(),
        "--seq-len",
        "2048",
        "--json",
    ]);
    assert_eq!(u(&v, "seq_len"), 2048, "flags override the scenario");

    let p = root().join("examples/custom-model.toml");
    let v = json(&["model", "show", p.to_str().unwrap(), "--json"]);
    assert_eq!(u(&v, "params_total"), 18_385_207_296);
    // [inference] kv_dtype = "int8" in the file.
    assert_eq!(f(&v, "kv_cache_bytes_per_token"), 262_144.0);
}

#[test]
fn model_show_catalog_format_file_and_user_catalog() {
    let dir = scratch("usercat");
    std::fs::create_dir_all(dir.join("models")).unwrap();
    let model = r#"name = "tiny-test"
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
"#;
    let file = dir.join("models/tiny-test.toml");
    std::fs::write(&file, model).unwrap();
    // L·(2DF + 2DNH + 2DKH) + 2DV, untied, plain MLP, no norms.
    let expect = 2 * (2 * 64 * 256 + 2 * 64 * 4 * 16 + 2 * 64 * 2 * 16) + 2 * 64 * 1000;
    let v = json(&["model", "show", file.to_str().unwrap(), "--json"]);
    assert_eq!(u(&v, "params_total"), expect);
    let v = json(&[
        "--catalog",
        dir.to_str().unwrap(),
        "model",
        "show",
        "tiny-test",
        "--json",
    ]);
    assert_eq!(u(&v, "params_total"), expect);
    let (code, out, _) = run(&["model", "list", "--catalog", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("tiny-test"));
}

// --------------------------------------------------------------------- hw

#[test]
fn hw_list_and_show() {
    let (code, out, err) = run(&["hw", "list"]);
    assert_eq!(code, 0, "{err}");
    for name in ["tpu-v5e", "tpu-v5p@book", "h100", "mi300x"] {
        assert!(out.contains(name), "{name} missing:\n{out}");
    }
    let v = json(&["hw", "list", "--json"]);
    assert!(v["chips"].as_array().unwrap().len() >= 10);
}

#[test]
fn hw_show_tpu_v5e_book() {
    let (code, out, err) = run(&["hw", "show", "tpu-v5e@book"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("C/W_hbm"), "{out}");
    assert!(out.contains("240 FLOPs/B"), "{out}");
    assert!(out.contains("16 GB") && out.contains("GiB"), "{out}");
    let v = json(&["hw", "show", "tpu-v5e@book", "--json"]);
    // Book ch1: 1.97e14 / 8.2e11 ≈ 240.
    assert!((f(&v, "critical_intensity_hbm") - 1.97e14 / 8.2e11).abs() < 1e-6);
    assert_eq!(f(&v, "hbm_capacity_bytes"), 16e9);
    assert_eq!(f(&v, "hbm_bandwidth_bytes_per_s"), 8.2e11);
    assert_eq!(f(&v["peak_flops_per_s"], "bf16"), 1.97e14);
    assert_eq!(f(&v, "ici_link_one_way_bytes_per_s"), 4.5e10);
    assert_eq!(f(&v, "ici_axis_bidirectional_bytes_per_s"), 9e10);
    assert_eq!(v["profile"], "book");
    // The vendor profile differs (16 GiB).
    let vendor = json(&["hw", "show", "tpu-v5e", "--json"]);
    assert_eq!(f(&vendor, "hbm_capacity_bytes"), 17_179_869_184.0);
}

#[test]
fn hw_show_book_critical_intensities() {
    let v = json(&["hw", "show", "tpu-v5p@book", "--json"]);
    // Book ch5: 4.59e14 / 1.8e11 = 2550.
    assert!(
        (f(&v, "critical_intensity_ici") - 2550.0).abs() < 1.0,
        "{v}"
    );
    let v = json(&["hw", "show", "h100@book", "--json"]);
    // Book ch12: 990e12/450e9 = 2200 (NVLink); 990e12/400e9 = 2475 (node IB).
    assert!(
        (f(&v, "critical_intensity_nvlink") - 2200.0).abs() < 1.0,
        "{v}"
    );
    assert!(
        (f(&v, "critical_intensity_scale_out") - 2475.0).abs() < 1.0,
        "{v}"
    );
    let (code, out, _) = run(&["hw", "show", "h100@book", "--explain"]);
    assert_eq!(code, 0);
    assert!(out.contains("C / W_nvlink"), "{out}");
    let v = json(&["hw", "show", "H100-SXM", "--json"]);
    assert_eq!(v["name"], "h100");
}

// ------------------------------------------------------------ adversarial

/// Bad input: exit code 2, a message on stderr containing every `needles`
/// (case-insensitive), and no panic.
fn rejects(args: &[&str], needles: &[&str]) {
    let (code, out, err) = run(args);
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert_eq!(
        code, 2,
        "{args:?}: expected exit 2, got {code}\nstdout: {out}\nstderr: {err}"
    );
    assert!(
        out.is_empty(),
        "{args:?}: printed to stdout on error: {out}"
    );
    let low = err.to_lowercase();
    for n in needles {
        assert!(
            low.contains(&n.to_lowercase()),
            "{args:?}: stderr lacks {n:?}:\n{err}"
        );
    }
}

#[test]
fn adversarial_files_and_flags() {
    let dir = scratch("adversarial");
    let w = |name: &str, body: &[u8]| -> String {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p.to_string_lossy().into_owned()
    };
    let arch = |body: &str| format!("[model]\n{body}\n");

    // Malformed TOML: file:line:column.
    let p = w("bad.toml", b"[model\nname = \"x\"\n");
    rejects(&["model", "show", &p], &["bad.toml:1:"]);
    // Unknown field (typo) in a scenario: file, line and field.
    let p = w(
        "typo.toml",
        b"[model]\nname = \"llama-2-7b\"\nn_layerz = 3\n",
    );
    rejects(&["model", "show", &p], &["typo.toml:3:", "n_layerz"]);
    // Unknown field in a catalog-format model file.
    let p = w(
        "typo-model.toml",
        b"name = \"m\"\nsource = \"s\"\n[arch]\nn_layers = 2\nd_model = 8\nd_ff = 8\nn_heads = 2\nn_kv_heads = 2\nd_head = 4\nvocab = 10\nbogus = 1\n",
    );
    rejects(&["model", "show", &p], &["typo-model.toml:", "bogus"]);
    // Numbers that overflow.
    let p = w(
        "huge.toml",
        arch("n_layers = 4000000000\nd_model = 4000000000\nn_heads = 1\nvocab = 4000000000")
            .as_bytes(),
    );
    rejects(&["model", "show", &p], &["overflow"]);
    let p = w(
        "huge-int.toml",
        arch("n_layers = 99999999999999999999999999").as_bytes(),
    );
    rejects(&["model", "show", &p], &["huge-int.toml:"]);
    let p = w("huge-str.toml", arch("n_layers = \"1e40\"").as_bytes());
    rejects(&["model", "show", &p], &["huge-str.toml:", "n_layers"]);
    // Zero layers.
    let p = w(
        "zero.toml",
        arch("n_layers = 0\nd_model = 64\nn_heads = 4\nvocab = 100").as_bytes(),
    );
    rejects(&["model", "show", &p], &["n_layers"]);
    // N not divisible by K.
    let p = w(
        "nk.toml",
        arch("n_layers = 2\nd_model = 64\nn_heads = 6\nn_kv_heads = 4\nvocab = 100").as_bytes(),
    );
    rejects(&["model", "show", &p], &["not divisible"]);
    // Negative sizes.
    let p = w(
        "neg.toml",
        arch("n_layers = 2\nd_model = -64\nn_heads = 4\nvocab = 100").as_bytes(),
    );
    rejects(&["model", "show", &p], &["neg.toml:", "negative"]);
    // MoE with k > E.
    let p = w(
        "moe.toml",
        arch("name = \"llama-2-7b\"\nn_experts = 2\ntop_k = 3").as_bytes(),
    );
    rejects(&["model", "show", &p], &["top_k"]);
    // Empty files.
    let p = w("empty.toml", b"");
    rejects(&["model", "show", &p], &["no model"]);
    let p = w("empty.json", b"");
    rejects(&["model", "show", &p], &["empty.json:"]);
    // Binary garbage.
    let p = w("garbage.toml", &[0xff, 0xfe, 0x00, 0x01, 0x80, 0x9f, 0xc3]);
    rejects(&["model", "show", &p], &["garbage.toml"]);
    let p = w("garbage.json", &[0x7b, 0xff, 0x00, 0x13, 0x37]);
    rejects(&["model", "show", &p], &["garbage.json"]);
    let p = w("garbage2.toml", b"\x01\x02 = = ]]] [[[ \"\n");
    rejects(&["model", "show", &p], &["garbage2.toml:"]);
    // HF configs: unknown model_type, wrong field type, truncated JSON.
    let p = w(
        "alien.json",
        br#"{"model_type": "alien9000", "hidden_size": 8}"#,
    );
    rejects(&["model", "show", &p], &["alien9000", "llama"]);
    let p = w(
        "wrongtype.json",
        br#"{"model_type": "llama", "hidden_size": "big", "num_hidden_layers": 2}"#,
    );
    rejects(&["model", "show", &p], &["wrongtype.json"]);
    let p = w(
        "trunc.json",
        b"{\"model_type\": \"llama\",\n \"hidden_size\": ",
    );
    rejects(&["model", "show", &p], &["trunc.json:2:"]);
    // Nonexistent paths.
    rejects(
        &["model", "show", "/nonexistent/dir/model.toml"],
        &["cannot read"],
    );
    rejects(
        &["model", "show", "/nonexistent/config.json"],
        &["cannot read"],
    );
    rejects(&["hw", "show", "/nonexistent/chip.toml"], &["cannot read"]);
    // Unknown names, with suggestions.
    rejects(
        &["model", "show", "lama-2-13b"],
        &["unknown model", "llama-2-13b"],
    );
    rejects(&["model", "show", "zzzzzzzz"], &["unknown model"]);
    rejects(
        &["hw", "show", "tpu-v5x"],
        &["unknown chip", "did you mean"],
    );
    rejects(&["hw", "show", "h1000"], &["unknown chip"]);
    // Bad flags.
    for bad in ["abc", "-1", "1e40", "0", "1.5", ""] {
        rejects(
            &["model", "show", "llama-2-7b", "--seq-len", bad],
            &["seq-len"],
        );
    }
    rejects(
        &["model", "show", "llama-2-7b", "--kv-dtype", "int3"],
        &["int3", "bf16"],
    );
    rejects(
        &["model", "show", "llama-2-7b", "--explain-format", "pdf"],
        &["pdf"],
    );
    rejects(&["model", "frobnicate"], &["frobnicate"]);
    // Bad hardware files and catalogs.
    let p = w("chip.toml", b"name = \"x\"\nkind = \"tpu\"\nsource = \"s\"\n[compute]\nbf16 = \"fast\"\n[memory]\nhbm_capacity = \"1 GB\"\nhbm_bandwidth = \"1 GB/s\"\n");
    rejects(&["hw", "show", &p], &["compute.bf16"]);
    let p = w("chip2.toml", b"name = \"x\"\nkind = \"quantum\"\n");
    rejects(&["hw", "show", &p], &["chip2.toml:2:"]);
    rejects(
        &["--catalog", "/nonexistent/catalog", "model", "list"],
        &["not a directory"],
    );
    let cat = dir.join("cat");
    std::fs::create_dir_all(cat.join("models")).unwrap();
    std::fs::write(
        cat.join("models/broken.toml"),
        "name = \"b\"\n[arch]\nn_layers = \"x\"\n",
    )
    .unwrap();
    rejects(
        &[
            "--catalog",
            cat.to_str().unwrap(),
            "model",
            "show",
            "llama-2-7b",
        ],
        &["broken.toml"],
    );
    // Scenario with a bad kv_dtype.
    let p = w(
        "kv.toml",
        b"[model]\nname = \"llama-2-7b\"\n[inference]\nkv_dtype = \"int3\"\n",
    );
    rejects(&["model", "show", &p], &["kv_dtype", "int3"]);
}

#[test]
fn model_show_llama_2_13b_breakdown_hand_derived() {
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
    for s in [
        "327,680,000 params",
        "4,194,304,000 params",
        "8,493,465,600 params",
        "414,720 params",
        "12,688,184,320 params",
        "317,204,480 params",
        "(difference 0 params)",
        "4,096 tokens (causal)",
        "27.38 GFLOPs/token",
        "82.14 GFLOPs/token",
        "819,200 B/token",
        // 3,355,443,200 B = 3.355 GB = 3.125 GiB
        "3.355 GB (3.125 GiB)",
        // 26,031,728,640 B / 2^30 = 24.24 GiB
        "26.03 GB (24.24 GiB)",
    ] {
        assert!(out.contains(s), "{s} missing:\n{out}");
    }
}

#[test]
fn hw_show_tpu_v5e_book_every_number_hand_derived() {
    // Book figures: C = 1.97e14, C_int8 = 3.94e14, W_hbm = 8.2e11,
    // ICI 4.5e10 one way (W_ici = 9e10), DCN 3.125e9, PCIe 1.6e10.
    //   C/W_hbm  = 240.24 → 240;   C_int8/W_hbm = 480.49 → 480
    //   C/W_ici  = 2188.9 → 2,189; C/W_dcn = 63,040;  C/W_pcie = 12,312.5 → 12,313
    //   max slice 16x16 = 256 chips; HBM 16e9 B = 14.9 GiB
    let (code, out, err) = run(&["hw", "show", "tpu-v5e@book"]);
    assert_eq!(code, 0, "{err}");
    for s in [
        "480 FLOPs/B",
        "2,189 FLOPs/B",
        "63,040 FLOPs/B",
        "12,313 FLOPs/B",
        "16x16 (256 chips)",
        "256 chips",
        "16 GB (14.9 GiB)",
        "3.125 GB/s",
        "90 GB/s",
        "$1.20 per chip-hour",
    ] {
        assert!(out.contains(s), "{s} missing:\n{out}");
    }
    let v = json(&["hw", "show", "tpu-v5e@book", "--json"]);
    assert!((f(&v, "critical_intensity_hbm_int8") - 3.94e14 / 8.2e11).abs() < 1e-9);
    assert!((f(&v, "critical_intensity_ici") - 1.97e14 / 9e10).abs() < 1e-9);
    assert_eq!(f(&v, "critical_intensity_scale_out"), 63_040.0);
    assert_eq!(f(&v, "critical_intensity_pcie"), 12_312.5);
    assert_eq!(u(&v, "ici_max_slice_chips"), 256);
    assert_eq!(u(&v, "max_chips"), 256);
}

#[test]
fn hw_show_rejects_hostile_chip_files() {
    let base = std::fs::read_to_string(root().join("data/hardware/tpu-v5e.toml")).unwrap();
    let d = scratch("hostile-chip");
    for (tag, from, to, field) in [
        // 2^32 · 2^32 · 4 chips overflow u64 (a debug build used to panic).
        (
            "slice",
            "max_slice = \"16x16\"",
            "max_slice = \"4294967296x4294967296x4\"",
            "ici",
        ),
        (
            "ici0",
            "link_bandwidth_one_way = \"50 GB/s\"",
            "link_bandwidth_one_way = \"0 B/s\"",
            "ici.link_bandwidth_one_way",
        ),
        (
            "hbmtiny",
            "hbm_bandwidth = \"819 GB/s\"",
            "hbm_bandwidth = \"1e-320 B/s\"",
            "memory.hbm_bandwidth",
        ),
        (
            "c0",
            "bf16 = \"197 TFLOP/s\"",
            "bf16 = \"0 FLOP/s\"",
            "compute.bf16",
        ),
        (
            "price",
            "usd_per_chip_hour = 1.2",
            "usd_per_chip_hour = nan",
            "price.usd_per_chip_hour",
        ),
        (
            "negprice",
            "usd_per_chip_hour = 1.2",
            "usd_per_chip_hour = -1.0",
            "price.usd_per_chip_hour",
        ),
    ] {
        assert!(base.contains(from), "{from}");
        let p = d.join(format!("{tag}.toml"));
        std::fs::write(&p, base.replace(from, to)).unwrap();
        let (code, _, err) = run(&["hw", "show", p.to_str().unwrap()]);
        assert_ne!(code, 0, "{tag}: accepted");
        assert!(!err.contains("panicked"), "{tag}: {err}");
        assert!(err.contains(field), "{tag}: {err}");
        // The same file in a user catalog is refused the same way.
        let cat = d.join(format!("cat-{tag}/hardware"));
        std::fs::create_dir_all(&cat).unwrap();
        std::fs::copy(&p, cat.join("x.toml")).unwrap();
        let (code, _, err) = run(&[
            "--catalog",
            cat.parent().unwrap().to_str().unwrap(),
            "hw",
            "list",
        ]);
        assert_ne!(code, 0, "{tag}: catalog accepted");
        assert!(!err.contains("panicked"), "{tag}: {err}");
    }
}

#[test]
fn model_show_seq_len_accepts_the_whole_u64_range() {
    let v = json(&[
        "model",
        "show",
        "llama-2-13b",
        "--seq-len",
        "1.8e19",
        "--json",
    ]);
    assert_eq!(u(&v, "seq_len"), 18_000_000_000_000_000_000);
    let (code, _, err) = run(&["model", "show", "llama-2-13b", "--seq-len", "1.9e19"]);
    assert_eq!(code, 2, "{err}");
}
