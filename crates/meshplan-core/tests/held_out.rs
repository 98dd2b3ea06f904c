//! Held-out (leave-one-source-out) checks, kept apart from the in-sample
//! regression ratchets of tests/fidelity.rs (issue 14): each source predicted
//! with parameters fitted on the other sources only. On the Playbook subset
//! (every 10th row) plus the published runs, so that the three fits run in a
//! debug test; the full-set figures are in docs/fidelity.md.
#![allow(clippy::print_stderr)] // the figures are the report (cargo test -- --nocapture)

use meshplan_core::fidelity::data::{parse_playbook_csv, parse_published_json};
use meshplan_core::fidelity::report::held_out;
use meshplan_core::fidelity::stats::compare;
use meshplan_core::fidelity::{with_chips, EfficiencyProfile};

const CSV: &str = include_str!("fixtures/validation/playbook_subset.csv");
const MODELS: &str = include_str!("fixtures/validation/playbook_models.toml");
const PUBLISHED: &str = include_str!("fixtures/validation/published_runs.json");

#[test]
fn leave_one_source_out_ratchet() {
    let mut runs = parse_playbook_csv(CSV, MODELS).unwrap();
    runs.extend(parse_published_json(PUBLISHED).unwrap().0);
    let rc = with_chips(&runs);
    let rows = compare(&rc, &|c| EfficiencyProfile::builtin(c).expect("profile"));
    let h = held_out(&rc, &rows, None, 200).expect("three sources");
    assert_eq!(h.folds.len(), 3);
    for f in &h.folds {
        // no fold sees its own source
        assert!(!f.trained_on.contains(&f.source), "{f:?}");
        eprintln!("{f:?}");
    }
    // the Playbook fold has no other run of its cluster: its cluster terms
    // and (no other memory data) its memory parameters stay at their priors
    let pb = h.folds.iter().find(|f| f.source == "playbook").unwrap();
    assert!(pb
        .at_prior
        .iter()
        .any(|(n, v)| n == "pp_stall_s" && *v == 0.0));
    assert!(pb.at_prior.iter().any(|(n, _)| n == "activation_scale"));
    let ho = &h.held_out;
    for (k, s) in &ho.by_source {
        eprintln!(
            "held-out {k}: median {:.3} p90 {:.3} (in-sample {:.3})",
            s.median, s.p90, h.in_sample.by_source[k].median
        );
    }
    eprintln!(
        "held-out pooled {:.3}, memory {:.3}",
        ho.pooled.median, ho.memory.median
    );
    // ratchets at today's held-out figures + margin (reached on this subset:
    // see the eprintln above; full set in docs/fidelity.md)
    // kor22 3.5 %, mcore24 4.5 %, playbook 60.8 %, pooled 53.0 %, memory 9.5 %
    // since the GEMM efficiency is the chip's microbenchmark curve times a
    // shared stack share, the nanotron host/DP terms are the Playbook
    // cluster's, and the TP overlap is each stack's own (not carried from
    // one source to another; a held-out source starts from none hidden):
    // on the full set mcore24 14.4 % → 5.5 %, kor22 4.1 % → 3.5 %,
    // Playbook 68.6 % → 63.2 %
    let lim = [("kor22", 0.04), ("mcore24", 0.055), ("playbook", 0.65)];
    for (k, l) in lim {
        let m = ho.by_source[k].median;
        assert!(m <= l, "held-out {k}: median {m}");
    }
    assert!(
        ho.pooled.median <= 0.56,
        "held-out pooled {}",
        ho.pooled.median
    );
    assert!(
        ho.memory.median <= 0.11,
        "held-out memory {}",
        ho.memory.median
    );
}
