//! Snapshots (insta) of the human and the JSON output of every example
//! under examples/, run with its command: a change in any number, word or
//! layout shows up as a diff to review. Files in `snapshots/`; after an
//! intended change, rewrite them with `INSTA_UPDATE=always cargo test -p
//! meshplan-cli --test cli snapshots` (or `cargo insta review`) and read
//! the diff. On CI a mismatch fails the test.
//!
//! Only the search's wall time is volatile: it is redacted. JSON numbers
//! are rounded to 12 significant digits, so a last-bit difference of a
//! platform's `ln`/`exp` cannot fail a snapshot.

use std::path::Path;

use serde_json::Value;

use crate::harness::{assert_no_panic, parse, root, run};

/// The search's wall time in `searched … in 95.27 ms; …` → `[elapsed]`.
fn redact_text(out: &str) -> String {
    let mut s = String::with_capacity(out.len());
    for line in out.lines() {
        let elapsed = line
            .starts_with("searched ")
            .then(|| line.rfind(" in "))
            .flatten()
            .and_then(|i| line[i..].find(';').map(|j| (i + 4, i + j)));
        match elapsed {
            Some((a, b)) => s.push_str(&format!("{}[elapsed]{}", &line[..a], &line[b..])),
            None => s.push_str(line),
        }
        s.push('\n');
    }
    s
}

/// `search_time_s` → `"[elapsed]"`; floats to 12 significant digits.
fn redact_json(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "search_time_s" {
                    *x = Value::from("[elapsed]");
                } else {
                    redact_json(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_json),
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().expect("f64");
            let r: f64 = format!("{x:.11e}").parse().expect("float");
            *v = Value::from(r);
        }
        _ => {}
    }
}

/// Run `args` for the human output and again with `--json`; snapshot both
/// as `NAME.text` (exit code, stdout, stderr) and `NAME.json`.
fn snapshot(name: &str, args: &[&str]) {
    let (code, out, err) = run(args);
    assert_no_panic(args, &err);
    assert!(code == 0 || code == 1, "{args:?} exited {code}: {err}");
    let mut jargs = args.to_vec();
    jargs.push("--json");
    let (jcode, jout, jerr) = run(&jargs);
    assert_no_panic(&jargs, &jerr);
    assert_eq!(jcode, code, "{jargs:?}: same verdict as the human output");
    for text in [&out, &jout] {
        assert!(!text.contains("NaN") && !text.contains("inf "), "{text}");
    }
    let mut text = format!("exit code {code}\n{}", redact_text(&out));
    // a search's progress lines come after 1 s: timing, not output
    let err: String = err
        .lines()
        .filter(|l| !l.starts_with("meshplan: search"))
        .map(|l| format!("{l}\n"))
        .collect();
    if !err.is_empty() {
        text.push_str(&format!("--- stderr\n{err}"));
    }
    let mut v = parse(&jargs, &jout);
    redact_json(&mut v);
    let json = serde_json::to_string_pretty(&v).expect("JSON");
    insta::with_settings!({
        description => format!("meshplan {}", args.join(" ")),
        omit_expression => true,
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!(format!("{name}.text"), text);
        insta::assert_snapshot!(format!("{name}.json"), json);
    });
}

/// The `.toml` files of an examples/ directory, sorted (a new example gets a
/// snapshot without touching this file).
fn examples(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| format!("{dir}/{}", p.file_name().unwrap().to_str().unwrap()))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no examples in {dir}");
    v
}

/// `examples/train/x.toml` → `x`.
fn stem(path: &str) -> &str {
    Path::new(path).file_stem().unwrap().to_str().unwrap()
}

#[test]
fn train_examples() {
    for f in examples("examples/train") {
        snapshot(&format!("train-{}", stem(&f)), &["train", &f]);
    }
}

#[test]
fn infer_examples() {
    for f in examples("examples/infer") {
        snapshot(&format!("infer-{}", stem(&f)), &["infer", &f]);
    }
}

/// `plan infer` for a scenario with an `[inference]` section, else `plan train`.
#[test]
fn plan_examples() {
    for f in examples("examples/plan") {
        let src = std::fs::read_to_string(root().join(&f)).unwrap();
        let what = if src.lines().any(|l| l.trim() == "[inference]") {
            "infer"
        } else {
            "train"
        };
        snapshot(&format!("plan-{what}-{}", stem(&f)), &["plan", what, &f]);
    }
}

#[test]
fn model_examples() {
    for f in [
        "examples/custom-model.toml",
        "examples/llama-2-13b-v5p.toml",
    ] {
        snapshot(&format!("model-show-{}", stem(f)), &["model", "show", f]);
    }
}

#[test]
fn claims_examples() {
    for dir in ["examples/claims", "examples/book", "examples/playbook"] {
        for f in examples(dir) {
            let group = dir.trim_start_matches("examples/");
            snapshot(&format!("check-{group}-{}", stem(&f)), &["check", &f]);
        }
    }
}
