/*!
Memory per device during training: one model, whose framework choices are
named ([`Framework`]). The roofline analysis (`meshplan train`), the planner
and the fidelity model's predicted peak all call [`per_device`].

* **Book** (`framework = "book"`): parameters, gradients and optimizer state
  in the configured dtypes over an even share of every stage
  (`P_dense/(tp·pp) + P_experts/(tp·pp·ep)`), the book's activation counts
  per remat policy (ch4: ≈20 `[B,D]` per layer without remat), nothing else.
* **Frameworks** (Megatron, nanotron): the busiest pipeline stage of the
  framework's split (the first stage, which holds the input embedding and
  the most micro-batches in flight, or the stage with the LM head and its
  fp32 logits); bf16 parameters, an fp32 gradient accumulation buffer
  (nanotron keeps the bf16 gradients too), fp32 master + moments; the
  FlashAttention activation tensor list; the gathered weights ZeRO-3 keeps
  for the layer in use and the one prefetched; and the runtime reserve of
  the efficiency profile ([`MemoryCalibration`]).

ZeRO shards over the data-parallel ranks, context-parallel ranks included:
fully within a shard group (`fsdp`, or every rank with ZeRO-3), by stage
across its replicas (see `RunSpec::shard_groups`).
*/

mod activations;
pub mod offload;
pub mod runtime;
pub mod verdict;

pub use activations::{
    book_elems_per_token_layer, checkpoint_elems_per_token_layer, checkpoints_per_layer,
    framework_bytes_per_token_layer, megatron_bytes_per_token_layer,
};
pub use verdict::{FitLevel, MemoryVerdict};

use serde::Serialize;

use crate::model::params::ParamCounts;
use crate::model::Arch;
use crate::parallelism::pipeline::{
    first_stage_layers_with, microbatches_in_flight, microbatches_in_flight_at, parameter_copies,
    stage_extremes_with, StageLayers,
};
use crate::parallelism::{Framework, Offload, Optimizer, Remat, TrainConfig};
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, DType};

/// What one device of a plan holds, as the memory model needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryQuery {
    /// Accounting conventions.
    pub framework: Framework,
    /// Tensor-parallel degree.
    pub tp: u64,
    /// Pipeline stages.
    pub pp: u64,
    /// Expert-parallel degree.
    pub ep: u64,
    /// Expert tensor-parallel degree (= tp unless experts have their own).
    pub etp: u64,
    /// Megatron sequence parallelism.
    pub sp: bool,
    /// Ranks that fully shard parameters, gradients and optimizer state.
    pub shard: u64,
    /// Replicas of each shard (the ZeRO stage applies across them).
    pub repl: u64,
    /// ZeRO stage across the replicas.
    pub zero: u8,
    /// Tokens of one micro-batch on one device (after the cp split).
    pub tokens_mb: f64,
    /// Micro-batches whose activations are alive at once on the first stage.
    pub in_flight: f64,
    /// Micro-batches alive on the second stage (the busiest one when the
    /// first gives a layer to the embedding).
    pub in_flight_second: f64,
    /// Local sequence length (T/cp): the unfused attention's score term.
    pub seq_local: u64,
    /// Checkpoint policy.
    pub remat: Remat,
    /// k [B, D] checkpoints per layer (book accounting), overriding `remat`'s count.
    pub checkpoints_per_layer: Option<u64>,
    /// Parameter dtype.
    pub param_dtype: DType,
    /// Gradient dtype (book accounting).
    pub grad_dtype: DType,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Optimizer-state dtype.
    pub optimizer_dtype: DType,
    /// fp32 master copy (book accounting; frameworks always keep one for
    /// 16-bit parameters).
    pub master_weights: bool,
    /// Activation dtype.
    pub activation_dtype: DType,
    /// Parts kept in host memory ([`offload`]).
    pub offload: Offload,
    /// Layers on the first / last stage as stated (unset: the framework's split).
    pub stage_layers: StageLayers,
    /// Copies of the stage's parameters (and their gradients and optimizer
    /// state) a rank holds: 2 under DualPipe
    /// ([`crate::parallelism::pipeline::parameter_copies`]), else 1.
    pub param_copies: f64,
}

/// (shard, replicas) for `dp_ranks` data ranks (dp·fsdp), `cp`, `fsdp` and
/// the effective ZeRO stage: the same rule as [`RunSpec::shard_groups`].
fn shard_groups(dp_ranks: u64, cp: u64, fsdp: u64, zero: u8) -> (u64, u64) {
    let dpc = dp_ranks.max(1).saturating_mul(cp.max(1));
    let f = fsdp.max(1);
    if zero >= 3 {
        (dpc, 1)
    } else if f > 1 && dpc % f == 0 {
        (f, dpc / f)
    } else {
        (1, dpc)
    }
}

impl MemoryQuery {
    /// From a training configuration: tokens per micro-batch
    /// `B/(dp·fsdp·cp·m)` exactly (the book's idealization, fractional when
    /// the batch does not split), fsdp alone = ZeRO-3.
    pub fn from_config(cfg: &TrainConfig) -> MemoryQuery {
        let d = cfg.degrees.at_least_one();
        let m = cfg.microbatches.max(1);
        let zero = if d.fsdp > 1 && (d.dp == 1 || cfg.zero >= 3) {
            3
        } else {
            cfg.zero.min(3)
        };
        let (shard, repl) = shard_groups(d.data(), d.cp, d.fsdp, zero);
        MemoryQuery {
            framework: cfg.framework,
            tp: d.tp,
            pp: d.pp,
            ep: d.ep,
            etp: d.expert_tp().max(1),
            sp: cfg.sequence_parallel && d.tp > 1,
            shard,
            repl,
            zero,
            tokens_mb: cfg.tokens_per_device() / m as f64,
            in_flight: microbatches_in_flight(d.pp, m, cfg.virtual_stages, cfg.schedule),
            in_flight_second: microbatches_in_flight_at(
                1,
                d.pp,
                m,
                cfg.virtual_stages,
                cfg.schedule,
            ),
            seq_local: cfg.seq_len / d.cp,
            remat: cfg.remat,
            checkpoints_per_layer: cfg.checkpoints_per_layer,
            param_dtype: cfg.param_dtype,
            grad_dtype: cfg.grad_dtype,
            optimizer: cfg.optimizer,
            optimizer_dtype: cfg.optimizer_dtype,
            master_weights: cfg.master_weights,
            activation_dtype: cfg.activation_dtype,
            offload: cfg.offload,
            stage_layers: cfg.stage_layers,
            param_copies: parameter_copies(cfg.schedule, d.pp) as f64,
        }
    }
}

/// The calibrated parts of a framework's memory (from an efficiency
/// profile); the book's accounting uses [`MemoryCalibration::BOOK`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MemoryCalibration {
    /// Multiplier on the saved-activation estimate.
    pub activation_scale: f64,
    /// Runtime reserve counted in the peak (allocator caching, workspaces), bytes.
    pub reserve_bytes: f64,
    /// fp32 `[tokens, V/tp]` buffers alive at the loss.
    pub logits_fp32_copies: f64,
    /// Extra gradient bytes per parameter nanotron keeps besides its fp32 buffer.
    pub grad_extra_bytes: f64,
    /// Fraction of HBM a run may use.
    pub usable_hbm_fraction: f64,
}

impl MemoryCalibration {
    /// No calibration: the book's accounting on all of HBM.
    pub const BOOK: MemoryCalibration = MemoryCalibration {
        activation_scale: 1.0,
        reserve_bytes: 0.0,
        logits_fp32_copies: 0.0,
        grad_extra_bytes: 0.0,
        usable_hbm_fraction: 1.0,
    };
}

/// Memory of the busiest device, by part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MemoryBreakdown {
    /// Parameters (plus gathered ZeRO-3 layers under a framework).
    pub params_bytes: Bytes,
    /// Gradients (the fp32 accumulation buffer under a framework).
    pub grads_bytes: Bytes,
    /// Optimizer state (moments, master copy).
    pub optimizer_bytes: Bytes,
    /// Saved activations of the micro-batches in flight.
    pub activations_bytes: Bytes,
    /// fp32 logits / loss buffers (frameworks).
    pub logits_bytes: Bytes,
    /// Runtime reserve (frameworks).
    pub reserve_bytes: Bytes,
    /// Sum.
    pub total_bytes: Bytes,
    /// Parameters + optimizer state (the book's "10 bytes per parameter"
    /// figure: gradients and activations excluded).
    pub params_plus_optimizer_bytes: Bytes,
    /// Parameters one device holds (after tp/pp/ep and sharding).
    pub params_per_device: f64,
    /// What offloading moved to host memory (the parts above are what stays
    /// in HBM); absent when nothing is offloaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<offload::Offloaded>,
}

/// Bytes per parameter of (weights, gradients, optimizer state) under the
/// framework's conventions.
pub fn state_bytes_per_param(q: &MemoryQuery, a: &Arch, cal: &MemoryCalibration) -> [f64; 3] {
    let pb = q.param_dtype.bytes_per_element();
    let half = pb < 4.0;
    let moments = q.optimizer.moments(a.d_model, a.d_ff) * q.optimizer_dtype.bytes_per_element();
    let master = |on: bool| if on && half { 4.0 } else { 0.0 };
    match q.framework {
        Framework::Book => [
            pb,
            q.grad_dtype.bytes_per_element(),
            moments + master(q.master_weights),
        ],
        // fp32 `main_grad` buffer, fp32 master weights
        Framework::Megatron | Framework::Megatron2022 | Framework::Megatron2021 => {
            [pb, 4.0, moments + master(true)]
        }
        // 16-bit weights and gradients, fp32 master + moments (ZeRO's K = 12)
        Framework::Deepspeed => [pb, pb, moments + master(true)],
        // fp32 accumulation buffer plus the bf16 `param.grad`
        Framework::Nanotron => [pb, 4.0 + cal.grad_extra_bytes, moments + master(true)],
        // fp32 weights and gradients, fp32 moments, no master copy (FSDP2:
        // the sharded fp32 parameters are the optimizer's)
        Framework::Maxtext | Framework::Torchtitan => {
            [4.0, 4.0, q.optimizer.moments(a.d_model, a.d_ff) * 4.0]
        }
    }
}

/// How a framework splits the layers over the pipeline stages, as
/// [`per_device`] reads it to find the busiest stage: it depends on the
/// model, pp, the framework and the stated stage counts only — the same for
/// every plan of one degree tuple, so the planner works it out once per
/// tuple ([`per_device_staged`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageSplit {
    /// Most layers on a stage without the LM head, and layers on the one
    /// with it ([`stage_extremes_with`]).
    extremes: (u64, u64),
    /// Layers on the first stage.
    first: u64,
}

impl StageSplit {
    /// The split of `a` over `pp` stages under `framework` with the stated
    /// counts `given` (pp = 1: the one stage).
    pub fn of(a: &Arch, pp: u64, framework: Framework, given: StageLayers) -> StageSplit {
        if pp <= 1 {
            return StageSplit {
                extremes: (0, a.n_layers),
                first: a.n_layers,
            };
        }
        let extremes = stage_extremes_with(a, pp, framework, given);
        // nanotron's cost-balanced split puts the most layers on the first stage
        let first = match framework {
            _ if given.is_set() => first_stage_layers_with(a, pp, framework, given),
            Framework::Megatron | Framework::Megatron2022 | Framework::Megatron2021 => {
                first_stage_layers_with(a, pp, framework, given)
            }
            _ => extremes.0,
        };
        StageSplit { extremes, first }
    }

    /// The split a query's plan has.
    pub fn of_query(a: &Arch, q: &MemoryQuery) -> StageSplit {
        StageSplit::of(a, q.pp, q.framework, q.stage_layers)
    }
}

/// Memory per device of `a` (counts `pc`) under the query's plan.
pub fn per_device<T: Tracer>(
    a: &Arch,
    pc: &ParamCounts,
    q: &MemoryQuery,
    cal: &MemoryCalibration,
    tr: &mut T,
) -> MemoryBreakdown {
    per_device_staged(a, pc, q, cal, &StageSplit::of_query(a, q), tr)
}

/// [`per_device`] with the query's stage split worked out already
/// (`stages` = [`StageSplit::of_query`] of the same model and query).
pub fn per_device_staged<T: Tracer>(
    a: &Arch,
    pc: &ParamCounts,
    q: &MemoryQuery,
    cal: &MemoryCalibration,
    stages: &StageSplit,
    tr: &mut T,
) -> MemoryBreakdown {
    debug_assert_eq!(*stages, StageSplit::of_query(a, q));
    let mut m = match q.framework {
        Framework::Book => book(a, pc, q, cal),
        _ => framework(a, pc, q, cal, stages),
    };
    record_parts(q, &m, tr);
    if q.framework.is_framework() {
        record_framework_buffers(a, pc, q, cal, &m, tr);
    }
    if let Some(off) = offload::apply(a, q, &mut m) {
        m.offload = Some(off);
        tr.record(|| {
            Step::new(
                "train.memory.offload",
                "Moved to host memory",
                "host = [opt + 4·P_opt] + [W] + [A]; HBM keeps 2·W/L_stage and 2·A/(n_flight·L_stage)",
            )
            .bind("P_opt", off.optimizer_params, "params")
            .bind("W", off.weights_bytes.get(), "B")
            .bind("HBM freed", off.hbm_freed_bytes.get(), "B")
            .result(off.host_bytes.get(), "B")
            .source("ZeRO-Offload (Ren et al. 2021); ZeRO-Infinity (Rajbhandari et al. 2021)")
        });
    }
    tr.record(|| {
        Step::new(
            "train.memory.total",
            "Memory per device",
            "params + grads + optimizer + activations + logits + reserve",
        )
        .bind("params", m.params_bytes.get(), "B")
        .bind("grads", m.grads_bytes.get(), "B")
        .bind("optimizer", m.optimizer_bytes.get(), "B")
        .bind("activations", m.activations_bytes.get(), "B")
        .bind("logits", m.logits_bytes.get(), "B")
        .bind("reserve", m.reserve_bytes.get(), "B")
        .result(m.total_bytes.get(), "B")
        .source(match q.framework {
            Framework::Book => "How To Scale Your Model ch4/ch5; ZeRO (Rajbhandari et al. 2020)",
            _ => "docs/fidelity.md (framework memory); Korthikanti et al. 2022",
        })
    });
    m
}

/// The derivation of a framework's own buffers: the unsharded layers of
/// ZeRO-3/FSDP (counted in `params`) and the runtime reserve.
fn record_framework_buffers<T: Tracer>(
    a: &Arch,
    pc: &ParamCounts,
    q: &MemoryQuery,
    cal: &MemoryCalibration,
    m: &MemoryBreakdown,
    tr: &mut T,
) {
    tr.record(|| {
        let bytes = state_bytes_per_param(q, a, cal);
        let per_param = if q.shard > 1 {
            gathered_bytes_per_layer_param(q.framework, bytes[0])
        } else {
            0.0
        };
        Step::new(
            "train.memory.framework_buffers",
            "Framework buffers per device",
            "gathered = b_gather·P_layer (ZeRO-3/FSDP: 2·bytes_p; FSDP2: 2·2 + (2 + 4)); reserve = NCCL + allocator slack (+ ZeRO bucket)",
        )
        .bind("b_gather", per_param, "B/param")
        .bind("P_layer", layer_params_per_device(a, pc, q), "params")
        .bind("gathered", gathered_bytes(a, pc, q, cal), "B")
        .bind("reserve", m.reserve_bytes.get(), "B")
        .result(gathered_bytes(a, pc, q, cal) + m.reserve_bytes.get(), "B")
        .source("docs/training.md (framework buffers); PyTorch FSDP2 MixedPrecisionPolicy; DeepSpeed zero/config.py; NVIDIA/nccl#1685")
    });
}

/// The derivation of the weight and activation terms.
fn record_parts<T: Tracer>(q: &MemoryQuery, m: &MemoryBreakdown, tr: &mut T) {
    tr.record(|| {
        Step::new(
            "train.memory.weights",
            "Parameters, gradients, optimizer per device",
            "P_dev·(bytes_p/Z_p + bytes_g/Z_g + bytes_opt/Z_o); Z = shard group × replicas by ZeRO stage",
        )
        .bind("P_dev", m.params_per_device, "params")
        .bind("shard", q.shard as f64, "")
        .bind("replicas", q.repl as f64, "")
        .bind("zero", q.zero as f64, "")
        .bind("params", m.params_bytes.get(), "B")
        .bind("grads", m.grads_bytes.get(), "B")
        .bind("optimizer", m.optimizer_bytes.get(), "B")
        .result(
            m.params_bytes.get() + m.grads_bytes.get() + m.optimizer_bytes.get(),
            "B",
        )
        .source("How To Scale Your Model ch5; ZeRO (Rajbhandari et al. 2020)")
    });
    tr.record(|| {
        Step::new(
            "train.memory.activations",
            "Saved activations per device",
            "B_mb·n_flight·(L/pp)·e·bytes_a",
        )
        .bind("B_mb", q.tokens_mb, "tokens")
        .bind("n_flight", q.in_flight, "micro-batches")
        .bind("bytes_a", q.activation_dtype.bytes_per_element(), "B")
        .result(m.activations_bytes.get(), "B")
        .source("How To Scale Your Model ch4/ch5; Korthikanti et al. 2022 (selective)")
    });
}

/// Sharded sizes of one stage's state: (weights, grads, optimizer) bytes.
fn sharded(q: &MemoryQuery, params: f64, bytes: [f64; 3]) -> [f64; 3] {
    let params = params * q.param_copies;
    let (s, r) = (q.shard.max(1) as f64, q.repl.max(1) as f64);
    let by = |stage: u8| if q.zero >= stage { r } else { 1.0 };
    [
        params * bytes[0] / (s * by(3)),
        params * bytes[1] / (s * by(2)),
        params * bytes[2] / (s * by(1)),
    ]
}

fn breakdown(
    state: [f64; 3],
    act: f64,
    logits: f64,
    reserve: f64,
    params_dev: f64,
) -> MemoryBreakdown {
    let total = state[0] + state[1] + state[2] + act + logits + reserve;
    MemoryBreakdown {
        params_bytes: Bytes::new(state[0]),
        grads_bytes: Bytes::new(state[1]),
        optimizer_bytes: Bytes::new(state[2]),
        activations_bytes: Bytes::new(act),
        logits_bytes: Bytes::new(logits),
        reserve_bytes: Bytes::new(reserve),
        total_bytes: Bytes::new(total),
        params_plus_optimizer_bytes: Bytes::new(state[0] + state[2]),
        params_per_device: params_dev,
        offload: None,
    }
}

/// The book's accounting (module docs).
fn book(a: &Arch, pc: &ParamCounts, q: &MemoryQuery, cal: &MemoryCalibration) -> MemoryBreakdown {
    let p_exp = pc.experts_routed as f64;
    let p_dense = pc.total as f64 - p_exp;
    let mp = (q.tp * q.pp) as f64;
    // routed experts split over etp·pp·ep (etp = tp: the dense split)
    let emp = (q.etp * q.pp) as f64;
    let p_shard = p_dense / mp + p_exp / (emp * q.ep as f64);
    let state = sharded(q, p_shard, state_bytes_per_param(q, a, cal));
    let e = match q.checkpoints_per_layer {
        Some(k) => checkpoint_elems_per_token_layer(a, k, q.tp, q.sp),
        None => book_elems_per_token_layer(a, q.remat, q.tp, q.sp),
    };
    let layers = a.n_layers as f64 / q.pp as f64;
    let act = q.tokens_mb * q.in_flight * layers * e * q.activation_dtype.bytes_per_element();
    let params_dev =
        q.param_copies * p_shard / (q.shard as f64 * if q.zero >= 3 { q.repl as f64 } else { 1.0 });
    breakdown(state, act, 0.0, 0.0, params_dev)
}

/// The framework-specific terms of [`framework`]: (activation bytes per
/// token per layer, multiplier on them, fp32 logits copies, runtime reserve).
/// Megatron-Core: the Transformer Engine tensor list at face value, one fp32
/// copy of the logits (`vocab_parallel_cross_entropy` upcasts them and keeps
/// the softmax for the backward), the named runtime terms of [`runtime`];
/// nanotron: the eager tensor list with the terms its profile fitted.
fn framework_terms(a: &Arch, q: &MemoryQuery, cal: &MemoryCalibration) -> (f64, f64, f64, f64) {
    let ab = q.activation_dtype.bytes_per_element() / 2.0;
    match q.framework {
        Framework::Megatron | Framework::Megatron2022 | Framework::Megatron2021 => {
            let unfused = unfused_attention(q.framework).then_some(q.seq_local);
            (
                megatron_bytes_per_token_layer(a, q.tp, q.sp, q.remat, unfused) * ab,
                1.0,
                1.0,
                runtime::megatron_reserve_bytes(q.ep),
            )
        }
        // Megatron-DeepSpeed's GPT layers (the unfused attention core unless
        // `--use-flash-attn`), one fp32 copy of the logits at the loss, the
        // NCCL buffers, allocator slack and ZeRO's gradient bucket
        Framework::Deepspeed => (
            megatron_bytes_per_token_layer(a, q.tp, q.sp, q.remat, Some(q.seq_local)) * ab,
            1.0,
            1.0,
            runtime::deepspeed_reserve_bytes(q.zero),
        ),
        // torchtitan's blocks through SDPA (no scores kept), `cross_entropy`
        // on the logits upcast to fp32, NCCL buffers and allocator slack
        Framework::Torchtitan => (
            megatron_bytes_per_token_layer(a, q.tp, q.sp, q.remat, None) * ab,
            1.0,
            1.0,
            runtime::torchtitan_reserve_bytes(),
        ),
        // XLA saves the same GEMM inputs and attention tensors (splash
        // attention keeps no scores); the loss upcasts the logits to fp32;
        // buffers are planned statically (no allocator, no NCCL)
        Framework::Maxtext => (
            megatron_bytes_per_token_layer(a, q.tp, q.sp, q.remat, None) * ab,
            1.0,
            1.0,
            0.0,
        ),
        _ => (
            framework_bytes_per_token_layer(a, q.tp, q.sp, q.remat) * ab,
            cal.activation_scale,
            cal.logits_fp32_copies,
            cal.reserve_bytes,
        ),
    }
}

/// Whether `framework` runs the unfused attention core (the `[b, a, s, s]`
/// scores materialized): Megatron-LM before FlashAttention (2021, 2022) and
/// Megatron-DeepSpeed without `--use-flash-attn`.
pub fn unfused_attention(framework: Framework) -> bool {
    matches!(
        framework,
        Framework::Megatron2022 | Framework::Megatron2021 | Framework::Deepspeed
    )
}

/// Bytes per parameter of one layer that fully sharded data parallelism
/// keeps unsharded, beside the shards. FSDP2 (torchtitan): the bf16 block in
/// use and the one prefetched (`2·2`), plus the block whose gradients are
/// being reduce-scattered: its bf16 gradient and their fp32 copy
/// (`mixed_precision_reduce = "float32"`, `2 + 4`) — 10 bytes. ZeRO-3
/// elsewhere: the layer in use and the one prefetched, in the weights' dtype
/// (`2·bytes_p`).
pub fn gathered_bytes_per_layer_param(framework: Framework, param_bytes: f64) -> f64 {
    match framework {
        Framework::Torchtitan => 2.0 * 2.0 + (2.0 + 4.0),
        _ => 2.0 * param_bytes,
    }
}

/// One layer's parameters on a device: routed experts split over ep (and
/// over etp instead of tp when experts have their own TP degree), the rest
/// over tp (the final norm spread over the layers).
fn layer_params_per_device(a: &Arch, pc: &ParamCounts, q: &MemoryQuery) -> f64 {
    let (l, tpf) = (a.n_layers.max(1) as f64, q.tp as f64);
    let exp = pc.experts_routed as f64;
    let rest = (pc.total - pc.embedding) as f64 - exp;
    if q.etp == q.tp {
        (rest + exp / q.ep as f64) / l / tpf
    } else {
        rest / l / tpf + exp / l / (q.etp as f64 * q.ep as f64)
    }
}

/// The unsharded layers fully sharded data parallelism keeps beside the
/// shards, bytes: [`gathered_bytes_per_layer_param`] × one layer's
/// parameters on the device; none without a shard group.
fn gathered_bytes(a: &Arch, pc: &ParamCounts, q: &MemoryQuery, cal: &MemoryCalibration) -> f64 {
    if q.shard <= 1 || q.framework == Framework::Book {
        return 0.0;
    }
    let bytes = state_bytes_per_param(q, a, cal);
    gathered_of(q, bytes[0], layer_params_per_device(a, pc, q))
}

/// [`gathered_bytes`] from the weights' bytes per parameter and one
/// layer's parameters on the device, when [`framework`] has them already.
fn gathered_of(q: &MemoryQuery, param_bytes: f64, layer_params: f64) -> f64 {
    if q.shard <= 1 || q.framework == Framework::Book {
        return 0.0;
    }
    gathered_bytes_per_layer_param(q.framework, param_bytes) * layer_params
}

/// A framework's busiest stage (module docs): the first (embedding, most
/// micro-batches in flight), the second when the first gave a layer to the
/// embedding (Megatron's uneven split), or the one with the LM head.
fn framework(
    a: &Arch,
    pc: &ParamCounts,
    q: &MemoryQuery,
    cal: &MemoryCalibration,
    stages: &StageSplit,
) -> MemoryBreakdown {
    let tpf = q.tp as f64;
    let l = a.n_layers.max(1) as f64;
    let (d, v) = (a.d_model as f64, a.vocab as f64);
    let emb = v * d / tpf;
    let layer = layer_params_per_device(a, pc, q);
    let bytes = state_bytes_per_param(q, a, cal);
    let ab = q.activation_dtype.bytes_per_element() / 2.0;
    let (act_tl, act_scale, logits_copies, reserve) = framework_terms(a, q, cal);
    let tok = q.tokens_mb;
    let gathered = gathered_of(q, bytes[0], layer);
    let stage = |layers: f64, params: f64, in_flight: f64, head: bool| -> MemoryBreakdown {
        let mut state = sharded(q, params, bytes);
        state[0] += gathered;
        let act = act_scale * in_flight * tok * layers * act_tl
            + 2.0 * ab * tok * d / if q.sp { tpf } else { 1.0 };
        let logits = if head {
            tok * v / tpf * (2.0 + 4.0 * logits_copies)
        } else {
            0.0
        };
        let params_dev = q.param_copies * params
            / (q.shard as f64 * if q.zero >= 3 { q.repl as f64 } else { 1.0 });
        breakdown(state, act, logits, reserve, params_dev)
    };
    if q.pp <= 1 {
        let tied = if a.tied_embeddings { 1.0 } else { 2.0 };
        return stage(l, l * layer + tied * emb, q.in_flight, true);
    }
    let (plain, with_head) = stages.extremes;
    let first = stages.first as f64;
    let (plain, with_head) = (plain as f64, with_head as f64);
    let mut best = stage(first, first * layer + emb, q.in_flight, false);
    if plain > first && q.pp > 2 {
        let second = stage(plain, plain * layer, q.in_flight_second, false);
        if second.total_bytes > best.total_bytes {
            best = second;
        }
    }
    let last = stage(with_head, with_head * layer + emb, 1.0, true);
    if best.total_bytes >= last.total_bytes {
        best
    } else {
        last
    }
}
