//! One plan's memory, FLOPs, pipeline bubble, collectives and step-time
//! bounds: the evaluation `analyze` reports (tracing on) and the planner
//! ranks (tracing off). Both call [`evaluate`]; there is no second copy.

use super::comms::{step_comms, CommSink};
use super::context::{MeshCtx, TrainCtx};
use crate::accounting::StepFlops;
use crate::memory::{per_device_staged, MemoryBreakdown, MemoryQuery, StageSplit};
use crate::parallelism::pipeline::bubble_fraction_of;
use crate::parallelism::{Choice, LogicalAxis};
use crate::trace::{Step, Tracer};

/// What an evaluation finds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Eval {
    /// Memory of the busiest device.
    pub memory: MemoryBreakdown,
    /// total ≤ usable HBM.
    pub fits: bool,
    /// FLOPs per step (model under the convention, recompute, hardware).
    pub flops: StepFlops,
    /// T_math = hardware FLOPs / (N·C).
    pub t_math: f64,
    /// Bubble fraction (p−1)/(m·v+p−1).
    pub bubble_fraction: f64,
    /// T_bubble = T_math·bubble/(1 − bubble).
    pub t_bubble: f64,
    /// Slowest axis' communication.
    pub t_comms: f64,
    /// Σ communication.
    pub t_comms_sum: f64,
    /// max(T_math + T_bubble, T_comms).
    pub lower: f64,
    /// T_math + T_bubble + Σ comms.
    pub upper: f64,
    /// The slowest axis when communication bounds the step.
    pub comm_bound_axis: Option<LogicalAxis>,
    /// Host-link traffic and exposed time when state is offloaded (its
    /// exposed seconds are in `lower` and `upper`).
    pub offload: Option<super::offload::OffloadTime>,
}

/// The pipeline stages of a placed mesh: the same for every choice of its
/// degree tuple, so the planner works them out once per tuple
/// ([`before_comms_staged`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeshStages {
    /// Layers of the busiest stage as the step's compute sees it.
    l_stage: u64,
    /// The memory model's split (its busiest stage).
    memory: StageSplit,
}

impl MeshStages {
    /// The stages of `mesh` under `ctx`'s model and configuration.
    pub fn of(ctx: &TrainCtx, mesh: &MeshCtx) -> MeshStages {
        // Stages run in lock-step, so an uneven split runs at its busiest
        // stage's pace: ⌈L/pp⌉ layers where the balanced split has L/pp, or
        // the most a stage holds under the first/last counts the user stated.
        let (l, pp) = (ctx.spec.arch.n_layers.max(1), mesh.deg.pp.max(1));
        let l_stage = match ctx.base.stage_layers.split(l, pp, 1) {
            Ok(Some((first, middle, last))) => first.max(middle).max(last),
            _ => l.div_ceil(pp),
        };
        MeshStages {
            l_stage,
            memory: StageSplit::of(
                &ctx.spec.arch,
                mesh.deg.pp,
                ctx.base.framework,
                ctx.base.stage_layers,
            ),
        }
    }
}

/// T_math and the bubble of plan `c`: (T_math, bubble fraction, T_bubble).
fn compute_time<T: Tracer>(
    ctx: &TrainCtx,
    mesh: &MeshCtx,
    c: &Choice,
    l_stage: u64,
    tr: &mut T,
) -> (f64, f64, f64) {
    let f = ctx.flops[c.remat.index()];
    let (l, pp) = (ctx.spec.arch.n_layers.max(1), mesh.deg.pp.max(1));
    let imbalance = (l_stage * pp) as f64 / l as f64;
    let t_math = f.hardware * imbalance / (mesh.chips * ctx.peak);
    tr.record(|| {
        Step::new(
            "train.flops",
            "FLOPs per step",
            "model FLOPs (convention) + remat recompute",
        )
        .bind("model", f.model, "FLOPs")
        .bind("recompute", f.recompute, "FLOPs")
        .bind("B", ctx.base.batch_tokens as f64, "tokens")
        .result(f.hardware, "FLOPs")
        .source("How To Scale Your Model ch4; docs/training.md (FLOP conventions)")
    });
    tr.record(|| {
        Step::new("train.t_math", "T_math", "FLOPs·(L_stage·pp/L)/(N·C)")
            .bind("L", l as f64, "layers")
            .bind("L_stage", l_stage as f64, "layers")
            .bind("pp", pp as f64, "stages")
            .bind("N", mesh.chips, "chips")
            .bind("C", ctx.peak, "FLOP/s")
            .result(t_math, "s")
    });
    let b = bubble_fraction_of(c.schedule, mesh.deg.pp, c.microbatches, c.chunks());
    let t_bubble = if b < 1.0 { t_math * b / (1.0 - b) } else { 0.0 };
    if pp > 1 {
        let formula = if c.schedule == crate::parallelism::Schedule::DualPipe {
            "b = (p/2 − 1)·(F&B + B − 3W) micro-batch times at the book's F : B : W = 1/3 : 2/3 : 1/3, F&B = F + B, i.e. (p/2 − 1)·2/3 (DeepSeek-V3 Table 2); bubble = b/(m+b); T_bubble = T_math·bubble/(1−bubble)"
        } else {
            "b = (p−1)/v (m ≥ p), (p−m) + (m−1)/v (m < p) micro-batch times; bubble = b/(m+b); T_bubble = T_math·bubble/(1−bubble)"
        };
        tr.record(|| {
            Step::new("train.bubble", "Pipeline bubble", formula)
                .bind("p", pp as f64, "stages")
                .bind("m", c.microbatches as f64, "micro-batches")
                .bind("v", c.chunks() as f64, "chunks")
                .bind("bubble", b, "")
                .result(t_bubble, "s")
                .source("Narayanan et al. 2021 §2.2; docs/training.md (Production layouts)")
        });
    }
    (t_math, b, t_bubble)
}

/// What an evaluation knows before it costs the collectives: memory and
/// the compute time. The planner reads it to skip the collectives of a
/// plan that can no longer matter (no HBM fit and behind the rejected
/// plans it keeps; or behind the K best): the step's lower bound is at
/// least [`BeforeComms::compute_s`], whatever the collectives cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BeforeComms {
    q: MemoryQuery,
    /// Memory of the busiest device.
    pub memory: MemoryBreakdown,
    t_math: f64,
    bubble: f64,
    t_bubble: f64,
}

impl BeforeComms {
    /// T_math + T_bubble: a lower bound of [`Eval::lower`] (which adds the
    /// slowest axis' excess and offload's exposed time, both ≥ 0).
    pub fn compute_s(&self) -> f64 {
        self.t_math + self.t_bubble
    }
    /// Whether the busiest device's memory is within the usable HBM (a
    /// plan that is not cannot fit, offloaded or not: [`Eval::fits`]).
    pub fn within_hbm(&self, ctx: &TrainCtx) -> bool {
        self.memory.total_bytes.get() <= ctx.hbm
    }
}

/// The first half of [`evaluate`]: memory and compute (traced in the
/// order the report shows them).
pub fn before_comms<T: Tracer>(
    ctx: &TrainCtx,
    mesh: &MeshCtx,
    c: &Choice,
    tr: &mut T,
) -> BeforeComms {
    before_comms_staged(ctx, mesh, c, &MeshStages::of(ctx, mesh), tr)
}

/// [`before_comms`] with the mesh's stages worked out already
/// (`stages` = [`MeshStages::of`] the same context and mesh).
pub fn before_comms_staged<T: Tracer>(
    ctx: &TrainCtx,
    mesh: &MeshCtx,
    c: &Choice,
    stages: &MeshStages,
    tr: &mut T,
) -> BeforeComms {
    let cfg = c.config(&ctx.base, mesh.deg);
    let q = MemoryQuery::from_config(&cfg);
    let memory = per_device_staged(&ctx.spec.arch, &ctx.pc, &q, &ctx.cal, &stages.memory, tr);
    let (t_math, bubble, t_bubble) = compute_time(ctx, mesh, c, stages.l_stage, tr);
    BeforeComms {
        q,
        memory,
        t_math,
        bubble,
        t_bubble,
    }
}

/// Evaluate plan `c` on `mesh`; every collective goes to `sink` as well.
pub fn evaluate<T: Tracer, S: CommSink>(
    ctx: &TrainCtx,
    mesh: &MeshCtx,
    c: &Choice,
    tr: &mut T,
    sink: &mut S,
) -> Eval {
    let b = before_comms(ctx, mesh, c, tr);
    with_comms(ctx, mesh, c, b, tr, sink)
}

/// The second half of [`evaluate`]: the collectives, offload and the bounds.
pub fn with_comms<T: Tracer, S: CommSink>(
    ctx: &TrainCtx,
    mesh: &MeshCtx,
    c: &Choice,
    b: BeforeComms,
    tr: &mut T,
    sink: &mut S,
) -> Eval {
    let BeforeComms {
        q,
        memory,
        t_math,
        bubble,
        t_bubble,
    } = b;
    let totals = step_comms(ctx, mesh, c, tr, sink);
    let (worst, t_comms) = totals.slowest();
    let compute = b.compute_s();
    let offload = offload_time(ctx, &q, &memory, c, t_math, tr);
    let exposed = offload.map_or(0.0, |o| o.exposed_s);
    let lower = compute.max(t_comms) + exposed;
    let upper = compute + totals.sum + exposed;
    tr.record(|| {
        Step::new(
            "train.step_time",
            "Step time bounds",
            "lower = max(T_math + T_bubble, max_axis T_comms); upper = T_math + T_bubble + Σ T_comms",
        )
        .bind("T_math", t_math, "s")
        .bind("T_bubble", t_bubble, "s")
        .bind("T_comms", t_comms, "s")
        .bind("upper", upper, "s")
        .result(lower, "s")
        .source("How To Scale Your Model ch1 (rooflines), ch5")
    });
    if let Some(o) = &offload {
        tr.record(|| {
            Step::new(
                "train.step_time_offload",
                "Step time bounds with offload",
                "lower = max(T_math + T_bubble, max_axis T_comms) + T_offload; upper = T_math + T_bubble + Σ T_comms + T_offload",
            )
            .bind("T_offload", o.exposed_s, "s")
            .bind("upper", upper, "s")
            .result(lower, "s")
        });
    }
    Eval {
        fits: b.within_hbm(ctx) && offload.map_or(true, |o| o.host_bytes <= o.host_capacity_bytes),
        memory,
        flops: ctx.flops[c.remat.index()],
        t_math,
        bubble_fraction: bubble,
        t_bubble,
        t_comms,
        t_comms_sum: totals.sum,
        lower,
        upper,
        comm_bound_axis: if t_comms > compute { worst } else { None },
        offload,
    }
}

/// The exposed host-link time of the offloaded parts (none offloaded:
/// `None`, and the step is what it was).
fn offload_time<T: Tracer>(
    ctx: &TrainCtx,
    q: &crate::memory::MemoryQuery,
    memory: &MemoryBreakdown,
    c: &Choice,
    t_math: f64,
    tr: &mut T,
) -> Option<super::offload::OffloadTime> {
    let off = memory.offload.as_ref()?;
    let f = ctx.flops[c.remat.index()];
    // the forward is a third of the model FLOPs; recompute runs in the backward
    let fwd_share = if f.hardware > 0.0 {
        f.model / 3.0 / f.hardware
    } else {
        1.0 / 3.0
    };
    let [_, bytes_g, _] = crate::memory::state_bytes_per_param(q, &ctx.spec.arch, &ctx.cal);
    Some(super::offload::time(
        ctx.chip,
        q,
        off,
        bytes_g,
        t_math,
        fwd_share,
        c.microbatches,
        tr,
    ))
}
