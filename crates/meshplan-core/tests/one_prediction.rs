//! Issue 22: one prediction path. The predicted step time and the memory of
//! a plan are the same figure, to the last bit, whichever front end asks:
//! `train` (the core entry point the CLI, Python and the page call,
//! `training::analyze_with`), `plan train` (the search's own ranking figure
//! and its listed report), and `validate`/`calibrate` (a data-set row priced
//! through `Run::predict`), and `check` (the claim evaluator's report).

mod common;

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
        let spec = ModelSpec::custom(&r.model, r.arch().clone());
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
    for r in &runs {
        let back = Run::of_config(r.arch(), &r.config(), &r.chip).unwrap();
        let (b, c) = (back.config(), r.config());
        assert_eq!(
            (b.degrees, b.zero, back.micro_batch_sequences()),
            (c.degrees, c.zero, r.micro_batch_sequences()),
            "{}",
            r.id
        );
        assert_eq!(
            (b.microbatches, b.seq_len, back.n_gpus()),
            (c.microbatches, c.seq_len, r.n_gpus()),
            "{}",
            r.id
        );
    }
}

/// The training scenarios shipped under examples/ (the ones `train` and
/// `plan train` take: a batch and a chip): scenario files, and the
/// scenarios of the claims files (the book's chapters, the seeds).
fn training_scenarios() -> Vec<(String, Scenario)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut out = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(root)];
    let trains = |sc: &Scenario| sc.training.batch_tokens.is_some() && sc.hardware.chip.is_some();
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            if p.extension().map_or(true, |x| x != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let name = p.display().to_string();
            if text.contains("[[claim]]") {
                let file = common::claims_file(&p);
                for (k, sc) in file.scenarios {
                    if trains(&sc) {
                        out.push((format!("{name} [{k}]"), sc));
                    }
                }
            } else if let Ok(sc) = Scenario::parse(&text, &name) {
                if trains(&sc) {
                    out.push((name, sc));
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// For every training scenario under examples/: `train`'s predicted step
/// time and memory equal `check`'s values for the same keys, and for the
/// plans `plan train` lists, the search's own ranking figure equals
/// `train`'s for the same plan.
#[test]
fn every_example_scenario_train_equals_plan_train() {
    let cat = Catalog::builtin();
    let scenarios = training_scenarios();
    assert!(scenarios.len() >= 5, "{}", scenarios.len());
    let (mut plans_checked, mut predicted) = (0, 0);
    for (name, sc) in &scenarios {
        let Ok(setup) = resolve_with(sc, cat, None) else {
            continue;
        };
        let r = setup.analyze(&mut NoTrace);
        // `train` on the scenario's own plan, twice: deterministic
        let again = setup.analyze(&mut NoTrace);
        assert_eq!(r.predicted, again.predicted, "{name}");
        // `check`'s figure for the same key: the claim evaluator's report
        let (v, _) = meshplan_core::check::eval::evaluate(
            meshplan_core::check::eval::Command::Train,
            sc,
            cat,
            &Default::default(),
            false,
        )
        .unwrap();
        let checked = meshplan_core::check::eval::lookup(&v, "predicted.step_time_s");
        let train = r.predicted.as_ref().map(|p| p.step_time_s.get());
        assert_eq!(checked.and_then(|x| x.as_f64()), train, "{name}: check");
        predicted += usize::from(train.is_some());
        let mem = meshplan_core::check::eval::lookup(&v, "memory_per_device.total_bytes");
        assert_eq!(
            mem.and_then(|x| x.as_f64()),
            Some(r.memory_per_device.total_bytes.get()),
            "{name}: check memory"
        );
        // the searches of the scenario files (the claims files' scenarios
        // are the book's questions, each a plan of its own: searching them
        // all would take minutes in a debug build)
        if name.contains(" [") {
            continue;
        }
        let Ok(workload) = resolve_workload(sc, cat, None) else {
            continue;
        };
        let req = PlanTrainRequest {
            workload,
            objective: TrainObjective::Time,
            top: 3,
            threads: None,
            explain_rank: None,
            cancel: None,
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
    assert!(predicted >= 3, "{predicted} scenarios predicted");
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
    let run = Run::of_config(&spec.arch, &cfg, "h100").unwrap();
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

/// How the data ranks split between dp and fsdp (issue 22: the planner
/// listed exact ties). With fsdp > 1 the plan is ZeRO-3 over every data
/// rank when dp = 1 or zero = 3: the search lists it once, as dp 1 ×
/// fsdp N with zero 3, and with dp > 1 only hybrid sharding (zero ≤ 2).
/// On 64 H100 (llama-3-8b, 4Mi tokens) the hybrid plans differ from one
/// another: fsdp 32 × dp 2 at zero 2 moves (2−1)/2 of a 1/32 shard of the
/// gradients across the replicas, fsdp 2 × dp 32 (32−1)/32 of a 1/2 shard.
#[test]
fn the_dp_fsdp_split_is_one_plan_per_behaviour() {
    use meshplan_core::planner::TrainSearch;
    let cat = Catalog::builtin();
    let spec = cat.model("llama-3-8b").unwrap();
    let chip = cat.chip("h100").unwrap();
    let base = meshplan_core::training::TrainConfig {
        batch_tokens: 4 << 20,
        seq_len: 4096,
        framework: meshplan_core::training::Framework::Megatron,
        ..Default::default()
    };
    let topo = meshplan_core::mesh::Topology::gpus(64, 8);
    let mut s = TrainSearch::new(spec, chip, topo, base);
    // ZeRO-3 and fsdp lie outside the H100 profile's fitted ranges, so the
    // planner ranks those plans by t·p90·1.4 (docs/planner.md, "Ranking with
    // uncertainty"): keep enough plans to reach them
    s.top_k = 2000;
    let res = s.run();
    let mut zero3_fsdp = 0;
    for f in &res.plans {
        let (d, z) = (f.deg, f.choice.zero);
        assert!(
            !(d.fsdp > 1 && d.dp > 1 && z >= 3),
            "dp {} × fsdp {} zero 3 duplicates fsdp {}",
            d.dp,
            d.fsdp,
            d.data()
        );
        assert!(!(d.fsdp > 1 && d.dp == 1 && z != 3), "fsdp alone is zero 3");
        // ZeRO-3 over every data rank, written as fsdp or as dp with zero 3
        // (twins: the planner lists one of them, `tests/planner.rs`)
        if d.data() > 1
            && z == 3
            && d.tp == 1
            && d.pp == 1
            && f.choice.remat == meshplan_core::training::Remat::None
        {
            zero3_fsdp += 1;
        }
        // a hybrid plan's prediction is its own: the DP part shrinks with
        // the replicas' share of the shard
        if d.fsdp > 1 && d.dp > 1 {
            assert!(f.pred.is_some());
        }
    }
    assert!(zero3_fsdp >= 1);
    let inventory = |dp: u64, fsdp: u64| {
        let cfg = meshplan_core::training::TrainConfig {
            degrees: meshplan_core::mesh::Degrees {
                dp,
                fsdp,
                ..Default::default()
            },
            zero: 2,
            microbatches: 8,
            remat: meshplan_core::training::Remat::None,
            ..base
        };
        let prof = meshplan_core::step::predict::active_profile(chip, None)
            .unwrap()
            .unwrap();
        let topo = meshplan_core::mesh::Topology::gpus(64, 8);
        let r = analyze_with(spec, chip, &topo, &cfg, Some(&prof), &mut NoTrace);
        r.predicted.unwrap().inventory
    };
    // P = 8,030,261,248 parameters on every stage (tp = pp = 1), Megatron
    // reduces bf16 gradients (2 B). dp 2 × fsdp 32: the replicas
    // reduce-scatter (2−1)/2 · P/32 · 2 B = P/32 B; the shard group moves
    // (32−1)/32 · P · (2 + 2 + 2) B per micro-batch. dp 32 × fsdp 2:
    // (32−1)/32 · P/2 · 2 B = 31·P/32 B and (2−1)/2 · P · 6 B.
    let p = 8_030_261_248.0_f64;
    let rel = |a: f64, b: f64| (a - b).abs() / b;
    let (a, b) = (inventory(2, 32), inventory(32, 2));
    let dp = |i: &meshplan_core::step::inventory::StepInventory| i.dp.unwrap().bytes_per_call;
    let fsdp = |i: &meshplan_core::step::inventory::StepInventory| i.fsdp.unwrap().bytes_per_call;
    assert!(rel(dp(&a), p / 32.0) < 1e-12, "{}", dp(&a));
    assert!(rel(dp(&b), 31.0 * p / 32.0) < 1e-12, "{}", dp(&b));
    assert!(rel(fsdp(&a), 31.0 / 32.0 * p * 6.0) < 1e-12, "{}", fsdp(&a));
    assert!(rel(fsdp(&b), 0.5 * p * 6.0) < 1e-12, "{}", fsdp(&b));
    assert_eq!((a.dp.unwrap().ranks, b.dp.unwrap().ranks), (2, 32));
}

/// `plan train` = `train` under every framework (issue 22: the planner once
/// skipped the book → Megatron mapping and the etp and dtype checks that
/// `train` applies): llama-3-8b on 16 H100, the search's figure for each
/// listed plan equals `train`'s on that plan, to the last bit.
#[test]
fn plan_train_equals_train_under_every_framework() {
    use meshplan_core::planner::TrainSearch;
    use meshplan_core::training::Framework;
    let cat = Catalog::builtin();
    let spec = cat.model("llama-3-8b").unwrap();
    let chip = cat.chip("h100").unwrap();
    let topo = meshplan_core::mesh::Topology::gpus(16, 8);
    let prof = meshplan_core::step::predict::active_profile(chip, None)
        .unwrap()
        .unwrap();
    for fw in [
        Framework::Book,
        Framework::Megatron,
        Framework::Megatron2022,
        Framework::Nanotron,
        Framework::Maxtext,
    ] {
        let base = meshplan_core::training::TrainConfig {
            batch_tokens: 1 << 20,
            seq_len: 4096,
            framework: fw,
            ..Default::default()
        };
        let mut s = TrainSearch::new(spec, chip, topo.clone(), base);
        s.top_k = 4;
        s.profile = Some(prof.clone());
        let res = s.run();
        assert!(!res.plans.is_empty(), "{fw}");
        for f in &res.plans {
            let cfg = f.config(&base);
            let r = analyze_with(spec, chip, &topo, &cfg, Some(&prof), &mut NoTrace);
            let train = r.predicted.as_ref().map(|p| p.step_time_s.get());
            assert_eq!(f.pred.map(|p| p.step_time_s), train, "{fw}");
            assert_eq!(
                f.eval.memory.total_bytes, r.memory_per_device.total_bytes,
                "{fw}"
            );
        }
    }
}

/// `train --explain` derives the predicted step term by term: the
/// `train.predicted.step_time` step's terms add up to the report's
/// predicted step time (no floor, no offload on this plan), the bubble step
/// is (pp − 1)/v · T_mb with its own bindings, and the MFU step's result is
/// the report's.
#[test]
fn explain_derives_the_predicted_step() {
    use meshplan_core::trace::Recorder;
    let cat = Catalog::builtin();
    let text = include_str!("../../../examples/train/llama-3-8b-h100-3d.toml");
    let sc = Scenario::parse(text, "llama-3-8b-h100-3d.toml").unwrap();
    let mut rec = Recorder::default();
    let r = resolve_with(&sc, cat, None).unwrap().analyze(&mut rec);
    let p = r.predicted.as_ref().expect("predicted");
    let steps = rec.steps();
    let find = |id: &str| {
        steps
            .iter()
            .find(|s| s.id == id)
            .unwrap_or_else(|| panic!("no step {id}"))
    };
    let bind = |s: &meshplan_core::trace::Step, k: &str| {
        s.bindings
            .iter()
            .find(|b| b.symbol == k)
            .map(|b| b.value)
            .unwrap()
    };
    let st = find("train.predicted.step_time");
    assert_eq!(st.value, p.step_time_s.get());
    let terms = [
        "T_mm",
        "T_attn",
        "T_ew",
        "T_TP",
        "T_CP",
        "T_EP",
        "T_PP",
        "T_bubble",
        "T_DP",
        "T_opt",
        "T_overhead",
    ];
    let sum: f64 = terms.iter().map(|k| bind(st, k)).sum();
    assert!(
        (sum - st.value).abs() / st.value < 1e-12,
        "{sum} vs {}",
        st.value
    );
    let b = find("train.predicted.bubble");
    let (pp, v, t_mb) = (bind(b, "pp"), bind(b, "v"), bind(b, "T_mb"));
    assert!((b.value - (pp - 1.0) / v * t_mb).abs() <= 1e-12 * b.value);
    assert_eq!(b.value, p.time_breakdown_s.bubble);
    assert_eq!(find("train.predicted.mfu").value, p.mfu);
}
