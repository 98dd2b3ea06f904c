//! One model input path everywhere (issue 12): a Hugging Face config.json
//! or a catalog-format model TOML works as `--model` of `train`, `infer`
//! and `plan` as in `model show`, and as a scenario's `[model] file`
//! (relative to the scenario file).

use crate::harness::{f, json, rejects, root, Scratch};

const HF: &str = "crates/meshplan-core/tests/fixtures/hf/llama-2-7b.json";
const TOML: &str = "data/models/llama-2-7b.toml";

/// `model show NAME --json`'s parameter count.
fn params(model: &str) -> f64 {
    f(&json(&["model", "show", model, "--json"]), "params_total")
}

#[test]
fn model_files_as_flags_of_every_command() {
    for m in [HF, TOML] {
        let hw = ["--hw", "h100", "--chips", "8", "--json"];
        let mut train = vec!["train", "--model", m];
        train.extend_from_slice(&hw);
        json(&train);
        let mut infer = vec!["infer", "--model", m];
        infer.extend_from_slice(&hw);
        json(&infer);
        let mut plan = vec!["plan", "infer", "--model", m];
        plan.extend_from_slice(&hw);
        json(&plan);
        let mut plan = vec![
            "plan",
            "train",
            "--model",
            m,
            "--batch-tokens",
            "1M",
            "--seq-len",
            "4096",
        ];
        plan.extend_from_slice(&hw);
        json(&plan);
    }
}

#[test]
fn scenario_model_file_is_relative_to_the_scenario() {
    let s = Scratch::new("model-file");
    let cfg = std::fs::read_to_string(root().join(HF)).expect("fixture");
    s.write("models/config.json", &cfg);
    let model_toml = std::fs::read_to_string(root().join(TOML)).expect("catalog file");
    s.write("models/m.toml", &model_toml);
    let hw = "[hardware]\nchip = \"h100\"\nchips = 8\n[training]\nbatch_tokens = \"1M\"\nseq_len = 4096\n";
    let a = s.write(
        "a.toml",
        format!("[model]\nfile = \"models/config.json\"\n{hw}"),
    );
    let b = s.write("b.toml", format!("[model]\nfile = \"models/m.toml\"\n{hw}"));
    let want = params(HF);
    for sc in [&a, &b] {
        assert_eq!(params(sc), want, "{sc}");
        json(&["train", sc, "--json"]);
        json(&["infer", sc, "--json"]);
        json(&["plan", "train", sc, "--json"]);
    }
    // inline hyperparameters override the file's
    let c = s.write(
        "c.toml",
        format!("[model]\nfile = \"models/config.json\"\nn_layers = 16\n{hw}"),
    );
    assert!(params(&c) < want);
    // --model beats the scenario's file
    let v = json(&["train", &a, "--model", "gpt-2", "--json"]);
    assert!(f(&v, "params_per_device") < want / 10.0, "{v}");
    // bad files: named, exit 2
    let d = s.write(
        "d.toml",
        format!("[model]\nname = \"llama-2-7b\"\nfile = \"models/config.json\"\n{hw}"),
    );
    rejects(&["train", &d], &["both", "file"]);
    let e = s.write("e.toml", format!("[model]\nfile = \"nope.json\"\n{hw}"));
    rejects(&["train", &e], &["nope.json", "cannot read"]);
    rejects(&["model", "show", &e], &["nope.json"]);
    let g = s.write("g.toml", format!("[model]\nfile = \"a.toml\"\n{hw}"));
    rejects(&["infer", &g], &["neither"]);
}
