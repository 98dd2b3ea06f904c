//! One training step by block of the model (`blocks` of `meshplan train
//! --json`, the table of `meshplan train --breakdown`): for the attention
//! projections, the attention core, the MLP / MoE experts, the norms and
//! element-wise work, the embedding + logits + loss and the optimizer step,
//! the FLOPs, the HBM bytes and a roofline time per device,
//! `max((FLOPs + recompute)/(N·C·eff), bytes/(N·W·eff_HBM))`.
//!
//! The FLOPs are the `model` convention's ([`crate::model::flops::per_token`]
//! split by the weight matrices each block multiplies through), so the
//! blocks sum to the step's model FLOPs; the efficiencies and the
//! element-wise and optimizer traffic are the step-time model's
//! ([`crate::step::calibrated`]) when the chip has an efficiency profile,
//! the peak rates otherwise. GEMM and attention bytes are the ideal IO:
//! each operand read or written once per pass (forward, input gradient,
//! weight gradient). Communication is not a block: the collectives table and
//! `predicted.time_breakdown_s` carry it.
//!
//! The predicted time of each block (`predicted_s`) is not derived here:
//! it is the calibrated pricer's, read from its priced inventory
//! ([`BlockTimes`]), so the blocks plus the non-block parts (exposed
//! communication, bubble, overheads, floor raise) add up to the predicted
//! step time.

use serde::Serialize;

use crate::fidelity::EfficiencyProfile;
use crate::hardware::Chip;
use crate::model::flops::{head_dims, per_token};
use crate::model::params::ParamCounts;
use crate::model::Arch;
use crate::parallelism::{Remat, RunSpec, TrainConfig};
use crate::step::calibrated::{
    elementwise_elems, gemm_efficiency, BlockTimes, FA_BACKWARD_TIME, MOE_LOAD_IMBALANCE,
};
use crate::step::inventory::{optimizer_params, OPTIMIZER_BYTES};
use crate::trace::NoTrace;
use crate::units::DType;

/// One block of a training step (whole step; times per device).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepBlock {
    /// The block.
    pub block: &'static str,
    /// Model FLOPs of the step in this block (`model` convention).
    pub flops: f64,
    /// FLOPs the remat policy recomputes in it.
    pub recompute_flops: f64,
    /// HBM bytes moved over the step, all devices.
    pub hbm_bytes: f64,
    /// Fraction of the peak FLOP/s its kernels reach (1 without a profile;
    /// 0 for a block without FLOPs).
    pub efficiency: f64,
    /// (FLOPs + recompute) / (N·C·efficiency), seconds per device.
    pub t_math_s: f64,
    /// bytes / (N·W·HBM efficiency), seconds per device.
    pub t_mem_s: f64,
    /// max(T_math, T_mem).
    pub time_s: f64,
    /// "compute" or "memory".
    pub bound: &'static str,
    /// The calibrated prediction's seconds for this block on the critical
    /// pipeline stage, whole step (its GEMMs at their inventory shapes,
    /// [`BlockTimes`]); absent without a prediction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_s: Option<f64>,
}

/// What every block reads.
struct Ctx<'a> {
    a: &'a Arch,
    p: Option<&'a EfficiencyProfile>,
    /// Chips, tokens per step, layers per device, micro-batches.
    n: f64,
    tokens: f64,
    layers_dev: f64,
    m: f64,
    tp: f64,
    ep: f64,
    /// Tokens per micro-batch on one device (the GEMMs' height).
    t_mb: f64,
    /// C of the GEMMs and of attention (bf16), W (with the HBM efficiency).
    c_mm: f64,
    c_attn: f64,
    w: f64,
    /// Bytes per GEMM operand, per activation.
    e_mm: f64,
    e_act: f64,
    remat: Remat,
}

impl Ctx<'_> {
    /// A GEMM's efficiency at per-device shape `[m, k] × [k, n]`.
    fn eff(&self, m: f64, k: f64, n: f64) -> f64 {
        self.p.map_or(1.0, |p| gemm_efficiency(p, m, k, n))
    }
    /// Seconds per device of `flops` (whole step) at efficiency `eff`.
    fn math(&self, flops: f64, c: f64, eff: f64) -> f64 {
        flops / (self.n * c * eff)
    }
    fn block(
        &self,
        block: &'static str,
        flops: f64,
        rec: f64,
        t_math: f64,
        bytes: f64,
    ) -> StepBlock {
        let t_mem = bytes / (self.n * self.w);
        let peak = if block == ATTN_CORE {
            self.c_attn
        } else {
            self.c_mm
        };
        let hw = flops + rec;
        StepBlock {
            block,
            flops,
            recompute_flops: rec,
            hbm_bytes: bytes,
            efficiency: if t_math > 0.0 {
                hw / (t_math * self.n * peak)
            } else {
                0.0
            },
            t_math_s: t_math,
            t_mem_s: t_mem,
            time_s: t_math.max(t_mem),
            bound: if t_math >= t_mem { "compute" } else { "memory" },
            predicted_s: None,
        }
    }
    /// HBM bytes over the step of a GEMM block whose layer moves `act`
    /// activation elements per token and holds `weights` elements per device:
    /// 3 passes (forward, input and weight gradient) + a recomputed forward.
    fn gemm_bytes(&self, act: f64, weights: f64, full_remat_only: bool) -> f64 {
        let rec = match self.remat {
            Remat::Full => 1.0,
            Remat::None => 0.0,
            _ if full_remat_only => 0.0,
            _ => 1.0,
        };
        let per_dev = self.layers_dev * (self.tokens / self.n_data() * act + self.m * weights);
        (3.0 + rec) * self.e_mm * per_dev * self.n
    }
    /// Devices sharing one token's work (tp·pp); tokens per device = tokens·(tp·pp)/N.
    fn n_data(&self) -> f64 {
        self.n / (self.tp * self.pp())
    }
    fn pp(&self) -> f64 {
        (self.a.n_layers.max(1) as f64 / self.layers_dev).max(1.0)
    }
}

const ATTN_CORE: &str = "attention core softmax(QKᵀ)V";

/// Forward matmul parameters per token by block: (attention projections,
/// MLP / experts (active) + router, output projection V·D). They sum to
/// `P_matmul` of [`per_token`] (the attention part is the rest).
fn matmul_split(a: &Arch, pc: &ParamCounts) -> (f64, f64, f64) {
    let (d, m) = (a.d_model as f64, a.mlp.matrices() as f64);
    let mut mlp = a.dense_layers() as f64 * m * d * a.d_ff as f64;
    if let Some(mo) = &a.moe {
        let routed = mo.top_k as f64 * m * d * a.d_ff_expert() as f64;
        let shared = mo.n_shared_experts as f64 * m * d * a.d_ff_shared() as f64;
        mlp += a.moe_layers() as f64 * (routed + shared);
    }
    let mlp = mlp + pc.router as f64;
    let logits = (a.vocab * a.d_model) as f64;
    (
        (pc.matmul_active as f64 - mlp - logits).max(0.0),
        mlp,
        logits,
    )
}

/// The recomputed share of a block's forward FLOPs (`matmul`: a GEMM block).
fn recomputed(remat: Remat, matmul: bool) -> f64 {
    match remat {
        Remat::None => 0.0,
        Remat::Full => 1.0,
        Remat::Selective | Remat::AfterMatmuls => f64::from(u8::from(!matmul)),
    }
}

/// MLP time per device: dense GEMMs, shared and routed experts (the busiest
/// expert's rank: [`MOE_LOAD_IMBALANCE`] with a profile), the router.
fn mlp_math(x: &Ctx, fwd_factor: f64) -> f64 {
    let a = x.a;
    let (d, m, tok) = (a.d_model as f64, a.mlp.matrices() as f64, x.tokens);
    let gemm = |params: f64, rows: f64, width: f64| {
        x.math(
            fwd_factor * 2.0 * tok * params,
            x.c_mm,
            x.eff(rows, d, width / x.tp),
        )
    };
    let mut t = gemm(
        a.dense_layers() as f64 * m * d * a.d_ff as f64,
        x.t_mb,
        a.d_ff as f64,
    );
    if let Some(mo) = &a.moe {
        let (k, e, l) = (
            mo.top_k as f64,
            mo.n_experts.max(1) as f64,
            a.moe_layers() as f64,
        );
        let fe = a.d_ff_expert() as f64;
        // the k·tok routed rows land on E/ep local experts (as the step-time model)
        let tall = (x.ep * x.t_mb * k / e).max(1.0);
        let imbalance = if x.p.is_some() {
            MOE_LOAD_IMBALANCE
        } else {
            1.0
        };
        t += imbalance * gemm(l * k * m * d * fe, tall, fe);
        let fs = a.d_ff_shared() as f64;
        t += gemm(l * mo.n_shared_experts as f64 * m * d * fs, x.t_mb, fs);
        t += gemm(l * e * d, x.t_mb, e * x.tp);
    }
    t
}

/// The blocks of one step of `cfg` on `chip` (`profile`: the efficiencies;
/// none: the peak rates), each with its `predicted` time when there is a
/// prediction. Empty when the plan cannot be mapped onto a replica (more
/// micro-batches than sequences).
pub fn step_blocks(
    a: &Arch,
    pc: &ParamCounts,
    chip: &Chip,
    cfg: &TrainConfig,
    profile: Option<&EfficiencyProfile>,
    predicted: Option<&BlockTimes>,
) -> Vec<StepBlock> {
    let mut out = roofline_blocks(a, pc, chip, cfg, profile);
    if let Some(t) = predicted {
        for (b, s) in out.iter_mut().zip(t.in_block_order()) {
            b.predicted_s = Some(s);
        }
    }
    out
}

/// The blocks' FLOPs, bytes and roofline times.
fn roofline_blocks(
    a: &Arch,
    pc: &ParamCounts,
    chip: &Chip,
    cfg: &TrainConfig,
    profile: Option<&EfficiencyProfile>,
) -> Vec<StepBlock> {
    let Ok(rs) = RunSpec::from_config(a, *pc, cfg) else {
        return Vec::new();
    };
    let d = cfg.degrees.at_least_one();
    let (n, tp, pp) = (d.product() as f64, d.tp as f64, d.pp as f64);
    let hbm_eff = profile.map_or(1.0, |p| p.hbm_efficiency);
    let x = Ctx {
        a,
        p: profile,
        n,
        tokens: cfg.batch_tokens as f64,
        layers_dev: a.n_layers as f64 / pp,
        m: rs.grad_acc.max(1) as f64,
        tp,
        ep: rs.ep.max(1) as f64,
        t_mb: (rs.mbs * rs.seq_len / rs.cp.max(1)) as f64,
        c_mm: chip.flops(cfg.compute_dtype).get(),
        c_attn: chip.flops(DType::Bf16).get(),
        w: chip.hbm_bandwidth.get() * hbm_eff,
        e_mm: cfg.compute_dtype.bytes_per_element().max(1.0),
        e_act: cfg.activation_dtype.bytes_per_element(),
        remat: cfg.remat,
    };
    let f = per_token(a, pc, cfg.seq_len, cfg.causal, &mut NoTrace);
    let (attn_p, mlp_p, logits_p) = matmul_split(a, pc);
    let tok = x.tokens;
    let rec_mm = recomputed(cfg.remat, true);
    let flops = |params: f64| 3.0 * 2.0 * params * tok;
    let mut out = Vec::with_capacity(6);
    out.push(attention_projections(&x, attn_p, rec_mm));
    // attention core: forward + FlashAttention's backward (FA_BACKWARD_TIME
    // × the forward's time) + a recomputed forward
    let attn_fwd = f.forward_attention.get() * tok;
    let rec_attn = recomputed(cfg.remat, false) * attn_fwd;
    let attn_eff = profile.map_or(1.0, |p| p.attention_efficiency);
    let t_attn = x.math(
        attn_fwd * (1.0 + FA_BACKWARD_TIME) + rec_attn,
        x.c_attn,
        attn_eff,
    );
    let (hqk, hv) = head_dims(a);
    let (nh, kh) = (a.n_heads as f64, a.n_kv_heads as f64);
    let qkvo = (nh * (hqk + hv) as f64 + kh * (hqk + hv) as f64) / tp;
    let attn_bytes = x.gemm_bytes(qkvo, 0.0, false) / x.e_mm * x.e_act;
    out.push(x.block(ATTN_CORE, 3.0 * attn_fwd, rec_attn, t_attn, attn_bytes));
    out.push(mlp_block(&x, flops(mlp_p), rec_mm));
    out.push(elementwise_block(&x, cfg));
    out.push(head_block(&x, logits_p, flops(logits_p), rec_mm));
    let (opt, stage) = optimizer_params(&rs);
    let opt_bytes = n * (opt * OPTIMIZER_BYTES.0 + stage * OPTIMIZER_BYTES.1);
    out.push(x.block("optimizer step", 0.0, 0.0, 0.0, opt_bytes));
    out
}

fn attention_projections(x: &Ctx, attn_p: f64, rec: f64) -> StepBlock {
    let a = x.a;
    let (d, l) = (a.d_model as f64, a.n_layers.max(1) as f64);
    let per_layer = attn_p / l;
    let flops = 6.0 * attn_p * x.tokens;
    let t = match &a.mla {
        // MLA: its down/up projections as one GEMM D deep (as the step-time model)
        Some(_) => x.math(
            flops * (1.0 + rec / 3.0),
            x.c_mm,
            x.eff(x.t_mb, d, per_layer / d / x.tp),
        ),
        None => {
            let qkv = (a.n_heads + 2 * a.n_kv_heads) as f64 * a.d_head as f64;
            let o = (a.n_heads * a.d_head) as f64;
            let share = qkv / (qkv + o);
            let scale = 1.0 + rec / 3.0;
            x.math(flops * scale * share, x.c_mm, x.eff(x.t_mb, d, qkv / x.tp))
                + x.math(
                    flops * scale * (1.0 - share),
                    x.c_mm,
                    x.eff(x.t_mb, o / x.tp, d),
                )
        }
    };
    // per token: D in and QKV out, O in and D out; weights 1/tp each
    let act = 2.0 * d + per_layer / d / x.tp;
    let bytes = x.gemm_bytes(act, per_layer / x.tp, true);
    x.block(
        "attention projections (QKV, O)",
        flops,
        rec * flops / 3.0,
        t,
        bytes,
    )
}

fn mlp_block(x: &Ctx, flops: f64, rec: f64) -> StepBlock {
    let a = x.a;
    let (d, l) = (a.d_model as f64, a.n_layers.max(1) as f64);
    let t = mlp_math(x, 3.0 + rec);
    // per token·layer: D in and out of each MLP a token goes through, the
    // F-wide intermediate through every matrix; weights: the layer's on one
    // device (every local expert's)
    let width = a.ffn_width_active();
    let ways = a.moe.as_ref().map_or(1.0, |m| {
        a.moe_fraction() * (m.top_k + m.n_shared_experts) as f64 + 1.0 - a.moe_fraction()
    });
    let act = 2.0 * d * ways + a.mlp.matrices() as f64 * width / x.tp;
    let total_p = (pc_mlp_total(a)) / l / x.tp;
    let bytes = x.gemm_bytes(act, total_p, true);
    x.block(
        "MLP / MoE experts + router",
        flops,
        rec * flops / 3.0,
        t,
        bytes,
    )
}

/// MLP weight elements of the model on one expert-parallel rank (all layers).
fn pc_mlp_total(a: &Arch) -> f64 {
    let (d, m) = (a.d_model as f64, a.mlp.matrices() as f64);
    let mut w = a.dense_layers() as f64 * m * d * a.d_ff as f64;
    if let Some(mo) = &a.moe {
        let e = mo.n_experts as f64;
        let routed = e * m * d * a.d_ff_expert() as f64;
        let shared = mo.n_shared_experts as f64 * m * d * a.d_ff_shared() as f64;
        w += a.moe_layers() as f64 * (routed + shared + e * d);
    }
    w
}

fn elementwise_block(x: &Ctx, cfg: &TrainConfig) -> StepBlock {
    let a = x.a;
    let d = a.d_model as f64;
    let sp = cfg.sequence_parallel && x.tp > 1.0;
    let dsh = if sp || x.tp == 1.0 { d / x.tp } else { d };
    let nh = (a.n_heads * a.d_head) as f64;
    let elems = elementwise_elems(dsh, a.ffn_width_active(), nh, x.tp);
    // the step-time model's traffic (bf16), a third more with full remat
    let rec = if cfg.remat == Remat::Full {
        1.0 / 3.0
    } else {
        0.0
    };
    let per_dev = x.tokens / x.n_data() * x.layers_dev * 2.0 * elems * (1.0 + rec);
    x.block("norms + element-wise", 0.0, 0.0, 0.0, per_dev * x.n)
}

fn head_block(x: &Ctx, logits_p: f64, flops: f64, rec: f64) -> StepBlock {
    let (d, v) = (x.a.d_model as f64, x.a.vocab as f64);
    let t = x.math(
        flops * (1.0 + rec / 3.0),
        x.c_mm,
        x.eff(x.t_mb, d, v / x.tp),
    );
    // on one stage: logits GEMM (3 passes), the embedding row read and its
    // gradient written (2·D), the loss in fp32 (6·V/tp·4 B per token, as
    // the step-time model)
    let tok_dev = x.tokens / x.n_data();
    let gemm = (3.0 + rec) * x.e_mm * (tok_dev * (d + v / x.tp) + x.m * logits_p / x.tp);
    let per_dev = gemm + tok_dev * (2.0 * d * x.e_act + 6.0 * v / x.tp * 4.0);
    let bytes = per_dev * x.n / x.pp();
    x.block(
        "embedding + logits + loss",
        flops,
        rec * flops / 3.0,
        t,
        bytes,
    )
}

/// Record the predicted step by block (`--explain`): the blocks' priced
/// times plus the parts that belong to no block.
pub fn record_predicted<T: crate::trace::Tracer>(
    blocks: &[StepBlock],
    t: &crate::step::calibrated::TimeBreakdown,
    tr: &mut T,
) {
    if blocks.iter().any(|b| b.predicted_s.is_none()) || blocks.is_empty() {
        return;
    }
    tr.record(|| {
        let mut s = crate::trace::Step::new(
            "train.blocks.predicted",
            "Predicted step by block (the calibrated pricer's time per block of its inventory) plus the parts that belong to no block",
            "T = Σ_block T_block + T_TP + T_CP + T_EP + T_PP + T_bubble + T_DP + T_overhead + T_floor",
        );
        for b in blocks {
            s = s.bind(b.block, b.predicted_s.unwrap_or(0.0), "s");
        }
        let rest = [
            ("T_TP", t.tp_comm),
            ("T_CP", t.cp_comm),
            ("T_EP", t.ep_comm),
            ("T_PP", t.pp_comm),
            ("T_bubble", t.bubble),
            ("T_DP", t.dp_comm),
            ("T_overhead", t.overhead),
            ("T_floor", t.floor_raise),
        ];
        for (k, v) in rest {
            s = s.bind(k, v, "s");
        }
        let sum = blocks.iter().filter_map(|b| b.predicted_s).sum::<f64>()
            + rest.iter().map(|(_, v)| v).sum::<f64>();
        s.result(sum, "s")
            .source("docs/training.md (step by block); docs/fidelity.md (the step-time model)")
    });
}

/// Record the blocks' roofline (`--explain`): their sum per device.
pub fn record<T: crate::trace::Tracer>(blocks: &[StepBlock], chips: f64, tr: &mut T) {
    if blocks.is_empty() {
        return;
    }
    tr.record(|| {
        let mut s = crate::trace::Step::new(
            "train.blocks",
            "Step by block (FLOPs and HBM bytes per block, roofline time per device)",
            "Σ_block max((FLOPs + recompute)/(N·C·eff), bytes/(N·W·eff_HBM))",
        )
        .bind("N", chips, "chips");
        for b in blocks {
            s = s.bind(b.block, b.time_s, "s");
        }
        s.result(blocks.iter().map(|b| b.time_s).sum(), "s")
            .source("How To Scale Your Model ch1 (rooflines), ch4 (FLOPs); docs/training.md (step by block)")
    });
}
