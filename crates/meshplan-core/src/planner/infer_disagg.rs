//! `plan infer --disagg on|only`: aggregated against disaggregated serving.
//!
//! Why here and not in [`super::infer`]: the disaggregated plans are built
//! from the points the aggregated search already costed (a prefill worker is
//! a batch-1 point's layout, a decode worker any point's layout and batch),
//! composed by [`crate::inference::serving::disagg::compose`] — the formula
//! `infer --prefill … --decode …` uses — so the pool ratio is one more
//! dimension at the price of arithmetic, not of step models.
//!
//! For a fair comparison the aggregated points are then priced with their
//! own prefill on the same chips ([`disagg::colocated`]): a disaggregated
//! plan's chips do all the prefill work too.

use std::collections::BTreeMap;

use serde::Serialize;

use super::infer::{ChipBudget, InferPoint, InferSearch};
use crate::inference::latency;
use crate::inference::serving::disagg::{
    self, compose, DisaggRequest, PoolLayout, PoolTimes, RHO_MAX,
};
use crate::inference::serving::queue::md1_wait_mean;
use crate::inference::Sharding;
use crate::mesh::gcd;
use crate::model::kv;
use crate::trace::NoTrace;
use crate::units::DType;

crate::parallelism::named_choice! {
    /// Which serving modes `plan infer` searches.
    pub enum DisaggMode {
        /// Aggregated only, priced as the book's steady-state decode (the default).
        #[default]
        Off,
        /// Aggregated (with its prefill on the same chips) and disaggregated.
        #[strum(to_string = "on", serialize = "both", serialize = "auto")]
        On,
        /// Disaggregated only.
        Only,
    }
}

impl DisaggMode {
    /// Parse "off" | "on" | "only".
    pub fn parse(s: &str) -> crate::Result<Self> {
        crate::parallelism::parse_choice("disagg", s)
    }
}

/// What makes a point a disaggregated plan: the two pools and the KV link.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DisaggPlan {
    /// The prefill pool.
    pub prefill: PoolLayout,
    /// The decode pool (`batch` per worker).
    pub decode: PoolLayout,
    /// Requests/s the prefill pool serves at full use.
    pub prefill_capacity_requests_per_s: f64,
    /// Requests/s the decode pool serves.
    pub decode_capacity_requests_per_s: f64,
    /// "prefill" or "decode".
    pub bound_by: String,
    /// The level the KV crosses ("nvlink", "infiniband", …).
    pub kv_link: String,
    /// The KV hand-off of one prompt, s.
    pub kv_transfer_s: f64,
}

impl DisaggPlan {
    /// "P tp4×2 : D tp8 ep8×1".
    pub fn describe(&self) -> String {
        let one = |p: &PoolLayout| {
            let mut s = format!("tp{}", p.tp);
            if p.ep > 1 {
                s += &format!(" ep{}", p.ep);
            }
            if p.pp > 1 {
                s += &format!(" pp{}", p.pp);
            }
            format!("{s}×{}", p.workers)
        };
        format!("P {} : D {}", one(&self.prefill), one(&self.decode))
    }

    /// The plan's identity up to a common multiple of both pools' workers.
    pub(crate) fn key(&self) -> [u64; 8] {
        let g = gcd(self.prefill.workers, self.decode.workers).max(1);
        [
            self.prefill.tp,
            self.prefill.ep,
            self.prefill.pp,
            self.prefill.workers / g,
            self.decode.tp,
            self.decode.ep,
            self.decode.pp,
            self.decode.workers / g,
        ]
    }
}

/// Price aggregated points with their own prefill (the colocated model).
pub(crate) fn colocate(s: &InferSearch, pts: &mut [InferPoint]) {
    for p in pts.iter_mut().filter(|p| p.disagg.is_none()) {
        let frontend = s
            .engines
            .iter()
            .find(|e| e.name == p.engine)
            .map_or(0.0, |e| e.frontend_s);
        let (s_1, t_d) = (p.ttft_s, p.tpot_s);
        let (r, tpot, rho) = disagg::colocated(s_1, t_d, p.batch, s.gen_len);
        let tps = r * p.replicas as f64 * s.gen_len as f64;
        p.tpot_s = tpot;
        p.ttft_s = frontend + md1_wait_mean(rho.min(RHO_MAX), s_1) + s_1 + t_d / 2.0;
        p.tokens_per_s = tps;
        p.tokens_per_s_per_chip = tps / p.chips.max(1) as f64;
        p.tokens_per_s_per_user = 1.0 / tpot;
        p.cost_per_million_tokens_usd = s
            .chip
            .usd_per_chip_hour
            .map(|u| latency::cost_per_million(p.chips, u, tps, &mut NoTrace));
    }
}

/// A prefill or decode worker the aggregated search costed.
#[derive(Clone, Copy)]
struct Worker {
    tp: u64,
    ep: u64,
    pp: u64,
    batch: u64,
    /// s_1 (prefill) or t_d (decode), s.
    time_s: f64,
}

impl Worker {
    fn chips(&self) -> u64 {
        self.tp * self.ep * self.pp
    }
}

type Group = (String, DType, DType);

/// Prefill and decode workers per (engine, weights, KV) group, 1D sharding
/// only, in a fixed order (ties between plans keep it): the fastest decode
/// layout per (chips, batch), and the fastest prefill layout per chip count
/// unless one with fewer chips is as fast (more chips must prefill faster
/// to be worth a try).
fn workers(pts: &[InferPoint]) -> Vec<(Group, Vec<Worker>, Vec<Worker>)> {
    type Pools = (BTreeMap<u64, Worker>, BTreeMap<[u64; 2], Worker>);
    let mut g: BTreeMap<(String, &'static str, &'static str), (Group, Pools)> = BTreeMap::new();
    for p in pts.iter().filter(|p| p.sharding == Sharding::OneD) {
        let key = (p.engine.clone(), p.weights_dtype.name(), p.kv_dtype.name());
        let (_, e) = g.entry(key).or_insert_with(|| {
            (
                (p.engine.clone(), p.weights_dtype, p.kv_dtype),
                Pools::default(),
            )
        });
        let w = |time_s| Worker {
            tp: p.tp,
            ep: p.ep,
            pp: p.pp,
            batch: p.batch,
            time_s,
        };
        let c = p.tp * p.ep * p.pp;
        if p.batch == 1 {
            let x = e.0.entry(c).or_insert(w(p.ttft_s));
            if p.ttft_s < x.time_s {
                *x = w(p.ttft_s);
            }
        }
        let x = e.1.entry([c, p.batch]).or_insert(w(p.tpot_s));
        if p.tpot_s < x.time_s {
            *x = w(p.tpot_s);
        }
    }
    g.into_values()
        .map(|(k, (a, b))| {
            let mut best = f64::INFINITY;
            let pre: Vec<Worker> = a
                .into_values()
                .filter(|w| {
                    let keep = w.time_s < best;
                    best = best.min(w.time_s);
                    keep
                })
                .collect();
            (k, pre, b.into_values().collect())
        })
        .collect()
}

/// Decode worker counts tried: powers of two up to `max`, and `max`.
fn decode_counts(max: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..63)
        .map(|k| 1u64 << k)
        .take_while(|c| *c <= max)
        .collect();
    if max > 0 && !v.contains(&max) {
        v.push(max);
    }
    v
}

/// Every disaggregated plan the budget allows, from the costed points
/// (`pts`: the aggregated points that fit, before colocation).
pub(crate) fn points(s: &InferSearch, pts: &[InferPoint]) -> Vec<InferPoint> {
    if s.chip.ici.is_some() {
        // TPU slices are not split into pools here (one slice, one layout)
        return Vec::new();
    }
    let (n, exact) = match s.chips {
        ChipBudget::Exactly(n) => (n, true),
        ChipBudget::AtMost(n) => (n, false),
    };
    let n = n.min(s.chip.max_chips().unwrap_or(u64::MAX));
    let mut out = Vec::new();
    for ((engine, wdt, kdt), pre, dec) in workers(pts) {
        let frontend = s
            .engines
            .iter()
            .find(|e| e.name == engine)
            .map_or(0.0, |e| e.frontend_s);
        let req = DisaggRequest {
            gen_len: s.gen_len,
            layers: s.spec.arch.n_layers,
            kv_bytes: kv::bytes_per_sequence(&s.spec.arch, s.prompt_len, kdt, &mut NoTrace).get(),
            frontend_s: frontend,
            kv_overlap: false,
            rate: None,
            percentiles: false,
        };
        for p in &pre {
            for d in &dec {
                let (c_p, c_d) = (p.chips(), d.chips());
                if c_p + c_d > n {
                    continue;
                }
                for w_d in decode_counts((n - c_p) / c_d) {
                    let left = (n - w_d * c_d) / c_p;
                    let w_ps: Vec<u64> = if exact {
                        match (n - w_d * c_d) % c_p {
                            0 => vec![left],
                            _ => Vec::new(),
                        }
                    } else {
                        // around the balance: fewer is prefill-bound, more idles
                        let r_d = w_d as f64 * d.batch as f64
                            / (s.gen_len.saturating_sub(1).max(1) as f64 * d.time_s);
                        let bal = r_d * p.time_s / RHO_MAX;
                        let mut v = vec![
                            (bal.floor() as u64).clamp(1, left),
                            (bal.ceil() as u64).clamp(1, left),
                        ];
                        v.dedup();
                        v
                    };
                    for w_p in w_ps.into_iter().filter(|w| *w >= 1) {
                        let ctx = (&engine, wdt, kdt, &req);
                        out.push(point(s, ctx, (p, w_p), (d, w_d)));
                    }
                }
            }
        }
    }
    out
}

fn point(
    s: &InferSearch,
    (engine, wdt, kdt, req): (&String, DType, DType, &DisaggRequest),
    (p, w_p): (&Worker, u64),
    (d, w_d): (&Worker, u64),
) -> InferPoint {
    let (c_p, c_d) = (p.chips(), d.chips());
    let total = w_p * c_p + w_d * c_d;
    let link = disagg::kv_link(s.chip, (c_p, c_d), total);
    let t = PoolTimes {
        prefill_s: p.time_s,
        decode_step_s: d.time_s,
        decode_batch: d.batch,
        chips: (c_p, c_d),
        workers: (w_p, w_d),
    };
    let x = compose(&t, req, &link, &mut NoTrace);
    let pool = |w: &Worker, workers, batch| PoolLayout {
        tp: w.tp,
        ep: w.ep,
        pp: w.pp,
        workers,
        batch,
    };
    let plan = DisaggPlan {
        prefill: pool(p, w_p, None),
        decode: pool(d, w_d, Some(d.batch)),
        prefill_capacity_requests_per_s: x.prefill_capacity_requests_per_s,
        decode_capacity_requests_per_s: x.decode_capacity_requests_per_s,
        bound_by: x.bound_by.clone(),
        kv_link: link.level.clone(),
        kv_transfer_s: x.kv_transfer_s,
    };
    let g = gcd(w_p, w_d).max(1);
    InferPoint {
        mesh: vec![total],
        chips: total,
        tp: d.tp,
        ep: d.ep,
        pp: d.pp,
        replicas: g,
        sharding: Sharding::OneD,
        weights_dtype: wdt,
        kv_dtype: kdt,
        engine: engine.clone(),
        batch: d.batch,
        tpot_s: x.tpot_s,
        ttft_s: x.ttft_s.mean,
        tokens_per_s_per_chip: x.output_tokens_per_s_per_chip,
        tokens_per_s: x.output_tokens_per_s,
        tokens_per_s_per_user: x.output_tokens_per_s_per_user,
        cost_per_million_tokens_usd: s
            .chip
            .usd_per_chip_hour
            .map(|u| latency::cost_per_million(total, u, x.output_tokens_per_s, &mut NoTrace)),
        meets_slo: true,
        replica_options: vec![g],
        dtype_variants: Vec::new(),
        disagg: Some(plan),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        assert_eq!(DisaggMode::parse("on").unwrap(), DisaggMode::On);
        assert_eq!(DisaggMode::parse("both").unwrap(), DisaggMode::On);
        assert_eq!(DisaggMode::parse("only").unwrap(), DisaggMode::Only);
        assert!(DisaggMode::parse("maybe").is_err());
        assert_eq!(decode_counts(6), vec![1, 2, 4, 6]);
    }
}
