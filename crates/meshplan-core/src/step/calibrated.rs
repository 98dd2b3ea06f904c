//! The step-time model (see `docs/fidelity.md`): a run's step time, by part,
//! from the efficiency profile of its chip. Peak memory comes from the one
//! memory model ([`crate::memory`]) with the profile's calibration.

use serde::Serialize;

use crate::fidelity::profile::EfficiencyProfile;
use crate::hardware::Chip;
use crate::mesh::{GpuSplit, Topology};
use crate::model::flops::{head_dims, layer_keys};
use crate::parallelism::pipeline::stage_extremes;
use crate::parallelism::{
    Degrees, DpOverlap, Framework, LogicalAxis, Overlap, Remat, RunSpec, Schedule, SpAllGather,
    TpOverlap, TrainConfig,
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

/// What a prediction reads besides the replica ([`RunSpec`]): the GEMMs'
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
}

impl Default for Features {
    fn default() -> Self {
        Features {
            compute_dtype: DType::Bf16,
            causal: true,
            overlap: Overlap::default(),
            slices: 1,
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

/// GEMM efficiency for an `[m, k] × [k, n]` matmul: `e_max · x/(x + x½)` with
/// `x = min(m, k, n)` after rounding up to the 128-wide tensor-core tile
/// (padding waste `x/ceil128(x)`).
pub fn gemm_efficiency(p: &EfficiencyProfile, m: f64, k: f64, n: f64) -> f64 {
    let x = m.min(k).min(n).max(1.0);
    let padded = (x / 128.0).ceil() * 128.0;
    p.matmul_efficiency * (x / padded) * x / (x + p.matmul_half_dim)
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
    // a TPU slice is one ICI domain: a ring collective along one torus axis
    // with wraparound moves data both ways round the ring, 2 links' one-way
    // bandwidth per chip (book ch3: T = V/(2·W_ici) for an all-gather)
    let ici = chip.ici.as_ref().map(|i| 2.0 * i.link.one_way_rate().get());
    let nv = ici.unwrap_or_else(|| {
        chip.nvlink
            .as_ref()
            .map_or(chip.hbm_bandwidth.get() / 10.0, |n| {
                n.per_gpu.one_way_rate().get()
            })
    });
    let intra = nv * p.intra_node_efficiency;
    if nodes <= 1 {
        return intra;
    }
    let so = chip
        .scale_out
        .as_ref()
        .map_or(nv / 10.0, |s| s.per_chip.one_way_rate().get());
    let inter = per_node as f64
        * so
        * p.inter_node_efficiency
        * (clamp_nodes(p, nodes) as f64).powf(-p.inter_node_congestion);
    inter.min(intra)
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

/// The numbers every part of the prediction reads.
struct Geometry<'a> {
    spec: &'a RunSpec,
    chip: &'a Chip,
    p: &'a EfficiencyProfile,
    /// bf16 peak (attention kernels) and the GEMMs' peak (compute dtype).
    peak: f64,
    mm_peak: f64,
    /// The GEMMs run in fp8/int8/fp4: their inputs are cast every pass.
    low_precision: bool,
    causal: bool,
    /// Attention projection parameters of one layer (MLA: its own
    /// down/up projections; otherwise the Q, K, V, O matrices).
    attn_params: f64,
    hbm_bw: f64,
    tp: u64,
    pp: u64,
    dp: u64,
    cp: u64,
    ep: u64,
    /// D, the FFN width a token goes through (MoE: k experts + shared), V.
    d: f64,
    f: f64,
    v: f64,
    /// N·H and K·H.
    nh: f64,
    kh: f64,
    /// Local sequence (T/cp) and tokens per micro-batch.
    seq: f64,
    tok: f64,
    /// Micro-batches per step.
    m: f64,
    sp: bool,
    nodes: u64,
    /// Nodes, held at the calibrated range.
    nodes_f: f64,
    /// Pipeline stages sit on other nodes.
    pp_cross: bool,
    /// The mesh degrees and how they split between NVLink and the network
    /// (the same placement the book evaluator costs).
    deg: Degrees,
    split: GpuSplit,
    /// The run's overlap settings.
    ov: Overlap,
}

impl<'a> Geometry<'a> {
    fn new(spec: &'a RunSpec, chip: &'a Chip, p: &'a EfficiencyProfile, f: &Features) -> Self {
        let a = &spec.arch;
        // a TPU slice is one ICI domain, the "node" of the placement: a
        // multi-slice job's outer axes cross the DCN between slices
        let slices = f.slices.max(1);
        let per_node = match (&chip.ici, &chip.nvlink) {
            (Some(_), _) if spec.n_gpus % slices == 0 => (spec.n_gpus / slices).max(1),
            (Some(_), _) => spec.n_gpus.max(1),
            (None, n) => n.as_ref().map_or(8, |n| n.domain_size).max(1),
        };
        let (tp, pp, dp, cp) = (
            spec.tp.max(1),
            spec.pp.max(1),
            spec.dp.max(1),
            spec.cp.max(1),
        );
        let seq = (spec.seq_len / cp) as f64;
        let nodes = if chip.ici.is_some() {
            spec.n_gpus.max(1) / per_node
        } else {
            crate::fidelity::range::job_nodes(spec, chip)
        };
        let deg = spec.degrees();
        let split = GpuSplit::new(&deg, per_node);
        Geometry {
            spec,
            chip,
            p,
            peak: chip.flops(DType::Bf16).get(),
            mm_peak: chip.flops(f.compute_dtype).get() * low_precision_relative(f.compute_dtype),
            low_precision: f.compute_dtype.bytes_per_element() < 2.0,
            causal: f.causal,
            attn_params: match &a.mla {
                Some(_) => spec.params.attention as f64 / a.n_layers.max(1) as f64,
                None => {
                    (a.d_model * a.n_heads * a.d_head * 2 + a.d_model * a.n_kv_heads * a.d_head * 2)
                        as f64
                }
            },
            hbm_bw: chip.hbm_bandwidth.get() * p.hbm_efficiency,
            tp,
            pp,
            dp,
            cp,
            ep: spec.ep.max(1),
            d: a.d_model as f64,
            f: a.ffn_width_active(),
            v: a.vocab as f64,
            nh: (a.n_heads * a.d_head) as f64,
            kh: (a.n_kv_heads * a.d_head) as f64,
            seq,
            tok: spec.mbs as f64 * seq,
            m: spec.grad_acc.max(1) as f64,
            sp: spec.sequence_parallel && tp > 1,
            nodes,
            nodes_f: clamp_nodes(p, nodes) as f64,
            // pipeline neighbours sit in other nodes once pp leaves the node
            pp_cross: split.in_node(LogicalAxis::Pp) < pp,
            deg,
            split,
            ov: f.overlap,
        }
    }
    fn tpf(&self) -> f64 {
        self.tp as f64
    }
    /// Time of a `[m, k] × [k, n]` GEMM of `flops` at its efficiency.
    fn gemm(&self, flops: f64, m: f64, k: f64, n: f64) -> f64 {
        flops / (self.mm_peak * gemm_efficiency(self.p, m, k, n))
    }
    /// A collective group over the mesh axes `group`: (GPUs of it per node,
    /// nodes spanned).
    fn layout(&self, group: &[LogicalAxis]) -> (u64, u64) {
        self.split.group(&self.deg, group)
    }
    /// Bandwidth and per-step latency of a group laid out as `(per, nodes)`.
    fn link(&self, (per, nodes): (u64, u64)) -> (f64, f64) {
        let lat = if nodes > 1 {
            self.p.inter_node_latency_s
        } else {
            self.p.collective_latency_s
        };
        (coll_bw(self.p, self.chip, false, per, nodes), lat)
    }
}

/// One layer's compute on one micro-batch (forward unless said), seconds.
struct LayerCompute {
    /// Forward matmuls.
    mm_fwd: f64,
    /// Forward attention FLOPs and time; backward time.
    attn_fwd_flops: f64,
    attn_fwd: f64,
    attn_bwd: f64,
    /// Element-wise HBM traffic, forward + backward.
    ew: f64,
    /// LM head matmuls (fwd + bwd) and loss on the last stage.
    head_mm: f64,
    loss: f64,
}

/// MLP up (+gate) and down for `rows` token-rows of FFN width `width`, each
/// GEMM `tall` rows high (its efficiency).
fn mlp_time(g: &Geometry, rows: f64, tall: f64, width: f64) -> f64 {
    mlp_time_split(g, rows, tall, width / g.tpf())
}

/// [`mlp_time`] with `width` already the per-device share.
fn mlp_time_split(g: &Geometry, rows: f64, tall: f64, width: f64) -> f64 {
    let mats = g.spec.arch.mlp.matrices() as f64;
    let up = (mats - 1.0) * width;
    let down = width;
    g.gemm(2.0 * rows * g.d * up, tall, g.d, up) + g.gemm(2.0 * rows * down * g.d, tall, down, g.d)
}

/// Forward MLP (dense or MoE, averaged over the layers).
fn ffn_time(g: &Geometry) -> f64 {
    let a = &g.spec.arch;
    let dense = mlp_time(g, g.tok, g.tok, a.d_ff as f64);
    match &a.moe {
        None => dense,
        Some(mo) => {
            // MoE layers: shared experts see every token; the k·tok routed
            // token-rows land on the E/ep local experts, ep·tok·k/E rows each
            // (short GEMMs); the router is a [tok, D] × [D, E] GEMM
            // (short GEMMs); the router is a [tok, D] × [D, E] GEMM. Whole
            // experts (etp = 1): each TP rank routes its tok/tp sequence
            // shard and runs full-width experts — the same FLOPs, GEMMs tp×
            // shorter and tp× wider
            let (k, e) = (mo.top_k as f64, mo.n_experts.max(1) as f64);
            let (rows, width) = if g.spec.whole_experts() {
                (g.tok * k / g.tpf(), a.d_ff_expert() as f64)
            } else {
                (g.tok * k, a.d_ff_expert() as f64 / g.tpf())
            };
            let tall = (g.ep as f64 * rows / e).max(1.0);
            let moe_layer = mo.n_shared_experts as f64
                * mlp_time(g, g.tok, g.tok, a.d_ff_shared() as f64)
                + MOE_LOAD_IMBALANCE * mlp_time_split(g, rows, tall, width)
                + g.gemm(2.0 * g.tok * g.d * e, g.tok, g.d, e);
            let phi = a.moe_fraction();
            (1.0 - phi) * dense + phi * moe_layer
        }
    }
}

/// Attention forward FLOPs, forward and backward time.
fn attention_time(g: &Geometry) -> (f64, f64, f64) {
    let tpf = g.tpf();
    if g.spec.framework == Framework::Megatron2022 {
        // unfused attention core: full s×s scores (no causal skipping), two
        // batched GEMMs with the head dimension as inner size, and the scores
        // through HBM: fwd QKᵀ write 2 B, softmax r/w 4 B, dropout r/w + mask
        // 5 B = 11 B per score element; bwd (PV grad, dropout, softmax, QKᵀ
        // grads) ≈ 19 B per element (Korthikanti et al. 2022, the 5·a·s/h term).
        let fl = 4.0 * g.tok * g.seq * g.nh / tpf;
        let dh = g.spec.arch.d_head as f64;
        let mm = g.gemm(fl, g.seq, dh, g.seq);
        let elems = g.spec.mbs as f64 * (g.spec.arch.n_heads as f64 / tpf) * g.seq * g.seq;
        return (
            fl,
            mm + 11.0 * elems / g.hbm_bw,
            2.0 * mm + 19.0 * elems / g.hbm_bw,
        );
    }
    // with context parallelism the local queries attend to the whole
    // (causal, load-balanced) sequence: the K/V length is seq_len, not seq/cp;
    // keys per query averaged over the layers (causal half, sliding windows),
    // per-head widths of MLA (model::flops)
    let a = &g.spec.arch;
    let keys = layer_keys(a, g.spec.seq_len, g.causal) / a.n_layers.max(1) as f64;
    let (hqk, hv) = head_dims(a);
    let fl = 2.0 * g.tok * a.n_heads as f64 * (hqk + hv) as f64 * keys / tpf;
    let t = fl / (g.peak * g.p.attention_efficiency);
    (fl, t, FA_BACKWARD_TIME * t)
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

/// HBM bytes per parameter the optimizer step touches: fp32 master, two
/// moments and the gradient read and written (~34 B) on the parameters a
/// device updates, plus 4 B per parameter of its stage (bf16 copy written,
/// gradient zeroed).
pub const OPTIMIZER_BYTES: (f64, f64) = (34.0, 4.0);

/// (parameters a device updates, parameters of its stage): the optimizer
/// step's HBM traffic is `34·first + 4·second` bytes ([`OPTIMIZER_BYTES`]).
pub fn optimizer_params(spec: &RunSpec) -> (f64, f64) {
    let stage = spec.stage_params();
    let (shard, repl) = spec.shard_groups();
    let repl_params = stage / shard as f64;
    let opt = repl_params / if spec.zero >= 1 { repl as f64 } else { 1.0 };
    (opt, stage)
}

fn layer_compute(g: &Geometry) -> LayerCompute {
    let tpf = g.tpf();
    let (d, tok) = (g.d, g.tok);
    let qkv = (g.nh + 2.0 * g.kh) / tpf;
    let attn_mm = if g.spec.arch.mla.is_some() {
        // MLA: the down/up projections as one GEMM of the layer's attention
        // parameters, D deep
        let width = g.attn_params / d / tpf;
        g.gemm(2.0 * tok * g.attn_params / tpf, tok, d, width)
    } else {
        g.gemm(2.0 * tok * d * qkv, tok, d, qkv)
            + g.gemm(2.0 * tok * (g.nh / tpf) * d, tok, g.nh / tpf, d)
    };
    let mm_fwd = attn_mm + ffn_time(g);
    let (attn_fwd_flops, attn_fwd, attn_bwd) = attention_time(g);
    // element-wise traffic per token·layer (fwd+bwd), bf16: norms+residual 20·D
    // (sharded by SP), SwiGLU 8·F and RoPE 8·N·H (sharded by TP)
    let dsh = if g.sp || g.tp == 1 { d / tpf } else { d };
    let mut ew = 2.0 * tok * elementwise_elems(dsh, g.f, g.nh, tpf) / g.hbm_bw;
    if g.low_precision {
        // fp8 casts of every GEMM input (forward: D, N·H, D, F) and output
        // gradient (backward: N·H + 2·K·H, D, (m−1)·F, D)
        let mats = g.spec.arch.mlp.matrices() as f64;
        let elems = (2.0 * d + g.nh + g.f + g.nh + 2.0 * g.kh + 2.0 * d + (mats - 1.0) * g.f) / tpf;
        ew += FP8_CAST_BYTES * tok * elems / g.hbm_bw;
    }
    // LM head + loss on the last stage (vocab-parallel over tp)
    let head_mm = 3.0 * g.gemm(2.0 * tok * d * g.v / tpf, tok, d, g.v / tpf);
    let loss = 6.0 * tok * g.v / tpf * 4.0 / g.hbm_bw;
    LayerCompute {
        mm_fwd,
        attn_fwd_flops,
        attn_fwd,
        attn_bwd,
        ew,
        head_mm,
        loss,
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
    let (tpf, p) = (g.tpf(), g.p);
    let (tp_per, tp_nodes) = g.layout(&[LogicalAxis::Tp]);
    let act_bytes = g.tok * g.d * 2.0;
    let (ops, per_op) = if g.tp <= 1 {
        (0.0, 0.0)
    } else if g.sp {
        // SP: 2 all-gathers + 2 reduce-scatters forward, the same backward
        let bw = coll_bw(p, g.chip, false, tp_per, tp_nodes);
        (8.0, (tpf - 1.0) / tpf * act_bytes / bw)
    } else {
        // plain TP: 2 all-reduces forward + 2 backward
        let bw = coll_bw(p, g.chip, true, tp_per, tp_nodes);
        (4.0, 2.0 * (tpf - 1.0) / tpf * act_bytes / bw)
    };
    // per collective: a ring over tp GPUs takes tp − 1 steps, each paced by
    // the slowest hop (NVLink or the scale-out network) — GPU time; with the
    // pipeline stages on other nodes every step also stalls the host
    // (`pp_tp_step_latency_s`, growing as (nodes of the TP group)^γ)
    let steps = (tpf - 1.0).max(0.0);
    let ring_lat = steps
        * if tp_nodes <= 1 {
            p.collective_latency_s
        } else {
            p.inter_node_latency_s
        };
    let pp_stall = if g.pp_cross {
        steps
            * p.pp_tp_step_latency_s
            * (clamp_nodes(p, tp_nodes) as f64).powf(p.latency_node_exponent)
    } else {
        0.0
    };
    // whole experts (etp = 1, Megatron-Core's alltoall dispatcher): a MoE
    // layer's tokens reach the experts through the all-to-all from their
    // sequence shards, so the MLP's half of the layer's TP collectives is
    // gone (kept when shared experts still run tensor-parallel)
    let ops = match &g.spec.arch.moe {
        Some(mo) if g.spec.whole_experts() && mo.n_shared_experts == 0 => {
            ops * (1.0 - 0.5 * g.spec.arch.moe_fraction())
        }
        _ => ops,
    };
    // the recomputed forward repeats its collectives
    let all = if g.spec.remat == Remat::Full {
        ops * 1.5
    } else {
        ops
    };
    // keeping only the sequence shard of a column-parallel GEMM's input
    // (QKV, MLP up) means gathering it again for its weight gradient
    // (Korthikanti et al. 2022 §4.2.2)
    let all = if g.sp && g.ov.sp_allgather == SpAllGather::Redo {
        all + 2.0
    } else {
        all
    };
    let fitted = all * (per_op * (1.0 - p.tp_overlap) + ring_lat);
    let (exposed, chunks) = match g.ov.tp {
        TpOverlap::Ring => (fitted, 0.0),
        TpOverlap::None => (all * (per_op + ring_lat), 0.0),
        // ring exchange: one chunk per TP rank
        TpOverlap::Pipelined if g.sp => (
            pipelined_exposed(all * per_op, layer_mm, tpf) + all * ring_lat,
            tpf,
        ),
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

/// Context parallelism: ring attention passes the K/V chunks around the cp
/// ranks (cp − 1 hops forward; K/V again plus dK/dV backward, 2(cp − 1))
/// while the chunk in hand is attended to, so only what exceeds the attention
/// kernels and the first hop are exposed (Liu et al. 2023, Ring Attention;
/// Megatron-LM context parallelism).
fn cp_layer(g: &Geometry, layer_attn: f64) -> f64 {
    if g.cp <= 1 {
        return 0.0;
    }
    let cpf = g.cp as f64;
    let (bw, hop_lat) = g.link(g.layout(&[LogicalAxis::Cp]));
    let kv_bytes = 2.0 * g.tok * g.kh / g.tpf() * 2.0; // K and V of the local chunk, bf16
    let hop = kv_bytes / bw + hop_lat;
    // a recomputed attention forward (any remat policy here) passes the
    // K/V around the ring once more
    let passes = if g.spec.remat == Remat::None {
        3.0
    } else {
        4.0
    };
    let comm = passes * (cpf - 1.0) * hop;
    (comm - layer_attn).max(0.0) + hop
}

/// Expert parallelism: each MoE layer sends its k·tok routed token-rows to
/// the experts' ranks and back (dispatch + combine), forward and backward
/// (and again for a fully recomputed forward), all-to-all over the ep ranks,
/// on the critical path (no overlap modelled).
fn ep_layer(g: &Geometry) -> f64 {
    match &g.spec.arch.moe {
        Some(mo) if g.ep > 1 => {
            let epf = g.ep as f64;
            let (bw, lat) = g.link(g.layout(&[LogicalAxis::Ep]));
            let rows = g.tok * mo.top_k as f64 / if g.sp { g.tpf() } else { 1.0 };
            let bytes = MOE_LOAD_IMBALANCE * rows * g.d * 2.0 * (epf - 1.0) / epf;
            let passes = if g.spec.remat == Remat::Full {
                6.0
            } else {
                4.0
            };
            g.spec.arch.moe_fraction() * passes * (bytes / bw + (epf - 1.0) * lat)
        }
        _ => 0.0,
    }
}

/// Fixed cost per micro-batch off the GPU, growing with the job (stragglers,
/// stalls): `(n / reference)^k`, 1 at the profile's reference (largest
/// fitted) job.
fn microbatch_overhead(g: &Geometry) -> f64 {
    let p = g.p;
    let mb_ref = p.calibrated_max_nodes.max(1) as f64;
    let job_growth = (g.nodes_f / mb_ref).powf(p.microbatch_node_exponent);
    if g.pp_cross {
        // a stall per micro-batch per pipeline neighbour (1 with pp = 2, 2
        // with pp ≥ 3): always there with DDP (ZeRO-0, dp > 1) from
        // `ddp_pp_stall_min_microbatches` micro-batches on, otherwise growing
        // with the job
        let ddp = g.spec.zero == 0 && g.dp > 1 && g.m >= p.ddp_pp_stall_min_microbatches;
        let weight = if ddp { 1.0 } else { job_growth.min(1.0) };
        p.pp_stall_s * (g.pp as f64 - 1.0).min(2.0) * weight
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
    /// Hardware FLOPs of one forward layer (for the roofline).
    attn_fwd_flops: f64,
    /// One layer's TP collectives and matmul time.
    tp_layer: TpLayer,
    layer_mm: f64,
    /// Whether the critical stage holds the LM head.
    head: bool,
    /// Forward share of the micro-batch's compute.
    fwd_frac: f64,
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
    let ep = ep_layer(g);
    let gpu_layer = layer_mm + layer_attn + layer_ew + tp_bw_layer + cp + ep;
    let host_tp = tp_ops_all * pp_stall;
    let host_layer = host_tp + g.p.layer_overhead_s;
    let mb_over = microbatch_overhead(g);
    let head = c.head_mm + c.loss;
    let gpu_path = |n: f64, h: bool| n * gpu_layer + if h { head } else { 0.0 };
    let host_path = |n: f64| n * host_layer + mb_over;
    // the slowest pipeline stage sets the pace: (layers on it, holds the LM head)
    let (plain, with_head) = stage_extremes(&g.spec.arch, g.pp, g.spec.framework);
    let (plain, with_head) = (plain as f64, with_head as f64);
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
        attn_fwd_flops: c.attn_fwd_flops,
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
    }
}

/// Parameters of one pipeline stage on one device (approximate: embeddings
/// spread; routed experts split over ep).
fn stage_params(g: &Geometry) -> f64 {
    g.spec.stage_params()
}

/// Gradient bytes per parameter a framework reduces.
fn grad_bytes(fw: Framework) -> f64 {
    match fw {
        Framework::Nanotron | Framework::Maxtext => 4.0,
        _ => 2.0,
    }
}

/// ZeRO-3 / FSDP: every micro-batch gathers the stage's bf16 parameters for
/// the forward and again for the backward (re-sharded after the forward) and
/// reduce-scatters its gradients, over the shard group: every data-parallel
/// rank (dp·cp) with ZeRO-3, the `fsdp` innermost ones with hybrid sharding.
/// Prefetch runs these on their own stream under the micro-batch's compute;
/// what exceeds it, and the first layer's gather, are exposed.
/// (exposed, all of it), per micro-batch; `dp_overlap = off` exposes all.
fn fsdp_microbatch(g: &Geometry, mb: &Microbatch) -> (f64, f64) {
    let (shard, _) = g.spec.shard_groups();
    if shard <= 1 {
        return (0.0, 0.0);
    }
    let shardf = shard as f64;
    let gb = grad_bytes(g.spec.framework);
    let (per, nodes) = g.layout(g.spec.shard_axes().0);
    let bw = coll_bw(g.p, g.chip, false, per, nodes);
    let comm = (shardf - 1.0) / shardf * stage_params(g) * (2.0 + 2.0 + gb) / bw;
    // one layer's forward gather has nothing to hide under
    let first = comm * 2.0 / (2.0 + 2.0 + gb) / mb.l_crit.max(1.0);
    match g.ov.dp {
        DpOverlap::On => ((comm - mb.t_core).max(0.0) + first, comm),
        DpOverlap::Off => (comm, comm),
    }
}

/// Pipeline: (bubble, exposed point-to-point) per step.
fn pipeline(g: &Geometry, t_mb: f64) -> (f64, f64) {
    if g.pp <= 1 {
        return (0.0, 0.0);
    }
    let (ppf, p) = (g.pp as f64, g.p);
    let v_st = if g.spec.schedule == Schedule::Interleaved {
        g.spec.virtual_stages.max(1) as f64
    } else {
        1.0
    };
    let bubble = (ppf - 1.0) / v_st * t_mb;
    let so = g
        .chip
        .scale_out
        .as_ref()
        .map_or(1e10, |x| x.per_chip.one_way_rate().get());
    // Megatron 2022 scatter/gather: 1/tp of the activation crosses the network
    let scatter = g.sp || g.spec.framework == Framework::Megatron2022;
    let p2p_bytes = g.tok * g.d * 2.0 / if scatter { g.tpf() } else { 1.0 };
    let (p2p_bw, p2p_lat) = if g.pp_cross {
        (
            so * p.p2p_efficiency,
            p.p2p_latency_s * g.nodes_f.powf(p.p2p_node_exponent),
        )
    } else {
        (coll_bw(p, g.chip, false, 2, 1), p.collective_latency_s)
    };
    // fwd send + bwd send per micro-batch on the critical path, plus the fill
    let t_pp = 2.0 * (g.m + ppf - 1.0) * v_st * (p2p_bytes / p2p_bw + p2p_lat);
    (bubble, t_pp)
}

/// Data parallel across the replicas of each shard (all of dp·cp without
/// sharding, none with ZeRO-3: reduced per micro-batch), after gradient
/// accumulation — except ZeRO-2, which keeps only its gradient shard and so
/// reduce-scatters every micro-batch (as the evaluator counts it), each under
/// the next micro-batch's compute `t_mb`: (exposed reduction, optimizer
/// update, the reduction with nothing hidden). `dp_overlap = off` hides none.
fn data_parallel(g: &Geometry, t_mb: f64) -> (f64, f64, f64) {
    let (shard, repl) = g.spec.shard_groups();
    let (shardf, replf) = (shard as f64, repl as f64);
    let stage = stage_params(g);
    let repl_params = stage / shardf;
    let gb = grad_bytes(g.spec.framework);
    let on = g.ov.dp == DpOverlap::On;
    let (t_dp, raw) = if repl <= 1 {
        (0.0, 0.0)
    } else {
        let (per, nodes) = g.layout(g.spec.shard_axes().1);
        let frac = (replf - 1.0) / replf * repl_params;
        if g.spec.zero >= 1 {
            // reduce-scatter of the gradients + all-gather of the bf16 parameters
            let bw = coll_bw(g.p, g.chip, false, per, nodes);
            let (rs, ag) = (frac * gb / bw, frac * 2.0 / bw);
            let early = if g.spec.zero == 2 { g.m - 1.0 } else { 0.0 };
            let raw = rs + ag + early * rs;
            if on {
                let t = (rs + ag) * (1.0 - g.p.dp_overlap) + early * (rs - t_mb).max(0.0);
                (t, raw)
            } else {
                (raw, raw)
            }
        } else {
            let bw = coll_bw(g.p, g.chip, true, per, nodes);
            let ar = 2.0 * frac * gb / bw;
            (if on { ar * (1.0 - g.p.dp_overlap) } else { ar }, ar)
        }
    };
    // optimizer (HBM bound): ~34 B/param touched
    let (opt_params, stage) = optimizer_params(g.spec);
    let (per_opt, per_stage) = OPTIMIZER_BYTES;
    let t_opt = opt_params * per_opt / g.hbm_bw + stage * per_stage / g.hbm_bw;
    (t_dp, t_opt, raw)
}

/// Hardware FLOPs of one device per step at peak (no comms).
fn roofline(g: &Geometry, attn_fwd_flops: f64) -> f64 {
    let a = &g.spec.arch;
    let mats = a.mlp.matrices() as f64;
    let (d, tok, tpf) = (g.d, g.tok, g.tpf());
    let attn_proj = if a.mla.is_some() {
        g.attn_params
    } else {
        d * (g.nh + 2.0 * g.kh) + g.nh * d
    };
    let fwd_layer = 2.0 * tok * (attn_proj + mats * d * g.f) / tpf + attn_fwd_flops;
    let rec = match g.spec.remat {
        Remat::None => 0.0,
        Remat::Full => fwd_layer,
        _ => attn_fwd_flops,
    };
    let l_stage = (a.n_layers as f64 / g.pp as f64).ceil();
    g.m * (l_stage * (3.0 * fwd_layer + rec) + 6.0 * tok * d * g.v / tpf) / g.peak
}

/// Predict the step time of one run, by part, and whether the job is
/// larger than the profile was fitted on (its job-size terms were held).
pub fn predict_time(spec: &RunSpec, chip: &Chip, p: &EfficiencyProfile) -> (TimeBreakdown, bool) {
    predict_time_with(spec, chip, p, &Features::default())
}

/// [`predict_time`] with the compute dtype, attention mask and overlap
/// settings of `f`.
pub fn predict_time_with(
    spec: &RunSpec,
    chip: &Chip,
    p: &EfficiencyProfile,
    f: &Features,
) -> (TimeBreakdown, bool) {
    let d = predict_time_detailed(spec, chip, p, f);
    (d.time, d.extrapolated)
}

/// A prediction by part, with what its communication hid and exposed and
/// the shape of the step ([`predict_time_detailed`]).
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
}

/// [`predict_time_with`], and what its communication hid and exposed.
pub fn predict_time_detailed(
    spec: &RunSpec,
    chip: &Chip,
    p: &EfficiencyProfile,
    f: &Features,
) -> Detailed {
    let g = Geometry::new(spec, chip, p, f);
    let mb = microbatch(&g);
    let (fsdp_mb, fsdp_raw) = fsdp_microbatch(&g, &mb);
    let (bubble, t_pp) = pipeline(&g, mb.t_core + fsdp_mb);
    let (dp_exposed, t_opt, dp_raw) = data_parallel(&g, mb.t_core + fsdp_mb);
    let t_dp = dp_exposed + g.m * fsdp_mb;
    let overhead = p.step_overhead_s + p.node_overhead_s * g.nodes_f + g.m * mb.stall_over;
    let total =
        mb.mm + mb.attn + mb.ew + mb.tp + mb.cp + mb.ep + bubble + t_pp + t_dp + t_opt + overhead;
    let time = TimeBreakdown {
        matmul: mb.mm,
        attention: mb.attn,
        memory_bound: mb.ew,
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
        roofline: roofline(&g, mb.attn_fwd_flops),
    };
    let extrapolated = p.calibrated_max_nodes > 0 && g.nodes > p.calibrated_max_nodes;
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
        stages: g.pp,
        microbatches: g.m as u64,
        virtual_stages: if spec.schedule == Schedule::Interleaved {
            spec.virtual_stages.max(1)
        } else {
            1
        },
        layers: mb.l_crit,
        head: mb.head,
        microbatch_s: mb.t_core + fsdp_mb,
        forward_fraction: mb.fwd_frac,
    };
    Detailed {
        time,
        extrapolated,
        exposure,
        schedule,
    }
}
