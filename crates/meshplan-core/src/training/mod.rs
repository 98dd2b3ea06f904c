/*!
Training analysis: given a model, a chip, a mesh, a batch and a parallelism
plan, say whether it fits, what bounds it and how long a step takes, with the
derivation (book ch5/ch6/ch12, Ultra-Scale Playbook).

Entry point: [`analyze`] (a [`TrainConfig`] → [`TrainReport`]). See
`docs/training.md` for every formula and convention. Key conventions:

* **FLOPs.** Model FLOPs = `6·P·B` (P = active parameters including
  embeddings, the book's `6·params·tokens`) plus, when
  `include_attention`, `12·B·T·N·H·L` per step (×½ when causal). Hardware
  FLOPs add the remat recompute (full: one more forward `2·P·B`;
  after-matmuls/selective: attention forward `4·B·T·N·H·L`).
* **Memory.** bf16-style dtypes configurable; Adam = 2 moments in the
  optimizer dtype (+ fp32 master when `master_weights`); ZeRO stage `s`
  shards optimizer (s ≥ 1), gradients (s ≥ 2), parameters (s ≥ 3) over
  `dp·cp`; the `fsdp` axis is always ZeRO-3.
* **Comms.** Per-layer collectives summed over layers; axes run concurrently
  (book's newer FSDP+TP analysis), so `T_comms = max over axes`; the lower
  bound is `max(T_math + T_bubble, T_comms)`, the upper bound
  `T_math + T_bubble + Σ all comms`.
*/

pub mod predicted;
pub mod rules;
pub mod scenario;

use serde::Serialize;

use crate::collectives::{cost, AxisPlacement, Collective};
use crate::hardware::{Chip, ChipKind};
use crate::mesh::{Degrees, LogicalAxis, Mesh, Topology};
use crate::model::params::{count, ParamCounts};
use crate::model::{MlpKind, ModelSpec};
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, DType, Flops, Seconds};

/// Optimizer (state per parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    /// Adam: two moments.
    Adam,
    /// AdamW: two moments.
    AdamW,
    /// Plain SGD: no state.
    Sgd,
    /// SGD with momentum: one moment.
    SgdMomentum,
    /// Adafactor without momentum: factored second moment, (rows + cols) per matrix.
    Adafactor,
}

impl Optimizer {
    /// Parse "adam", "adamw", "sgd", "sgd-momentum", "adafactor".
    pub fn parse(s: &str) -> crate::Result<Self> {
        Ok(
            match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                "adam" => Optimizer::Adam,
                "adamw" => Optimizer::AdamW,
                "sgd" => Optimizer::Sgd,
                "sgd-momentum" | "momentum" => Optimizer::SgdMomentum,
                "adafactor" => Optimizer::Adafactor,
                _ => {
                    return Err(bad(
                        "optimizer",
                        s,
                        "adam, adamw, sgd, sgd-momentum or adafactor",
                    ))
                }
            },
        )
    }
}

/// Activation checkpointing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Remat {
    /// Keep everything: the book's ≈20 `[B,D]` tensors per layer.
    None,
    /// Block remat: save only each layer's input (1 `[B,D]` per layer).
    Full,
    /// The book's "after the big matmuls": gated MLP saves 2 `[B,F]` + 1 `[B,D]`.
    AfterMatmuls,
    /// Megatron selective recompute: `34·D` elements per token·layer
    /// (Korthikanti et al. 2022, attention scores recomputed).
    Selective,
}

impl Remat {
    /// Parse "none", "full"/"block", "after-matmuls"/"matmuls", "selective".
    pub fn parse(s: &str) -> crate::Result<Self> {
        Ok(
            match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                "none" | "off" => Remat::None,
                "full" | "block" => Remat::Full,
                "after-matmuls" | "matmuls" | "big-matmuls" => Remat::AfterMatmuls,
                "selective" => Remat::Selective,
                _ => return Err(bad("remat", s, "none, full, after-matmuls or selective")),
            },
        )
    }
}

/// Pipeline schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// GPipe / all-forward-all-backward.
    Afab,
    /// One-forward-one-backward (PipeDream-flush).
    OneFOneB,
    /// Interleaved 1F1B with `virtual_stages` chunks per device.
    Interleaved,
}

impl Schedule {
    /// Parse "gpipe"/"afab", "1f1b", "interleaved".
    pub fn parse(s: &str) -> crate::Result<Self> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "gpipe" | "afab" => Schedule::Afab,
            "1f1b" => Schedule::OneFOneB,
            "interleaved" | "interleaved-1f1b" => Schedule::Interleaved,
            _ => return Err(bad("schedule", s, "gpipe, afab, 1f1b or interleaved")),
        })
    }
}

fn bad(what: &str, input: &str, expected: &str) -> crate::Error {
    crate::Error::BadValue {
        what: what.into(),
        input: input.into(),
        expected: expected.into(),
    }
}

/// Everything a training analysis needs besides model and chip.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrainConfig {
    /// B: global batch in tokens.
    pub batch_tokens: u64,
    /// T: sequence length.
    pub seq_len: u64,
    /// Parameter dtype.
    pub param_dtype: DType,
    /// Gradient dtype.
    pub grad_dtype: DType,
    /// Optimizer-state dtype.
    pub optimizer_dtype: DType,
    /// Activation dtype.
    pub activation_dtype: DType,
    /// Compute dtype for C.
    pub compute_dtype: DType,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Keep an fp32 master copy (when params are not fp32).
    pub master_weights: bool,
    /// Checkpoint policy.
    pub remat: Remat,
    /// Model-FLOPs utilisation to quote a step time at.
    pub mfu: Option<f64>,
    /// Tokens to train on (total time, chip-hours, cost).
    pub train_tokens: Option<u64>,
    /// Causal attention.
    pub causal: bool,
    /// Count attention FLOPs (the book's exercises do not).
    pub include_attention: bool,
    /// Degrees.
    pub degrees: Degrees,
    /// ZeRO stage over dp·cp (0–3).
    pub zero: u8,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Microbatches per step (pipeline).
    pub microbatches: u64,
    /// Virtual stages per device (interleaved).
    pub virtual_stages: u64,
    /// Megatron sequence parallelism with TP.
    pub sequence_parallel: bool,
    /// Fraction of link bandwidth collectives achieve (1 = the roofline).
    pub comm_efficiency: f64,
    /// Fraction of HBM usable (headroom for fragmentation, workspaces).
    pub hbm_usable_fraction: f64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            batch_tokens: 1 << 20,
            seq_len: 4096,
            param_dtype: DType::Bf16,
            grad_dtype: DType::Bf16,
            optimizer_dtype: DType::Fp32,
            activation_dtype: DType::Bf16,
            compute_dtype: DType::Bf16,
            optimizer: Optimizer::Adam,
            master_weights: false,
            remat: Remat::Full,
            mfu: None,
            train_tokens: None,
            causal: true,
            include_attention: true,
            degrees: Degrees::default(),
            zero: 0,
            schedule: Schedule::OneFOneB,
            microbatches: 1,
            virtual_stages: 1,
            sequence_parallel: false,
            comm_efficiency: 1.0,
            hbm_usable_fraction: 1.0,
        }
    }
}

/// Per-device memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MemoryPerDevice {
    /// Parameters.
    pub params_bytes: Bytes,
    /// Gradients.
    pub grads_bytes: Bytes,
    /// Optimizer state (moments, master copy).
    pub optimizer_bytes: Bytes,
    /// Saved activations.
    pub activations_bytes: Bytes,
    /// Sum.
    pub total_bytes: Bytes,
    /// Parameters + optimizer state (the book's "10 bytes per parameter"
    /// lower bound; gradients and activations excluded).
    pub params_plus_optimizer_bytes: Bytes,
}

/// One collective in a step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommEntry {
    /// AllGather, …
    pub kind: Collective,
    /// Logical axis.
    pub axis: LogicalAxis,
    /// What it moves ("fsdp: gather weights (fwd)").
    pub what: String,
    /// V per call (bytes).
    pub bytes: Bytes,
    /// Calls per step.
    pub count: u64,
    /// Seconds per step (all calls).
    pub seconds: Seconds,
    /// Whether it can overlap with compute.
    pub overlappable: bool,
    /// Latency-bound.
    pub latency_bound: bool,
}

/// Critical-batch rules and verdicts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rules {
    /// α = C / W_axis (W_ici bidirectional per axis, or NVLink on GPUs).
    pub alpha: f64,
    /// Physical axes of the whole slice (pure DP/FSDP M_X).
    pub m_all: f64,
    /// Tokens per chip for the actual plan: B / (data-like degrees · tp · pp) = B/N.
    pub batch_per_chip: f64,
    /// α / M_X for the pure DP/FSDP case over all chips.
    pub dp_min_batch_per_chip: f64,
    /// Tokens needed for pure DP/FSDP over all chips.
    pub fsdp_min_batch_tokens: f64,
    /// M_X, M_Y assumed for the FSDP+TP rules (book: 2 and 1 on a 3-D slice).
    pub fsdp_tp_m_x: f64,
    /// See `fsdp_tp_m_x`.
    pub fsdp_tp_m_y: f64,
    /// Most chips pure DP/FSDP over all axes can use at this batch and stay
    /// compute-bound: B·M_X/α (= B / `dp_min_batch_per_chip`).
    pub fsdp_max_chips: f64,
    /// Most chips mixed FSDP+TP can use at this batch: B·M_X·M_Y·F/α²
    /// (= B / `fsdp_tp_min_batch_per_chip`).
    pub fsdp_tp_max_chips: f64,
    /// Time to train `train_flops` on `fsdp_max_chips` chips at the MFU
    /// given: train FLOPs/(fsdp_max_chips·C·MFU) (book ch5, LLaMA-3 70B).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsdp_max_chips_train_time_s: Option<Seconds>,
    /// α²/(M_X·M_Y·F).
    pub fsdp_tp_min_batch_per_chip: f64,
    /// M_Y·F/α.
    pub tp_max_degree: f64,
    /// √((B/F)·(M_X/M_Y)·N).
    pub x_opt: f64,
    /// Divisor of N nearest X_opt.
    pub x_chosen: u64,
    /// N / x_chosen.
    pub y_chosen: u64,
    /// C / W_dcn per slice (TPU with DCN).
    pub dcn_min_batch_per_slice: Option<f64>,
    /// Can we use pure DP? with reason.
    pub pure_dp: Verdict,
    /// Can we use pure FSDP?
    pub pure_fsdp: Verdict,
    /// Can we use FSDP + TP?
    pub fsdp_tp: Verdict,
}

/// Yes/no with the reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// The answer.
    pub ok: bool,
    /// Why.
    pub reason: String,
}

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
    /// Degrees.
    pub degrees: Degrees,
    /// Exact parameters.
    pub params: u64,
    /// Active parameters per token.
    pub params_active: u64,
    /// Memory per device.
    pub memory_per_device: MemoryPerDevice,
    /// Usable HBM per device.
    pub hbm_bytes: Bytes,
    /// total ≤ usable HBM.
    pub fits: bool,
    /// HBM − total (negative when it does not fit).
    pub memory_margin_bytes: f64,
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
    /// Model FLOPs per step (6·P·B + attention).
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
    /// "compute" or "communication (axis)".
    pub bound: String,
    /// max(T_math + T_bubble, T_comms).
    pub step_time_lower_s: Seconds,
    /// T_math + T_bubble + Σ comms.
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
    /// Calibrated prediction (issue 7), filled by [`predicted::attach`] when
    /// the chip has an efficiency profile; `analyze` leaves it empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<predicted::Predicted>,
    /// Why there is no prediction ("prediction not available: …" or the
    /// no-profile note), set by [`predicted::attach`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction_note: Option<String>,
}

const CH5_SRC: &str = "How To Scale Your Model ch5 (training)";

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// Optimizer-state bytes per parameter (moments plus master copy).
pub fn optimizer_bytes_per_param(cfg: &TrainConfig, d: u64, f: u64) -> f64 {
    let o = cfg.optimizer_dtype.bytes_per_element();
    let moments = match cfg.optimizer {
        Optimizer::Adam | Optimizer::AdamW => 2.0 * o,
        Optimizer::SgdMomentum => o,
        Optimizer::Sgd => 0.0,
        // factored second moment: (D + F) numbers per D×F matrix
        Optimizer::Adafactor => o * (1.0 / d.max(1) as f64 + 1.0 / f.max(1) as f64),
    };
    let master = if cfg.master_weights && cfg.param_dtype != DType::Fp32 {
        4.0
    } else {
        0.0
    };
    moments + master
}

/// Saved activation elements per token per layer on one device under `remat`
/// (before dividing by the tokens a device holds). `tp`, `sp` as configured.
pub fn activation_elems_per_token_layer(spec: &ModelSpec, remat: Remat, tp: u64, sp: bool) -> f64 {
    let a = &spec.arch;
    let d = a.d_model as f64;
    let f = if a.moe.is_some() {
        (a.d_ff_expert() * a.moe.as_ref().map_or(1, |m| m.top_k)) as f64
    } else {
        a.d_ff as f64
    };
    let t = tp.max(1) as f64;
    let dsh = if sp { d / t } else { d };
    match remat {
        // book ch4: "≈ 2 bytes × ~20 × B·T·D·L"; with TP, Korthikanti's split
        // (10 of 34 replicated without SP) scaled to 20: 6 replicated + 14/t.
        Remat::None => {
            if t > 1.0 && !sp {
                6.0 * d + 14.0 * d / t
            } else {
                20.0 * d / t
            }
        }
        Remat::Full => dsh,
        Remat::AfterMatmuls => {
            let nf = if a.mlp == MlpKind::Gated { 2.0 } else { 1.0 };
            dsh + nf * f / t
        }
        Remat::Selective => {
            if t > 1.0 && !sp {
                10.0 * d + 24.0 * d / t
            } else {
                34.0 * d / t
            }
        }
    }
}

/// Pipeline: (bubble fraction, microbatch-layers in flight relative to the
/// whole local batch over L/p layers).
pub fn pipeline_factors(p: u64, m: u64, v: u64, schedule: Schedule) -> (f64, f64) {
    if p <= 1 {
        return (0.0, 1.0);
    }
    let (pf, mf) = (p as f64, m.max(1) as f64);
    let vf = if schedule == Schedule::Interleaved {
        v.max(1) as f64
    } else {
        1.0
    };
    let bubble = (pf - 1.0) / (mf * vf + pf - 1.0);
    // fraction of the m microbatches whose activations are alive at once on
    // the first (most loaded) stage
    let inflight = match schedule {
        Schedule::Afab => 1.0,
        Schedule::OneFOneB => pf.min(mf) / mf,
        Schedule::Interleaved => (pf.min(mf) * (1.0 + (pf - 1.0) / (pf * vf))).min(mf) / mf,
    };
    (bubble, inflight)
}

/// Analyze one training configuration.
pub fn analyze<T: Tracer>(
    spec: &ModelSpec,
    chip: &Chip,
    topo: &Topology,
    cfg: &TrainConfig,
    tr: &mut T,
) -> TrainReport {
    let a = &spec.arch;
    // A zero degree is not a plan; say so and carry on with 1 so that no
    // division below can fail (the scenario resolver rejects it earlier).
    let zero_degree = [
        cfg.degrees.dp,
        cfg.degrees.fsdp,
        cfg.degrees.tp,
        cfg.degrees.pp,
        cfg.degrees.cp,
        cfg.degrees.ep,
    ]
    .contains(&0);
    let deg = Degrees {
        dp: cfg.degrees.dp.max(1),
        fsdp: cfg.degrees.fsdp.max(1),
        tp: cfg.degrees.tp.max(1),
        pp: cfg.degrees.pp.max(1),
        cp: cfg.degrees.cp.max(1),
        ep: cfg.degrees.ep.max(1),
    };
    let mesh = Mesh::build(chip, topo, deg);
    let mut reasons = mesh.reasons.clone();
    if zero_degree {
        reasons.push("every parallel degree must be at least 1".into());
    }
    let mut notes = mesh.notes.clone();
    let n = mesh.chips.max(1);
    let nf = n as f64;
    // ---- divisibility
    if a.n_heads % deg.tp != 0 {
        reasons.push(format!(
            "tp = {} does not divide the {} query heads",
            deg.tp, a.n_heads
        ));
    }
    if deg.tp > a.n_kv_heads && deg.tp % a.n_kv_heads != 0
        || (deg.tp <= a.n_kv_heads && a.n_kv_heads % deg.tp != 0)
    {
        reasons.push(format!(
            "tp = {} and the {} KV heads do not divide one another",
            deg.tp, a.n_kv_heads
        ));
    }
    if a.n_layers % deg.pp != 0 {
        reasons.push(format!(
            "pp = {} does not divide the {} layers",
            deg.pp, a.n_layers
        ));
    }
    match &a.moe {
        Some(m) if m.n_experts % deg.ep != 0 => reasons.push(format!(
            "ep = {} does not divide the {} experts",
            deg.ep, m.n_experts
        )),
        None if deg.ep > 1 => reasons.push(format!("ep = {} but the model has no experts", deg.ep)),
        _ => {}
    }
    if deg.pp > 1 && cfg.microbatches < deg.pp {
        reasons.push(format!(
            "pipeline with {} microbatches < {} stages: the pipeline never fills",
            cfg.microbatches, deg.pp
        ));
    }
    if cfg.schedule == Schedule::Interleaved
        && deg.pp > 1
        && a.n_layers % (deg.pp * cfg.virtual_stages.max(1)) != 0
    {
        reasons.push(format!(
            "interleaved schedule: pp·v = {}·{} does not divide the {} layers",
            deg.pp, cfg.virtual_stages, a.n_layers
        ));
    }
    let data = deg.dp * deg.fsdp * deg.cp;
    let seqs = cfg.batch_tokens / cfg.seq_len.max(1);
    if cfg.seq_len == 0 || cfg.batch_tokens % cfg.seq_len != 0 {
        notes.push(format!(
            "batch of {} tokens is not a whole number of {}-token sequences",
            cfg.batch_tokens, cfg.seq_len
        ));
    }
    if deg.dp * deg.fsdp > 0 && seqs % (deg.dp * deg.fsdp).max(1) != 0 {
        notes.push(format!(
            "{} sequences do not split evenly over dp·fsdp = {}",
            seqs,
            deg.dp * deg.fsdp
        ));
    }
    if deg.cp > 1 && cfg.seq_len % deg.cp != 0 {
        reasons.push(format!(
            "cp = {} does not divide seq_len {}",
            deg.cp, cfg.seq_len
        ));
    }
    if deg.pp > 1 && seqs / (deg.dp * deg.fsdp).max(1) < cfg.microbatches {
        notes.push(format!(
            "{} microbatches but only {} sequences per data-parallel replica",
            cfg.microbatches,
            seqs / (deg.dp * deg.fsdp).max(1)
        ));
    }

    // ---- parameters
    let pc: ParamCounts = count(a, tr);
    let p_total = pc.total as f64;
    let p_exp = pc.experts_routed as f64;
    let p_dense = p_total - p_exp;
    let ep = deg.ep.max(1) as f64;
    let mp = (deg.tp * deg.pp) as f64;
    let p_mp = p_dense / mp + p_exp / (mp * ep); // params per model-parallel shard
    let zshard = (deg.dp * deg.cp) as f64;
    let fsdp = deg.fsdp as f64;
    let z = cfg.zero;
    let pb = cfg.param_dtype.bytes_per_element();
    let gb = cfg.grad_dtype.bytes_per_element();
    let ob = optimizer_bytes_per_param(cfg, a.d_model, a.d_ff);
    let params_bytes = p_mp * pb / (fsdp * if z >= 3 { zshard } else { 1.0 });
    let grads_bytes = p_mp * gb / (fsdp * if z >= 2 { zshard } else { 1.0 });
    let optimizer_bytes = p_mp * ob / (fsdp * if z >= 1 { zshard } else { 1.0 });
    tr.record(|| {
        Step::new(
            "train.memory.weights",
            "Parameters, gradients, optimizer per device",
            "P_shard·(bytes_p/Z_p + bytes_g/Z_g + bytes_opt/Z_o), P_shard = P_dense/(tp·pp) + P_experts/(tp·pp·ep)",
        )
        .bind("P", p_total, "params")
        .bind("P_shard", p_mp, "params")
        .bind("bytes_p", pb, "B")
        .bind("bytes_g", gb, "B")
        .bind("bytes_opt", ob, "B")
        .bind("fsdp", fsdp, "")
        .bind("zero", z as f64, "")
        .result(params_bytes + grads_bytes + optimizer_bytes, "B")
        .source("How To Scale Your Model ch5; ZeRO (Rajbhandari et al. 2020)")
    });

    // ---- activations
    let tokens_dev = cfg.batch_tokens as f64 / data.max(1) as f64;
    let layers_dev = a.n_layers as f64 / deg.pp as f64;
    let (bubble, inflight) =
        pipeline_factors(deg.pp, cfg.microbatches, cfg.virtual_stages, cfg.schedule);
    let e = activation_elems_per_token_layer(spec, cfg.remat, deg.tp, cfg.sequence_parallel);
    let ab = cfg.activation_dtype.bytes_per_element();
    let activations_bytes = tokens_dev * inflight * layers_dev * e * ab;
    tr.record(|| {
        Step::new(
            "train.memory.activations",
            "Saved activations per device",
            "(B/(dp·fsdp·cp))·f_inflight·(L/pp)·e·bytes",
        )
        .bind("B", cfg.batch_tokens as f64, "tokens")
        .bind("f_inflight", inflight, "")
        .bind("L/pp", layers_dev, "")
        .bind("e", e, "")
        .bind("bytes", ab, "B")
        .result(activations_bytes, "B")
        .source("How To Scale Your Model ch4/ch5; Korthikanti et al. 2022 (selective)")
    });
    let total = params_bytes + grads_bytes + optimizer_bytes + activations_bytes;
    let hbm = chip.hbm_capacity.get() * cfg.hbm_usable_fraction;
    let unsharded = p_total * (pb + gb + ob)
        + cfg.batch_tokens as f64
            * a.n_layers as f64
            * activation_elems_per_token_layer(spec, cfg.remat, 1, false)
            * ab;
    let mem = MemoryPerDevice {
        params_bytes: Bytes::new(params_bytes),
        grads_bytes: Bytes::new(grads_bytes),
        optimizer_bytes: Bytes::new(optimizer_bytes),
        activations_bytes: Bytes::new(activations_bytes),
        total_bytes: Bytes::new(total),
        params_plus_optimizer_bytes: Bytes::new(params_bytes + optimizer_bytes),
    };
    let params_dev = p_mp / (fsdp * if z >= 3 { zshard } else { 1.0 });
    tr.record(|| {
        Step::new(
            "train.params_per_device",
            "Parameters per device",
            "P_shard/(fsdp·Z_p)",
        )
        .bind("P_shard", p_mp, "params")
        .bind("fsdp", fsdp, "")
        .bind("Z_p", if z >= 3 { zshard } else { 1.0 }, "")
        .result(params_dev, "params")
        .source("How To Scale Your Model ch5")
    });
    tr.record(|| {
        Step::new(
            "train.memory.params_plus_optimizer",
            "Parameters + optimizer state per device",
            "params_bytes + optimizer_bytes",
        )
        .bind("params_bytes", params_bytes, "B")
        .bind("optimizer_bytes", optimizer_bytes, "B")
        .bind("bytes_opt", ob, "B/param")
        .result(params_bytes + optimizer_bytes, "B")
        .source("How To Scale Your Model ch5")
    });
    tr.record(|| {
        Step::new(
            "train.memory.unsharded",
            "Unsharded memory of the whole job",
            "P·(bytes_p + bytes_g + bytes_opt) + B·L·e·bytes_a",
        )
        .bind("P", p_total, "params")
        .bind("B", cfg.batch_tokens as f64, "tokens")
        .result(unsharded, "B")
    });
    tr.record(|| {
        Step::new(
            "train.memory.total",
            "Memory per device",
            "params + grads + optimizer + activations",
        )
        .bind("HBM", hbm, "B")
        .result(total, "B")
    });

    // ---- FLOPs
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
    let recompute = match cfg.remat {
        Remat::None => 0.0,
        Remat::Full => 2.0 * p_act * b + attn_fwd_per_token * b,
        Remat::AfterMatmuls | Remat::Selective => attn_fwd_per_token * b,
    };
    let hw_flops = model_flops + recompute;
    let c = chip.flops(cfg.compute_dtype).get();
    let t_math = hw_flops / (nf * c);
    tr.record(|| {
        Step::new(
            "train.flops",
            "FLOPs per step",
            "6·P·B + 12·B·T_eff·N·H·L (+ remat recompute)",
        )
        .bind("P", p_act, "params")
        .bind("B", b, "tokens")
        .bind("recompute", recompute, "FLOPs")
        .result(hw_flops, "FLOPs")
        .source("How To Scale Your Model ch4")
    });
    tr.record(|| {
        Step::new("train.t_math", "T_math", "FLOPs/(N·C)")
            .bind("N", nf, "chips")
            .bind("C", c, "FLOP/s")
            .result(t_math, "s")
    });
    let t_bubble = if bubble < 1.0 {
        t_math * bubble / (1.0 - bubble)
    } else {
        0.0
    };

    // ---- comms
    let mut comms: Vec<CommEntry> = Vec::new();
    let eff = cfg.comm_efficiency.clamp(1e-6, 1.0);
    let l = a.n_layers;
    let l_dev = ceil_div(l, deg.pp);
    // weights of one layer on one model-parallel shard (bytes, param dtype)
    let layer_params_mp = (p_total - pc.embedding as f64) / l as f64;
    let layer_dense = (layer_params_mp - p_exp / l as f64) / deg.tp as f64;
    let layer_exp = p_exp / l as f64 / (deg.tp as f64 * ep);
    let layer_w = layer_dense + layer_exp;
    let mut add = |tr: &mut T,
                   kind: Collective,
                   axis: LogicalAxis,
                   what: &str,
                   bytes: f64,
                   count: u64,
                   overlap: bool| {
        let pl = mesh.placement(axis);
        if matches!(pl, AxisPlacement::Trivial) || count == 0 || bytes <= 0.0 {
            return;
        }
        let cc = cost(kind, Bytes::new(bytes), &pl, tr);
        comms.push(CommEntry {
            kind,
            axis,
            what: what.into(),
            bytes: Bytes::new(bytes),
            count,
            seconds: cc.time * (count as f64 / eff),
            overlappable: overlap,
            latency_bound: cc.latency_bound,
        });
    };
    if reasons.is_empty() {
        let fsdp_n = deg.fsdp as f64;
        let lw = layer_w;
        // FSDP axis (ZeRO-3): gather weights fwd + bwd, reduce-scatter grads.
        if deg.fsdp > 1 {
            let calls = l_dev;
            add(
                tr,
                Collective::AllGather,
                LogicalAxis::Fsdp,
                "fsdp: gather weights (forward)",
                lw * pb,
                calls,
                true,
            );
            add(
                tr,
                Collective::AllGather,
                LogicalAxis::Fsdp,
                "fsdp: gather weights (backward)",
                lw * pb,
                calls,
                true,
            );
            add(
                tr,
                Collective::ReduceScatter,
                LogicalAxis::Fsdp,
                "fsdp: reduce-scatter gradients",
                lw * gb,
                calls,
                true,
            );
        }
        // dp axis, according to the ZeRO stage; grads already sharded by fsdp.
        if deg.dp > 1 {
            let ax = if matches!(mesh.placement(LogicalAxis::Dp), AxisPlacement::Trivial) {
                LogicalAxis::DpDcn
            } else {
                LogicalAxis::Dp
            };
            let g = lw * gb / fsdp_n;
            match z {
                0 => add(
                    tr,
                    Collective::AllReduce,
                    ax,
                    "dp: all-reduce gradients",
                    g,
                    l_dev,
                    true,
                ),
                1 | 2 => {
                    add(
                        tr,
                        Collective::ReduceScatter,
                        ax,
                        "zero-1/2: reduce-scatter gradients",
                        g,
                        l_dev,
                        true,
                    );
                    add(
                        tr,
                        Collective::AllGather,
                        ax,
                        "zero-1/2: gather updated weights",
                        lw * pb / fsdp_n,
                        l_dev,
                        true,
                    );
                }
                _ => {
                    add(
                        tr,
                        Collective::AllGather,
                        ax,
                        "zero-3 (dp): gather weights (forward)",
                        lw * pb / fsdp_n,
                        l_dev,
                        true,
                    );
                    add(
                        tr,
                        Collective::AllGather,
                        ax,
                        "zero-3 (dp): gather weights (backward)",
                        lw * pb / fsdp_n,
                        l_dev,
                        true,
                    );
                    add(
                        tr,
                        Collective::ReduceScatter,
                        ax,
                        "zero-3 (dp): reduce-scatter gradients",
                        g,
                        l_dev,
                        true,
                    );
                }
            }
            // multislice: the DCN part of dp
            if ax == LogicalAxis::Dp && mesh.axis(LogicalAxis::DpDcn).is_some() {
                add(
                    tr,
                    Collective::AllReduce,
                    LogicalAxis::DpDcn,
                    "dp over DCN: all-reduce gradients",
                    lw * gb * l_dev as f64 * nf / (mesh.chips.max(1) as f64),
                    1,
                    true,
                );
            }
        }
        // cp: gradients are also reduced over the context axis.
        if deg.cp > 1 {
            add(
                tr,
                Collective::AllReduce,
                LogicalAxis::Cp,
                "cp: all-reduce gradients",
                lw * gb / fsdp_n,
                l_dev,
                true,
            );
            // ring attention: KV of the whole sequence passes every device, fwd and bwd (+dKV)
            let kv_tok = (2 * a.n_kv_heads * a.d_head) as f64 / deg.tp as f64 * ab;
            let tok_group = b / (deg.dp * deg.fsdp) as f64; // tokens of one cp group
            add(
                tr,
                Collective::AllGather,
                LogicalAxis::Cp,
                "cp: ring-pass K,V (forward)",
                tok_group * kv_tok,
                l_dev,
                true,
            );
            add(
                tr,
                Collective::AllGather,
                LogicalAxis::Cp,
                "cp: ring-pass K,V (backward)",
                tok_group * kv_tok,
                l_dev,
                true,
            );
            add(
                tr,
                Collective::ReduceScatter,
                LogicalAxis::Cp,
                "cp: ring-reduce dK,dV",
                tok_group * kv_tok,
                l_dev,
                true,
            );
        }
        // tp: per layer 2 × (AG + RS) of [B_local, D] forward (attention and MLP), same backward.
        if deg.tp > 1 {
            let act = tokens_dev * a.d_model as f64 * ab;
            let fwd_calls = 2 * l_dev * if cfg.remat == Remat::Full { 2 } else { 1 };
            let (k1, k2) = if cfg.sequence_parallel {
                (
                    "tp+sp: all-gather activations",
                    "tp+sp: reduce-scatter activations",
                )
            } else {
                (
                    "tp: all-gather activations (f/g)",
                    "tp: reduce activations (all-reduce = RS + AG, counted as RS here)",
                )
            };
            add(
                tr,
                Collective::AllGather,
                LogicalAxis::Tp,
                &format!("{k1} (forward)"),
                act,
                fwd_calls,
                false,
            );
            add(
                tr,
                Collective::ReduceScatter,
                LogicalAxis::Tp,
                &format!("{k2} (forward)"),
                act,
                fwd_calls,
                false,
            );
            add(
                tr,
                Collective::AllGather,
                LogicalAxis::Tp,
                &format!("{k1} (backward)"),
                act,
                2 * l_dev,
                false,
            );
            add(
                tr,
                Collective::ReduceScatter,
                LogicalAxis::Tp,
                &format!("{k2} (backward)"),
                act,
                2 * l_dev,
                false,
            );
        }
        // ep: dispatch + combine all-to-all, forward and backward, per MoE layer.
        if deg.ep > 1 {
            if let Some(m) = &a.moe {
                let moe_l = ceil_div(a.moe_layers(), deg.pp);
                let v = tokens_dev * m.top_k as f64 * a.d_model as f64 * ab / deg.tp as f64;
                add(
                    tr,
                    Collective::AllToAll,
                    LogicalAxis::Ep,
                    "ep: dispatch + combine (forward)",
                    v,
                    2 * moe_l,
                    false,
                );
                add(
                    tr,
                    Collective::AllToAll,
                    LogicalAxis::Ep,
                    "ep: dispatch + combine (backward)",
                    v,
                    2 * moe_l,
                    false,
                );
            }
        }
        // pp: activations to the next stage and gradients back, per microbatch.
        if deg.pp > 1 {
            let mb = tokens_dev / cfg.microbatches.max(1) as f64;
            let v = mb * a.d_model as f64 * ab
                / if cfg.sequence_parallel {
                    deg.tp as f64
                } else {
                    1.0
                };
            let hops = cfg.microbatches
                * if cfg.schedule == Schedule::Interleaved {
                    cfg.virtual_stages.max(1)
                } else {
                    1
                };
            add(
                tr,
                Collective::PointToPoint,
                LogicalAxis::Pp,
                "pp: send activations (forward)",
                v,
                hops,
                true,
            );
            add(
                tr,
                Collective::PointToPoint,
                LogicalAxis::Pp,
                "pp: send gradients (backward)",
                v,
                hops,
                true,
            );
        }
    }
    // per-axis sums
    let mut per_axis: Vec<(LogicalAxis, f64)> = Vec::new();
    for cmm in &comms {
        match per_axis.iter_mut().find(|x| x.0 == cmm.axis) {
            Some(x) => x.1 += cmm.seconds.get(),
            None => per_axis.push((cmm.axis, cmm.seconds.get())),
        }
    }
    let (worst_axis, t_comms) = per_axis.iter().fold((None, 0.0f64), |(wa, wt), &(ax, t)| {
        if t > wt {
            (Some(ax), t)
        } else {
            (wa, wt)
        }
    });
    let t_sum: f64 = comms.iter().map(|c| c.seconds.get()).sum();
    let compute = t_math + t_bubble;
    let lower = compute.max(t_comms);
    let upper = compute + t_sum;
    let bound = if t_comms > compute {
        format!("communication ({})", worst_axis.map_or("?", |x| x.name()))
    } else {
        "compute".to_string()
    };
    tr.record(|| {
        Step::new("train.step_time", "Step time bounds", "lower = max(T_math + T_bubble, max_axis T_comms); upper = T_math + T_bubble + Σ T_comms")
            .bind("T_math", t_math, "s")
            .bind("T_bubble", t_bubble, "s")
            .bind("T_comms", t_comms, "s")
            .bind("upper", upper, "s")
            .result(lower, "s")
            .source("How To Scale Your Model ch1 (rooflines), ch5")
    });
    let at_mfu = cfg
        .mfu
        .filter(|m| *m > 0.0)
        .map(|m| model_flops / (nf * c * m));
    if let Some(t) = at_mfu {
        tr.record(|| {
            Step::new(
                "train.step_time_at_mfu",
                "Step time at MFU",
                "6·P·B/(N·C·MFU)",
            )
            .bind("MFU", cfg.mfu.unwrap_or(0.0), "")
            .result(t, "s")
        });
    }
    let step = at_mfu.unwrap_or(lower);
    let tokens_per_s = if step > 0.0 { b / step } else { 0.0 };
    let train_time = cfg.train_tokens.map(|t| t as f64 / tokens_per_s);
    let chip_hours = train_time.map(|t| t * nf / 3600.0);
    let cost_usd = chip_hours.and_then(|h| chip.usd_per_chip_hour.map(|p| h * p));

    let mut rules = book_rules(spec, chip, &mesh, cfg, p_total, pb + ob, tr);
    let train_flops = cfg
        .train_tokens
        .map(|t| model_flops * t as f64 / b.max(1.0));
    if let (Some(f), Some(m)) = (train_flops, cfg.mfu.filter(|m| *m > 0.0)) {
        let chips_max = rules.fsdp_max_chips;
        let t = f / (chips_max * c * m);
        tr.record(|| {
            Step::new(
                "rules.fsdp_max_chips_train_time",
                "Training time on the most chips pure FSDP can use",
                "FLOPs_train/(N_max·C·MFU)",
            )
            .bind("FLOPs_train", f, "FLOPs")
            .bind("N_max", chips_max, "chips")
            .bind("C", c, "FLOP/s")
            .bind("MFU", m, "")
            .result(t, "s")
            .source(CH5_SRC)
        });
        rules.fsdp_max_chips_train_time_s = Some(Seconds::new(t));
    }
    let slice_hbm = hbm * nf;
    TrainReport {
        model: spec.name.clone(),
        chip: chip.name.clone(),
        mesh: topo.describe(),
        chips: n,
        feasible: reasons.is_empty(),
        reasons,
        notes,
        degrees: deg,
        params: pc.total,
        params_active: pc.active,
        memory_per_device: mem,
        hbm_bytes: Bytes::new(hbm),
        fits: total <= hbm,
        memory_margin_bytes: hbm - total,
        memory_total_unsharded_bytes: Bytes::new(unsharded),
        params_per_device: params_dev,
        optimizer_bytes_per_param: ob,
        slice_hbm_bytes: Bytes::new(slice_hbm),
        train_flops: train_flops.map(Flops::new),
        flops_per_step: Flops::new(model_flops),
        hardware_flops_per_step: Flops::new(hw_flops),
        t_math_s: Seconds::new(t_math),
        t_bubble_s: Seconds::new(t_bubble),
        bubble_fraction: bubble,
        t_comms_s: Seconds::new(t_comms),
        t_comms_sum_s: Seconds::new(t_sum),
        comms,
        bound,
        step_time_lower_s: Seconds::new(lower),
        step_time_upper_s: Seconds::new(upper),
        step_time_at_mfu_s: at_mfu.map(Seconds::new),
        mfu_at_lower_bound: if lower > 0.0 {
            model_flops / (nf * c * lower)
        } else {
            0.0
        },
        tokens_per_s,
        train_time_s: train_time.map(Seconds::new),
        chip_hours,
        cost_usd,
        rules,
        predicted: None,
        prediction_note: None,
    }
}

/// The book's rules for this model, chip and mesh size, with verdicts.
fn book_rules<T: Tracer>(
    spec: &ModelSpec,
    chip: &Chip,
    mesh: &Mesh,
    cfg: &TrainConfig,
    p_total: f64,
    bytes_params_opt: f64,
    tr: &mut T,
) -> Rules {
    let a = &spec.arch;
    let n = mesh.chips.max(1) as f64;
    let c = chip.flops(cfg.compute_dtype).get();
    let (w, m_all, dcn) = match (&mesh.topology, chip.kind) {
        (Topology::Torus { shape, .. }, ChipKind::Tpu) => {
            let w = chip
                .ici
                .as_ref()
                .map_or(1.0, |i| i.link.bidirectional_rate().get());
            let m = shape.iter().filter(|&&s| s > 1).count().max(1) as f64;
            let dcn = chip
                .scale_out
                .as_ref()
                .map(|s| rules::dcn_min_batch_per_slice(c, s.per_chip.one_way_rate().get(), tr));
            (w, m, dcn)
        }
        _ => {
            // GPUs: the collective bandwidth is the NVLink egress within a node, the NIC share across nodes.
            let nv = chip
                .nvlink
                .as_ref()
                .map_or(1.0, |x| x.per_gpu.one_way_rate().get());
            let w = match (&mesh.topology, &chip.scale_out) {
                (
                    Topology::Gpu {
                        nodes,
                        gpus_per_node,
                    },
                    Some(s),
                ) if *nodes > 1 => nv.min(s.per_chip.one_way_rate().get() * *gpus_per_node as f64),
                _ => nv,
            };
            (w, 1.0, None)
        }
    };
    let alpha = rules::alpha(c, w, tr);
    let b = cfg.batch_tokens as f64;
    let f = a.d_ff as f64;
    let dp_min = rules::dp_min_batch_per_chip(alpha, m_all, tr);
    let (mx, my) = if m_all >= 2.0 {
        (m_all - 1.0, 1.0)
    } else {
        (1.0, 1.0)
    };
    let ftmin = rules::fsdp_tp_min_batch_per_chip(alpha, mx, my, f, tr);
    let tpmax = rules::tp_max_degree(f, alpha, my, tr);
    let xo = rules::x_opt(b, f, n, mx, my, tr);
    let xc = rules::nearest_divisor(mesh.chips.max(1), xo);
    let hbm = chip.hbm_capacity.get();
    let per_chip = b / n;
    let weights_rep = p_total * bytes_params_opt;
    let pure_dp = if weights_rep > hbm {
        Verdict {
            ok: false,
            reason: format!(
                "pure DP replicates parameters + optimizer state ({:.3} GB at {} B/param) on every chip, more than the {:.3} GB of HBM",
                weights_rep / 1e9,
                bytes_params_opt,
                hbm / 1e9
            ),
        }
    } else if per_chip < dp_min {
        Verdict {
            ok: false,
            reason: format!(
                "fits, but B/N = {per_chip:.0} tokens per chip < α/M_X = {dp_min:.0}: communication-bound"
            ),
        }
    } else {
        Verdict {
            ok: true,
            reason: format!("fits and B/N = {per_chip:.0} ≥ α/M_X = {dp_min:.0} tokens per chip"),
        }
    };
    let pure_fsdp = if per_chip < dp_min {
        Verdict {
            ok: false,
            reason: format!(
                "memory is not the issue, but FSDP over {n} chips needs B > N·α/M_X = {:.4} M tokens and B = {:.4} M: communication-bound",
                n * dp_min / 1e6,
                b / 1e6
            ),
        }
    } else {
        Verdict {
            ok: true,
            reason: format!("B/N = {per_chip:.0} ≥ α/M_X = {dp_min:.0} tokens per chip"),
        }
    };
    let fsdp_tp = if per_chip > ftmin {
        Verdict {
            ok: true,
            reason: format!(
                "B/N = {per_chip:.0} > α²/(M_X·M_Y·F) = {ftmin:.0} tokens per chip; X_opt = {xo:.0} → X = {xc}, Y = {}",
                mesh.chips / xc.max(1)
            ),
        }
    } else {
        Verdict {
            ok: false,
            reason: format!("B/N = {per_chip:.0} ≤ α²/(M_X·M_Y·F) = {ftmin:.0}: communication-bound even with the best FSDP×TP split"),
        }
    };
    let fsdp_max_chips = b / dp_min;
    let fsdp_tp_max_chips = b / ftmin;
    tr.record(|| {
        Step::new(
            "rules.fsdp_max_chips",
            "Most chips pure FSDP can use compute-bound",
            "B·M_X/α",
        )
        .bind("B", b, "tokens")
        .bind("M_X", m_all, "")
        .bind("α", alpha, "")
        .result(fsdp_max_chips, "chips")
        .source(CH5_SRC)
    });
    tr.record(|| {
        Step::new(
            "rules.fsdp_tp_max_chips",
            "Most chips FSDP+TP can use compute-bound",
            "B·M_X·M_Y·F/α²",
        )
        .bind("B", b, "tokens")
        .bind("M_X", mx, "")
        .bind("M_Y", my, "")
        .bind("F", f, "")
        .bind("α", alpha, "")
        .result(fsdp_tp_max_chips, "chips")
        .source(CH5_SRC)
    });
    Rules {
        alpha,
        m_all,
        fsdp_max_chips,
        fsdp_tp_max_chips,
        fsdp_max_chips_train_time_s: None,
        batch_per_chip: per_chip,
        dp_min_batch_per_chip: dp_min,
        fsdp_min_batch_tokens: n * dp_min,
        fsdp_tp_m_x: mx,
        fsdp_tp_m_y: my,
        fsdp_tp_min_batch_per_chip: ftmin,
        tp_max_degree: tpmax,
        x_opt: xo,
        x_chosen: xc,
        y_chosen: mesh.chips / xc.max(1),
        dcn_min_batch_per_slice: dcn,
        pure_dp,
        pure_fsdp,
        fsdp_tp,
    }
}
