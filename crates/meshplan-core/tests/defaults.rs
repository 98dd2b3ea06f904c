//! The frameworks' defaults where a scenario leaves a choice open
//! (`training::scenario::framework_defaults`) and the re-analysed "would
//! change it" advice (`training::advice`).

use meshplan_core::parallelism::{Degrees, Framework, Remat, TrainConfig};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::advice;
use meshplan_core::training::scenario::{
    framework_micro_batching, framework_microbatches, resolve, TrainSetup,
};
use meshplan_core::Catalog;

/// Llama-3.1-70B on `chips` × `chip`, 4Mi-token batches of 8,192 tokens,
/// with `rest` appended to `[training]` and `par` as `[parallelism]`.
fn setup(chip: &str, chips: u64, rest: &str, par: &str) -> TrainSetup {
    let body = format!(
        "[model]\nname = \"llama-3.1-70b\"\n[hardware]\nchip = \"{chip}\"\nchips = {chips}\n\
         [training]\nbatch_tokens = \"4Mi\"\nseq_len = 8192\n{rest}\n[parallelism]\n{par}\n"
    );
    let sc = Scenario::parse(&body, "d.toml").expect("scenario");
    resolve(&sc, Catalog::builtin()).expect("resolves")
}

const TP8_PP4_DP8: &str = "tp = 8\npp = 4\ndp = 8";

/// 4Mi tokens / 8,192 = 512 sequences.
fn cfg(dp: u64, fsdp: u64, cp: u64) -> TrainConfig {
    TrainConfig {
        batch_tokens: 4 << 20,
        seq_len: 8192,
        degrees: Degrees {
            dp,
            fsdp,
            cp,
            ..Degrees::default()
        },
        ..TrainConfig::default()
    }
}

#[test]
fn the_micro_batch_rule_divides_the_sequences_over_the_data_ranks() {
    // 512 sequences / 8 data ranks = 64; / (8·2) = 32 with fsdp 2
    assert_eq!(framework_microbatches(&cfg(8, 1, 1)), Some(64));
    assert_eq!(framework_microbatches(&cfg(8, 2, 1)), Some(32));
    // cp splits each sequence: still 512 / 8 = 64 per data rank
    assert_eq!(framework_microbatches(&cfg(8, 1, 2)), Some(64));
    // 512 over 1,024 ranks: fewer sequences than ranks; 512 over 3: not whole
    assert_eq!(framework_microbatches(&cfg(1024, 1, 1)), None);
    assert_eq!(framework_microbatches(&cfg(3, 1, 1)), None);
    // 64Mi one-token sequences over 8 ranks: 8,388,608 per rank; the
    // largest count ≤ 1,024 dividing 2^23 is 1,024, micro-batches of
    // 2^23 / 2^10 = 8,192 sequences
    let huge = TrainConfig {
        batch_tokens: 64 << 20,
        seq_len: 1,
        ..cfg(8, 1, 1)
    };
    assert_eq!(framework_micro_batching(&huge), Some((8192, 1024)));
    // 8·1,031 sequences (1,031 is prime, > 1,024): one micro-batch of 1,031
    let prime = TrainConfig {
        batch_tokens: 8 * 1031,
        seq_len: 1,
        ..cfg(8, 1, 1)
    };
    assert_eq!(framework_micro_batching(&prime), Some((1031, 1)));
    // 4Mi tokens of 3,000: not a whole number of sequences
    let odd = TrainConfig {
        seq_len: 3000,
        ..cfg(8, 1, 1)
    };
    assert_eq!(framework_microbatches(&odd), None);
}

#[test]
fn megatron_picks_mbs_1_the_distributed_optimizer_no_recompute_and_sp() {
    let s = setup("h100", 256, "", TP8_PP4_DP8);
    assert_eq!(s.cfg.framework, Framework::Megatron);
    assert_eq!(s.cfg.microbatches, 64);
    assert_eq!(s.cfg.zero, 1);
    assert_eq!(s.cfg.remat, Remat::None);
    assert!(s.cfg.sequence_parallel);
    assert_eq!(s.chosen.len(), 4, "{:?}", s.chosen);
    let r = s.analyze(&mut NoTrace);
    assert_eq!(r.chosen, s.chosen);
    // 1F1B bubble (pp−1)/(m+pp−1) = 3/(64+3) = 3/67 ≈ 4.48 %
    assert!((r.bubble_fraction - 3.0 / 67.0).abs() < 1e-12);
    assert!(r.fits, "{:?}", r.memory_per_device);
}

#[test]
fn nanotron_and_megatron_2022_follow_their_own_defaults() {
    // nanotron: batch_accumulation_per_replica = 512 / 8 = 64, zero_stage 0,
    // recompute_layer false, tp_mode ALL_REDUCE (no SP)
    let n = setup("h100", 256, "framework = \"nanotron\"", TP8_PP4_DP8);
    assert_eq!(
        (
            n.cfg.microbatches,
            n.cfg.zero,
            n.cfg.remat,
            n.cfg.sequence_parallel
        ),
        (64, 0, Remat::None, false)
    );
    // Megatron-LM 2022: selective recompute with SP, no distributed optimizer
    let m = setup("h100", 256, "framework = \"megatron-2022\"", TP8_PP4_DP8);
    assert_eq!(
        (
            m.cfg.microbatches,
            m.cfg.zero,
            m.cfg.remat,
            m.cfg.sequence_parallel
        ),
        (64, 0, Remat::Selective, true)
    );
}

#[test]
fn the_book_keeps_the_historical_defaults() {
    let s = setup("h100", 256, "framework = \"book\"", TP8_PP4_DP8);
    // m = pp = 4, full recompute, ZeRO-0, no SP, nothing chosen
    assert_eq!(
        (
            s.cfg.microbatches,
            s.cfg.zero,
            s.cfg.remat,
            s.cfg.sequence_parallel
        ),
        (4, 0, Remat::Full, false)
    );
    assert!(s.chosen.is_empty(), "{:?}", s.chosen);
    // the book's @book TPU keeps the book's accounting: nothing chosen
    let t = setup("tpu-v5p@book", 256, "", TP8_PP4_DP8);
    assert_eq!(t.cfg.framework, Framework::Book);
    assert!(t.chosen.is_empty());
    assert_eq!(t.cfg.microbatches, 4);
}

/// MaxText's base.yml: FSDP over the slice's data ranks
/// (`ici_fsdp_parallelism: -1`: ZeRO-3 over dp = 8) and full recompute
/// (`remat_policy: 'full'`), each named; micro-batches stay pp = 4. A
/// vendor TPU runs MaxText when no framework is given.
#[test]
fn maxtext_and_a_tpu_take_maxtexts_defaults() {
    for (chip, fw) in [("h100", "framework = \"maxtext\""), ("tpu-v5p", "")] {
        let s = setup(chip, 256, fw, TP8_PP4_DP8);
        assert_eq!(s.cfg.framework, Framework::Maxtext, "{chip}");
        assert_eq!(
            (s.cfg.microbatches, s.cfg.zero, s.cfg.remat),
            (4, 3, Remat::Full),
            "{chip}"
        );
        // a vendor TPU's framework is the chip's choice, and says so
        let named = usize::from(fw.is_empty());
        assert_eq!(s.chosen.len(), 2 + named, "{chip}: {:?}", s.chosen);
        if named == 1 {
            assert!(
                s.chosen[2].starts_with("framework MaxText"),
                "{:?}",
                s.chosen
            );
        }
        assert!(
            s.chosen[0].contains("ici_fsdp_parallelism"),
            "{:?}",
            s.chosen
        );
        assert!(s.chosen[1].contains("remat_policy"), "{:?}", s.chosen);
    }
}

#[test]
fn explicit_choices_are_never_changed() {
    let s = setup(
        "h100",
        256,
        "remat = \"full\"",
        "tp = 8\npp = 4\ndp = 8\nmicrobatches = 8\nzero = 0\nsequence_parallel = false",
    );
    assert_eq!(
        (
            s.cfg.microbatches,
            s.cfg.zero,
            s.cfg.remat,
            s.cfg.sequence_parallel
        ),
        (8, 0, Remat::Full, false)
    );
    assert!(s.chosen.is_empty(), "{:?}", s.chosen);
}

#[test]
fn the_advice_lines_are_the_alternatives_reanalysed() {
    // m = pp = 4 without recompute: 16 sequences per micro-batch, over HBM
    let s = setup(
        "h100",
        256,
        "remat = \"none\"",
        "tp = 8\npp = 4\ndp = 8\nmicrobatches = 4",
    );
    let r = s.analyze(&mut NoTrace);
    assert!(!r.fits);
    let alts = advice::alternatives(&s.cfg, false);
    assert_eq!(alts[0].1.microbatches, 64, "micro-batches come first");
    let lines = &r.memory_verdict.would_change;
    let m64 = s.analyze_cfg(&alts[0].1, &mut NoTrace);
    let want = format!(
        "peak {:.1} GB (fits), bubble {:.1} %, MFU predicted {:.1} %",
        m64.memory_per_device.total_bytes.get() / 1e9,
        100.0 * m64.bubble_fraction,
        100.0 * m64.predicted.as_ref().unwrap().mfu
    );
    assert!(lines[0].ends_with(&want), "{} vs {want}", lines[0]);
    assert!(lines.last().unwrap().starts_with("a device with at least"));
    // a plan that fits with a small bubble gets no advice
    let ok = setup("h100", 256, "", TP8_PP4_DP8).analyze(&mut NoTrace);
    assert!(ok.memory_verdict.would_change.is_empty());
    // a plan that fits with the 3/7 = 42.9 % bubble of m = pp = 4 is told
    // about m = 64 (3/67)
    let slow = setup(
        "h100",
        256,
        "remat = \"full\"",
        "tp = 8\npp = 4\ndp = 8\nmicrobatches = 4",
    )
    .analyze(&mut NoTrace);
    assert!(slow.fits);
    assert!((slow.bubble_fraction - 3.0 / 7.0).abs() < 1e-12);
    let w = &slow.memory_verdict.would_change;
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("64 micro-batches") && w[0].contains("bubble 4.5 %"),
        "{w:?}"
    );
}

#[test]
fn the_books_advice_is_the_memory_models_own() {
    let s = setup("h100", 256, "framework = \"book\"", TP8_PP4_DP8);
    let r = s.analyze(&mut NoTrace);
    let plain = meshplan_core::training::analyze_with(
        &s.spec,
        &s.chip,
        &s.topo,
        &s.cfg,
        s.profile.as_ref(),
        &mut NoTrace,
    );
    assert_eq!(r.memory_verdict, plain.memory_verdict);
}
