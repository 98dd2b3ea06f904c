//! External validation (issue 25, part 6): published runs outside the
//! shared validation data and the reserved tables, in
//! `data/validation/external_runs.json`, compared and never fitted on. The
//! figures `docs/fidelity.md` ("External validation") reports are
//! recomputed here from the file, so the docs and the code agree.

use std::collections::BTreeMap;

use meshplan_core::fidelity::data::{parse_published_json, VALIDATION_ONLY};
use meshplan_core::fidelity::report::{calibrate_runs, load_dataset, validate, Thresholds};
use meshplan_core::fidelity::stats::ErrStats;
use meshplan_core::fidelity::EfficiencyProfile;
use meshplan_core::Catalog;

const EXTERNAL: &str = include_str!("../../../data/validation/external_runs.json");
const PUBLISHED: &str = include_str!("fixtures/validation/published_runs.json");
const DOCS: &str = include_str!("../../../docs/fidelity.md");

/// The `| group | n | median | p90 |` table under "## External
/// validation": group → (n, median %, p90 %).
fn documented() -> BTreeMap<String, (usize, f64, f64)> {
    let section = DOCS
        .split("## External validation")
        .nth(1)
        .expect("docs/fidelity.md has an External validation section");
    let pct = |s: &str| {
        s.trim()
            .trim_end_matches('%')
            .trim()
            .parse::<f64>()
            .unwrap()
    };
    section
        .lines()
        .skip_while(|l| !l.starts_with("| group | n | median | p90 |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let c: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (
                c[0].to_string(),
                (c[1].parse().unwrap(), pct(c[2]), pct(c[3])),
            )
        })
        .collect()
}

fn as_doc(s: &ErrStats) -> (usize, f64, f64) {
    let r = |x: f64| (1000.0 * x).round() / 10.0;
    (s.n, r(s.median), r(s.p90))
}

#[test]
fn every_row_enters_and_is_validation_only() {
    let (runs, skipped) = load_dataset(EXTERNAL, "external_runs.json", None).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(runs.len(), 4);
    assert!(runs.iter().all(|r| r.validation_only && r.clean));
    // every row names a source URL and notes (the file's own rule)
    let v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    for e in v.as_array().unwrap() {
        assert_eq!(e["use"], VALIDATION_ONLY);
        assert!(e["source"]["url_or_repo_path"]
            .as_str()
            .unwrap()
            .starts_with("https://"));
        assert!(!e["notes"].as_str().unwrap().is_empty());
    }
}

#[test]
fn the_documented_figures_are_validates() {
    let (runs, skipped) = load_dataset(EXTERNAL, "external_runs.json", None).unwrap();
    let r = validate(&runs, skipped, None, &Thresholds::default(), true);
    let x = r.external.expect("external rows");
    let mut got = BTreeMap::new();
    got.insert("pooled".to_string(), as_doc(&x.pooled));
    for (name, m) in [
        ("source", &x.by_source),
        ("chip", &x.by_chip),
        ("framework", &x.by_framework),
    ] {
        for (k, s) in m {
            got.insert(format!("{name} {k}"), as_doc(s));
        }
    }
    assert_eq!(got, documented());
    // a single-source-per-framework file has no held-out fold to report
    assert!(r.held_out.is_none());
}

#[test]
fn the_sign_of_each_error_is_as_documented() {
    // every external run is predicted too fast (docs)
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    let r = validate(&runs, Vec::new(), None, &Thresholds::default(), true);
    for row in &r.runs {
        let e = row.step_error.unwrap();
        assert!(e < 0.0, "{}: {e}", row.id);
    }
}

#[test]
fn a_non_gated_ffn_text_is_a_plain_mlp() {
    // "GeLU, non-gated (4*D)" (BLOOM, the shipped Korthikanti entries) is
    // a plain 2-matrix MLP; "SwiGLU (gated)" a 3-matrix one
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    for r in &runs {
        let plain = r.id.starts_with("bloom");
        assert_eq!(r.spec.arch.mlp.matrices() == 2, plain, "{}", r.id);
    }
}

#[test]
fn calibrate_never_fits_on_external_rows() {
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    let chip = Catalog::builtin().chip("a100-80gb").unwrap();
    let start = EfficiencyProfile::builtin("a100-80gb").unwrap();
    let e = calibrate_runs(&runs, chip, &start, 5, 0, false, "external_runs.json")
        .expect_err("calibrate refuses validation-only rows")
        .to_string();
    assert!(e.contains(VALIDATION_ONLY), "{e}");
    assert!(e.contains("never fitted"), "{e}");
}

#[test]
fn leave_one_source_out_never_fits_on_external_rows() {
    // with the shipped published runs (two sources: kor22, mcore24) the
    // folds are theirs alone; the external rows are neither fitted nor
    // held out, and their comparison is the same as without the folds
    let (mut runs, _) = parse_published_json(PUBLISHED).unwrap();
    let (ext, _) = parse_published_json(EXTERNAL).unwrap();
    runs.extend(ext.iter().cloned());
    let r = validate(&runs, Vec::new(), None, &Thresholds::default(), false);
    let h = r.held_out.expect("two fitting sources");
    let folds: Vec<&str> = h.folds.iter().map(|f| f.source.as_str()).collect();
    assert_eq!(folds, ["kor22", "mcore24"]);
    for f in &h.folds {
        assert!(
            f.trained_on
                .iter()
                .all(|s| s != "titan24" && s != "bloom22"),
            "{f:?}"
        );
        assert_eq!(
            f.runs,
            runs.iter()
                .filter(|r| r.source == f.source && r.clean)
                .count()
        );
    }
    assert!(h.runs.iter().all(|row| ext.iter().all(|e| e.id != row.id)));
    let alone = validate(&ext, Vec::new(), None, &Thresholds::default(), false);
    assert_eq!(
        as_doc(&r.external.unwrap().pooled),
        as_doc(&alone.external.unwrap().pooled)
    );
}

#[test]
fn a_bad_framework_or_chip_is_a_clear_error() {
    let mut v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    v[0]["framework"] = "fsdp3".into();
    let e = parse_published_json(&v.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("framework") && e.contains("torchtitan"), "{e}");
    let mut v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    v[0]["hardware"]["catalog_chip"] = "a100-90gb".into();
    let e = parse_published_json(&v.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("catalog_chip"), "{e}");
}
