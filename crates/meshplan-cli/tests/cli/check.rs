//! `meshplan check` and `meshplan explain`: exit codes (0 pass, 1 fail,
//! 2 malformed), the JSON report, explanations and bad claims files.

use crate::harness::{assert_contains, assert_no_panic, f, json, parse, root, run, u, Scratch};

/// One scenario with the ch7 18B model, then the start of a claim on it.
const HEAD: &str = "[scenarios.s]\nmodel = { name = \"book-ch7-18b\" }\n\n[[claim]]\nid = \"a\"\nscenario = \"s\"\n";

#[test]
fn shipped_claims_files_exit_codes() {
    let (code, out, _) = run(&["check", "examples/claims/seed-000-ch5.toml"]);
    assert_eq!(code, 1, "{out}");
    assert_contains(&out, &["25 PASS, 4 FAIL, 0 CANNOT-CHECK"]);
    let (code, out, _) = run(&["check", "examples/claims/seed-002-ch7.toml"]);
    assert_eq!(code, 1, "{out}");
    assert_contains(&out, &["digit typo", "forward vs training"]);
    // ch5: every official answer passes; ch7: four claims fail where the
    // book itself approximates or slips (each carries a "BOOK …" note, so
    // they are expected FAILs: exit 0, 1 with --strict; hostile2.rs)
    assert_eq!(run(&["check", "examples/book/ch5.toml"]).0, 0);
    let (code, out, _) = run(&["check", "examples/book/ch7.toml"]);
    assert_eq!(code, 0, "{out}");
    assert_contains(&out, &["26 PASS, 4 FAIL, 0 CANNOT-CHECK"]);
    assert_eq!(run(&["check", "examples/playbook/seed-003.toml"]).0, 1);
}

/// Several files at once (`check examples/book/*.toml`): each file's table
/// under its name, the worst exit status (a seed with a WRONG: slip beside
/// a book chapter whose only FAILs are annotated: 1), and `--json` an array
/// of the files' reports, each naming its file.
#[test]
fn several_files_at_once() {
    let (book, seed) = (
        "examples/book/ch7.toml",
        "examples/claims/seed-002-ch7.toml",
    );
    let (code, out, _) = run(&["check", "examples/book/ch5.toml", book]);
    assert_eq!(code, 0, "{out}");
    assert_contains(
        &out,
        &[
            "== examples/book/ch5.toml ==",
            "== examples/book/ch7.toml ==",
        ],
    );
    assert_eq!(run(&["check", book, seed]).0, 1);
    assert_eq!(run(&["check", seed, book]).0, 1);
    let args = ["check", "--json", book, seed];
    let (_, out, _) = run(&args);
    let v = parse(&args, &out);
    let files = v.as_array().expect("an array of reports");
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["file"], book);
    assert_eq!(files[1]["file"], seed);
    assert!(files[0]["summary"]["pass"].as_u64().unwrap() > 0);
    // a malformed file among good ones: exit 2 naming it, no partial table
    let (code, out, err) = run(&["check", book, "does-not-exist.toml"]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert_contains(&err, &["does-not-exist.toml"]);
}

/// A claim on an optional key the scenario does not produce (no MFU → no
/// step_time_at_mfu_s) is CANNOT-CHECK: exit 0, but 1 with --strict.
#[test]
fn cannot_check_fails_only_with_strict() {
    let s = Scratch::new("cannot-check");
    let p = s.write(
        "cc.toml",
        "[scenarios.s]\nmodel = { name = \"book-ch5-llama-2-13b\" }\nhardware = { chip = \"tpu-v5p@book\", mesh = \"4x4x4\" }\n\n[[claim]]\nid = \"a\"\nscenario = \"s\"\ncommand = \"train\"\nquantity = \"step_time_at_mfu_s\"\nclaimed = \"1 s\"\n",
    );
    let (code, out, _) = run(&["check", &p]);
    assert_eq!(code, 0, "{out}");
    assert_contains(&out, &["CANNOT-CHECK"]);
    assert_eq!(run(&["check", "--strict", &p]).0, 1);
}

#[test]
fn json_output() {
    let args = ["check", "--json", "examples/claims/seed-002-ch7.toml"];
    let (code, out, _) = run(&args);
    assert_eq!(code, 1);
    let v = parse(&args, &out);
    assert_eq!(u(&v, "summary.fail"), 7);
    assert_eq!(u(&v, "summary.cannot_check"), 0);
    let q1 = &v["claims"][0];
    assert_eq!(q1["id"], "q1-params");
    assert_eq!(q1["verdict"], "FAIL");
    // the seed wrote 18,385,207,246; (3DF + 2D(N+K)H)·L + DV = 18,385,207,296
    assert_eq!(u(q1, "meshplan"), 18_385_207_296);
    assert_eq!(q1["hint"]["kind"], "digit-typo");
}

#[test]
fn explain_formats() {
    let (code, out, _) = run(&["check", "--explain", "examples/claims/seed-002-ch7.toml"]);
    assert_eq!(code, 1);
    assert_contains(&out, &["Forward matmul FLOPs per token: 2·P_matmul"]);
    for (fmt, needle) in [
        ("text", "Inputs:"),
        ("markdown", "## q1-params"),
        ("latex", "\\begin{align*}"),
    ] {
        let (code, out, err) = run(&[
            "explain",
            "--format",
            fmt,
            "examples/claims/seed-002-ch7.toml",
        ]);
        assert_eq!(code, 0, "{err}");
        // L = 64 layers of the ch7 model, in every format
        assert_contains(&out, &[needle, "64"]);
    }
}

#[test]
fn bad_files_exit_2_with_the_line() {
    let s = Scratch::new("bad-claims");
    for (name, body, needle) in [
        (
            "u.toml",
            format!("{HEAD}quantity = \"kv_cache_bytes_per_token\"\nclaimed = \"2 s\"\n"),
            ":8:",
        ),
        (
            "s.toml",
            "[[claim]]\nid = \"a\"\nscenario = \"x\"\nquantity = \"params_total\"\nclaimed = \"7\"\n"
                .to_string(),
            ":3:",
        ),
        ("m.toml", "[[claim\nid = 1\n".to_string(), ":1:"),
        (
            "c.toml",
            format!("{HEAD}command = \"serve\"\nquantity = \"params_total\"\nclaimed = \"7\"\n"),
            ":7:",
        ),
    ] {
        let p = s.write(name, body);
        let args = ["check", p.as_str()];
        let (code, _, err) = run(&args);
        assert_no_panic(&args, &err);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(needle), "{name}: {err}");
    }
    let (code, _, err) = run(&["check", "does-not-exist.toml"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn scenario_file_relative_to_the_claims_file() {
    let s = Scratch::new("relative");
    let p = s.write(
        "rel.toml",
        "[[claim]]\nid = \"p\"\nscenario = \"scen.toml\"\nquantity = \"params_total\"\nclaimed = \"13,015,449,600\"\n",
    );
    s.write("scen.toml", "[model]\nname = \"book-ch5-llama-2-13b\"\n");
    let (code, out, err) = run(&["check", &p]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Issue 22: `check` referees a figure of `train --json` / `infer --json`,
/// the calibrated prediction and the serving TPOT included: a claim that
/// states the CLI's own value passes; the same claim 20 % high fails.
#[test]
fn claims_on_the_cli_reports_own_values() {
    let s = Scratch::new("own-values");
    let train = root().join("examples/train/llama-3-8b-h100-3d.toml");
    let serve = root().join("examples/infer/llama-70b-8xh100-static.toml");
    let (train, serve) = (train.display().to_string(), serve.display().to_string());
    let t = json(&["train", &train, "--json"]);
    let i = json(&["infer", &serve, "--json"]);
    let cases = [
        (
            &train,
            "train",
            "predicted.step_time_s",
            f(&t, "predicted.step_time_s"),
        ),
        (&train, "train", "predicted.mfu", f(&t, "predicted.mfu")),
        (
            &train,
            "train",
            "predicted.tokens_per_s",
            f(&t, "predicted.tokens_per_s"),
        ),
        (
            &serve,
            "infer",
            "serving.static_batch.tpot_s",
            f(&i, "serving.static_batch.tpot_s"),
        ),
    ];
    for (scen, cmd, q, own) in cases {
        for (factor, code, verdict) in [(1.0, 0, "PASS"), (1.2, 1, "FAIL")] {
            let body = format!(
                "[[claim]]\nid = \"c\"\nscenario = {scen:?}\ncommand = \"{cmd}\"\nquantity = \"{q}\"\nclaimed = {:?}\nrel_tol = 0.01\n",
                own * factor
            );
            let p = s.write("own.toml", body);
            let args = ["check", "--json", p.as_str()];
            let (got, out, err) = run(&args);
            assert_eq!(got, code, "{q} × {factor}: {out}{err}");
            assert_eq!(parse(&args, &out)["claims"][0]["verdict"], verdict, "{q}");
        }
    }
}
