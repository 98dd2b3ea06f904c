//! One serving configuration evaluated ([`evaluate`]): its layout (checked),
//! memory and largest batch, decode and prefill rooflines with their
//! communication, throughput and cost, and the book's sharding limits —
//! each a small function, composed into an [`InferReport`].

use super::step::{Comms, StepModel};
use super::{
    latency, memory, roofline, sharding, Bound, Component, InferQuery, InferReport, Placement,
};
use crate::error::{Error, Result};
use crate::hardware::{fmt_shape, Chip, ChipKind};
use crate::inference::engine::EngineProfile;
use crate::inference::speculative::{DraftFootprint, DraftMethod, Speculative};
use crate::model::params::ParamCounts;
use crate::model::{kv, params, ModelSpec};
use crate::trace::{NoTrace, Step, Tracer};
use crate::units::{Bytes, BytesPerSec, DType, Seconds};

/// The checked layout of a query: chips, Y, Z, chips per replica, F over Y.
struct Layout {
    chips: u64,
    tp: u64,
    ep: u64,
    /// Y·Z: chips per pipeline stage (per replica without a pipeline).
    nr: u64,
    /// P: pipeline stages.
    pp: u64,
    /// Layers per stage (empty when P = 1).
    stage_layers: Vec<u64>,
    replicas: u64,
    /// The FFN width TP splits.
    f_tp: u64,
}

fn bad(msg: String) -> Error {
    Error::Invalid(msg)
}

/// Check the query's lengths, MFU and mesh, and the expert/tensor layout.
fn layout(m: &ModelSpec, chip: &Chip, q: &InferQuery) -> Result<Layout> {
    let a = &m.arch;
    if q.batch == 0 || q.context == 0 || q.prompt_len == 0 || q.gen_len == 0 {
        return Err(bad(
            "batch, context, prompt length and generation length must be at least 1".into(),
        ));
    }
    if q.tp == Some(0) || q.ep == Some(0) {
        return Err(bad("--tp and --ep must be at least 1 (1 = not used)".into()));
    }
    let pp = q.pp.unwrap_or(1);
    let stage_layers = match pp {
        1 => Vec::new(),
        _ => super::pipeline::stage_layers(a.n_layers, pp)?,
    };
    if !(q.mfu > 0.0 && q.mfu <= 1.0) {
        return Err(bad(format!("mfu = {} must be in (0, 1]", q.mfu)));
    }
    let chips = q
        .mesh
        .iter()
        .try_fold(1u64, |n, &x| n.checked_mul(x))
        .ok_or_else(|| {
            bad(format!(
                "the mesh {} has more than {} chips",
                fmt_shape(&q.mesh),
                u64::MAX
            ))
        })?;
    if chips == 0 {
        return Err(bad("the mesh needs at least one chip".into()));
    }
    let ep = q.ep.unwrap_or(1).max(1);
    match a.moe.as_ref().map(|x| x.n_experts) {
        None if ep > 1 => {
            return Err(bad(format!(
                "--ep {ep}: {} is a dense model (no experts to shard)",
                m.name
            )))
        }
        Some(e) if e % ep != 0 => {
            return Err(bad(format!(
                "--ep {ep} does not divide the E = {e} experts"
            )))
        }
        _ => {}
    }
    if chips % ep != 0 {
        return Err(bad(format!("--ep {ep} does not divide the {chips} chips")));
    }
    if chips % ep.saturating_mul(pp) != 0 {
        return Err(bad(format!(
            "EP × PP = {ep} × {pp} does not divide the {chips} chips"
        )));
    }
    let tp =
        q.tp.unwrap_or_else(|| default_tp(m, chip, chips / ep / pp))
            .max(1);
    // Y·Z: chips per replica (a product above u64::MAX cannot divide the chips)
    let nr = match tp.checked_mul(ep) {
        Some(nr) if pp > 1 && nr.checked_mul(pp).map_or(true, |r| chips % r != 0) => {
            return Err(bad(format!(
                "TP × EP × PP = {tp} × {ep} × {pp} = {} does not divide the {chips} chips",
                u128::from(tp) * u128::from(ep) * u128::from(pp)
            )));
        }
        Some(nr) if chips % nr == 0 => nr,
        _ => {
            return Err(bad(format!(
                "TP × EP = {tp} × {ep} = {} does not divide the {chips} chips",
                u128::from(tp) * u128::from(ep)
            )));
        }
    };
    if a.n_heads % tp != 0 {
        return Err(bad(format!(
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
        return Err(bad(format!("TP = {tp} does not divide d_ff (F = {f_tp})")));
    }
    Ok(Layout {
        chips,
        tp,
        ep,
        nr,
        pp,
        stage_layers,
        replicas: chips / (nr * pp),
        f_tp,
    })
}

/// Default TP over `n` chips: all of them, unless they span several NVLink
/// domains (a GB200 NVL72 rack, an 8-GPU node): then the largest TP that
/// fits in one domain and divides the chips, the query heads and F, so the
/// slice splits into replicas of whole domains.
fn default_tp(m: &ModelSpec, chip: &Chip, n: u64) -> u64 {
    let dom = chip.nvlink.as_ref().map_or(0, |x| x.domain_size);
    if chip.ici.is_some() || dom == 0 || n <= dom {
        return n;
    }
    let a = &m.arch;
    let f = if a.dense_layers() > 0 {
        a.d_ff
    } else {
        a.d_ff_expert()
    };
    (1..=dom)
        .rev()
        .find(|&t| n % t == 0 && a.n_heads % t == 0 && f % t == 0)
        .unwrap_or(1)
}

/// Weights, KV cache and the largest batch.
struct MemoryPart {
    p: ParamCounts,
    weights: Bytes,
    w_dev: Bytes,
    kvt: Bytes,
    kvs: Bytes,
    max: memory::MaxBatch,
    one_kv_head: Option<u64>,
    fits: bool,
    batch_fits: bool,
    kv_dev: Bytes,
    kv_layout: [u64; 3],
    /// Pipeline stages (empty when P = 1).
    stages: Vec<super::pipeline::Stage>,
    /// A draft model's weights per chip (`draft:MODEL`), counted in the fit.
    draft_w_dev: Option<Bytes>,
}

/// Weights, KV and the largest batch per chip. With a pipeline each stage
/// holds its layers' weights and KV (`KV_seq·L_s/L` per sequence over its Y·Z
/// chips); the reported weights, KV and largest batch are the binding stage's.
fn memory_part<T: Tracer>(
    m: &ModelSpec,
    chip: &Chip,
    q: &InferQuery,
    l: &Layout,
    draft: Option<DraftFootprint>,
    ideal_engine: bool,
    tr: &mut T,
) -> MemoryPart {
    let a = &m.arch;
    let pl = Placement {
        chips: l.chips,
        tp: l.tp,
        ep: l.ep,
        replicas: l.replicas,
    };
    let p = params::count(a, tr);
    let wdt = q.weights_dtype;
    let weights = memory::weight_bytes(&p, wdt, tr);
    let stages = match l.pp {
        1 => Vec::new(),
        _ => super::pipeline::stages(m, &p, &l.stage_layers, wdt, (l.tp, l.ep)),
    };
    // (weights per chip, share of each sequence's KV) of every stage; without
    // a pipeline the one stage is the whole model
    let target: Vec<(Bytes, f64)> = if stages.is_empty() {
        vec![(memory::weight_bytes_per_device(&p, wdt, &pl, tr), 1.0)]
    } else {
        stages.iter().map(|s| (s.w_dev, s.frac)).collect()
    };
    // (weights per chip, KV share, the draft's KV share): a draft model sits
    // beside the first stage
    let d = draft.unwrap_or_default();
    let parts: Vec<(Bytes, f64, Bytes)> = target
        .iter()
        .enumerate()
        .map(|(i, &(w, f))| match i {
            0 => (w + d.w_dev, f, d.kv_seq_share),
            _ => (w, f, Bytes::ZERO),
        })
        .collect();
    let kvt = kv::bytes_per_token(a, q.kv_dtype, tr);
    let kvs = kv::bytes_per_sequence(a, q.context, q.kv_dtype, tr);
    // what the replica holds per sequence: R copies of an engine's MLA latent
    let copies = memory::kv_copies(a.mla.is_some(), ideal_engine, l.tp, tr);
    let held = kvs * copies as f64;
    let hbm = chip.hbm_capacity;
    let per_stage = |kv_seq: Bytes, &(w_dev, frac, extra): &(Bytes, f64, Bytes)| {
        memory::max_batch(l.nr, hbm, w_dev, kv_seq * frac + extra, &mut NoTrace)
    };
    // the stage that admits the fewest sequences binds the replica
    let (bind_w, bind_frac, bind_extra) = parts
        .iter()
        .min_by(|x, y| {
            let (bx, by) = (per_stage(held, x), per_stage(held, y));
            bx.max_batch_exact.total_cmp(&by.max_batch_exact)
        })
        .copied()
        .unwrap_or(parts[0]);
    let max = memory::max_batch(l.nr, hbm, bind_w, held * bind_frac + bind_extra, tr);
    let one_kv_head = mqa_kv_per_sequence(a, q).map(|kvs1| {
        parts
            .iter()
            .map(|s| per_stage(kvs1, s).max_batch)
            .min()
            .unwrap_or(0)
    });
    let kv_frac = parts.iter().map(|s| s.1).fold(0.0, f64::max);
    let (kh, kb, ks) = memory::kv_layout(a.n_kv_heads, q.batch, l.nr);
    MemoryPart {
        fits: max.max_batch >= 1,
        batch_fits: parts.iter().all(|&(w_dev, frac, extra)| {
            memory::fits(l.nr, hbm, w_dev, held * frac + extra, q.batch)
        }),
        kv_dev: memory::kv_bytes_per_device(q.batch, held * kv_frac, l.nr, tr),
        kv_layout: [kh, kb, ks],
        p,
        weights,
        w_dev: target.iter().map(|s| s.0).fold(Bytes::ZERO, Bytes::max),
        draft_w_dev: draft.map(|d| d.w_dev),
        kvt,
        kvs,
        max,
        one_kv_head,
        stages,
    }
}

/// KV bytes per sequence if the model had one KV head (MQA), for the "what
/// MQA would allow" batch; `None` for MLA or a model that already has one.
fn mqa_kv_per_sequence(a: &crate::model::Arch, q: &InferQuery) -> Option<Bytes> {
    (a.mla.is_none() && a.n_kv_heads > 1).then(|| {
        let mut a1 = a.clone();
        a1.n_kv_heads = 1;
        kv::bytes_per_sequence(&a1, q.context, q.kv_dtype, &mut NoTrace)
    })
}

fn warnings(
    m: &ModelSpec,
    chip: &Chip,
    q: &InferQuery,
    l: &Layout,
    mp: &MemoryPart,
) -> Vec<String> {
    let mut w = Vec::new();
    if m.max_seq_len > 0 && q.context > m.max_seq_len {
        w.push(format!(
            "context {} exceeds {}'s maximum of {} tokens",
            q.context, m.name, m.max_seq_len
        ));
    }
    if q.prompt_len > q.context {
        w.push(format!(
            "prompt_len {} exceeds context {}",
            q.prompt_len, q.context
        ));
    }
    let dom = chip.nvlink.as_ref().map_or(0, |x| x.domain_size);
    if chip.ici.is_none() && dom > 0 && l.chips > dom && l.chips % dom != 0 {
        w.push(format!(
            "{} GPUs are {} whole NVLink domains of {dom} and {} more: some TP-{} replicas may straddle two domains (their collectives then leave NVLink)",
            l.chips,
            l.chips / dom,
            l.chips % dom,
            l.tp
        ));
    }
    if !mp.fits {
        w.push(format!(
            "does not fit even at batch 1: weights {} per chip + one {}-token sequence ({}) exceed {} chips × {}",
            mp.w_dev, q.context, mp.kvs, l.nr, chip.hbm_capacity
        ));
    } else if !mp.batch_fits {
        w.push(format!(
            "batch {} does not fit; the largest batch at context {} is {}",
            q.batch, q.context, mp.max.max_batch
        ));
    }
    w
}

/// Decode and prefill: the rooflines with communication.
struct Phases {
    decode: Vec<Component>,
    prefill: Vec<Component>,
    step: latency::DecodeStep,
    dec_latency_bound: bool,
    t_prefill: Seconds,
    t_pm: Seconds,
    t_pb: Seconds,
    t_pc: Seconds,
    bound_prefill: Bound,
}

fn phases<T: Tracer>(
    sm: &StepModel,
    q: &InferQuery,
    l: &Layout,
    mp: &MemoryPart,
    tr: &mut T,
) -> Phases {
    let a = &sm.m.arch;
    let wdt = q.weights_dtype;
    let cm = sm.comms;
    // what a decode step reads: all of mp.kvs but a sparse model's unpicked rows
    let kv_read = kv::bytes_read_per_decode_step(a, q.context, q.kv_dtype, tr);
    let pass = roofline::Pass::decode(a, q.batch, q.context, kv_read);
    let decode = roofline::components(a, &mp.p, &pass, wdt, &sm.hw, tr);
    let prefill = sm.prefill_components(q.prompt_len, tr);
    let (t_dec, dec_latency_bound) = cm.time(q.batch as f64);
    tr.record(|| {
        Step::new(
            "infer.decode_comms",
            "Decode communication per step",
            "L·(2·(AG + RS)(B·D·bytes_a) over Y + 2·AllToAll(k·B·D·bytes_a) over Z)",
        )
        .bind("L", cm.l, "")
        .bind("B", q.batch as f64, "sequences")
        .bind("D", cm.d, "")
        .bind("W_ici", cm.w_eff.get(), "B/s")
        .bind("Y", l.tp as f64, "")
        .bind("Z", l.ep as f64, "")
        .result(t_dec.get(), "s")
        .source("How To Scale Your Model, ch3 collectives, ch5 TP, ch7 2D-WS and expert sharding")
    });
    let step = sm.decode(q.batch, q.context, tr);
    let pt = sm.prefill_from(&prefill, 1, q.prompt_len, tr);
    Phases {
        decode,
        prefill,
        step,
        dec_latency_bound,
        t_prefill: pt.total,
        t_pm: pt.compute,
        t_pb: pt.memory,
        t_pc: pt.comms,
        bound_prefill: pt.bound,
    }
}

/// The book's sharding limits and attention figures.
struct Limits {
    beta: f64,
    tp_prefill: f64,
    tp_generate: f64,
    latency_bound_bytes: Bytes,
    latency_bound: bool,
    two_d: Option<sharding::TwoDWs>,
    coll_bytes: Bytes,
    attn_crit: f64,
    attn_dec: f64,
}

#[allow(clippy::too_many_arguments)]
fn limits<T: Tracer>(
    m: &ModelSpec,
    chip: &Chip,
    q: &InferQuery,
    l: &Layout,
    cm: &Comms,
    w_ici: BytesPerSec,
    m_y: u64,
    dec_latency_bound: bool,
    tr: &mut T,
) -> Limits {
    let a = &m.arch;
    let (c, w_hbm) = (chip.flops(q.compute_dtype), chip.hbm_bandwidth);
    let c_bf16 = chip.flops(DType::Bf16);
    let beta = w_hbm / cm.w_eff;
    let tp_prefill = sharding::tp_prefill_limit(l.f_tp, m_y, c, cm.w_eff / m_y as f64, cm.ab, tr);
    let tp_generate = sharding::tp_generate_limit(l.f_tp, q.batch, beta, tr);
    let coll_bytes = Bytes::new(q.batch as f64 * cm.d * cm.ab);
    let (latency_bound_bytes, latency_bound) = match &chip.ici {
        Some(ici) => {
            let lb =
                sharding::latency_bound_bytes(l.tp, ici.link.one_way_rate(), ici.hop_latency, tr);
            (
                lb,
                l.tp > 1 && (dec_latency_bound || coll_bytes.get() < lb.get()),
            )
        }
        None => (Bytes::ZERO, false),
    };
    let two_d = (chip.kind == ChipKind::Tpu && l.nr >= 2).then(|| {
        sharding::two_d_ws(
            q.batch,
            a.d_model,
            l.f_tp,
            l.nr,
            q.mesh.len() as u64,
            c,
            w_ici,
            tr,
        )
    });
    let attn_crit = roofline::attention_prefill_critical_len(c_bf16.get() / w_hbm.get());
    let g = (a.n_heads as f64 / a.n_kv_heads.max(1) as f64).max(1.0);
    let attn_dec = roofline::attention_intensity(1.0, q.context as f64, g);
    record_limits(
        q,
        cm,
        c_bf16.get(),
        w_hbm.get(),
        (coll_bytes, attn_crit, attn_dec, g),
        tr,
    );
    Limits {
        beta,
        tp_prefill,
        tp_generate,
        latency_bound_bytes,
        latency_bound,
        two_d,
        coll_bytes,
        attn_crit,
        attn_dec,
    }
}

fn record_limits<T: Tracer>(
    q: &InferQuery,
    cm: &Comms,
    c: f64,
    w_hbm: f64,
    v: (Bytes, f64, f64, f64),
    tr: &mut T,
) {
    let (coll_bytes, attn_crit, attn_dec, g) = v;
    tr.record(|| {
        Step::new(
            "infer.decode_tp_collective_bytes",
            "Decode TP collective buffer",
            "B·D·bytes_a",
        )
        .bind("B", q.batch as f64, "sequences")
        .bind("D", cm.d, "")
        .bind("bytes_a", cm.ab, "B")
        .result(coll_bytes.get(), "B")
        .source("How To Scale Your Model, ch7 Appendix C")
    });
    tr.record(|| {
        Step::new(
            "infer.attention_prefill_critical_len",
            "Prefill length above which MHA attention is compute-bound",
            "T/2 > C/W_hbm → T > 2·C/W_hbm",
        )
        .bind("C", c, "FLOP/s")
        .bind("W_hbm", w_hbm, "B/s")
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
}

/// Throughput, cost, disaggregation, latency and the smallest slice.
struct Service {
    tps: f64,
    cost: Option<f64>,
    disagg: f64,
    t_roof: Seconds,
    request: Seconds,
    min_chips: u64,
    min_slice: Option<String>,
}

fn service<T: Tracer>(
    chip: &Chip,
    q: &InferQuery,
    l: &Layout,
    mp: &MemoryPart,
    ph: &Phases,
    tr: &mut T,
) -> Service {
    let ds = &ph.step;
    let tps = latency::tokens_per_s(q.batch, ds.step, tr) * l.replicas as f64;
    let cost = chip
        .usd_per_chip_hour
        .map(|u| latency::cost_per_million(l.chips, u, tps, tr));
    let disagg = latency::disaggregation_ratio(q.batch, ph.t_prefill, ds.step, q.gen_len, tr);
    let t_roof = ds.t_kv + ds.t_math.max(ds.t_weights);
    tr.record(|| {
        Step::new(
            "infer.decode_step_time_roofline",
            "Decode step time without communication",
            "B·KV/(N·W_hbm) + max(2·B·P/(N·C), w_dev/W_hbm)",
        )
        .bind("T_kv", ds.t_kv.get(), "s")
        .bind("T_math", ds.t_math.get(), "s")
        .bind("T_weights", ds.t_weights.get(), "s")
        .result(t_roof.get(), "s")
        .source("How To Scale Your Model, ch7 (general step time)")
    });
    let need = Bytes::new(q.batch as f64 * mp.kvs.get());
    let min_chips = sharding::min_chips(mp.weights + need, chip.hbm_capacity, tr);
    let min_slice = match &chip.ici {
        Some(ici) if !ici.slice_shapes.is_empty() => {
            sharding::smallest_slice(&ici.slice_shapes, min_chips).map(|s| fmt_shape(&s))
        }
        _ => Some(format!("{min_chips}")),
    };
    let request = ph.t_prefill + ds.step * q.gen_len as f64;
    tr.record(|| {
        Step::new(
            "infer.request_latency",
            "Request latency",
            "TTFT + gen_len·T_step",
        )
        .bind("TTFT", ph.t_prefill.get(), "s")
        .bind("gen_len", q.gen_len as f64, "tokens")
        .bind("T_step", ds.step.get(), "s")
        .result(request.get(), "s")
        .source("How To Scale Your Model, ch8")
    });
    Service {
        tps,
        cost,
        disagg,
        t_roof,
        request,
        min_chips,
        min_slice,
    }
}

/// Evaluate one configuration.
pub fn evaluate<T: Tracer>(
    m: &ModelSpec,
    chip: &Chip,
    q: &InferQuery,
    tr: &mut T,
) -> Result<InferReport> {
    let l = layout(m, chip, q)?;
    let draft_parts = draft_parts(chip, q, &l);
    let draft_fp = draft_parts
        .as_ref()
        .map(|(d, _, w, _)| DraftFootprint::new(d, *w, (l.tp, l.nr), q.context, q.kv_dtype));
    let engine = match &q.engine {
        Some(e) => e.clone(),
        None => EngineProfile::default_for(chip),
    };
    let mp = memory_part(m, chip, q, &l, draft_fp, engine.is_ideal(), tr);
    let warnings = warnings(m, chip, q, &l, &mp);
    let c_bf16 = chip.flops(DType::Bf16);
    let moe = m.arch.moe.as_ref().map(|x| (x.n_experts, x.top_k));
    let b_crit = roofline::b_crit(
        c_bf16,
        chip.hbm_bandwidth,
        q.weights_dtype.bits(),
        q.compute_dtype.bits(),
        moe,
        tr,
    );
    let t_load = roofline::weight_load_time(mp.w_dev, chip.hbm_bandwidth, tr);
    engine.check_chip(chip)?;
    let (cm, w_ici, m_y) = Comms::new(m, chip, q, (l.tp, l.ep), &engine);
    let draft_sm = draft_parts.as_ref().map(|(d, p, w, dcm)| StepModel {
        engine: &engine,
        m: d,
        p,
        q,
        nr: l.tp,
        hw: roofline::Hw {
            chips: l.tp,
            replicated_chips: l.tp,
            c: chip.flops(q.compute_dtype),
            w_hbm: chip.hbm_bandwidth,
        },
        w_dev: *w,
        routed_dev: Bytes::ZERO,
        vector_ops: super::step::vector_ops(chip),
        comms: dcm,
        draft: None,
        pipeline: None,
    });
    let pipe = (l.pp > 1).then(|| super::pipeline::Pipeline {
        stages: mp.stages.clone(),
        axis: super::axis_placement(chip, &q.mesh, l.nr, l.pp),
        // an engine's send pays its small-message latency and moves the
        // hidden states and the residual stream; the book one activation
        alpha: Seconds::new(if engine.is_ideal() {
            0.0
        } else {
            engine.allreduce_latency_s
        }),
        tensors: if engine.is_ideal() { 1.0 } else { 2.0 },
        ab: cm.ab,
        d: cm.d,
    });
    let sm = StepModel {
        engine: &engine,
        m,
        p: &mp.p,
        q,
        nr: l.nr,
        hw: roofline::Hw {
            chips: l.nr,
            replicated_chips: l.tp,
            c: chip.flops(q.compute_dtype),
            w_hbm: chip.hbm_bandwidth,
        },
        w_dev: mp.w_dev,
        routed_dev: Bytes::new(
            mp.p.experts_routed as f64 * q.weights_dtype.bytes_per_element() / (l.tp * l.ep) as f64,
        ),
        vector_ops: super::step::vector_ops(chip),
        comms: &cm,
        draft: draft_sm.as_ref(),
        pipeline: pipe.as_ref(),
    };
    let ph = phases(&sm, q, &l, &mp, tr);
    let lim = limits(m, chip, q, &l, &cm, w_ici, m_y, ph.dec_latency_bound, tr);
    let sv = service(chip, q, &l, &mp, &ph, tr);
    let serving = crate::inference::serving::report(&sm, chip, l.replicas, tr)?;
    let mut r = report(m, chip, q, &l, mp, ph, lim, sv, b_crit, t_load, warnings);
    r.serving = serving;
    r.aggregates = super::derived::aggregates(&r, chip, tr);
    Ok(r)
}

/// Speculative decoding with a draft model: the draft, its parameters, its
/// weights per chip and its collectives, on the target's TP group.
fn draft_parts<'a>(
    chip: &Chip,
    q: &'a InferQuery,
    l: &Layout,
) -> Option<(&'a ModelSpec, ParamCounts, Bytes, Comms)> {
    let Some(Speculative {
        method: DraftMethod::Draft(d),
        ..
    }) = &q.speculative
    else {
        return None;
    };
    let engine = match &q.engine {
        Some(e) => e.clone(),
        None => EngineProfile::default_for(chip),
    };
    let p = params::count(&d.arch, &mut NoTrace);
    let pl = Placement {
        chips: l.tp,
        tp: l.tp,
        ep: 1,
        replicas: 1,
    };
    let w = memory::weight_bytes_per_device(&p, q.weights_dtype, &pl, &mut NoTrace);
    let cm = Comms::new(d, chip, q, (l.tp, 1), &engine).0;
    Some((d.as_ref(), p, w, cm))
}

#[allow(clippy::too_many_arguments)]
fn report(
    m: &ModelSpec,
    chip: &Chip,
    q: &InferQuery,
    l: &Layout,
    mp: MemoryPart,
    ph: Phases,
    lim: Limits,
    sv: Service,
    b_crit: f64,
    t_load: Seconds,
    warnings: Vec<String>,
) -> InferReport {
    let ds = &ph.step;
    InferReport {
        model: m.name.clone(),
        chip: chip.name.clone(),
        mesh: fmt_shape(&q.mesh),
        chips: l.chips,
        tp: l.tp,
        ep: l.ep,
        pp: l.pp,
        stage_layers: l.stage_layers.clone(),
        replicas: l.replicas,
        chips_per_replica: l.nr * l.pp,
        sharding: q.sharding,
        weights_dtype: q.weights_dtype,
        kv_dtype: q.kv_dtype,
        compute_dtype: q.compute_dtype,
        batch: q.batch,
        prompt_len: q.prompt_len,
        context: q.context,
        gen_len: q.gen_len,
        params_total: mp.p.total,
        params_active: mp.p.active,
        weights_bytes: mp.weights,
        weights_bytes_per_device: mp.w_dev,
        draft_weights_bytes_per_device: mp.draft_w_dev,
        kv_cache_bytes_per_token: mp.kvt,
        kv_cache_bytes_per_sequence: mp.kvs,
        kv_cache_bytes_per_device: mp.kv_dev,
        kv_sharding: mp.kv_layout,
        hbm_bytes_per_device: chip.hbm_capacity,
        free_hbm_bytes_per_device: mp.max.free_hbm_bytes_per_device,
        max_batch: mp.max.max_batch,
        max_batch_exact: mp.max.max_batch_exact,
        leftover_hbm_bytes_per_device: mp.max.leftover_hbm_bytes_per_device,
        max_batch_one_kv_head: mp.one_kv_head,
        fits: mp.fits,
        batch_fits: mp.batch_fits,
        b_crit_tokens: b_crit,
        weight_load_time_s: t_load,
        weight_load_time_even_s: mp.weights / (chip.hbm_bandwidth * (l.nr * l.pp) as f64),
        decode_kv_load_time_s: ds.t_kv,
        decode_compute_time_s: ds.t_math,
        decode_comms_time_s: ds.t_comms,
        decode_weight_time_s: ds.t_weights,
        decode_overhead_time_s: ds.t_fixed,
        decode_step_time_s: ds.step,
        decode_step_time_roofline_s: sv.t_roof,
        bound_decode: ds.bound,
        prefill_time_s: ph.t_prefill,
        prefill_compute_time_s: ph.t_pm,
        prefill_memory_time_s: ph.t_pb,
        prefill_comms_time_s: ph.t_pc,
        bound_prefill: ph.bound_prefill,
        ttft_s: ph.t_prefill,
        request_latency_s: sv.request,
        tokens_per_s: sv.tps,
        tokens_per_s_per_chip: sv.tps / l.chips as f64,
        cost_per_million_tokens_usd: sv.cost,
        disagg_prefill_per_generate: sv.disagg,
        tp_limit_prefill: lim.tp_prefill,
        tp_limit_generate: lim.tp_generate,
        beta_hbm_over_ici: lim.beta,
        latency_bound_bytes: lim.latency_bound_bytes,
        decode_comms_latency_bound: lim.latency_bound,
        decode_tp_collective_bytes: lim.coll_bytes,
        attention_prefill_critical_len: lim.attn_crit,
        attention_decode_intensity: lim.attn_dec,
        two_d_ws: lim.two_d,
        min_slice: sv.min_slice,
        min_chips: sv.min_chips,
        decode_components: ph.decode,
        prefill_components: ph.prefill,
        warnings,
        serving: Default::default(),
        aggregates: Default::default(),
    }
}
