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

/// The building blocks (README tour), as command lines.
const BLOCKS: [&str; 4] = [
    "collective allgather_Y --array bf16[E_Y,F] --dims E=2048,F=8192 --mesh X=8,Y=4 --hw tpu-v5e@book",
    "roofline bf16[B,D]*bf16[D,F]->bf16[B,F] --dims B=256,D=8192,F=32768 --hw tpu-v5e@book",
    "shard int8[I_XY,J] --dims I=128,J=2048 --mesh X=2,Y=8,Z=2 --hw tpu-v5p@book",
    "mfu --model 37B --tokens 14.8T --chip-hours 2.79M --hw h800 --dtype fp8",
];

#[test]
fn building_blocks_print_one_json_object_under_every_explain_flag() {
    for line in BLOCKS {
        for extra in ["", "--explain", "--explain --explain-format markdown"] {
            let a: Vec<&str> = line
                .split_whitespace()
                .chain(["--json"])
                .chain(extra.split_whitespace())
                .collect();
            let v = json(&a);
            assert!(v.is_object(), "{a:?}: not an object");
            assert_eq!(v.get("derivation").is_some(), !extra.is_empty(), "{a:?}");
        }
    }
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
        match (args[0], args[1], derivation) {
            // no derivation: --explain is refused (validate, the lists) or
            // not a flag (calibrate)
            ("validate" | "calibrate", _, _) | (_, "list", _) => {
                a.push("--explain");
                rejects(&a, &["explain"]);
            }
            (_, _, d) => {
                a.push("--explain");
                let v = json(&a);
                assert!(v.is_object(), "{a:?}: not an object");
                // the derivation's format does not change the JSON (but
                // for the search's wall time)
                let mut md = a.clone();
                md.extend(["--explain-format", "markdown"]);
                let timeless = |mut v: serde_json::Value| {
                    v.as_object_mut().map(|o| o.remove("search_time_s"));
                    v
                };
                assert!(timeless(json(&md)) == timeless(v.clone()), "{md:?}");
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
