//! An allocation-free mirror of [`crate::training::analyze`] for the search's
//! inner loop.
//!
//! [`TrainCtx`] holds everything that depends only on the model, the chip and
//! the fixed part of the configuration (dtypes, optimizer, batch, sequence);
//! [`TupleCtx`] everything that depends on the degrees and the topology (the
//! placed mesh, computed once per degree tuple with [`Mesh::build`]);
//! [`fast_eval`] then costs one [`Inner`] choice (ZeRO stage, remat,
//! sequence parallelism, schedule, microbatches, virtual stages) with the
//! same formulas, in the same order of floating-point operations, as
//! `training::analyze`. The test `tests/planner_fast.rs` checks that on many
//! sampled configurations the two agree (same feasibility, same fit, memory
//! and step times within 1e-9 relative).

use crate::collectives::{cost, AxisPlacement, Collective};
use crate::hardware::Chip;
use crate::mesh::{Degrees, LogicalAxis, Mesh, Topology};
use crate::model::params::count;
use crate::model::ModelSpec;
use crate::trace::NoTrace;
use crate::training::{
    activation_elems_per_token_layer, optimizer_bytes_per_param, pipeline_factors, Remat, Schedule,
    TrainConfig,
};

use super::train::RejectReason;

/// Per-model, per-chip constants of a search.
#[derive(Clone, Debug)]
pub struct TrainCtx {
    p_total: f64,
    p_exp: f64,
    p_dense: f64,
    embedding: f64,
    pb: f64,
    gb: f64,
    ob: f64,
    ab: f64,
    c: f64,
    hbm: f64,
    b: f64,
    model_flops: f64,
    hw_flops: [f64; 4],
    eff: f64,
    n_layers: u64,
    n_heads: u64,
    n_kv_heads: u64,
    d_head: u64,
    d_model: u64,
    n_experts: Option<u64>,
    top_k: u64,
    moe_layers: u64,
    seq_len: u64,
    batch_tokens: u64,
}

/// Index of a remat policy in [`REMATS`].
pub const REMATS: [Remat; 4] = [
    Remat::None,
    Remat::Full,
    Remat::AfterMatmuls,
    Remat::Selective,
];

pub(crate) fn remat_idx(r: Remat) -> usize {
    match r {
        Remat::None => 0,
        Remat::Full => 1,
        Remat::AfterMatmuls => 2,
        Remat::Selective => 3,
    }
}

impl TrainCtx {
    /// Constants for `spec` on `chip` with the fixed fields of `cfg`
    /// (degrees, ZeRO, remat, schedule, microbatches, sequence parallelism
    /// are ignored: they are what the search varies).
    pub fn new(spec: &ModelSpec, chip: &Chip, cfg: &TrainConfig) -> Self {
        let a = &spec.arch;
        let pc = count(a, &mut NoTrace);
        let p_total = pc.total as f64;
        let p_exp = pc.experts_routed as f64;
        let b = cfg.batch_tokens as f64;
        let p_act = pc.active as f64;
        let attn_fwd_per_token = if cfg.include_attention {
            let keys = if cfg.causal {
                cfg.seq_len as f64 / 2.0
            } else {
                cfg.seq_len as f64
            };
            4.0 * keys * (a.n_heads * a.d_head) as f64 * a.n_layers as f64
        } else {
            0.0
        };
        let model_flops = 6.0 * p_act * b + 3.0 * attn_fwd_per_token * b;
        let mut hw_flops = [0.0; 4];
        for (i, r) in REMATS.iter().enumerate() {
            let recompute = match r {
                Remat::None => 0.0,
                Remat::Full => 2.0 * p_act * b + attn_fwd_per_token * b,
                Remat::AfterMatmuls | Remat::Selective => attn_fwd_per_token * b,
            };
            hw_flops[i] = model_flops + recompute;
        }
        TrainCtx {
            p_total,
            p_exp,
            p_dense: p_total - p_exp,
            embedding: pc.embedding as f64,
            pb: cfg.param_dtype.bytes_per_element(),
            gb: cfg.grad_dtype.bytes_per_element(),
            ob: optimizer_bytes_per_param(cfg, a.d_model, a.d_ff),
            ab: cfg.activation_dtype.bytes_per_element(),
            c: chip.flops(cfg.compute_dtype).get(),
            hbm: chip.hbm_capacity.get() * cfg.hbm_usable_fraction,
            b,
            model_flops,
            hw_flops,
            eff: cfg.comm_efficiency.clamp(1e-6, 1.0),
            n_layers: a.n_layers,
            n_heads: a.n_heads,
            n_kv_heads: a.n_kv_heads,
            d_head: a.d_head,
            d_model: a.d_model,
            n_experts: a.moe.as_ref().map(|m| m.n_experts),
            top_k: a.moe.as_ref().map_or(1, |m| m.top_k),
            moe_layers: a.moe_layers(),
            seq_len: cfg.seq_len,
            batch_tokens: cfg.batch_tokens,
        }
    }

    /// Usable HBM per chip.
    pub fn hbm(&self) -> f64 {
        self.hbm
    }

    /// Model FLOPs per step (independent of the plan).
    pub fn model_flops(&self) -> f64 {
        self.model_flops
    }

    /// The divisibility rules of `training::analyze` that depend on the
    /// degrees alone, checked before placing the mesh (cheapest first).
    pub fn divisibility(&self, d: &Degrees) -> Option<RejectReason> {
        if self.n_heads % d.tp != 0 {
            return Some(RejectReason::TpHeads);
        }
        if d.tp > self.n_kv_heads && d.tp % self.n_kv_heads != 0
            || (d.tp <= self.n_kv_heads && self.n_kv_heads % d.tp != 0)
        {
            return Some(RejectReason::TpKvHeads);
        }
        if self.n_layers % d.pp != 0 {
            return Some(RejectReason::PpLayers);
        }
        match self.n_experts {
            Some(e) if e % d.ep != 0 => return Some(RejectReason::EpExperts),
            None if d.ep > 1 => return Some(RejectReason::EpExperts),
            _ => {}
        }
        if d.cp > 1 && self.seq_len % d.cp != 0 {
            return Some(RejectReason::CpSeqLen);
        }
        None
    }
}

/// The placed mesh of one degree tuple, reduced to what the costs need.
#[derive(Clone, Debug)]
pub struct TupleCtx {
    /// Degrees.
    pub deg: Degrees,
    fsdp: AxisPlacement,
    dp_ax: LogicalAxis,
    dp: AxisPlacement,
    dcn: AxisPlacement,
    has_dcn: bool,
    cp: AxisPlacement,
    tp: AxisPlacement,
    ep: AxisPlacement,
    pp: AxisPlacement,
    chips: f64,
    /// Activation elements per token·layer, `[remat][sp]`.
    act_e: [[f64; 2]; 4],
}

/// Check the degree tuple and place its mesh: `Err` with the first reason
/// `training::analyze` would give (divisibility, then mesh placement).
pub fn tuple_ctx(
    ctx: &TrainCtx,
    spec: &ModelSpec,
    chip: &Chip,
    topo: &Topology,
    deg: Degrees,
) -> Result<TupleCtx, RejectReason> {
    if let Some(r) = ctx.divisibility(&deg) {
        return Err(r);
    }
    let mesh = Mesh::build(chip, topo, deg);
    if !mesh.reasons.is_empty() {
        return Err(
            if deg.ep > 1 && (deg.dp * deg.fsdp * deg.cp) % deg.ep != 0 {
                RejectReason::EpDataAxes
            } else {
                RejectReason::Placement
            },
        );
    }
    let mut act_e = [[0.0; 2]; 4];
    for (i, r) in REMATS.iter().enumerate() {
        act_e[i][0] = activation_elems_per_token_layer(spec, *r, deg.tp, false);
        act_e[i][1] = activation_elems_per_token_layer(spec, *r, deg.tp, true);
    }
    let dp_ax = if matches!(mesh.placement(LogicalAxis::Dp), AxisPlacement::Trivial) {
        LogicalAxis::DpDcn
    } else {
        LogicalAxis::Dp
    };
    Ok(TupleCtx {
        deg,
        fsdp: mesh.placement(LogicalAxis::Fsdp),
        dp_ax,
        dp: mesh.placement(dp_ax),
        dcn: mesh.placement(LogicalAxis::DpDcn),
        has_dcn: mesh.axis(LogicalAxis::DpDcn).is_some(),
        cp: mesh.placement(LogicalAxis::Cp),
        tp: mesh.placement(LogicalAxis::Tp),
        ep: mesh.placement(LogicalAxis::Ep),
        pp: mesh.placement(LogicalAxis::Pp),
        chips: mesh.chips.max(1) as f64,
        act_e,
    })
}

/// The choices searched inside one degree tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inner {
    /// ZeRO stage over dp·cp.
    pub zero: u8,
    /// Checkpoint policy.
    pub remat: Remat,
    /// Megatron sequence parallelism.
    pub sp: bool,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Microbatches.
    pub microbatches: u64,
    /// Virtual stages (interleaved).
    pub virtual_stages: u64,
}

impl Inner {
    /// Write these choices and `deg` into a copy of `base`.
    pub fn config(&self, base: &TrainConfig, deg: Degrees) -> TrainConfig {
        TrainConfig {
            degrees: deg,
            zero: self.zero,
            remat: self.remat,
            sequence_parallel: self.sp,
            schedule: self.schedule,
            microbatches: self.microbatches,
            virtual_stages: self.virtual_stages,
            ..base.clone()
        }
    }
}

/// Axis slots in the order `training::analyze` first meets them.
const SLOT_AXES: [LogicalAxis; 7] = [
    LogicalAxis::Fsdp,
    LogicalAxis::Dp,
    LogicalAxis::DpDcn,
    LogicalAxis::Cp,
    LogicalAxis::Tp,
    LogicalAxis::Ep,
    LogicalAxis::Pp,
];

/// What the search keeps of one evaluation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FastEval {
    /// Memory per device (bytes): params + grads + optimizer + activations.
    pub total_bytes: f64,
    /// Parameters + gradients + optimizer state per device.
    pub static_bytes: f64,
    /// Saved activations per device.
    pub activation_bytes: f64,
    /// total ≤ usable HBM.
    pub fits: bool,
    /// T_math.
    pub t_math: f64,
    /// T_bubble.
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
}

struct Acc {
    slots: [f64; 7],
    sum: f64,
    eff: f64,
}

impl Acc {
    #[inline]
    fn add(&mut self, slot: usize, kind: Collective, pl: &AxisPlacement, bytes: f64, n: u64) {
        if matches!(pl, AxisPlacement::Trivial) || n == 0 || bytes <= 0.0 {
            return;
        }
        let cc = cost(kind, crate::units::Bytes::new(bytes), pl, &mut NoTrace);
        let s = (cc.time * (n as f64 / self.eff)).get();
        self.slots[slot] += s;
        self.sum += s;
    }
}

fn slot_of(a: LogicalAxis) -> usize {
    SLOT_AXES.iter().position(|x| *x == a).unwrap_or(0)
}

/// Cost one feasible configuration (no allocation, no tracing).
pub fn fast_eval(ctx: &TrainCtx, t: &TupleCtx, i: &Inner) -> FastEval {
    let deg = t.deg;
    let nf = t.chips;
    // ---- memory
    let ep = deg.ep.max(1) as f64;
    let mp = (deg.tp * deg.pp) as f64;
    let p_mp = ctx.p_dense / mp + ctx.p_exp / (mp * ep);
    let zshard = (deg.dp * deg.cp) as f64;
    let fsdp = deg.fsdp as f64;
    let z = i.zero;
    let params_bytes = p_mp * ctx.pb / (fsdp * if z >= 3 { zshard } else { 1.0 });
    let grads_bytes = p_mp * ctx.gb / (fsdp * if z >= 2 { zshard } else { 1.0 });
    let optimizer_bytes = p_mp * ctx.ob / (fsdp * if z >= 1 { zshard } else { 1.0 });
    let data = deg.dp * deg.fsdp * deg.cp;
    let tokens_dev = ctx.batch_tokens as f64 / data.max(1) as f64;
    let layers_dev = ctx.n_layers as f64 / deg.pp as f64;
    let (bubble, inflight) = pipeline_factors(deg.pp, i.microbatches, i.virtual_stages, i.schedule);
    let ri = remat_idx(i.remat);
    let e = t.act_e[ri][i.sp as usize];
    let ab = ctx.ab;
    let activations_bytes = tokens_dev * inflight * layers_dev * e * ab;
    let total = params_bytes + grads_bytes + optimizer_bytes + activations_bytes;
    // ---- FLOPs
    let t_math = ctx.hw_flops[ri] / (nf * ctx.c);
    let t_bubble = if bubble < 1.0 {
        t_math * bubble / (1.0 - bubble)
    } else {
        0.0
    };
    // ---- comms (same entries, same order as training::analyze)
    let mut acc = Acc {
        slots: [0.0; 7],
        sum: 0.0,
        eff: ctx.eff,
    };
    let l = ctx.n_layers;
    let l_dev = l.div_ceil(deg.pp.max(1));
    let layer_params_mp = (ctx.p_total - ctx.embedding) / l as f64;
    let layer_dense = (layer_params_mp - ctx.p_exp / l as f64) / deg.tp as f64;
    let layer_exp = ctx.p_exp / l as f64 / (deg.tp as f64 * ep);
    let lw = layer_dense + layer_exp;
    let (pb, gb) = (ctx.pb, ctx.gb);
    let fsdp_n = deg.fsdp as f64;
    if deg.fsdp > 1 {
        acc.add(0, Collective::AllGather, &t.fsdp, lw * pb, l_dev);
        acc.add(0, Collective::AllGather, &t.fsdp, lw * pb, l_dev);
        acc.add(0, Collective::ReduceScatter, &t.fsdp, lw * gb, l_dev);
    }
    if deg.dp > 1 {
        let s = slot_of(t.dp_ax);
        let g = lw * gb / fsdp_n;
        match z {
            0 => acc.add(s, Collective::AllReduce, &t.dp, g, l_dev),
            1 | 2 => {
                acc.add(s, Collective::ReduceScatter, &t.dp, g, l_dev);
                acc.add(s, Collective::AllGather, &t.dp, lw * pb / fsdp_n, l_dev);
            }
            _ => {
                acc.add(s, Collective::AllGather, &t.dp, lw * pb / fsdp_n, l_dev);
                acc.add(s, Collective::AllGather, &t.dp, lw * pb / fsdp_n, l_dev);
                acc.add(s, Collective::ReduceScatter, &t.dp, g, l_dev);
            }
        }
        if t.dp_ax == LogicalAxis::Dp && t.has_dcn {
            acc.add(
                2,
                Collective::AllReduce,
                &t.dcn,
                lw * gb * l_dev as f64 * nf / nf,
                1,
            );
        }
    }
    if deg.cp > 1 {
        acc.add(3, Collective::AllReduce, &t.cp, lw * gb / fsdp_n, l_dev);
        let kv_tok = (2 * ctx.n_kv_heads * ctx.d_head) as f64 / deg.tp as f64 * ab;
        let tok_group = ctx.b / (deg.dp * deg.fsdp) as f64;
        acc.add(3, Collective::AllGather, &t.cp, tok_group * kv_tok, l_dev);
        acc.add(3, Collective::AllGather, &t.cp, tok_group * kv_tok, l_dev);
        acc.add(
            3,
            Collective::ReduceScatter,
            &t.cp,
            tok_group * kv_tok,
            l_dev,
        );
    }
    if deg.tp > 1 {
        let act = tokens_dev * ctx.d_model as f64 * ab;
        let fwd_calls = 2 * l_dev * if i.remat == Remat::Full { 2 } else { 1 };
        acc.add(4, Collective::AllGather, &t.tp, act, fwd_calls);
        acc.add(4, Collective::ReduceScatter, &t.tp, act, fwd_calls);
        acc.add(4, Collective::AllGather, &t.tp, act, 2 * l_dev);
        acc.add(4, Collective::ReduceScatter, &t.tp, act, 2 * l_dev);
    }
    if deg.ep > 1 && ctx.n_experts.is_some() {
        let moe_l = ctx.moe_layers.div_ceil(deg.pp.max(1));
        let v = tokens_dev * ctx.top_k as f64 * ctx.d_model as f64 * ab / deg.tp as f64;
        acc.add(5, Collective::AllToAll, &t.ep, v, 2 * moe_l);
        acc.add(5, Collective::AllToAll, &t.ep, v, 2 * moe_l);
    }
    if deg.pp > 1 {
        let mb = tokens_dev / i.microbatches.max(1) as f64;
        let v = mb * ctx.d_model as f64 * ab / if i.sp { deg.tp as f64 } else { 1.0 };
        let hops = i.microbatches
            * if i.schedule == Schedule::Interleaved {
                i.virtual_stages.max(1)
            } else {
                1
            };
        acc.add(6, Collective::PointToPoint, &t.pp, v, hops);
        acc.add(6, Collective::PointToPoint, &t.pp, v, hops);
    }
    let (mut worst, mut t_comms) = (None, 0.0f64);
    for (k, &v) in acc.slots.iter().enumerate() {
        if v > t_comms {
            worst = Some(SLOT_AXES[k]);
            t_comms = v;
        }
    }
    let compute = t_math + t_bubble;
    let lower = compute.max(t_comms);
    let upper = compute + acc.sum;
    FastEval {
        total_bytes: total,
        static_bytes: params_bytes + grads_bytes + optimizer_bytes,
        activation_bytes: activations_bytes,
        fits: total <= ctx.hbm,
        t_math,
        t_bubble,
        t_comms,
        t_comms_sum: acc.sum,
        lower,
        upper,
        comm_bound_axis: if t_comms > compute { worst } else { None },
    }
}
