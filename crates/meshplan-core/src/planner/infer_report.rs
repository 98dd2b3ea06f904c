//! The report of `meshplan plan infer` ([`PlanInferReport`]): the best
//! serving points under the SLOs with their full inference reports, the
//! Pareto front, the rejections and — when nothing qualifies — the verdict.

use std::collections::BTreeMap;

use serde::Serialize;

use super::infer::{ChipBudget, InferObjective, InferPoint, InferReject, InferSearch};
use super::infer_disagg::DisaggMode;
use crate::hardware::{fmt_shape, Chip};
use crate::inference::serving::disagg::{self, DisaggSpec};
use crate::inference::{self, InferReport};
use crate::model::ModelSpec;
use crate::trace::{Recorder, Step};
use crate::units::{fmt_int, fmt_si, sig4, sig4_grouped};
use crate::view::{Doc, Render, Table};

/// One ranked serving point with its report.
#[derive(Clone, Debug, Serialize)]
pub struct InferPlanEntry {
    /// Rank (1 = best).
    pub rank: usize,
    /// The point's inference report.
    #[serde(flatten)]
    pub report: InferReport,
}

/// The result of a serving-plan search.
#[derive(Clone, Debug, Serialize)]
pub struct PlanInferReport {
    /// Model name.
    pub model: String,
    /// Chip name.
    pub chip: String,
    /// "8 chips" or "up to 16 chips".
    pub budget: String,
    /// Objective.
    pub objective: InferObjective,
    /// Prompt tokens.
    pub prompt_len: u64,
    /// Generated tokens.
    pub gen_len: u64,
    /// TTFT SLO (s).
    pub ttft_slo_s: Option<f64>,
    /// TPOT SLO (s).
    pub tpot_slo_s: Option<f64>,
    /// The weight and KV dtypes searched, and why.
    pub dtypes: String,
    /// Aggregated, disaggregated or both (`--disagg`).
    pub disagg: DisaggMode,
    /// The scenario's `[inference]` keys the search does not use
    /// ("workload = concurrency=64"): said, not dropped silently.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_searched: Vec<String>,
    /// Slice shapes tried.
    pub slices: Vec<String>,
    /// Points of the space.
    pub candidates: u64,
    /// Points that fit.
    pub fitting: u64,
    /// Wall time.
    pub search_time_s: f64,
    /// Rejections by reason.
    pub rejected: BTreeMap<String, u64>,
    /// The points ranked by the objective (ties: lower TPOT, then fewer
    /// chips, then the enumeration order).
    pub points: Vec<InferPoint>,
    /// The full reports of the best points (a disaggregated plan: its
    /// decode pool's; the pools are in `points[].disagg`).
    pub plans: Vec<InferPlanEntry>,
    /// The Pareto front of TPOT against tokens/s per chip.
    pub pareto: Vec<InferPoint>,
    /// Why there is no plan.
    pub verdict: Option<String>,
    /// The derivation of the plan asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derivation: Option<Vec<Step>>,
}

/// Chips to hold the weights alone at one byte per parameter.
fn min_chips_int8(spec: &ModelSpec, chip: &Chip) -> u64 {
    let p = crate::model::params::count(&spec.arch, &mut crate::trace::NoTrace);
    (p.total as f64 / chip.hbm_capacity.get()).ceil().max(1.0) as u64
}

fn verdict(s: &InferSearch, r: &super::InferResult) -> Option<String> {
    if !r.plans.is_empty() {
        return None;
    }
    Some(if !r.slice_reasons.is_empty() {
        r.slice_reasons.join("; ")
    } else if r.fitting == 0 {
        format!(
            "{} does not fit on any layout of {}: the weights plus one {}-token sequence exceed HBM even at int8; use more chips (≥ {} by memory alone) or a smaller context",
            s.spec.name,
            s.chip.name,
            s.prompt_len + s.gen_len,
            min_chips_int8(s.spec, s.chip)
        )
    } else {
        let fastest = r.pareto.first();
        format!(
            "{} layouts fit but none meets the SLOs; the lowest TPOT reachable is {} (TTFT {}) — relax the SLOs or add chips",
            fmt_int(r.fitting),
            fastest.map_or("?".into(), |p| fmt_si(p.tpot_s, "s")),
            fastest.map_or("?".into(), |p| fmt_si(p.ttft_s, "s")),
        )
    })
}

/// Run a built serving search and build its report (`explain_rank`: derive
/// the plan of that rank). Front ends call
/// [`super::infer_request::plan_infer`], which validates the request first.
pub fn plan_infer_search(
    s: &InferSearch,
    top: usize,
    explain_rank: Option<usize>,
) -> crate::Result<PlanInferReport> {
    let r = s.run();
    let derivation = match explain_rank {
        None => None,
        Some(rank) => {
            let Some(p) = r.plans.get(rank.saturating_sub(1)) else {
                return Err(crate::Error::Invalid(format!(
                    "--explain-rank {rank}: the search found {} plan(s)",
                    r.plans.len()
                )));
            };
            let mut rec = Recorder::default();
            match &p.disagg {
                // a disaggregated plan: both workers and the composition
                Some(d) => {
                    let spec = DisaggSpec {
                        prefill: d.prefill,
                        decode: d.decode,
                        kv_overlap: false,
                    };
                    disagg::evaluate(s.spec, s.chip, &p.query(s), &spec, &mut rec)?;
                }
                None => {
                    inference::evaluate(s.spec, s.chip, &p.query(s), &mut rec)?;
                }
            }
            Some(rec.into_steps())
        }
    };
    let plans = r
        .plans
        .iter()
        .take(top.max(1))
        .filter_map(|p| s.report(p).ok())
        .enumerate()
        .map(|(i, report)| InferPlanEntry {
            rank: i + 1,
            report,
        })
        .collect();
    Ok(PlanInferReport {
        model: s.spec.name.clone(),
        chip: s.chip.name.clone(),
        budget: match s.chips {
            ChipBudget::Exactly(n) => format!("{n} chips"),
            ChipBudget::AtMost(n) => format!("up to {n} chips"),
        },
        objective: s.objective,
        prompt_len: s.prompt_len,
        gen_len: s.gen_len,
        ttft_slo_s: s.ttft_slo,
        tpot_slo_s: s.tpot_slo,
        dtypes: s.dtypes_note(),
        disagg: s.disagg,
        not_searched: Vec::new(),
        slices: r.slices.iter().map(|x| fmt_shape(x)).collect(),
        candidates: r.candidates,
        fitting: r.fitting,
        search_time_s: r.elapsed.as_secs_f64(),
        rejected: InferReject::ALL
            .iter()
            .map(|x| (x.key().to_string(), r.rejected_for(*x)))
            .collect(),
        verdict: verdict(s, &r),
        points: r.plans.iter().take(top.max(1)).cloned().collect(),
        pareto: r.pareto,
        plans,
        derivation,
    })
}

/// "1" or "1 (2, 4)": the point's replicas, then the other replica counts
/// of the same plan.
fn replicas_cell(p: &InferPoint) -> String {
    let others: Vec<String> = p
        .replica_options
        .iter()
        .filter(|r| **r != p.replicas)
        .map(|r| r.to_string())
        .collect();
    if others.is_empty() {
        p.replicas.to_string()
    } else {
        format!("{} ({})", p.replicas, others.join(", "))
    }
}

fn points_table(points: &[InferPoint], every: usize) -> Table {
    let mut t = Table::new(
        &[
            "#",
            "serving",
            "mesh",
            "tp",
            "ep",
            "pp",
            "replicas",
            "layout",
            "weights",
            "kv",
            "engine",
            "batch",
            "TPOT",
            "TTFT",
            "tok/s/chip",
            "tok/s/user",
            "$/Mtok",
            "also",
        ],
        &[
            "#",
            "tp",
            "ep",
            "pp",
            "replicas",
            "batch",
            "TPOT",
            "TTFT",
            "tok/s/chip",
            "tok/s/user",
            "$/Mtok",
        ],
    );
    let n = points.len();
    let any_disagg = points.iter().any(|p| p.disagg.is_some());
    for (i, p) in points.iter().enumerate() {
        if i % every != 0 && i + 1 != n {
            continue;
        }
        t.row(vec![
            (i + 1).to_string(),
            if any_disagg {
                p.serving()
            } else {
                String::new()
            },
            fmt_shape(&p.mesh),
            p.tp.to_string(),
            p.ep.to_string(),
            p.pp.to_string(),
            replicas_cell(p),
            p.sharding.to_string(),
            p.weights_dtype.name().into(),
            p.kv_dtype.name().into(),
            p.engine.clone(),
            p.batch.to_string(),
            fmt_si(p.tpot_s, "s"),
            fmt_si(p.ttft_s, "s"),
            sig4_grouped(p.tokens_per_s_per_chip),
            sig4_grouped(p.tokens_per_s_per_user),
            p.cost_per_million_tokens_usd.map_or("-".into(), sig4),
            if p.dtype_variants.is_empty() {
                "-".into()
            } else {
                p.dtype_variants.join(", ")
            },
        ]);
    }
    if n > 0 {
        t.drop_empty_columns()
    } else {
        t
    }
}

impl Render for PlanInferReport {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        let slo = |x: Option<f64>, k: &str| {
            x.map_or(String::new(), |v| format!(", {k} ≤ {}", fmt_si(v, "s")))
        };
        d.title(format!(
            "{} on {} ({}), prompt {} + generate {} tokens, objective {}{}{}",
            self.model,
            self.chip,
            self.budget,
            self.prompt_len,
            self.gen_len,
            self.objective,
            slo(self.ttft_slo_s, "TTFT"),
            slo(self.tpot_slo_s, "TPOT"),
        ));
        d.line(format!(
            "searched {} candidates over {} slice shape(s) in {}; {} fit",
            fmt_int(self.candidates),
            self.slices.len(),
            fmt_si(self.search_time_s, "s"),
            fmt_int(self.fitting)
        ));
        d.line(format!("dtypes: {}", self.dtypes));
        if !self.not_searched.is_empty() {
            d.line(format!(
                "not searched: {} (scenario keys for `infer`: the search chooses each plan's batch and layout and prices it with its own prefill on its chips)",
                self.not_searched.join(", ")
            ));
        }
        if self.disagg != DisaggMode::Off {
            d.line(format!(
                "serving: {} (--disagg {}); aggregated plans priced with their prefill on the same chips (R = 1/(s_1 + (T_out − 1)·t_d/B), TPOT = t_d/(1 − R·s_1)); P/D = prefill/decode pools, tp×workers; KV handed off after the prefill",
                match self.disagg {
                    DisaggMode::Only => "disaggregated only",
                    _ => "aggregated and disaggregated",
                },
                self.disagg
            ));
        }
        d.table(points_table(&self.points, 1));
        d.line(self.objective.ranking());
        d.line(format!(
            "Pareto front (TPOT vs tokens/s per chip, all fitting points): {} points",
            self.pareto.len()
        ));
        d.table(points_table(&self.pareto, (self.pareto.len() / 8).max(1)));
        let rej: Vec<String> = InferReject::ALL
            .iter()
            .filter_map(|x| {
                let n = *self.rejected.get(x.key())?;
                (n > 0).then(|| format!("{} ({})", fmt_int(n), x.describe()))
            })
            .collect();
        if !rej.is_empty() {
            d.line(format!("rejected: {}", rej.join("; ")));
        }
        if let Some(v) = &self.verdict {
            d.verdict(false, "VERDICT", v.clone(), Vec::new());
        }
        d
    }
}
