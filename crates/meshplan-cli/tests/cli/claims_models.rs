//! One model input path everywhere (issue 12), in claims files too: a
//! scenario of a claims file names its model by catalog name, inline
//! hyperparameters, a Hugging Face config.json or a catalog-format model
//! TOML (`[model] file`), inline or in a scenario file, relative to the file
//! that names it. The expected counts are the published ones
//! (tests/fixtures/hf/EXPECTED.md: Llama-2-7B 6,738,415,616; GPT-2 124,439,808).

use crate::harness::{json, rejects, root, run, Scratch};

const HF_LLAMA: &str = "crates/meshplan-core/tests/fixtures/hf/llama-2-7b.json";
const HF_GPT2: &str = "crates/meshplan-core/tests/fixtures/hf/gpt2.json";
const TOML: &str = "data/models/llama-2-7b.toml";

fn copy(s: &Scratch, from: &str, to: &str) {
    s.write(
        to,
        std::fs::read_to_string(root().join(from)).expect("fixture"),
    );
}

/// A claim that the scenario's model has `params` parameters.
fn claim(id: &str, scenario: &str, params: &str) -> String {
    format!(
        "[[claim]]\nid = \"{id}\"\nscenario = \"{scenario}\"\nquantity = \"params_total\"\nclaimed = \"{params}\"\nrel_tol = 1e-12\n\n"
    )
}

#[test]
fn claims_take_models_every_way() {
    let s = Scratch::new("claims-models");
    copy(&s, HF_LLAMA, "claims/hf/config.json");
    copy(&s, HF_GPT2, "claims/other/config.json");
    copy(&s, TOML, "claims/m.toml");
    copy(&s, HF_LLAMA, "scen/llama.json");
    s.write(
        "scen/s.toml",
        "[model]\nfile = \"llama.json\"\n[hardware]\nchip = \"h100\"\n",
    );
    let mut body = String::from(
        "title = \"model inputs\"\n\n\
         [scenarios.name]\nmodel = { name = \"llama-2-7b\" }\n\n\
         [scenarios.inline]\nmodel = { n_layers = 32, d_model = 4096, d_ff = 11008, n_heads = 32, vocab = 32000 }\n\n\
         [scenarios.hf]\nmodel = { file = \"hf/config.json\" }\n\n\
         [scenarios.gpt2]\nmodel = { file = \"other/config.json\" }\n\n\
         [scenarios.toml]\nmodel = { file = \"m.toml\" }\n\n\
         [scenarios.infile]\nfile = \"../scen/s.toml\"\n\n",
    );
    for sc in ["name", "inline", "hf", "toml", "infile"] {
        body += &claim(sc, sc, "6738415616");
    }
    // the second config.json (GPT-2) is a different model of the same name
    body += &claim("gpt2", "gpt2", "124439808");
    let f = s.write("claims/c.toml", body);
    let v = json(&["check", &f, "--json"]);
    assert_eq!(v["summary"]["pass"], 6, "{v}");
    assert_eq!(v["summary"]["fail"], 0, "{v}");
}

#[test]
fn claims_model_file_errors_name_the_file() {
    let s = Scratch::new("claims-models-bad");
    let f = s.write(
        "c.toml",
        "[scenarios.a]\nmodel = { file = \"missing.json\" }\n\n".to_string()
            + &claim("a", "a", "1"),
    );
    rejects(&["check", &f], &["missing.json"]);
    let g = s.write(
        "g.toml",
        "[scenarios.a]\nmodel = { name = \"gpt-2\", file = \"x.json\" }\n\n".to_string()
            + &claim("a", "a", "1"),
    );
    rejects(&["check", &g], &["both"]);
    let (code, _, err) = run(&["explain", &f]);
    assert_eq!(code, 2, "{err}");
}
