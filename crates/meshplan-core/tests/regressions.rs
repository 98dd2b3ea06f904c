//! Regression tests named after their issue (`r<issue>_…`), each with the
//! expected value derived by hand in a comment.

mod common;

use common::{l13b_h100_4m, model_and_chip};
use meshplan_core::fidelity::EfficiencyProfile;
use meshplan_core::mesh::{Degrees, Topology};
use meshplan_core::model::params::count;
use meshplan_core::parallelism::{Framework, Remat, TrainConfig};
use meshplan_core::trace::NoTrace;
use meshplan_core::training::{analyze, Transfer};
use meshplan_core::Catalog;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

/// Issue 11, bug 1: the expert-parallel all-to-all moved the per-device
/// buffer as if it were the whole array. Mixtral-8x7B on one H100 node,
/// dp 8 = ep 8, 32Ki-token batch: each GPU routes its 4,096 tokens × k = 2
/// × D = 4,096 × 2 B = 67,108,864 B; the all-to-all's array is 8 of those,
/// 536,870,912 B; each GPU sends 7/8 of its own 67,108,864 B over NVLink
/// (450 GB/s):
/// 536,870,912 · 7/(8² · 450e9) = 130.5 µs per call (the old figure: 16.3 µs).
#[test]
fn r11_expert_all_to_all_moves_every_gpus_buffer() {
    let (spec, chip) = model_and_chip("mixtral-8x7b", "h100");
    let cfg = TrainConfig {
        batch_tokens: 32 * 1024,
        seq_len: 4096,
        degrees: Degrees {
            dp: 8,
            ep: 8,
            ..Degrees::default()
        },
        ..TrainConfig::default()
    };
    let r = analyze(spec, chip, &Topology::gpus(8, 8), &cfg, &mut NoTrace);
    assert!(r.feasible, "{:?}", r.reasons);
    let e = r
        .comms
        .iter()
        .find(|c| c.transfer == Transfer::EpFwd)
        .unwrap();
    assert_eq!(e.bytes.get(), 536_870_912.0);
    assert_eq!(e.bytes_sent_per_device.get(), 67_108_864.0 * 7.0 / 8.0);
    let per_call = e.seconds.get() / e.count as f64;
    assert!(
        rel(per_call, 536_870_912.0 * 7.0 / (64.0 * 450e9)) < 1e-9,
        "{per_call}"
    );
}

/// Issue 11, bug 2: peak memory used `ceil(L/pp)` layers on every stage
/// while the step time used nanotron's cost-balanced split. The Playbook 1B
/// (16 layers, D = 2,048, F = 8,192, MHA with N·H = K·H = 2,048, a
/// 131,072-token vocabulary worth 4 layers of compute) on pp = 4: nanotron
/// puts 6 | 5 | 5 | head on the stages (the old peak memory: 4 each). With
/// 4 micro-batches of one 4,096-token sequence under 1F1B the first stage
/// holds 4 in flight, each 6 layers × 98,304 B per token-layer (norm and
/// matmul inputs 8·D = 16,384; Q, K, V, O 2·(2·2,048 + 2·2,048) = 16,384;
/// gate, up, product, act(gate) 2·4·F = 65,536) × the profile's
/// `activation_scale`, plus the embedding output 2 B · 4,096 · 2,048.
#[test]
fn r11_peak_memory_uses_the_framework_stage_split() {
    let csv = include_str!("fixtures/validation/playbook_subset.csv");
    let models = include_str!("fixtures/validation/playbook_models.toml");
    let runs = meshplan_core::fidelity::data::parse_playbook_csv(csv, models).unwrap();
    let run = runs.iter().find(|r| r.model == "1B").unwrap();
    let one_b = run.config();
    let chip = Catalog::builtin().chip("h100").unwrap();
    let p = EfficiencyProfile::builtin("h100").unwrap();
    // 4 GPUs, pp 4: 4 micro-batches of one sequence
    let s = TrainConfig {
        batch_tokens: 4 * one_b.seq_len,
        degrees: Degrees {
            pp: 4,
            dp: 1,
            tp: 1,
            ..one_b.degrees
        },
        microbatches: 4,
        zero: 0,
        sequence_parallel: false,
        remat: Remat::None,
        framework: Framework::Nanotron,
        ..one_b
    };
    let got = run
        .with_config(&s)
        .unwrap()
        .peak_memory(chip, &p)
        .activations_bytes
        .get();
    let want = p.activation_scale * 4.0 * 4096.0 * 6.0 * 98_304.0 + 2.0 * 4096.0 * 2048.0;
    assert!(rel(got, want) < 1e-12, "{got} vs {want}");
}

/// Issue 11, bug 3: nanotron's extra gradient buffer was charged to every
/// framework. Llama-2-7B (P = 6,738,415,616) on 8 H100 with pure data
/// parallelism, ZeRO-0, Megatron: the fp32 `main_grad` buffer is 4 B per
/// parameter, 26.95 GB — not 5.15 B/param (34.7 GB).
#[test]
fn r11_megatron_keeps_only_the_fp32_gradient_buffer() {
    let (spec, chip) = model_and_chip("llama-2-7b", "h100");
    let cfg = TrainConfig {
        batch_tokens: 8 * 4096,
        seq_len: 4096,
        framework: Framework::Megatron,
        degrees: Degrees {
            dp: 8,
            ..Degrees::default()
        },
        ..TrainConfig::default()
    };
    let prof = meshplan_core::step::predict::active_profile(chip, None)
        .unwrap()
        .unwrap();
    let r = meshplan_core::training::analyze_with(
        spec,
        chip,
        &Topology::gpus(8, 8),
        &cfg,
        Some(&prof),
        &mut NoTrace,
    );
    assert_eq!(r.memory_per_device.grads_bytes.get(), 4.0 * 6_738_415_616.0);
}

/// Issue 11, bug 4: with pp = 1, `--microbatches m` (gradient accumulation)
/// did not divide the saved activations. LLaMA-2 13B on 64 H100, 4Mi-token
/// batch of 4,096-token sequences, fsdp 8 × tp 8, 16 accumulation steps,
/// full remat, the book's accounting: each device holds one micro-batch of
/// 4,194,304/8/16 = 32,768 tokens × 40 layers × D = 5,120 (full remat saves
/// the layer input, replicated over tp without SP) × 2 B = 13.42 GB — the
/// old figure was 16× that (214.7 GB).
#[test]
fn r11_gradient_accumulation_holds_one_microbatch() {
    let (spec, chip, base) = l13b_h100_4m();
    let cfg = TrainConfig {
        remat: Remat::Full,
        microbatches: 16,
        framework: Framework::Book,
        degrees: Degrees {
            fsdp: 8,
            tp: 8,
            ..Degrees::default()
        },
        ..base
    };
    let r = analyze(spec, chip, &Topology::gpus(64, 8), &cfg, &mut NoTrace);
    assert!(r.feasible, "{:?}", r.reasons);
    let want = 32_768.0 * 40.0 * 5_120.0 * 2.0;
    assert_eq!(r.memory_per_device.activations_bytes.get(), want);
    assert!(r.fits);
    // and the accumulation steps repeat the FSDP gathers: 16 micro-batches ×
    // 40 layers of forward gathers
    let g = r
        .comms
        .iter()
        .find(|c| c.transfer == Transfer::FsdpGatherFwd)
        .unwrap();
    assert_eq!(g.count, 16 * 40);
    // the parameter count is the exact one
    assert_eq!(r.params, count(&spec.arch, &mut NoTrace).total);
}

/// Issue 14, uneven pipeline splits: Llama-3.1 405B has 126 layers, which 16
/// stages cannot split evenly; Megatron runs it with ⌈126/16⌉ = 8 layers on the
/// busiest stages. The plan is costed, not refused, and the stages run at the
/// busiest one's pace: with the same FLOPs and chips, T_math on pp = 16 is
/// (8·16/126) / (63·2/126) = 128/126 of T_math on pp = 2 (an even split).
/// Both get a prediction, never below the roofline lower bound.
#[test]
fn r14_uneven_pipeline_split_is_costed_at_the_busiest_stage() {
    let (spec, chip) = model_and_chip("llama-3.1-405b", "h100");
    let cfg = |pp: u64, dp: u64| TrainConfig {
        batch_tokens: 2048 * 8192,
        seq_len: 8192,
        microbatches: 16,
        sequence_parallel: true,
        zero: 1,
        framework: Framework::Megatron,
        degrees: Degrees {
            dp,
            tp: 8,
            pp,
            ..Degrees::default()
        },
        ..TrainConfig::default()
    };
    let topo = Topology::gpus(2048, 8);
    let prof = meshplan_core::step::predict::active_profile(chip, None)
        .unwrap()
        .unwrap();
    let run = |pp, dp| {
        let r = meshplan_core::training::analyze_with(
            spec,
            chip,
            &topo,
            &cfg(pp, dp),
            Some(&prof),
            &mut NoTrace,
        );
        assert!(r.feasible, "pp {pp}: {:?}", r.reasons);
        let p = r.predicted.as_ref().expect("predicted");
        assert!(p.step_time_s.get() >= r.step_time_lower_s.get());
        r.t_math_s.get()
    };
    let (even, uneven) = (run(2, 128), run(16, 16));
    assert!(
        rel(uneven / even, 128.0 / 126.0) < 1e-12,
        "{}",
        uneven / even
    );
}

/// Issue 14, every catalog GPU predicted: chips without a fitted profile
/// (H200, B200, GB200 NVL72, MI300X) get the fitted H100 profile's
/// efficiencies with their own peak rates, and the prediction says it was
/// not fitted on them; fitted chips say nothing of the kind. Same plan on
/// every chip (Llama-3.1 70B, 64 GPUs, tp 8 × pp 2 × dp 4): the step is at
/// least the chip's roofline lower bound, and a chip with more FLOP/s than
/// the H100 at the same efficiencies is predicted faster.
#[test]
fn r14_every_catalog_gpu_gets_a_prediction() {
    let cat = Catalog::builtin();
    let spec = cat.model("llama-3.1-70b").unwrap();
    let cfg = TrainConfig {
        batch_tokens: 512 * 8192,
        seq_len: 8192,
        microbatches: 8,
        sequence_parallel: true,
        zero: 1,
        framework: Framework::Megatron,
        degrees: Degrees {
            dp: 4,
            tp: 8,
            pp: 2,
            ..Degrees::default()
        },
        ..TrainConfig::default()
    };
    let mut steps = std::collections::BTreeMap::new();
    for chip in cat.chips() {
        if chip.kind != meshplan_core::hardware::ChipKind::Gpu {
            continue;
        }
        let prof = meshplan_core::step::predict::active_profile(chip, None)
            .unwrap()
            .unwrap_or_else(|| panic!("{} has no profile", chip.name));
        let domain = chip.nvlink.as_ref().map_or(8, |n| n.domain_size).min(8);
        let topo = Topology::gpus(64, domain);
        let r = meshplan_core::training::analyze_with(
            spec,
            chip,
            &topo,
            &cfg,
            Some(&prof),
            &mut NoTrace,
        );
        if !r.feasible {
            // e.g. a catalog entry without a scale-out network: 64 GPUs
            // cannot be placed, which is not the prediction's business
            continue;
        }
        let p = r
            .predicted
            .as_ref()
            .unwrap_or_else(|| panic!("{}: {:?} {:?}", chip.name, r.prediction_note, r.reasons));
        // every catalog chip has its own profile (issue 25): none is
        // transferred but the book's figures (`NAME@book`)
        let book = chip.name.ends_with("@book");
        assert_eq!(p.transferred_from.is_some(), book, "{}", chip.name);
        assert!(
            p.step_time_s.get() >= r.step_time_lower_s.get(),
            "{}",
            chip.name
        );
        steps.insert(chip.name.clone(), p.step_time_s.get());
    }
    assert!(steps["b200"] < steps["h100"], "{steps:?}");
    assert!(steps.len() >= 6, "{steps:?}");
}
