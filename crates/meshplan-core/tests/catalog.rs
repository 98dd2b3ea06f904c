//! Every catalog file parses, and every model reproduces its published count.

use meshplan_core::model::params;
use meshplan_core::trace::NoTrace;
use meshplan_core::Catalog;

#[test]
fn builtin_catalog_loads() {
    let c = Catalog::load_builtin().unwrap_or_else(|e| panic!("{e}"));
    assert!(c.models().len() >= 20);
    assert!(c.chips().len() >= 10);
}

#[test]
fn every_model_matches_its_published_count() {
    let c = Catalog::builtin();
    let mut failures = Vec::new();
    for m in c.models() {
        let p = m
            .published
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no published count", m.name));
        assert!(
            !p.source.is_empty(),
            "{}: published count without source",
            m.name
        );
        assert!(!m.source.is_empty(), "{}: no source", m.name);
        let got = params::count(&m.arch, &mut NoTrace);
        let ok_total = if p.exact {
            got.total == p.params
        } else {
            (got.total as f64 / p.params as f64 - 1.0).abs() <= p.rel_tol
        };
        // rel_tol bounds the (usually rounded) published active count.
        let ok_active = p.active_params == 0
            || (got.active as f64 / p.active_params as f64 - 1.0).abs()
                <= p.active_rel_tol.unwrap_or(p.rel_tol);
        if !ok_total || !ok_active {
            failures.push(format!(
                "{}: total {} vs published {} (exact={}), active {} vs {}",
                m.name, got.total, p.params, p.exact, got.active, p.active_params
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn required_names_and_aliases_resolve() {
    let c = Catalog::builtin();
    for n in [
        "llama-2-7b",
        "llama-2-13b",
        "llama-2-70b",
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "mistral-7b",
        "mixtral-8x7b",
        "mixtral-8x22b",
        "qwen2.5-7b",
        "qwen2.5-72b",
        "qwen3-235b-a22b",
        "deepseek-v3",
        "gemma-2-9b",
        "gemma-2-27b",
        "gpt-3-175b",
        "book-ch5-llama-2-13b",
        "book-ch7-18b",
        "book-ch7-18b-moe",
    ] {
        c.model(n).unwrap_or_else(|e| panic!("{e}"));
    }
    for n in [
        "tpu-v4p",
        "tpu-v5e",
        "tpu-v5p",
        "tpu-v6e",
        "a100-80gb",
        "h100",
        "h200",
        "b200",
        "gb200-nvl72",
        "mi300x",
        "v5e",
        "TPU v5p",
        "H100-SXM",
        "tpu-v5e@book",
        "v5e@book",
    ] {
        c.chip(n).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn unknown_names_suggest() {
    let c = Catalog::builtin();
    let e = c.model("lama-2-7b").unwrap_err().to_string();
    assert!(e.contains("llama-2-7b"), "{e}");
    let e = c.chip("h1000").unwrap_err().to_string();
    assert!(e.contains("h100"), "{e}");
}

/// Issue 26: Blackwell's fp4 peaks, dense, from NVIDIA's system figures
/// quoted with sparsity: DGX B200 144 PF FP4 over 8 GPUs → 144/2/8 = 9 PF;
/// GB200 NVL72 1,440 PF over 72 GPUs → 1440/2/72 = 10 PF.
#[test]
fn blackwell_fp4_peaks() {
    let cat = meshplan_core::Catalog::builtin();
    let fp4 = |c: &str| {
        cat.chip(c)
            .unwrap()
            .peak
            .get(meshplan_core::units::DType::Fp4)
            .unwrap()
            .get()
    };
    assert_eq!(fp4("b200"), 144e15 / 2.0 / 8.0);
    assert_eq!(fp4("gb200-nvl72"), 1440e15 / 2.0 / 72.0);
}

/// A downloaded config.json is named after its folder, which is often an
/// alias of a built-in model (`Llama-2-7b-hf` of llama-2-7b): the name must
/// find the imported file's model, not the built-in one, while the built-in
/// model stays reachable by its own name.
#[test]
fn an_imported_model_shadows_the_alias_it_is_named_after() {
    let mut c = Catalog::builtin().clone();
    let builtin_layers = c.model("Llama-2-7b-hf").expect("alias").arch.n_layers;
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/hf/llama-2-7b.json"
    ))
    .expect("fixture")
    // a modified copy: 16 blocks where the published model has 32
    .replace("\"num_hidden_layers\": 32", "\"num_hidden_layers\": 16");
    let (name, _) =
        meshplan_core::scenario::add_model_file(&mut c, &src, "models/Llama-2-7b-hf/config.json")
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(name, "Llama-2-7b-hf");
    assert_eq!(c.model(&name).expect("imported").arch.n_layers, 16);
    assert_eq!(
        c.model("llama-2-7b").expect("built-in").arch.n_layers,
        builtin_layers
    );
    assert_eq!(builtin_layers, 32);
}
