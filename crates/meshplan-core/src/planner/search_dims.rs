//! `plan train` over the global batch and the compute dtype (issue 25):
//! one search per (batch, dtype) of [`SearchDims::variants`], merged into
//! one ranking.
//!
//! Why several searches, not a wider one: the batch and the dtype are the
//! job's inputs to every candidate (`TrainCtx` — FLOPs, bytes, sequences —
//! is built once per search), so each variant is the default search of its
//! own workload, and the default search (and its benchmark) is untouched.
//!
//! The merge is exact: each search keeps its best K by its key, and the
//! merged key restricted to one search is that key over a constant (the
//! batch), so the best K of the union are among the searches' best K. With
//! more than one batch the key is **per token**: the objective's time over
//! the plan's batch B (for `time`, the pessimistic end of the step-time
//! interval / B; `cost` is already per token) — a plan at a larger batch
//! ranks first only when it trains faster per token, and then with its batch
//! in the row. Ties: the rest of the key (per token), then the variant order
//! (the requested batch and dtype first), then the search's own order.

use std::cmp::Ordering;

use super::regime::Regime;
use super::report::{
    derive_plan, entry, extrapolation, fix_for, job_outside, no_plan_verdict, profile_label,
    PlanEntry, PlanTrainReport, PlanTrainRequest, PlanVariant, SearchedDims, REFERENCE_TOKENS,
};
use super::space::Variant;
use super::train::{Found, TrainObjective, TrainResult, TrainSearch};
use crate::mesh::Topology;
use crate::parallelism::TrainConfig;
use crate::training::{RejectReason, TrainCtx};
use crate::units::DType;

/// One variant's search and its result.
struct Sub<'a> {
    variant: Variant,
    base: TrainConfig,
    search: TrainSearch<'a>,
    res: TrainResult,
}

/// A found plan of sub-search `sub`, with its merged key.
#[derive(Clone, Copy)]
struct Ranked {
    key: [f64; 4],
    sub: usize,
    at: usize,
    f: Found,
}

/// The merged key of a plan found at batch `b`: the search's key
/// (`train::key_of`), its step times per token when `per_token` — `time`:
/// the pessimistic end, the point prediction and the lower bound (or the
/// lower and upper bounds without prediction); `cost`: the ties after the
/// first, which is already per token; `memory-headroom`: the times after
/// the headroom. Memory per chip stays as it is (a tie, not a rate).
fn merged_key(obj: TrainObjective, f: &Found, b: u64, per_token: bool) -> [f64; 4] {
    let mut k = f.key();
    if !per_token {
        return k;
    }
    let b = b.max(1) as f64;
    let times: &[usize] = match (obj, f.pred.is_some()) {
        (TrainObjective::Time, true) => &[0, 1, 2],
        (TrainObjective::Time, false) => &[0, 1],
        (TrainObjective::Cost, true) => &[1, 2],
        (TrainObjective::Cost, false) => &[1],
        (TrainObjective::MemoryHeadroom, true) => &[1, 2, 3],
        (TrainObjective::MemoryHeadroom, false) => &[1, 2],
    };
    for &i in times {
        k[i] /= b;
    }
    k
}

fn order(a: &Ranked, b: &Ranked) -> Ordering {
    for i in 0..4 {
        match a.key[i].total_cmp(&b.key[i]) {
            Ordering::Equal => {}
            x => return x,
        }
    }
    (a.sub, a.at).cmp(&(b.sub, b.at))
}

/// Whether the search of dtype `d` flags its plans: the dtype is searched
/// (more than one) and lies outside the profile's fitted dtypes.
fn dtype_flagged(req: &PlanTrainRequest, d: DType, searched: bool) -> bool {
    let ranges = req
        .workload
        .profile
        .as_ref()
        .and_then(|p| p.profile.fitted_on.as_ref());
    searched && ranges.is_some_and(|r| !r.dtype.contains(&d.to_string()))
}

/// The figures of a plan comparable across batches.
fn variant_of(v: &Variant, f: &Found, requested: &TrainConfig, n_tokens: u64) -> PlanVariant {
    let b = v.batch_tokens.max(1) as f64;
    let step = f.step_time();
    let pessimistic = f.pred.map_or(f.eval.lower, |p| p.interval.hi_s);
    let n = n_tokens as f64;
    PlanVariant {
        batch_tokens: v.batch_tokens,
        batch_vs_requested: b / requested.batch_tokens.max(1) as f64,
        compute_dtype: v.compute_dtype,
        dtype_changed: v.compute_dtype != requested.compute_dtype,
        tokens_per_s: b / step,
        time_to_n_tokens_s: n * step / b,
        ranked_time_to_n_tokens_s: n * pessimistic / b,
    }
}

/// How a plan's figures across batches are formed (`--explain`): tokens/s
/// and the ranking key as a time to N tokens, in the book's symbols.
fn per_token_steps(v: &PlanVariant, f: &Found, n: u64) -> Vec<crate::trace::Step> {
    use crate::trace::Step;
    let t = f.step_time();
    let t_rank = f.pred.map_or(f.eval.lower, |p| p.interval.hi_s);
    let b = v.batch_tokens as f64;
    vec![
        Step::new(
            "plan.tokens_per_s",
            "Tokens per second of the plan at its global batch",
            "tokens/s = B / t_step",
        )
        .bind("B", b, "tokens")
        .bind("t_step", t, "s")
        .result(v.tokens_per_s, "tokens/s")
        .source("docs/planner.md, Global batch and dtype"),
        Step::new(
            "plan.ranked_time_to_n_tokens",
            "The ranking key per token, as the time to train on N tokens (comparable across batches)",
            "t_N = N · t_rank / B   (t_rank: the pessimistic end the plan is ranked on)",
        )
        .bind("N", n as f64, "tokens")
        .bind("t_rank", t_rank, "s")
        .bind("B", b, "tokens")
        .result(v.ranked_time_to_n_tokens_s, "s")
        .source("docs/planner.md, Global batch and dtype"),
    ]
}

/// The plan's entry with its variant and, when its dtype is searched and
/// outside the fitted dtypes, that flag.
fn ranked_entry(
    req: &PlanTrainRequest,
    subs: &[Sub<'_>],
    r: &Ranked,
    rank: usize,
    dtypes_searched: bool,
    n_tokens: u64,
) -> PlanEntry {
    let s = &subs[r.sub];
    let rep = s.search.report(&s.res, &r.f);
    let mut e = entry(rank, &r.f, rep, &req.workload.chip, &s.res);
    if r.f.pred.is_some() && dtype_flagged(req, s.variant.compute_dtype, dtypes_searched) {
        let dtype = super::regime::job_outside(&e.report)
            .into_iter()
            .find(|o| o.input == "dtype")
            .map(|o| format!("dtype {}", o.describe()));
        e.regime.extend(dtype);
    }
    e.variant = Some(variant_of(&s.variant, &r.f, &req.workload.base, n_tokens));
    e
}

/// The job's inputs outside the fitted ranges, without the dtype when the
/// search varies it (each plan's flag then).
fn job_note(p: &PlanEntry, dtypes_searched: bool) -> Option<String> {
    if !dtypes_searched {
        return job_outside(p);
    }
    p.report.predicted.as_ref()?.outside_fitted_range.as_ref()?;
    let o: Vec<String> = super::regime::job_outside(&p.report)
        .into_iter()
        .filter(|o| o.input != "dtype")
        .map(|o| format!("{} {}", o.input, o.describe()))
        .collect();
    (!o.is_empty()).then(|| o.join(", "))
}

/// Search every variant on `topo` and merge (see the module).
pub(super) fn plan_variants(
    req: &PlanTrainRequest,
    topo: Topology,
    variants: &[Variant],
    note: Option<String>,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> crate::Result<PlanTrainReport> {
    let w = &req.workload;
    let k = req.top.max(1).max(req.explain_rank.unwrap_or(0));
    let batches = distinct(variants.iter().map(|v| v.batch_tokens));
    let dtypes = distinct(variants.iter().map(|v| v.compute_dtype));
    let (per_token, dtypes_searched) = (batches.len() > 1, dtypes.len() > 1);
    let nv = variants.len() as u64;
    let mut subs = Vec::with_capacity(variants.len());
    for (i, v) in variants.iter().enumerate() {
        let base = TrainConfig {
            batch_tokens: v.batch_tokens,
            compute_dtype: v.compute_dtype,
            ..w.base
        };
        let mut search = req.search(topo.clone(), base, k);
        if dtype_flagged(req, v.compute_dtype, dtypes_searched) {
            search.searched_flags = Regime::searched_dtype();
        }
        let i = i as u64;
        let res = search.run_with_progress(&|d, t| progress(i * t + d, nv * t));
        subs.push(Sub {
            variant: *v,
            base,
            search,
            res,
        });
    }
    if subs
        .iter()
        .any(|s| s.res.predicted != subs[0].res.predicted)
    {
        return Err(crate::Error::Invalid(
            "the batches or dtypes asked for cannot all be predicted (one would rank by roofline bounds, the others by predictions): search them separately".into(),
        ));
    }
    let rank_of = |sub: usize, at: usize, f: &Found| Ranked {
        key: merged_key(req.objective, f, subs[sub].variant.batch_tokens, per_token),
        sub,
        at,
        f: *f,
    };
    let mut all: Vec<Ranked> = subs
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.res.plans.iter().enumerate().map(move |(j, f)| (i, j, f)))
        .map(|(i, j, f)| rank_of(i, j, f))
        .collect();
    all.sort_by(order);
    all.truncate(k);
    let n_tokens = w.base.train_tokens.unwrap_or(REFERENCE_TOKENS).max(1);
    let first = &subs[0];
    let derivation = match req.explain_rank {
        Some(rank) => {
            let Some(r) = all.get(rank.saturating_sub(1)) else {
                return Err(crate::Error::Invalid(format!(
                    "--explain-rank {rank}: the search found {} plan(s)",
                    all.len()
                )));
            };
            let s = &subs[r.sub];
            let mut steps = derive_plan(req, &s.base, &s.res.topologies[r.f.topo], &r.f);
            let n = w.base.train_tokens.unwrap_or(REFERENCE_TOKENS).max(1);
            steps.extend(per_token_steps(
                &variant_of(&s.variant, &r.f, &w.base, n),
                &r.f,
                n,
            ));
            Some(steps)
        }
        None => None,
    };
    let plans: Vec<PlanEntry> = all
        .iter()
        .take(req.top.max(1))
        .enumerate()
        .map(|(i, r)| ranked_entry(req, &subs, r, i + 1, dtypes_searched, n_tokens))
        .collect();
    // the best rejected plan over every variant, when it beats the winner
    let best_rejected = subs
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.res.best_rejected.as_ref().map(|f| rank_of(i, 0, f)))
        .min_by(order)
        .filter(|b| all.first().map_or(true, |w| order(b, w) == Ordering::Less))
        .or_else(|| {
            first
                .res
                .closest_rejected
                .as_ref()
                .map(|f| rank_of(0, 0, f))
        });
    let hbm_of = |s: &Sub<'_>| {
        TrainCtx::quiet(
            &w.spec,
            &w.chip,
            &s.base,
            w.profile.as_ref().map(|p| p.profile.memory_calibration()),
        )
        .hbm
    };
    let (verdict, suggestions) = if all.is_empty() {
        (
            Some(no_plan_verdict(req, &topo, &first.res, hbm_of(first))),
            req.suggestions(Some(&topo), topo.chips()),
        )
    } else {
        (None, Vec::new())
    };
    let sum = |f: fn(&TrainResult) -> u64| subs.iter().map(|s| f(&s.res)).sum::<u64>();
    let predicted = first.res.predicted;
    Ok(PlanTrainReport {
        model: w.spec.name.clone(),
        chip: w.chip.name.clone(),
        mesh: Some(topo.describe()),
        chips: topo.chips(),
        batch_tokens: w.base.batch_tokens,
        seq_len: w.base.seq_len,
        objective: req.objective,
        framework: w.base.framework,
        candidates: sum(|r| r.candidates),
        evaluated: sum(|r| r.evaluated),
        dominated: sum(|r| r.dominated),
        degree_tuples: sum(|r| r.tuples),
        fitting: sum(|r| r.fitting),
        search_time_s: subs.iter().map(|s| s.res.elapsed.as_secs_f64()).sum(),
        ranked_by_prediction: predicted,
        profile: w.profile.as_ref().filter(|_| predicted).map(profile_label),
        prediction_note: first.res.prediction_note.clone(),
        extrapolation_note: extrapolation(req, &topo).filter(|_| predicted),
        job_outside_fitted_range: plans.first().and_then(|p| job_note(p, dtypes_searched)),
        rejected: RejectReason::ALL
            .iter()
            .map(|r| {
                let n = subs.iter().map(|s| s.res.rejected_for(*r)).sum::<u64>();
                (r.key().to_string(), n)
            })
            .collect(),
        best_rejected_fix: best_rejected.as_ref().map(|r| {
            let s = &subs[r.sub];
            fix_for(&r.f, hbm_of(s), s.variant.batch_tokens)
        }),
        best_rejected: best_rejected
            .as_ref()
            .map(|r| ranked_entry(req, &subs, r, 0, dtypes_searched, n_tokens)),
        plans,
        verdict,
        suggestions,
        derivation,
        searched: Some(SearchedDims {
            batches_tokens: batches,
            dtypes,
            reference_tokens: n_tokens,
            ranked_per_token: per_token,
            note,
        }),
    })
}

/// The distinct values, in their first order.
fn distinct<T: PartialEq>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}
