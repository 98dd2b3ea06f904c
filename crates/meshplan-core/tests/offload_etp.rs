//! Issue 14 items 4 and 6: offloading state to host memory, and experts
//! with their own TP degree (etp). Expected values derived by hand in the
//! comments from the models' published shapes and the [host] catalog
//! figures (data/hardware/h100.toml: PCIe Gen5 x16 64 GB/s one way, host
//! DRAM 256 GB and 76.8 GB/s per GPU).

mod common;
use common::{train, train_on};
use meshplan_core::scenario::Scenario;
use meshplan_core::training::scenario::resolve;
use meshplan_core::training::TrainReport;
use meshplan_core::Catalog;

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

/// llama-2-70b on one 8-GPU H100 node, tp 8, 64 sequences of 4096, one
/// sequence per micro-batch, Megatron accounting.
fn llama70b(offload: &str) -> TrainReport {
    train_on(
        "llama-2-70b",
        "h100",
        8,
        &format!(
            r#"
[training]
batch_tokens = 262144
seq_len = 4096
{offload}
[parallelism]
tp = 8
microbatches = 64
sequence_parallel = true
"#
        ),
    )
}

// llama-2-70b: 68,976,648,192 parameters (Touvron et al. 2023, 80 layers,
// untied 32000×8192 embeddings); Megatron splits every weight over tp = 8,
// so P_dev = 68,976,648,192 / 8 = 8,622,081,024.
const P_DEV: f64 = 8_622_081_024.0;

#[test]
fn optimizer_offload_moves_master_and_moments_and_costs_the_cpu_step() {
    let base = llama70b("");
    let off = llama70b(r#"offload = ["optimizer"]"#);
    assert!(base.offload.is_none());
    assert!(close(base.params_per_device, P_DEV, 1e-12));
    // Megatron: fp32 master + two fp32 Adam moments = 12 B/param leave HBM
    let moved = 12.0 * P_DEV;
    assert!(close(
        base.memory_per_device.optimizer_bytes.get(),
        moved,
        1e-12
    ));
    assert_eq!(off.memory_per_device.optimizer_bytes.get(), 0.0);
    assert!(close(
        base.memory_per_device.total_bytes.get() - off.memory_per_device.total_bytes.get(),
        moved,
        1e-9
    ));
    let o = off.offload.expect("offload section");
    // host: the 12 B/param state plus an fp32 gradient copy (4 B/param)
    assert!(close(o.host_bytes, 16.0 * P_DEV, 1e-12));
    assert_eq!(o.host_capacity_bytes, 256e9);
    // CPU Adam: 30 B/param (read fp32 g, p, m, v; write p, m, v; the bf16
    // copy) at 76.8 GB/s = 3.368 s; the bf16 weights back over 64 GB/s =
    // 0.2694 s; the fp32 gradients down (4·P_dev / 64e9 = 0.539 s) hide
    // under the backward (T_b ≈ 2/3 of T_math, tens of seconds here)
    let cpu = P_DEV * 30.0 / 76.8e9;
    let up = P_DEV * 2.0 / 64e9;
    assert!(close(o.cpu_step_s, cpu, 1e-12));
    assert!(close(o.d2h_bytes[1], 4.0 * P_DEV, 1e-12));
    assert!(o.d2h_bytes[1] / 64e9 < o.overlappable_s[1]);
    assert!(close(o.exposed_s, cpu + up, 1e-9), "{}", o.exposed_s);
    // the bounds add the exposed time; the prediction says it extrapolates
    assert!(close(
        off.step_time_lower_s.get() - base.step_time_lower_s.get(),
        cpu + up,
        1e-9
    ));
    let p = off.predicted.expect("predicted");
    let out = p.outside_fitted_range.expect("range");
    assert!(out.iter().any(|r| r.input == "offload"), "{out:?}");
    assert!(p.offload_exposed_s.is_some());
    // defaults print nothing new
    let j = serde_json::to_value(&base).unwrap();
    assert!(j.get("offload").is_none() && j["config"].get("offload").is_none());
}

#[test]
fn activation_offload_keeps_two_layers_and_streams_every_microbatch() {
    let base = llama70b("");
    let off = llama70b(r#"offload = ["activations"]"#);
    // pp = 1: one micro-batch in flight; HBM keeps 2 of its 80 layers
    let a = base.memory_per_device.activations_bytes.get();
    assert!(close(
        off.memory_per_device.activations_bytes.get(),
        2.0 * a / 80.0,
        1e-12
    ));
    let o = off.offload.unwrap();
    assert!(close(o.host_bytes, a, 1e-12));
    // each of the 64 micro-batches writes its activations out and reads them back
    assert!(close(o.d2h_bytes[0], 64.0 * a, 1e-12));
    assert!(close(o.h2d_bytes[1], 64.0 * a, 1e-12));
    // exposed = what the link cannot move under each window
    let w = 64e9;
    let want = (64.0 * a / w - o.overlappable_s[0]).max(0.0)
        + (64.0 * a / w - o.overlappable_s[1]).max(0.0);
    assert!(close(o.exposed_s, want, 1e-9));
}

#[test]
fn host_capacity_is_part_of_the_fit_verdict() {
    // llama-3.1-405b on 8 H100 with everything offloaded: 405e9/8 params per
    // GPU × (2 weights + 12 optimizer + 4 grad copy) ≈ 911 GB > 256 GB of host
    let r = train(
        r#"
[model]
name = "llama-3.1-405b"
[hardware]
chip = "h100"
chips = 8
[training]
batch_tokens = 32768
seq_len = 4096
offload = ["all"]
[parallelism]
tp = 8
microbatches = 8
"#,
    );
    let o = r.offload.unwrap();
    assert!(o.host_bytes > o.host_capacity_bytes);
    assert!(!r.fits);
}

#[test]
fn offload_needs_host_figures_and_train_refuses_auto() {
    for (chip, off) in [("tpu-v5p", r#"["optimizer"]"#), ("h100", r#"["auto"]"#)] {
        let sc = Scenario::parse(
            &format!(
                "[model]\nname = \"llama-2-7b\"\n[hardware]\nchip = \"{chip}\"\nchips = 8\n[training]\noffload = {off}\n"
            ),
            "t.toml",
        )
        .unwrap();
        assert!(resolve(&sc, Catalog::builtin()).is_err(), "{chip} {off}");
    }
    // an unknown part is refused when the file is read, naming its line and field
    let bad = Scenario::parse(
        "[model]\nname = \"llama-2-7b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n[training]\noffload = [\"gpu\"]\n",
        "t.toml",
    )
    .expect_err("an unknown offload part")
    .to_string();
    assert!(
        bad.contains("t.toml:7") && bad.contains("training.offload"),
        "{bad}"
    );
}

/// Mixtral on 64 H100s with full recompute and no ZeRO spelled out (the
/// derivations below count on both; Megatron's defaults would be no
/// recompute and the distributed optimizer).
fn mixtral(etp: &str) -> TrainReport {
    train_on(
        "mixtral-8x7b",
        "h100",
        64,
        &format!(
            r#"
[training]
batch_tokens = 4194304
seq_len = 4096
remat = "full"
[parallelism]
tp = 8
ep = 8
zero = 0
microbatches = 16
sequence_parallel = true
{etp}
"#
        ),
    )
}

#[test]
fn etp_one_keeps_experts_whole_and_drops_their_tp_collectives() {
    let base = mixtral("");
    let same = mixtral("etp = 8");
    let whole = mixtral("etp = 1");
    // etp = tp is today's layout, number for number
    assert_eq!(base.memory_per_device, same.memory_per_device);
    assert_eq!(base.step_time_lower_s, same.step_time_lower_s);
    assert_eq!(base.comms, same.comms);
    // Mixtral-8x7B: D = 4096, F_e = 14336, E = 8 experts of 3·D·F_e
    // (gated MLP) in each of L = 32 layers: P_exp = 32·8·3·4096·14336 =
    // 45,097,156,608. Per device: P_exp/(etp·ep) — etp = 8: /64 =
    // 704,643,072; etp = 1: /8 = 5,637,144,576 (each rank holds one whole
    // expert of every layer). The difference, 4,932,501,504, is what etp = 1
    // adds per device (no ZeRO: dp does not shard weights).
    let p_exp = 45_097_156_608.0;
    // meshplan's own parameter count agrees with the hand value
    let arch = &Catalog::builtin().model("mixtral-8x7b").unwrap().arch;
    let pc = meshplan_core::model::params::count(arch, &mut meshplan_core::trace::NoTrace);
    assert_eq!(pc.experts_routed as f64, p_exp);
    assert!(close(
        whole.params_per_device - base.params_per_device,
        p_exp / 8.0 - p_exp / 64.0,
        1e-12
    ));
    // TP: 2 (AG, RS) pairs per layer (attention, MLP), forward doubled by
    // full remat: 2·32·2 = 128 all-gathers; whole experts leave only the
    // attention pair of each of the 32 MoE layers: 32·2 = 64
    let tp_fwd = |r: &TrainReport| {
        r.comms
            .iter()
            .find(|c| c.axis.name() == "tp" && c.what.contains("forward"))
            .map(|c| c.count)
    };
    assert_eq!(tp_fwd(&base), Some(128));
    assert_eq!(tp_fwd(&whole), Some(64));
    // the ep group moves inside the node (the 8 ranks tp used): NVLink
    // instead of InfiniBand for the same bytes
    let a2a = |r: &TrainReport| {
        r.comms
            .iter()
            .find(|c| c.axis.name() == "ep")
            .map(|c| (c.bytes.get(), c.seconds.get()))
            .unwrap()
    };
    assert_eq!(a2a(&base).0, a2a(&whole).0);
    assert!(a2a(&whole).1 < a2a(&base).1 / 4.0);
    // FLOPs per step do not depend on the layout
    assert_eq!(base.flops_per_step, whole.flops_per_step);
    assert!(whole.degrees.to_string().ends_with("etp=1"));
    // the calibrated prediction times the whole-expert layout too: SP has 8
    // TP collectives per layer (AG + RS around attention and the MLP,
    // forward and backward), × 1.5 with full remat = 12; whole experts drop
    // the MLP's half in every MoE layer (Mixtral: all 32, no shared
    // experts): 4 × 1.5 = 6
    let pb = base.predicted.as_ref().expect("etp = tp predicted");
    let pw = whole.predicted.as_ref().expect("etp = 1 predicted");
    assert_eq!(pb.overlap.exposure.tp_collectives_per_layer, 12.0);
    assert_eq!(pw.overlap.exposure.tp_collectives_per_layer, 6.0);
    // the all-to-all runs on NVLink instead of InfiniBand, the same bytes
    assert!(pw.time_breakdown_s.ep_comm < pb.time_breakdown_s.ep_comm / 4.0);
    // no fitted run had whole experts: the prediction says so
    let etp_flag = |p: &meshplan_core::step::predict::Predicted| {
        p.outside_fitted_range
            .iter()
            .flatten()
            .any(|o| o.input == "etp")
    };
    assert!(etp_flag(pw) && !etp_flag(pb));
}

#[test]
fn etp_other_than_one_or_tp_is_refused() {
    let sc = Scenario::parse(
        "[model]\nname = \"mixtral-8x7b\"\n[hardware]\nchip = \"h100\"\nchips = 64\n[parallelism]\ntp = 8\nep = 8\netp = 2\n",
        "t.toml",
    )
    .unwrap();
    let e = resolve(&sc, Catalog::builtin()).unwrap_err().to_string();
    assert!(e.contains("etp"), "{e}");
}

#[test]
fn weight_offload_keeps_two_layers_and_fetches_them_every_pass() {
    let base = llama70b("");
    let off = llama70b(r#"offload = ["weights"]"#);
    // bf16 weights of the device, W = 2·P_dev; HBM keeps 2 of the 80 layers
    let w = 2.0 * P_DEV;
    assert!(close(base.memory_per_device.params_bytes.get(), w, 1e-12));
    assert!(close(
        off.memory_per_device.params_bytes.get(),
        2.0 * w / 80.0,
        1e-12
    ));
    let o = off.offload.unwrap();
    assert!(close(o.host_bytes, w, 1e-12));
    // every micro-batch's forward and backward copy the weights in: W·64
    // per window; the optimizer stays on the GPU, so the updated weights go
    // back out once after the step
    assert!(close(o.h2d_bytes[0], 64.0 * w, 1e-12));
    assert!(close(o.h2d_bytes[1], 64.0 * w, 1e-12));
    assert!(close(o.d2h_bytes[2], w, 1e-12));
    assert_eq!(o.cpu_step_s, 0.0);
}

#[test]
fn plan_search_tries_offload_only_when_asked() {
    use meshplan_core::mesh::Topology;
    use meshplan_core::parallelism::Offload;
    use meshplan_core::planner::TrainSearch;
    let r = llama70b("");
    let cat = Catalog::builtin();
    let spec = cat.model("llama-2-70b").unwrap();
    let chip = cat.chip("h100").unwrap();
    let mut s = TrainSearch::new(spec, chip, Topology::gpus(8, 8), r.config);
    s.space.permute_torus = false;
    let plain = s.run();
    assert!(plain.plans.iter().all(|f| f.choice.offload.is_none()));
    s.space.offloads = Offload::all_combinations().collect();
    let auto = s.run();
    // every combination is a candidate of each plan: 8 times the candidates,
    // and offloading frees HBM, so at least as many plans fit
    assert_eq!(auto.candidates, 8 * plain.candidates);
    assert!(auto.fitting > plain.fitting);
    let best = auto.plans[0];
    let rep = s.report(&auto, &best);
    assert_eq!(rep.offload.is_some(), best.choice.offload.any());
}

#[test]
fn explain_derives_the_offload_terms() {
    let sc = Scenario::parse(
        "[model]\nname = \"llama-2-7b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n[training]\noffload = [\"optimizer\", \"activations\"]\n",
        "t.toml",
    )
    .unwrap();
    let mut rec = meshplan_core::trace::Recorder::default();
    let r = resolve(&sc, Catalog::builtin()).unwrap().analyze(&mut rec);
    let o = r.offload.expect("offload");
    let ids: Vec<&str> = rec.steps().iter().map(|s| s.id.as_str()).collect();
    for id in [
        "train.memory.offload",
        "train.offload.time",
        "train.step_time_offload",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let step = rec
        .steps()
        .iter()
        .find(|s| s.id == "train.offload.time")
        .unwrap();
    assert_eq!(step.value, o.exposed_s);
}
