//! Issue 22: one prediction path. The predicted step time and the memory of
//! a plan are the same figure, to the last bit, whichever front end asks:
//! `train` (the core entry point the CLI, Python and the page call,
//! `training::analyze_with`), `plan train` (the search's own ranking figure
//! and its listed report), and `validate`/`calibrate` (a data-set row priced
//! through `Run::predict`). `check`'s figure for the same key is tested in
//! check_examples.rs (it evaluates `train` through `TrainSetup::analyze`).

use meshplan_core::fidelity::data::{parse_playbook_csv, parse_published_json, Run};
use meshplan_core::fidelity::stats::compare;
use meshplan_core::fidelity::{with_chips, EfficiencyProfile};
use meshplan_core::model::ModelSpec;
use meshplan_core::planner::{plan_train, PlanTrainRequest, TrainObjective};
use meshplan_core::scenario::Scenario;
use meshplan_core::step::predict::ActiveProfile;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::analyze_with;
use meshplan_core::training::scenario::{resolve_with, resolve_workload};
use meshplan_core::Catalog;

const FULL: &str = include_str!("fixtures/validation/playbook_h100_runs.csv");
const MODELS: &str = include_str!("fixtures/validation/playbook_models.toml");
const PUBLISHED: &str = include_str!("fixtures/validation/published_runs.json");

/// Every run of the validation data (the fixtures are byte copies of
/// ../shared/validation, checked by fitted_ranges.rs): `validate`'s figures
/// equal `train`'s on the row's configuration with the same profile.
#[test]
fn every_validation_run_train_equals_validate() {
    let mut runs = parse_playbook_csv(FULL, MODELS).unwrap();
    runs.extend(parse_published_json(PUBLISHED).unwrap().0);
    let profile_for = |c: &str| EfficiencyProfile::builtin(c).expect("a fitted profile");
    let rc = with_chips(&runs);
    let rows = compare(&rc, &profile_for);
    let (mut checked, mut not_predicted) = (0, Vec::new());
    for ((r, chip), row) in rc.iter().zip(&rows) {
        let profile = profile_for(&r.chip).for_run(&r.network, &r.cluster);
        let prof = ActiveProfile {
            profile,
            origin: "the run's profile".into(),
            transferred_from: None,
        };
        let spec = ModelSpec::custom(&r.model, r.spec.arch.clone());
        let rep = analyze_with(
            &spec,
            chip,
            &r.topology(chip),
            &r.config(),
            Some(&prof),
            &mut NoTrace,
        );
        let mem = rep.memory_per_device.total_bytes.gb();
        assert_eq!(mem, row.mem_predicted_gb, "{}: memory", r.id);
        match &rep.predicted {
            Some(p) => {
                assert_eq!(p.step_time_s.get(), row.step_predicted_s, "{}: step", r.id);
                checked += 1;
            }
            None => not_predicted.push(format!("{} ({}): {:?}", r.id, r.completed, rep.reasons)),
        }
    }
    // `train` predicts every row validate predicts (none is infeasible)
    assert!(not_predicted.is_empty(), "{not_predicted:#?}");
    assert_eq!(checked, runs.len());
}

/// A row maps onto `train`'s configuration and back onto the same replica.
#[test]
fn rows_round_trip_through_the_train_configuration() {
    let mut runs = parse_playbook_csv(FULL, MODELS).unwrap();
    runs.extend(parse_published_json(PUBLISHED).unwrap().0);
    let cat = Catalog::builtin();
    for r in &runs {
        let chip = cat.chip(&r.chip).unwrap();
        let back = &r.prepared(chip).rs;
        assert_eq!(
            (back.dp, back.tp, back.pp, back.cp, back.zero, back.mbs),
            (
                r.spec.dp,
                r.spec.tp,
                r.spec.pp,
                r.spec.cp,
                r.spec.zero,
                r.spec.mbs
            ),
            "{}",
            r.id
        );
        assert_eq!(
            (back.grad_acc, back.seq_len, back.n_gpus),
            (r.spec.grad_acc, r.spec.seq_len, r.spec.n_gpus),
            "{}",
            r.id
        );
    }
}

/// The training scenarios shipped under examples/ (the ones `train` and
/// `plan train` take: a [training] section and a placeable mesh).
fn training_scenarios() -> Vec<(String, Scenario)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut out = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(root)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&p).unwrap();
                let name = p.display().to_string();
                let Ok(sc) = Scenario::parse(&text, &name) else {
                    continue;
                };
                if text.contains("[training]") && sc.hardware.chip.is_some() {
                    out.push((name, sc));
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// For every training scenario under examples/: `train`'s predicted step
/// time and memory, and for the plans `plan train` lists, the search's own
/// ranking figure equals `train`'s for the same plan.
#[test]
fn every_example_scenario_train_equals_plan_train() {
    let cat = Catalog::builtin();
    let scenarios = training_scenarios();
    assert!(scenarios.len() >= 5, "{}", scenarios.len());
    let mut plans_checked = 0;
    for (name, sc) in &scenarios {
        let Ok(setup) = resolve_with(sc, cat, None) else {
            continue;
        };
        let r = setup.analyze(&mut NoTrace);
        // `train` on the scenario's own plan, twice: deterministic
        let again = setup.analyze(&mut NoTrace);
        assert_eq!(r.predicted, again.predicted, "{name}");
        let req = PlanTrainRequest {
            workload: resolve_workload(sc, cat, None).unwrap(),
            objective: TrainObjective::Time,
            top: 3,
            threads: Some(1),
            explain_rank: None,
        };
        let plan = plan_train(&req, &|_, _| {}).unwrap();
        for e in &plan.plans {
            let train = e.report.predicted.as_ref().map(|p| p.step_time_s.get());
            assert_eq!(
                e.predicted_step_time_s, train,
                "{name}: plan {} ranked by {:?}, train gives {:?}",
                e.rank, e.predicted_step_time_s, train
            );
            plans_checked += 1;
        }
    }
    assert!(plans_checked >= 5, "{plans_checked}");
}

/// The README's training example (91.55 sequences of 32k over 1,024 FSDP
/// ranks): the roofline splits tokens, a framework splits whole sequences,
/// so no prediction is made and the note says why and what would fix it
/// (⌈3,000,000/32,768⌉ = 92 sequences; 1,024 − 92 = 932 idle ranks;
/// ⌈1,024/92⌉ = 12-way context parallelism).
#[test]
fn readme_example_fewer_sequences_than_data_ranks() {
    let cat = Catalog::builtin();
    let text = include_str!("../../../examples/train/ch5-q3-fsdp-tp.toml");
    let sc = Scenario::parse(text, "ch5-q3-fsdp-tp.toml").unwrap();
    let r = resolve_with(&sc, cat, None).unwrap().analyze(&mut NoTrace);
    assert!(r.predicted.is_none());
    let note = r.prediction_note.unwrap();
    for part in [
        "92 sequences over 1024 data-parallel ranks",
        "932 ranks would hold none",
        "at most 92 data-parallel ranks",
        "at least 1024 sequences",
        "at least 12 of the data-parallel ranks",
    ] {
        assert!(note.contains(part), "{part}: {note}");
    }
    // the roofline is unchanged: the book's 124.6 ms of T_math
    assert!(
        (r.t_math_s.get() - 0.1246).abs() < 5e-4,
        "{}",
        r.t_math_s.get()
    );
    // with a batch of 1,024 whole sequences every rank has one: predicted
    let mut big = sc.clone();
    big.training.batch_tokens = Some(meshplan_core::scenario::Count(1024 * 32_768));
    let r = resolve_with(&big, cat, None).unwrap().analyze(&mut NoTrace);
    assert!(r.predicted.is_some(), "{:?}", r.prediction_note);
}

/// Runs of data sets parse into the configuration `train` takes: an etp = 1
/// MoE row's memory is the one `train` reports for it (the old RunSpec
/// adapter counted experts as split over tp).
#[test]
fn run_memory_is_train_memory_for_whole_experts() {
    let cat = Catalog::builtin();
    let chip = cat.chip("h100").unwrap();
    let spec = cat.model("mixtral-8x7b").unwrap();
    let cfg = meshplan_core::training::TrainConfig {
        batch_tokens: 64 * 4096,
        seq_len: 4096,
        degrees: meshplan_core::mesh::Degrees {
            dp: 8,
            tp: 8,
            ep: 8,
            etp: 1,
            ..Default::default()
        },
        framework: meshplan_core::training::Framework::Megatron,
        microbatches: 8,
        sequence_parallel: true,
        zero: 1,
        ..Default::default()
    };
    let pc = meshplan_core::model::params::count(&spec.arch, &mut NoTrace);
    let rs = meshplan_core::parallelism::RunSpec::from_config(&spec.arch, pc, &cfg).unwrap();
    let run = Run::of_spec(rs, "h100");
    let p = EfficiencyProfile::builtin("h100").unwrap();
    let prof = ActiveProfile {
        profile: p.clone(),
        origin: "test".into(),
        transferred_from: None,
    };
    let topo = run.topology(chip);
    let rep = analyze_with(spec, chip, &topo, &run.config(), Some(&prof), &mut NoTrace);
    let got = run.peak_memory(chip, &p);
    assert_eq!(got.total_bytes, rep.memory_per_device.total_bytes);
    // whole experts: each rank holds E/ep = 1 expert of 3·D·F_e = 176,160,768
    // parameters per layer, × 32 layers = 5.64e9 routed parameters, not
    // 5.64e9/tp: bf16 weights alone are > 11 GB
    assert!(got.params_bytes.get() > 11e9, "{}", got.params_bytes.get());
}

/// The roofline's collectives list and the step inventory count the same
/// TP collectives (issue 22: they disagreed for a shared-expert MoE with
/// whole experts). One micro-batch, pp 1, no recompute, SP: per layer
/// 2 (AG, RS) pairs forward and backward = 8 collectives; with whole experts
/// (etp = 1) a MoE layer's MLP pair goes (its tokens ride the all-to-all)
/// unless a shared expert still runs tensor-parallel.
/// Mixtral-8x7B: 32 MoE layers, no shared expert → 8·32 − 4·32 = 128.
/// DeepSeek-V3: 61 layers, a shared expert → 8·61 = 488.
#[test]
fn roofline_and_inventory_count_the_same_tp_collectives() {
    let cat = Catalog::builtin();
    let chip = cat.chip("h100").unwrap();
    for (model, want) in [("mixtral-8x7b", 128.0), ("deepseek-v3", 488.0)] {
        let spec = cat.model(model).unwrap();
        let cfg = meshplan_core::training::TrainConfig {
            batch_tokens: 8 * 4096,
            seq_len: 4096,
            degrees: meshplan_core::mesh::Degrees {
                dp: 4,
                tp: 2,
                ep: 8,
                etp: 1,
                ..Default::default()
            },
            framework: meshplan_core::training::Framework::Megatron,
            remat: meshplan_core::training::Remat::None,
            sequence_parallel: true,
            ..Default::default()
        };
        let topo = meshplan_core::mesh::Topology::gpus(8, 8);
        let prof = meshplan_core::step::predict::active_profile(chip, None)
            .unwrap()
            .unwrap();
        let r = analyze_with(spec, chip, &topo, &cfg, Some(&prof), &mut NoTrace);
        let roofline: u64 = r
            .comms
            .iter()
            .filter(|c| c.axis == meshplan_core::parallelism::LogicalAxis::Tp)
            .map(|c| c.count)
            .sum();
        let p = r
            .predicted
            .as_ref()
            .unwrap_or_else(|| panic!("{model}: {:?}", r.prediction_note));
        let inv = &p.inventory;
        let layers = spec.arch.n_layers as f64;
        let inventory = inv.tp.unwrap().calls * layers * inv.microbatches as f64;
        assert_eq!(roofline as f64, want, "{model}: roofline");
        assert!(
            (inventory - want).abs() < 1e-9,
            "{model}: inventory {inventory}"
        );
    }
}
