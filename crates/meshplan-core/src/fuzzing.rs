//! Entry points shared by the cargo-fuzz targets (`fuzz/`, nightly only)
//! and the stable property tests (`tests/fuzz_props.rs`): one function per
//! parser and per evaluator. Each takes arbitrary bytes, must never panic,
//! and, where it evaluates, checks that every printed number is finite.
//! See docs/fuzzing.md.

use crate::catalog::Catalog;
use crate::trace::NoTrace;
use crate::view::{render_text, Render};

/// The bytes as text, when they are UTF-8 (every parser reads text).
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Panic when rendered output holds a non-finite number (a word NaN or inf).
pub fn assert_finite_text(what: &str, out: &str) {
    if let Some(w) = out
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| w.eq_ignore_ascii_case("nan") || w.eq_ignore_ascii_case("inf"))
    {
        panic!("{what}: printed {w:?}:\n{out}");
    }
}

/// A scenario TOML.
pub fn scenario(data: &[u8]) {
    if let Some(s) = text(data) {
        let _ = crate::scenario::Scenario::parse(s, "fuzz.toml");
    }
}

/// A catalog-format model TOML.
pub fn model_file(data: &[u8]) {
    if let Some(s) = text(data) {
        let _ = crate::catalog::parse_model(s, "fuzz.toml");
    }
}

/// A catalog-format chip TOML.
pub fn chip_file(data: &[u8]) {
    if let Some(s) = text(data) {
        let _ = crate::catalog::parse_chip(s, "fuzz.toml");
    }
}

/// An efficiency profile TOML (`meshplan calibrate` output).
pub fn profile(data: &[u8]) {
    if let Some(s) = text(data) {
        let _ = crate::fidelity::EfficiencyProfile::parse(s, "fuzz.toml");
    }
}

/// A Hugging Face config.json.
pub fn hf_config(data: &[u8]) {
    if let Some(s) = text(data) {
        let _ = crate::hf::import(s, "fuzz.json", "fuzz");
    }
}

/// A claims file (no included files).
pub fn claims(data: &[u8]) {
    if let Some(s) = text(data) {
        let _ = crate::check::claims::parse_claims(s, "fuzz.toml", &mut |p: &str| {
            Err(format!("no file '{p}' while fuzzing"))
        });
    }
}

/// CSV validation rows: a calibration CSV and a Playbook CSV.
pub fn csv_rows(data: &[u8]) {
    if let Some(s) = text(data) {
        let cat = Catalog::builtin();
        let lookup = |n: &str| cat.model(n).ok().map(|m| m.arch.clone());
        let _ = crate::fidelity::data::parse_calibration_csv(s, "h100", &lookup);
        let _ =
            crate::fidelity::data::parse_playbook_csv(s, crate::fidelity::data::PLAYBOOK_MODELS);
    }
}

/// A published-runs JSON.
pub fn published_json(data: &[u8]) {
    if let Some(s) = text(data) {
        let _ = crate::fidelity::data::parse_published_json(s);
    }
}

/// Unit strings: counts ("4M", "32Ki", "1.5e9"), bytes, rates, times,
/// FLOPs, dtypes and mesh shapes.
pub fn units(data: &[u8]) {
    if let Some(s) = text(data) {
        use crate::units::*;
        let _ = parse_count(s);
        let _ = parse_bytes(s);
        let _ = parse_bytes_per_sec(s);
        let _ = parse_flops_per_sec(s);
        let _ = parse_flops(s);
        let _ = parse_seconds(s);
        let _ = DType::parse(s);
        let _ = crate::hardware::parse_shape(s);
    }
}

/// Evaluate a scenario the way `train` and `infer` do (whatever resolves),
/// render the reports as text and JSON: no panic, no non-finite number
/// printed, JSON that parses back.
pub fn evaluate_scenario(data: &[u8]) {
    let Some(s) = text(data) else { return };
    let Ok(sc) = crate::scenario::Scenario::parse(s, "fuzz.toml") else {
        return;
    };
    let cat = Catalog::builtin();
    if let Some(r) = train_report(&sc) {
        assert_finite_text("train", &render_text(&r.doc()));
        let j = serde_json::to_string(&r).expect("train report serializes");
        serde_json::from_str::<serde_json::Value>(&j).expect("train JSON parses");
    }
    if let Ok(i) = crate::inference::scenario::resolve(&sc, cat) {
        if let Ok(r) = crate::inference::evaluate(&i.model, &i.chip, &i.query, &mut NoTrace) {
            assert_finite_text("infer", &render_text(&r.doc()));
            let j = serde_json::to_string(&r).expect("infer report serializes");
            serde_json::from_str::<serde_json::Value>(&j).expect("infer JSON parses");
        }
    }
}

/// `train` of a scenario as the CLI evaluates it (no derivation), when it
/// resolves against the built-in catalog.
pub fn train_report(sc: &crate::scenario::Scenario) -> Option<crate::training::TrainReport> {
    let t = crate::training::scenario::resolve(sc, Catalog::builtin()).ok()?;
    Some(t.analyze(&mut NoTrace))
}
