//! How a [`PlanTrainReport`] reads: what was searched, the ranked plans as
//! one table, the rejections, and the verdict with suggestions.

use super::report::{leading_collective, plan_label, schedule_label, PlanEntry, PlanTrainReport};
use crate::parallelism::Choice;
use crate::training::RejectReason;
use crate::units::{fmt_int, fmt_si, Seconds};
use crate::view::{pct, Doc, Render, Table};

fn choice(p: &PlanEntry) -> Choice {
    Choice {
        zero: p.zero,
        remat: p.remat,
        sp: p.sequence_parallel,
        schedule: p.schedule,
        microbatches: p.microbatches,
        virtual_stages: p.virtual_stages,
        offload: p.report.config.offload,
    }
}

/// The pipeline column: the schedule, or the gradient accumulation; with
/// the stages inside the node, the rank order.
fn pipeline_cell(p: &PlanEntry) -> String {
    let d = &p.report.degrees;
    let cell = if d.pp <= 1 && p.microbatches > 1 {
        format!("accumulate ×{}", p.microbatches)
    } else {
        schedule_label(d, &choice(p))
    };
    match d.order.is_default() {
        true => cell,
        false => format!("{cell} ({})", d.order.name()),
    }
}

/// The degree columns (and ZeRO), right-aligned like every number.
const DEGREE_COLUMNS: [&str; 7] = ["dp", "fsdp", "tp", "pp", "cp", "ep", "zero"];

fn plans_table(r: &PlanTrainReport) -> Table {
    let pred = r.ranked_by_prediction;
    let header = [
        &["#", "mesh"][..],
        &DEGREE_COLUMNS,
        &[
            "remat",
            "pipeline",
            "sp",
            "batch",
            "dtype",
            "mem/chip",
            "step",
            "tok/s",
            "ranked on",
            "roofline ≥",
            "MFU",
            "regime",
            "bound",
            "leading collective",
            "offload (exposed)",
        ],
    ]
    .concat();
    let numeric = [
        &["#"][..],
        &DEGREE_COLUMNS,
        &[
            "batch",
            "mem/chip",
            "step",
            "tok/s",
            "ranked on",
            "roofline ≥",
            "MFU",
        ],
    ]
    .concat();
    let mut t = Table::new(&header, &numeric);
    if pred {
        for (i, h) in header.iter().enumerate() {
            match *h {
                "step" => t.header[i] = "step (pred.)".into(),
                "MFU" => t.header[i] = "MFU (pred.)".into(),
                "tok/s" => t.header[i] = "tok/s (pred.)".into(),
                _ => {}
            }
        }
    }
    for p in &r.plans {
        let (d, rep) = (&p.report.degrees, &p.report);
        t.row(vec![
            p.rank.to_string(),
            rep.mesh.clone(),
            d.dp.to_string(),
            d.fsdp.to_string(),
            d.tp.to_string(),
            d.pp.to_string(),
            d.cp.to_string(),
            d.ep.to_string(),
            p.zero.to_string(),
            p.remat.to_string(),
            pipeline_cell(p),
            if p.sequence_parallel { "yes" } else { "-" }.into(),
            // empty (and the columns dropped) unless the search varies them
            batch_cell(r, p),
            dtype_cell(r, p),
            fmt_si(rep.memory_per_device.total_bytes.get(), "B"),
            fmt_si(
                p.predicted_step_time_s
                    .unwrap_or(rep.step_time_lower_s.get()),
                "s",
            ),
            p.variant
                .as_ref()
                .map(|v| fmt_si(v.tokens_per_s, ""))
                .unwrap_or_default(),
            ranked_on_cell(r, p),
            if pred {
                fmt_si(rep.step_time_lower_s.get(), "s")
            } else {
                String::new()
            },
            pct(p.predicted_mfu.unwrap_or(rep.mfu_at_lower_bound)),
            regime_cell(r, p),
            rep.bound.clone(),
            leading_collective(rep)
                .map(|c| format!("{} {} ({})", c.kind, c.axis.name(), c.seconds))
                .unwrap_or_else(|| "-".into()),
            // empty (and the column dropped) unless the search offloads
            rep.offload
                .map(|o| format!("{} (+{})", o.parts, fmt_si(o.exposed_s, "s")))
                .unwrap_or_default(),
        ]);
    }
    t.drop_empty_columns()
}

/// The batch column when several batches are searched: "8.389M ×2"
/// (tokens, and the factor over the batch asked for).
fn batch_cell(r: &PlanTrainReport, p: &PlanEntry) -> String {
    match (&r.searched, &p.variant) {
        (Some(s), Some(v)) if s.batches_tokens.len() > 1 => format!(
            "{} ×{}",
            fmt_si(v.batch_tokens as f64, ""),
            crate::units::sig4(v.batch_vs_requested)
        ),
        _ => String::new(),
    }
}

/// The dtype column when the dtype is searched or was changed.
fn dtype_cell(r: &PlanTrainReport, p: &PlanEntry) -> String {
    match (&r.searched, &p.variant) {
        (Some(s), Some(v)) if s.dtypes.len() > 1 || v.dtype_changed => v.compute_dtype.to_string(),
        _ => String::new(),
    }
}

/// What the plan was ranked on: the pessimistic end of its step-time
/// interval, or — ranking per token across batches — that end as a time
/// to train on the reference tokens (empty without predictions).
fn ranked_on_cell(r: &PlanTrainReport, p: &PlanEntry) -> String {
    let per_token = r.searched.as_ref().is_some_and(|s| s.ranked_per_token);
    match (per_token, &p.variant, p.ranking_interval_s) {
        (true, Some(v), Some(_)) => Seconds::new(v.ranked_time_to_n_tokens_s).human(),
        (_, _, iv) => iv.map(|[_, hi]| fmt_si(hi, "s")).unwrap_or_default(),
    }
}

/// What the batch and dtype search covered and what plan 1 uses: the batch
/// and dtype are the job's, so a change is said, never silent.
fn searched_lines(r: &PlanTrainReport) -> Vec<String> {
    let Some(s) = &r.searched else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let batches: Vec<String> = s.batches_tokens.iter().map(|b| fmt_int(*b)).collect();
    let dtypes: Vec<String> = s.dtypes.iter().map(|d| d.to_string()).collect();
    out.push(format!(
        "also searched: global batch {} tokens; compute dtype {} (a different batch changes the optimization, a different dtype the numerics: each plan's are in its row)",
        batches.join(", "),
        dtypes.join(", ")
    ));
    if let Some(v) = r.plans.first().and_then(|p| p.variant.as_ref()) {
        let batch = if v.batch_tokens == r.batch_tokens {
            format!("the requested batch ({} tokens)", fmt_int(v.batch_tokens))
        } else {
            format!(
                "batch {} tokens, ×{} the requested {} (not the batch asked for)",
                fmt_int(v.batch_tokens),
                crate::units::sig4(v.batch_vs_requested),
                fmt_int(r.batch_tokens)
            )
        };
        let dtype = if v.dtype_changed {
            format!("dtype {} (not the workload's)", v.compute_dtype)
        } else {
            format!("dtype {}", v.compute_dtype)
        };
        out.push(format!(
            "plan 1 uses {batch} and {dtype}: {} tokens/s, {} for {} tokens",
            crate::units::sig4_grouped(v.tokens_per_s),
            Seconds::new(v.time_to_n_tokens_s).human(),
            fmt_int(s.reference_tokens)
        ));
    }
    out
}

/// How 'ranked on' reads when plans at several batches are ranked per
/// token (empty otherwise).
fn per_token_legend(r: &PlanTrainReport) -> String {
    match &r.searched {
        Some(s) if s.ranked_per_token => format!(
            " × N/B: the time to train on N = {} tokens at the plan's batch B, so that plans at different batches compare ('tok/s' is B / step)",
            fmt_int(s.reference_tokens)
        ),
        _ => String::new(),
    }
}

/// The regime column: "job*" when the job itself is outside the fitted
/// ranges (the note under the table says how), then the plan's own flags;
/// "in range" when there is neither; empty without predictions.
fn regime_cell(r: &PlanTrainReport, p: &PlanEntry) -> String {
    if p.ranking_interval_s.is_none() {
        return String::new();
    }
    let job = r
        .job_outside_fitted_range
        .as_ref()
        .map(|_| "job*".to_string());
    // the fitted range of each flag is in the JSON (`regime`)
    let own = p
        .regime
        .iter()
        .map(|f| f.split(" (fitted:").next().unwrap_or(f).to_string());
    let all: Vec<String> = job.into_iter().chain(own).collect();
    if all.is_empty() {
        "in range".into()
    } else {
        all.join(", ")
    }
}

fn searched_line(r: &PlanTrainReport) -> String {
    format!(
        "searched {} candidates ({} evaluated over {} degree tuples, {} skipped as more gradient accumulation than needed) in {}; {} fit",
        fmt_int(r.candidates),
        fmt_int(r.evaluated),
        fmt_int(r.degree_tuples),
        fmt_int(r.dominated),
        fmt_si(r.search_time_s, "s"),
        fmt_int(r.fitting)
    )
}

fn rejected_line(r: &PlanTrainReport) -> Option<String> {
    let rej: Vec<String> = RejectReason::ALL
        .iter()
        .filter_map(|x| {
            let n = *r.rejected.get(x.key())?;
            (n > 0).then(|| format!("{} ({})", fmt_int(n), x.describe()))
        })
        .collect();
    (!rej.is_empty()).then(|| format!("rejected: {}", rej.join("; ")))
}

impl Render for PlanTrainReport {
    fn doc(&self) -> Doc {
        let r = self;
        let mut d = Doc::new();
        d.title(format!(
            "{} on {} {} ({} chips), batch {} tokens × seq {}, objective {}, {} accounting",
            r.model,
            r.chip,
            r.mesh.as_deref().unwrap_or("-"),
            fmt_int(r.chips),
            fmt_int(r.batch_tokens),
            fmt_int(r.seq_len),
            r.objective,
            r.framework
        ));
        if r.mesh.is_some() {
            d.line(searched_line(r));
        }
        match (&r.prediction_note, &r.profile) {
            (Some(n), _) => {
                d.note(n.clone());
            }
            (None, Some(p)) => {
                d.line(format!(
                    "ranked by predicted step time, pessimistic end (efficiency profile {p}); 'roofline ≥' is the roofline lower bound"
                ));
            }
            (None, None) => {}
        }
        if let Some(n) = &r.extrapolation_note {
            d.note(n.clone());
        }
        if let Some(n) = r.searched.as_ref().and_then(|s| s.note.clone()) {
            d.note(n);
        }
        d.table(plans_table(r));
        if r.ranked_by_prediction && !r.plans.is_empty() {
            d.line(format!(
                "'ranked on' is the pessimistic end of each plan's step-time interval (held-out p90; × {} for a plan with a regime flag: an input outside the profile's fitted ranges, or tp across nodes){}; ties by the point prediction, the roofline bound, memory, then enumeration order (docs/planner.md)",
                super::regime::UNVALIDATED_FACTOR,
                per_token_legend(r)
            ));
        }
        for l in searched_lines(r) {
            d.line(l);
        }
        if let Some(j) = &r.job_outside_fitted_range {
            d.note(format!(
                "job*: every plan is outside the ranges the profile was fitted on (predictions are extrapolations): {j}"
            ));
        }
        if let Some(l) = interval_line(r) {
            d.line(l);
        }
        if let Some(l) = rejected_line(r) {
            d.line(l);
        }
        if let (Some(b), Some(fix)) = (&r.best_rejected, &r.best_rejected_fix) {
            if !r.plans.is_empty() {
                let at = b.variant.as_ref().map_or(String::new(), |v| {
                    format!(
                        " at batch {} tokens, {}",
                        fmt_int(v.batch_tokens),
                        v.compute_dtype
                    )
                });
                d.line(format!(
                    "best rejected plan: {}{at} on {} — {} per step, {} per chip: {fix}",
                    plan_label(&b.report.degrees, &choice(b)),
                    b.report.mesh,
                    fmt_si(
                        b.predicted_step_time_s
                            .unwrap_or(b.report.step_time_lower_s.get()),
                        "s"
                    ),
                    fmt_si(b.report.memory_per_device.total_bytes.get(), "B"),
                ));
            }
        }
        if let Some(v) = &r.verdict {
            d.verdict(false, "VERDICT", v.clone(), r.suggestions.clone());
        }
        d
    }
}

/// The best plan's p10–p90 step time from the profile's held-out
/// residuals (each plan's is in the JSON, `report.predicted.interval`).
fn interval_line(r: &PlanTrainReport) -> Option<String> {
    let best = r.plans.first()?;
    let i = best.report.predicted.as_ref()?.interval.as_ref()?;
    let widened = match (best.regime.is_empty(), best.ranking_interval_s) {
        (false, Some([lo, hi])) => format!(
            "; with its regime flags ×{} at each end: {}–{} s",
            super::regime::UNVALIDATED_FACTOR,
            crate::units::sig4(lo),
            crate::units::sig4(hi)
        ),
        _ => String::new(),
    };
    Some(format!(
        "plan {} step time p10–p90: {}{widened}",
        best.rank,
        i.describe()
    ))
}
