//! The buffers of the frameworks added as named choices (torchtitan/FSDP2,
//! DeepSpeed, Megatron-LM 2021): each framework's bytes per parameter, its
//! unsharded FSDP blocks and its runtime reserve, against figures derived by
//! hand from the frameworks' documented defaults (the doc comments of
//! `parallelism::Framework`).

use meshplan_core::memory::{per_device, MemoryCalibration, MemoryQuery};
use meshplan_core::mesh::Degrees;
use meshplan_core::model::params::count;
use meshplan_core::model::Arch;
use meshplan_core::parallelism::{Framework, Remat, TrainConfig};
use meshplan_core::trace::NoTrace;

/// A small Llama-style model whose counts are easy to derive by hand:
/// L = 4, D = 1024, F = 4096, N = K = 8 heads of H = 128, V = 32,000.
fn model() -> Arch {
    Arch::dense(4, 1024, 4096, 8, 8, 128, 32_000)
}

// Hand count (gated MLP, untied embeddings, RMSNorm weights only):
// per layer  q, k, v, o: 4·D·N·H = 4·1024·1024      =  4,194,304
//            gate, up, down: 3·D·F = 3·1024·4096    = 12,582,912
//            two norms: 2·D                          =      2,048
//            layer                                   = 16,779,264
// embeddings: input + output 2·V·D = 2·32,000·1024   = 65,536,000
// final norm: D                                      =      1,024
// total P = 4·16,779,264 + 65,536,000 + 1,024        = 132,654,080
// meshplan's block: the non-embedding parameters per layer (the final norm
// spread over the layers), (P − 2·V·D)/L = (132,654,080 − 65,536,000)/4
//                                                     = 16,779,520
const P_LAYER: f64 = 16_779_520.0;
const P: f64 = 132_654_080.0;

fn cfg(framework: Framework, dp: u64, zero: u8) -> TrainConfig {
    TrainConfig {
        batch_tokens: 8 * 4096,
        seq_len: 4096,
        degrees: Degrees {
            dp,
            ..Degrees::default()
        },
        zero,
        remat: Remat::Full,
        framework,
        ..TrainConfig::default()
    }
}

fn memory(c: &TrainConfig) -> meshplan_core::memory::MemoryBreakdown {
    let a = model();
    let pc = count(&a, &mut NoTrace);
    per_device(
        &a,
        &pc,
        &MemoryQuery::from_config(c),
        &MemoryCalibration::BOOK,
        &mut NoTrace,
    )
}

fn close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{what}: meshplan {got}, by hand {want}"
    );
}

#[test]
fn the_hand_count_is_meshplans() {
    let pc = count(&model(), &mut NoTrace);
    assert_eq!(pc.total as f64, P);
}

/// NCCL channel buffers (1.06 GB, NVIDIA/nccl#1685) + 1 GiB allocator slack.
const NCCL_PLUS_SLACK: f64 = 1.06e9 + 1_073_741_824.0;

#[test]
fn torchtitan_fsdp2_keeps_fp32_shards_and_two_bf16_blocks_plus_one_reducing() {
    // FSDP2 over 8 data ranks (ZeRO-3): fp32 parameter shards 4·P/8, fp32
    // gradient shards 4·P/8, fp32 Adam moments 8·P/8; unsharded: the bf16
    // block in use and the prefetched one 2·2·P_layer, the block being
    // reduce-scattered as bf16 gradients and their fp32 copy (2 + 4)·P_layer
    let m = memory(&cfg(Framework::Torchtitan, 8, 3));
    close(
        m.params_bytes.get(),
        4.0 * P / 8.0 + 10.0 * P_LAYER,
        "params",
    );
    close(m.grads_bytes.get(), 4.0 * P / 8.0, "grads");
    close(m.optimizer_bytes.get(), 8.0 * P / 8.0, "optimizer");
    close(m.reserve_bytes.get(), NCCL_PLUS_SLACK, "reserve");
}

#[test]
fn deepspeed_keeps_16_bit_weights_and_grads_and_12_bytes_of_optimizer_state() {
    // ZeRO-0: 2 + 2 + 12 bytes per parameter, all replicated (the ZeRO
    // paper's 16·Ψ); reserve: NCCL + slack, no ZeRO bucket
    let m = memory(&cfg(Framework::Deepspeed, 8, 0));
    close(m.params_bytes.get(), 2.0 * P, "params");
    close(m.grads_bytes.get(), 2.0 * P, "grads");
    close(m.optimizer_bytes.get(), 12.0 * P, "optimizer");
    close(m.reserve_bytes.get(), NCCL_PLUS_SLACK, "reserve");
    // ZeRO-1 over 8 ranks: the 12 bytes split 8 ways (2Ψ + 2Ψ + 12Ψ/8), and
    // the 5·10⁸-element 16-bit reduce bucket (1e9 B) joins the reserve
    let m = memory(&cfg(Framework::Deepspeed, 8, 1));
    close(m.params_bytes.get(), 2.0 * P, "params z1");
    close(m.grads_bytes.get(), 2.0 * P, "grads z1");
    close(m.optimizer_bytes.get(), 12.0 * P / 8.0, "optimizer z1");
    close(m.reserve_bytes.get(), NCCL_PLUS_SLACK + 1e9, "reserve z1");
    // ZeRO-2: the gradients split too (2Ψ/8)
    let m = memory(&cfg(Framework::Deepspeed, 8, 2));
    close(m.grads_bytes.get(), 2.0 * P / 8.0, "grads z2");
}

#[test]
fn megatron_2021_holds_megatron_2022s_buffers() {
    // same buffers (bf16 weights, fp32 main_grad, fp32 master + moments:
    // 2 + 4 + 12 bytes) and the same unfused attention activations; the two
    // differ in their defaults (SP, recompute), not in what a plan holds
    let a = memory(&cfg(Framework::Megatron2021, 1, 0));
    let b = memory(&cfg(Framework::Megatron2022, 1, 0));
    assert_eq!(a, b);
    close(a.params_bytes.get(), 2.0 * P, "params");
    close(a.grads_bytes.get(), 4.0 * P, "grads");
    close(a.optimizer_bytes.get(), 12.0 * P, "optimizer");
}

#[test]
fn unfused_attention_frameworks_keep_the_scores() {
    // without recompute the unfused core keeps the [b, a, s, s] scores
    // (softmax output and dropout mask): DeepSpeed's activations are
    // Megatron-LM 2022's, torchtitan's (SDPA) are Megatron-Core's
    let with = |fw| {
        let mut c = cfg(fw, 1, 0);
        c.remat = Remat::None;
        memory(&c).activations_bytes.get()
    };
    close(
        with(Framework::Deepspeed),
        with(Framework::Megatron2022),
        "deepspeed",
    );
    close(
        with(Framework::Torchtitan),
        with(Framework::Megatron),
        "torchtitan",
    );
    assert!(with(Framework::Deepspeed) > with(Framework::Torchtitan));
}

/// `train` without flags under each added framework: its own defaults, each
/// named under "chosen" (Llama-3.1-70B, 256 H100, TP 8 × PP 4 × DP 8,
/// 4Mi-token batches of 8,192 tokens = 512 sequences).
fn resolved(framework: &str) -> meshplan_core::training::scenario::TrainSetup {
    let body = format!(
        "[model]\nname = \"llama-3.1-70b\"\n[hardware]\nchip = \"h100\"\nchips = 256\n\
         [training]\nbatch_tokens = \"4Mi\"\nseq_len = 8192\nframework = \"{framework}\"\n\
         [parallelism]\ntp = 8\npp = 4\ndp = 8\n"
    );
    let sc = meshplan_core::scenario::Scenario::parse(&body, "fw.toml").expect("scenario");
    meshplan_core::training::scenario::resolve(&sc, meshplan_core::Catalog::builtin())
        .expect("resolves")
}

#[test]
fn train_takes_each_added_frameworks_own_defaults() {
    // micro-batch size 1: 512 sequences / 8 data ranks = 64 micro-batches
    for (fw, zero, remat, sp) in [
        // FSDP2 over the 8 data ranks, full recompute, SP in its TP plan
        ("fsdp2", 3, Remat::Full, true),
        // ZeRO-0, no recompute, no SP
        ("deepspeed", 0, Remat::None, false),
        // Narayanan et al. 2021: no distributed optimizer, full recompute, no SP
        ("megatron-2021", 0, Remat::Full, false),
    ] {
        let s = resolved(fw);
        assert_eq!(s.cfg.microbatches, 64, "{fw}");
        assert_eq!(s.cfg.zero, zero, "{fw}");
        assert_eq!(s.cfg.remat, remat, "{fw}");
        assert_eq!(s.cfg.sequence_parallel, sp, "{fw}");
        assert!(
            s.chosen.iter().any(|c| c.contains("64 micro-batches")),
            "{fw}: {:?}",
            s.chosen
        );
    }
    // a given choice is never changed
    let body = "[model]\nname = \"llama-3.1-70b\"\n[hardware]\nchip = \"h100\"\nchips = 256\n\
         [training]\nbatch_tokens = \"4Mi\"\nseq_len = 8192\nframework = \"torchtitan\"\nremat = \"none\"\n\
         [parallelism]\ntp = 8\npp = 4\ndp = 8\nzero = 1\n";
    let sc = meshplan_core::scenario::Scenario::parse(body, "fw.toml").unwrap();
    let s =
        meshplan_core::training::scenario::resolve(&sc, meshplan_core::Catalog::builtin()).unwrap();
    assert_eq!((s.cfg.zero, s.cfg.remat), (1, Remat::None));
}

#[test]
fn a_bad_framework_name_is_a_clear_error_in_a_scenario() {
    let body = "[model]\nname = \"llama-3.1-70b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n\
         [training]\nframework = \"torchtitn\"\n";
    let e = meshplan_core::scenario::Scenario::parse(body, "fw.toml")
        .and_then(|sc| {
            meshplan_core::training::scenario::resolve(&sc, meshplan_core::Catalog::builtin())
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("torchtitan"), "{e}");
}
