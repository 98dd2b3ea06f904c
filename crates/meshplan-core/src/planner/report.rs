//! The report of `meshplan plan train` ([`PlanTrainReport`]): the ranked
//! plans with their full training reports, the rejections by reason, and —
//! when nothing fits — the verdict, what the closest plan lacks and what
//! would make something fit (more chips, a smaller batch, lower precision),
//! found by searching again with one thing changed.

use std::collections::BTreeMap;

use serde::Serialize;

use super::space::SearchDims;
use super::train::{Found, TrainObjective, TrainResult, TrainSearch};
use crate::hardware::{Chip, ChipKind};
use crate::mesh::{Mesh, Topology};
use crate::parallelism::{Choice, Degrees, Remat, Schedule, TrainConfig};
use crate::step::predict::ActiveProfile;
use crate::trace::{Recorder, Step};
use crate::training::scenario::{topology_for_chips, Workload};
use crate::training::{analyze, CommEntry, RejectReason, TrainReport};
use crate::units::{fmt_int, fmt_si, DType};

/// Most evenly spaced batch sizes the "what would fit" pass probes before
/// bisecting (with the 4 chip counts and bisection's ≤ 4 more, the pass is
/// at most ~12 lean probes and 3 full searches, whatever the batch).
const BATCH_PROBES: u32 = 4;

/// What to search for.
#[derive(Clone, Debug)]
pub struct PlanTrainRequest {
    /// Model, chip, topology, workload and profile.
    pub workload: Workload,
    /// Objective.
    pub objective: TrainObjective,
    /// Plans to list.
    pub top: usize,
    /// Worker threads (None = all cores, capped to the machine).
    pub threads: Option<usize>,
    /// Also derive the plan ranked N (1 = best).
    pub explain_rank: Option<usize>,
    /// Set, every search of the request (the plans and the "what would
    /// fit" pass) stops at its next degree tuple (the web server sets it
    /// when the client leaves); None: run to the end.
    pub cancel: Option<super::train::Cancel>,
}

/// One ranked plan: its choices and its full training report.
#[derive(Clone, Debug, Serialize)]
pub struct PlanEntry {
    /// Rank (1 = best; 0 for the best rejected plan).
    pub rank: usize,
    /// Objective value (lower is better).
    pub score: f64,
    /// ZeRO stage.
    pub zero: u8,
    /// Remat policy.
    pub remat: Remat,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Micro-batches (pipeline, or gradient accumulation when pp = 1).
    pub microbatches: u64,
    /// Virtual stages.
    pub virtual_stages: u64,
    /// Sequence parallelism.
    pub sequence_parallel: bool,
    /// Where each logical axis landed.
    pub axis_placement: Vec<(String, String)>,
    /// The longest collective ("AllGather fsdp: … (12.3 ms)").
    pub leading_collective: Option<String>,
    /// Predicted step time (s).
    pub predicted_step_time_s: Option<f64>,
    /// Predicted MFU.
    pub predicted_mfu: Option<f64>,
    /// The step-time interval the plan was ranked by, seconds `[lo, hi]`:
    /// the held-out p10–p90, widened by `regime::UNVALIDATED_FACTOR` when
    /// the plan is flagged; the search ranks by `hi` (`None` without a
    /// prediction).
    pub ranking_interval_s: Option<[f64; 2]>,
    /// The plan's flags: plan-level inputs outside the profile's fitted
    /// ranges and a TP group across nodes ("tp 16 across nodes", "cp 16
    /// (fitted: 1)"); empty: a validated layout.
    pub regime: Vec<String>,
    /// The plan's batch and dtype with the figures comparable across
    /// batches, when the search varies them (`--max-global-batch`,
    /// `--dtypes`, `--allow-fp8`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<PlanVariant>,
    /// The plan's training report.
    #[serde(flatten)]
    pub report: TrainReport,
}

/// The result of a training-plan search.
#[derive(Clone, Debug, Serialize)]
pub struct PlanTrainReport {
    /// Model name.
    pub model: String,
    /// Chip name.
    pub chip: String,
    /// The topology searched (None when the chip count has no topology).
    pub mesh: Option<String>,
    /// Chips.
    pub chips: u64,
    /// B.
    pub batch_tokens: u64,
    /// T.
    pub seq_len: u64,
    /// Objective.
    pub objective: TrainObjective,
    /// Framework conventions the plans are accounted under.
    pub framework: crate::parallelism::Framework,
    /// Points of the space.
    pub candidates: u64,
    /// Points that reached the evaluator.
    pub evaluated: u64,
    /// Points skipped: the same plan with fewer gradient-accumulation steps fits.
    pub dominated: u64,
    /// Degree tuples.
    pub degree_tuples: u64,
    /// Points that fit.
    pub fitting: u64,
    /// Wall time of the search.
    pub search_time_s: f64,
    /// Whether the fidelity model's predictions rank the plans.
    pub ranked_by_prediction: bool,
    /// The efficiency profile ("h100 (built-in, infiniband network)").
    pub profile: Option<String>,
    /// Why the times are roofline bounds, when they are.
    pub prediction_note: Option<String>,
    /// The job is larger than the profile was fitted on.
    pub extrapolation_note: Option<String>,
    /// Inputs outside the profile's fitted ranges that every plan shares
    /// (the job's: sequence length, model size, nodes, chip, …), or that the
    /// profile records no ranges; `None` when the job is inside them.
    pub job_outside_fitted_range: Option<String>,
    /// Rejections by reason (`RejectReason::key`).
    pub rejected: BTreeMap<String, u64>,
    /// The ranked plans.
    pub plans: Vec<PlanEntry>,
    /// The best-ranked plan that does not fit (better than the winner, or
    /// the closest to fitting when nothing fits).
    pub best_rejected: Option<PlanEntry>,
    /// What the best rejected plan needs to fit.
    pub best_rejected_fix: Option<String>,
    /// Why there is no plan.
    pub verdict: Option<String>,
    /// What would make something fit.
    pub suggestions: Vec<String>,
    /// The derivation of the plan asked for (`explain_rank`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derivation: Option<Vec<Step>>,
    /// The batches and dtypes searched (`--max-global-batch`, `--dtypes`,
    /// `--allow-fp8`); absent when the search kept the workload's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub searched: Option<SearchedDims>,
}

/// Tokens the time-to-N-tokens figure is for when the workload names none
/// (`[training] train_tokens`): 10¹².
pub const REFERENCE_TOKENS: u64 = 1_000_000_000_000;

/// What `plan train` searched besides the layouts (`searched` in `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct SearchedDims {
    /// Global batches searched, tokens: the requested B, then 2B, 4B, ….
    pub batches_tokens: Vec<u64>,
    /// Compute dtypes searched (the workload's first when listed).
    pub dtypes: Vec<DType>,
    /// N of `time_to_n_tokens_s`: `[training] train_tokens`, else 10¹².
    pub reference_tokens: u64,
    /// Whether plans are ranked per token (more than one batch: the
    /// objective's time divided by each plan's batch), not per step.
    pub ranked_per_token: bool,
    /// Why a dimension asked for was not searched ("--allow-fp8: fp8 not
    /// searched: a100-80gb has no fp8 peak").
    pub note: Option<String>,
}

/// A plan's batch and dtype, and the figures comparable across batches
/// (`plans[].variant`).
#[derive(Clone, Debug, Serialize)]
pub struct PlanVariant {
    /// Global batch B, tokens.
    pub batch_tokens: u64,
    /// B over the requested batch (1: the batch asked for).
    pub batch_vs_requested: f64,
    /// Compute dtype of the GEMMs.
    pub compute_dtype: DType,
    /// Whether the dtype is not the workload's.
    pub dtype_changed: bool,
    /// B / step time (predicted, else the roofline lower bound), tokens/s.
    pub tokens_per_s: f64,
    /// N / tokens_per_s: seconds to train on `searched.reference_tokens`.
    pub time_to_n_tokens_s: f64,
    /// The pessimistic end of the step-time interval × N / B (the ranking
    /// key per token, as a time to N tokens); the roofline lower bound's
    /// without a prediction.
    pub ranked_time_to_n_tokens_s: f64,
}

/// "dp 16 × tp 8, zero 1, remat full".
pub fn plan_label(deg: &Degrees, c: &Choice) -> String {
    let mut v = Vec::new();
    for (n, x) in [
        ("dp", deg.dp),
        ("fsdp", deg.fsdp),
        ("tp", deg.tp),
        ("pp", deg.pp),
        ("cp", deg.cp),
        ("ep", deg.ep),
    ] {
        if x > 1 {
            v.push(format!("{n} {x}"));
        }
    }
    if v.is_empty() {
        v.push("1 chip".into());
    }
    if deg.etp_differs() {
        v.push(format!("etp {}", deg.etp));
    }
    if !deg.order.is_default() {
        v.push(format!("order {}", deg.order.name()));
    }
    let accumulation = if deg.pp <= 1 && c.microbatches > 1 {
        format!(", {} accumulation steps", c.microbatches)
    } else {
        String::new()
    };
    let offload = if c.offload.any() {
        format!(", offload {}", c.offload)
    } else {
        String::new()
    };
    format!(
        "{}, zero {}, remat {}{accumulation}{offload}",
        v.join(" × "),
        c.zero,
        c.remat
    )
}

/// "1f1b m=8", "interleaved m=8 v=2", "-" without a pipeline.
pub fn schedule_label(deg: &Degrees, c: &Choice) -> String {
    if deg.pp <= 1 {
        return "-".into();
    }
    match c.schedule {
        Schedule::Interleaved => format!("interleaved m={} v={}", c.microbatches, c.virtual_stages),
        s => format!("{s} m={}", c.microbatches),
    }
}

/// The collective that takes longest in a report.
pub fn leading_collective(r: &TrainReport) -> Option<&CommEntry> {
    r.comms
        .iter()
        .max_by(|a, b| a.seconds.get().total_cmp(&b.seconds.get()))
}

pub(super) fn entry(
    rank: usize,
    f: &Found,
    rep: TrainReport,
    chip: &Chip,
    res: &TrainResult,
) -> PlanEntry {
    let axis_placement = Mesh::build(chip, &res.topologies[f.topo], f.deg)
        .axes
        .iter()
        .map(|a| (a.axis.name().to_string(), a.placement.describe()))
        .collect();
    PlanEntry {
        rank,
        score: f.score(),
        zero: f.choice.zero,
        remat: f.choice.remat,
        schedule: f.choice.schedule,
        microbatches: f.choice.microbatches,
        virtual_stages: f.choice.virtual_stages,
        sequence_parallel: f.choice.sp,
        axis_placement,
        leading_collective: leading_collective(&rep)
            .map(|c| format!("{} {}: {} ({})", c.kind, c.axis.name(), c.what, c.seconds)),
        predicted_step_time_s: f.pred.map(|p| p.step_time_s),
        predicted_mfu: f.pred.map(|p| p.mfu),
        ranking_interval_s: f.pred.map(|p| [p.interval.lo_s, p.interval.hi_s]),
        regime: match f.pred {
            Some(_) => super::regime::plan_flags(&rep, &res.topologies[f.topo]),
            None => Vec::new(),
        },
        variant: None,
        report: rep,
    }
}

/// Chip counts worth suggesting near `n` for `chip` (GPU: whole NVLink
/// domains; TPU: offered slice sizes), ascending, at most 4 above `n`.
pub fn nearby_chip_counts(chip: &Chip, n: u64) -> Vec<u64> {
    let mut v: Vec<u64> = match (&chip.ici, chip.kind) {
        (Some(ici), ChipKind::Tpu) => ici
            .slice_shapes
            .iter()
            .map(|s| s.iter().product())
            .collect(),
        _ => {
            let dom = chip.nvlink.as_ref().map_or(1, |x| x.domain_size).max(1);
            let mut s: Vec<u64> = (0..20).map(|k| 1u64 << k).filter(|x| *x <= dom).collect();
            let mut m = dom;
            while s.len() < 64 && m <= n.saturating_mul(64).max(dom) {
                s.push(m);
                m = if m < n {
                    n.div_ceil(dom).saturating_mul(dom)
                } else {
                    m.saturating_mul(2)
                };
            }
            s
        }
    };
    v.sort_unstable();
    v.dedup();
    let max = chip.max_chips().unwrap_or(u64::MAX);
    v.retain(|x| *x > n && *x <= max);
    v.truncate(4);
    v
}

/// What the best rejected plan needs to fit (activations scale with the batch).
pub fn fix_for(f: &Found, hbm: f64, batch: u64) -> String {
    let m = &f.eval.memory;
    let total = m.total_bytes.get();
    let fixed = total - m.activations_bytes.get();
    let over = total - hbm;
    if fixed >= hbm {
        format!(
            "needs {} less per chip: its parameters, gradients, optimizer state and buffers alone ({}) exceed the {} of usable HBM — shard more (higher fsdp/ZeRO/tp/pp) or lower their precision",
            fmt_si(over, "B"),
            fmt_si(fixed, "B"),
            fmt_si(hbm, "B")
        )
    } else {
        let b_max = batch as f64 * (hbm - fixed) / m.activations_bytes.get();
        format!(
            "needs {} less per chip: fits with a batch of at most {} tokens (activations scale with B), with more gradient accumulation, or with a remat policy that saves fewer activations",
            fmt_si(over, "B"),
            fmt_int(b_max.floor() as u64)
        )
    }
}

impl PlanTrainRequest {
    pub(super) fn search<'a>(
        &'a self,
        topo: Topology,
        base: TrainConfig,
        top: usize,
    ) -> TrainSearch<'a> {
        let w = &self.workload;
        let mut s = TrainSearch::new(&w.spec, &w.chip, topo, base);
        s.profile.clone_from(&w.profile);
        s.objective = self.objective;
        s.top_k = top;
        s.threads = self.threads;
        s.cancel.clone_from(&self.cancel);
        if w.offload_auto {
            s.space.offloads = crate::parallelism::Offload::all_combinations().collect();
        }
        if !w.rank_orders.is_empty() {
            s.space.rank_orders.clone_from(&w.rank_orders);
        }
        s
    }

    /// The best plan with one thing changed, if anything fits.
    fn try_fit(&self, topo: Topology, base: TrainConfig) -> Option<(TrainResult, Found)> {
        let r = self.search(topo, base, 1).run();
        let f = *r.plans.first()?;
        Some((r, f))
    }

    /// The largest halved batch (`B/2`, `B/4`, … down to one sequence) that
    /// fits on `t`: [`BATCH_PROBES`] + 1 evenly spaced lean probes, then
    /// bisection over the number of halvings (≤ 4 more probes), then one
    /// full search — a bound independent of the batch (halving one by one
    /// took 33 full searches, ~25 s, for a 4.5·10¹³-token batch).
    fn largest_fitting_batch(&self, t: &Topology) -> Option<(u64, Found)> {
        let w = &self.workload;
        let b0 = w.base.batch_tokens;
        let halved = |k: u32| b0.checked_shr(k).unwrap_or(0);
        let floor = w.base.seq_len.max(1);
        // the most halvings that keep at least one sequence
        let most = (1..64).take_while(|k| halved(*k) >= floor).last()?;
        let with = |k: u32| TrainConfig {
            batch_tokens: halved(k),
            ..w.base
        };
        let fits = |k: u32| self.fits_at_all(t.clone(), with(k));
        // a batch too small for the data ranks fits nowhere, so fitting is a
        // band of halvings, not a prefix: probe a few evenly spaced counts,
        // then bisect between the last that did not fit and the first that did
        let step = most.div_ceil(BATCH_PROBES).max(1);
        let mut lo = 0;
        let mut hi = (1..=most).step_by(step as usize).chain([most]).find(|k| {
            let ok = fits(*k);
            if !ok {
                lo = *k;
            }
            ok
        })?;
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let (_, f) = self.try_fit(t.clone(), with(hi))?;
        Some((halved(hi), f))
    }

    /// Whether anything fits, from a search with block remat only (the
    /// policy that saves the fewest activations; the profile's memory
    /// calibration kept):
    /// what the "what would fit" pass probes with, a fraction of a full
    /// search's cost; the suggestion it leads to is then one full search.
    fn fits_at_all(&self, topo: Topology, base: TrainConfig) -> bool {
        let mut s = self.search(topo, base, 1);
        s.space.remats = vec![Remat::Full];
        !s.run().plans.is_empty()
    }

    /// What would make something fit: more chips, a smaller batch, or
    /// bf16 optimizer state without the fp32 master copy.
    pub(super) fn suggestions(&self, topo: Option<&Topology>, n: u64) -> Vec<String> {
        let w = &self.workload;
        let mut out = Vec::new();
        let more = nearby_chip_counts(&w.chip, n).into_iter().find_map(|m| {
            let t = topology_for_chips(&w.chip, m).ok()?;
            self.fits_at_all(t.clone(), w.base).then_some((m, t))
        });
        if let Some((m, t)) = more {
            if let Some((r, f)) = self.try_fit(t, w.base) {
                out.push(format!(
                    "more chips: {m} ({}) fits, best {} at {} per step",
                    r.topologies[f.topo].describe(),
                    plan_label(&f.deg, &f.choice),
                    step_label(&f)
                ));
            }
        }
        let Some(t) = topo else { return out };
        if let Some((b, f)) = self.largest_fitting_batch(t) {
            out.push(format!(
                "smaller batch: {} tokens fits ({})",
                fmt_int(b),
                plan_label(&f.deg, &f.choice)
            ));
        }
        if w.base.optimizer_dtype.bytes_per_element() > 2.0 || w.base.master_weights {
            let base = TrainConfig {
                optimizer_dtype: DType::Bf16,
                master_weights: false,
                ..w.base
            };
            if let Some((_, f)) = self.try_fit(t.clone(), base) {
                out.push(format!(
                    "lower precision: bf16 optimizer state (no fp32 master copy) fits ({})",
                    plan_label(&f.deg, &f.choice)
                ));
            }
        }
        if out.is_empty() {
            out.push("every remat policy, ZeRO stage and gradient-accumulation count was already tried; none of more chips (up to the next 4 sizes), a batch down to one sequence, or bf16 optimizer state makes it fit".into());
        }
        out
    }
}

/// Step time of a plan: the prediction when there is one, else the roofline lower bound.
pub fn step_label(f: &Found) -> String {
    match f.pred {
        Some(p) => format!(
            "{} (predicted; roofline ≥ {})",
            fmt_si(p.step_time_s, "s"),
            fmt_si(f.eval.lower, "s")
        ),
        None => fmt_si(f.eval.lower, "s"),
    }
}

/// Why nothing could be planned.
pub(super) fn no_plan_verdict(
    req: &PlanTrainRequest,
    topo: &Topology,
    res: &TrainResult,
    hbm: f64,
) -> String {
    let w = &req.workload;
    if !res.topology_reasons.is_empty() {
        return format!(
            "no plan can run on {} {}: {}",
            w.chip.name,
            topo.describe(),
            res.topology_reasons.join("; ")
        );
    }
    if res.evaluated == 0 {
        return format!(
            "no factorization of {} chips satisfies the model's divisibility and the topology ({})",
            topo.chips(),
            RejectReason::ALL
                .iter()
                .filter(|r| res.rejected_for(**r) > 0)
                .map(|r| r.describe())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    let closest = res.closest_rejected.as_ref();
    format!(
        "nothing fits in {} of usable HBM per chip: of {} feasible candidates none fits; the closest ({}) {}",
        fmt_si(hbm, "B"),
        fmt_int(res.evaluated),
        closest.map(|f| plan_label(&f.deg, &f.choice)).unwrap_or_default(),
        closest
            .map(|f| fix_for(f, hbm, w.base.batch_tokens))
            .unwrap_or_default()
    )
}

pub(super) fn profile_label(p: &ActiveProfile) -> String {
    format!("{} ({})", p.profile.chip, p.origin)
}

/// The note when the job is beyond the profile's calibrated size.
pub(super) fn extrapolation(req: &PlanTrainRequest, topo: &Topology) -> Option<String> {
    let w = &req.workload;
    let p = w.profile.as_ref()?;
    let per_node = w.chip.nvlink.as_ref().map_or(1, |n| n.domain_size.max(1));
    let nodes = topo.chips().div_ceil(per_node);
    let max = p.profile.calibrated_max_nodes;
    (max > 0 && nodes > max).then(|| format!(
        "{nodes} nodes is beyond the {max} nodes this profile was fitted on; its job-size terms are held at {max} nodes — treat predicted times as indicative (see docs/fidelity.md)"
    ))
}

/// The job-level inputs outside the fitted ranges, from a ranked plan's
/// report (every plan shares them), or why there are no ranges to check.
pub(super) fn job_outside(p: &PlanEntry) -> Option<String> {
    let pred = p.report.predicted.as_ref()?;
    let Some(_) = &pred.outside_fitted_range else {
        return Some("the profile records no fitted ranges (no validation run covers this chip): every plan is unvalidated".into());
    };
    let o: Vec<String> = super::regime::job_outside(&p.report)
        .into_iter()
        .map(|o| format!("{} {}", o.input, o.describe()))
        .collect();
    (!o.is_empty()).then(|| o.join(", "))
}

/// The report when the chip count has no topology (a TPU size no slice offers).
fn no_topology(req: &PlanTrainRequest, why: &str) -> PlanTrainReport {
    let w = &req.workload;
    let n = w.chips;
    PlanTrainReport {
        model: w.spec.name.clone(),
        chip: w.chip.name.clone(),
        mesh: None,
        chips: n,
        batch_tokens: w.base.batch_tokens,
        seq_len: w.base.seq_len,
        objective: req.objective,
        framework: w.base.framework,
        candidates: 0,
        evaluated: 0,
        dominated: 0,
        degree_tuples: 0,
        fitting: 0,
        search_time_s: 0.0,
        ranked_by_prediction: false,
        profile: None,
        prediction_note: None,
        extrapolation_note: None,
        job_outside_fitted_range: None,
        rejected: BTreeMap::new(),
        plans: Vec::new(),
        best_rejected: None,
        best_rejected_fix: None,
        verdict: Some(why.to_string()),
        suggestions: req.suggestions(None, n),
        derivation: None,
        searched: None,
    }
}

/// Run the search and build the report; `progress(done, total)` is called
/// from worker threads as degree tuples finish.
pub fn plan_train(
    req: &PlanTrainRequest,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> crate::Result<PlanTrainReport> {
    plan_train_with(req, &SearchDims::default(), progress)
}

/// [`plan_train`] that also searches the batch and dtype `dims` asks for
/// (`--max-global-batch`, `--dtypes`, `--allow-fp8`): one search per
/// (batch, dtype), merged (`planner::search_dims`); with `dims` off, the
/// one search of the workload's batch and dtype.
pub fn plan_train_with(
    req: &PlanTrainRequest,
    dims: &SearchDims,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> crate::Result<PlanTrainReport> {
    let w = &req.workload;
    // bad input is refused whether or not the chip count has a topology
    let variants = (!dims.is_off())
        .then(|| dims.variants(&w.chip, &w.base))
        .transpose()?;
    let topo = match &w.topo {
        Ok(t) => t.clone(),
        Err(why) => return Ok(no_topology(req, why)),
    };
    if let Some((v, note)) = variants {
        return super::search_dims::plan_variants(req, topo, &v, note, progress);
    }
    let s = req.search(
        topo.clone(),
        w.base,
        req.top.max(1).max(req.explain_rank.unwrap_or(0)),
    );
    let res = s.run_with_progress(progress);
    let hbm = crate::training::TrainCtx::quiet(
        &w.spec,
        &w.chip,
        &w.base,
        w.profile.as_ref().map(|p| p.profile.memory_calibration()),
    )
    .hbm;
    let derivation = match req.explain_rank {
        Some(rank) => Some(derive(req, &w.base, &res, rank)?),
        None => None,
    };
    let plans: Vec<PlanEntry> = res
        .plans
        .iter()
        .take(req.top.max(1))
        .enumerate()
        .map(|(i, f)| entry(i + 1, f, s.report(&res, f), &w.chip, &res))
        .collect();
    let best_rej = res.best_rejected.or(res.closest_rejected);
    let (verdict, suggestions) = if res.plans.is_empty() {
        (
            Some(no_plan_verdict(req, &topo, &res, hbm)),
            req.suggestions(Some(&topo), topo.chips()),
        )
    } else {
        (None, Vec::new())
    };
    Ok(PlanTrainReport {
        model: w.spec.name.clone(),
        chip: w.chip.name.clone(),
        mesh: Some(topo.describe()),
        chips: topo.chips(),
        batch_tokens: w.base.batch_tokens,
        seq_len: w.base.seq_len,
        objective: req.objective,
        framework: w.base.framework,
        candidates: res.candidates,
        evaluated: res.evaluated,
        dominated: res.dominated,
        degree_tuples: res.tuples,
        fitting: res.fitting,
        search_time_s: res.elapsed.as_secs_f64(),
        ranked_by_prediction: res.predicted,
        profile: w
            .profile
            .as_ref()
            .filter(|_| res.predicted)
            .map(profile_label),
        prediction_note: res.prediction_note.clone(),
        extrapolation_note: extrapolation(req, &topo).filter(|_| res.predicted),
        job_outside_fitted_range: plans.first().and_then(job_outside),
        rejected: RejectReason::ALL
            .iter()
            .map(|r| (r.key().to_string(), res.rejected_for(*r)))
            .collect(),
        plans,
        best_rejected_fix: best_rej
            .as_ref()
            .map(|f| fix_for(f, hbm, w.base.batch_tokens)),
        best_rejected: best_rej.map(|f| entry(0, &f, s.report(&res, &f), &w.chip, &res)),
        verdict,
        suggestions,
        derivation,
        searched: None,
    })
}

/// The derivation of the plan ranked `rank`.
fn derive(
    req: &PlanTrainRequest,
    base: &TrainConfig,
    res: &TrainResult,
    rank: usize,
) -> crate::Result<Vec<Step>> {
    let Some(f) = res.plans.get(rank.saturating_sub(1)) else {
        return Err(crate::Error::Invalid(format!(
            "--explain-rank {rank}: the search found {} plan(s)",
            res.plans.len()
        )));
    };
    Ok(derive_plan(req, base, &res.topologies[f.topo], f))
}

/// The derivation of one found plan of a search of `base` on `topo`.
pub(super) fn derive_plan(
    req: &PlanTrainRequest,
    base: &TrainConfig,
    topo: &Topology,
    f: &Found,
) -> Vec<Step> {
    let w = &req.workload;
    let mut rec = Recorder::default();
    analyze(&w.spec, &w.chip, topo, &f.config(base), &mut rec);
    if let Some(p) = f.pred {
        super::regime::record(p.step_time_s, p.interval, p.regime, &mut rec);
    }
    rec.into_steps()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use crate::training::scenario::resolve_workload;

    fn request(batch_tokens: u64) -> PlanTrainRequest {
        let sc = Scenario::parse(
            &format!(
                "[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n[training]\nbatch_tokens = {batch_tokens}\nseq_len = 4096\n"
            ),
            "test",
        )
        .unwrap();
        PlanTrainRequest {
            workload: resolve_workload(&sc, crate::Catalog::builtin(), None).unwrap(),
            objective: TrainObjective::Time,
            top: 1,
            threads: None,
            explain_rank: None,
            cancel: None,
        }
    }

    /// The bounded pass finds the batch the old one-halving-at-a-time
    /// loop found: the first of B/2, B/4, … (down to one sequence) on which
    /// a full search fits something.
    #[test]
    fn the_bounded_batch_probe_finds_the_largest_fitting_halving() {
        let req = request(1 << 40);
        let t = req.workload.topo.clone().unwrap();
        // the reference: every halving in turn, full searches
        let mut b = req.workload.base.batch_tokens / 2;
        let want = loop {
            assert!(b >= 4096, "no halving fits");
            let base = TrainConfig {
                batch_tokens: b,
                ..req.workload.base
            };
            if req.try_fit(t.clone(), base).is_some() {
                break b;
            }
            b /= 2;
        };
        let (got, _) = req.largest_fitting_batch(&t).unwrap();
        assert_eq!(got, want);
        assert!(want < 1 << 39, "the case must need several halvings");
    }
}
