//! Issue 14: the published Megatron runs (kor22 on A100, mcore24 on H100)
//! predicted through `train` — the core entry point the CLI's `train` calls
//! (`training::analyze_with` with the chip's built-in active profile) — not
//! only through `validate`, with the median |step-time error| reported and
//! the two evaluators compared run by run.
#![allow(clippy::print_stderr)] // the figures are the report (cargo test -- --nocapture)

use meshplan_core::fidelity::data::{parse_published_json, Run};
use meshplan_core::fidelity::stats::{compare, quantile};
use meshplan_core::fidelity::{with_chips, EfficiencyProfile};
use meshplan_core::mesh::{Degrees, Topology};
use meshplan_core::model::ModelSpec;
use meshplan_core::parallelism::{FlopConvention, TrainConfig};
use meshplan_core::step::predict::active_profile;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::analyze_with;
use meshplan_core::Catalog;

const PUBLISHED: &str = include_str!("fixtures/validation/published_runs.json");

/// The run as a `train` scenario: the same model, batch, degrees,
/// micro-batches, ZeRO stage, recompute, sequence parallelism, schedule and
/// framework.
fn as_train(r: &Run) -> (ModelSpec, TrainConfig, Topology) {
    // the row's figures, read one by one (not its whole `config()`)
    let s = r.config();
    let cfg = TrainConfig {
        batch_tokens: s.batch_tokens,
        seq_len: s.seq_len,
        degrees: Degrees {
            dp: s.degrees.data(),
            tp: s.degrees.tp,
            pp: s.degrees.pp,
            cp: s.degrees.cp,
            ..Degrees::default()
        },
        microbatches: s.microbatches,
        zero: s.zero,
        remat: s.remat,
        sequence_parallel: s.sequence_parallel,
        schedule: s.schedule,
        virtual_stages: s.virtual_stages,
        framework: s.framework,
        flops: FlopConvention::Megatron,
        ..TrainConfig::default()
    };
    (
        ModelSpec::custom(&r.model, r.arch().clone()),
        cfg,
        Topology::gpus(r.n_gpus(), 8),
    )
}

#[test]
fn published_runs_through_train() {
    let (runs, _) = parse_published_json(PUBLISHED).unwrap();
    let cat = Catalog::builtin();
    let rows = compare(&with_chips(&runs), &|c| {
        EfficiencyProfile::builtin(c).expect("profile")
    });
    let mut train_err = Vec::new();
    let mut report = Vec::new();
    for (r, row) in runs.iter().zip(&rows) {
        let chip = cat.chip(&r.chip).unwrap();
        let prof = active_profile(chip, None)
            .unwrap()
            .expect("a built-in profile");
        let (spec, cfg, topo) = as_train(r);
        let rep = analyze_with(&spec, chip, &topo, &cfg, Some(&prof), &mut NoTrace);
        let p = rep
            .predicted
            .as_ref()
            .unwrap_or_else(|| panic!("{}: {:?}", r.id, rep.prediction_note));
        let meas = r.step_time_s.unwrap();
        let t = p.step_time_s.get();
        let e = t / meas - 1.0;
        train_err.push(e.abs());
        report.push(format!(
            "{}: measured {meas:.3} s, train {t:.3} s ({:+.1} %), validate {:.3} s; floor raise {:.3} s",
            r.id,
            100.0 * e,
            row.step_predicted_s,
            p.time_breakdown_s.floor_raise
        ));
        // one evaluator: train's step is validate's, held at the roofline
        // floor when that binds (validate has no floor)
        let unfloored = t - p.time_breakdown_s.floor_raise;
        assert!(
            (unfloored / row.step_predicted_s - 1.0).abs() < 1e-9,
            "{}",
            report.last().unwrap()
        );
    }
    let median = quantile(&mut train_err, 0.5);
    eprintln!(
        "{}\nmedian |error| through train: {:.1} %",
        report.join("\n"),
        100.0 * median
    );
    // issue 14 target: ≤ 8 %; reached 5.5 %, the same runs through validate
    // give the same predictions (one evaluator; no floor binds). In-sample
    // profiles: the mcore24 values were fitted on these runs, kor22 only
    // validates; held out, validate gives kor22 4.1 % and mcore24 14.4 %.
    assert!(median <= 0.08, "median {median}");
}
