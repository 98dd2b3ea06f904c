//! `meshplan validate --serving` (issue 26): the serving comparison the core
//! computes, in text and JSON alike, and bad combinations refused (exit 2).

use meshplan_core::inference::validation::compare;
use meshplan_core::Catalog;

use crate::harness::{assert_contains, json, rejects, run};

#[test]
fn json_carries_the_core_comparison() {
    let v = json(&["validate", "--serving", "--json"]);
    let s = compare(Catalog::builtin()).unwrap();
    let held = v["heldout"].as_array().unwrap();
    assert_eq!(held.len(), s.heldout.len());
    // JSON text → f64 may land one ulp off (serde_json without
    // float_roundtrip): equal to 1e-12
    let same = |j: &serde_json::Value, x: f64| {
        let y = j.as_f64().unwrap();
        assert!((y - x).abs() <= 1e-12 * x.abs().max(1.0), "{y} vs {x}");
    };
    for (j, g) in held.iter().zip(&s.heldout) {
        assert_eq!(j["metric"], g.metric.as_str());
        assert_eq!(j["by"], g.by.as_str());
        assert_eq!(j["group"], g.group.as_str());
        assert_eq!(j["n"].as_u64().unwrap() as usize, g.n);
        same(&j["median_abs_error"], g.median_abs_error);
        same(&j["p90_abs_error"], g.p90_abs_error);
        same(&j["signed_median_error"], g.signed_median_error);
    }
    assert_eq!(v["rows"].as_array().unwrap().len(), s.rows.len());
    // the three metric families are reported
    for m in ["TTFT", "TPOT", "tokens/s/GPU"] {
        assert!(held.iter().any(|g| g["metric"] == m), "{m}");
    }
}

#[test]
fn text_lists_groups_and_rows() {
    let (code, out, err) = run(&["validate", "--serving"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["Held out", "median abs error", "bias"]);
    // nothing is fitted on these rows any more: no in-sample table
    assert!(!out.contains("In-sample"), "{out}");
    let (code, all, err) = run(&["validate", "--serving", "--all"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &all,
        &["dsr1-sgl-16h100-c1-128-128-ttft", "sglang-8b-tp1-bs1"],
    );
    assert!(!all.contains("in-sample"), "{all}");
}

#[test]
fn serving_takes_no_data_set() {
    rejects(
        &["validate", "--serving", "runs.csv"],
        &["cannot be used with"],
    );
    rejects(&["validate", "--serving", "--explain"], &["no derivation"]);
}
