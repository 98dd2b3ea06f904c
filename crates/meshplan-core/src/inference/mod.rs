/*!
Inference analysis (book ch7, ch8): what fits, what bounds prefill and
decode, how to shard for serving, and the latency, throughput and cost that
result — every number traced in the book's symbols.

* [`memory`]: weights per chip, KV cache, the largest batch that fits.
* [`roofline`]: per-component FLOPs and bytes, `B_crit`, the weight-loading bound.
* [`sharding`]: 1D TP limits, 2D weight-stationary, latency-bound collectives, smallest slice.
* [`latency`]: decode step, tokens/s, cost, disaggregated serving.

[`evaluate`] ties them together for one configuration ([`InferQuery`]);
the result is an [`InferReport`] whose fields are `meshplan infer --json`.
*/

pub mod defaults;
pub mod derived;
pub mod engine;
mod evaluate;
pub mod kernels;
pub mod latency;
pub mod memory;
pub mod pipeline;
mod render;
pub mod roofline;
pub mod scenario;
pub mod serving;
pub mod sharding;
pub mod slo;
pub mod speculative;
pub(crate) mod step;
pub mod validation;

use serde::Serialize;

use crate::collectives::AxisPlacement;
use crate::error::{Error, Result};
use crate::hardware::{fmt_shape, Chip};
use crate::inference::serving::{EngineProfile, ServingReport, Workload};
use crate::units::{Bytes, BytesPerSec, DType, Seconds};

pub use memory::Placement;
pub use roofline::Bound;

crate::parallelism::named_choice! {
    /// Serving layout of the weight matmuls.
    pub enum Sharding {
        /// 1D (Megatron) tensor parallelism over `tp` chips.
        #[default]
        #[serde(rename = "1d")]
        #[strum(to_string = "1d", serialize = "tp", serialize = "megatron")]
        OneD,
        /// 2D weight-stationary (ESTI): D over X, F over Y·Z.
        #[serde(rename = "2d-ws")]
        #[strum(
            to_string = "2d-ws",
            serialize = "2d",
            serialize = "2dws",
            serialize = "esti"
        )]
        TwoDWs,
    }
}

impl Sharding {
    /// Parse "1d" | "2d-ws".
    pub fn parse(s: &str) -> Result<Sharding> {
        crate::names::parse_choice("sharding", s)
    }
}

/// One inference configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct InferQuery {
    /// Weight dtype (`bytes_w`).
    pub weights_dtype: DType,
    /// KV-cache dtype.
    pub kv_dtype: DType,
    /// Activation / matmul dtype (C is taken in this dtype).
    pub compute_dtype: DType,
    /// B: concurrent sequences per model replica.
    pub batch: u64,
    /// Prompt length (prefill tokens).
    pub prompt_len: u64,
    /// S: context (KV length) to support.
    pub context: u64,
    /// Tokens generated per request.
    pub gen_len: u64,
    /// Slice shape (TPU) or `[chips]` (GPU).
    pub mesh: Vec<u64>,
    /// Y: tensor parallelism (default: all chips / ep).
    pub tp: Option<u64>,
    /// Z: expert parallelism (default 1).
    pub ep: Option<u64>,
    /// P: pipeline stages per replica, each of Y·Z chips (default 1).
    pub pp: Option<u64>,
    /// 1D or 2D weight-stationary.
    pub sharding: Sharding,
    /// Prefill MFU (fraction of peak; default 1, the roofline).
    pub mfu: f64,
    /// Serving engine (None: [`EngineProfile::default_for`] the chip).
    pub engine: Option<EngineProfile>,
    /// Static batch or continuous batching.
    pub workload: Workload,
    /// Speculative decoding (None: one token per step).
    pub speculative: Option<speculative::Speculative>,
    /// Fraction of each prompt already in the prefix cache, in [0, 1).
    pub prefix_cache_hit: f64,
}

impl Default for InferQuery {
    fn default() -> Self {
        InferQuery {
            weights_dtype: DType::Bf16,
            kv_dtype: DType::Bf16,
            compute_dtype: DType::Bf16,
            batch: defaults::BATCH,
            prompt_len: defaults::PROMPT_LEN,
            context: 4096,
            gen_len: defaults::GEN_LEN,
            mesh: vec![1],
            tp: None,
            ep: None,
            pp: None,
            sharding: Sharding::OneD,
            mfu: defaults::MFU,
            engine: None,
            workload: Workload::Static,
            speculative: None,
            prefix_cache_hit: 0.0,
        }
    }
}

/// Check a mesh against the chip: a TPU slice must be an offered shape (in
/// either orientation); a GPU "mesh" is a chip count. The one rule for
/// offered slices, which `train`, `plan train` and `infer` all apply
/// (docs/scenario.md): a plan for a slice that cannot be rented is no plan.
/// One chip (`1x1`, `1x1x1`) is always accepted: the per-chip questions
/// (the book's ch. 5 trains on one v5p chip) are not about slices.
pub fn check_mesh(chip: &Chip, mesh: &[u64]) -> Result<()> {
    if mesh.is_empty() || mesh.contains(&0) {
        return Err(Error::Invalid("the mesh needs at least one chip".into()));
    }
    if let Some(ici) = &chip.ici {
        if ici.slice_shapes.is_empty() || mesh.iter().all(|&x| x == 1) {
            return Ok(());
        }
        let mut m = mesh.to_vec();
        m.sort_unstable();
        let ok = ici.slice_shapes.iter().any(|s| {
            let mut s = s.clone();
            s.sort_unstable();
            s == m
        });
        if !ok {
            let offered: Vec<String> = ici.slice_shapes.iter().map(|s| fmt_shape(s)).collect();
            return Err(Error::Invalid(format!(
                "{} does not offer a {} slice; offered shapes: {}",
                chip.display_name,
                fmt_shape(mesh),
                offered.join(", ")
            )));
        }
    }
    Ok(())
}

/// One decode/prefill component, as reported.
pub use roofline::Component;

/// Everything `meshplan infer` reports (SI units; see docs/quantities.md).
#[derive(Clone, Debug, Serialize)]
pub struct InferReport {
    /// Model name.
    pub model: String,
    /// Chip name.
    pub chip: String,
    /// Slice shape.
    pub mesh: String,
    /// N: chips in the slice.
    pub chips: u64,
    /// Y.
    pub tp: u64,
    /// Z.
    pub ep: u64,
    /// P: pipeline stages (omitted when 1).
    #[serde(skip_serializing_if = "is_one")]
    pub pp: u64,
    /// Layers of each pipeline stage (omitted without a pipeline).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stage_layers: Vec<u64>,
    /// Model copies in the slice.
    pub replicas: u64,
    /// Chips per replica (Y·Z·P); step times use N = Y·Z per stage.
    pub chips_per_replica: u64,
    /// "1d" | "2d-ws".
    pub sharding: Sharding,
    /// Weight dtype.
    pub weights_dtype: DType,
    /// KV dtype.
    pub kv_dtype: DType,
    /// Compute dtype.
    pub compute_dtype: DType,
    /// B.
    pub batch: u64,
    /// Prompt length.
    pub prompt_len: u64,
    /// S.
    pub context: u64,
    /// Generated tokens per request.
    pub gen_len: u64,
    /// Total parameters.
    pub params_total: u64,
    /// Activated parameters per token.
    pub params_active: u64,
    /// P·bytes_w.
    pub weights_bytes: Bytes,
    /// Weight bytes one chip holds.
    pub weights_bytes_per_device: Bytes,
    /// The draft model's weight bytes per chip (`speculative = "draft:MODEL"`),
    /// counted with its KV in the fit and the largest batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft_weights_bytes_per_device: Option<Bytes>,
    /// 2·K·H·L·bytes_kv.
    pub kv_cache_bytes_per_token: Bytes,
    /// KV of one sequence of S tokens.
    pub kv_cache_bytes_per_sequence: Bytes,
    /// KV of the batch per chip.
    pub kv_cache_bytes_per_device: Bytes,
    /// KV split: (KV heads, batch, sequence) ways.
    pub kv_sharding: [u64; 3],
    /// HBM per chip.
    pub hbm_bytes_per_device: Bytes,
    /// HBM − weights per chip.
    pub free_hbm_bytes_per_device: Bytes,
    /// Largest batch at S.
    pub max_batch: u64,
    /// The quotient before the floor.
    pub max_batch_exact: f64,
    /// HBM per chip left at max_batch.
    pub leftover_hbm_bytes_per_device: Bytes,
    /// Largest batch with K = 1 (MQA); null for MLA.
    pub max_batch_one_kv_head: Option<u64>,
    /// Whether weights and one sequence fit.
    pub fits: bool,
    /// Whether weights and `batch` sequences fit.
    pub batch_fits: bool,
    /// Critical token batch for the weight matmuls.
    pub b_crit_tokens: f64,
    /// Weight-loading lower bound: weights_bytes_per_device/W_hbm, the load
    /// time of the most loaded chip (every chip loads its own weights).
    pub weight_load_time_s: Seconds,
    /// P·bytes_w/(N·W_hbm): the same if the weights were spread evenly over
    /// the N chips of a replica (smaller when some are replicated, e.g.
    /// attention over the expert axis).
    pub weight_load_time_even_s: Seconds,
    /// Decode: B·KV/(N·W_hbm).
    pub decode_kv_load_time_s: Seconds,
    /// Decode: 2·B·P/(N·C).
    pub decode_compute_time_s: Seconds,
    /// Decode: comms per step.
    pub decode_comms_time_s: Seconds,
    /// Decode: the weights the step reads / (W_hbm·η_hbm) (MoE: the experts
    /// the batch routes to, under an engine); = weight_load_time_s in the book.
    pub decode_weight_time_s: Seconds,
    /// Decode: fixed per-step cost (kernels, scheduling, sampling); 0 in the book.
    pub decode_overhead_time_s: Seconds,
    /// Decode step time.
    pub decode_step_time_s: Seconds,
    /// The book's decode roofline without communication:
    /// B·KV/(N·W_hbm) + max(2·B·P/(N·C), P_bytes/(N·W_hbm)) (ch7 pop quiz).
    pub decode_step_time_roofline_s: Seconds,
    /// What dominates the decode step.
    pub bound_decode: Bound,
    /// Prefill of one prompt (= TTFT).
    pub prefill_time_s: Seconds,
    /// Prefill FLOPs / (N·C·MFU).
    pub prefill_compute_time_s: Seconds,
    /// Prefill HBM bytes / (N·W_hbm).
    pub prefill_memory_time_s: Seconds,
    /// Prefill comms.
    pub prefill_comms_time_s: Seconds,
    /// What bounds prefill.
    pub bound_prefill: Bound,
    /// Time to first token.
    pub ttft_s: Seconds,
    /// TTFT + gen_len · step.
    pub request_latency_s: Seconds,
    /// Output tokens/s of the slice (all replicas).
    pub tokens_per_s: f64,
    /// Output tokens/s per chip.
    pub tokens_per_s_per_chip: f64,
    /// USD per million output tokens (if the chip has a price).
    pub cost_per_million_tokens_usd: Option<f64>,
    /// Prefill servers per generate server (disaggregated).
    pub disagg_prefill_per_generate: f64,
    /// Prefill TP limit (compute-bound below).
    pub tp_limit_prefill: f64,
    /// Generation TP limit (ICI-bound above).
    pub tp_limit_generate: f64,
    /// β = W_hbm/W_ici.
    pub beta_hbm_over_ici: f64,
    /// Bytes below which a TP collective is latency-bound.
    pub latency_bound_bytes: Bytes,
    /// Whether the decode TP collective is latency-bound.
    pub decode_comms_latency_bound: bool,
    /// Bytes of one decode TP collective buffer: B·D·bytes_a (the activations
    /// a Megatron AllGather/ReduceScatter moves per layer half).
    pub decode_tp_collective_bytes: Bytes,
    /// Prompt length above which MHA prefill attention is compute-bound:
    /// 2·C/W_hbm (book ch7: 480 on a v5e).
    pub attention_prefill_critical_len: f64,
    /// Arithmetic intensity of decode attention (one query against S keys,
    /// G = N/K query heads per KV head): S·G/(G + S) (≈ 1 for MHA).
    pub attention_decode_intensity: f64,
    /// 2D weight-stationary analysis (TPU with ≥ 2 chips).
    pub two_d_ws: Option<sharding::TwoDWs>,
    /// Smallest offered slice for the weights plus B·KV_seq.
    pub min_slice: Option<String>,
    /// Chips that needs: ⌈(weights + B·KV_seq)/HBM⌉.
    pub min_chips: u64,
    /// Decode components (whole batch, all layers).
    pub decode_components: Vec<Component>,
    /// Prefill components (one prompt).
    pub prefill_components: Vec<Component>,
    /// Warnings (context over the model's maximum, batch does not fit, …).
    pub warnings: Vec<String>,
    /// Serving as the engine runs it: static batch, continuous batching,
    /// disaggregated prefill/decode.
    pub serving: ServingReport,
    /// Derived aggregates (slice HBM, batch KV, requests/s, FLOPs per dollar…).
    #[serde(flatten)]
    pub aggregates: derived::Aggregates,
}

fn is_one(x: &u64) -> bool {
    *x == 1
}

pub(crate) fn ici_bandwidth(chip: &Chip, mesh: &[u64], tp: u64) -> (BytesPerSec, u64, bool) {
    match &chip.ici {
        Some(ici) => {
            // axes the TP group spans, largest first
            let mut axes = mesh.to_vec();
            axes.sort_unstable_by(|a, b| b.cmp(a));
            let (mut m, mut prod, mut wrap) = (0u64, 1u64, true);
            for &a in &axes {
                if prod >= tp {
                    break;
                }
                prod *= a;
                m += 1;
                wrap &= ici.wraparound.axis_wraps(a, mesh);
            }
            let m = m.max(1);
            (ici.link.bidirectional_rate(), m, wrap)
        }
        None => match &chip.nvlink {
            Some(nv) => (nv.per_gpu.one_way_rate(), 1, true),
            None => (BytesPerSec::new(1.0), 1, true),
        },
    }
}

/// A logical axis of `size` chips placed on the slice after `inner` chips
/// already used by inner axes (TPU: per physical axis, GPU: NVLink first).
pub(crate) fn axis_placement(chip: &Chip, mesh: &[u64], inner: u64, size: u64) -> AxisPlacement {
    if size <= 1 {
        return AxisPlacement::Trivial;
    }
    if chip.ici.is_some() {
        let mut skip = inner;
        let mut rem = size;
        let mut parts = vec![1u64; mesh.len()];
        for (i, &m) in mesh.iter().enumerate() {
            let used = gcd(skip, m);
            skip /= used;
            let avail = m / used;
            let g = gcd(rem, avail);
            parts[i] = g;
            rem /= g;
        }
        if rem != 1 {
            // cannot be laid out exactly: treat as one axis of `size` chips
            return AxisPlacement::tpu(chip, &[size], &[size]);
        }
        AxisPlacement::tpu(chip, &parts, mesh)
    } else {
        let dom = chip.nvlink.as_ref().map(|n| n.domain_size).unwrap_or(1);
        let in_node = (dom / inner.min(dom).max(1)).max(1).min(size);
        AxisPlacement::gpu(chip, size, in_node)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

pub use evaluate::evaluate;
