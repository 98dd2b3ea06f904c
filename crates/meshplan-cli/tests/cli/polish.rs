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
