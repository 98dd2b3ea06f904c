//! The report of one training configuration ([`TrainReport`], the JSON of
//! `meshplan train`) and [`analyze`], which builds it from one
//! [`evaluate`] call plus the book's rules.

use serde::Serialize;

use super::comms::CommEntry;
use super::context::{MeshCtx, TrainCtx};
use super::evaluate::{evaluate, Eval};
use super::feasibility::{choice_problems_with, degree_problems};
use super::rules::{book_rules, Rules};
use super::run_time::RunTime;
use crate::collectives::AxisPlacement;
use crate::hardware::Chip;
use crate::memory::{
    book_elems_per_token_layer, state_bytes_per_param, MemoryBreakdown, MemoryQuery,
};
use crate::mesh::{Mesh, Topology};
use crate::model::ModelSpec;
use crate::parallelism::{Degrees, FlopConvention, Framework, TrainConfig};
use crate::step::predict::{self, ActiveProfile};
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, Flops, Seconds};

/// Full result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrainReport {
    /// Model name.
    pub model: String,
    /// Chip name.
    pub chip: String,
    /// Mesh description.
    pub mesh: String,
    /// Chips.
    pub chips: u64,
    /// Everything divides and fits the topology.
    pub feasible: bool,
    /// Why not.
    pub reasons: Vec<String>,
    /// Non-fatal remarks.
    pub notes: Vec<String>,
    /// The framework's defaults chosen where the user gave none, one phrase
    /// each (`train` only; empty under the book's accounting).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chosen: Vec<String>,
    /// Degrees.
    pub degrees: Degrees,
    /// The plan's per-degree choices and workload.
    pub config: TrainConfig,
    /// Memory accounting conventions.
    pub framework: Framework,
    /// How FLOPs are counted (`flops_per_step`, MFU).
    pub flop_convention: FlopConvention,
    /// Exact parameters.
    pub params: u64,
    /// Active parameters per token.
    pub params_active: u64,
    /// Memory of the busiest device.
    pub memory_per_device: MemoryBreakdown,
    /// Usable HBM per device.
    pub hbm_bytes: Bytes,
    /// total ≤ usable HBM.
    pub fits: bool,
    /// HBM − total (negative when it does not fit).
    pub memory_margin_bytes: f64,
    /// How sure the fit verdict is: the band of the memory model's errors
    /// around the peak, and what would change the answer.
    pub memory_verdict: crate::memory::MemoryVerdict,
    /// Unsharded params + grads + optimizer + activations of the whole job.
    pub memory_total_unsharded_bytes: Bytes,
    /// Parameters one device holds (after tp/pp/ep and ZeRO-3/FSDP sharding).
    pub params_per_device: f64,
    /// Optimizer-state bytes per parameter (moments + fp32 master copy).
    pub optimizer_bytes_per_param: f64,
    /// HBM of the whole slice: usable HBM per chip × chips.
    pub slice_hbm_bytes: Bytes,
    /// Model FLOPs to train on `train_tokens` (flops_per_step · train_tokens / B).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_flops: Option<Flops>,
    /// Model FLOPs per step under `flop_convention`.
    pub flops_per_step: Flops,
    /// Hardware FLOPs (with remat recompute).
    pub hardware_flops_per_step: Flops,
    /// T_math = hardware FLOPs / (N·C).
    pub t_math_s: Seconds,
    /// Pipeline bubble time.
    pub t_bubble_s: Seconds,
    /// Bubble fraction (p−1)/(m·v+p−1).
    pub bubble_fraction: f64,
    /// T_comms = max over axes.
    pub t_comms_s: Seconds,
    /// Σ of all collectives.
    pub t_comms_sum_s: Seconds,
    /// Collectives.
    pub comms: Vec<CommEntry>,
    /// The step by block of the model: FLOPs, HBM bytes, roofline time
    /// per device ([`super::blocks`]).
    pub blocks: Vec<super::blocks::StepBlock>,
    /// "compute" or "communication (axis)".
    pub bound: String,
    /// Roofline lower bound: max(T_math + T_bubble, T_comms).
    pub step_time_lower_s: Seconds,
    /// Roofline without overlap: T_math + T_bubble + Σ comms.
    pub step_time_upper_s: Seconds,
    /// Model FLOPs / (N·C·MFU) when an MFU is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_time_at_mfu_s: Option<Seconds>,
    /// MFU implied by the lower bound.
    pub mfu_at_lower_bound: f64,
    /// B / step time (lower bound, or at MFU if given).
    pub tokens_per_s: f64,
    /// Time for `train_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_time_s: Option<Seconds>,
    /// Chip-hours for `train_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chip_hours: Option<f64>,
    /// USD for `train_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Rules and verdicts.
    pub rules: Rules,
    /// Minimum chips for memory, the data-parallel limit, checkpoint sizes.
    pub sizing: super::sizing::Sizing,
    /// Calibrated prediction, when the chip has an efficiency profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<predict::Predicted>,
    /// Why there is no prediction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction_note: Option<String>,
    /// Host memory and host-link time of the offloaded state (its exposed
    /// seconds are in the step-time bounds); absent without offload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<super::offload::OffloadTime>,
}

const CH5_SRC: &str = "How To Scale Your Model ch5 (training)";

/// Analyze one training configuration (roofline bounds only).
pub fn analyze<T: Tracer>(
    spec: &ModelSpec,
    chip: &Chip,
    topo: &Topology,
    cfg: &TrainConfig,
    tr: &mut T,
) -> TrainReport {
    analyze_with(spec, chip, topo, cfg, None, tr)
}

/// Analyze one configuration; with an efficiency profile, its memory
/// calibration applies (framework accounting) and the calibrated prediction
/// is attached.
pub fn analyze_with<T: Tracer>(
    spec: &ModelSpec,
    chip: &Chip,
    topo: &Topology,
    cfg: &TrainConfig,
    profile: Option<&ActiveProfile>,
    tr: &mut T,
) -> TrainReport {
    let cal = profile.map(|p| p.profile.memory_calibration());
    let ctx = TrainCtx::new(spec, chip, cfg, cal, tr);
    let mesh = Mesh::build(chip, topo, cfg.degrees);
    let (reasons, notes) = problems(spec, &mesh, cfg);
    let mctx = if reasons.is_empty() {
        MeshCtx::from_mesh(&mesh)
    } else {
        // an infeasible plan has no collectives to cost
        MeshCtx {
            placement: [AxisPlacement::Trivial; 7],
            ..MeshCtx::from_mesh(&mesh)
        }
    };
    let mut comms = Vec::new();
    let e = evaluate(&ctx, &mctx, &cfg.choice(), tr, &mut comms);
    let mut r = assemble(&ctx, &mesh, topo, e, comms, tr);
    r.reasons = reasons;
    r.notes = notes;
    if cfg.offload.any() {
        r.reasons.extend(super::offload::unsupported(chip));
    }
    r.feasible = r.reasons.is_empty();
    r.memory_verdict = crate::memory::verdict::verdict(
        &spec.arch,
        &ctx.pc,
        &MemoryQuery::from_config(cfg),
        &ctx.cal,
        r.memory_per_device.total_bytes.get(),
        ctx.hbm,
    );
    predict::attach(&mut r, spec, chip, cfg, topo, profile);
    if r.feasible {
        r.blocks = super::blocks::step_blocks(
            &spec.arch,
            &ctx.pc,
            chip,
            cfg,
            profile.map(|p| &p.profile),
            r.predicted.as_ref().map(|p| &p.block_times_s),
        );
        super::blocks::record(&r.blocks, mctx.chips, tr);
        if let Some(p) = &r.predicted {
            super::blocks::record_predicted(&r.blocks, &p.time_breakdown_s, tr);
        }
    }
    if let Some(p) = &r.predicted {
        predict::record(p, tr);
    }
    r
}

/// Reasons the plan cannot run, and remarks on how the batch splits.
fn problems(spec: &ModelSpec, mesh: &Mesh, cfg: &TrainConfig) -> (Vec<String>, Vec<String>) {
    let a = &spec.arch;
    let deg = cfg.degrees;
    let mut reasons = mesh.reasons.clone();
    let mut notes = mesh.notes.clone();
    let found = degree_problems(a, cfg.seq_len, &deg).chain(choice_problems_with(
        a,
        &deg,
        &cfg.choice(),
        cfg.stage_layers,
    ));
    for p in found {
        if p.runs_under(cfg.framework) {
            notes.push(format!("{p} ({} runs it, slowly)", cfg.framework));
        } else {
            reasons.push(p.to_string());
        }
    }
    let d = deg.at_least_one();
    if d.fsdp > 1 && d.dp > 1 && cfg.zero >= 3 {
        notes.push(format!(
            "zero 3 with dp {} × fsdp {} shards over all {} data-parallel ranks: the plan fsdp {} (hybrid sharding is zero ≤ 2 across the dp replicas)",
            d.dp, d.fsdp, d.data(), d.data()
        ));
    }
    let seqs = cfg.batch_tokens / cfg.seq_len.max(1);
    let data = d.data();
    if cfg.seq_len == 0 || cfg.batch_tokens % cfg.seq_len != 0 {
        notes.push(format!(
            "batch of {} tokens is not a whole number of {}-token sequences",
            cfg.batch_tokens, cfg.seq_len
        ));
    }
    if seqs % data != 0 {
        notes.push(format!(
            "{seqs} sequences do not split evenly over dp·fsdp = {data}"
        ));
    }
    if cfg.microbatches > 1 && seqs / data < cfg.microbatches {
        notes.push(format!(
            "{} microbatches but only {} sequences per data-parallel replica",
            cfg.microbatches,
            seqs / data
        ));
    }
    (reasons, notes)
}

/// Unsharded parameters, gradients, optimizer state and (unsharded, book)
/// activations of the whole job.
fn unsharded<T: Tracer>(ctx: &TrainCtx, tr: &mut T) -> f64 {
    let cfg = &ctx.base;
    let a = &ctx.spec.arch;
    let p = ctx.pc.total as f64;
    let state: f64 = state_bytes_per_param(&MemoryQuery::from_config(cfg), a, &ctx.cal)
        .iter()
        .sum();
    let e = match cfg.checkpoints_per_layer {
        Some(k) => crate::memory::checkpoint_elems_per_token_layer(a, k, 1, false),
        None => book_elems_per_token_layer(a, cfg.remat, 1, false),
    };
    let total = p * state
        + cfg.batch_tokens as f64
            * a.n_layers as f64
            * e
            * cfg.activation_dtype.bytes_per_element();
    tr.record(|| {
        Step::new(
            "train.memory.unsharded",
            "Unsharded memory of the whole job",
            "P·(bytes_p + bytes_g + bytes_opt) + B·L·e·bytes_a",
        )
        .bind("P", p, "params")
        .bind("B", cfg.batch_tokens as f64, "tokens")
        .result(total, "B")
    });
    total
}

/// The step time at the given MFU, and what the quoted step time (at the
/// MFU, else the lower bound) means for the run.
struct Throughput {
    at_mfu: Option<f64>,
    run: RunTime,
}

fn throughput<T: Tracer>(ctx: &TrainCtx, n: f64, e: &Eval, tr: &mut T) -> Throughput {
    let cfg = &ctx.base;
    let model = e.flops.model;
    let at_mfu = cfg
        .mfu
        .filter(|m| *m > 0.0)
        .map(|m| model / (n * ctx.peak * m));
    if let Some(t) = at_mfu {
        tr.record(|| {
            Step::new(
                "train.step_time_at_mfu",
                "Step time at MFU",
                "FLOPs/(N·C·MFU)",
            )
            .bind("FLOPs", model, "FLOPs")
            .bind("MFU", cfg.mfu.unwrap_or(0.0), "")
            .result(t, "s")
        });
    }
    Throughput {
        at_mfu,
        run: RunTime::at_step(at_mfu.unwrap_or(e.lower), cfg, n, ctx.chip),
    }
}

/// The book's rules, with the training time on the most chips pure FSDP
/// can use when an MFU and a token budget are given.
fn rules_with_time<T: Tracer>(
    ctx: &TrainCtx,
    mesh: &Mesh,
    train_flops: Option<f64>,
    tr: &mut T,
) -> Rules {
    let cfg = &ctx.base;
    let a = &ctx.spec.arch;
    let q = MemoryQuery::from_config(cfg);
    let [pb, _, ob] = state_bytes_per_param(&q, a, &ctx.cal);
    let mut rules = book_rules(
        ctx.spec,
        ctx.chip,
        mesh,
        cfg,
        ctx.pc.total as f64,
        pb + ob,
        tr,
    );
    if let (Some(f), Some(m)) = (train_flops, cfg.mfu.filter(|m| *m > 0.0)) {
        let chips_max = rules.fsdp_max_chips;
        let t = f / (chips_max * ctx.peak * m);
        tr.record(|| {
            Step::new(
                "rules.fsdp_max_chips_train_time",
                "Training time on the most chips pure FSDP can use",
                "FLOPs_train/(N_max·C·MFU)",
            )
            .bind("FLOPs_train", f, "FLOPs")
            .bind("N_max", chips_max, "chips")
            .bind("C", ctx.peak, "FLOP/s")
            .bind("MFU", m, "")
            .result(t, "s")
            .source(CH5_SRC)
        });
        rules.fsdp_max_chips_train_time_s = Some(Seconds::new(t));
    }
    rules
}

fn assemble<T: Tracer>(
    ctx: &TrainCtx,
    mesh: &Mesh,
    topo: &Topology,
    e: Eval,
    comms: Vec<CommEntry>,
    tr: &mut T,
) -> TrainReport {
    let cfg = &ctx.base;
    let n = mesh.chips.max(1) as f64;
    let tp = throughput(ctx, n, &e, tr);
    let train_flops = cfg
        .train_tokens
        .map(|t| e.flops.model * t as f64 / (cfg.batch_tokens as f64).max(1.0));
    let rules = rules_with_time(ctx, mesh, train_flops, tr);
    let unsharded = unsharded(ctx, tr);
    let [_, _, ob] =
        state_bytes_per_param(&MemoryQuery::from_config(cfg), &ctx.spec.arch, &ctx.cal);
    let total = e.memory.total_bytes.get();
    TrainReport {
        model: ctx.spec.name.clone(),
        chip: ctx.chip.name.clone(),
        mesh: topo.describe(),
        chips: mesh.chips,
        feasible: true,
        reasons: Vec::new(),
        notes: Vec::new(),
        chosen: Vec::new(),
        degrees: cfg.degrees,
        config: *cfg,
        framework: cfg.framework,
        flop_convention: cfg.flops,
        params: ctx.pc.total,
        params_active: ctx.pc.active,
        memory_per_device: e.memory,
        hbm_bytes: Bytes::new(ctx.hbm),
        fits: e.fits,
        memory_margin_bytes: ctx.hbm - total,
        memory_verdict: crate::memory::verdict::judge(total, ctx.hbm),
        memory_total_unsharded_bytes: Bytes::new(unsharded),
        params_per_device: e.memory.params_per_device,
        optimizer_bytes_per_param: ob,
        slice_hbm_bytes: Bytes::new(ctx.hbm * n),
        train_flops: train_flops.map(Flops::new),
        flops_per_step: Flops::new(e.flops.model),
        hardware_flops_per_step: Flops::new(e.flops.hardware),
        t_math_s: Seconds::new(e.t_math),
        t_bubble_s: Seconds::new(e.t_bubble),
        bubble_fraction: e.bubble_fraction,
        t_comms_s: Seconds::new(e.t_comms),
        t_comms_sum_s: Seconds::new(e.t_comms_sum),
        comms,
        blocks: Vec::new(),
        bound: match e.comm_bound_axis {
            Some(ax) => format!("communication ({})", ax.name()),
            None => "compute".to_string(),
        },
        step_time_lower_s: Seconds::new(e.lower),
        step_time_upper_s: Seconds::new(e.upper),
        step_time_at_mfu_s: tp.at_mfu.map(Seconds::new),
        mfu_at_lower_bound: crate::accounting::mfu(e.flops.model, n, ctx.peak, e.lower),
        tokens_per_s: tp.run.tokens_per_s,
        train_time_s: tp.run.train_time_s.map(Seconds::new),
        chip_hours: tp.run.chip_hours,
        cost_usd: tp.run.cost_usd,
        rules,
        sizing: super::sizing::sizing(
            &ctx.spec.arch,
            ctx.chip,
            cfg,
            super::sizing::JobMemory {
                params: ctx.pc.total as f64,
                state_bytes_per_param: state_bytes_per_param(
                    &MemoryQuery::from_config(cfg),
                    &ctx.spec.arch,
                    &ctx.cal,
                ),
                total_bytes: unsharded,
            },
            tr,
        ),
        predicted: None,
        prediction_note: None,
        offload: e.offload,
    }
}
