//! Bad claims files: line-precise errors, never a panic.

use meshplan_core::check::{check, parse_claims};
use meshplan_core::{Catalog, Error};
use proptest::prelude::*;

fn parse_err(src: &str) -> Error {
    let f = parse_claims(src, "bad.toml", &mut |p| Err(format!("no file {p}")));
    match f {
        Err(e) => e,
        Ok(f) => check(&f, Catalog::builtin(), false).expect_err("should be an error"),
    }
}

fn line_of(e: &Error) -> usize {
    match e {
        Error::Parse { line, .. } => *line,
        e => panic!("not a parse error: {e}"),
    }
}

const HEAD: &str = "[scenarios.s]\nmodel = { name = \"book-ch7-18b\" }\nhardware = { chip = \"tpu-v5e@book\" }\n\n[[claim]]\nid = \"a\"\nscenario = \"s\"\n";

/// Issue 13 item 9: a claim with an unknown quantity is CANNOT-CHECK (its
/// reason names the line and the closest keys) and the rest of the file is
/// still judged.
fn cannot_check_reason(src: &str) -> (String, Vec<meshplan_core::check::Verdict>) {
    let f = parse_claims(src, "bad.toml", &mut |p| Err(format!("no file {p}"))).unwrap();
    let r = check(&f, Catalog::builtin(), false).unwrap();
    let reason = r.claims[0].reason.clone().unwrap_or_default();
    (reason, r.claims.iter().map(|c| c.verdict).collect())
}

#[test]
fn unknown_quantity() {
    use meshplan_core::check::Verdict;
    let (why, v) = cannot_check_reason(&format!(
        "{HEAD}quantity = \"params_totl\"\nclaimed = \"7\"\n\n[[claim]]\nid = \"b\"\nscenario = \"s\"\nquantity = \"params_total\"\nclaimed = \"18,385,207,296\"\n"
    ));
    assert!(why.contains(":8:") && why.contains("params_total"), "{why}");
    assert_eq!(v, vec![Verdict::CannotCheck, Verdict::Pass]);
}

/// Bad files, one case each: the line a parse error points at (`None`
/// where the error is not tied to a line) and a phrase its message says
/// (`""`: the line is what is checked).
#[test]
fn bad_files_are_line_precise_errors() {
    let cases: [(&str, String, Option<usize>, &str); 8] = [
        (
            "unit mismatch: seconds claimed for bytes",
            format!("{HEAD}quantity = \"kv_cache_bytes_per_token\"\nclaimed = \"1.3 ms\"\n"),
            Some(9),
            "unit mismatch",
        ),
        (
            "missing scenario",
            "[[claim]]\nid = \"a\"\nscenario = \"nope\"\nquantity = \"params_total\"\nclaimed = \"7\"\n".into(),
            Some(3),
            "unknown scenario",
        ),
        (
            "missing scenario file",
            "[[claim]]\nid = \"a\"\nscenario = \"missing.toml\"\nquantity = \"params_total\"\nclaimed = \"7\"\n".into(),
            Some(3),
            "",
        ),
        (
            "malformed TOML",
            "title = \"x\"\n[[claim]\nid = 3\n".into(),
            Some(2),
            "",
        ),
        (
            "unknown field",
            format!("{HEAD}quantity = \"params_total\"\nclaimed = \"7\"\ntolerance = 0.1\n"),
            Some(10),
            "",
        ),
        (
            "unknown command",
            format!("{HEAD}command = \"serve\"\nquantity = \"params_total\"\nclaimed = \"7\"\n"),
            Some(8),
            "unknown command",
        ),
        (
            "scenario without a model",
            "[scenarios.s]\nhardware = { chip = \"tpu-v5e\" }\n[[claim]]\nid = \"a\"\nscenario = \"s\"\nquantity = \"params_total\"\nclaimed = \"7\"\n".into(),
            Some(3),
            "",
        ),
        (
            "a word claimed for a number",
            format!("{HEAD}quantity = \"params_total\"\nclaimed = \"fits\"\n"),
            None,
            "claim a number",
        ),
    ];
    for (name, src, line, says) in cases {
        let e = parse_err(&src);
        if let Some(line) = line {
            assert_eq!(line_of(&e), line, "{name}: {e}");
        }
        assert!(e.to_string().contains(says), "{name}: {e}");
    }
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,300}") {
        if let Ok(f) = parse_claims(&s, "p.toml", &mut |_| Err("x".into())) {
            let _ = check(&f, Catalog::builtin(), true);
        }
    }

    #[test]
    fn arbitrary_claimed_never_panics(c in "[0-9a-zA-Z ,.:/µ~≈%+-]{0,24}", q in prop::sample::select(vec!["params_total", "kv_cache_bytes_per_token", "hbm_bandwidth_bytes_per_s", "critical_intensity_hbm"])) {
        let src = format!("{HEAD}quantity = \"{q}\"\nclaimed = {}\n", toml::Value::String(c));
        if let Ok(f) = parse_claims(&src, "p.toml", &mut |_| Err("x".into())) {
            let _ = check(&f, Catalog::builtin(), true);
        }
    }
}

#[test]
fn unknown_train_and_infer_quantities_suggest() {
    let (why, _) = cannot_check_reason(&format!(
        "{HEAD}command = \"train\"\nquantity = \"rules.x_optt\"\nclaimed = \"7\"\n"
    ));
    assert!(why.contains(":9:") && why.contains("rules.x_opt"), "{why}");
    let (why, _) = cannot_check_reason(&format!(
        "{HEAD}command = \"infer\"\nquantity = \"max_batchh\"\nclaimed = \"7\"\n"
    ));
    assert!(why.contains("max_batch"), "{why}");
}

#[test]
fn infer_args_and_missing_mesh_are_errors() {
    // unknown args key
    let e = parse_err(&format!(
        "{HEAD}command = \"infer\"\nquantity = \"max_batch\"\nargs = {{ batchh = 3 }}\nclaimed = \"7\"\n"
    ));
    assert!(e.to_string().contains("unknown args key `batchh`"), "{e}");
    // the scenario has no slice: an error naming the claim, not a panic
    let e = parse_err(&format!(
        "{HEAD}command = \"infer\"\nquantity = \"max_batch\"\nclaimed = \"7\"\n"
    ));
    assert!(e.to_string().contains("no slice given"), "{e}");
    // args override the scenario: a mesh makes it evaluable
    let src = format!(
        "{HEAD}command = \"infer\"\nquantity = \"max_batch\"\nargs = {{ mesh = \"4x4\", weights_dtype = \"int8\", kv_dtype = \"int8\", context = \"128k\" }}\nclaimed = \"7\"\n"
    );
    let f = parse_claims(&src, "ok.toml", &mut |p| Err(p.to_string())).unwrap();
    let r = check(&f, Catalog::builtin(), false).unwrap();
    assert_eq!(r.claims[0].verdict, meshplan_core::check::Verdict::Pass);
}

/// "1e400 s" reads as +∞; with a printed-precision tolerance of ∞ it used to
/// PASS any quantity. It is an out-of-range error now.
#[test]
fn infinite_claimed_value_is_an_error() {
    let src = "[scenarios.s]\nmodel = { name = \"book-ch7-18b\" }\nhardware = { chip = \"tpu-v5e@book\", mesh = \"4x4\" }\n\n[[claim]]\nid = \"a\"\nscenario = \"s\"\ncommand = \"infer\"\nquantity = \"decode_step_time_s\"\nclaimed = \"1e400 s\"\n";
    let e = parse_err(src);
    assert!(e.to_string().contains("out of range"), "{e}");
}

/// A mesh whose chip count overflows u64 (2^32 · (2^32 + 1)) is an error, not
/// an arithmetic-overflow panic.
#[test]
fn overflowing_mesh_in_args_is_an_error() {
    let src = "[scenarios.s]\nmodel = { name = \"gpt-2\" }\nhardware = { chip = \"h100\", chips = 1 }\n\n[[claim]]\nid = \"a\"\nscenario = \"s\"\ncommand = \"infer\"\nquantity = \"decode_step_time_s\"\nclaimed = \"1 ms\"\nargs = { mesh = \"4294967296x4294967297\", tp = 1 }\n";
    let e = parse_err(src);
    assert!(e.to_string().contains("more than"), "{e}");
}
