//! Hostile input to `model show`, `hw show` and `--catalog`: every case
//! exits 2 with a message that names the file, line or field, prints nothing
//! on stdout, and never panics (`harness::rejects`).

use crate::harness::{rejects, Scratch};

/// A scenario whose `[model]` table is `body`.
fn scenario(body: &str) -> String {
    format!("[model]\n{body}\n")
}

#[test]
fn malformed_toml_and_unknown_fields() {
    let s = Scratch::new("malformed");
    // Malformed TOML: file:line:column.
    let p = s.write("bad.toml", "[model\nname = \"x\"\n");
    rejects(&["model", "show", &p], &["bad.toml:1:"]);
    // Unknown field (typo) in a scenario: file, line and field.
    let p = s.write(
        "typo.toml",
        "[model]\nname = \"llama-2-7b\"\nn_layerz = 3\n",
    );
    rejects(&["model", "show", &p], &["typo.toml:3:", "n_layerz"]);
    // Unknown field in a catalog-format model file.
    let p = s.write(
        "typo-model.toml",
        "name = \"m\"\nsource = \"s\"\n[arch]\nn_layers = 2\nd_model = 8\nd_ff = 8\nn_heads = 2\nn_kv_heads = 2\nd_head = 4\nvocab = 10\nbogus = 1\n",
    );
    rejects(&["model", "show", &p], &["typo-model.toml:", "bogus"]);
    // Scenario with a bad kv_dtype.
    let p = s.write(
        "kv.toml",
        "[model]\nname = \"llama-2-7b\"\n[inference]\nkv_dtype = \"int3\"\n",
    );
    rejects(&["model", "show", &p], &["kv_dtype", "int3"]);
}

#[test]
fn impossible_shapes() {
    let s = Scratch::new("shapes");
    let bad = |name: &str, body: &str, needles: &[&str]| {
        let p = s.write(name, scenario(body));
        rejects(&["model", "show", &p], needles);
    };
    // Numbers that overflow the parameter count, the integer or the string.
    bad(
        "huge.toml",
        "n_layers = 4000000000\nd_model = 4000000000\nn_heads = 1\nvocab = 4000000000",
        &["overflow"],
    );
    bad(
        "huge-int.toml",
        "n_layers = 99999999999999999999999999",
        &["huge-int.toml:"],
    );
    bad(
        "huge-str.toml",
        "n_layers = \"1e40\"",
        &["huge-str.toml:", "n_layers"],
    );
    bad(
        "zero.toml",
        "n_layers = 0\nd_model = 64\nn_heads = 4\nvocab = 100",
        &["n_layers"],
    );
    bad(
        "nk.toml",
        "n_layers = 2\nd_model = 64\nn_heads = 6\nn_kv_heads = 4\nvocab = 100",
        &["not divisible"],
    );
    bad(
        "neg.toml",
        "n_layers = 2\nd_model = -64\nn_heads = 4\nvocab = 100",
        &["neg.toml:", "negative"],
    );
    // MoE with top_k > n_experts.
    bad(
        "moe.toml",
        "name = \"llama-2-7b\"\nn_experts = 2\ntop_k = 3",
        &["top_k"],
    );
}

#[test]
fn empty_and_binary_files() {
    let s = Scratch::new("garbage");
    let bad = |name: &str, body: &[u8], needles: &[&str]| {
        let p = s.write(name, body);
        rejects(&["model", "show", &p], needles);
    };
    bad("empty.toml", b"", &["no model"]);
    bad("empty.json", b"", &["empty.json:"]);
    bad(
        "garbage.toml",
        &[0xff, 0xfe, 0x00, 0x01, 0x80, 0x9f, 0xc3],
        &["garbage.toml"],
    );
    bad(
        "garbage.json",
        &[0x7b, 0xff, 0x00, 0x13, 0x37],
        &["garbage.json"],
    );
    bad(
        "garbage2.toml",
        b"\x01\x02 = = ]]] [[[ \"\n",
        &["garbage2.toml:"],
    );
}

#[test]
fn bad_hf_configs() {
    let s = Scratch::new("hf");
    // Unknown model_type: named, and the supported ones listed.
    let p = s.write(
        "alien.json",
        r#"{"model_type": "alien9000", "hidden_size": 8}"#,
    );
    rejects(&["model", "show", &p], &["alien9000", "llama"]);
    let p = s.write(
        "wrongtype.json",
        r#"{"model_type": "llama", "hidden_size": "big", "num_hidden_layers": 2}"#,
    );
    rejects(&["model", "show", &p], &["wrongtype.json"]);
    let p = s.write(
        "trunc.json",
        "{\"model_type\": \"llama\",\n \"hidden_size\": ",
    );
    rejects(&["model", "show", &p], &["trunc.json:2:"]);
}

#[test]
fn missing_paths_and_unknown_names() {
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
}

#[test]
fn bad_flags() {
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
}

#[test]
fn bad_chip_files_and_catalogs() {
    let s = Scratch::new("chips");
    let p = s.write(
        "chip.toml",
        "name = \"x\"\nkind = \"tpu\"\nsource = \"s\"\n[compute]\nbf16 = \"fast\"\n[memory]\nhbm_capacity = \"1 GB\"\nhbm_bandwidth = \"1 GB/s\"\n",
    );
    rejects(&["hw", "show", &p], &["compute.bf16"]);
    let p = s.write("chip2.toml", "name = \"x\"\nkind = \"quantum\"\n");
    rejects(&["hw", "show", &p], &["chip2.toml:2:"]);
    rejects(
        &["--catalog", "/nonexistent/catalog", "model", "list"],
        &["not a directory"],
    );
    // One broken model in a user catalog spoils the catalog, named.
    s.write(
        "cat/models/broken.toml",
        "name = \"b\"\n[arch]\nn_layers = \"x\"\n",
    );
    let cat = s.dir().join("cat");
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
}
