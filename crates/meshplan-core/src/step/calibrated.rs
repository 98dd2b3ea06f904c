//! The calibrated pricer (the step-time model of `docs/fidelity.md`): a
//! step's time, by part, from the efficiency profile of its chip, priced on
//! the step's inventory ([`super::inventory`]) — GEMMs at their shape's
//! efficiency, attention kernels, HBM-bound work, collectives on their
//! group's bandwidth curve with the framework's overlap, the bubble, host
//! overheads. It re-derives nothing from the configuration; peak memory
//! comes from the one memory model ([`super::predict::peak_memory`]).

use serde::Serialize;

use super::inventory::{
    grad_bytes, Block, Gemm, Placement, StepInventory, Transfer, OPTIMIZER_BYTES,
};
use crate::fidelity::profile::{EfficiencyProfile, GemmCurve};
use crate::hardware::Chip;
use crate::mesh::Topology;
use crate::parallelism::pipeline::{dualpipe_bubble, ChunkTimes};
use crate::parallelism::{
    DpOverlap, Fp8Recipe, Overlap, Remat, RunSpec, Schedule, TpOverlap, TrainConfig,
};
use crate::units::DType;

/// Step time by part (seconds per optimizer step, critical path).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeBreakdown {
    /// Matmuls (layers + LM head), recompute included.
    pub matmul: f64,
    /// Attention kernels.
    pub attention: f64,
    /// Memory-bound element-wise work (norms, activations, softmax/loss).
    pub memory_bound: f64,
    /// Exposed TP/SP collectives.
    pub tp_comm: f64,
    /// Exposed context-parallel ring-attention K/V exchange.
    pub cp_comm: f64,
    /// Expert-parallel all-to-all (MoE dispatch and combine).
    pub ep_comm: f64,
    /// Exposed PP point-to-point.
    pub pp_comm: f64,
    /// Pipeline bubble.
    pub bubble: f64,
    /// Exposed DP gradient reduction and ZeRO parameter gather (ZeRO-3/FSDP:
    /// the per-micro-batch gathers and reduce-scatters not hidden by prefetch).
    pub dp_comm: f64,
    /// Optimizer update (HBM-bound).
    pub optimizer: f64,
    /// Fixed per-layer and per-step overheads.
    pub overhead: f64,
    /// Seconds added to reach the plan's roofline lower bound (see
    /// [`TimeBreakdown::at_least`]); zero unless the floor binds.
    pub floor_raise: f64,
    /// Sum.
    pub total: f64,
    /// Pure roofline: hardware FLOPs at peak, no comms.
    pub roofline: f64,
}

impl TimeBreakdown {
    /// Hold the step at `floor`, the evaluator's roofline lower bound of the
    /// same plan (`max(T_math, T_comms) + bubble` at peak FLOP/s and link
    /// rates): no run beats its hardware, so where the calibrated overlap
    /// terms undercut that floor (plans unlike the fitted ones, e.g. hybrid
    /// sharding over cp) the prediction is the floor, and `floor_raise` shows
    /// by how much.
    pub fn at_least(mut self, floor: f64) -> TimeBreakdown {
        if floor > self.total {
            self.floor_raise = floor - self.total;
            self.total = floor;
        }
        self
    }
}

/// The predicted step by block of the model (seconds per optimizer step on
/// the critical pipeline stage, recompute included): each block's GEMMs at
/// their inventory shape's priced time ([`Gemm::block`]), the attention
/// kernels, the element-wise traffic and the optimizer update. They sum to
/// `matmul + attention + memory_bound + optimizer` of [`TimeBreakdown`];
/// the other parts (exposed communication, bubble, overheads, floor raise)
/// belong to no block. `train --breakdown` and the JSON `blocks` read them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BlockTimes {
    /// The attention projections' GEMMs (QKV, O; MLA's down/up projections).
    pub attention_projections: f64,
    /// The attention kernels, forward + backward (+ recompute).
    pub attention_core: f64,
    /// The dense MLP, shared and routed experts and router GEMMs.
    pub mlp: f64,
    /// Element-wise HBM traffic (norms, activations, RoPE) and fp8 casts.
    pub elementwise: f64,
    /// The LM head's GEMMs (forward + backward) and the loss, on the stage
    /// that holds them when it is the critical one.
    pub head: f64,
    /// The optimizer update.
    pub optimizer: f64,
}

impl BlockTimes {
    /// The times in the order of `training::blocks::step_blocks`.
    pub fn in_block_order(&self) -> [f64; 6] {
        [
            self.attention_projections,
            self.attention_core,
            self.mlp,
            self.elementwise,
            self.head,
            self.optimizer,
        ]
    }
    /// Their sum.
    pub fn sum(&self) -> f64 {
        self.in_block_order().iter().sum()
    }
}

/// What a prediction reads besides the replica (`RunSpec`): the GEMMs'
/// compute dtype, the attention mask and how communication overlaps compute.
/// The data sets are bf16, causal and at the default overlap settings
/// ([`Features::default`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Features {
    /// Dtype of the GEMMs (attention kernels stay bf16).
    pub compute_dtype: DType,
    /// Causal attention (FlashAttention skips the masked half).
    pub causal: bool,
    /// TP / DP overlap and the SP all-gather in the backward.
    pub overlap: Overlap,
    /// TPU slices joined over DCN (1: one ICI slice; GPUs: 1).
    pub slices: u64,
    /// The fp8 recipe of fp8 GEMMs (`None`: the pricing without recipes).
    pub fp8_recipe: Option<Fp8Recipe>,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            compute_dtype: DType::Bf16,
            causal: true,
            overlap: Overlap::default(),
            slices: 1,
            fp8_recipe: None,
        }
    }
}

impl Features {
    /// The features of a training configuration on `topo`.
    pub fn of(cfg: &TrainConfig, topo: &Topology) -> Features {
        Features {
            compute_dtype: cfg.compute_dtype,
            causal: cfg.causal,
            overlap: cfg.overlap,
            slices: match topo {
                Topology::Torus { slices, .. } => (*slices).max(1),
                Topology::Gpu { .. } => 1,
            },
            fp8_recipe: cfg
                .fp8_recipe
                .filter(|_| cfg.compute_dtype.bytes_per_element() < 2.0),
        }
    }
}

/// The communication a prediction hid and exposed, per step on the critical
/// stage (`predicted.overlap` of `meshplan train --json`): the numbers the
/// overlap settings act on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CommExposure {
    /// TP/SP collectives per layer per micro-batch (recomputed forward and
    /// the redone SP all-gathers included).
    pub tp_collectives_per_layer: f64,
    /// Their transfer time (bytes / bus bandwidth), nothing hidden.
    pub tp_transfer_s: f64,
    /// Their ring-step latency (never hidden).
    pub tp_latency_s: f64,
    /// The layers' matmul time the TP transfers can hide under.
    pub tp_gemm_s: f64,
    /// The TP chunks pipelined with the GEMMs (`pipelined`: tp); 0 otherwise.
    pub tp_chunks: f64,
    /// Exposed TP transfer + latency (the host stall of pipelined TP
    /// across nodes is in `time.tp_comm` besides).
    pub tp_exposed_s: f64,
    /// Data-parallel / ZeRO / FSDP collectives' time, nothing hidden.
    pub dp_transfer_s: f64,
    /// Of which exposed (`time.dp_comm`).
    pub dp_exposed_s: f64,
}

/// The shape of one predicted step on its critical pipeline stage
/// (`predicted.schedule` of `meshplan train --json`): what a timeline of
/// the step lays out. Times are seconds on the critical stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepSchedule {
    /// Pipeline stages (pp).
    pub stages: u64,
    /// Micro-batches per step per replica.
    pub microbatches: u64,
    /// Virtual stages per device (interleaved schedule; 1 otherwise).
    pub virtual_stages: u64,
    /// Layers on the critical stage.
    pub layers: f64,
    /// The critical stage holds the LM head and loss.
    pub head: bool,
    /// One micro-batch on the critical stage, forward + backward (+
    /// recompute), exposed TP/CP/EP communication and host stalls included,
    /// plus the exposed ZeRO-3/FSDP gathers of that micro-batch.
    pub microbatch_s: f64,
    /// Share of a micro-batch's compute spent in the forward pass (the rest
    /// is the backward, recompute included).
    pub forward_fraction: f64,
    /// Of `microbatch_s`: the exposed ZeRO-3/FSDP gathers and
    /// reduce-scatters (booked to `time_breakdown_s.dp_comm`).
    pub fsdp_exposed_s: f64,
    /// Of `microbatch_s`: the host's stall beyond the GPU work not booked
    /// to TP (booked to `time_breakdown_s.overhead`).
    pub host_stall_s: f64,
    /// DualPipe's chunk times, bubble and hidden communication (`None`
    /// under the other schedules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dualpipe: Option<DualPipeShape>,
    /// The routed experts' grouped-GEMM pricing (`None`: no routed experts
    /// or no grouped-GEMM curve in the profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expert_gemm: Option<ExpertGemm>,
    /// The fp8 recipe's GEMM curve and casts (`None` without a recipe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp8: Option<Fp8Pricing>,
}

/// Fraction of the low-precision peak a large GEMM reaches, relative to the
/// fraction a bf16 GEMM reaches of the bf16 peak: 1. cuBLASLt E4M3 8192³ on
/// H100 SXM: 1,608.6 TFLOP/s mean over 16 GPUs = 0.81 of 1,979 (cuBLASLt FP8
/// cross-check report, d-robotics test_gpu_scripts, 2026-05-24), the fraction
/// large bf16 GEMMs reach of 989 (0.7–0.8, book ch12 "~80–85 % achievable"),
/// so the profile's bf16 GEMM efficiency is applied to the fp8 peak.
pub const LOW_PRECISION_GEMM_RELATIVE: f64 = 1.0;

/// HBM bytes per element of a Transformer Engine fp8 cast (delayed scaling,
/// amax fused): read bf16 (2), write the fp8 copy (1) and its transpose for
/// the weight gradient (1) — every GEMM input forward and every output
/// gradient backward (TE `cast_transpose`).
pub const FP8_CAST_BYTES: f64 = 4.0;

/// The busiest expert's tokens over the mean with a load-balancing loss:
/// 1.25, the capacity factor GShard (Lepikhin et al. 2020) and Switch
/// (Fedus et al. 2021) size the busiest expert for; in dropless MoE
/// (Megatron-Core) the busiest expert's rank sets the pace of its grouped GEMM
/// and of the all-to-all.
pub const MOE_LOAD_IMBALANCE: f64 = 1.25;

/// GEMM efficiency for an `[m, k] × [k, n]` matmul: `e_max · share · x/(x + x½)` with
/// `e_max`, `x½` the chip's GEMM curve and `share` the fraction of it the
/// framework keeps (`matmul_stack_share`),
/// `x = min(m, k, n)` after rounding up to the 128-wide tensor-core tile
/// (padding waste `x/ceil128(x)`).
pub fn gemm_efficiency(p: &EfficiencyProfile, m: f64, k: f64, n: f64) -> f64 {
    let x = m.min(k).min(n).max(1.0);
    let padded = (x / 128.0).ceil() * 128.0;
    p.matmul_efficiency * p.matmul_stack_share * (x / padded) * x / (x + p.matmul_half_dim)
}

/// [`LOW_PRECISION_GEMM_RELATIVE`] for 8-bit and narrower GEMMs, 1 otherwise.
fn low_precision_relative(d: DType) -> f64 {
    if d.bytes_per_element() < 2.0 {
        LOW_PRECISION_GEMM_RELATIVE
    } else {
        1.0
    }
}

/// Bus bandwidth (bytes/s) of a ring collective over a group.
/// Intra-node: NVLink one-way × `intra_node_efficiency`.
/// Across k nodes: (GPUs of the group per node) × scale-out per GPU ×
/// `inter_node_efficiency` × k^−`inter_node_congestion` (capped by NVLink).
fn bus_bandwidth(p: &EfficiencyProfile, chip: &Chip, per_node: u64, nodes: u64) -> f64 {
    let intra = nominal_intra_bytes_per_s(chip) * p.intra_node_efficiency;
    if nodes <= 1 {
        return intra;
    }
    let so = nominal_scale_out_bytes_per_s(chip);
    let inter = per_node as f64
        * so
        * p.inter_node_efficiency
        * (clamp_nodes(p, nodes) as f64).powf(-p.inter_node_congestion);
    inter.min(intra)
}

/// The nominal in-node rate per chip a ring collective's efficiency is a
/// fraction of (bytes/s): a TPU slice is one ICI domain, where a ring along
/// one torus axis with wraparound moves data both ways, 2 links' one-way
/// bandwidth per chip (book ch3: T = V/(2·W_ici) for an all-gather); a GPU's
/// NVLink one way; without either, a tenth of HBM. `calibrate` from
/// microbenchmarks divides measured bus bandwidth by the same rate.
pub fn nominal_intra_bytes_per_s(chip: &Chip) -> f64 {
    let ici = chip.ici.as_ref().map(|i| 2.0 * i.link.one_way_rate().get());
    ici.unwrap_or_else(|| {
        chip.nvlink
            .as_ref()
            .map_or(chip.hbm_bandwidth.get() / 10.0, |n| {
                n.per_gpu.one_way_rate().get()
            })
    })
}

/// The nominal scale-out rate per GPU (bytes/s; without a scale-out
/// network, a tenth of the in-node rate).
pub fn nominal_scale_out_bytes_per_s(chip: &Chip) -> f64 {
    chip.scale_out
        .as_ref()
        .map_or(nominal_intra_bytes_per_s(chip) / 10.0, |s| {
            s.per_chip.one_way_rate().get()
        })
}

/// Bandwidth (bytes/s) of one collective over a group with `per` GPUs on each
/// of `nodes` nodes: the profile's measured curve when it has one (all-reduce
/// or all-gather / reduce-scatter, interpolated by node count), else the
/// analytic [`bus_bandwidth`].
fn coll_bw(p: &EfficiencyProfile, chip: &Chip, allreduce: bool, per: u64, nodes: u64) -> f64 {
    if nodes <= 1 {
        return bus_bandwidth(p, chip, per, nodes);
    }
    p.measured_bw(allreduce, nodes)
        .unwrap_or_else(|| bus_bandwidth(p, chip, per, nodes))
}

/// Node count used in the terms that grow with the job: held at the largest
/// job the profile was fitted on, because a power law fitted on 1–64 nodes
/// says nothing about 2,048 (it predicted Megatron-Core's 96+ node runs 7–220×
/// too slow when left unbounded).
fn clamp_nodes(p: &EfficiencyProfile, nodes: u64) -> u64 {
    if p.calibrated_max_nodes > 0 {
        nodes.min(p.calibrated_max_nodes)
    } else {
        nodes
    }
}

/// What every part of the pricing reads: the inventory and the rates.
struct Geometry<'a> {
    spec: &'a RunSpec,
    chip: &'a Chip,
    p: &'a EfficiencyProfile,
    inv: &'a StepInventory,
    /// bf16 peak (attention kernels) and the GEMMs' peak (compute dtype).
    peak: f64,
    mm_peak: f64,
    hbm_bw: f64,
    /// Micro-batches per step.
    m: f64,
    /// Nodes, held at the calibrated range.
    nodes_f: f64,
    /// The fp8 recipe's GEMM curve (with the recipe), when the run has a
    /// recipe and the profile the curve.
    recipe: Option<(Fp8Recipe, &'a GemmCurve)>,
    /// The grouped-GEMM curve of the experts' dtype (with its name), when
    /// the profile has one.
    grouped: Option<(&'static str, &'a GemmCurve)>,
    /// The run's fp8 recipe (its casts are priced with or without a curve).
    fp8_recipe: Option<Fp8Recipe>,
}

impl<'a> Geometry<'a> {
    /// The geometry of `inv` (built by the caller, in its own frame: the
    /// planner prices one per predicted plan, and an inventory moved into
    /// this struct would be copied each time).
    fn new(
        spec: &'a RunSpec,
        chip: &'a Chip,
        p: &'a EfficiencyProfile,
        f: &Features,
        inv: &'a StepInventory,
    ) -> Self {
        Geometry {
            spec,
            chip,
            p,
            peak: chip.flops(DType::Bf16).get(),
            mm_peak: chip.flops(f.compute_dtype).get() * low_precision_relative(f.compute_dtype),
            hbm_bw: chip.hbm_bandwidth.get() * p.hbm_efficiency,
            m: inv.microbatches as f64,
            nodes_f: clamp_nodes(p, inv.nodes) as f64,
            recipe: recipe_curve(p, f),
            grouped: grouped_curve(p, f),
            fp8_recipe: f.fp8_recipe,
            inv,
        }
    }
    /// Time of one GEMM call at its efficiency.
    fn gemm(&self, g: &Gemm) -> f64 {
        g.flops / (self.mm_peak * gemm_efficiency(self.p, g.m, g.k, g.n))
    }
    /// Bandwidth of one collective (all-reduce curves for all-reduces) and
    /// the per-ring-step latency of its group.
    fn link(&self, t: &Transfer) -> (f64, f64) {
        let Placement { per_node, nodes } = t.placement;
        let lat = if nodes > 1 {
            self.p.inter_node_latency_s
        } else {
            self.p.collective_latency_s
        };
        let allreduce = t.kind == crate::collectives::Collective::AllReduce;
        (coll_bw(self.p, self.chip, allreduce, per_node, nodes), lat)
    }
}

/// One layer's compute on one micro-batch (forward unless said), seconds.
struct LayerCompute {
    /// Forward matmuls.
    mm_fwd: f64,
    /// The attention projections' share of `mm_fwd`.
    attn_mm_fwd: f64,
    /// Forward attention time; backward time.
    attn_fwd: f64,
    attn_bwd: f64,
    /// Element-wise HBM traffic, forward + backward.
    ew: f64,
    /// LM head matmuls (fwd + bwd) and loss on the last stage.
    head_mm: f64,
    loss: f64,
}

/// Attention forward and backward time.
fn attention_time(g: &Geometry) -> (f64, f64) {
    let a = &g.inv.attention;
    match &a.unfused {
        // unfused attention core (Megatron 2022): the scores through HBM:
        // fwd QKᵀ write 2 B, softmax r/w 4 B, dropout r/w + mask 5 B = 11 B
        // per score element; bwd (PV grad, dropout, softmax, QKᵀ grads)
        // ≈ 19 B per element (Korthikanti et al. 2022, the 5·a·s/h term).
        Some(u) => {
            let mm = g.gemm(&u.gemm);
            (
                mm + 11.0 * u.score_elems / g.hbm_bw,
                2.0 * mm + 19.0 * u.score_elems / g.hbm_bw,
            )
        }
        None => {
            let t = a.flops / (g.peak * g.p.attention_efficiency);
            (t, FA_BACKWARD_TIME * t)
        }
    }
}

/// Element-wise elements one token moves per layer, forward + backward
/// (bf16: × 2 bytes): norms + residual `20·D_sh` (`D_sh` = D/tp with SP),
/// SwiGLU `8·F/tp`, RoPE `8·N·H/tp`.
pub(crate) fn elementwise_elems(dsh: f64, f: f64, nh: f64, tpf: f64) -> f64 {
    20.0 * dsh + 8.0 * f / tpf + 8.0 * nh / tpf
}

/// FlashAttention-2's backward time over its forward time (2.5: it
/// recomputes the scores, 2 × the forward FLOPs plus the recompute).
pub const FA_BACKWARD_TIME: f64 = 2.5;

fn layer_compute(g: &Geometry) -> LayerCompute {
    let inv = &g.inv;
    // the attention projections, then the MLP / experts / router, each
    // GEMM's time times its calls per average layer
    let mut attn_mm = 0.0;
    let mut ffn = 0.0;
    for x in inv.layer_gemms.as_slice() {
        if x.block == Block::AttentionProjections {
            attn_mm += layer_gemm_time(g, x);
        } else {
            ffn += x.weight * layer_gemm_time(g, x);
        }
    }
    let (attn_fwd, attn_bwd) = attention_time(g);
    let mut ew = inv.elementwise_bytes / g.hbm_bw;
    if inv.low_precision {
        ew += cast_time(g);
    }
    LayerCompute {
        mm_fwd: attn_mm + ffn,
        attn_mm_fwd: attn_mm,
        attn_fwd,
        attn_bwd,
        ew,
        // LM head + loss on the last stage (vocab-parallel over tp)
        head_mm: 3.0 * layer_gemm_time(g, &inv.head),
        loss: inv.loss_bytes / g.hbm_bw,
    }
}

/// Per-layer GPU time of one micro-batch with the remat policy's recompute:
/// (matmuls, attention, element-wise).
fn layer_with_recompute(g: &Geometry, c: &LayerCompute) -> (f64, f64, f64) {
    let (mm, attn, ew) = match g.spec.remat {
        Remat::None => (0.0, 0.0, 0.0),
        Remat::Full => (c.mm_fwd, c.attn_fwd, 1.0 / 3.0),
        Remat::Selective | Remat::AfterMatmuls => (0.0, c.attn_fwd, 0.0),
    };
    (
        3.0 * c.mm_fwd + mm,
        c.attn_fwd + c.attn_bwd + attn,
        c.ew * (1.0 + ew),
    )
}

/// TP/SP collectives of one layer on one micro-batch.
struct TpLayer {
    /// Collectives.
    ops: f64,
    /// Exposed GPU time (transfer not hidden + ring latency).
    exposed: f64,
    /// Host stall per collective.
    stall: f64,
    /// Transfer time of all of them, nothing hidden, and their latency.
    transfer: f64,
    latency: f64,
    /// Chunks pipelined with the GEMMs (0 unless `pipelined`).
    chunks: f64,
}

/// The exposed part of `transfer` seconds of TP collectives pipelined in
/// `c` chunks with `gemm` seconds of GEMMs (Transformer Engine userbuffers,
/// NeMo "Communication Overlap": each all-gather becomes c − 1 ring-exchange
/// steps, each reduce-scatter ring steps of GEMM-output chunks, so chunk
/// k + 1 moves while chunk k multiplies): the first chunk waits, then each of
/// the other c − 1 takes the longer of its transfer and its GEMM, so the step
/// exceeds the GEMMs by `transfer/c + (c − 1)/c · max(0, transfer − gemm)`.
pub fn pipelined_exposed(transfer: f64, gemm: f64, c: f64) -> f64 {
    let c = c.max(1.0);
    transfer / c + (c - 1.0) / c * (transfer - gemm).max(0.0)
}

/// TP/SP collectives of one layer on one micro-batch whose matmuls take
/// `layer_mm` (recompute included).
fn tp_layer(g: &Geometry, layer_mm: f64) -> TpLayer {
    let p = g.p;
    let Some(t) = &g.inv.tp else {
        return TpLayer {
            ops: 0.0,
            exposed: 0.0,
            stall: 0.0,
            transfer: 0.0,
            latency: 0.0,
            chunks: 0.0,
        };
    };
    let (bw, _) = g.link(t);
    let per_op = t.bytes_per_call / bw;
    let tp_nodes = t.placement.nodes;
    // per collective: a ring over tp GPUs takes tp − 1 steps, each paced by
    // the slowest hop (NVLink or the scale-out network) — GPU time; with the
    // pipeline stages on other nodes every step also stalls the host
    // (`pp_tp_step_latency_s`, growing as (nodes of the TP group)^γ)
    let steps = t.ring_steps;
    let ring_lat = steps
        * if tp_nodes <= 1 {
            p.collective_latency_s
        } else {
            p.inter_node_latency_s
        };
    let pp_stall = if g.inv.pp_cross_node {
        steps
            * p.pp_tp_step_latency_s
            * (clamp_nodes(p, tp_nodes) as f64).powf(p.latency_node_exponent)
    } else {
        0.0
    };
    let all = t.calls;
    let sp = t.kind != crate::collectives::Collective::AllReduce;
    let fitted = all * (per_op * (1.0 - p.tp_overlap) + ring_lat);
    let (exposed, chunks) = match g.inv.overlap.tp {
        TpOverlap::Ring => (fitted, 0.0),
        TpOverlap::None => (all * (per_op + ring_lat), 0.0),
        // ring exchange: one chunk per TP rank
        TpOverlap::Pipelined if sp => {
            let c = t.ranks as f64;
            (
                pipelined_exposed(all * per_op, layer_mm, c) + all * ring_lat,
                c,
            )
        }
        // the userbuffers overlap needs SP; plain TP all-reduces keep the
        // fitted fraction (the planner's non-SP plans)
        TpOverlap::Pipelined => (fitted, 0.0),
    };
    TpLayer {
        ops: all,
        exposed,
        stall: pp_stall,
        transfer: all * per_op,
        latency: all * ring_lat,
        chunks,
    }
}

/// Context parallelism: ring attention passes the K/V chunks while the
/// chunk in hand is attended to, so only what exceeds the attention kernels
/// and the first hop are exposed (Liu et al. 2023, Ring Attention;
/// Megatron-LM context parallelism).
fn cp_layer(g: &Geometry, layer_attn: f64) -> f64 {
    let Some(t) = &g.inv.cp else {
        return 0.0;
    };
    let (bw, hop_lat) = g.link(t);
    if t.what == super::inventory::Moves::CpAllGather {
        // gathered before the attention that needs it: nothing hides it
        return t.calls * (t.bytes_per_call / bw + t.ring_steps * hop_lat);
    }
    let hop = t.bytes_per_call / bw + hop_lat;
    let comm = t.calls * hop;
    (comm - layer_attn).max(0.0) + hop
}

/// Expert parallelism: the dispatch and combine all-to-alls over the ep
/// ranks, on the critical path (no overlap modelled).
fn ep_layer(g: &Geometry) -> f64 {
    match &g.inv.ep {
        Some(t) => {
            let (bw, lat) = g.link(t);
            t.calls * (t.bytes_per_call / bw + t.ring_steps * lat)
        }
        None => 0.0,
    }
}

/// Fixed cost per micro-batch off the GPU, growing with the job (stragglers,
/// stalls): `(n / reference)^k`, 1 at the profile's reference (largest
/// fitted) job.
fn microbatch_overhead(g: &Geometry) -> f64 {
    let p = g.p;
    let mb_ref = p.calibrated_max_nodes.max(1) as f64;
    let job_growth = (g.nodes_f / mb_ref).powf(p.microbatch_node_exponent);
    if g.inv.pp_cross_node {
        // a stall per micro-batch per pipeline neighbour (1 with pp = 2, 2
        // with pp ≥ 3): always there with DDP (ZeRO-0, dp > 1) from
        // `ddp_pp_stall_min_microbatches` micro-batches on, otherwise growing
        // with the job
        let ddp =
            g.spec.zero == 0 && g.spec.dp.max(1) > 1 && g.m >= p.ddp_pp_stall_min_microbatches;
        let weight = if ddp { 1.0 } else { job_growth.min(1.0) };
        p.pp_stall_s * (g.inv.stages as f64 - 1.0).min(2.0) * weight
    } else {
        p.microbatch_overhead_s * job_growth
    }
}

/// The critical micro-batch: per-step totals of its parts.
struct Microbatch {
    /// One micro-batch on the critical stage (GPU and host paths' maximum).
    t_core: f64,
    /// Layers on the critical stage.
    l_crit: f64,
    mm: f64,
    attn: f64,
    ew: f64,
    tp: f64,
    cp: f64,
    ep: f64,
    /// Host stall beyond the GPU work per micro-batch, not booked to TP.
    stall_over: f64,
    /// One layer's TP collectives and matmul time.
    tp_layer: TpLayer,
    layer_mm: f64,
    /// Whether the critical stage holds the LM head.
    head: bool,
    /// Forward share of the micro-batch's compute.
    fwd_frac: f64,
    /// Weight-gradient share of the micro-batch's compute.
    wgrad_frac: f64,
    /// The compute by block, per step (no optimizer, no weight casts).
    blocks: BlockTimes,
}

/// A micro-batch runs on two paths at once: the GPU executes kernels and
/// exposed collective transfers, while the host issues them and waits out the
/// collective handshakes, the fixed per-layer costs and the job-size stalls.
/// The host runs ahead of the GPU (the launch queue holds many layers), so a
/// micro-batch takes the longer of the two, not their sum: on the Playbook,
/// pp > 1 runs cost ~m × (host latency) at micro-batch 1 and approach the
/// compute time at micro-batch 8+, with the same tokens.
fn microbatch(g: &Geometry) -> Microbatch {
    let c = layer_compute(g);
    let (layer_mm, layer_attn, layer_ew) = layer_with_recompute(g, &c);
    let tpl = tp_layer(g, layer_mm);
    let (tp_ops_all, tp_bw_layer, pp_stall) = (tpl.ops, tpl.exposed, tpl.stall);
    let cp = cp_layer(g, layer_attn);
    let ep = dualpipe_exposed_ep(g, ep_layer(g), layer_mm + layer_attn + layer_ew);
    let gpu_layer = layer_mm + layer_attn + layer_ew + tp_bw_layer + cp + ep;
    let host_tp = tp_ops_all * pp_stall;
    let host_layer = host_tp + g.p.layer_overhead_s;
    let mb_over = microbatch_overhead(g);
    let head = c.head_mm + c.loss;
    let gpu_path = |n: f64, h: bool| n * gpu_layer + if h { head } else { 0.0 };
    let host_path = |n: f64| n * host_layer + mb_over;
    // the slowest pipeline stage sets the pace: (layers on it, holds the LM head)
    let (plain, with_head) = (g.inv.layers_plain as f64, g.inv.layers_with_head as f64);
    let cost = |n: f64, h: bool| gpu_path(n, h).max(host_path(n));
    let (l_crit, head_crit) = if plain > 0.0 && cost(plain, false) >= cost(with_head, true) {
        (plain, false)
    } else {
        (with_head, true)
    };
    let head_f = if head_crit { 1.0 } else { 0.0 };
    let (gpu_mb, host_mb) = (gpu_path(l_crit, head_crit), host_path(l_crit));
    let t_core = gpu_mb.max(host_mb);
    // the host stall is booked to TP communication and overhead in proportion
    let stall = t_core - gpu_mb;
    let stall_tp = if host_mb > 0.0 {
        stall * l_crit * host_tp / host_mb
    } else {
        0.0
    };
    let m = g.m;
    Microbatch {
        t_core,
        l_crit,
        mm: m * (l_crit * layer_mm + head_f * c.head_mm),
        attn: m * l_crit * layer_attn,
        ew: m * (l_crit * layer_ew + head_f * c.loss),
        tp: m * (l_crit * tp_bw_layer + stall_tp),
        cp: m * l_crit * cp,
        ep: m * l_crit * ep,
        stall_over: stall - stall_tp,
        tp_layer: tpl,
        layer_mm,
        head: head_crit,
        fwd_frac: {
            let fwd = l_crit * (c.mm_fwd + c.attn_fwd) + head_f * c.head_mm / 3.0;
            let all = l_crit * (layer_mm + layer_attn) + head_f * c.head_mm;
            if all > 0.0 {
                fwd / all
            } else {
                1.0 / 3.0
            }
        },
        wgrad_frac: wgrad_fraction(&c, l_crit, head_f, layer_mm + layer_attn),
        blocks: {
            // the matmuls' passes (3, + a recomputed forward under full
            // remat) split by block as `layer_with_recompute` counts them
            let passes = if c.mm_fwd > 0.0 {
                layer_mm / c.mm_fwd
            } else {
                0.0
            };
            let layers = m * l_crit;
            BlockTimes {
                attention_projections: layers * passes * c.attn_mm_fwd,
                attention_core: layers * layer_attn,
                mlp: layers * passes * (c.mm_fwd - c.attn_mm_fwd),
                elementwise: layers * layer_ew,
                head: m * head_f * (c.head_mm + c.loss),
                optimizer: 0.0,
            }
        },
    }
}

/// ZeRO-3 / FSDP: the per-micro-batch gathers and reduce-scatters run on
/// their own stream under the micro-batch's compute (prefetch); what
/// exceeds it, and the first layer's gather, are exposed. (exposed, all of
/// it), per micro-batch; `dp_overlap = off` exposes all.
fn fsdp_microbatch(g: &Geometry, mb: &Microbatch) -> (f64, f64) {
    let Some(t) = &g.inv.fsdp else {
        return (0.0, 0.0);
    };
    let (bw, _) = g.link(t);
    let gb = grad_bytes(g.spec.framework);
    let comm = t.bytes_per_call / bw;
    // one layer's forward gather has nothing to hide under
    let first = comm * 2.0 / (2.0 + 2.0 + gb) / mb.l_crit.max(1.0);
    match g.inv.overlap.dp {
        DpOverlap::On => ((comm - mb.t_core).max(0.0) + first, comm),
        DpOverlap::Off => (comm, comm),
    }
}

/// Pipeline: (bubble, exposed point-to-point) per step.
fn pipeline(g: &Geometry, mb: &Microbatch, t_mb: f64) -> (f64, f64) {
    let Some(t) = &g.inv.pp else {
        return (0.0, 0.0);
    };
    let p = g.p;
    // (p − 1)/v micro-batch times, more when m < p (one formula, pipeline.rs);
    // DualPipe's from the step's own chunk times
    let bubble = match dualpipe_chunks(g, mb, t_mb) {
        Some(c) => dualpipe_bubble(g.inv.stages, c),
        None => {
            crate::parallelism::pipeline::bubble_microbatches(
                g.inv.stages,
                g.inv.microbatches,
                g.inv.virtual_stages,
            ) * t_mb
        }
    };
    let so = g
        .chip
        .scale_out
        .as_ref()
        .map_or(1e10, |x| x.per_chip.one_way_rate().get());
    let (p2p_bw, p2p_lat) = if g.inv.pp_cross_node {
        (
            so * p.p2p_efficiency,
            p.p2p_latency_s * g.nodes_f.powf(p.p2p_node_exponent),
        )
    } else {
        (coll_bw(p, g.chip, false, 2, 1), p.collective_latency_s)
    };
    // fwd send + bwd send per micro-batch on the critical path, plus the fill
    let t_pp = t.calls * (t.bytes_per_call / p2p_bw + p2p_lat);
    (bubble, dualpipe_exposed_pp(g, t_pp))
}

/// Data parallel across the replicas of each shard after gradient
/// accumulation — except ZeRO-2, which reduce-scatters every micro-batch,
/// each under the next micro-batch's compute `t_mb`: (exposed reduction,
/// optimizer update, the reduction with nothing hidden). `dp_overlap = off`
/// hides none.
fn data_parallel(g: &Geometry, t_mb: f64) -> (f64, f64, f64) {
    let inv = &g.inv;
    let on = inv.overlap.dp == DpOverlap::On;
    let (t_dp, raw) = match (&inv.dp, &inv.dp_gather) {
        (None, _) => (0.0, 0.0),
        (Some(rs_t), Some(ag_t)) => {
            // reduce-scatter of the gradients + all-gather of the bf16 parameters
            let (bw, _) = g.link(rs_t);
            let (rs, ag) = (rs_t.bytes_per_call / bw, ag_t.bytes_per_call / bw);
            let early = inv.dp_early_calls;
            let raw = rs + ag + early * rs;
            if on {
                let t = (rs + ag) * (1.0 - g.p.dp_overlap) + early * (rs - t_mb).max(0.0);
                (t, raw)
            } else {
                (raw, raw)
            }
        }
        (Some(ar_t), None) => {
            let (bw, _) = g.link(ar_t);
            let ar = ar_t.bytes_per_call / bw;
            (if on { ar * (1.0 - g.p.dp_overlap) } else { ar }, ar)
        }
    };
    // optimizer (HBM bound): ~34 B/param touched
    let (opt_params, stage) = inv.optimizer_params;
    let (per_opt, per_stage) = OPTIMIZER_BYTES;
    let t_opt = opt_params * per_opt / g.hbm_bw + stage * per_stage / g.hbm_bw;
    (t_dp, t_opt, raw)
}

/// Hardware FLOPs of one device per step at peak (no comms).
fn roofline(g: &Geometry) -> f64 {
    let inv = &g.inv;
    let attn = inv.attention.flops;
    let fwd_layer = inv.layer_matmul_flops + attn;
    let rec = match g.spec.remat {
        Remat::None => 0.0,
        Remat::Full => fwd_layer,
        _ => attn,
    };
    let a = &g.spec.arch;
    let l_stage = (a.n_layers as f64 / inv.stages as f64).ceil();
    g.m * (l_stage * (3.0 * fwd_layer + rec) + 3.0 * inv.head.flops) / g.peak
}

/// Predict the step time of one run, by part, and whether the job is
/// larger than the profile was fitted on (its job-size terms were held).
pub(crate) fn predict_time(
    spec: &RunSpec,
    chip: &Chip,
    p: &EfficiencyProfile,
) -> (TimeBreakdown, bool) {
    predict_time_with(spec, chip, p, &Features::default())
}

/// [`predict_time`] with the compute dtype, attention mask and overlap
/// settings of `f`.
pub(crate) fn predict_time_with(
    spec: &RunSpec,
    chip: &Chip,
    p: &EfficiencyProfile,
    f: &Features,
) -> (TimeBreakdown, bool) {
    let inv = StepInventory::build(spec, chip, f);
    let g = Geometry::new(spec, chip, p, f, &inv);
    let extrapolated = p.calibrated_max_nodes > 0 && g.inv.nodes > p.calibrated_max_nodes;
    (priced(&g).time, extrapolated)
}

/// A prediction by part, with what its communication hid and exposed and
/// the shape of the step ([`crate::fidelity::data::Run::predict_time_detailed`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Detailed {
    /// Step time by part.
    pub time: TimeBreakdown,
    /// The job is larger than the profile was fitted on.
    pub extrapolated: bool,
    /// Communication hidden and exposed.
    pub exposure: CommExposure,
    /// The step's schedule on its critical stage.
    pub schedule: StepSchedule,
    /// What the step contains (the priced inventory).
    pub inventory: StepInventory,
    /// The step's compute by block of the model.
    pub blocks: BlockTimes,
}

/// A step priced by part, with what the detailed view reads besides.
struct Priced {
    mb: Microbatch,
    fsdp_mb: f64,
    fsdp_raw: f64,
    dp_raw: f64,
    time: TimeBreakdown,
    blocks: BlockTimes,
}

/// Price the inventory `g` holds: the step's parts.
fn priced(g: &Geometry) -> Priced {
    let p = g.p;
    let mb = microbatch(g);
    let (fsdp_mb, fsdp_raw) = fsdp_microbatch(g, &mb);
    let (bubble, t_pp) = pipeline(g, &mb, mb.t_core + fsdp_mb);
    let (dp_exposed, t_opt, dp_raw) = data_parallel(g, mb.t_core + fsdp_mb);
    let t_dp = dp_exposed + g.m * fsdp_mb;
    let overhead = p.step_overhead_s + p.node_overhead_s * g.nodes_f + g.m * mb.stall_over;
    let weight_casts = weight_cast_time(g);
    let ew = mb.ew + weight_casts;
    let total =
        mb.mm + mb.attn + ew + mb.tp + mb.cp + mb.ep + bubble + t_pp + t_dp + t_opt + overhead;
    let time = TimeBreakdown {
        matmul: mb.mm,
        attention: mb.attn,
        memory_bound: ew,
        tp_comm: mb.tp,
        cp_comm: mb.cp,
        ep_comm: mb.ep,
        pp_comm: t_pp,
        bubble,
        dp_comm: t_dp,
        optimizer: t_opt,
        overhead,
        floor_raise: 0.0,
        total,
        roofline: roofline(g),
    };
    let blocks = BlockTimes {
        elementwise: mb.blocks.elementwise + weight_casts,
        optimizer: t_opt,
        ..mb.blocks
    };
    Priced {
        mb,
        fsdp_mb,
        fsdp_raw,
        dp_raw,
        time,
        blocks,
    }
}

/// The step time by part alone (what the planner ranks by: nothing else is
/// assembled), with the placement the planner worked out once for the
/// degree tuple ([`StepInventory::split_of`]).
pub(crate) fn predict_time_parts_split(
    spec: &RunSpec,
    chip: &Chip,
    p: &EfficiencyProfile,
    f: &Features,
    split: crate::mesh::GpuSplit,
) -> TimeBreakdown {
    let inv = StepInventory::build_split(spec, chip, f, split);
    priced(&Geometry::new(spec, chip, p, f, &inv)).time
}

/// [`predict_time_with`], and what its communication hid and exposed, the
/// step's schedule and its inventory.
pub(crate) fn predict_time_detailed(
    spec: &RunSpec,
    chip: &Chip,
    p: &EfficiencyProfile,
    f: &Features,
) -> Detailed {
    let inv = StepInventory::build(spec, chip, f);
    let g = Geometry::new(spec, chip, p, f, &inv);
    let Priced {
        mb,
        fsdp_mb,
        fsdp_raw,
        dp_raw,
        time,
        blocks,
    } = priced(&g);
    let t_dp = time.dp_comm;
    let extrapolated = p.calibrated_max_nodes > 0 && g.inv.nodes > p.calibrated_max_nodes;
    let layers = g.m * mb.l_crit;
    let t = &mb.tp_layer;
    let exposure = CommExposure {
        tp_collectives_per_layer: t.ops,
        tp_transfer_s: layers * t.transfer,
        tp_latency_s: layers * t.latency,
        tp_gemm_s: layers * mb.layer_mm,
        tp_chunks: t.chunks,
        tp_exposed_s: layers * t.exposed,
        dp_transfer_s: dp_raw + g.m * fsdp_raw,
        dp_exposed_s: t_dp,
    };
    let schedule = StepSchedule {
        stages: g.inv.stages,
        microbatches: g.inv.microbatches,
        virtual_stages: g.inv.virtual_stages,
        layers: mb.l_crit,
        head: mb.head,
        microbatch_s: mb.t_core + fsdp_mb,
        forward_fraction: mb.fwd_frac,
        fsdp_exposed_s: fsdp_mb,
        host_stall_s: mb.stall_over,
        dualpipe: dualpipe_shape(&g, &mb, mb.t_core + fsdp_mb, time.bubble),
        expert_gemm: expert_gemm(&g),
        fp8: fp8_pricing(&g),
    };
    Detailed {
        time,
        extrapolated,
        exposure,
        schedule,
        inventory: inv,
        blocks,
    }
}

// ---------------------------------------------------------------------------
// Expert GEMMs, fp8 recipes and DualPipe: the parts of the pricing that
// read the profile's grouped-GEMM and per-dtype GEMM curves and the
// DualPipe schedule (docs/training.md, "DualPipe, FP8 recipes and MoE
// grouped GEMMs").

/// The recipe and its GEMM curve when the run has an fp8 recipe and the
/// profile the curve (`[[curves.gemm]]` of `fp8` or `fp8_block`); without
/// the curve the recipe's casts are still priced and the GEMMs keep the
/// pricing without recipes (the bf16 curve's fraction of the fp8 peak).
fn recipe_curve<'a>(p: &'a EfficiencyProfile, f: &Features) -> Option<(Fp8Recipe, &'a GemmCurve)> {
    let r = f.fp8_recipe?;
    let c = p.curves.as_ref()?.gemm_of(r.gemm_curve())?;
    Some((r, c))
}

/// The grouped-GEMM curve of the experts' kernels: bf16, or the fp8
/// recipe's (`fp8`, `fp8_block`); none for low-precision GEMMs without a
/// recipe (their pricing stays as it was).
fn grouped_curve<'a>(
    p: &'a EfficiencyProfile,
    f: &Features,
) -> Option<(&'static str, &'a GemmCurve)> {
    let name = match (f.fp8_recipe, f.compute_dtype.bytes_per_element() < 2.0) {
        (Some(r), true) => r.gemm_curve(),
        (_, false) => "bf16",
        (None, true) => return None,
    };
    Some((name, p.curves.as_ref()?.grouped_gemm_of(name)?))
}

/// Efficiency of a routed-expert GEMM on the profile's grouped-GEMM curve:
/// `share · e_max · (x/⌈x⌉₁₂₈) · x/(x + x½)`, `x = min(rows per expert,
/// k, n)`, `share` the framework's fraction of the kernel rate
/// (`matmul_stack_share`, as for dense GEMMs).
pub fn grouped_gemm_efficiency(p: &EfficiencyProfile, curve: &GemmCurve, x: &Gemm) -> f64 {
    p.matmul_stack_share * curve.efficiency_at(x.m, x.n, x.k)
}

/// Efficiency of a GEMM on an fp8 recipe's curve (of the fp8 peak):
/// `share · e_max · (x/⌈x⌉₁₂₈) · x/(x + x½)`, `x = min(m, k, n)`.
pub fn recipe_gemm_efficiency(p: &EfficiencyProfile, curve: &GemmCurve, x: &Gemm) -> f64 {
    p.matmul_stack_share * curve.efficiency_at(x.m, x.n, x.k)
}

/// Time of one GEMM call of a layer: routed experts on the grouped-GEMM
/// curve (where the profile has one), the other GEMMs on the recipe's
/// curve under an fp8 recipe — except the router and the LM head, which
/// the recipes keep in bf16 (DeepSeek-V3 §3.3.1: embedding, output head
/// and MoE gating stay in their original precision) — else [`Geometry::gemm`].
fn layer_gemm_time(g: &Geometry, x: &Gemm) -> f64 {
    if x.block == Block::RoutedExperts {
        if let Some((_, c)) = g.grouped {
            let peak = if g.recipe.is_some() {
                g.mm_peak
            } else {
                g.peak
            };
            return x.flops / (peak * grouped_gemm_efficiency(g.p, c, x));
        }
    }
    match (g.recipe, x.block) {
        (Some(_), Block::Router | Block::LmHead) => {
            x.flops / (g.peak * gemm_efficiency(g.p, x.m, x.k, x.n))
        }
        (Some((_, c)), _) => x.flops / (g.mm_peak * recipe_gemm_efficiency(g.p, c, x)),
        (None, _) => g.gemm(x),
    }
}

/// The fp8 casts of one layer (forward + backward), seconds: the
/// inventory's cast elements at the recipe's bytes per element
/// ([`Fp8Recipe::cast_bytes_per_element`]; without a recipe, delayed
/// scaling's [`FP8_CAST_BYTES`]).
fn cast_time(g: &Geometry) -> f64 {
    let per = g
        .fp8_recipe
        .map_or(FP8_CAST_BYTES, Fp8Recipe::cast_bytes_per_element);
    g.inv.cast_bytes / FP8_CAST_BYTES * per / g.hbm_bw
}

/// The fp8 recipe's weight casts of one step, seconds: the stage's
/// parameters (both copies under DualPipe) quantized once per step — the
/// first micro-batch's copy is reused by the others (TE
/// `is_first_microbatch`) — at [`Fp8Recipe::weight_cast_bytes_per_param`];
/// 0 without a recipe (the pricing before recipes).
fn weight_cast_time(g: &Geometry) -> f64 {
    g.fp8_recipe.map_or(0.0, |r| {
        g.inv.optimizer_params.1 * r.weight_cast_bytes_per_param() / g.hbm_bw
    })
}

/// The weight-gradient share of one micro-batch's compute on the critical
/// stage: the weight-gradient GEMMs are one forward's matmuls (`dW = Xᵀ·dY`
/// per GEMM; the other backward GEMM is the input gradient), the LM head's
/// a third of its three passes; attention has no weights.
fn wgrad_fraction(c: &LayerCompute, l_crit: f64, head_f: f64, layer_compute: f64) -> f64 {
    let w = l_crit * c.mm_fwd + head_f * c.head_mm / 3.0;
    let all = l_crit * layer_compute + head_f * c.head_mm;
    if all > 0.0 {
        w / all
    } else {
        1.0 / 3.0
    }
}

/// DualPipe's chunk times of the step (`None` under other schedules):
/// `F = f_fwd·T_mb`, `W = f_W·T_mb`, `B = T_mb − F`, from the critical
/// micro-batch's compute shares.
fn dualpipe_chunks(g: &Geometry, mb: &Microbatch, t_mb: f64) -> Option<ChunkTimes> {
    (g.spec.schedule == Schedule::DualPipe && g.inv.stages > 1).then_some(ChunkTimes {
        f: mb.fwd_frac * t_mb,
        b: (1.0 - mb.fwd_frac) * t_mb,
        w: mb.wgrad_frac * t_mb,
    })
}

/// The expert-parallel all-to-all of one layer under DualPipe: a forward
/// chunk's dispatch and combine run while the paired backward chunk
/// computes and the other way round (DeepSeek-V3 §3.2.1), so only what the
/// layer's compute (`layer_compute`, forward + backward) cannot cover is
/// exposed: `max(0, T_EP − T_compute)`. Other schedules: all of it.
fn dualpipe_exposed_ep(g: &Geometry, ep: f64, layer_compute: f64) -> f64 {
    if g.spec.schedule == Schedule::DualPipe && g.inv.stages > 1 {
        (ep - layer_compute).max(0.0)
    } else {
        ep
    }
}

/// The pipeline sends of a step under DualPipe: the steady-state sends
/// overlap the paired chunk, so only the fill and drain's are exposed —
/// `(pp − 1)` of the `(m + pp − 1)` per direction pair. Other schedules:
/// all of them.
fn dualpipe_exposed_pp(g: &Geometry, t_pp: f64) -> f64 {
    let (p, m) = (g.inv.stages as f64, g.m);
    if g.spec.schedule == Schedule::DualPipe && p > 1.0 {
        t_pp * (p - 1.0) / (m + p - 1.0)
    } else {
        t_pp
    }
}

/// DualPipe's shape of a priced step (`predicted.schedule.dualpipe`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DualPipeShape {
    /// Forward chunk (one micro-batch on the critical stage), seconds.
    pub forward_s: f64,
    /// Backward chunk, seconds.
    pub backward_s: f64,
    /// Of the backward: the weight-gradient GEMMs, seconds.
    pub weight_grad_s: f64,
    /// The overlapped forward + backward pair, `F&B = F + B`, seconds.
    pub overlapped_pair_s: f64,
    /// `(pp/2 − 1)·(F&B + B − 3W)`, seconds per step.
    pub bubble_s: f64,
    /// 1F1B's `(pp − 1)·(F + B)` at the same chunk times, seconds.
    pub one_f_one_b_bubble_s: f64,
    /// Expert-parallel all-to-all hidden under the paired chunk, per step.
    pub ep_hidden_s: f64,
}

/// The DualPipe shape of a priced step (`None` under other schedules).
fn dualpipe_shape(g: &Geometry, mb: &Microbatch, t_mb: f64, bubble: f64) -> Option<DualPipeShape> {
    let c = dualpipe_chunks(g, mb, t_mb)?;
    let ep_all = g.m * mb.l_crit * ep_layer(g);
    Some(DualPipeShape {
        forward_s: c.f,
        backward_s: c.b,
        weight_grad_s: c.w,
        overlapped_pair_s: c.overlapped_pair(),
        bubble_s: bubble,
        one_f_one_b_bubble_s: crate::parallelism::pipeline::one_f_one_b_bubble(g.inv.stages, c),
        ep_hidden_s: ep_all - mb.ep,
    })
}

/// One curve as a prediction used it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CurveUse {
    /// The curve's dtype (`bf16`, `fp8`, `fp8_block`).
    pub dtype: &'static str,
    /// `e_max`.
    pub efficiency: f64,
    /// `x½`.
    pub half_dim: f64,
}

impl CurveUse {
    fn of(dtype: &'static str, c: &GemmCurve) -> CurveUse {
        CurveUse {
            dtype,
            efficiency: c.efficiency,
            half_dim: c.half_dim,
        }
    }
}

/// The routed experts' GEMMs as priced (`predicted.schedule.expert_gemm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ExpertGemm {
    /// The grouped-GEMM curve.
    pub curve: CurveUse,
    /// Rows each local expert's GEMM gets per micro-batch (`M_e`).
    pub rows_per_expert: f64,
    /// The smallest side `x = min(M_e, k, n)` of the up-projection GEMM.
    pub x: f64,
    /// The efficiency applied, `share · e(x)`, of the peak.
    pub efficiency: f64,
    /// What the dense GEMM curve would give the same shape.
    pub dense_efficiency: f64,
}

/// The routed experts' grouped-GEMM pricing of `g` (the first routed
/// GEMM: the up-projection).
fn expert_gemm(g: &Geometry) -> Option<ExpertGemm> {
    let (name, c) = g.grouped?;
    let x = g
        .inv
        .layer_gemms
        .as_slice()
        .iter()
        .find(|x| x.block == Block::RoutedExperts)?;
    Some(ExpertGemm {
        curve: CurveUse::of(name, c),
        rows_per_expert: x.m,
        x: x.m.min(x.k).min(x.n),
        efficiency: grouped_gemm_efficiency(g.p, c, x),
        dense_efficiency: gemm_efficiency(g.p, x.m, x.k, x.n),
    })
}

/// An fp8 recipe as priced (`predicted.schedule.fp8`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Fp8Pricing {
    /// The recipe.
    pub recipe: Fp8Recipe,
    /// Its GEMM curve (`None`: the profile has none; the GEMMs keep the
    /// bf16 curve's fraction of the fp8 peak).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curve: Option<CurveUse>,
    /// Efficiency of the layer's largest GEMM on that curve (share
    /// included), of the fp8 peak.
    pub largest_gemm_efficiency: f64,
    /// HBM bytes per cast element.
    pub cast_bytes_per_element: f64,
    /// Cast traffic of one layer (forward + backward), bytes.
    pub cast_bytes_per_layer: f64,
    /// Its time, seconds per layer and micro-batch.
    pub cast_s_per_layer: f64,
    /// The weights' casts, once per step (the stage's parameters), seconds.
    pub weight_cast_s: f64,
}

/// The fp8 recipe pricing of `g` (`None` without a recipe).
fn fp8_pricing(g: &Geometry) -> Option<Fp8Pricing> {
    let r = g.fp8_recipe?;
    let per = r.cast_bytes_per_element();
    let bytes = g.inv.cast_bytes / FP8_CAST_BYTES * per;
    let big = g
        .inv
        .layer_gemms
        .as_slice()
        .iter()
        .filter(|x| x.block != Block::Router)
        .max_by(|a, b| a.flops.total_cmp(&b.flops));
    let eff = match (g.recipe, big) {
        (Some((_, c)), Some(x)) => recipe_gemm_efficiency(g.p, c, x),
        (None, Some(x)) => gemm_efficiency(g.p, x.m, x.k, x.n),
        _ => 0.0,
    };
    Some(Fp8Pricing {
        recipe: r,
        curve: g.recipe.map(|(r, c)| CurveUse::of(r.gemm_curve(), c)),
        largest_gemm_efficiency: eff,
        cast_bytes_per_element: per,
        cast_bytes_per_layer: bytes,
        cast_s_per_layer: bytes / g.hbm_bw,
        weight_cast_s: weight_cast_time(g),
    })
}
