//! One FLOP accounting: the same model and plan give the same MFU in
//! `train`, `plan train` and `validate` for the same named convention
//! (issue 11), and the conventions differ the way they are defined.

use meshplan_core::fidelity::data::parse_playbook_csv;
use meshplan_core::fidelity::stats::compare;
use meshplan_core::fidelity::{with_chips, EfficiencyProfile};
use meshplan_core::mesh::{Degrees, Topology};
use meshplan_core::model::ModelSpec;
use meshplan_core::parallelism::{FlopConvention, Framework, Remat, TrainConfig};
use meshplan_core::planner::TrainSearch;
use meshplan_core::step::predict::ActiveProfile;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::analyze_with;
use meshplan_core::Catalog;

const CSV: &str = include_str!("fixtures/validation/playbook_subset.csv");
const MODELS: &str = include_str!("fixtures/validation/playbook_models.toml");

/// The first Playbook row: 1B, 1 node, dp 8, tp 1, pp 1, ZeRO-0, micro-batch
/// 2 × 16 accumulation steps, 4,096-token sequences (nanotron, EFA).
#[test]
fn same_mfu_in_train_plan_and_validate() {
    let runs = parse_playbook_csv(CSV, MODELS).unwrap();
    let run = &runs[0];
    let c = run.config();
    assert_eq!(
        (
            c.degrees.data(),
            c.degrees.tp,
            c.degrees.pp,
            run.micro_batch_sequences(),
            c.microbatches
        ),
        (8, 1, 1, 2, 16)
    );
    let chip = Catalog::builtin().chip("h100").unwrap();
    // validate predicts the run with the profile of its cluster (the
    // Playbook's: nanotron's own GEMM efficiency and host terms)
    let base = EfficiencyProfile::builtin("h100")
        .unwrap()
        .for_run("efa", meshplan_core::fidelity::data::PLAYBOOK_CLUSTER);
    let rows = compare(&with_chips(std::slice::from_ref(run)), &|_| base.clone());
    let validate_mfu = rows[0].mfu_predicted;

    // the same run as a training configuration
    let spec = ModelSpec::custom("1B", run.arch().clone());
    let cfg = TrainConfig {
        batch_tokens: 2 * 16 * 8 * 4096,
        seq_len: 4096,
        degrees: Degrees {
            dp: 8,
            ..Degrees::default()
        },
        microbatches: 16,
        remat: Remat::None,
        framework: Framework::Nanotron,
        flops: FlopConvention::Nanotron,
        ..TrainConfig::default()
    };
    let prof = ActiveProfile {
        profile: base.clone(),
        origin: "test".into(),
        transferred_from: None,
    };
    let topo = Topology::gpus(8, 8);
    let r = analyze_with(&spec, chip, &topo, &cfg, Some(&prof), &mut NoTrace);
    let train_mfu = r.predicted.as_ref().expect("predicted").mfu;
    assert!(train_mfu > 0.2 && train_mfu < 0.6, "{train_mfu}");
    assert_eq!(train_mfu, validate_mfu, "train vs validate");

    // the planner's best plan has the MFU `train` and `validate` give it
    let mut s = TrainSearch::new(&spec, chip, topo.clone(), cfg);
    s.profile = Some(prof.clone());
    let res = s.run();
    let f = res.plans[0];
    let plan_mfu = f.pred.expect("predicted").mfu;
    let cfg_f = f.config(&cfg);
    let r = analyze_with(&spec, chip, &topo, &cfg_f, Some(&prof), &mut NoTrace);
    assert_eq!(r.predicted.unwrap().mfu, plan_mfu, "train vs plan train");
    let as_run = run.with_config(&cfg_f).unwrap();
    let rows = compare(&with_chips(std::slice::from_ref(&as_run)), &|_| {
        base.clone()
    });
    assert_eq!(rows[0].mfu_predicted, plan_mfu, "validate vs plan train");
}
