//! Disaggregated serving as users deploy it (vLLM/SGLang/TensorRT-LLM
//! "P/D" or Dynamo): a **prefill pool** of `W_p` workers and a **decode
//! pool** of `W_d` workers, each worker with its own layout (tp × ep × pp
//! chips), the prompt's KV cache handed from the prefill worker to a decode
//! worker over the network that connects them.
//!
//! With `s_1` a prefill worker's prefill of one prompt, `t_d` a decode
//! worker's step at its batch `B_d` (KV length S, as `plan infer` prices
//! decode), `T_out` generated tokens:
//! * prefill capacity `R_p = W_p/s_1` requests/s (a worker prefills one
//!   prompt per forward: prompts of a few hundred tokens already saturate
//!   the matmuls, so batching prompts changes little);
//! * decode capacity `R_d = W_d·B_d/((T_out − 1)·t_d)` (the prefill emits the
//!   first token, the decode pool the other `T_out − 1`);
//! * served `R = min(R_p·ρ_max, R_d)` (a rate workload: `min(rate, …)`);
//! * KV per request `KV(T_in)` (the KV formula at the prompt length), moved
//!   by the `min(c_p, c_d)` chips of the smaller worker in parallel, each at
//!   its one-way rate of the level that joins the pools: NVLink when both
//!   pools fit in one NVLink domain (a node, or an NVL72 rack), else the
//!   scale-out network (InfiniBand/RoCE): `t_kv = α + KV/(min(c_p, c_d)·W)`;
//! * the transfer runs after the prefill (vLLM's NIXL connector and
//!   TensorRT-LLM by default) or layer by layer under it (`kv_overlap`,
//!   DistServe/Mooncake-style), exposing `max(t_kv/L, t_kv − s_1·(L − 1)/L)`;
//! * `TTFT = t_fe + W̄ + s_1 + t_kv,exposed + U·t_d` (frontend, the M/D/1
//!   prefill queue of a worker at `ρ = R·s_1/W_p`, the prefill, the hand-off,
//!   the decode step in flight when the KV lands);
//! * `TPOT = t_d` (no prefill ever interrupts a decode worker; when prefill
//!   bounds R the decode batch runs below `B_d` and `t_d` is an upper bound);
//! * output tokens/s per chip `R·T_out/(W_p·c_p + W_d·c_d)` — both pools.
//!
//! [`compose`] is the one place these are computed: `infer --prefill …
//! --decode …` ([`evaluate`]) and `plan infer --disagg` both call it.

use serde::Serialize;

use super::continuous::Percentiles;
use super::queue::{md1_wait_mean, wait_quantile};
use super::Workload;
use crate::error::{Error, Result};
use crate::hardware::Chip;
use crate::inference::engine::EngineProfile;
use crate::inference::{evaluate as evaluate_one, InferQuery, InferReport};
use crate::model::{kv, ModelSpec};
use crate::trace::{NoTrace, Step, Tracer};
use crate::view::{field, Doc, Render};

/// Highest prefill utilisation the pool is run at (as continuous batching:
/// the M/D/1 queue grows without bound at 1).
pub const RHO_MAX: f64 = 0.95;

/// One pool's layout: each worker is `tp·ep·pp` chips; `workers` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PoolLayout {
    /// Tensor parallelism of a worker.
    pub tp: u64,
    /// Expert parallelism of a worker (wide EP on the decode side).
    pub ep: u64,
    /// Pipeline stages of a worker.
    pub pp: u64,
    /// Workers in the pool.
    pub workers: u64,
    /// Decode batch per worker (`batch=`; decode pool only; None: the
    /// scenario's batch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<u64>,
}

impl Default for PoolLayout {
    fn default() -> Self {
        PoolLayout {
            tp: 1,
            ep: 1,
            pp: 1,
            workers: 1,
            batch: None,
        }
    }
}

impl PoolLayout {
    /// Parse `tp=4,workers=2` (keys tp, ep, pp, workers, batch; any order;
    /// missing ones 1, batch the scenario's). `what` names the flag.
    pub fn parse(what: &str, s: &str) -> Result<PoolLayout> {
        let bad = || {
            Error::BadValue {
            what: what.into(),
            input: s.into(),
            expected: "comma-separated KEY=N with KEY one of tp, ep, pp, workers, batch (each ≥ 1), e.g. tp=4,workers=2".into(),
        }
        };
        let mut p = PoolLayout::default();
        for part in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = part.split_once(['=', ':']).ok_or_else(bad)?;
            let n: u64 = v.trim().parse().map_err(|_| bad())?;
            if n == 0 {
                return Err(bad());
            }
            match k.trim().to_ascii_lowercase().as_str() {
                "tp" => p.tp = n,
                "ep" => p.ep = n,
                "pp" => p.pp = n,
                "workers" | "w" | "replicas" => p.workers = n,
                "batch" | "b" => p.batch = Some(n),
                _ => return Err(bad()),
            }
        }
        p.chips_per_worker()
            .and_then(|c| c.checked_mul(p.workers))
            .ok_or_else(bad)?;
        Ok(p)
    }

    /// `tp·ep·pp` (None on overflow).
    pub fn chips_per_worker(&self) -> Option<u64> {
        self.tp.checked_mul(self.ep)?.checked_mul(self.pp)
    }

    /// "tp8 ep1 pp1 ×2".
    pub fn describe(&self) -> String {
        let mut s = format!("tp{}", self.tp);
        if self.ep > 1 {
            s += &format!(" ep{}", self.ep);
        }
        if self.pp > 1 {
            s += &format!(" pp{}", self.pp);
        }
        format!("{s} × {} worker(s)", self.workers)
    }
}

/// A disaggregated deployment: the two pools and how the KV moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DisaggSpec {
    /// The prefill pool.
    pub prefill: PoolLayout,
    /// The decode pool.
    pub decode: PoolLayout,
    /// The KV moves layer by layer under the prefill (else after it).
    pub kv_overlap: bool,
}

/// The network level that carries the KV hand-off.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KvLink {
    /// "nvlink" or the scale-out kind ("infiniband", "ethernet", …).
    pub level: String,
    /// One-way rate per chip, B/s.
    pub bytes_per_s_per_chip_one_way: f64,
    /// Chips sending in parallel: `min(c_p, c_d)`.
    pub parallel_chips: u64,
    /// Per-message latency α, s.
    pub latency_s: f64,
}

/// The level joining a prefill and a decode worker: NVLink when all
/// `total_chips` fit in one NVLink domain, else the scale-out network.
pub fn kv_link(chip: &Chip, (c_p, c_d): (u64, u64), total_chips: u64) -> KvLink {
    let parallel_chips = c_p.min(c_d).max(1);
    match (&chip.nvlink, &chip.scale_out) {
        (Some(nv), _) if total_chips <= nv.domain_size => KvLink {
            level: "nvlink".into(),
            bytes_per_s_per_chip_one_way: nv.per_gpu.one_way_rate().get(),
            parallel_chips,
            latency_s: nv.latency.get(),
        },
        (_, Some(so)) => KvLink {
            level: so.kind.clone(),
            bytes_per_s_per_chip_one_way: so.per_chip.one_way_rate().get(),
            parallel_chips,
            latency_s: so.latency.get(),
        },
        (Some(nv), None) => KvLink {
            level: "nvlink".into(),
            bytes_per_s_per_chip_one_way: nv.per_gpu.one_way_rate().get(),
            parallel_chips,
            latency_s: nv.latency.get(),
        },
        (None, None) => KvLink {
            level: "ici".into(),
            bytes_per_s_per_chip_one_way: chip
                .ici
                .as_ref()
                .map_or(0.0, |i| i.link.one_way_rate().get()),
            parallel_chips,
            latency_s: 0.0,
        },
    }
}

/// What the two pools' step models give [`compose`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolTimes {
    /// s_1: a prefill worker's prefill of one prompt, s.
    pub prefill_s: f64,
    /// t_d: a decode worker's step at its batch, s.
    pub decode_step_s: f64,
    /// B_d: decode batch per worker.
    pub decode_batch: u64,
    /// c_p, c_d: chips per prefill / decode worker.
    pub chips: (u64, u64),
    /// W_p, W_d: workers per pool.
    pub workers: (u64, u64),
}

/// The request: lengths, KV bytes, the engine's frontend, the workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DisaggRequest {
    /// T_out.
    pub gen_len: u64,
    /// L: layers (for the layer-by-layer overlap).
    pub layers: u64,
    /// KV(T_in): bytes of one prompt's KV cache.
    pub kv_bytes: f64,
    /// t_fe: the engine's frontend per request, s.
    pub frontend_s: f64,
    /// Layer-by-layer transfer under the prefill.
    pub kv_overlap: bool,
    /// Requests/s offered (None: as many as the pools serve).
    pub rate: Option<f64>,
    /// Also the TTFT percentiles (a bisection each; the plan search ranks
    /// by the mean and leaves them at the mean).
    pub percentiles: bool,
}

/// One disaggregated operating point.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DisaggPoint {
    /// R_p = W_p/s_1: what the prefill pool serves at full use, requests/s.
    pub prefill_capacity_requests_per_s: f64,
    /// R_d = W_d·B_d/((T_out − 1)·t_d), requests/s.
    pub decode_capacity_requests_per_s: f64,
    /// "prefill" or "decode": the pool that bounds R.
    pub bound_by: String,
    /// Prefill workers that would balance the decode pool: ⌈R_d·s_1/ρ_max⌉.
    pub balanced_prefill_workers: u64,
    /// R: requests/s served.
    pub requests_per_s: f64,
    /// ρ = R·s_1/W_p.
    pub prefill_utilisation: f64,
    /// KV(T_in), B.
    pub kv_bytes_per_request: f64,
    /// α + KV/(min(c_p, c_d)·W), s.
    pub kv_transfer_s: f64,
    /// The part of it the request waits for, s.
    pub kv_transfer_exposed_s: f64,
    /// TTFT, s.
    pub ttft_s: Percentiles,
    /// TPOT = t_d, s.
    pub tpot_s: f64,
    /// R·T_out.
    pub output_tokens_per_s: f64,
    /// R·T_out/(W_p·c_p + W_d·c_d).
    pub output_tokens_per_s_per_chip: f64,
    /// 1/TPOT.
    pub output_tokens_per_s_per_user: f64,
    /// W_p·c_p + W_d·c_d.
    pub chips: u64,
    /// Whether the offered rate exceeds what the pools serve.
    pub saturated: bool,
}

/// Compose a disaggregated operating point from the pools' step times (the
/// formulas of the module doc; every front end comes here).
pub fn compose<T: Tracer>(
    t: &PoolTimes,
    q: &DisaggRequest,
    link: &KvLink,
    tr: &mut T,
) -> DisaggPoint {
    let (c_p, c_d) = t.chips;
    let (w_p, w_d) = (t.workers.0 as f64, t.workers.1 as f64);
    let s_1 = t.prefill_s.max(1e-15);
    let t_d = t.decode_step_s.max(1e-15);
    // one output token: the prefill emits it, the decode pool has nothing to do
    let gaps = q.gen_len.saturating_sub(1) as f64;
    let r_p = w_p / s_1;
    let r_d = match gaps > 0.0 {
        true => w_d * t.decode_batch as f64 / (gaps * t_d),
        false => f64::INFINITY,
    };
    let cap = (RHO_MAX * r_p).min(r_d);
    let (r, saturated) = match q.rate {
        Some(x) => (x.min(cap), x > cap),
        None => (cap, false),
    };
    let bound_by = if RHO_MAX * r_p < r_d {
        "prefill"
    } else {
        "decode"
    };
    let balanced = match r_d.is_finite() {
        true => (r_d * s_1 / RHO_MAX).ceil().max(1.0) as u64,
        false => t.workers.0,
    };
    let rate = link.bytes_per_s_per_chip_one_way * link.parallel_chips as f64;
    let t_kv = if rate > 0.0 {
        link.latency_s + q.kv_bytes / rate
    } else {
        0.0
    };
    let l = q.layers.max(1) as f64;
    let exposed = if q.kv_overlap {
        (t_kv / l).max(t_kv - s_1 * (l - 1.0) / l)
    } else {
        t_kv
    };
    let rho = (r * s_1 / w_p).min(RHO_MAX);
    let w_mean = md1_wait_mean(rho, s_1);
    let base = q.frontend_s + s_1 + exposed;
    let mean = base + t_d / 2.0 + w_mean;
    let pq = |p| match q.percentiles {
        true => base + wait_quantile(p, t_d, rho, w_mean),
        false => mean,
    };
    let ttft = Percentiles {
        mean,
        p50: pq(0.5),
        p90: pq(0.9),
        p99: pq(0.99),
    };
    let chips = t.workers.0 * c_p + t.workers.1 * c_d;
    let tps = r * q.gen_len as f64;
    record(tr, t, q, link, (r_p, r_d, r), (t_kv, exposed), &ttft, chips);
    DisaggPoint {
        prefill_capacity_requests_per_s: r_p,
        decode_capacity_requests_per_s: r_d,
        bound_by: bound_by.into(),
        balanced_prefill_workers: balanced,
        requests_per_s: r,
        prefill_utilisation: rho,
        kv_bytes_per_request: q.kv_bytes,
        kv_transfer_s: t_kv,
        kv_transfer_exposed_s: exposed,
        ttft_s: ttft,
        tpot_s: t_d,
        output_tokens_per_s: tps,
        output_tokens_per_s_per_chip: tps / chips.max(1) as f64,
        output_tokens_per_s_per_user: 1.0 / t_d,
        chips,
        saturated,
    }
}

#[allow(clippy::too_many_arguments)]
fn record<T: Tracer>(
    tr: &mut T,
    t: &PoolTimes,
    q: &DisaggRequest,
    link: &KvLink,
    (r_p, r_d, r): (f64, f64, f64),
    (t_kv, exposed): (f64, f64),
    ttft: &Percentiles,
    chips: u64,
) {
    let gaps = q.gen_len.saturating_sub(1).max(1) as f64;
    tr.record(|| {
        Step::new(
            "serving.disagg.prefill_capacity",
            "Prefill pool capacity",
            "R_p = W_p/s_1",
        )
        .bind("W_p", t.workers.0 as f64, "workers")
        .bind("s_1", t.prefill_s, "s")
        .result(r_p, "requests/s")
        .source("one prompt per prefill forward; step model of the prefill worker's layout")
    });
    tr.record(|| {
        Step::new(
            "serving.disagg.decode_capacity",
            "Decode pool capacity",
            "R_d = W_d·B_d/((T_out − 1)·t_d)",
        )
        .bind("W_d", t.workers.1 as f64, "workers")
        .bind("B_d", t.decode_batch as f64, "sequences")
        .bind("T_out − 1", gaps, "tokens")
        .bind("t_d", t.decode_step_s, "s")
        .result(r_d, "requests/s")
        .source("the decode worker's step at B_d and KV length S (step model)")
    });
    tr.record(|| {
        Step::new(
            "serving.disagg.requests_per_s",
            "Requests/s the two pools serve",
            "R = min(ρ_max·R_p, R_d) (a rate workload: min(rate, …))",
        )
        .bind("ρ_max", RHO_MAX, "")
        .bind("R_p", r_p, "requests/s")
        .bind("R_d", r_d, "requests/s")
        .result(r, "requests/s")
        .source("How To Scale Your Model ch8 (disaggregated serving): the pools balance")
    });
    tr.record(|| {
        Step::new(
            "serving.disagg.kv_transfer",
            "KV hand-off of one prompt",
            "t_kv = α + KV(T_in)/(min(c_p, c_d)·W_link); exposed = t_kv, or max(t_kv/L, t_kv − s_1·(L − 1)/L) layer by layer",
        )
        .bind("KV(T_in)", q.kv_bytes, "B")
        .bind("min(c_p, c_d)", link.parallel_chips as f64, "chips")
        .bind("W_link", link.bytes_per_s_per_chip_one_way, "B/s one-way")
        .bind("α", link.latency_s, "s")
        .bind("t_kv", t_kv, "s")
        .result(exposed, "s")
        .source(&format!("KV formula 2·K·H·L·bytes_kv·T_in over {} (chip catalog)", link.level))
    });
    tr.record(|| {
        Step::new(
            "serving.disagg.ttft",
            "Disaggregated time to first token (mean)",
            "t_fe + W̄ + s_1 + t_kv,exposed + t_d/2, W̄ = ρ·s_1/(2(1 − ρ)), ρ = R·s_1/W_p",
        )
        .bind("t_fe", q.frontend_s, "s")
        .bind("s_1", t.prefill_s, "s")
        .bind("t_kv,exposed", exposed, "s")
        .bind("t_d", t.decode_step_s, "s")
        .result(ttft.mean, "s")
        .source("M/D/1 prefill queue per worker (Pollaczek–Khinchine); engine frontend from data/engines")
    });
    tr.record(|| {
        Step::new(
            "serving.disagg.tokens_per_s_per_chip",
            "Output tokens/s per chip, both pools",
            "R·T_out/(W_p·c_p + W_d·c_d)",
        )
        .bind("R", r, "requests/s")
        .bind("T_out", q.gen_len as f64, "tokens")
        .bind("chips", chips as f64, "chips")
        .result(r * q.gen_len as f64 / chips.max(1) as f64, "tokens/s/chip")
        .source("output tokens over every chip of both pools")
    });
}

/// An aggregated replica that prefills its own requests between its decode
/// steps (the fair comparison with a disaggregated plan: the same prefill
/// work on the same chips). In time T it prefills `R·T` prompts (`R·T·s_1`
/// seconds) and runs `(1 − ρ)T/t_d` steps of B tokens, so
/// `R·(T_out − 1) = B·(1 − ρ)/t_d`, `ρ = R·s_1`:
/// `R = 1/(s_1 + (T_out − 1)·t_d/B)`, `TPOT = t_d/(1 − ρ)`.
/// Returns (R per replica, TPOT, ρ).
pub fn colocated(s_1: f64, t_d: f64, batch: u64, gen_len: u64) -> (f64, f64, f64) {
    let gaps = gen_len.saturating_sub(1) as f64;
    let r = 1.0 / (s_1 + gaps * t_d / batch.max(1) as f64);
    let rho = (r * s_1).min(1.0 - 1e-12);
    (r, t_d / (1.0 - rho), rho)
}

/// What `infer --prefill … --decode …` reports.
#[derive(Clone, Debug, Serialize)]
pub struct DisaggReport {
    /// Model.
    pub model: String,
    /// Chip.
    pub chip: String,
    /// Serving engine.
    pub engine: String,
    /// Prompt tokens.
    pub prompt_len: u64,
    /// Generated tokens.
    pub gen_len: u64,
    /// KV length S the decode workers hold.
    pub context: u64,
    /// The prefill pool.
    pub prefill: PoolLayout,
    /// The decode pool (`batch` set).
    pub decode: PoolLayout,
    /// Layer-by-layer KV transfer under the prefill.
    pub kv_overlap: bool,
    /// The link the KV crosses.
    pub kv_link: KvLink,
    /// Workload ("saturated" or "rate=R").
    pub workload: String,
    /// The operating point.
    #[serde(flatten)]
    pub point: DisaggPoint,
    /// A decode worker's largest batch at S (the engine's paged KV cache).
    pub decode_max_batch: u64,
}

/// A pool worker's query: the scenario's with the pool's layout on one
/// worker's chips.
fn worker_query(q: &InferQuery, p: &PoolLayout, batch: u64, c: u64) -> InferQuery {
    InferQuery {
        mesh: vec![c],
        tp: Some(p.tp),
        ep: Some(p.ep),
        pp: Some(p.pp),
        batch,
        workload: Workload::Static,
        speculative: None,
        ..q.clone()
    }
}

fn pool_err(which: &str, p: &PoolLayout, e: Error) -> Error {
    Error::Invalid(format!("--{which} {}: {e}", p.describe()))
}

/// `infer` with a prefill and a decode pool: each pool's worker evaluated
/// by the one step model ([`crate::inference::evaluate`]), composed by
/// [`compose`].
pub fn evaluate<T: Tracer>(
    m: &ModelSpec,
    chip: &Chip,
    q: &InferQuery,
    d: &DisaggSpec,
    tr: &mut T,
) -> Result<DisaggReport> {
    let (pp_, dp_) = (&d.prefill, &d.decode);
    let c_p = pp_.chips_per_worker().unwrap_or(u64::MAX);
    let c_d = dp_.chips_per_worker().unwrap_or(u64::MAX);
    let total = c_p
        .checked_mul(pp_.workers)
        .and_then(|a| c_d.checked_mul(dp_.workers).and_then(|b| a.checked_add(b)))
        .ok_or_else(|| Error::Invalid("--prefill/--decode: too many chips".into()))?;
    if let Some(max) = chip.max_chips() {
        if total > max {
            return Err(Error::Invalid(format!(
                "--prefill/--decode use {total} chips, above the largest {} deployment of {max}",
                chip.name
            )));
        }
    }
    let b_d = dp_.batch.unwrap_or(q.batch);
    let rp = evaluate_one(m, chip, &worker_query(q, pp_, 1, c_p), &mut NoTrace)
        .map_err(|e| pool_err("prefill", pp_, e))?;
    if !rp.fits {
        return Err(Error::Invalid(format!(
            "--prefill {}: the weights and one sequence do not fit a prefill worker's {c_p} chip(s)",
            pp_.describe()
        )));
    }
    let rd = evaluate_one(m, chip, &worker_query(q, dp_, b_d, c_d), &mut NoTrace)
        .map_err(|e| pool_err("decode", dp_, e))?;
    let engine = q
        .engine
        .clone()
        .unwrap_or_else(|| EngineProfile::default_for(chip));
    check_decode_batch(&rd, &engine, dp_, b_d)?;
    let link = kv_link(chip, (c_p, c_d), total);
    let req = DisaggRequest {
        gen_len: q.gen_len,
        layers: m.arch.n_layers,
        kv_bytes: kv::bytes_per_sequence(&m.arch, q.prompt_len, q.kv_dtype, &mut NoTrace).get(),
        frontend_s: engine.frontend_s,
        kv_overlap: d.kv_overlap,
        rate: match q.workload {
            Workload::Rate(r) => Some(r),
            _ => None,
        },
        percentiles: true,
    };
    let times = PoolTimes {
        prefill_s: rp.ttft_s.get(),
        decode_step_s: rd.decode_step_time_s.get(),
        decode_batch: b_d,
        chips: (c_p, c_d),
        workers: (pp_.workers, dp_.workers),
    };
    let point = compose(&times, &req, &link, tr);
    Ok(DisaggReport {
        model: m.name.clone(),
        chip: chip.name.clone(),
        engine: engine.name.clone(),
        prompt_len: q.prompt_len,
        gen_len: q.gen_len,
        context: q.context,
        prefill: *pp_,
        decode: PoolLayout {
            batch: Some(b_d),
            ..*dp_
        },
        kv_overlap: d.kv_overlap,
        kv_link: link,
        workload: match req.rate {
            Some(_) => q.workload.to_string(),
            None => "at capacity".into(),
        },
        point,
        decode_max_batch: if engine.is_ideal() {
            rd.max_batch
        } else {
            rd.serving.engine_max_batch.min(rd.max_batch)
        },
    })
}

/// The decode batch must fit a decode worker (the engine's paged KV cache).
fn check_decode_batch(
    rd: &InferReport,
    engine: &EngineProfile,
    p: &PoolLayout,
    b_d: u64,
) -> Result<()> {
    let max = if engine.is_ideal() {
        rd.max_batch
    } else {
        rd.serving.engine_max_batch.min(rd.max_batch)
    };
    if !rd.fits || b_d > max {
        return Err(Error::Invalid(format!(
            "--decode {}: a batch of {b_d} does not fit a decode worker (largest {max} at {} tokens of KV)",
            p.describe(),
            rd.context
        )));
    }
    Ok(())
}

impl Render for DisaggReport {
    fn doc(&self) -> Doc {
        use crate::units::fmt_si;
        let p = &self.point;
        let s = |v: f64| fmt_si(v, "s");
        let mut d = Doc::new();
        d.title(format!(
            "{} on {} ({}), disaggregated: prompt {} + generate {} tokens",
            self.model, self.chip, self.engine, self.prompt_len, self.gen_len
        ));
        d.fields(vec![
            field("prefill pool", self.prefill.describe()),
            field(
                "decode pool",
                format!(
                    "{}, batch {} per worker (largest {})",
                    self.decode.describe(),
                    self.decode.batch.unwrap_or(0),
                    self.decode_max_batch
                ),
            ),
            field("chips", p.chips),
            field(
                "prefill capacity",
                format!("{:.3} requests/s", p.prefill_capacity_requests_per_s),
            ),
            field(
                "decode capacity",
                format!("{:.3} requests/s", p.decode_capacity_requests_per_s),
            ),
            field(
                "served",
                format!(
                    "{:.3} requests/s ({}; bound by {}; {} prefill worker(s) balance the decode pool)",
                    p.requests_per_s, self.workload, p.bound_by, p.balanced_prefill_workers
                ),
            ),
            field(
                "KV hand-off",
                format!(
                    "{} per request over {} ({} chips in parallel): {}, exposed {} ({})",
                    fmt_si(p.kv_bytes_per_request, "B"),
                    self.kv_link.level,
                    self.kv_link.parallel_chips,
                    s(p.kv_transfer_s),
                    s(p.kv_transfer_exposed_s),
                    if self.kv_overlap {
                        "layer by layer under the prefill"
                    } else {
                        "after the prefill"
                    }
                ),
            ),
            field(
                "TTFT",
                format!(
                    "mean {}, p50 {}, p90 {}, p99 {}",
                    s(p.ttft_s.mean),
                    s(p.ttft_s.p50),
                    s(p.ttft_s.p90),
                    s(p.ttft_s.p99)
                ),
            ),
            field("TPOT", s(p.tpot_s)),
            field(
                "output tokens/s",
                format!(
                    "{:.0} total, {:.1} per chip, {:.1} per user",
                    p.output_tokens_per_s,
                    p.output_tokens_per_s_per_chip,
                    p.output_tokens_per_s_per_user
                ),
            ),
        ]);
        if p.saturated {
            d.note("the offered rate exceeds what the pools serve: figures at capacity");
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_layouts_parse_and_refuse_nonsense() {
        let p = PoolLayout::parse("--prefill", "tp=4, workers=2").unwrap();
        assert_eq!((p.tp, p.ep, p.pp, p.workers, p.batch), (4, 1, 1, 2, None));
        let p = PoolLayout::parse("--decode", "tp=8,ep=8,batch=64").unwrap();
        assert_eq!((p.tp, p.ep, p.workers, p.batch), (8, 8, 1, Some(64)));
        for s in ["tp=0", "tp", "tp=x", "dp=2", "tp=4294967296,ep=4294967296"] {
            let e = PoolLayout::parse("--prefill", s).unwrap_err().to_string();
            assert!(e.contains("--prefill"), "{s}: {e}");
        }
    }

    /// Colocated: B = 4, s_1 = 1 s, t_d = 0.1 s, T_out = 11 → R =
    /// 1/(1 + 10·0.1/4) = 0.8 /s, ρ = 0.8, TPOT = 0.1/0.2 = 0.5 s (by hand).
    #[test]
    fn colocated_by_hand() {
        let (r, tpot, rho) = colocated(1.0, 0.1, 4, 11);
        assert!((r - 0.8).abs() < 1e-12);
        assert!((rho - 0.8).abs() < 1e-12);
        assert!((tpot - 0.5).abs() < 1e-12);
    }
}
