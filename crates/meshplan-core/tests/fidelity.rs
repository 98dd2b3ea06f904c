//! Fidelity regression figures on the whole Playbook set (3,264 runs, a copy of
//! ../shared/validation/playbook_h100_runs.csv; predicting all of them takes
//! milliseconds), on a fixed subset (every 10th row) for the slower calibrate
//! tests, and on the published runs. Thresholds are the issue-7 targets and the
//! figures reached today plus a small margin, so regressions fail
//! (docs/fidelity.md has the full tables).

use meshplan_core::fidelity::calibrate::{calibrate, median_error, Target};
use meshplan_core::fidelity::data::Run;
use meshplan_core::fidelity::data::{parse_playbook_csv, parse_published_json};
use meshplan_core::fidelity::stats::{compare, summarize};
use meshplan_core::fidelity::{with_chips, EfficiencyProfile, Prediction};
use meshplan_core::model::params::count;
use meshplan_core::model::Arch;
use meshplan_core::parallelism::pipeline::{stage_extremes, stages};
use meshplan_core::parallelism::{Degrees, Framework, Remat, Schedule, TrainConfig};
use meshplan_core::trace::NoTrace;

const FULL: &str = include_str!("fixtures/validation/playbook_h100_runs.csv");
const CSV: &str = include_str!("fixtures/validation/playbook_subset.csv");
const MODELS: &str = include_str!("fixtures/validation/playbook_models.toml");
const PUBLISHED: &str = include_str!("fixtures/validation/published_runs.json");

/// Memory median reached on the subset (full set: 6.9 %).
const MEM_SUBSET: f64 = 0.074;

fn prof(c: &str) -> EfficiencyProfile {
    EfficiencyProfile::builtin(c).expect("profile")
}

#[test]
fn builtin_profiles_parse() {
    assert_eq!(prof("h100").chip, "h100");
    assert_eq!(prof("a100-80gb").chip, "a100-80gb");
}

#[test]
fn playbook_full_set_meets_targets() {
    let runs = parse_playbook_csv(FULL, MODELS).unwrap();
    assert_eq!(runs.len(), 3264);
    let s = summarize(&compare(&with_chips(&runs), &prof));
    assert_eq!(s.step.n, 1716);
    // issue 7: step-time and peak-memory median |error| ≤ 10 % on the clean
    // completed runs, OOM classification ≥ 90 %. Reached: 8.7 %, 6.9 %, 92.2 %
    // (memory 9.5 % before peak memory used the framework's stage split).
    assert!(s.step.median <= 0.090, "step median {}", s.step.median);
    assert!(
        s.memory.median <= 0.072,
        "memory median {}",
        s.memory.median
    );
    assert!(s.oom_accuracy >= 0.92, "oom {}", s.oom_accuracy);
    // per node count (reached 4.9 / 4.7 / 6.0 / 7.9 / 8.1 / 17.0 / 11.2 %): the
    // 32-node runs are bimodal (about half stall ~0.5 s per micro-batch and
    // neighbour, docs/fidelity.md), the rest stay within 10 %
    let lim = [
        (1, 0.06),
        (2, 0.06),
        (4, 0.07),
        (8, 0.09),
        (16, 0.09),
        (32, 0.19),
        (64, 0.125),
    ];
    for (n, l) in lim {
        let m = s.by_nodes[&n].0.median;
        assert!(m <= l, "{n} nodes: step median {m}");
    }
    // per model (reached 1B 9.0, 3B 8.3, 8B 8.7, 80B 10.8 %)
    for (k, l) in [("1B", 0.10), ("3B", 0.095), ("8B", 0.10), ("80B", 0.12)] {
        let m = s.by_model[k].0.median;
        assert!(m <= l, "{k}: step median {m}");
    }
}

#[test]
fn playbook_subset_figures_do_not_regress() {
    let runs = parse_playbook_csv(CSV, MODELS).unwrap();
    assert_eq!(runs.len(), 327);
    let rc = with_chips(&runs);
    let rows = compare(&rc, &prof);
    let s = summarize(&rows);
    // reached on this subset: step median 8.3 %, memory median 7.4 %, OOM 91.4 %
    assert!(s.step.median < 0.09, "step median {}", s.step.median);
    assert!(
        s.memory.median < MEM_SUBSET + 0.005,
        "memory median {}",
        s.memory.median
    );
    assert!(s.oom_accuracy > 0.91, "oom {}", s.oom_accuracy);
}

#[test]
fn published_pairs_parse_and_ratios_close() {
    let (runs, skipped) = parse_published_json(PUBLISHED).unwrap();
    assert_eq!(runs.len(), 17);
    assert_eq!(skipped.len(), 1);
    let rc = with_chips(&runs);
    let s = summarize(&compare(&rc, &prof));
    assert_eq!(s.pairs.len(), 4);
    // reached: 22B +1.9 %, 175B +1.4 %, 530B +1.5 %, 1T -0.3 %
    // (were 6.1 / 8.9 / 18.4 / 6.5 %, and 150-460 % before that)
    for (k, lim) in [
        ("kor22-22b", 0.025),
        ("kor22-175b", 0.02),
        ("kor22-530b", 0.02),
        ("kor22-1t", 0.01),
    ] {
        let p = s.pairs.iter().find(|p| p.pair == k).unwrap();
        assert!(p.error.abs() < lim, "{k} ratio error {}", p.error);
    }
    // absolute Korthikanti step times (A100 profile, not fitted on them):
    // reached median 7.9 %, worst 12.5 %, all predicted too fast
    let k = &s.by_source["kor22"].0;
    assert!(k.median < 0.085 && k.max < 0.135, "kor22 {k:?}");
}

#[test]
fn korthikanti_ratios_within_5pct() {
    let (runs, _) = parse_published_json(PUBLISHED).unwrap();
    let rc = with_chips(&runs);
    let s = summarize(&compare(&rc, &prof));
    assert_eq!(s.pairs.len(), 4);
    for p in &s.pairs {
        assert!(p.error.abs() < 0.05, "{} ratio error {}", p.pair, p.error);
    }
}

#[test]
fn megatron_core_uses_infiniband_network_profile() {
    let (runs, _) = parse_published_json(PUBLISHED).unwrap();
    let rc = with_chips(&runs);
    let rows = compare(&rc, &prof);
    for r in rows.iter().filter(|r| r.source == "mcore24") {
        assert_eq!(r.profile, "h100@infiniband", "{}", r.id);
    }
    let s = summarize(&rows);
    // reached on all 9 runs: median 3.3 %, p90 9.0 %, worst 10.7 % (1.7B)
    // (with the Playbook EFA/nanotron profile instead: median 460 %, worst 656 %)
    let m = &s.by_source["mcore24"].0;
    assert_eq!(m.n, 9);
    assert!(m.median < 0.04, "mcore24 median {}", m.median);
    assert!(m.max < 0.12, "mcore24 worst {} ({})", m.max, m.worst);
}

#[test]
fn network_sub_profile_overrides_only_network() {
    use meshplan_core::fidelity::data::network_of;
    let base = prof("h100");
    assert_eq!(base.network, "efa");
    assert_eq!(
        network_of("8 GPUs/node NVLink; InfiniBand NDR"),
        "infiniband"
    );
    assert_eq!(network_of("AWS EFA"), "efa");
    assert_eq!(network_of("unknown"), "");
    // unknown / own / empty network: the base profile unchanged
    assert_eq!(base.for_network(""), base);
    assert_eq!(base.for_network("efa"), base);
    assert_eq!(base.for_network("roce"), base);
    let ib = base.for_network("infiniband");
    assert_eq!(ib.network, "infiniband");
    assert!(ib.measured_bw_nodes.is_empty() && ib.networks.is_empty());
    // memory parameters are shared with the Playbook fit; the kernel-efficiency
    // parameters of the Megatron-Core stack (TE GEMMs, fused attention) are the
    // sub-profile's own, documented in its [sources]
    assert_eq!(ib.activation_scale, base.activation_scale);
    assert_eq!(ib.logits_fp32_copies, base.logits_fp32_copies);
    assert_eq!(ib.hbm_efficiency, base.hbm_efficiency);
    // the GEMM curve is the chip's (microbenchmarks); the share of it the
    // Megatron stack keeps is the sub-profile's own
    assert_eq!(ib.matmul_efficiency, base.matmul_efficiency);
    assert!(ib.matmul_stack_share < base.matmul_stack_share);
    assert!(ib.sources["matmul_stack_share"].contains("Megatron"));
    // the nanotron/EFA stalls are not carried over to Megatron-Core on InfiniBand
    assert_eq!(ib.pp_tp_step_latency_s, 0.0);
    assert_eq!(ib.pp_stall_s, 0.0);
    assert_eq!(ib.microbatch_overhead_s, 0.0);
    assert_eq!(ib.latency_node_exponent, 0.0);
    // the chip profile carries none of the Playbook cluster's terms; its
    // named cluster profile does, for runs measured there only
    assert_eq!(base.pp_stall_s, 0.0);
    assert_eq!(base.microbatch_overhead_s, 0.0);
    assert_eq!(base.net_scale, 1.0);
    assert!(base.measured_bw_nodes.is_empty());
    let pb = base.for_run("efa", meshplan_core::fidelity::data::PLAYBOOK_CLUSTER);
    assert!(pb.pp_stall_s > 0.0 && pb.pp_tp_step_latency_s > 0.0 && pb.net_scale > 1.0);
    assert!(!pb.measured_bw_nodes.is_empty());
    // nanotron's end-to-end GEMM efficiency is the cluster's, not the chip's
    // (the chip's is its microbenchmark curve)
    assert!(pb.matmul_efficiency < base.matmul_efficiency);
    assert!(pb.sources["matmul_efficiency"].starts_with("cluster 'playbook-efa'"));
    assert_eq!(base.for_run("efa", ""), base);
    assert_eq!(base.for_run("infiniband", "other-cluster"), ib);
    // a profile written by calibrate still parses with its sub-profiles
    let again = EfficiencyProfile::parse(&base.to_toml(), "rt").unwrap();
    assert_eq!(again, base);
}

#[test]
fn memory_model_basics() {
    let runs = parse_playbook_csv(CSV, MODELS).unwrap();
    let rc = with_chips(&runs);
    let p = prof("h100");
    for (r, c) in &rc {
        let pr = r.predict(c, &p);
        assert!(pr.step_time_s > 0.0 && pr.peak_mem_gb > 0.0);
        assert!(pr.time.roofline <= pr.step_time_s * 1.0001 + 1e-9);
    }
}

#[test]
fn calibrate_round_trip_recovers_parameters() {
    // synthetic measurements from a known profile; start elsewhere; recover
    let runs = parse_playbook_csv(CSV, MODELS).unwrap();
    let mut truth = prof("h100");
    truth.matmul_efficiency = 0.7;
    truth.layer_overhead_s = 0.0004;
    truth.p2p_efficiency = 0.2;
    let chip = meshplan_core::Catalog::builtin().chip("h100").unwrap();
    let mut syn = Vec::new();
    for r in runs.iter().filter(|r| r.completed).take(120) {
        let mut r = r.clone();
        let pr = r.predict(chip, &truth);
        r.step_time_s = Some(pr.step_time_s);
        r.peak_mem_gb = Some(pr.peak_mem_gb);
        r.clean = true;
        syn.push(r);
    }
    let rc: Vec<_> = syn.iter().map(|r| (r, chip)).collect();
    let mut start = truth.clone();
    start.matmul_efficiency = 0.5;
    start.layer_overhead_s = 0.0002;
    start.p2p_efficiency = 0.05;
    start.logits_fp32_copies = 2.0;
    let c = calibrate(&rc, &start, 600, 0);
    assert!(c.time_median_after < 0.01, "after {}", c.time_median_after);
    // the parameters that set most step times come back
    let me = c.profile.matmul_efficiency;
    assert!((me - truth.matmul_efficiency).abs() < 0.02, "matmul {me}");
    assert!(median_error(&rc, &c.profile, Target::Memory) < 0.01);
    assert!((c.profile.logits_fp32_copies - truth.logits_fp32_copies).abs() < 0.05);
}

#[test]
fn calibration_improves_held_out_playbook() {
    let runs = parse_playbook_csv(CSV, MODELS).unwrap();
    let rc = with_chips(&runs);
    let (train, test): (Vec<_>, Vec<_>) = rc
        .into_iter()
        .filter(|(r, _)| r.clean)
        .partition(|(r, _)| !meshplan_core::fidelity::is_held_out(&r.id));
    // the "uncalibrated" profile: literature starting values, the cluster's
    // measured curves kept
    let mut start = prof("h100").for_run("efa", meshplan_core::fidelity::data::PLAYBOOK_CLUSTER);
    start.matmul_efficiency = 0.75;
    start.matmul_half_dim = 64.0;
    start.attention_efficiency = 0.5;
    start.layer_overhead_s = 0.0002;
    start.step_overhead_s = 0.1;
    start.collective_latency_s = 2e-5;
    start.inter_node_latency_s = 1e-4;
    start.p2p_latency_s = 1e-4;
    start.latency_node_exponent = 0.0;
    start.node_overhead_s = 0.0;
    start.tp_overlap = 0.3;
    start.dp_overlap = 0.3;
    start.p2p_efficiency = 0.5;
    start.logits_fp32_copies = 2.0;
    start.grad_extra_bytes = 0.0;
    start.activation_scale = 1.0;
    // no stalls before calibration: they are what the Playbook data teaches
    start.pp_tp_step_latency_s = 0.0;
    start.pp_stall_s = 0.0;
    start.microbatch_overhead_s = 0.0;
    start.microbatch_node_exponent = 1.0;
    let c = calibrate(&train, &start, 1500, 0);
    let before = median_error(&test, &start, Target::Time);
    let after = median_error(&test, &c.profile, Target::Time);
    let mb = median_error(&test, &start, Target::Memory);
    let ma = median_error(&test, &c.profile, Target::Memory);
    // reached: 50.8 % → 10.4 % on the 90 held-apart subset runs (memory 21.0 % → 10.2 %)
    assert!(
        after < 0.15 && after < before - 0.3,
        "held-out before {before} after {after}"
    );
    assert!(ma < mb, "held-out memory before {mb} after {ma}");
}

/// Hostile Playbook rows: a zero degree, a DP·TP·PP beyond the GPUs (PP = 2^32
/// once allocated 2^32 pipeline stages and aborted), a ZeRO stage that a `u8`
/// cast would wrap (256 → 0) are errors; a zero step time is "not measured"
/// rather than an infinite relative error.
#[test]
fn hostile_playbook_rows() {
    let header = CSV.lines().next().unwrap();
    let good = "1B,1,2,16,256,8,1,1,0,39.2,40150,321200,50.2,ok,4096,1048576,8,circle,1,256,1,3.2646,9.66e+09,39.22,A";
    assert_eq!(
        parse_playbook_csv(&format!("{header}\n{good}\n"), MODELS)
            .unwrap()
            .len(),
        1
    );
    // columns: model,Nodes,MBS,GradAcc,GBS,DP,PP,TP,ZeRO,...
    let bad = [
        (
            "1B,1,2,16,256,8,1,0,0,",
            "csv:2: field `tp`: must be at least 1",
        ),
        (
            "1B,1,0,16,256,8,1,1,0,",
            "csv:2: field `mbs`: must be at least 1",
        ),
        (
            "1B,1,2,16,256,8,4294967296,4294967296,0,",
            "exceeds the 8 GPUs",
        ),
        (
            "1B,1,2,16,256,18446744073709551615,1,1,0,",
            "exceeds the 8 GPUs",
        ),
        ("1B,1,2,16,256,8,1,1,256,", "field `ZeRO`: ZeRO stage 256"),
    ];
    let tail = "39.2,40150,321200,50.2,ok,4096,1048576,8,circle,1,256,1,3.2646,9.66e+09,39.22,A";
    for (head, msg) in bad {
        let e = parse_playbook_csv(&format!("{header}\n{head}{tail}\n"), MODELS).unwrap_err();
        assert!(e.to_string().contains(msg), "{head}: {e}");
    }
    let zero_step = good.replace(",3.2646,", ",0,");
    let runs = parse_playbook_csv(&format!("{header}\n{zero_step}\n"), MODELS).unwrap();
    assert_eq!(runs[0].step_time_s, None);
}

/// A malformed or out-of-range profile names the file, the line and the field.
#[test]
fn bad_profile_errors_point_at_line_and_field() {
    let good = prof("h100").to_toml();
    let bad = good.replacen("\nnet_scale = ", "\nnet_scale = -", 1);
    let line = bad
        .lines()
        .position(|l| l.starts_with("net_scale = -"))
        .unwrap()
        + 1;
    let e = EfficiencyProfile::parse(&bad, "mine.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("mine.toml:{line}:1: field `net_scale`: ")),
        "{e}"
    );
    let e = EfficiencyProfile::parse("chip = \"h100\"\nmatmul_efficiency = \"fast\"\n", "p.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("p.toml:2:") && e.contains("matmul_efficiency"),
        "{e}"
    );
}

/// The prediction on DGX H100 nodes on InfiniBand, the network the hand
/// derivations below assume.
fn predict_ib((arch, cfg): &(Arch, TrainConfig)) -> Prediction {
    let chip = meshplan_core::Catalog::builtin().chip("h100").unwrap();
    Run::of_config(arch, cfg, "h100")
        .expect("maps")
        .predict(chip, &prof("h100").for_network("infiniband"))
}

/// A catalog model.
fn model(name: &str) -> Arch {
    meshplan_core::Catalog::builtin()
        .model(name)
        .unwrap()
        .arch
        .clone()
}

/// Llama-2-7B (P = 32·202,383,360 + 2·32,000·4,096 + 65·4,096 of norms
/// = 6,738,415,616 parameters), 8 GPUs, ZeRO-1, Megatron: 8 replicas of one
/// micro-batch of 4 sequences of 4,096 tokens.
fn llama7b_spec() -> (Arch, TrainConfig) {
    let cfg = TrainConfig {
        batch_tokens: 8 * 4 * 4096,
        seq_len: 4096,
        degrees: Degrees {
            dp: 8,
            ..Degrees::default()
        },
        zero: 1,
        microbatches: 1,
        remat: Remat::None,
        sequence_parallel: false,
        schedule: Schedule::OneFOneB,
        virtual_stages: 1,
        framework: Framework::Megatron,
        ..TrainConfig::default()
    };
    (model("llama-2-7b"), cfg)
}

/// `base` with `f` applied to its configuration.
fn with(base: &(Arch, TrainConfig), f: impl FnOnce(&mut TrainConfig)) -> (Arch, TrainConfig) {
    let mut cfg = base.1;
    f(&mut cfg);
    (base.0.clone(), cfg)
}

/// ZeRO-3 / FSDP on one node of H100 (DGX, NVLink 450 GB/s × 0.754 = 339.3
/// GB/s, the aiconfigurator h100_sxm nccl_perf 8-GPU all-gather /
/// reduce-scatter fraction; `dp_overlap` 0.9): hand-derived exposed
/// data-parallel times, P = 6,738,415,616.
/// ZeRO-1 once per step: 7/8 · P · (2 + 2) B / 339.3 GB/s · (1 − 0.9) = 6.951 ms.
/// ZeRO-3 per micro-batch: gathers fwd + bwd and the reduce-scatter,
/// 7/8 · P · 6 B / 339.3 GB/s = 104.3 ms, hide under the ~1 s of compute but for
/// the first layer's gather, 7/8 · P · 2 B / 339.3 GB/s / 32 = 1.0861 ms.
#[test]
fn fsdp_prefetch_hides_all_but_the_first_gather() {
    let z1 = llama7b_spec();
    let z3 = with(&z1, |c| c.zero = 3);
    let (a, b) = (predict_ib(&z1), predict_ib(&z3));
    assert!(
        b.time.matmul > 0.5,
        "compute must dominate: {}",
        b.time.matmul
    );
    let rel = |x: f64, y: f64| ((x - y) / y).abs();
    assert!(
        rel(a.time.dp_comm, 6.951e-3) < 2e-3,
        "zero-1 {}",
        a.time.dp_comm
    );
    assert!(
        rel(b.time.dp_comm, 1.0861e-3) < 2e-3,
        "zero-3 {}",
        b.time.dp_comm
    );
    // the ZeRO-3 shard: 2 B · P / 8 + two gathered layers 2 · 2 B · L_1, with
    // P = 6,738,415,616 (exact, the final norm included) and a layer's share
    // of the non-embedding parameters L_1 = (P − 2·32,000·4,096)/32 = 202,383,488
    let want = 2.0 * 6_738_415_616.0 / 8.0 + 4.0 * 202_383_488.0;
    let got = b.memory.params_bytes.get();
    assert!(rel(got, want) < 1e-9, "params {got}");
}

/// Ring attention over cp = 2 in one node: each hop moves K and V of the
/// local chunk, 2 · 4,096 tokens · 4,096 · 2 B = 67.1 MB, in
/// 67,108,864 / 339.3e9 + 1.45 µs = 199.24 µs (in-node bus bandwidth and
/// ring-step latency of the h100 InfiniBand profile, from nccl_perf); the 3
/// passes (fwd, bwd K/V + dK/dV) take 0.598 ms per layer, well under the
/// ~4.9 ms of attention kernels, so only the first hop shows: 32 layers ×
/// 199.24 µs = 6.376 ms.
#[test]
fn ring_attention_hidden_but_for_one_hop() {
    // one sequence of 8,192 tokens over cp = 2
    let cp = with(&llama7b_spec(), |c| {
        (c.batch_tokens, c.seq_len, c.zero) = (8192, 8192, 0);
        c.degrees = Degrees {
            cp: 2,
            ..Degrees::default()
        };
    });
    let r = predict_ib(&cp);
    let want = 32.0 * (67_108_864.0 / 339.3e9 + 1.45e-6);
    assert!(
        ((r.time.cp_comm - want) / want).abs() < 2e-3,
        "cp {}",
        r.time.cp_comm
    );
    // the queries of the local half attend to the whole causal sequence: the
    // attention time equals that of one GPU holding the full sequence, halved
    let one = with(&cp, |c| c.degrees.cp = 1);
    let full = predict_ib(&one);
    let ratio = r.time.attention / full.time.attention;
    assert!((ratio - 0.5).abs() < 1e-9, "attention ratio {ratio}");
}

/// The reported parts add up to the predicted step time, for every Playbook
/// run and for ZeRO-3, hybrid-sharded, context-parallel and expert-parallel plans.
#[test]
fn time_parts_add_up() {
    let runs = parse_playbook_csv(FULL, MODELS).unwrap();
    let chip = meshplan_core::Catalog::builtin().chip("h100").unwrap();
    let mut specs = runs;
    let z3 = with(&llama7b_spec(), |c| c.zero = 3);
    let mut add = |(arch, cfg): (Arch, TrainConfig)| {
        specs.push(Run::of_config(&arch, &cfg, "h100").expect("maps"));
    };
    add(z3.clone());
    add(with(&z3, |c| c.degrees.cp = 2));
    // dp·fsdp = 16 ranks (ZeRO-3 in groups of 8, ZeRO-1 across 2), 4 sequences each
    add(with(&z3, |c| {
        (c.degrees.dp, c.degrees.fsdp, c.zero) = (2, 8, 1);
        c.batch_tokens = 16 * 4 * 4096;
    }));
    // Mixtral on 16 GPUs: dp 8 × pp 2, ep 8, 4 micro-batches of 4 sequences
    add((
        model("mixtral-8x7b"),
        TrainConfig {
            batch_tokens: 8 * 4 * 4 * 4096,
            degrees: Degrees {
                dp: 8,
                pp: 2,
                ep: 8,
                ..Degrees::default()
            },
            microbatches: 4,
            ..z3.1
        },
    ));
    for p in [prof("h100"), prof("h100").for_network("infiniband")] {
        for s in &specs {
            let t = s.predict(chip, &p).time;
            let sum = t.matmul
                + t.attention
                + t.memory_bound
                + t.tp_comm
                + t.cp_comm
                + t.ep_comm
                + t.pp_comm
                + t.bubble
                + t.dp_comm
                + t.optimizer
                + t.overhead;
            assert!(
                (sum - t.total).abs() <= 1e-9 * t.total,
                "{sum} vs {}",
                t.total
            );
        }
    }
}

/// Mixtral-8x7B (E = 8, k = 2, F_e = 14,336): counts by hand.
/// Per layer: attention 4,096·(4,096 + 2·1,024) + 4,096² = 41,943,040; experts
/// 3·4,096·8·14,336 = 1,409,286,144; router 8·4,096 = 32,768; norms 8,192 →
/// 1,451,270,144; ×32 + embeddings 2·32,000·4,096 + final norm 4,096 =
/// 46,702,792,704 (the published 46.7B). Routed experts: 32·8·3·4,096·14,336 =
/// 45,097,156,608. A token goes through k·F_e = 28,672 of FFN width.
#[test]
fn moe_shape_counts() {
    let m = meshplan_core::Catalog::builtin()
        .model("mixtral-8x7b")
        .unwrap();
    let pc = count(&m.arch, &mut NoTrace);
    assert_eq!(pc.total, 46_702_792_704);
    assert_eq!(pc.experts_routed, 45_097_156_608);
    assert_eq!(m.arch.ffn_width_active(), 28_672.0);
    assert_eq!(m.arch.moe_fraction(), 1.0);
}

/// Expert-parallel all-to-all for Mixtral on one DGX node (ep = dp = 8,
/// tp = 1, one micro-batch of 4,096 tokens): each MoE layer moves the
/// 2·4,096 routed token-rows of D = 4,096 bf16, 7/8 of them off-GPU, in
/// 58,720,256 B / 339.3 GB/s + 7·1.45 µs = 183.21 µs, 4 times (dispatch +
/// combine, forward and backward): 32 layers · 4 · 183.21 µs = 23.45 ms, with the
/// busiest rank receiving `MOE_LOAD_IMBALANCE` = 1.25 × the mean rows (the
/// bytes term; the latency term is per ring step). The routed-expert
/// parameters a GPU holds drop 8× with ep = 8.
#[test]
fn expert_parallel_all_to_all() {
    // one sequence per replica
    let spec = (
        model("mixtral-8x7b"),
        TrainConfig {
            batch_tokens: 8 * 4096,
            degrees: Degrees {
                dp: 8,
                ep: 8,
                ..Degrees::default()
            },
            zero: 1,
            ..llama7b_spec().1
        },
    );
    let r = predict_ib(&spec);
    let want = 32.0 * 4.0 * (1.25 * 58_720_256.0 / 339.3e9 + 7.0 * 1.45e-6);
    assert!(
        ((r.time.ep_comm - want) / want).abs() < 2e-3,
        "ep {}",
        r.time.ep_comm
    );
    let no_ep = predict_ib(&with(&spec, |c| c.degrees.ep = 1));
    assert_eq!(no_ep.time.ep_comm, 0.0);
    // bf16 weights: non-expert 1,605,636,096 + experts 45,097,156,608 / ep
    let want_w = |ep: f64| 2.0 * (46_702_792_704.0 - 45_097_156_608.0 * (1.0 - 1.0 / ep));
    let got = r.memory.params_bytes.get();
    assert!((got - want_w(8.0)).abs() < 1.0, "{got}");
    assert!((no_ep.memory.params_bytes.get() - want_w(1.0)).abs() < 1.0);
}

/// Hybrid sharding on 2 DGX nodes (dp·fsdp = 16: ZeRO-3 inside each node's
/// 8 GPUs, ZeRO-1 across the 2 replicas). Inside: the per-micro-batch
/// gathers hide but for the first layer's, 1.0861 ms (as in
/// `fsdp_prefetch_hides_all_but_the_first_gather`). Across: each GPU's
/// shard, P/8 = 842,301,952 parameters, is reduce-scattered (2 B) and
/// all-gathered (2 B) between the 2 replicas over one 400 Gb/s NIC at 0.8:
/// 1/2 · 842,301,952 · 4 B / 40 GB/s = 42.12 ms, 90 % overlapped → 4.212 ms.
#[test]
fn hybrid_sharding_splits_gathers_and_replica_reduction() {
    // dp·fsdp = 2·8 = 16 replicas of 4 sequences
    let spec = with(&llama7b_spec(), |c| {
        (c.degrees.dp, c.degrees.fsdp, c.zero) = (2, 8, 1);
        c.batch_tokens = 16 * 4 * 4096;
    });
    let r = predict_ib(&spec);
    let want = 4.212e-3 + 1.0861e-3;
    assert!(
        ((r.time.dp_comm - want) / want).abs() < 2e-3,
        "dp {}",
        r.time.dp_comm
    );
    // memory: the bf16 shard + two gathered layers, optimizer state / 8 / 2
    let pm = 6_738_415_616.0;
    let want_p = 2.0 * pm / 8.0 + 4.0 * 202_383_488.0;
    let got = r.memory.params_bytes.get();
    assert!((got - want_p).abs() < 1.0, "{got}");
    assert!((r.memory.optimizer_bytes.get() - 12.0 * pm / 16.0).abs() < 1.0);
}

/// The nanotron stage split by hand, and `stage_extremes` (allocation-free,
/// used by every prediction) against the explicit stage list
/// `pipeline_stages` for the Playbook shapes and catalog models, every pp from
/// 1 to 64, both frameworks.
#[test]
fn stage_extremes_match_the_stage_list() {
    let runs = parse_playbook_csv(CSV, MODELS).unwrap();
    // by hand, the Playbook 1B on pp = 4 (nanotron): a layer costs
    // 4·2,048² + 3·8,192·2,048 = 67,108,864, the head 131,072·2,048 = 4 layers,
    // 20 layer-equivalents in all, 5 per rank; a rank takes blocks until its
    // cumulative cost passes 5, 10, 15: layers 1-6 | 7-11 | 12-16 | the head
    let one_b = runs.iter().find(|r| r.model == "1B").unwrap().arch();
    assert_eq!(
        stages(one_b, 4, Framework::Nanotron),
        vec![(6, false), (5, false), (5, false), (0, true)]
    );
    assert_eq!(stage_extremes(one_b, 4, Framework::Nanotron), (6, 0));
    let mut archs: Vec<Arch> = runs.iter().map(|r| r.arch().clone()).collect();
    archs.dedup();
    let cat = meshplan_core::Catalog::builtin();
    for m in ["llama-2-7b", "llama-3.1-405b", "mixtral-8x7b"] {
        archs.push(cat.model(m).unwrap().arch.clone());
    }
    for a in archs {
        for pp in 1..=64u64 {
            for framework in [Framework::Nanotron, Framework::Megatron] {
                let st = stages(&a, pp, framework);
                let plain = st.iter().filter(|s| !s.1).map(|s| s.0).max().unwrap_or(0);
                let head = st.iter().find(|s| s.1).unwrap().0;
                assert_eq!(stage_extremes(&a, pp, framework), (plain, head), "pp {pp}");
            }
        }
    }
}

/// The calibration CSV takes cp, ep and fsdp columns (a catalog MoE model
/// brings its experts) and says which column is wrong.
#[test]
fn calibration_csv_parallel_columns() {
    use meshplan_core::fidelity::data::parse_calibration_csv;
    let cat = meshplan_core::Catalog::builtin();
    let lookup = |n: &str| cat.model(n).ok().map(|m| m.arch.clone());
    let head = "model,n_gpus,dp,tp,pp,cp,ep,fsdp,zero,mbs,grad_acc,seq_len,step_time_s\n";
    let ok = format!("{head}mixtral-8x7b,128,16,4,1,2,8,4,1,1,4,8192,10\n");
    let runs = parse_calibration_csv(&ok, "h100", &lookup).unwrap();
    let d = runs[0].config().degrees;
    assert_eq!((d.cp, d.ep, d.fsdp), (2, 8, 4));
    assert!(runs[0].arch().moe.is_some());
    for (row, msg) in [
        (
            "llama-2-7b,128,16,4,1,2,8,1,1,1,4,8192,10",
            "csv:2: field `ep`: expert parallelism needs a mixture-of-experts model",
        ),
        (
            "mixtral-8x7b,128,16,4,1,2,1,3,1,1,4,8192,10",
            "field `fsdp`: fsdp = 3 does not divide the 32 data-parallel ranks",
        ),
        (
            "mixtral-8x7b,64,16,4,1,2,1,1,1,1,4,8192,10",
            "DP × TP × PP × CP = 16 × 4 × 1 × 2 exceeds the 64 GPUs",
        ),
        (
            "mixtral-8x7b,64,16,4,1,0,1,1,1,1,4,8192,10",
            "field `cp`: must be at least 1",
        ),
    ] {
        let e = parse_calibration_csv(&format!("{head}{row}\n"), "h100", &lookup)
            .unwrap_err()
            .to_string();
        assert!(e.contains(msg), "{row}: {e}");
    }
}

/// Hostile published-runs entries: degrees beyond the GPUs, or a micro-batch
/// and sequence whose product overflows u64, are a clear error (before: an
/// arithmetic overflow panic in debug builds), naming the entry.
#[test]
fn hostile_published_entries() {
    let base: serde_json::Value = serde_json::from_str(PUBLISHED).unwrap();
    let id = base[0]["id"].as_str().unwrap().to_string();
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = base.clone();
        f(&mut v[0]);
        parse_published_json(&v.to_string())
    };
    let e = with(&|e| e["parallelism"]["DP"] = u64::MAX.into()).unwrap_err();
    assert!(
        e.to_string().contains(&format!("published json `{id}`")),
        "{e}"
    );
    assert!(e.to_string().contains("exceeds"), "{e}");
    let e = with(&|e| e["model"]["L"] = 0.into()).unwrap_err();
    assert!(
        e.to_string()
            .contains("field `n_layers`: must be at least 1"),
        "{e}"
    );
    // huge but consistent: predicted without overflow
    let (runs, _) = with(&|e| {
        e["workload"]["micro_batch"] = (u64::MAX / 2).into();
        e["workload"]["seq_len"] = (u64::MAX / 2).into();
    })
    .unwrap();
    let r = &runs[0];
    assert!(r.micro_batch_sequences() as f64 * r.config().seq_len as f64 > 1e30);
}
