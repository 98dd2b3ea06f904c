//! The calibrated range of the built-in profiles (`[fitted_on]` in
//! data/profiles/*.toml) is exactly what `FittedRanges::of_runs` derives
//! from the runs each profile was fitted on (the validation files, copied
//! from ../shared/validation into tests/fixtures/validation), and the check
//! names every input outside it.

use meshplan_core::fidelity::data::{parse_playbook_csv, parse_published_json, Run};
use meshplan_core::fidelity::range::FittedRanges;
use meshplan_core::fidelity::EfficiencyProfile;
use meshplan_core::parallelism::{Framework, TrainConfig};
use meshplan_core::units::DType;
use meshplan_core::Catalog;

const FULL: &str = include_str!("fixtures/validation/playbook_h100_runs.csv");
const MODELS: &str = include_str!("fixtures/validation/playbook_models.toml");
const PUBLISHED: &str = include_str!("fixtures/validation/published_runs.json");

/// The clean Playbook runs (the H100 fit: 1,716 runs).
fn playbook() -> Vec<Run> {
    parse_playbook_csv(FULL, MODELS)
        .unwrap()
        .into_iter()
        .filter(|r| r.clean)
        .collect()
}

/// The Megatron-Core 2024 runs with a time (the InfiniBand sub-profile's fit).
fn mcore24() -> Vec<Run> {
    parse_published_json(PUBLISHED)
        .unwrap()
        .0
        .into_iter()
        .filter(|r| r.source == "mcore24" && r.clean)
        .collect()
}

fn ranges(runs: &[Run]) -> FittedRanges {
    let refs: Vec<&Run> = runs.iter().collect();
    FittedRanges::of_runs(&refs).expect("runs")
}

/// A change to one input of a run's configuration.
type Edit = fn(&mut TrainConfig);

fn builtin(chip: &str) -> EfficiencyProfile {
    EfficiencyProfile::builtin(chip).expect("built-in profile")
}

#[test]
fn builtin_ranges_are_derived_from_the_fitting_data() {
    let pb = playbook();
    assert_eq!(pb.len(), 1716);
    // the base H100 profile (EFA): the Playbook fit
    assert_eq!(builtin("h100").fitted_on, Some(ranges(&pb)));
    // its InfiniBand sub-profile: the Playbook compute fit plus the 9
    // Megatron-Core runs its overrides were fitted on
    let both: Vec<Run> = pb.iter().cloned().chain(mcore24()).collect();
    assert_eq!(mcore24().len(), 9);
    let ib = builtin("h100").for_network("infiniband");
    assert_eq!(ib.fitted_on, Some(ranges(&both)));
    assert_eq!(ranges(&pb).union(&ranges(&mcore24())), ranges(&both));
    // the A100 profile reuses the H100 fit (no A100 run was fitted)
    assert_eq!(builtin("a100-80gb").fitted_on, Some(ranges(&pb)));
}

#[test]
fn ranges_read_off_the_data() {
    // independent of of_runs: the Playbook's README states sequence 4096,
    // ZeRO 0/1, 1-64 nodes, nanotron, H100, and its model table 1B-80B
    let r = ranges(&playbook());
    assert_eq!(r.seq_len, [4096, 4096]);
    assert_eq!(r.zero, [0, 1]);
    assert_eq!(r.nodes, [1, 64]);
    assert_eq!((r.cp, r.ep, r.fsdp), ([1, 1], [1, 1], [1, 1]));
    assert_eq!(r.framework, ["nanotron"]);
    assert_eq!(r.chip, ["h100"]);
    assert_eq!(r.dtype, ["bf16"]);
    assert!(r.params[0] > 1.0e9 && r.params[0] < 1.5e9, "{:?}", r.params);
    assert!(r.params[1] > 79e9 && r.params[1] < 81e9, "{:?}", r.params);
    // DP·PP·TP = 8·nodes: the largest of each is the whole 64-node job or less
    assert!(r.dp[1] <= 512 && r.tp[1] <= 512 && r.pp[1] <= 512);
}

#[test]
fn every_fitted_run_is_inside_and_each_input_is_named_when_outside() {
    let pb = playbook();
    let r = ranges(&pb);
    let h100 = Catalog::builtin().chip("h100").unwrap();
    for run in &pb {
        let o = r.outside_run(run, h100, DType::Bf16);
        assert!(o.is_empty(), "{}: {o:?}", run.id);
    }
    // one input at a time moved outside its range is named, alone
    // the first row: 1B, dp 8, 2 × 16 micro-batches of 4,096 tokens
    let run = &pb[0];
    let base = run.config();
    let named_run = |x: &Run, chip: &str, dt: DType| {
        let c = Catalog::builtin().chip(chip).unwrap();
        r.outside_run(x, c, dt)
            .into_iter()
            .map(|o| o.input)
            .collect::<Vec<_>>()
    };
    let named = |c: &TrainConfig, chip: &str, dt: DType| {
        named_run(&run.with_config(c).expect("maps"), chip, dt)
    };
    let mut s = base;
    s.seq_len = 8192;
    assert_eq!(named(&s, "h100", DType::Bf16), ["sequence length"]);
    let mut s = base;
    s.zero = 2;
    assert_eq!(named(&s, "h100", DType::Bf16), ["ZeRO stage"]);
    let one_degree: [(Edit, &str); 6] = [
        (|s| s.degrees.cp = 2, "cp"),
        (|s| s.degrees.ep = 2, "ep"),
        // dp·fsdp = 16 ranks, ZeRO-3 in groups of 8, replicated over 2
        (|s| (s.degrees.dp, s.degrees.fsdp) = (2, 8), "fsdp"),
        (|s| s.degrees.tp = 64, "tp"),
        (|s| s.degrees.pp = 64, "pp"),
        // 512 replicas of the 256 sequences: one micro-batch each
        (|s| (s.degrees.dp, s.microbatches) = (512, 1), "dp"),
    ];
    for (set, name) in one_degree {
        let mut s = base;
        set(&mut s);
        assert_eq!(named(&s, "h100", DType::Bf16), [name]);
    }
    let mut s = base;
    s.framework = Framework::Megatron;
    assert_eq!(named(&s, "h100", DType::Bf16), ["framework"]);
    // 1,024 GPUs = 128 nodes of 8, each degree inside its range (dp 256 of
    // the 256 sequences: one micro-batch of one each, tp 4)
    let mut s = base;
    (s.degrees.dp, s.degrees.tp, s.microbatches) = (256, 4, 1);
    assert_eq!(named(&s, "h100", DType::Bf16), ["nodes"]);
    // a 405B model (above the fitted 1B–80B) on the same plan
    let big = Catalog::builtin().model("llama-3.1-405b").unwrap();
    let s = Run::of_config(&big.arch, &base, "h100").unwrap();
    assert_eq!(named_run(&s, "h100", DType::Bf16), ["model size"]);
    assert_eq!(named_run(run, "h100", DType::Fp8), ["dtype"]);
    assert_eq!(named_run(run, "h200", DType::Bf16), ["chip"]);
    // and the reproducer: cp 2, ZeRO-2, sequence 8,192
    let mut s = base;
    (s.degrees.cp, s.zero, s.seq_len) = (2, 2, 8192);
    assert_eq!(
        named(&s, "h100", DType::Bf16),
        ["sequence length", "ZeRO stage", "cp"]
    );
}

#[test]
fn out_of_range_entries_read_as_value_and_fitted_range() {
    let r = ranges(&playbook());
    let run = &playbook()[0];
    let mut s = run.config();
    (s.seq_len, s.zero) = (8192, 2);
    let o = r.outside_run(
        &run.with_config(&s).unwrap(),
        Catalog::builtin().chip("a100-80gb").unwrap(),
        DType::Bf16,
    );
    let d: Vec<String> = o.iter().map(|o| o.describe()).collect();
    assert_eq!(
        d,
        [
            "8192 (fitted: 4096)",
            "2 (fitted: 0–1)",
            "a100-80gb (fitted: h100)"
        ]
    );
    let j = serde_json::to_value(&o[1]).unwrap();
    assert_eq!(
        j,
        serde_json::json!({"input": "ZeRO stage", "value": 2, "fitted_range": [0, 1]})
    );
}

#[test]
fn profiles_with_unusable_ranges_are_refused() {
    let h100 = include_str!("../../../data/profiles/h100.toml");
    for (from, to) in [
        (
            "params = [1342244864.0, 79995084800.0]",
            "params = [nan, 79995084800.0]",
        ),
        (
            "params = [1342244864.0, 79995084800.0]",
            "params = [2e11, 1e9]",
        ),
        ("nodes = [1, 64]", "nodes = [64, 1]"),
    ] {
        let bad = h100.replacen(from, to, 1);
        let e = EfficiencyProfile::parse(&bad, "bad.toml").expect_err(to);
        assert!(e.to_string().contains("fitted_on"), "{to}: {e}");
    }
    assert!(EfficiencyProfile::parse(h100, "h100.toml").is_ok());
}
