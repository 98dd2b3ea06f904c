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
    for (j, g) in held.iter().zip(&s.heldout) {
        assert_eq!(j["metric"], g.metric.as_str());
        assert_eq!(j["by"], g.by.as_str());
        assert_eq!(j["group"], g.group.as_str());
        assert_eq!(j["n"].as_u64().unwrap() as usize, g.n);
        assert_eq!(j["median_abs_error"].as_f64().unwrap(), g.median_abs_error);
        assert_eq!(j["p90_abs_error"].as_f64().unwrap(), g.p90_abs_error);
        assert_eq!(
            j["signed_median_error"].as_f64().unwrap(),
            g.signed_median_error
        );
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
    assert_contains(&out, &["Held out", "In-sample", "median abs error", "bias"]);
    let (code, all, err) = run(&["validate", "--serving", "--all"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &all,
        &["dsr1-sgl-16h100-c1-128-128-ttft", "sglang-8b-tp1-bs1"],
    );
}

#[test]
fn serving_takes_no_data_set() {
    rejects(
        &["validate", "--serving", "runs.csv"],
        &["cannot be used with"],
    );
    rejects(&["validate", "--serving", "--explain"], &["no derivation"]);
}
