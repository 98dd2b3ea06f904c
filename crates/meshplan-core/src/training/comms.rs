//! The collectives of one training step, per strategy (book ch5, ch12):
//! what each moves, how often, and its cost on the placed mesh. Both the
//! report (which lists every collective) and the planner (which keeps only
//! the per-axis totals) run [`step_comms`]; a [`CommSink`] decides what is
//! kept.

use serde::Serialize;

use super::context::{MeshCtx, TrainCtx};
pub use super::transfer::Transfer;
use crate::collectives::{cost, AxisPlacement, Collective, CollectiveCost};
use crate::parallelism::{Choice, LogicalAxis, Remat};
use crate::trace::Tracer;
use crate::units::{Bytes, Seconds};

/// One collective in a step, as the report lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommEntry {
    /// AllGather, …
    pub kind: Collective,
    /// Logical axis.
    pub axis: LogicalAxis,
    /// What it moves.
    pub transfer: Transfer,
    /// What it moves, in words ("fsdp: gather weights (forward)").
    pub what: String,
    /// V per call (bytes): the full array (AllToAll: all devices' buffers).
    pub bytes: Bytes,
    /// Bytes each device sends per call.
    pub bytes_sent_per_device: Bytes,
    /// Calls per step.
    pub count: u64,
    /// Seconds per step (all calls).
    pub seconds: Seconds,
    /// Whether it can overlap with compute.
    pub overlappable: bool,
    /// Latency-bound.
    pub latency_bound: bool,
}

/// One costed collective of a step.
#[derive(Clone, Copy, Debug)]
pub struct Costed {
    /// What it moves.
    pub what: Transfer,
    /// Sequence parallelism (changes how TP transfers are described).
    pub sp: bool,
    /// Logical axis.
    pub axis: LogicalAxis,
    /// Cost of one call.
    pub cost: CollectiveCost,
    /// Calls per step.
    pub calls: u64,
    /// Seconds per step, all calls.
    pub seconds: f64,
    /// Can overlap with compute.
    pub overlap: bool,
}

/// Where the collectives of a step go besides the per-axis totals.
pub trait CommSink {
    /// One collective.
    fn add(&mut self, c: &Costed);
}

/// Keep nothing (the planner).
impl CommSink for () {
    #[inline]
    fn add(&mut self, _: &Costed) {}
}

/// Keep every collective (the report).
impl CommSink for Vec<CommEntry> {
    fn add(&mut self, c: &Costed) {
        self.push(CommEntry {
            kind: c.cost.kind,
            axis: c.axis,
            transfer: c.what,
            what: c.what.describe(c.sp).to_string(),
            bytes: c.cost.bytes,
            bytes_sent_per_device: c.cost.bytes_sent_per_device,
            count: c.calls,
            seconds: Seconds::new(c.seconds),
            overlappable: c.overlap,
            latency_bound: c.cost.latency_bound,
        });
    }
}

/// Communication seconds per step, by logical axis.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommTotals {
    /// Seconds per axis, indexed by [`LogicalAxis::index`].
    pub per_axis: [f64; 7],
    /// Σ over all collectives.
    pub sum: f64,
}

impl CommTotals {
    /// The slowest axis and its seconds (axes run concurrently: the book's
    /// newer FSDP+TP analysis).
    pub fn slowest(&self) -> (Option<LogicalAxis>, f64) {
        let mut best = (None, 0.0f64);
        for (k, &v) in self.per_axis.iter().enumerate() {
            if v > best.1 {
                best = (Some(LogicalAxis::ALL[k]), v);
            }
        }
        best
    }
}

/// Costs collectives into the totals and the sink.
struct Acc<'m, 't, T, S> {
    mesh: &'m MeshCtx,
    eff: f64,
    sp: bool,
    tr: &'t mut T,
    sink: &'t mut S,
    totals: CommTotals,
}

impl<T: Tracer, S: CommSink> Acc<'_, '_, T, S> {
    fn add(
        &mut self,
        axis: LogicalAxis,
        kind: Collective,
        what: Transfer,
        bytes: f64,
        calls: u64,
        overlap: bool,
    ) {
        let pl = self.mesh.axis(axis);
        if matches!(pl, AxisPlacement::Trivial) || calls == 0 || bytes <= 0.0 {
            return;
        }
        // tracing on: every collective is derived; off: each is costed once per mesh
        let c = if T::ENABLED {
            cost(kind, Bytes::new(bytes), pl, self.tr)
        } else {
            self.mesh.memo.get(what, bytes, || {
                cost(kind, Bytes::new(bytes), pl, &mut crate::trace::NoTrace)
            })
        };
        let s = c.time.get() * calls as f64 / self.eff;
        self.totals.per_axis[axis.index()] += s;
        self.totals.sum += s;
        self.sink.add(&Costed {
            what,
            sp: self.sp,
            axis,
            cost: c,
            calls,
            seconds: s,
            overlap,
        });
    }
}

/// Sizes the strategies share.
struct Sizes {
    /// Layers on one stage, ceil(L/pp).
    l_dev: u64,
    /// Micro-batches (gradient-accumulation steps) per step.
    m: u64,
    /// One layer's parameters on one model-parallel shard.
    layer_params: f64,
    /// Parameter, gradient, activation bytes per element.
    pb: f64,
    gb: f64,
    ab: f64,
    /// Tokens one device processes per step.
    tokens_dev: f64,
}

fn sizes(ctx: &TrainCtx, mesh: &MeshCtx, c: &Choice) -> Sizes {
    let (a, pc, d) = (&ctx.spec.arch, &ctx.pc, &mesh.deg);
    let l = a.n_layers.max(1) as f64;
    let p_exp = pc.experts_routed as f64;
    let layer_mp = (pc.total as f64 - pc.embedding as f64) / l;
    let dense = (layer_mp - p_exp / l) / d.tp as f64;
    let experts = p_exp / l / (d.expert_tp() as f64 * d.ep as f64);
    let cfg = &ctx.base;
    Sizes {
        l_dev: a.n_layers.div_ceil(d.pp),
        m: c.microbatches.max(1),
        layer_params: dense + experts,
        pb: cfg.param_dtype.bytes_per_element(),
        gb: cfg.grad_dtype.bytes_per_element(),
        ab: cfg.activation_dtype.bytes_per_element(),
        tokens_dev: cfg.batch_tokens as f64 / (d.dp * d.fsdp * d.cp) as f64,
    }
}

/// FSDP and data parallelism by ZeRO stage. Weights sharded at stage 3
/// (and the fsdp axis, always ZeRO-3) are gathered for every micro-batch's
/// forward and backward and their gradients reduce-scattered per
/// micro-batch; ZeRO-2 reduce-scatters gradients per micro-batch (they are
/// sharded); ZeRO-0/1 reduce once per step after accumulation.
fn weight_comms<T: Tracer, S: CommSink>(acc: &mut Acc<T, S>, z: &Sizes, zero: u8) {
    use Collective::{AllGather as Ag, AllReduce as Ar, ReduceScatter as Rs};
    let d = acc.mesh.deg;
    // saturating: a hostile micro-batch count must not overflow the call count
    let (lw, per_mb) = (z.layer_params, z.l_dev.saturating_mul(z.m));
    if d.fsdp > 1 {
        let ax = LogicalAxis::Fsdp;
        acc.add(ax, Ag, Transfer::FsdpGatherFwd, lw * z.pb, per_mb, true);
        acc.add(ax, Ag, Transfer::FsdpGatherBwd, lw * z.pb, per_mb, true);
        acc.add(ax, Rs, Transfer::FsdpReduceGrads, lw * z.gb, per_mb, true);
    }
    if d.dp <= 1 {
        return;
    }
    let ax = acc.mesh.dp_axis;
    let f = d.fsdp as f64;
    let (g, w) = (lw * z.gb / f, lw * z.pb / f);
    match zero {
        0 => acc.add(ax, Ar, Transfer::DpAllReduce, g, z.l_dev, true),
        1 | 2 => {
            let rs_calls = if zero == 2 { per_mb } else { z.l_dev };
            acc.add(ax, Rs, Transfer::ZeroReduceGrads, g, rs_calls, true);
            acc.add(ax, Ag, Transfer::ZeroGatherWeights, w, z.l_dev, true);
        }
        _ => {
            acc.add(ax, Ag, Transfer::Zero3GatherFwd, w, per_mb, true);
            acc.add(ax, Ag, Transfer::Zero3GatherBwd, w, per_mb, true);
            acc.add(ax, Rs, Transfer::Zero3ReduceGrads, g, per_mb, true);
        }
    }
    // multislice: the DCN part of dp
    if ax == LogicalAxis::Dp && acc.mesh.has_dcn {
        let all = lw * z.gb * z.l_dev as f64;
        acc.add(LogicalAxis::DpDcn, Ar, Transfer::DcnAllReduce, all, 1, true);
    }
}

/// Context parallelism: gradients reduced over cp, and ring attention's K/V
/// of the whole sequence passing every device, forward and backward (+dK/dV).
fn cp_comms<T: Tracer, S: CommSink>(acc: &mut Acc<T, S>, ctx: &TrainCtx, z: &Sizes) {
    let d = acc.mesh.deg;
    if d.cp <= 1 {
        return;
    }
    let a = &ctx.spec.arch;
    let ax = LogicalAxis::Cp;
    let g = z.layer_params * z.gb / d.fsdp as f64;
    acc.add(
        ax,
        Collective::AllReduce,
        Transfer::CpAllReduce,
        g,
        z.l_dev,
        true,
    );
    let kv_tok = (2 * a.n_kv_heads * a.d_head) as f64 / d.tp as f64 * z.ab;
    // tokens of one cp group
    let v = ctx.base.batch_tokens as f64 / (d.dp * d.fsdp) as f64 * kv_tok;
    acc.add(
        ax,
        Collective::AllGather,
        Transfer::CpKvFwd,
        v,
        z.l_dev,
        true,
    );
    acc.add(
        ax,
        Collective::AllGather,
        Transfer::CpKvBwd,
        v,
        z.l_dev,
        true,
    );
    acc.add(
        ax,
        Collective::ReduceScatter,
        Transfer::CpDkv,
        v,
        z.l_dev,
        true,
    );
}

/// Tensor parallelism: per layer 2 × (AG + RS) of `[B_local, D]` forward
/// (attention and MLP), the same backward; full remat repeats the forward's.
fn tp_comms<T: Tracer, S: CommSink>(acc: &mut Acc<T, S>, ctx: &TrainCtx, z: &Sizes, remat: Remat) {
    if acc.mesh.deg.tp <= 1 {
        return;
    }
    let act = z.tokens_dev * ctx.spec.arch.d_model as f64 * z.ab;
    // two (AG, RS) pairs per layer, attention and MLP; with whole experts
    // (etp = 1) a MoE layer's MLP has none: its tokens reach the experts
    // by the ep all-to-all from the sequence-parallel shards — unless
    // shared experts still run tensor-parallel there (the step inventory's
    // rule, `step::inventory`)
    let a = &ctx.spec.arch;
    let whole_experts = a
        .moe
        .as_ref()
        .is_some_and(|m| m.n_shared_experts == 0 && acc.mesh.deg.expert_tp() == 1);
    let pairs = 2 * z.l_dev
        - if whole_experts {
            a.moe_layers().div_ceil(acc.mesh.deg.pp).min(z.l_dev)
        } else {
            0
        };
    let fwd = pairs * if remat == Remat::Full { 2 } else { 1 };
    let bwd = pairs;
    let ax = LogicalAxis::Tp;
    acc.add(
        ax,
        Collective::AllGather,
        Transfer::TpGatherFwd,
        act,
        fwd,
        false,
    );
    acc.add(
        ax,
        Collective::ReduceScatter,
        Transfer::TpReduceFwd,
        act,
        fwd,
        false,
    );
    acc.add(
        ax,
        Collective::AllGather,
        Transfer::TpGatherBwd,
        act,
        bwd,
        false,
    );
    acc.add(
        ax,
        Collective::ReduceScatter,
        Transfer::TpReduceBwd,
        act,
        bwd,
        false,
    );
}

/// Expert parallelism: dispatch + combine all-to-all, forward and backward,
/// per MoE layer. Each device's buffer is its `k·B_local·D/tp` routed
/// token-rows; the collective is costed on the whole array, ep buffers
/// (`collectives::cost` takes the global V of an AllToAll).
fn ep_comms<T: Tracer, S: CommSink>(acc: &mut Acc<T, S>, ctx: &TrainCtx, z: &Sizes) {
    let d = acc.mesh.deg;
    let a = &ctx.spec.arch;
    let Some(m) = a.moe.as_ref().filter(|_| d.ep > 1) else {
        return;
    };
    let moe_l = a.moe_layers().div_ceil(d.pp);
    let per_device = z.tokens_dev * m.top_k as f64 * a.d_model as f64 * z.ab / d.tp as f64;
    let v = per_device * d.ep as f64;
    acc.add(
        LogicalAxis::Ep,
        Collective::AllToAll,
        Transfer::EpFwd,
        v,
        2 * moe_l,
        false,
    );
    acc.add(
        LogicalAxis::Ep,
        Collective::AllToAll,
        Transfer::EpBwd,
        v,
        2 * moe_l,
        false,
    );
}

/// Pipeline: activations to the next stage and gradients back, per
/// micro-batch (and per chunk when interleaved).
fn pp_comms<T: Tracer, S: CommSink>(acc: &mut Acc<T, S>, ctx: &TrainCtx, z: &Sizes, c: &Choice) {
    let d = acc.mesh.deg;
    if d.pp <= 1 {
        return;
    }
    let mb = z.tokens_dev / z.m as f64;
    let sp = if c.sp { d.tp as f64 } else { 1.0 };
    let v = mb * ctx.spec.arch.d_model as f64 * z.ab / sp;
    let hops = z.m.saturating_mul(c.chunks());
    acc.add(
        LogicalAxis::Pp,
        Collective::PointToPoint,
        Transfer::PpFwd,
        v,
        hops,
        true,
    );
    acc.add(
        LogicalAxis::Pp,
        Collective::PointToPoint,
        Transfer::PpBwd,
        v,
        hops,
        true,
    );
}

/// Every collective of one step of plan `c` on `mesh`.
pub fn step_comms<T: Tracer, S: CommSink>(
    ctx: &TrainCtx,
    mesh: &MeshCtx,
    c: &Choice,
    tr: &mut T,
    sink: &mut S,
) -> CommTotals {
    let z = sizes(ctx, mesh, c);
    let mut acc = Acc {
        mesh,
        eff: ctx.base.comm_efficiency.clamp(1e-6, 1.0),
        sp: c.sp,
        tr,
        sink,
        totals: CommTotals::default(),
    };
    weight_comms(&mut acc, &z, c.zero);
    cp_comms(&mut acc, ctx, &z);
    tp_comms(&mut acc, ctx, &z, c.remat);
    ep_comms(&mut acc, ctx, &z);
    pp_comms(&mut acc, ctx, &z, c);
    acc.totals
}
