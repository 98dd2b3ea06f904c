//! Pipeline-parallel serving: the model's L layers split over P stages of
//! Y·Z chips each.
//!
//! * Layers per stage as vLLM splits them (`get_pp_indices` in
//!   `vllm/distributed/utils.py`): ⌊L/P⌋ each, the remainder one layer
//!   more on the stages just before the last, counting backwards (the last
//!   stage holds the final norm and the LM head, the first the embedding).
//! * Each stage holds its layers' weights (the first the input embedding,
//!   the last the LM head, a copy of it when tied) and its layers' KV, so
//!   the KV capacity grows with P.
//! * A request's prefill and each decode step traverse the P stages in
//!   sequence with an activation send between neighbours (p2p over NVLink
//!   inside a node, the scale-out network across nodes); the engine keeps up
//!   to P micro-batches in flight (vLLM: one batch per stage, the virtual
//!   engines of `pipeline_parallel_size`), so a replica's throughput is up to
//!   P× that of one stage-group running the whole model.

use crate::collectives::{self, AxisPlacement, Collective};
use crate::error::{Error, Result};
use crate::model::params::ParamCounts;
use crate::model::ModelSpec;
use crate::trace::NoTrace;
use crate::units::{Bytes, DType, Seconds};

/// Layers per stage: vLLM's default split of `layers` over `pp` stages.
pub fn stage_layers(layers: u64, pp: u64) -> Result<Vec<u64>> {
    if pp == 0 {
        return Err(Error::Invalid(
            "--pp must be at least 1 (1 = no pipeline)".into(),
        ));
    }
    if pp > layers {
        return Err(Error::Invalid(format!(
            "--pp {pp} exceeds the L = {layers} layers: every pipeline stage needs at least one layer"
        )));
    }
    let base = layers / pp;
    let mut v = vec![base; pp as usize];
    let rem = (layers % pp) as usize;
    // vLLM: partitions[-i] += 1 for i in 2..rem + 2
    for i in 2..rem + 2 {
        let k = v.len() - i;
        v[k] += 1;
    }
    Ok(v)
}

/// One pipeline stage of a replica.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stage {
    /// L_s: layers.
    pub(crate) layers: u64,
    /// L_s/L: the share of the per-layer work (KV, attention, collectives).
    pub(crate) frac: f64,
    /// Weight bytes per chip of the stage.
    pub(crate) w_dev: Bytes,
    /// Of which routed experts.
    pub(crate) routed_dev: Bytes,
    /// Parameters a token multiplies through on this stage (FLOPs/2).
    pub(crate) matmul: f64,
    /// Weight bytes of the whole stage (all its chips' shards, once).
    pub(crate) weight_bytes: f64,
    /// The first stage (runs the engine's step: scheduling, inputs).
    pub(crate) first: bool,
    /// The last stage (LM head and sampling).
    pub(crate) last: bool,
}

/// The stages of a replica and the send between them.
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    pub(crate) stages: Vec<Stage>,
    /// The link between neighbouring stages.
    pub(crate) axis: AxisPlacement,
    /// Fixed latency of one send under the engine (its small-message α).
    pub(crate) alpha: Seconds,
    /// Activation tensors of B·D each sent per hop (the engines send the
    /// hidden states and the residual stream: 2; the book: 1).
    pub(crate) tensors: f64,
    /// Activation bytes per element.
    pub(crate) ab: f64,
    /// D.
    pub(crate) d: f64,
}

impl Pipeline {
    /// P: stages.
    pub(crate) fn pp(&self) -> u64 {
        self.stages.len() as u64
    }

    /// One send of `tokens` tokens' activations to the next stage:
    /// `α + p2p(n_t·tokens·D·bytes_a)`.
    pub(crate) fn hop(&self, tokens: f64) -> Seconds {
        let v = Bytes::new(self.tensors * tokens * self.d * self.ab);
        self.alpha + collectives::cost(Collective::PointToPoint, v, &self.axis, &mut NoTrace).time
    }
}

/// Parameters of each stage (layers, the embedding on the first, the LM
/// head and final norm on the last), and of its routed experts.
pub(crate) fn stage_params(m: &ModelSpec, p: &ParamCounts, layers: &[u64]) -> Vec<(f64, f64, f64)> {
    let a = &m.arch;
    let (l_dense, l_moe) = (a.dense_layers(), a.moe_layers());
    let vd = (a.vocab * a.d_model) as f64;
    let out_head = if a.tied_embeddings { 0.0 } else { vd };
    // input embedding (and learned positions) on the first stage
    let embed_in = p.embedding as f64 - out_head;
    let in_layers = (l_dense * p.per_dense_layer + l_moe * p.per_moe_layer) as f64;
    // what is neither layers nor embedding: the final norm (last stage)
    let rest = p.total as f64 - p.embedding as f64 - in_layers;
    let routed_layer = if l_moe > 0 {
        p.experts_routed as f64 / l_moe as f64
    } else {
        0.0
    };
    // matmul parameters per layer (attention + active MLP + router), the LM head apart
    let mm_layers = p.matmul_active as f64 - vd;
    let n = a.n_layers.max(1) as f64;
    let mut start = 0u64;
    let last = layers.len().saturating_sub(1);
    layers
        .iter()
        .enumerate()
        .map(|(i, &ls)| {
            // the first `l_dense` layers are dense, the rest MoE
            let dense = l_dense.saturating_sub(start).min(ls);
            let moe = ls - dense;
            start += ls;
            let mut total = (dense * p.per_dense_layer + moe * p.per_moe_layer) as f64;
            let mut mm = mm_layers * ls as f64 / n;
            if i == 0 {
                total += embed_in;
            }
            if i == last {
                total += vd + rest;
                mm += vd;
            }
            (total, routed_layer * moe as f64, mm)
        })
        .collect()
}

/// The stages of a replica of `tp`·`ep` chips per stage.
pub(crate) fn stages(
    m: &ModelSpec,
    p: &ParamCounts,
    layers: &[u64],
    wdt: DType,
    (tp, ep): (u64, u64),
) -> Vec<Stage> {
    let n = m.arch.n_layers.max(1) as f64;
    let bw = wdt.bytes_per_element();
    let last = layers.len().saturating_sub(1);
    stage_params(m, p, layers)
        .into_iter()
        .zip(layers)
        .enumerate()
        .map(|(i, ((total, routed, mm), &ls))| {
            let dense = total - routed;
            Stage {
                layers: ls,
                frac: ls as f64 / n,
                w_dev: Bytes::new((dense / tp as f64 + routed / (tp * ep) as f64) * bw),
                routed_dev: Bytes::new(routed / (tp * ep) as f64 * bw),
                matmul: mm,
                weight_bytes: total * bw,
                first: i == 0,
                last: i == last,
            }
        })
        .collect()
}
