//! Output honesty (issue 12): `check` prints each claim's note and refuses
//! an empty claims file, `explain` prints no `inputs = NaN` and no Rust
//! type names, and no example prints a `../shared/` path.

use crate::harness::{assert_contains, rejects, run, Scratch};

#[test]
fn check_prints_notes_and_refuses_empty_files() {
    let (code, out, _) = run(&["check", "examples/claims/seed-000-ch5.toml"]);
    assert_eq!(code, 1, "seed 000 has known slips");
    assert_contains(
        &out,
        &[
            "notes:",
            "ex3.2-slice-chips (FAIL): WRONG: a 16x16x16 slice",
        ],
    );
    let s = Scratch::new("empty-claims");
    let p = s.write("empty.toml", "");
    rejects(&["check", &p], &["no claims"]);
    rejects(&["explain", &p], &["no claims"]);
    let p = s.write("title-only.toml", "title = \"t\"\n");
    rejects(&["check", &p, "--json"], &["no claims"]);
}

#[test]
fn explain_prints_no_nan_no_type_names_no_shared_paths() {
    for f in [
        "examples/book/ch5.toml",
        "examples/book/ch7.toml",
        "examples/claims/seed-000-ch5.toml",
        "examples/claims/seed-002-ch7.toml",
        "examples/playbook/seed-003.toml",
    ] {
        for fmt in ["text", "markdown", "latex"] {
            let (code, out, err) = run(&["explain", f, "--format", fmt]);
            assert!(code == 0 || code == 1, "{f}: {err}");
            for bad in [
                "NaN",
                "AfterMatmuls",
                "OneD",
                "TwoDWs",
                "Some(",
                "../shared/",
            ] {
                assert!(!out.contains(bad), "{f} --format {fmt} prints {bad:?}");
            }
        }
    }
}

#[test]
fn plan_infer_reads_the_scenario_mesh_pins_the_weight_dtype_and_shows_its_tie_breaker() {
    let (code, out, err) = run(&[
        "plan",
        "infer",
        "examples/infer/ch7-q2.toml",
        "--weights-dtype",
        "int8",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["(16 chips)", "ties by lower TPOT"]);
    let v = crate::harness::json(&[
        "plan",
        "infer",
        "examples/infer/ch7-q2.toml",
        "--weights-dtype",
        "int8",
        "--json",
    ]);
    let plans = v["points"].as_array().expect("points");
    assert!(!plans.is_empty());
    for p in plans {
        assert_eq!(p["weights_dtype"], "int8", "{p}");
        assert_eq!(p["chips"], 16, "{p}");
    }
    // equal rows are ordered by the printed tie-breakers
    for w in plans.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if a["tokens_per_s_per_chip"] == b["tokens_per_s_per_chip"]
            && a["tpot_s"] == b["tpot_s"]
            && a["chips"] == b["chips"]
        {
            let key = |p: &serde_json::Value| {
                (
                    p["batch"].as_u64(),
                    p["tp"].as_u64(),
                    p["sharding"] == "2d-ws",
                )
            };
            assert!(key(a) <= key(b), "{a} before {b}");
        }
    }
}
