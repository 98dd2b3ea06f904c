//! `--json` of every command prints one JSON object, and `--json --explain`
//! (where the command has a derivation) one object with the derivation
//! under "derivation" (issue 12).

use crate::harness::{cmd, json, rejects, CALIBRATE_QUICK, L7B_H100X8, SUBSET, WORKLOAD_1M};

/// Every command with the arguments of a quick run, and whether it has a
/// derivation that `--explain` adds.
fn commands() -> Vec<(Vec<&'static str>, bool)> {
    vec![
        (vec!["model", "list"], false),
        (vec!["hw", "list"], false),
        (vec!["model", "show", "llama-2-7b"], true),
        (vec!["hw", "show", "h100"], true),
        (cmd(&[&["train"], &L7B_H100X8]), true),
        (vec!["train", "examples/llama-2-13b-v5p.toml"], true),
        (cmd(&[&["infer"], &L7B_H100X8]), true),
        (vec!["infer", "examples/infer/ch7-q2.toml"], true),
        (cmd(&[&["plan", "train"], &L7B_H100X8, &WORKLOAD_1M]), true),
        (cmd(&[&["plan", "infer"], &L7B_H100X8]), true),
        (vec!["check", "examples/book/ch5.toml"], false),
        (vec!["validate", SUBSET], false),
        (cmd(&[&CALIBRATE_QUICK, &["--bootstrap", "2"]]), false),
    ]
}

#[test]
fn every_command_prints_one_json_object() {
    for (args, derivation) in commands() {
        let mut a = args.clone();
        a.push("--json");
        let v = json(&a);
        assert!(v.is_object(), "{a:?}: not an object");
        assert!(
            v.get("derivation").is_none(),
            "{a:?}: derivation without --explain"
        );
        match (args[0], derivation) {
            // no derivation: --explain is refused (validate) or not a flag (calibrate)
            ("validate" | "calibrate", _) => {
                a.push("--explain");
                rejects(&a, &["explain"]);
            }
            (_, d) => {
                a.push("--explain");
                let v = json(&a);
                assert!(v.is_object(), "{a:?}: not an object");
                if d {
                    let s = v
                        .get("derivation")
                        .unwrap_or_else(|| panic!("{a:?}: no derivation"));
                    assert!(
                        s.as_array().is_some_and(|s| !s.is_empty()),
                        "{a:?}: empty derivation"
                    );
                }
            }
        }
    }
}
