//! Every shipped claims file, every verdict: a formula regression flips a
//! PASS into a FAIL here. When `train`/`infer` are wired into check, the
//! CANNOT-CHECK entries below become the verdicts in the claims' notes.

use std::path::{Path, PathBuf};

use meshplan_core::check::{check, parse_claims, Verdict};
use meshplan_core::Catalog;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(rel: &str) -> Vec<(String, Verdict)> {
    let path = root().join(rel);
    let src = std::fs::read_to_string(&path).unwrap();
    let dir = path.parent().unwrap().to_path_buf();
    let mut resolve = |p: &str| {
        let f = dir.join(p);
        std::fs::read_to_string(&f)
            .map(|t| (f.display().to_string(), t))
            .map_err(|e| e.to_string())
    };
    let f = parse_claims(&src, rel, &mut resolve).unwrap_or_else(|e| panic!("{e}"));
    let r = check(&f, Catalog::builtin(), true).unwrap_or_else(|e| panic!("{e}"));
    r.claims.into_iter().map(|c| (c.id, c.verdict)).collect()
}

fn assert_verdicts(rel: &str, expected: &[(&str, Verdict)]) {
    let got = run(rel);
    let ids: Vec<&str> = got.iter().map(|(i, _)| i.as_str()).collect();
    let want: Vec<&str> = expected.iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, want, "{rel}: claim ids changed");
    for ((id, v), (_, w)) in got.iter().zip(expected) {
        assert_eq!(v, w, "{rel}: claim {id}");
    }
}

use Verdict::{CannotCheck as CC, Fail as F, Pass as P};

#[test]
fn seed_000_ch5() {
    assert_verdicts(
        "examples/claims/seed-000-ch5.toml",
        &[
            ("ex1-params", P),
            ("ex1-params-approx", P),
            ("ex2-param-bytes", CC),
            ("ex2-optimizer-bytes", CC),
            ("ex2-activations", CC),
            ("ex3-hbm", P),
            ("ex3-peak", P),
            ("ex3-w-ici", P),
            ("ex3-alpha", P),
            ("ex3.1-pure-dp", CC),
            ("ex3.1-dp-lower-bound", CC),
            ("ex3.2-params-per-device", CC),
            ("ex3.2-state-bytes", CC),
            ("ex3.2-activations", CC),
            ("ex3.2-activations-sum", CC),
            ("ex3.2-fsdp-max-chips", CC),
            ("ex3.2-slice-chips", CC),
            ("ex3.2-fsdp-bound", CC),
            ("ex3.3-x-opt", CC),
            ("ex3.3-x-chosen", CC),
            ("ex3.3-y-chosen", CC),
            ("ex3.3-batch-per-chip", CC),
            ("ex3.3-min-batch", CC),
            ("ex3.3-bound", CC),
            ("ex3.3-step-time", CC),
        ],
    );
}

#[test]
fn seed_002_ch7() {
    assert_verdicts(
        "examples/claims/seed-002-ch7.toml",
        &[
            ("q1-params", F),
            ("q1-params-approx", P),
            ("q1-kv-int8", P),
            ("q1-kv-int8-approx", P),
            ("q2-hbm", P),
            ("q2-max-batch-exact", CC),
            ("q2-max-batch", CC),
            ("q2-max-batch-k1", CC),
            ("q3-hbm-bw", P),
            ("q3-load-time", CC),
            ("q4-w-ici", P),
            ("q4-c-int8", P),
            ("q4-tp-limit-prefill", CC),
            ("q4-tp-limit-generate", CC),
            ("q4-step-time", CC),
            ("q5-params-total", P),
            ("q5-params-active", P),
            ("q5-kv-unchanged", P),
            ("q5-forward-flops", F),
            ("q6-weights-per-device", CC),
            ("q6-load-time", CC),
            ("q6-free-hbm", CC),
            ("q6-min-slice", CC),
        ],
    );
}

#[test]
fn playbook_seed_003() {
    assert_verdicts(
        "examples/playbook/seed-003.toml",
        &[
            ("a3-flops-per-layer-gated", P),
            ("a3-flops-per-layer-plain", P),
            ("a3-flops-per-layer-claimed-32-for-plain", F),
            ("a2-optimizer-bytes-per-param-errata", CC),
            ("a2-optimizer-bytes-per-param-playbook", CC),
        ],
    );
}

/// The book files: every claim checkable now passes; the others await train/infer.
#[test]
fn book_chapters() {
    for rel in ["examples/book/ch5.toml", "examples/book/ch7.toml"] {
        let got = run(rel);
        assert!(!got.is_empty());
        for (id, v) in &got {
            assert_ne!(*v, F, "{rel}: {id} fails");
        }
        let pass = got.iter().filter(|(_, v)| *v == P).count();
        let want = if rel.contains("ch5") { 6 } else { 7 };
        assert_eq!(pass, want, "{rel}: PASS count");
    }
}

#[test]
fn every_example_parses() {
    for dir in ["examples/claims", "examples/book", "examples/playbook"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml") {
                let rel = p
                    .strip_prefix(root())
                    .unwrap_or(Path::new(""))
                    .display()
                    .to_string();
                let _ = run(&rel);
            }
        }
    }
}
