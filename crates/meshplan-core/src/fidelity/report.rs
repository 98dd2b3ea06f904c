//! The reports of `meshplan validate` and `meshplan calibrate`: the data set
//! compared run by run with the predictions, its error summaries and the
//! thresholds it fails; a fitted profile with its before/after errors.

use serde::Serialize;

use std::collections::BTreeMap;

use super::calibrate::{
    calibrate, leave_one_source_out, median_error, Calibration, Fold, Slot, Target,
};
use super::data::{self, Run};
use super::profile::{EfficiencyProfile, Interval, Param};
use super::stats::{
    compare, compare_with, err_stats, interval_of, summarize, ErrStats, Row, Summary,
};
use super::{is_held_out, with_chips};
use crate::error::{Error, Result};
use crate::hardware::Chip;
use crate::view::{Doc, Render, Table};

/// Read a data set: a Playbook CSV (with its model table: `models`, else the
/// embedded copy) or a published-runs JSON. `name` is the file name.
pub fn load_dataset(
    text: &str,
    name: &str,
    models: Option<&str>,
) -> Result<(Vec<Run>, Vec<String>)> {
    if name.to_ascii_lowercase().ends_with(".json") {
        return data::parse_published_json(text);
    }
    if text.lines().next().unwrap_or("").contains("figure_marker") {
        let runs = data::parse_playbook_csv(text, models.unwrap_or(data::PLAYBOOK_MODELS))?;
        return Ok((runs, Vec::new()));
    }
    Err(Error::Invalid(format!(
        "'{name}' is neither a Playbook CSV nor a published-runs JSON (for your own measurements use `meshplan calibrate`)"
    )))
}

/// Thresholds `validate` checks (each optional); with the `clap` feature,
/// the flags of `meshplan validate`.
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Thresholds {
    /// Exit 1 when the median |step-time error| exceeds X (fraction).
    #[cfg_attr(feature = "clap", arg(long, value_name = "X"))]
    pub max_median_error: Option<f64>,
    /// Exit 1 when the p90 |step-time error| exceeds X.
    #[cfg_attr(feature = "clap", arg(long, value_name = "X"))]
    pub max_p90_error: Option<f64>,
    /// Exit 1 when the median |peak-memory error| exceeds X.
    #[cfg_attr(feature = "clap", arg(long, value_name = "X"))]
    pub max_memory_error: Option<f64>,
    /// Exit 1 when OOM accuracy is below X.
    #[cfg_attr(feature = "clap", arg(long, value_name = "X"))]
    pub min_oom_accuracy: Option<f64>,
}

/// The `validate` report.
#[derive(Clone, Debug, Serialize)]
pub struct ValidateReport {
    /// Error summaries.
    pub summary: Summary,
    /// Every run with its prediction.
    pub runs: Vec<Row>,
    /// Entries that could not be used, and why.
    pub skipped: Vec<String>,
    /// Thresholds that failed (the command then exits 1).
    pub failures: Vec<String>,
    /// Leave-one-source-out figures (data with two or more sources).
    pub held_out: Option<HeldOutReport>,
    /// The external-validation rows (`"use": "validation-only"`), compared
    /// with the shipped profiles and never fitted on: pooled, per source,
    /// per chip and per framework.
    pub external: Option<Breakdown>,
    /// Whether the view lists every run.
    #[serde(skip)]
    pub list_runs: bool,
}

/// The chip's profile: the user's when it is for this chip, else the
/// built-in one (H100's when the chip has none).
pub fn profile_for(user: Option<&EfficiencyProfile>, chip: &str) -> EfficiencyProfile {
    if let Some(u) =
        user.filter(|u| crate::catalog::normalize(&u.chip) == crate::catalog::normalize(chip))
    {
        return u.clone();
    }
    EfficiencyProfile::builtin(chip)
        .or_else(|| EfficiencyProfile::builtin("h100"))
        .unwrap_or_else(|| unreachable!("the h100 profile is built in"))
}

fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * x)
    }
}

fn failures(s: &Summary, t: &Thresholds) -> Vec<String> {
    // an unmeasurable figure (NaN) fails its threshold; the memory and OOM
    // figures are checked only where the data has them
    let mem = t.max_memory_error.filter(|_| s.memory.n > 0);
    let upper = [
        ("median step-time error", s.step.median, t.max_median_error),
        ("p90 step-time error", s.step.p90, t.max_p90_error),
        ("median memory error", s.memory.median, mem),
    ];
    let mut f: Vec<String> = upper
        .into_iter()
        .filter_map(|(what, v, x)| {
            let x = x?;
            (v > x || v.is_nan()).then(|| format!("{what} {} > {}", pct(v), pct(x)))
        })
        .collect();
    let acc = s.oom_accuracy;
    if let Some(x) = t
        .min_oom_accuracy
        .filter(|x| s.oom_runs > 0 && (acc < *x || acc.is_nan()))
    {
        f.push(format!("OOM accuracy {} < {}", pct(acc), pct(x)));
    }
    f
}

/// Compare every run with its prediction and check the thresholds.
pub fn validate(
    runs: &[Run],
    skipped: Vec<String>,
    user: Option<&EfficiencyProfile>,
    t: &Thresholds,
    list_runs: bool,
) -> ValidateReport {
    let rc = with_chips(runs);
    let rows = compare(&rc, &|chip| profile_for(user, chip));
    let summary = summarize(&rows);
    let external_ids: std::collections::BTreeSet<&str> = runs
        .iter()
        .filter(|r| r.validation_only)
        .map(|r| r.id.as_str())
        .collect();
    let external_rows: Vec<Row> = rows
        .iter()
        .filter(|r| r.clean && external_ids.contains(r.id.as_str()))
        .cloned()
        .collect();
    ValidateReport {
        external: (!external_rows.is_empty()).then(|| Breakdown::of(&external_rows)),
        held_out: held_out(&rc, &rows, user, 400),
        failures: failures(&summary, t),
        list_runs: list_runs || rows.len() <= 40,
        summary,
        runs: rows,
        skipped,
    }
}

fn stats_row(name: &str, s: &ErrStats) -> Vec<String> {
    vec![
        name.to_string(),
        s.n.to_string(),
        pct(s.median),
        pct(s.p90),
        pct(s.max),
        s.worst.clone(),
    ]
}

fn runs_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        &[
            "id", "model", "nodes", "config", "t_meas", "t_pred", "err", "mfu_m", "mfu_p", "mem_m",
            "mem_p", "fits",
        ],
        &[
            "nodes", "t_meas", "t_pred", "err", "mfu_m", "mfu_p", "mem_m", "mem_p",
        ],
    );
    for r in rows {
        t.row(vec![
            r.id.clone(),
            r.model.clone(),
            r.nodes.to_string(),
            r.config.clone(),
            r.step_measured_s.map_or("-".into(), |x| format!("{x:.3}")),
            format!("{:.3}", r.step_predicted_s),
            r.step_error.map_or("-".into(), pct),
            r.mfu_measured
                .map_or("-".into(), |x| format!("{:.1}", 100.0 * x)),
            format!("{:.1}", 100.0 * r.mfu_predicted),
            r.mem_measured_gb.map_or("-".into(), |x| format!("{x:.1}")),
            format!("{:.1}", r.mem_predicted_gb),
            if r.fits { "yes" } else { "no" }.into(),
        ]);
    }
    t
}

fn summary_table(s: &Summary, rows: &[Row]) -> Table {
    let mut t = Table::new(
        &["group", "n", "median", "p90", "worst", "worst run"],
        &["n", "median", "p90", "worst"],
    );
    t.row(stats_row("step time, clean completed", &s.step));
    t.row(stats_row("step time, every completed", &s.step_all));
    t.row(stats_row("peak memory, clean completed", &s.memory));
    for (k, (st, m)) in &s.by_model {
        t.row(stats_row(&format!("model {k}: step"), st));
        t.row(stats_row(&format!("model {k}: memory"), m));
    }
    for (k, (st, m)) in &s.by_nodes {
        t.row(stats_row(&format!("{k} nodes: step"), st));
        t.row(stats_row(&format!("{k} nodes: memory"), m));
    }
    for (k, (st, _)) in &s.by_source {
        let profs: std::collections::BTreeSet<&str> = rows
            .iter()
            .filter(|r| &r.source == k)
            .map(|r| r.profile.as_str())
            .collect();
        let names: Vec<&str> = profs.into_iter().collect();
        t.row(stats_row(&format!("source {k} [{}]", names.join(", ")), st));
    }
    t
}

/// Error summaries of one set of predictions, by group.
#[derive(Clone, Debug, Serialize)]
pub struct Breakdown {
    /// Every clean run with a step time.
    pub pooled: ErrStats,
    /// By source.
    pub by_source: BTreeMap<String, ErrStats>,
    /// By chip.
    pub by_chip: BTreeMap<String, ErrStats>,
    /// By framework.
    pub by_framework: BTreeMap<String, ErrStats>,
    /// Peak memory, clean runs with a measurement.
    pub memory: ErrStats,
}

impl Breakdown {
    /// The summaries of `rows` (each group's |step-time error|).
    pub fn of(rows: &[Row]) -> Breakdown {
        let by = |key: &dyn Fn(&Row) -> String| {
            let mut m: BTreeMap<String, ErrStats> = BTreeMap::new();
            let keys: std::collections::BTreeSet<String> = rows.iter().map(key).collect();
            for k in keys {
                m.insert(k.clone(), step_stats(rows.iter().filter(|r| key(r) == k)));
            }
            m
        };
        Breakdown {
            pooled: step_stats(rows.iter()),
            by_source: by(&|r| r.source.clone()),
            by_chip: by(&|r| r.chip.clone()),
            by_framework: by(&|r| r.framework.clone()),
            memory: err_stats(rows.iter().filter_map(|r| r.mem_error.map(|e| (r, e)))),
        }
    }
}

fn step_stats<'a>(rows: impl Iterator<Item = &'a Row>) -> ErrStats {
    err_stats(rows.filter_map(|r| r.step_error.map(|e| (r, e))))
}

/// Leave-one-source-out validation: each source predicted by parameters
/// fitted on the other sources only ([`leave_one_source_out`]), beside the
/// in-sample figures of the same runs.
#[derive(Clone, Debug, Serialize)]
pub struct HeldOutReport {
    /// What each fold fitted and what it left at its prior.
    pub folds: Vec<Fold>,
    /// Held-out errors.
    pub held_out: Breakdown,
    /// In-sample errors of the same runs (the shipped profiles).
    pub in_sample: Breakdown,
    /// Prediction intervals from the held-out residuals, per source.
    pub intervals: BTreeMap<String, Interval>,
    /// Every held-out run with its prediction.
    pub runs: Vec<Row>,
}

/// The held-out figures of `rc` (`None` with fewer than two sources).
pub fn held_out(
    rc: &[(&Run, &Chip)],
    in_sample: &[Row],
    user: Option<&EfficiencyProfile>,
    iters: usize,
) -> Option<HeldOutReport> {
    // external-validation rows are never fitted on, not even in a fold
    let clean: Vec<(&Run, &Chip)> = rc
        .iter()
        .filter(|(r, _)| r.clean && r.step_time_s.is_some() && !r.validation_only)
        .copied()
        .collect();
    let slot = |r: &Run| {
        let base = profile_for(user, &r.chip);
        let cluster = !r.cluster.is_empty() && base.clusters.contains_key(&r.cluster);
        (base.for_run(&r.network, &r.cluster), cluster)
    };
    let slots: Vec<Slot> = clean
        .iter()
        .map(|&(r, c)| {
            let (profile, cluster) = slot(r);
            Slot {
                run: (r, c),
                profile,
                cluster,
            }
        })
        .collect();
    let n_sources = slots
        .iter()
        .map(|s| s.run.0.source.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if n_sources < 2 {
        return None;
    }
    let folds = leave_one_source_out(&slots, iters);
    let mut rows = Vec::new();
    for f in &folds {
        let runs: Vec<(&Run, &Chip)> = clean
            .iter()
            .filter(|(r, _)| r.source == f.source)
            .copied()
            .collect();
        rows.extend(compare_with(&runs, &|r: &Run| {
            (f.apply(&slot(r).0), format!("held-out:{}", f.source))
        }));
    }
    let ids: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    let same: Vec<Row> = in_sample
        .iter()
        .filter(|r| ids.contains(r.id.as_str()))
        .cloned()
        .collect();
    let intervals = folds
        .iter()
        .filter_map(|f| {
            let v = rows.iter().filter(|r| r.source == f.source);
            interval_of(
                v,
                &format!("leave-one-source-out residuals of {}", f.source),
            )
            .map(|i| (f.source.clone(), i))
        })
        .collect();
    Some(HeldOutReport {
        folds,
        held_out: Breakdown::of(&rows),
        in_sample: Breakdown::of(&same),
        intervals,
        runs: rows,
    })
}

impl Render for ValidateReport {
    fn doc(&self) -> Doc {
        let s = &self.summary;
        let mut d = Doc::new();
        if self.list_runs {
            d.table(runs_table(&self.runs));
        }
        d.table(summary_table(s, &self.runs));
        if s.oom_runs > 0 {
            d.line(format!(
                "OOM classification: {}/{} = {} (missed failures {}, false alarms {})",
                s.oom_correct,
                s.oom_runs,
                pct(s.oom_accuracy),
                s.oom_missed,
                s.oom_false_alarm
            ));
        }
        for p in &s.pairs {
            d.line(format!(
                "recompute pair {}: full/selective measured {:.3}, predicted {:.3} ({})",
                p.pair,
                p.measured,
                p.predicted,
                pct(p.error)
            ));
        }
        if let Some(x) = &self.external {
            external_doc(&mut d, x);
        }
        match &self.held_out {
            Some(h) => held_out_doc(&mut d, h),
            None if s.step.n > 0 && self.external.is_none() => {
                d.line("in-sample only: these figures are on the runs the profiles were fitted on (or validated with); give two or more sources (e.g. playbook_h100_runs.csv published_runs.json) for held-out, leave-one-source-out figures");
            }
            None => {}
        }
        d.list("skipped", self.skipped.clone());
        if !self.failures.is_empty() {
            d.verdict(false, "THRESHOLD", "validate failed", self.failures.clone());
        }
        d
    }
}

/// The external-validation table: |step-time error| of the rows never
/// fitted on, pooled and by source, chip and framework.
fn external_doc(d: &mut Doc, x: &Breakdown) {
    let mut t = Table::new(
        &[
            "external validation (never fitted)",
            "n",
            "median",
            "p90",
            "worst",
            "worst run",
        ],
        &["n", "median", "p90", "worst"],
    );
    t.row(stats_row("step time, pooled", &x.pooled));
    for (name, m) in [
        ("source", &x.by_source),
        ("chip", &x.by_chip),
        ("framework", &x.by_framework),
    ] {
        for (k, s) in m {
            t.row(stats_row(&format!("{name} {k}"), s));
        }
    }
    d.table(t);
}

fn held_out_doc(d: &mut Doc, h: &HeldOutReport) {
    let mut t = Table::new(
        &[
            "held out vs in-sample",
            "n",
            "held-out median",
            "held-out p90",
            "in-sample median",
            "in-sample p90",
        ],
        &[
            "n",
            "held-out median",
            "held-out p90",
            "in-sample median",
            "in-sample p90",
        ],
    );
    let row = |name: String, a: &ErrStats, b: Option<&ErrStats>| {
        vec![
            name,
            a.n.to_string(),
            pct(a.median),
            pct(a.p90),
            b.map_or("-".into(), |b| pct(b.median)),
            b.map_or("-".into(), |b| pct(b.p90)),
        ]
    };
    let (ho, is) = (&h.held_out, &h.in_sample);
    t.row(row(
        "step time, pooled".into(),
        &ho.pooled,
        Some(&is.pooled),
    ));
    for (name, a, b) in [
        ("source", &ho.by_source, &is.by_source),
        ("chip", &ho.by_chip, &is.by_chip),
        ("framework", &ho.by_framework, &is.by_framework),
    ] {
        for (k, s) in a {
            t.row(row(format!("{name} {k}"), s, b.get(k)));
        }
    }
    t.row(row("peak memory".into(), &ho.memory, Some(&is.memory)));
    d.table(t);
    for f in &h.folds {
        let show = |v: &[(String, f64)]| {
            v.iter()
                .map(|(n, x)| format!("{n}={}", crate::units::sig4(*x)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        d.line(format!(
            "held out {} ({} runs): fitted on {}: {}; at their prior (no other source identifies them): {}",
            f.source,
            f.runs,
            f.trained_on.join(" + "),
            show(&f.fitted),
            if f.at_prior.is_empty() { "none".into() } else { show(&f.at_prior) }
        ));
    }
    for (k, i) in &h.intervals {
        d.line(format!(
            "interval {k}: measured / predicted p10 {:.3}, p90 {:.3} ({} held-out runs)",
            i.p10, i.p90, i.runs
        ));
    }
}

/// Errors on the runs held apart from the fit.
#[derive(Clone, Debug, Serialize)]
pub struct HeldOut {
    /// Runs held apart.
    pub runs: usize,
    /// Median |step-time error| before / after the fit.
    pub time_before: f64,
    /// After.
    pub time_after: f64,
    /// Median |memory error| before / after.
    pub memory_before: f64,
    /// After.
    pub memory_after: f64,
}

/// The `calibrate` report: the fitted profile and how much it helped.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrateReport {
    /// The fit.
    pub calibration: Calibration,
    /// The profile to save (sources filled in).
    pub profile: EfficiencyProfile,
    /// The held-apart half, with `hold_out`.
    pub held_out: Option<HeldOut>,
}

/// Fit `start` on the clean runs of `runs` (measured on `chip`); with
/// `hold_out`, on half of them, reporting the other half. `what` names the
/// data in the profile's sources.
pub fn calibrate_runs(
    runs: &[Run],
    chip: &Chip,
    start: &EfficiencyProfile,
    iters: usize,
    bootstrap: usize,
    hold_out: bool,
    what: &str,
) -> Result<CalibrateReport> {
    // runs all measured on one named cluster of the profile (the Playbook
    // CSV) are fitted with that cluster's profile (its measured curves and
    // terms); the fitted values then go back where they live
    let orig = start.clone();
    let cluster = runs
        .first()
        .filter(|r0| runs.iter().all(|r| r.cluster == r0.cluster))
        .map(|r0| r0.cluster.clone())
        .filter(|c| orig.clusters.contains_key(c));
    let mut start = match &cluster {
        Some(c) => orig.for_run(&runs[0].network, c),
        None => orig.clone(),
    };
    start.chip = chip.name.clone();
    if let Some(r) = runs.iter().find(|r| r.validation_only) {
        return Err(Error::Invalid(format!(
            "'{what}' holds external-validation rows (`\"use\": \"{}\"`, e.g. `{}`): they are compared by `meshplan validate`, never fitted on",
            data::VALIDATION_ONLY,
            r.id
        )));
    }
    let rc: Vec<(&Run, &Chip)> = runs.iter().filter(|r| r.clean).map(|r| (r, chip)).collect();
    if rc.is_empty() {
        return Err(Error::Invalid(format!(
            "no completed runs with a step time in '{what}'"
        )));
    }
    let (fit_on, held): (Vec<_>, Vec<_>) = if hold_out {
        rc.iter().partition(|(r, _)| !is_held_out(&r.id))
    } else {
        (rc.clone(), Vec::new())
    };
    if fit_on.is_empty() {
        return Err(Error::Invalid("--hold-out leaves no runs to fit on".into()));
    }
    let c = calibrate(&fit_on, &start, iters, bootstrap);
    let held_out = (!held.is_empty()).then(|| HeldOut {
        runs: held.len(),
        time_before: median_error(&held, &start, Target::Time),
        time_after: median_error(&held, &c.profile, Target::Time),
        memory_before: median_error(&held, &start, Target::Memory),
        memory_after: median_error(&held, &c.profile, Target::Memory),
    });
    let mut p = match &cluster {
        Some(cl) => into_cluster(&orig, cl, &c.profile, &c.fitted),
        None => c.profile.clone(),
    };
    let fitted_runs: Vec<&Run> = fit_on.iter().map(|(r, _)| *r).collect();
    p.fitted_on = super::range::FittedRanges::of_runs(&fitted_runs);
    p.source = format!(
        "meshplan calibrate on {what} ({} runs); median |step error| {}",
        c.n_time,
        pct(c.time_median_after)
    );
    for (n, sd) in c.fitted.iter().zip(&c.stddev) {
        let sd = if sd.is_finite() {
            format!("; bootstrap sd {sd:.3e}")
        } else {
            String::new()
        };
        let text = format!("fitted by meshplan calibrate on {what}{sd}");
        let in_cluster = cluster
            .as_ref()
            .and_then(|cl| p.clusters.get_mut(cl))
            .filter(|cp| cp.params.contains_key(n));
        match in_cluster {
            Some(cp) => cp.sources.insert(n.clone(), text),
            None => p.sources.insert(n.clone(), text),
        };
    }
    Ok(CalibrateReport {
        calibration: c,
        profile: p,
        held_out,
    })
}

/// `orig` with the `names` values of `fitted`: a parameter that cluster
/// `cluster`'s profile sets goes into that table, every other into the base,
/// so that the profile keeps its cluster and network sub-profiles.
fn into_cluster(
    orig: &EfficiencyProfile,
    cluster: &str,
    fitted: &EfficiencyProfile,
    names: &[String],
) -> EfficiencyProfile {
    let mut out = orig.clone();
    out.chip.clone_from(&fitted.chip);
    for n in names {
        let Some(q) = Param::from_name(n) else {
            continue;
        };
        let v = fitted.param(q);
        match out
            .clusters
            .get_mut(cluster)
            .filter(|c| c.params.contains_key(n))
        {
            Some(c) => {
                c.params.insert(n.clone(), v);
            }
            None => out.set_param(q, v),
        }
    }
    out
}

impl Render for CalibrateReport {
    fn doc(&self) -> Doc {
        let c = &self.calibration;
        let mut d = Doc::new();
        if let Some(h) = &self.held_out {
            d.line(format!(
                "held-apart half ({} runs, not fitted on): median |step-time error| {} -> {}; median |memory error| {} -> {}",
                h.runs,
                pct(h.time_before),
                pct(h.time_after),
                pct(h.memory_before),
                pct(h.memory_after)
            ));
        }
        d.line(format!(
            "calibrate: {} runs with step time, {} with peak memory; median |step-time error| {} -> {}; median |memory error| {} -> {}",
            c.n_time,
            c.n_mem,
            pct(c.time_median_before),
            pct(c.time_median_after),
            pct(c.mem_median_before),
            pct(c.mem_median_after)
        ));
        let mut t = Table::new(
            &["parameter", "value", "± (bootstrap sd)"],
            &["value", "± (bootstrap sd)"],
        );
        for (n, sd) in c.fitted.iter().zip(&c.stddev) {
            let v = Param::from_name(n).map_or(f64::NAN, |q| self.profile.param(q));
            t.row(vec![
                n.clone(),
                format!("{v:.6}"),
                if sd.is_finite() {
                    format!("{sd:.3e}")
                } else {
                    "-".into()
                },
            ]);
        }
        d.table(t);
        d
    }
}
