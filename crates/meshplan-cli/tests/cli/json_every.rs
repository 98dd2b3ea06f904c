//! `--json` of every command prints one JSON object, and `--json --explain`
//! (where the command has a derivation) one object with the derivation
//! under "derivation" (issue 12).

use crate::harness::{json, rejects};

const SUBSET: &str = "crates/meshplan-core/tests/fixtures/validation/playbook_subset.csv";

/// Every command with the arguments of a quick run, and whether it has a
/// derivation that `--explain` adds.
const COMMANDS: &[(&[&str], bool)] = &[
    (&["model", "list"], false),
    (&["hw", "list"], false),
    (&["model", "show", "llama-2-7b"], true),
    (&["hw", "show", "h100"], true),
    (
        &[
            "train",
            "--model",
            "llama-2-7b",
            "--hw",
            "h100",
            "--chips",
            "8",
        ],
        true,
    ),
    (&["train", "examples/llama-2-13b-v5p.toml"], true),
    (
        &[
            "infer",
            "--model",
            "llama-2-7b",
            "--hw",
            "h100",
            "--chips",
            "8",
        ],
        true,
    ),
    (&["infer", "examples/infer/ch7-q2.toml"], true),
    (
        &[
            "plan",
            "train",
            "--model",
            "llama-2-7b",
            "--hw",
            "h100",
            "--chips",
            "8",
            "--batch-tokens",
            "1M",
            "--seq-len",
            "4096",
        ],
        true,
    ),
    (
        &[
            "plan",
            "infer",
            "--model",
            "llama-2-7b",
            "--hw",
            "h100",
            "--chips",
            "8",
        ],
        true,
    ),
    (&["check", "examples/book/ch5.toml"], false),
    (&["validate", SUBSET], false),
    (
        &[
            "calibrate",
            SUBSET,
            "--chip",
            "h100",
            "--iters",
            "5",
            "--bootstrap",
            "2",
        ],
        false,
    ),
];

#[test]
fn every_command_prints_one_json_object() {
    for (args, derivation) in COMMANDS {
        let mut a = args.to_vec();
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
                if *d {
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
