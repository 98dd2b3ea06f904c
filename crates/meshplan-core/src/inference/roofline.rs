//! Prefill and decode rooflines (book ch1, ch7).
//!
//! A component (MLP, attention projections, dot-product attention,
//! unembedding) costs `T_math = FLOPs/(N·C)` and `T_mem = bytes/(N·W_hbm)`;
//! it is compute-bound iff its intensity FLOPs/bytes exceeds `C/W_hbm`.

use serde::Serialize;

use crate::model::params::ParamCounts;
use crate::model::Arch;
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, BytesPerSec, DType, Flops, FlopsPerSec, Seconds};

/// Which resource bounds a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// FLOPs (T_math).
    Compute,
    /// Loading weights from HBM.
    WeightLoad,
    /// Loading the KV cache from HBM.
    KvLoad,
    /// HBM traffic in general (weights + KV + activations).
    Memory,
    /// Inter-chip communication.
    Comms,
    /// Fixed per-step costs (launches, scheduling, sampling).
    Overhead,
}

impl Bound {
    /// The bound of the largest of the times: `first` wins ties, then the
    /// earlier of `rest` (what bounds a step whose parts add up).
    pub(crate) fn dominant(first: (Seconds, Bound), rest: &[(Seconds, Bound)]) -> Bound {
        rest.iter()
            .fold(
                first,
                |best, &(t, k)| if t > best.0 { (t, k) } else { best },
            )
            .1
    }
}

impl Bound {
    /// Name as printed and serialised.
    pub fn name(self) -> &'static str {
        match self {
            Bound::Compute => "compute",
            Bound::WeightLoad => "weight-load",
            Bound::KvLoad => "kv-load",
            Bound::Memory => "memory",
            Bound::Comms => "comms",
            Bound::Overhead => "overhead",
        }
    }
}

/// One component's FLOPs and bytes, summed over layers, for one phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Component {
    /// "mlp", "attention_projections", "attention", "unembedding".
    pub name: &'static str,
    /// FLOPs (all layers, whole batch, whole slice).
    pub flops: Flops,
    /// HBM bytes read (weights or KV; activations ignored).
    pub bytes: Bytes,
    /// FLOPs/(N·C).
    pub t_math: Seconds,
    /// bytes/(N·W_hbm).
    pub t_mem: Seconds,
    /// FLOPs/bytes.
    pub intensity: f64,
    /// Compute or memory.
    pub bound: Bound,
}

/// Inputs shared by the roofline functions.
#[derive(Clone, Copy, Debug)]
pub struct Hw {
    /// N: chips.
    pub chips: u64,
    /// Chips that hold one copy of the weights every expert group
    /// replicates (attention projections, unembedding): Y = N/Z with expert
    /// sharding `W[E_Z, D, F_Y]`, N otherwise. Their bytes load at Y·W_hbm.
    pub replicated_chips: u64,
    /// C per chip in the compute dtype.
    pub c: FlopsPerSec,
    /// W_hbm per chip.
    pub w_hbm: BytesPerSec,
}

/// One roofline component; `replicated` weights (attention projections,
/// unembedding) load on each expert group's Y chips.
fn component(name: &'static str, flops: f64, bytes: f64, hw: &Hw, replicated: bool) -> Component {
    let n = hw.chips as f64;
    let n_mem = if replicated {
        hw.replicated_chips.max(1) as f64
    } else {
        n
    };
    let t_math = Flops::new(flops) / (hw.c * n);
    let t_mem = Bytes::new(bytes) / (hw.w_hbm * n_mem);
    Component {
        name,
        flops: Flops::new(flops),
        bytes: Bytes::new(bytes),
        t_math,
        t_mem,
        intensity: if bytes > 0.0 {
            flops / bytes
        } else {
            f64::INFINITY
        },
        bound: if t_math >= t_mem {
            Bound::Compute
        } else {
            Bound::Memory
        },
    }
}

fn record_component<T: Tracer>(phase: &str, c: &Component, tokens: f64, tr: &mut T) {
    tr.record(|| {
        Step::new(
            &format!("infer.{phase}.{}", c.name),
            &format!("{phase} {}: max(FLOPs/(N·C), bytes/(N·W_hbm))", c.name),
            "max(FLOPs/(N·C), bytes/(N·W_hbm))",
        )
        .bind("tokens", tokens, "tokens")
        .bind("FLOPs", c.flops.get(), "FLOPs")
        .bind("bytes", c.bytes.get(), "B")
        .bind("intensity", c.intensity, "FLOPs/B")
        .result(c.t_math.max(c.t_mem).get(), "s")
        .source("How To Scale Your Model, ch1 rooflines, ch7 inference")
    });
}

/// Per-token matmul parameters split into (MLP incl. router, attention
/// projections, unembedding) for the active path; and the MLP parameters
/// loaded per step (all experts).
fn split(a: &Arch, p: &ParamCounts) -> (f64, f64, f64, f64) {
    let unembed = (a.vocab * a.d_model) as f64;
    let attn = p.attention as f64;
    let mlp_active = p.matmul_active as f64 - attn - unembed;
    let mlp_loaded = mlp_active
        + (p.experts_routed as f64
            - (p.active as f64 - (p.total as f64 - p.experts_routed as f64)));
    (mlp_active.max(0.0), attn, unembed, mlp_loaded.max(0.0))
}

/// What one decode step or one prefill passes through the model.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// "decode" | "prefill" (names the trace steps).
    phase: &'static str,
    /// Tokens through the matmuls.
    tokens: f64,
    /// Attention FLOPs per token over the layers (scores and values over
    /// the keys attended, a sparse indexer, linear-attention state updates:
    /// [`crate::model::flops::attention_flops_per_query`]).
    attn_flops_per_token: f64,
    /// KV bytes read (decode) or written (prefill).
    kv_bytes: f64,
    /// Positions through the unembedding.
    unembedded: f64,
}

impl Pass {
    /// Decode step of `batch` sequences at KV length `context` (KV in
    /// `kv_per_seq` bytes per sequence, all read once).
    pub fn decode(a: &Arch, batch: u64, context: u64, kv_per_seq: Bytes) -> Pass {
        let b = batch as f64;
        Pass {
            phase: "decode",
            tokens: b,
            attn_flops_per_token: crate::model::flops::attention_flops_per_query(a, context, false),
            kv_bytes: b * kv_per_seq.get(),
            unembedded: b,
        }
    }

    /// Prefill of one prompt of `t` tokens (causal attention).
    pub fn prefill(a: &Arch, t: u64, kv_per_token: Bytes) -> Pass {
        let tf = t as f64;
        Pass {
            phase: "prefill",
            tokens: tf,
            attn_flops_per_token: crate::model::flops::attention_flops_per_query(a, t, true),
            // reads and writes the prompt's KV once (flash attention)
            kv_bytes: tf * kv_per_token.get(),
            // only the last position is unembedded when serving
            unembedded: 1.0,
        }
    }
}

/// The four roofline components of a pass, all layers: FLOPs and HBM bytes
/// of the MLP, the attention projections, attention and the unembedding
/// (weights in `wdt`).
pub fn components<T: Tracer>(
    a: &Arch,
    p: &ParamCounts,
    pass: &Pass,
    wdt: DType,
    hw: &Hw,
    tr: &mut T,
) -> Vec<Component> {
    let n = pass.tokens;
    let wb = wdt.bytes_per_element();
    let (mlp, attn, unembed, mlp_loaded) = split(a, p);
    let att_flops = n * pass.attn_flops_per_token;
    let v = vec![
        component("mlp", 2.0 * n * mlp, mlp_loaded * wb, hw, false),
        component("attention_projections", 2.0 * n * attn, attn * wb, hw, true),
        component("attention", att_flops, pass.kv_bytes, hw, false),
        component(
            "unembedding",
            2.0 * pass.unembedded * unembed,
            unembed * wb,
            hw,
            true,
        ),
    ];
    for c in &v {
        record_component(pass.phase, c, n, tr);
    }
    v
}

/// Critical token batch above which the weight matmuls are compute-bound:
/// `B_crit = α_hbm·β·(E/k)` with `α_hbm = C_bf16/W_hbm` and
/// `β = bits per weight / bits per activation` (book ch7; ch4 Q8 for E/k).
/// Using the bf16 peak for α is the book's convention; it equals the exact
/// `(C_act/W_hbm)·bytes_w/2` whenever the chip's peak doubles per halving of
/// the activation width (v5e: int8 3.94e14 = 2 × 1.97e14).
pub fn b_crit<T: Tracer>(
    c_bf16: FlopsPerSec,
    w_hbm: BytesPerSec,
    weight_bits: u32,
    act_bits: u32,
    moe: Option<(u64, u64)>,
    tr: &mut T,
) -> f64 {
    let alpha = c_bf16 / w_hbm;
    let beta = weight_bits as f64 / act_bits as f64;
    let sparsity = moe.map(|(e, k)| e as f64 / k as f64).unwrap_or(1.0);
    let b = alpha * beta * sparsity;
    tr.record(|| {
        Step::new(
            "infer.b_crit",
            "Critical batch (tokens)",
            "(C/W_hbm)·(bits_w/bits_a)·(E/k)",
        )
        .bind("C", c_bf16.get(), "FLOP/s")
        .bind("W_hbm", w_hbm.get(), "B/s")
        .bind("bits_w", weight_bits as f64, "")
        .bind("bits_a", act_bits as f64, "")
        .bind("E/k", sparsity, "")
        .result(b, "tokens")
        .source("How To Scale Your Model, ch7 (B_crit = β·α_hbm), ch4 Q8 / ch7 Q5 (MoE ×E/k)")
    });
    b
}

/// Lower bound on a decode step: every chip loads the weights it holds
/// once, `w_dev/W_hbm` — `P·bytes_w/(N·W_hbm)` when the weights are spread
/// evenly (book ch2 Q1, ch7 Q3), more when some are replicated (attention
/// over the expert axis, ch7 Q6).
pub fn weight_load_time<T: Tracer>(w_dev: Bytes, w_hbm: BytesPerSec, tr: &mut T) -> Seconds {
    let t = w_dev / w_hbm;
    tr.record(|| {
        Step::new(
            "infer.weight_load_time",
            "Weight-loading lower bound (the most loaded chip)",
            "w_dev/W_hbm",
        )
        .bind("w_dev", w_dev.get(), "B")
        .bind("W_hbm", w_hbm.get(), "B/s")
        .result(t.get(), "s")
        .source("How To Scale Your Model, ch7 Q3, Q6")
    });
    t
}

/// Arithmetic intensity of dot-product attention with T queries and S keys,
/// G query heads per KV head, everything in the same dtype (flash attention):
/// `T·S·G/(T·G + S)` FLOPs/byte per element width; MHA (G=1): `S·T/(S+T)`
/// (book ch4 Q4, ch7). Divide by bytes per element for another dtype.
pub fn attention_intensity(t: f64, s: f64, g: f64) -> f64 {
    t * s * g / (t * g + s)
}

/// Prompt length above which MHA prefill attention is compute-bound:
/// `T/2 > C/W_hbm` → `T > 2·C/W_hbm` (book ch7: 480 on v5e).
pub fn attention_prefill_critical_len(c_over_w: f64) -> f64 {
    2.0 * c_over_w
}
