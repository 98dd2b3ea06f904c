//! The step-time and peak-memory model (see `docs/fidelity.md`).

use serde::Serialize;

use super::profile::EfficiencyProfile;
use crate::hardware::Chip;
use crate::model::{Arch, MlpKind};
use crate::training::{Remat, Schedule};

/// The mixture-of-experts part of a [`Shape`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MoeShape {
    /// E: routed experts per MoE layer.
    pub n_experts: u64,
    /// k: routed experts per token.
    pub top_k: u64,
    /// Width of a routed expert.
    pub d_ff_expert: u64,
    /// Shared experts every token uses.
    pub n_shared: u64,
    /// Width of a shared expert.
    pub d_ff_shared: u64,
    /// Leading dense layers (width F).
    pub first_dense: u64,
}

/// The transformer shape the model needs (decoder; dense or MoE).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Shape {
    /// L.
    pub n_layers: u64,
    /// D.
    pub d_model: u64,
    /// F.
    pub d_ff: u64,
    /// N.
    pub n_heads: u64,
    /// K.
    pub n_kv_heads: u64,
    /// H.
    pub d_head: u64,
    /// V.
    pub vocab: u64,
    /// Input and output embeddings shared.
    pub tied_embeddings: bool,
    /// Gated (3-matrix) MLP.
    pub gated: bool,
    /// Mixture of experts (`None` = dense).
    pub moe: Option<MoeShape>,
}

impl From<&Arch> for Shape {
    fn from(a: &Arch) -> Self {
        Shape {
            n_layers: a.n_layers,
            d_model: a.d_model,
            d_ff: a.d_ff,
            n_heads: a.n_heads,
            n_kv_heads: a.n_kv_heads,
            d_head: a.d_head,
            vocab: a.vocab,
            tied_embeddings: a.tied_embeddings,
            gated: a.mlp == MlpKind::Gated,
            moe: a.moe.as_ref().map(|m| {
                let fe = if m.d_ff_expert > 0 {
                    m.d_ff_expert
                } else {
                    a.d_ff
                };
                MoeShape {
                    n_experts: m.n_experts,
                    top_k: m.top_k,
                    d_ff_expert: fe,
                    n_shared: m.n_shared_experts,
                    d_ff_shared: if m.d_ff_shared > 0 { m.d_ff_shared } else { fe },
                    first_dense: m.first_dense_layers.min(a.n_layers),
                }
            }),
        }
    }
}

impl Shape {
    fn mlp_mats(&self) -> f64 {
        if self.gated {
            3.0
        } else {
            2.0
        }
    }
    /// φ: the fraction of the layers that are MoE layers (0 when dense).
    pub fn moe_frac(&self) -> f64 {
        match &self.moe {
            Some(m) if self.n_layers > 0 => {
                (self.n_layers - m.first_dense.min(self.n_layers)) as f64 / self.n_layers as f64
            }
            _ => 0.0,
        }
    }
    /// FFN width averaged over the layers: F on dense layers, `moe(m)` on MoE
    /// layers.
    fn f_avg(&self, moe: impl Fn(&MoeShape) -> u64) -> f64 {
        let f = self.d_ff as f64;
        match &self.moe {
            Some(m) => {
                let phi = self.moe_frac();
                (1.0 - phi) * f + phi * moe(m) as f64
            }
            None => f,
        }
    }
    /// FFN width a token goes through, averaged over the layers: F on dense
    /// layers, k·F_e + shared·F_s on MoE layers (FLOPs and activations).
    pub fn f_active(&self) -> f64 {
        self.f_avg(|m| m.top_k * m.d_ff_expert + m.n_shared * m.d_ff_shared)
    }
    /// FFN width held in weights, averaged over the layers: F on dense
    /// layers, E·F_e + shared·F_s on MoE layers (parameters).
    pub fn f_total(&self) -> f64 {
        self.f_avg(|m| m.n_experts * m.d_ff_expert + m.n_shared * m.d_ff_shared)
    }
    /// Routed-expert parameters of all layers (the part expert parallelism shards).
    pub fn expert_params(&self) -> f64 {
        match &self.moe {
            Some(m) => {
                self.moe_frac()
                    * self.n_layers as f64
                    * m.n_experts as f64
                    * self.mlp_mats()
                    * self.d_model as f64
                    * m.d_ff_expert as f64
            }
            None => 0.0,
        }
    }
    /// Parameters of one block, averaged over the layers (attention + MLP or
    /// experts and router + 2 norms).
    pub fn layer_params(&self) -> f64 {
        let (d, f) = (self.d_model as f64, self.f_total());
        let nh = (self.n_heads * self.d_head) as f64;
        let kh = (self.n_kv_heads * self.d_head) as f64;
        let router = self
            .moe
            .as_ref()
            .map_or(0.0, |m| self.moe_frac() * m.n_experts as f64 * d);
        d * (nh + 2.0 * kh) + nh * d + self.mlp_mats() * d * f + router + 2.0 * d
    }
    /// Total parameters (embeddings once when tied).
    pub fn params(&self) -> f64 {
        let e = (self.vocab * self.d_model) as f64;
        self.n_layers as f64 * self.layer_params()
            + e * if self.tied_embeddings { 1.0 } else { 2.0 }
            + self.d_model as f64
    }
    /// nanotron `get_flops` per token (variant A in the validation README):
    /// 3·[L·(2·D·NH + 4·D·KH + 4·N·T·H + 2·NH·D + 2·m·D·F) + 2·D·V], full attention.
    pub fn nanotron_flops_per_token(&self, seq: u64) -> f64 {
        // MoE: the FFN a token goes through (router GEMMs not counted)
        let (d, f, v) = (self.d_model as f64, self.f_active(), self.vocab as f64);
        let nh = (self.n_heads * self.d_head) as f64;
        let kh = (self.n_kv_heads * self.d_head) as f64;
        let l = self.n_layers as f64;
        3.0 * (l
            * (2.0 * d * nh
                + 4.0 * d * kh
                + 4.0 * nh * seq as f64
                + 2.0 * nh * d
                + 2.0 * self.mlp_mats() * d * f)
            + 2.0 * d * v)
    }
    /// Megatron (Narayanan et al. 2021) model FLOPs per token for a 4·D GeLU MLP:
    /// 72·L·D²·(1 + T/(6D) + V/(12·D·L)) / 1 per token.
    pub fn megatron_flops_per_token(&self, seq: u64) -> f64 {
        let (d, l, v) = (self.d_model as f64, self.n_layers as f64, self.vocab as f64);
        72.0 * l * d * d * (1.0 + seq as f64 / (6.0 * d) + v / (12.0 * d * l))
    }
}

/// Training framework conventions that change what is allocated and overlapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// nanotron (Ultra-Scale Playbook): fp32 gradient accumulation buffer,
    /// fp32 DP reduction on the last micro-batch, bf16 params + fp32 master + Adam.
    Nanotron,
    /// Megatron-LM / Megatron-Core: fp32 `main_grad`, bf16/fp32 reductions
    /// overlapped with backward (`--overlap-grad-reduce`).
    Megatron,
    /// Megatron-LM as of 2022 (Korthikanti et al., Narayanan et al.): as
    /// [`Framework::Megatron`] but with the unfused attention core (no
    /// FlashAttention: `QKᵀ` and `PV` as batched GEMMs, the `[b, a, s, s]`
    /// scores materialized through a fused scale-mask-softmax and dropout) and
    /// the pipeline scatter/gather optimization (each stage sends 1/tp of the
    /// activation over the network and all-gathers it over NVLink).
    Megatron2022,
}

/// One training configuration to predict (one run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSpec {
    /// Model shape.
    pub shape: Shape,
    /// Accelerators in the job.
    pub n_gpus: u64,
    /// Data-parallel degree.
    pub dp: u64,
    /// Tensor-parallel degree.
    pub tp: u64,
    /// Pipeline-parallel degree.
    pub pp: u64,
    /// Context-parallel degree.
    pub cp: u64,
    /// ZeRO stage over dp (0–3).
    pub zero: u8,
    /// Micro-batch size (sequences).
    pub mbs: u64,
    /// Micro-batches per step per replica (gradient accumulation).
    pub grad_acc: u64,
    /// Sequence length.
    pub seq_len: u64,
    /// Recompute policy (reuses the training module's enum).
    pub remat: Remat,
    /// Megatron-style sequence parallelism with TP.
    pub sequence_parallel: bool,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Virtual stages per device (interleaved).
    pub virtual_stages: u64,
    /// Framework conventions.
    pub framework: Framework,
    /// Expert-parallel degree (MoE; ep ranks are data-parallel ranks that
    /// split the routed experts).
    pub ep: u64,
    /// Hybrid sharding: a ZeRO-3 group of this many data-parallel ranks
    /// (innermost), replicated across the rest with ZeRO stage `zero`
    /// (1 = none; `zero = 3` shards over every data-parallel rank instead).
    pub fsdp: u64,
}

impl RunSpec {
    /// Tokens per optimizer step.
    pub fn tokens_per_step(&self) -> f64 {
        // in f64: a hostile data set's degrees must not overflow u64
        self.mbs as f64 * self.grad_acc as f64 * self.dp as f64 * self.seq_len as f64
    }
}

/// Peak memory of the most loaded device, by part (bytes).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryBreakdown {
    /// bf16/fp16 parameters.
    pub params: f64,
    /// Gradient buffers (fp32 accumulation).
    pub grads: f64,
    /// Optimizer state (fp32 master + Adam m, v), sharded by ZeRO.
    pub optimizer: f64,
    /// Saved activations of the micro-batches in flight.
    pub activations: f64,
    /// fp32 logits / loss buffers.
    pub logits: f64,
    /// Runtime reserve (allocator, workspaces) from the profile.
    pub reserve: f64,
    /// Sum.
    pub total: f64,
}

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
    /// Sum.
    pub total: f64,
    /// Pure roofline: hardware FLOPs at peak, no comms.
    pub roofline: f64,
}

/// Prediction for one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    /// Seconds per optimizer step.
    pub step_time_s: f64,
    /// Tokens/s per device.
    pub tokens_per_s_per_gpu: f64,
    /// Model FLOPs per step (6·P·B-style, no recompute; nanotron count).
    pub model_flops: f64,
    /// model FLOPs / (step · N · peak).
    pub mfu: f64,
    /// Time parts.
    pub time: TimeBreakdown,
    /// Memory parts.
    pub memory: MemoryBreakdown,
    /// Peak memory, GB (1e9 bytes).
    pub peak_mem_gb: f64,
    /// Usable device memory, GB.
    pub usable_gb: f64,
    /// peak ≤ usable.
    pub fits: bool,
    /// The job is larger than the profile's calibrated range
    /// (`calibrated_max_nodes`): job-size terms were held at that size.
    pub extrapolated: bool,
}

/// GEMM efficiency for an `[m, k] × [k, n]` matmul: `e_max · x/(x + x½)` with
/// `x = min(m, k, n)` after rounding up to the 128-wide tensor-core tile
/// (padding waste `x/ceil128(x)`).
pub fn gemm_efficiency(p: &EfficiencyProfile, m: f64, k: f64, n: f64) -> f64 {
    let x = m.min(k).min(n).max(1.0);
    let padded = (x / 128.0).ceil() * 128.0;
    p.matmul_efficiency * (x / padded) * x / (x + p.matmul_half_dim)
}

/// Where a collective group sits: GPUs of the group per node and nodes spanned.
fn group_layout(size: u64, stride: u64, per_node: u64) -> (u64, u64) {
    if size <= 1 {
        return (1, 1);
    }
    let span = size * stride; // consecutive ranks covered
    if span <= per_node {
        (size, 1)
    } else {
        let per = (per_node / stride.min(per_node)).max(1).min(size);
        (per, size.div_ceil(per))
    }
}

/// Bus bandwidth (bytes/s) of a ring collective over a group.
/// Intra-node: NVLink one-way × `intra_node_efficiency`.
/// Across k nodes: (GPUs of the group per node) × scale-out per GPU ×
/// `inter_node_efficiency` × k^−`inter_node_congestion` (capped by NVLink).
fn bus_bandwidth(p: &EfficiencyProfile, chip: &Chip, per_node: u64, nodes: u64) -> f64 {
    let nv = chip
        .nvlink
        .as_ref()
        .map_or(chip.hbm_bandwidth.get() / 10.0, |n| {
            n.per_gpu.one_way_rate().get()
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

/// Predict step time, MFU and peak memory of one run.
pub fn predict(spec: &RunSpec, chip: &Chip, p: &EfficiencyProfile) -> Prediction {
    let s = &spec.shape;
    let per_node = chip.nvlink.as_ref().map_or(8, |n| n.domain_size).max(1);
    let peak = chip.flops(crate::units::DType::Bf16).get();
    let hbm_bw = chip.hbm_bandwidth.get() * p.hbm_efficiency;
    let (tp, pp, dp, cp) = (
        spec.tp.max(1),
        spec.pp.max(1),
        spec.dp.max(1),
        spec.cp.max(1),
    );
    let (tpf, ppf) = (tp as f64, pp as f64);
    // F: the FFN width a token goes through (MoE: k experts + shared)
    let (d, f, v) = (s.d_model as f64, s.f_active(), s.vocab as f64);
    let nh = (s.n_heads * s.d_head) as f64;
    let kh = (s.n_kv_heads * s.d_head) as f64;
    let ep = spec.ep.max(1);
    let epf = ep as f64;
    let seq = (spec.seq_len / cp) as f64;
    let tok = spec.mbs as f64 * seq; // tokens per micro-batch
    let l_stage = (s.n_layers as f64 / ppf).ceil();
    let m = spec.grad_acc.max(1) as f64;
    let sp = spec.sequence_parallel && tp > 1;

    // ---------- compute per micro-batch, one stage
    let gemms: [(f64, f64); 2] = [
        (d, (nh + 2.0 * kh) / tpf), // QKV
        (nh / tpf, d),              // attention out
    ];
    let mut t_layer_mm_fwd = 0.0;
    for (k, n) in gemms {
        let fl = 2.0 * tok * k * n;
        t_layer_mm_fwd += fl / (peak * gemm_efficiency(p, tok, k, n));
    }
    // MLP up (+gate) and down for `rows` token-rows of FFN width `width`,
    // each GEMM `tall` rows high (its efficiency)
    let mlp = |rows: f64, tall: f64, width: f64| -> f64 {
        let up = (s.mlp_mats() - 1.0) * width / tpf;
        let down = width / tpf;
        2.0 * rows * d * up / (peak * gemm_efficiency(p, tall, d, up))
            + 2.0 * rows * down * d / (peak * gemm_efficiency(p, tall, down, d))
    };
    let dense_mlp = mlp(tok, tok, s.d_ff as f64);
    t_layer_mm_fwd += match &s.moe {
        None => dense_mlp,
        Some(mo) => {
            // MoE layers: shared experts see every token; the k·tok routed
            // token-rows land on the E/ep local experts, ep·tok·k/E rows each
            // (short GEMMs); the router is a [tok, D] × [D, E] GEMM
            let (k, e) = (mo.top_k as f64, mo.n_experts.max(1) as f64);
            let tall = (epf * tok * k / e).max(1.0);
            let moe_layer = mo.n_shared as f64 * mlp(tok, tok, mo.d_ff_shared as f64)
                + mlp(tok * k, tall, mo.d_ff_expert as f64)
                + 2.0 * tok * d * e / (peak * gemm_efficiency(p, tok, d, e));
            let phi = s.moe_frac();
            (1.0 - phi) * dense_mlp + phi * moe_layer
        }
    };
    let legacy_attn = spec.framework == Framework::Megatron2022;
    let (attn_fwd_flops, t_attn_fwd, t_attn_bwd) = if legacy_attn {
        // unfused attention core: full s×s scores (no causal skipping), two
        // batched GEMMs with the head dimension as inner size, and the scores
        // through HBM: fwd QKᵀ write 2 B, softmax r/w 4 B, dropout r/w + mask
        // 5 B = 11 B per score element; bwd (PV grad, dropout, softmax, QKᵀ
        // grads) ≈ 19 B per element (Korthikanti et al. 2022, the 5·a·s/h term).
        let fl = 4.0 * tok * seq * nh / tpf;
        let dh = s.d_head as f64;
        let mm = fl / (peak * gemm_efficiency(p, seq, dh, seq));
        let elems = spec.mbs as f64 * (s.n_heads as f64 / tpf) * seq * seq;
        (
            fl,
            mm + 11.0 * elems / hbm_bw,
            2.0 * mm + 19.0 * elems / hbm_bw,
        )
    } else {
        // with context parallelism the local queries attend to the whole
        // (causal, load-balanced) sequence: the K/V length is seq_len, not seq/cp
        let causal = 0.5;
        let fl = 4.0 * tok * spec.seq_len as f64 * nh / tpf * causal;
        let t = fl / (peak * p.attention_efficiency);
        (fl, t, 2.5 * t) // FA2 backward = 2.5 × forward
    };
    // element-wise traffic per token·layer (fwd+bwd), bf16: norms+residual 20·D
    // (sharded by SP), SwiGLU 8·F and RoPE 8·N·H (sharded by TP)
    let dsh = if sp || tp == 1 { d / tpf } else { d };
    let ew_bytes_fwd_bwd = 2.0 * tok * (20.0 * dsh + 8.0 * f / tpf + 8.0 * nh / tpf);
    let t_ew = ew_bytes_fwd_bwd / hbm_bw;
    // LM head + loss on the last stage (vocab-parallel over tp)
    let t_head_mm = 3.0 * 2.0 * tok * d * v / tpf / (peak * gemm_efficiency(p, tok, d, v / tpf));
    let t_loss = 6.0 * tok * v / tpf * 4.0 / hbm_bw;
    // recompute
    let (recomp_mm, recomp_attn, recomp_ew) = match spec.remat {
        Remat::None => (0.0, 0.0, 0.0),
        Remat::Full => (t_layer_mm_fwd, t_attn_fwd, 1.0 / 3.0),
        Remat::Selective | Remat::AfterMatmuls => (0.0, t_attn_fwd, 0.0),
    };
    let layer_mm = 3.0 * t_layer_mm_fwd + recomp_mm;
    let layer_attn = t_attn_fwd + t_attn_bwd + recomp_attn;
    let layer_ew = t_ew * (1.0 + recomp_ew);

    // ---------- TP / SP collectives per layer per micro-batch
    let nodes = spec.n_gpus.div_ceil(per_node).max(1);
    let extrapolated = p.calibrated_max_nodes > 0 && nodes > p.calibrated_max_nodes;
    // job-size growth terms are held at the calibrated range (see `clamp_nodes`)
    let nodes_f = clamp_nodes(p, nodes) as f64;
    let (tp_per, tp_nodes) = group_layout(tp, 1, per_node);
    let act_bytes = tok * d * 2.0;
    let (tp_ops, per_op) = if tp <= 1 {
        (0.0, 0.0)
    } else if sp {
        // SP: 2 all-gathers + 2 reduce-scatters forward, the same backward
        let bw = coll_bw(p, chip, false, tp_per, tp_nodes);
        (8.0, (tpf - 1.0) / tpf * act_bytes / bw)
    } else {
        // plain TP: 2 all-reduces forward + 2 backward
        let bw = coll_bw(p, chip, true, tp_per, tp_nodes);
        (4.0, 2.0 * (tpf - 1.0) / tpf * act_bytes / bw)
    };
    // stages are dp·cp·tp ranks apart (tp innermost, then cp and dp, then pp)
    let pp_cross = pp > 1 && dp * cp * tp >= per_node;
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
    let pp_stall = if pp_cross {
        steps
            * p.pp_tp_step_latency_s
            * (clamp_nodes(p, tp_nodes) as f64).powf(p.latency_node_exponent)
    } else {
        0.0
    };
    let mut tp_ops_all = tp_ops;
    if spec.remat == Remat::Full {
        tp_ops_all += tp_ops / 2.0; // the recomputed forward repeats its collectives
    }
    // fixed cost per micro-batch, growing with the job (stragglers, stalls):
    // (n / reference)^k, 1 at the profile's reference (largest fitted) job
    let mb_ref = p.calibrated_max_nodes.max(1) as f64;
    let job_growth = (nodes_f / mb_ref).powf(p.microbatch_node_exponent);
    let mb_over = if pp_cross {
        // a stall per micro-batch per pipeline neighbour (1 with pp = 2, 2
        // with pp ≥ 3): always there with DDP (ZeRO-0, dp > 1) from
        // `ddp_pp_stall_min_microbatches` micro-batches on, otherwise growing
        // with the job
        let ddp = spec.zero == 0 && dp > 1 && m >= p.ddp_pp_stall_min_microbatches;
        let weight = if ddp { 1.0 } else { job_growth.min(1.0) };
        p.pp_stall_s * (ppf - 1.0).min(2.0) * weight
    } else {
        p.microbatch_overhead_s * job_growth
    };
    // exposed TP transfers and ring steps (GPU time)
    let tp_bw_layer = tp_ops_all * (per_op * (1.0 - p.tp_overlap) + ring_lat);
    // ---------- context parallelism: ring attention passes the K/V chunks
    // around the cp ranks (cp − 1 hops forward; K/V again plus dK/dV
    // backward, 2(cp − 1)) while the chunk in hand is attended to, so only
    // what exceeds the attention kernels and the first hop are exposed
    // (Liu et al. 2023, Ring Attention; Megatron-LM context parallelism)
    // bandwidth and per-step latency of a group of `size` ranks `tp` apart
    let link = |size: u64| -> (f64, f64) {
        let (per, nodes) = group_layout(size, tp, per_node);
        let lat = if nodes > 1 {
            p.inter_node_latency_s
        } else {
            p.collective_latency_s
        };
        (coll_bw(p, chip, false, per, nodes), lat)
    };
    let cp_layer = if cp > 1 {
        let cpf = cp as f64;
        let (bw, hop_lat) = link(cp);
        let kv_bytes = 2.0 * tok * kh / tpf * 2.0; // K and V of the local chunk, bf16
        let hop = kv_bytes / bw + hop_lat;
        // a recomputed attention forward (any remat policy here) passes the
        // K/V around the ring once more
        let passes = if spec.remat == Remat::None { 3.0 } else { 4.0 };
        let comm = passes * (cpf - 1.0) * hop;
        (comm - layer_attn).max(0.0) + hop
    } else {
        0.0
    };
    // ---------- expert parallelism: each MoE layer sends its k·tok routed
    // token-rows to the experts' ranks and back (dispatch + combine), forward
    // and backward (and again for a fully recomputed forward), all-to-all over
    // the ep ranks, on the critical path (no overlap modelled)
    let ep_layer = match &s.moe {
        Some(mo) if ep > 1 => {
            let (bw, lat) = link(ep);
            let rows = tok * mo.top_k as f64 / if sp { tpf } else { 1.0 };
            let bytes = rows * d * 2.0 * (epf - 1.0) / epf;
            let passes = if spec.remat == Remat::Full { 6.0 } else { 4.0 };
            s.moe_frac() * passes * (bytes / bw + (epf - 1.0) * lat)
        }
        _ => 0.0,
    };
    // A micro-batch runs on two paths at once: the GPU executes kernels and
    // exposed collective transfers, while the host issues them and waits out
    // the collective handshakes, the fixed per-layer costs and the job-size
    // stalls. The host runs ahead of the GPU (the launch queue holds many
    // layers), so a micro-batch takes the longer of the two, not their sum: on
    // the Playbook, pp > 1 runs cost ~m × (host latency) at micro-batch 1 and
    // approach the compute time at micro-batch 8+, with the same tokens.
    let gpu_layer = layer_mm + layer_attn + layer_ew + tp_bw_layer + cp_layer + ep_layer;
    let host_tp = tp_ops_all * pp_stall;
    let host_layer = host_tp + p.layer_overhead_s;
    let head = t_head_mm + t_loss;
    let gpu_path = |n: f64, h: bool| n * gpu_layer + if h { head } else { 0.0 };
    let host_path = |n: f64| n * host_layer + mb_over;
    // the slowest pipeline stage sets the pace: (layers on it, holds the LM head)
    let (l_crit, head_crit) = critical_stage(spec, s, |n, h| gpu_path(n, h).max(host_path(n)));
    let head_f = if head_crit { 1.0 } else { 0.0 };
    let (gpu_mb, host_mb) = (gpu_path(l_crit, head_crit), host_path(l_crit));
    let t_mb_core = gpu_mb.max(host_mb);
    // the host stall is booked to TP communication and overhead in proportion
    let stall = t_mb_core - gpu_mb;
    let stall_tp = if host_mb > 0.0 {
        stall * l_crit * host_tp / host_mb
    } else {
        0.0
    };
    let mm_total = m * (l_crit * layer_mm + head_f * t_head_mm);
    let attn_total = m * l_crit * layer_attn;
    let ew_total = m * (l_crit * layer_ew + head_f * t_loss);
    let tp_total = m * (l_crit * tp_bw_layer + stall_tp);
    let cp_total = m * l_crit * cp_layer;
    let ep_total = m * l_crit * ep_layer;
    let mb_stall_over = stall - stall_tp;

    // ---------- ZeRO-3 / FSDP: every micro-batch gathers the stage's bf16
    // parameters for the forward and again for the backward (re-sharded after
    // the forward) and reduce-scatters its gradients, over the shard group:
    // every data-parallel rank (dp·cp) with ZeRO-3, the `fsdp` innermost ones
    // with hybrid sharding. Prefetch runs these on their own stream under the
    // micro-batch's compute; what exceeds it, and the first layer's gather,
    // are exposed.
    // approximate (embeddings spread); routed experts split over ep
    let stage_params = (s.params() - s.expert_params() * (1.0 - 1.0 / epf)) / ppf / tpf;
    let grad_bytes = match spec.framework {
        Framework::Nanotron => 4.0,
        Framework::Megatron | Framework::Megatron2022 => 2.0,
    };
    let (shard, repl) = shard_groups(spec);
    let (shardf, replf) = (shard as f64, repl as f64);
    let fsdp_mb = if shard > 1 {
        let (per, nodes) = group_layout(shard, tp, per_node);
        let bw = coll_bw(p, chip, false, per, nodes);
        let comm = (shardf - 1.0) / shardf * stage_params * (2.0 + 2.0 + grad_bytes) / bw;
        // one layer's forward gather has nothing to hide under
        let first = comm * 2.0 / (2.0 + 2.0 + grad_bytes) / l_crit.max(1.0);
        (comm - t_mb_core).max(0.0) + first
    } else {
        0.0
    };
    let t_mb = t_mb_core + fsdp_mb;

    // ---------- pipeline
    let v_st = if spec.schedule == Schedule::Interleaved {
        spec.virtual_stages.max(1) as f64
    } else {
        1.0
    };
    let bubble = if pp > 1 {
        (ppf - 1.0) / v_st * t_mb
    } else {
        0.0
    };
    let so = chip
        .scale_out
        .as_ref()
        .map_or(1e10, |x| x.per_chip.one_way_rate().get());
    // Megatron 2022 scatter/gather: 1/tp of the activation crosses the network
    let scatter = sp || spec.framework == Framework::Megatron2022;
    let p2p_bytes = act_bytes / if scatter { tpf } else { 1.0 };
    let (p2p_bw, p2p_lat) = if pp_cross {
        (
            so * p.p2p_efficiency,
            p.p2p_latency_s * nodes_f.powf(p.p2p_node_exponent),
        )
    } else {
        (coll_bw(p, chip, false, 2, 1), p.collective_latency_s)
    };
    let t_pp = if pp > 1 {
        // fwd send + bwd send per micro-batch on the critical path, plus the fill
        2.0 * (m + ppf - 1.0) * v_st * (p2p_bytes / p2p_bw + p2p_lat)
    } else {
        0.0
    };

    // ---------- data parallel (once per step, after gradient accumulation)
    // across the replicas of each shard (all of dp·cp without sharding, none
    // with ZeRO-3: reduced per micro-batch above)
    let repl_params = stage_params / shardf;
    let t_dp_raw = if repl <= 1 {
        0.0
    } else {
        let (per, nodes) = group_layout(repl, tp * shard, per_node);
        if spec.zero >= 1 {
            // reduce-scatter of the gradients + all-gather of the bf16 parameters
            let bw = coll_bw(p, chip, false, per, nodes);
            (replf - 1.0) / replf * repl_params * (grad_bytes + 2.0) / bw
        } else {
            let bw = coll_bw(p, chip, true, per, nodes);
            2.0 * (replf - 1.0) / replf * repl_params * grad_bytes / bw
        }
    };
    let t_dp = t_dp_raw * (1.0 - p.dp_overlap) + m * fsdp_mb;

    // ---------- optimizer (HBM bound): ~34 B/param touched
    let opt_params = repl_params / if spec.zero >= 1 { replf } else { 1.0 };
    let t_opt = opt_params * 34.0 / hbm_bw + stage_params * 4.0 / hbm_bw;

    let overhead = p.step_overhead_s + p.node_overhead_s * nodes_f + m * mb_stall_over;
    let compute_total = mm_total + attn_total + ew_total;
    let total =
        compute_total + tp_total + cp_total + ep_total + bubble + t_pp + t_dp + t_opt + overhead;

    // ---------- roofline and model FLOPs
    let tokens = spec.tokens_per_step();
    let model_flops = s.nanotron_flops_per_token(spec.seq_len) * tokens;
    let hw_flops_dev = {
        let fwd_layer = 2.0 * tok * (d * (nh + 2.0 * kh) + nh * d + s.mlp_mats() * d * f) / tpf
            + attn_fwd_flops;
        let rec = match spec.remat {
            Remat::None => 0.0,
            Remat::Full => fwd_layer,
            _ => attn_fwd_flops,
        };
        m * (l_stage * (3.0 * fwd_layer + rec) + 6.0 * tok * d * v / tpf)
    };
    let roofline = hw_flops_dev / peak;

    let time = TimeBreakdown {
        matmul: mm_total,
        attention: attn_total,
        memory_bound: ew_total,
        tp_comm: tp_total,
        cp_comm: cp_total,
        ep_comm: ep_total,
        pp_comm: t_pp,
        bubble,
        dp_comm: t_dp,
        optimizer: t_opt,
        overhead,
        total,
        roofline,
    };
    let memory = peak_memory(spec, chip, p);
    let gb = 1e9;
    let usable = chip.hbm_capacity.get() * p.usable_hbm_fraction;
    let n = spec.n_gpus.max(1) as f64;
    Prediction {
        step_time_s: total,
        tokens_per_s_per_gpu: tokens / total / n,
        model_flops,
        mfu: model_flops / (total * n * peak),
        peak_mem_gb: memory.total / gb,
        usable_gb: usable / gb,
        fits: memory.total <= usable,
        extrapolated,
        time,
        memory,
    }
}

/// (shard, replicas) of the data-parallel ranks (dp·cp): ZeRO-3 shards over
/// all of them; hybrid sharding over `fsdp` of them (when it divides), each
/// shard replicated across the rest; otherwise nothing is fully sharded.
fn shard_groups(spec: &RunSpec) -> (u64, u64) {
    // the cp ranks hold the same parameters as their dp peers
    let dpc = spec.dp.max(1).saturating_mul(spec.cp.max(1));
    let f = spec.fsdp.max(1);
    if spec.zero >= 3 {
        (dpc, 1)
    } else if f > 1 && dpc % f == 0 {
        (f, dpc / f)
    } else {
        (1, dpc)
    }
}

/// Layers per pipeline stage and whether the stage holds the LM head, per
/// framework. nanotron balances contiguous blocks by compute cost
/// (`get_block_compute_costs`: a decoder layer costs `4·N·H·D + 3·F·D`, the LM
/// head `V·D`; a block joins the current rank and the rank advances once the
/// cumulative cost passes `total·(r+1)/pp`), so with a 131k vocabulary the last
/// stage holds fewer layers. Megatron splits the layers evenly (`ceil(L/pp)`)
/// and puts the head on the last stage.
pub fn pipeline_stages(spec: &RunSpec, s: &Shape) -> Vec<(u64, bool)> {
    let pp = spec.pp.max(1);
    if pp == 1 {
        return vec![(s.n_layers, true)];
    }
    if spec.framework != Framework::Nanotron {
        let ls = s.n_layers.div_ceil(pp);
        let mut v = vec![(ls, false); pp as usize];
        v[pp as usize - 1].1 = true;
        return v;
    }
    let mut out = Vec::with_capacity(pp as usize);
    nanotron_split(s, pp, |n, h| out.push((n, h)));
    out.resize(pp as usize, (0, false)); // the ranks after the head's hold nothing
    out
}

/// nanotron's cost-balanced split (see [`pipeline_stages`]): calls
/// `stage(layers, holds_head)` for each rank in order up to the one holding
/// the LM head (the ranks after it are empty), without allocating.
fn nanotron_split(s: &Shape, pp: u64, mut stage: impl FnMut(u64, bool)) {
    let (d, f, v) = (s.d_model as f64, s.f_active(), s.vocab as f64);
    let layer = 4.0 * (s.n_heads * s.d_head) as f64 * d + s.mlp_mats() * f * d;
    let head = v * d;
    let total = s.n_layers as f64 * layer + head;
    let (mut r, mut cum, mut cur) = (0u64, 0.0, 0u64);
    for _ in 0..s.n_layers {
        cum += layer;
        cur += 1;
        if cum > total * (r as f64 + 1.0) / pp as f64 && r + 1 < pp {
            stage(cur, false);
            r += 1;
            cur = 0;
        }
    }
    // the head joins the current rank, which is the last one with anything
    stage(cur, true);
}

/// The most layers on a stage without the LM head, and the layers on the
/// stage with it — the two candidates for the critical stage, since a stage's
/// cost grows with its layers. The same split as [`pipeline_stages`], without
/// building it (the planner calls this for every candidate it predicts).
pub fn stage_extremes(spec: &RunSpec, s: &Shape) -> (u64, u64) {
    let pp = spec.pp.max(1);
    if pp == 1 {
        return (0, s.n_layers);
    }
    if spec.framework != Framework::Nanotron {
        let ls = s.n_layers.div_ceil(pp);
        return (ls, ls);
    }
    let (mut plain, mut with_head) = (0, 0);
    nanotron_split(s, pp, |n, h| {
        if h {
            with_head = n;
        } else {
            plain = plain.max(n);
        }
    });
    (plain, with_head)
}

/// The pipeline stage with the largest `cost(layers, has_head)` (the first
/// such stage when two cost the same: the plain ones come first).
fn critical_stage(spec: &RunSpec, s: &Shape, cost: impl Fn(f64, bool) -> f64) -> (f64, bool) {
    let (plain, with_head) = stage_extremes(spec, s);
    let (plain, with_head) = (plain as f64, with_head as f64);
    if plain > 0.0 && cost(plain, false) >= cost(with_head, true) {
        (plain, false)
    } else {
        (with_head, true)
    }
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

/// Saved activation bytes per token per layer (bf16, FlashAttention: no
/// `5·a·s/h` score term). Llama-style: norm inputs, QKV, attention output,
/// MLP input, gate/up/activation outputs. With SP everything is sharded by
/// tp; without SP the D-wide tensors are replicated (Korthikanti et al. 2022).
pub fn activation_bytes_per_token_layer(s: &Shape, tp: u64, sp: bool, remat: Remat) -> f64 {
    let (d, f) = (s.d_model as f64, s.f_active());
    let nh = (s.n_heads * s.d_head) as f64;
    let kh = (s.n_kv_heads * s.d_head) as f64;
    let t = tp.max(1) as f64;
    let dsh = if sp || tp == 1 { d / t } else { d };
    match remat {
        Remat::Full => 2.0 * dsh,
        Remat::None | Remat::Selective | Remat::AfterMatmuls => {
            // D-wide: 2 norm inputs, 2 matmul inputs (post-norm), residual → 2 bytes each
            let dpart = 2.0 * 4.0 * dsh;
            // Q, K, V (post-RoPE), attention output O
            let attn = 2.0 * (2.0 * nh + 2.0 * kh) / t;
            // gate, up, act(gate)·up (down input), act(gate)
            let mlp = 2.0 * if s.gated { 4.0 * f } else { 2.0 * f } / t;
            dpart + attn + mlp
        }
    }
}

/// Peak memory on the most loaded device (first or last pipeline stage).
pub fn peak_memory(spec: &RunSpec, chip: &Chip, p: &EfficiencyProfile) -> MemoryBreakdown {
    let _ = chip;
    let s = &spec.shape;
    let (tp, pp) = (spec.tp.max(1), spec.pp.max(1));
    // ZeRO shards over the data-parallel ranks, the cp ranks included: fully
    // within a shard group, by stage across its replicas
    let (shard, repl) = shard_groups(spec);
    let (tpf, ppf) = (tp as f64, pp as f64);
    let (sf, rf) = (shard as f64, repl as f64);
    let (d, v) = (s.d_model as f64, s.vocab as f64);
    let l_stage = (s.n_layers as f64 / ppf).ceil();
    let emb = v * d / tpf;
    let ep = spec.ep.max(1) as f64;
    let expert_layer = s.expert_params() / s.n_layers.max(1) as f64;
    let layers = l_stage * (s.layer_params() - expert_layer * (1.0 - 1.0 / ep)) / tpf;
    let sp = spec.sequence_parallel && tp > 1;
    let seq = (spec.seq_len / spec.cp.max(1)) as f64;
    let tok = spec.mbs as f64 * seq;
    let act_tl = activation_bytes_per_token_layer(s, tp, sp, spec.remat);
    let m = spec.grad_acc.max(1) as f64;
    let state = |params: f64| -> (f64, f64, f64) {
        let pb = 2.0 * params / sf;
        // fp32 accumulation buffer (+ bf16 grads)
        let gb = (4.0 + p.grad_extra_bytes) * params / sf;
        let ob = 12.0 * params / sf / if spec.zero >= 1 { rf } else { 1.0 };
        let gb = gb / if spec.zero >= 2 { rf } else { 1.0 };
        // ZeRO-3 / FSDP: the shard, plus the gathered bf16 weights of the
        // layer in use and of the one being prefetched
        let pb = if shard > 1 {
            pb + 2.0 * 2.0 * s.layer_params() / tpf
        } else {
            pb
        };
        (pb, gb, ob)
    };
    // logits: bf16 [tok, V/tp] + fp32 copies (upcast, softmax, grad)
    let logits = tok * v / tpf * (2.0 + 4.0 * p.logits_fp32_copies);
    let mk = |params: f64, inflight: f64, with_logits: bool| -> MemoryBreakdown {
        let (pb, gb, ob) = state(params);
        let act = p.activation_scale * inflight * tok * l_stage * act_tl
            + 2.0 * tok * d / if sp { tpf } else { 1.0 };
        let lg = if with_logits { logits } else { 0.0 };
        let reserve = p.runtime_reserve_gb * 1e9;
        MemoryBreakdown {
            params: pb,
            grads: gb,
            optimizer: ob,
            activations: act,
            logits: lg,
            reserve,
            total: pb + gb + ob + act + lg + reserve,
        }
    };
    if pp == 1 {
        let params = layers + emb * if s.tied_embeddings { 1.0 } else { 2.0 };
        return mk(params, 1.0, true);
    }
    let inflight = match spec.schedule {
        Schedule::Afab => m,
        Schedule::OneFOneB => ppf.min(m),
        Schedule::Interleaved => {
            let vs = spec.virtual_stages.max(1) as f64;
            (ppf.min(m) * (1.0 + (ppf - 1.0) / (ppf * vs))).min(m)
        }
    };
    let first = mk(layers + emb, inflight, false);
    let last = mk(layers + emb, 1.0, true);
    if first.total >= last.total {
        first
    } else {
        last
    }
}
