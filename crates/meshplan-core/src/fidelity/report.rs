//! The reports of `meshplan validate` and `meshplan calibrate`: the data set
//! compared run by run with the predictions, its error summaries and the
//! thresholds it fails; a fitted profile with its before/after errors.

use serde::Serialize;

use super::calibrate::{calibrate, median_error, Calibration, Target};
use super::data::{self, Run};
use super::profile::{EfficiencyProfile, Param};
use super::stats::{compare, summarize, ErrStats, Row, Summary};
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

/// Thresholds `validate` checks (each optional).
#[derive(Clone, Copy, Debug, Default)]
pub struct Thresholds {
    /// Largest median |step-time error|.
    pub max_median_error: Option<f64>,
    /// Largest p90 |step-time error|.
    pub max_p90_error: Option<f64>,
    /// Largest median |peak-memory error|.
    pub max_memory_error: Option<f64>,
    /// Smallest OOM accuracy.
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
    let mut f = Vec::new();
    let over = |v: f64, x: f64| v > x || v.is_nan();
    if let Some(x) = t.max_median_error.filter(|x| over(s.step.median, *x)) {
        f.push(format!(
            "median step-time error {} > {}",
            pct(s.step.median),
            pct(x)
        ));
    }
    if let Some(x) = t.max_p90_error.filter(|x| over(s.step.p90, *x)) {
        f.push(format!(
            "p90 step-time error {} > {}",
            pct(s.step.p90),
            pct(x)
        ));
    }
    if let Some(x) = t
        .max_memory_error
        .filter(|x| s.memory.n > 0 && over(s.memory.median, *x))
    {
        f.push(format!(
            "median memory error {} > {}",
            pct(s.memory.median),
            pct(x)
        ));
    }
    if let Some(x) = t
        .min_oom_accuracy
        .filter(|x| s.oom_runs > 0 && (s.oom_accuracy < *x || s.oom_accuracy.is_nan()))
    {
        f.push(format!("OOM accuracy {} < {}", pct(s.oom_accuracy), pct(x)));
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
    let rows = compare(&with_chips(runs), &|chip| profile_for(user, chip));
    let summary = summarize(&rows);
    ValidateReport {
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
        d.list("skipped", self.skipped.clone());
        if !self.failures.is_empty() {
            d.verdict(false, "THRESHOLD", "validate failed", self.failures.clone());
        }
        d
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
    let mut start = start.clone();
    start.chip = chip.name.clone();
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
    let mut p = c.profile.clone();
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
        p.sources.insert(
            n.clone(),
            format!("fitted by meshplan calibrate on {what}{sd}"),
        );
    }
    Ok(CalibrateReport {
        calibration: c,
        profile: p,
        held_out,
    })
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
