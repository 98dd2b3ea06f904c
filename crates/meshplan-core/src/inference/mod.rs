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

pub mod latency;
pub mod memory;
mod render;
pub mod roofline;
pub mod scenario;
pub mod sharding;

use serde::Serialize;

use crate::collectives::{self, AxisPlacement, Collective};
use crate::error::{Error, Result};
use crate::hardware::{fmt_shape, Chip, ChipKind};
use crate::model::{kv, params, ModelSpec};
use crate::trace::{NoTrace, Step, Tracer};
use crate::units::{Bytes, BytesPerSec, DType, Seconds};

pub use memory::Placement;
pub use roofline::Bound;

/// Serving layout of the weight matmuls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sharding {
    /// 1D (Megatron) tensor parallelism over `tp` chips.
    #[default]
    #[serde(rename = "1d")]
    OneD,
    /// 2D weight-stationary (ESTI): D over X, F over Y·Z.
    #[serde(rename = "2d-ws")]
    TwoDWs,
}

impl std::fmt::Display for Sharding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sharding::OneD => "1d",
            Sharding::TwoDWs => "2d-ws",
        })
    }
}

impl Sharding {
    /// Parse "1d" | "2d-ws".
    pub fn parse(s: &str) -> Result<Sharding> {
        match s.trim().to_ascii_lowercase().as_str() {
            "1d" | "tp" | "megatron" => Ok(Sharding::OneD),
            "2d-ws" | "2d" | "2dws" | "esti" => Ok(Sharding::TwoDWs),
            _ => Err(Error::BadValue {
                what: "sharding".into(),
                input: s.into(),
                expected: "\"1d\" or \"2d-ws\"".into(),
            }),
        }
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
    /// 1D or 2D weight-stationary.
    pub sharding: Sharding,
    /// Prefill MFU (fraction of peak; default 1, the roofline).
    pub mfu: f64,
}

impl Default for InferQuery {
    fn default() -> Self {
        InferQuery {
            weights_dtype: DType::Bf16,
            kv_dtype: DType::Bf16,
            compute_dtype: DType::Bf16,
            batch: 1,
            prompt_len: 2048,
            context: 4096,
            gen_len: 512,
            mesh: vec![1],
            tp: None,
            ep: None,
            sharding: Sharding::OneD,
            mfu: 1.0,
        }
    }
}

/// Check a mesh against the chip: a TPU slice must be an offered shape (in
/// either orientation); a GPU "mesh" is a chip count.
pub fn check_mesh(chip: &Chip, mesh: &[u64]) -> Result<()> {
    if mesh.is_empty() || mesh.contains(&0) {
        return Err(Error::Invalid("the mesh needs at least one chip".into()));
    }
    if let Some(ici) = &chip.ici {
        if ici.slice_shapes.is_empty() {
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
    /// Model copies in the slice.
    pub replicas: u64,
    /// Chips per replica (Y·Z); step times use this N.
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
}

fn ici_bandwidth(chip: &Chip, mesh: &[u64], tp: u64) -> (BytesPerSec, u64, bool) {
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
fn axis_placement(chip: &Chip, mesh: &[u64], inner: u64, size: u64) -> AxisPlacement {
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

/// Evaluate one configuration.
pub fn evaluate<T: Tracer>(
    m: &ModelSpec,
    chip: &Chip,
    q: &InferQuery,
    tr: &mut T,
) -> Result<InferReport> {
    let a = &m.arch;
    if q.batch == 0 || q.context == 0 || q.prompt_len == 0 || q.gen_len == 0 {
        return Err(Error::Invalid(
            "batch, context, prompt length and generation length must be at least 1".into(),
        ));
    }
    if q.tp == Some(0) || q.ep == Some(0) {
        return Err(Error::Invalid(
            "--tp and --ep must be at least 1 (1 = not used)".into(),
        ));
    }
    if !(q.mfu > 0.0 && q.mfu <= 1.0) {
        return Err(Error::Invalid(format!("mfu = {} must be in (0, 1]", q.mfu)));
    }
    let chips = q
        .mesh
        .iter()
        .try_fold(1u64, |n, &x| n.checked_mul(x))
        .ok_or_else(|| {
            Error::Invalid(format!(
                "the mesh {} has more than {} chips",
                fmt_shape(&q.mesh),
                u64::MAX
            ))
        })?;
    if chips == 0 {
        return Err(Error::Invalid("the mesh needs at least one chip".into()));
    }
    let ep = q.ep.unwrap_or(1).max(1);
    let e_count = a.moe.as_ref().map(|x| x.n_experts);
    if ep > 1 {
        match e_count {
            None => {
                return Err(Error::Invalid(format!(
                    "--ep {ep}: {} is a dense model (no experts to shard)",
                    m.name
                )))
            }
            Some(e) if e % ep != 0 => {
                return Err(Error::Invalid(format!(
                    "--ep {ep} does not divide the E = {e} experts"
                )))
            }
            _ => {}
        }
    }
    if chips % ep != 0 {
        return Err(Error::Invalid(format!(
            "--ep {ep} does not divide the {chips} chips"
        )));
    }
    let tp = q.tp.unwrap_or(chips / ep).max(1);
    // Y·Z: chips per replica (a product above u64::MAX cannot divide the chips)
    let nr = match tp.checked_mul(ep) {
        Some(nr) if chips % nr == 0 => nr,
        _ => {
            return Err(Error::Invalid(format!(
                "TP × EP = {tp} × {ep} = {} does not divide the {chips} chips",
                u128::from(tp) * u128::from(ep)
            )));
        }
    };
    if a.n_heads % tp != 0 {
        return Err(Error::Invalid(format!(
            "TP = {tp} does not divide the N = {} query heads",
            a.n_heads
        )));
    }
    let f_tp = if a.dense_layers() > 0 {
        a.d_ff
    } else {
        a.d_ff_expert()
    };
    if f_tp % tp != 0 || (a.moe.is_some() && a.d_ff_expert() % tp != 0) {
        return Err(Error::Invalid(format!(
            "TP = {tp} does not divide d_ff (F = {f_tp})"
        )));
    }
    let mut warnings = Vec::new();
    if m.max_seq_len > 0 && q.context > m.max_seq_len {
        warnings.push(format!(
            "context {} exceeds {}'s maximum of {} tokens",
            q.context, m.name, m.max_seq_len
        ));
    }
    if q.prompt_len > q.context {
        warnings.push(format!(
            "prompt_len {} exceeds context {}",
            q.prompt_len, q.context
        ));
    }
    let replicas = chips / nr;
    let pl = Placement {
        chips,
        tp,
        ep,
        replicas,
    };

    let p = params::count(a, tr);
    let wdt = q.weights_dtype;
    let weights = memory::weight_bytes(&p, wdt, tr);
    let w_dev = memory::weight_bytes_per_device(&p, wdt, &pl, tr);
    let kvt = kv::bytes_per_token(a, q.kv_dtype, tr);
    let kvs = kv::bytes_per_sequence(a, q.context, q.kv_dtype, tr);
    let hbm = chip.hbm_capacity;
    let mb = memory::max_batch(nr, hbm, w_dev, kvs, tr);
    let mqa = if a.mla.is_none() && a.n_kv_heads > 1 {
        let mut a1 = a.clone();
        a1.n_kv_heads = 1;
        let kvs1 = kv::bytes_per_sequence(&a1, q.context, q.kv_dtype, &mut crate::trace::NoTrace);
        Some(memory::max_batch(nr, hbm, w_dev, kvs1, &mut crate::trace::NoTrace).max_batch)
    } else {
        None
    };
    let fits = mb.max_batch >= 1;
    let batch_fits = memory::fits(nr, hbm, w_dev, kvs, q.batch);
    if !fits {
        warnings.push(format!(
            "does not fit even at batch 1: weights {} per chip + one {}-token sequence ({}) exceed {} chips × {}",
            w_dev, q.context, kvs, nr, hbm
        ));
    } else if !batch_fits {
        warnings.push(format!(
            "batch {} does not fit; the largest batch at context {} is {}",
            q.batch, q.context, mb.max_batch
        ));
    }
    let kv_dev = memory::kv_bytes_per_device(q.batch, kvs, nr, tr);
    let (kh, kb, ks) = memory::kv_layout(a.n_kv_heads, q.batch, nr);

    // rooflines
    let c = chip.flops(q.compute_dtype);
    let c_bf16 = chip.flops(DType::Bf16);
    let w_hbm = chip.hbm_bandwidth;
    let hw = roofline::Hw {
        chips: nr,
        replicated_chips: tp,
        c,
        w_hbm,
    };
    let moe = a.moe.as_ref().map(|x| (x.n_experts, x.top_k));
    let b_crit = roofline::b_crit(c_bf16, w_hbm, wdt.bits(), q.compute_dtype.bits(), moe, tr);
    let t_load = roofline::weight_load_time(w_dev, w_hbm, tr);
    let dec = roofline::decode_components(a, &p, q.batch, q.context, kvs, wdt, &hw, tr);
    let pre = roofline::prefill_components(a, &p, q.prompt_len.max(1), kvt, wdt, &hw, tr);

    // communication (collectives::cost on the TP and EP axes)
    let (w_ici, m_y, _wraps) = ici_bandwidth(chip, &q.mesh, tp);
    let tp_axis = axis_placement(chip, &q.mesh, 1, tp);
    let ep_axis = axis_placement(chip, &q.mesh, tp, ep);
    let w_eff = if tp > 1 {
        collectives::allgather_bandwidth(&tp_axis)
    } else {
        w_ici * m_y as f64
    };
    let ab = q.compute_dtype.bytes_per_element();
    let (d, f, l) = (a.d_model as f64, a.d_ff as f64, a.n_layers as f64);
    let k_top = a.moe.as_ref().map(|x| x.top_k).unwrap_or(1) as f64;
    let mut lat_bound_any = false;
    let mut comms_for = |tokens: f64| -> Seconds {
        let mut t = Seconds::ZERO;
        if tp > 1 {
            t += match q.sharding {
                // Megatron: AllGather in + ReduceScatter out, for attention and MLP
                Sharding::OneD => {
                    let v = Bytes::new(tokens * d * ab);
                    let ag = collectives::cost(Collective::AllGather, v, &tp_axis, &mut NoTrace);
                    let rs =
                        collectives::cost(Collective::ReduceScatter, v, &tp_axis, &mut NoTrace);
                    lat_bound_any |= ag.latency_bound;
                    (ag.time + rs.time) * 2.0
                }
                // ESTI closed form (book ch7 Q7) at the axis bandwidth
                Sharding::TwoDWs => {
                    let n = tp as f64;
                    let x = (n * d / (2.0 * f)).sqrt().clamp(1.0, n);
                    sharding::two_d_ws_comms(tokens, d, f, n, x, w_eff) * (ab / 2.0)
                }
            };
        }
        if ep > 1 {
            // dispatch + combine AllToAll of the k·B·D routed activations
            let v = Bytes::new(tokens * k_top * d * ab);
            t += collectives::cost(Collective::AllToAll, v, &ep_axis, &mut NoTrace).time * 2.0;
        }
        t * l
    };
    let t_comms_dec = comms_for(q.batch as f64);
    tr.record(|| {
        Step::new(
            "infer.decode_comms",
            "Decode communication per step",
            "L·(2·(AG + RS)(B·D·bytes_a) over Y + 2·AllToAll(k·B·D·bytes_a) over Z)",
        )
        .bind("L", l, "")
        .bind("B", q.batch as f64, "sequences")
        .bind("D", d, "")
        .bind("W_ici", w_eff.get(), "B/s")
        .bind("Y", tp as f64, "")
        .bind("Z", ep as f64, "")
        .result(t_comms_dec.get(), "s")
        .source("How To Scale Your Model, ch3 collectives, ch5 TP, ch7 2D-WS and expert sharding")
    });
    let active = p.matmul_active as f64;
    let ds = latency::decode_step(q.batch, kvs, active, w_dev, nr, c, w_hbm, t_comms_dec, tr);

    // prefill (one prompt)
    let pf: f64 = pre.iter().map(|x| x.flops.get()).sum();
    let pb: f64 = pre.iter().map(|x| x.bytes.get()).sum();
    let t_pm = Seconds::new(pf / (nr as f64 * c.get() * q.mfu));
    let t_pb = Seconds::new(pb / (nr as f64 * w_hbm.get()));
    let t_pc = comms_for(q.prompt_len as f64);
    let t_prefill = t_pm.max(t_pb).max(t_pc);
    let bound_prefill = if t_prefill == t_pm {
        Bound::Compute
    } else if t_prefill == t_pb {
        Bound::Memory
    } else {
        Bound::Comms
    };
    tr.record(|| {
        Step::new(
            "infer.prefill_time",
            "Prefill time (TTFT)",
            "max(FLOPs/(N·C·MFU), bytes/(N·W_hbm), T_comms)",
        )
        .bind("FLOPs", pf, "FLOPs")
        .bind("bytes", pb, "B")
        .bind("N", nr as f64, "chips")
        .bind("C", c.get(), "FLOP/s")
        .bind("MFU", q.mfu, "")
        .bind("T_comms", t_pc.get(), "s")
        .result(t_prefill.get(), "s")
        .source("How To Scale Your Model, ch8 (prefill ≈ 2·P·tokens/(N·C·MFU))")
    });
    let tps_replica = latency::tokens_per_s(q.batch, ds.step, tr);
    let tps = tps_replica * replicas as f64;
    let cost = chip
        .usd_per_chip_hour
        .map(|u| latency::cost_per_million(chips, u, tps, tr));
    let disagg = latency::disaggregation_ratio(q.batch, t_prefill, ds.step, q.gen_len, tr);

    // sharding limits
    let beta = w_hbm / w_eff;
    let tp_pre = sharding::tp_prefill_limit(f_tp, m_y, c, w_eff / m_y as f64, ab, tr);
    let tp_gen = sharding::tp_generate_limit(f_tp, q.batch, beta, tr);
    let (lb_bytes, lat_bound) = match &chip.ici {
        Some(ici) => {
            let lb =
                sharding::latency_bound_bytes(tp, ici.link.one_way_rate(), ici.hop_latency, tr);
            (
                lb,
                tp > 1 && (lat_bound_any || (q.batch as f64 * d * ab) < lb.get()),
            )
        }
        None => (Bytes::ZERO, false),
    };
    let two_d = if chip.kind == ChipKind::Tpu && nr >= 2 {
        Some(sharding::two_d_ws(
            q.batch,
            a.d_model,
            f_tp,
            nr,
            q.mesh.len() as u64,
            c,
            w_ici,
            tr,
        ))
    } else {
        None
    };
    let t_roof = ds.t_kv + ds.t_math.max(ds.t_weights);
    tr.record(|| {
        Step::new(
            "infer.decode_step_time_roofline",
            "Decode step time without communication",
            "B·KV/(N·W_hbm) + max(2·B·P/(N·C), P_bytes/(N·W_hbm))",
        )
        .bind("T_kv", ds.t_kv.get(), "s")
        .bind("T_math", ds.t_math.get(), "s")
        .bind("T_weights", ds.t_weights.get(), "s")
        .result(t_roof.get(), "s")
        .source("How To Scale Your Model, ch7 (general step time)")
    });
    let t_load_even = weights / (w_hbm * nr as f64);
    let coll_bytes = Bytes::new(q.batch as f64 * d * ab);
    let c_over_w = c_bf16.get() / w_hbm.get();
    let attn_crit = roofline::attention_prefill_critical_len(c_over_w);
    let g = (a.n_heads as f64 / a.n_kv_heads.max(1) as f64).max(1.0);
    let attn_dec = roofline::attention_intensity(1.0, q.context as f64, g);
    tr.record(|| {
        Step::new(
            "infer.decode_tp_collective_bytes",
            "Decode TP collective buffer",
            "B·D·bytes_a",
        )
        .bind("B", q.batch as f64, "sequences")
        .bind("D", d, "")
        .bind("bytes_a", ab, "B")
        .result(coll_bytes.get(), "B")
        .source("How To Scale Your Model, ch7 Appendix C")
    });
    tr.record(|| {
        Step::new(
            "infer.attention_prefill_critical_len",
            "Prefill length above which MHA attention is compute-bound",
            "T/2 > C/W_hbm → T > 2·C/W_hbm",
        )
        .bind("C", c_bf16.get(), "FLOP/s")
        .bind("W_hbm", w_hbm.get(), "B/s")
        .result(attn_crit, "tokens")
        .source("How To Scale Your Model, ch7")
    });
    tr.record(|| {
        Step::new(
            "infer.attention_decode_intensity",
            "Decode attention arithmetic intensity",
            "T·S·G/(T·G + S), T = 1",
        )
        .bind("S", q.context as f64, "tokens")
        .bind("G", g, "")
        .result(attn_dec, "FLOPs/B")
        .source("How To Scale Your Model, ch7")
    });
    let need = sharding::min_chips(weights + Bytes::new(q.batch as f64 * kvs.get()), hbm, tr);
    let min_slice = match &chip.ici {
        Some(ici) if !ici.slice_shapes.is_empty() => {
            sharding::smallest_slice(&ici.slice_shapes, need).map(|s| fmt_shape(&s))
        }
        _ => Some(format!("{need}")),
    };
    let ttft = t_prefill;
    let req = ttft + ds.step * q.gen_len as f64;
    tr.record(|| {
        Step::new(
            "infer.request_latency",
            "Request latency",
            "TTFT + gen_len·T_step",
        )
        .bind("TTFT", ttft.get(), "s")
        .bind("gen_len", q.gen_len as f64, "tokens")
        .bind("T_step", ds.step.get(), "s")
        .result(req.get(), "s")
        .source("How To Scale Your Model, ch8")
    });

    Ok(InferReport {
        model: m.name.clone(),
        chip: chip.name.clone(),
        mesh: fmt_shape(&q.mesh),
        chips,
        tp,
        ep,
        replicas,
        chips_per_replica: nr,
        sharding: q.sharding,
        weights_dtype: wdt,
        kv_dtype: q.kv_dtype,
        compute_dtype: q.compute_dtype,
        batch: q.batch,
        prompt_len: q.prompt_len,
        context: q.context,
        gen_len: q.gen_len,
        params_total: p.total,
        params_active: p.active,
        weights_bytes: weights,
        weights_bytes_per_device: w_dev,
        kv_cache_bytes_per_token: kvt,
        kv_cache_bytes_per_sequence: kvs,
        kv_cache_bytes_per_device: kv_dev,
        kv_sharding: [kh, kb, ks],
        hbm_bytes_per_device: hbm,
        free_hbm_bytes_per_device: mb.free_hbm_bytes_per_device,
        max_batch: mb.max_batch,
        max_batch_exact: mb.max_batch_exact,
        leftover_hbm_bytes_per_device: mb.leftover_hbm_bytes_per_device,
        max_batch_one_kv_head: mqa,
        fits,
        batch_fits,
        b_crit_tokens: b_crit,
        weight_load_time_s: t_load,
        weight_load_time_even_s: t_load_even,
        decode_kv_load_time_s: ds.t_kv,
        decode_compute_time_s: ds.t_math,
        decode_comms_time_s: ds.t_comms,
        decode_step_time_s: ds.step,
        decode_step_time_roofline_s: t_roof,
        bound_decode: ds.bound,
        prefill_time_s: t_prefill,
        prefill_compute_time_s: t_pm,
        prefill_memory_time_s: t_pb,
        prefill_comms_time_s: t_pc,
        bound_prefill,
        ttft_s: ttft,
        request_latency_s: req,
        tokens_per_s: tps,
        tokens_per_s_per_chip: tps / chips as f64,
        cost_per_million_tokens_usd: cost,
        disagg_prefill_per_generate: disagg,
        tp_limit_prefill: tp_pre,
        tp_limit_generate: tp_gen,
        beta_hbm_over_ici: beta,
        latency_bound_bytes: lb_bytes,
        decode_comms_latency_bound: lat_bound,
        decode_tp_collective_bytes: coll_bytes,
        attention_prefill_critical_len: attn_crit,
        attention_decode_intensity: attn_dec,
        two_d_ws: two_d,
        min_slice,
        min_chips: need,
        decode_components: dec,
        prefill_components: pre,
        warnings,
    })
}
