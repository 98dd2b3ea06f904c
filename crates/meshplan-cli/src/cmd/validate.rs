//! `meshplan validate` and `meshplan calibrate` (issue 7; `docs/fidelity.md`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use meshplan_core::fidelity::calibrate::calibrate;
use meshplan_core::fidelity::data::{self, Run};
use meshplan_core::fidelity::stats::{compare, summarize, svg_scatter, ErrStats};
use meshplan_core::fidelity::{with_chips, EfficiencyProfile};

use crate::common::read_file;

/// Arguments of `meshplan validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// Playbook CSV (models from `playbook_models.toml` beside it, else the embedded copy)
    /// or published-runs JSON.
    pub dataset: PathBuf,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
    /// Write a predicted-vs-measured step-time scatter (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Use this profile (TOML from `meshplan calibrate`) for its chip.
    #[arg(long, value_name = "FILE")]
    pub hw_profile: Option<PathBuf>,
    /// Exit non-zero when the median |step-time error| exceeds X (fraction).
    #[arg(long, value_name = "X")]
    pub max_median_error: Option<f64>,
    /// Exit non-zero when the p90 |step-time error| exceeds X.
    #[arg(long, value_name = "X")]
    pub max_p90_error: Option<f64>,
    /// Exit non-zero when the median |peak-memory error| exceeds X.
    #[arg(long, value_name = "X")]
    pub max_memory_error: Option<f64>,
    /// Exit non-zero when OOM accuracy is below X.
    #[arg(long, value_name = "X")]
    pub min_oom_accuracy: Option<f64>,
    /// Print every run.
    #[arg(long)]
    pub all: bool,
}

/// Arguments of `meshplan calibrate`.
#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// Measurements: calibration CSV (columns in docs/fidelity.md), or a Playbook CSV / published JSON.
    pub measurements: PathBuf,
    /// Chip (catalog name) the measurements are from.
    #[arg(long)]
    pub chip: String,
    /// Start from this profile instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Nelder–Mead iterations per stage.
    #[arg(long, default_value_t = 400)]
    pub iters: usize,
    /// Bootstrap resamples for the uncertainties.
    #[arg(long, default_value_t = 8)]
    pub bootstrap: usize,
    /// Fit on half of the runs only (a fixed split by run id) and report the
    /// error on the other, held-apart half before and after the fit.
    #[arg(long)]
    pub hold_out: bool,
}

/// Load any supported data set.
pub fn load(path: &std::path::Path) -> anyhow::Result<(Vec<Run>, Vec<String>)> {
    let src = read_file(path)?;
    if path.extension().is_some_and(|e| e == "json") {
        return Ok(data::parse_published_json(&src)?);
    }
    let first = src.lines().next().unwrap_or("");
    if first.contains("figure_marker") {
        let side = path.with_file_name("playbook_models.toml");
        let models = if side.is_file() {
            read_file(&side)?
        } else {
            data::PLAYBOOK_MODELS.to_string()
        };
        return Ok((data::parse_playbook_csv(&src, &models)?, Vec::new()));
    }
    anyhow::bail!(
        "'{}' is neither a Playbook CSV nor a published-runs JSON (for your own measurements use `meshplan calibrate`)",
        path.display()
    )
}

fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * x)
    }
}

fn line(name: &str, s: &ErrStats) -> String {
    format!(
        "{name:<14} n={:<5} median {:>7}  p90 {:>7}  worst {:>8} ({})",
        s.n,
        pct(s.median),
        pct(s.p90),
        pct(s.max),
        s.worst
    )
}

/// Run `validate`.
pub fn run(a: ValidateArgs) -> anyhow::Result<ExitCode> {
    let (runs, skipped) = load(&a.dataset)?;
    let user = match &a.hw_profile {
        Some(p) => Some(EfficiencyProfile::parse(
            &read_file(p)?,
            &p.display().to_string(),
        )?),
        None => None,
    };
    let pf = |chip: &str| -> EfficiencyProfile {
        if let Some(u) = &user {
            if meshplan_core::catalog::normalize(&u.chip) == meshplan_core::catalog::normalize(chip)
            {
                return u.clone();
            }
        }
        EfficiencyProfile::builtin(chip)
            .unwrap_or_else(|| EfficiencyProfile::builtin("h100").expect("built-in h100 profile"))
    };
    let rc = with_chips(&runs);
    let rows = compare(&rc, &pf);
    let sum = summarize(&rows);
    if let Some(p) = &a.plot {
        std::fs::write(p, svg_scatter(&rows))
            .with_context(|| format!("cannot write '{}'", p.display()))?;
    }
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"summary": sum, "runs": rows, "skipped": skipped})
            )?
        );
    } else {
        if a.all || rows.len() <= 40 {
            outln!(
                "{:<22} {:<6} {:>5} {:<28} {:>9} {:>9} {:>7} {:>6} {:>6} {:>7} {:>7} {:>4}",
                "id",
                "model",
                "nodes",
                "config",
                "t_meas",
                "t_pred",
                "err",
                "mfu_m",
                "mfu_p",
                "mem_m",
                "mem_p",
                "fits"
            );
            for r in &rows {
                outln!(
                    "{:<22} {:<6} {:>5} {:<28} {:>9} {:>9.3} {:>7} {:>6} {:>6.1} {:>7} {:>7.1} {:>4}",
                    r.id,
                    r.model.chars().take(6).collect::<String>(),
                    r.nodes,
                    r.config,
                    r.step_measured_s.map_or("-".into(), |x| format!("{x:.3}")),
                    r.step_predicted_s,
                    r.step_error.map_or("-".into(), pct),
                    r.mfu_measured.map_or("-".into(), |x| format!("{:.1}", 100.0 * x)),
                    100.0 * r.mfu_predicted,
                    r.mem_measured_gb.map_or("-".into(), |x| format!("{x:.1}")),
                    r.mem_predicted_gb,
                    if r.fits { "yes" } else { "no" }
                );
            }
            outln!();
        }
        outln!(
            "step time (clean completed runs): {}",
            line("all", &sum.step)
        );
        outln!(
            "step time (every completed run):  {}",
            line("all", &sum.step_all)
        );
        outln!(
            "peak memory (clean completed):    {}",
            line("all", &sum.memory)
        );
        outln!("\nby model (step | memory):");
        for (k, (s, m)) in &sum.by_model {
            outln!("  {}\n  {}", line(k, s), line("  memory", m));
        }
        outln!("by nodes (step | memory):");
        for (k, (s, m)) in &sum.by_nodes {
            outln!(
                "  {}\n  {}",
                line(&format!("{k} nodes"), s),
                line("  memory", m)
            );
        }
        outln!("by source:");
        for (k, (s, _)) in &sum.by_source {
            // the profile each source was predicted with (chip@network)
            let profs: std::collections::BTreeSet<&str> = rows
                .iter()
                .filter(|r| &r.source == k)
                .map(|r| r.profile.as_str())
                .collect();
            outln!(
                "  {}  [profile {}]",
                line(k, s),
                profs.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        if sum.oom_runs > 0 {
            outln!(
                "OOM classification: {}/{} = {} (missed failures {}, false alarms {})",
                sum.oom_correct,
                sum.oom_runs,
                pct(sum.oom_accuracy),
                sum.oom_missed,
                sum.oom_false_alarm
            );
            outln!(
                "  by model: {}",
                sum.oom_by_model
                    .iter()
                    .map(|(k, v)| format!("{k} {}", pct(*v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            outln!(
                "  by nodes: {}",
                sum.oom_by_nodes
                    .iter()
                    .map(|(k, v)| format!("{k}n {}", pct(*v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for p in &sum.pairs {
            outln!(
                "recompute pair {}: full/selective measured {:.3}, predicted {:.3} ({})",
                p.pair,
                p.measured,
                p.predicted,
                pct(p.error)
            );
        }
        for s in &skipped {
            outln!("skipped {s}");
        }
    }
    let mut fail = Vec::new();
    if let Some(x) = a.max_median_error {
        if sum.step.median > x || sum.step.median.is_nan() {
            fail.push(format!(
                "median step-time error {} > {}",
                pct(sum.step.median),
                pct(x)
            ));
        }
    }
    if let Some(x) = a.max_p90_error {
        if sum.step.p90 > x || sum.step.p90.is_nan() {
            fail.push(format!(
                "p90 step-time error {} > {}",
                pct(sum.step.p90),
                pct(x)
            ));
        }
    }
    if let Some(x) = a.max_memory_error {
        if sum.memory.n > 0 && (sum.memory.median > x || sum.memory.median.is_nan()) {
            fail.push(format!(
                "median memory error {} > {}",
                pct(sum.memory.median),
                pct(x)
            ));
        }
    }
    if let Some(x) = a.min_oom_accuracy {
        if sum.oom_runs > 0 && (sum.oom_accuracy < x || sum.oom_accuracy.is_nan()) {
            fail.push(format!(
                "OOM accuracy {} < {}",
                pct(sum.oom_accuracy),
                pct(x)
            ));
        }
    }
    for f in &fail {
        errln!("validate: {f}");
    }
    Ok(if fail.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Run `calibrate`.
pub fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let cat = crate::common::user_catalog()?;
    let chip = cat.chip(&a.chip)?.clone();
    let src = read_file(&a.measurements)?;
    let runs = if src.lines().next().unwrap_or("").contains("figure_marker")
        || a.measurements.extension().is_some_and(|e| e == "json")
    {
        load(&a.measurements)?.0
    } else {
        let lookup = |name: &str| {
            cat.model(name)
                .ok()
                .map(|m| meshplan_core::fidelity::Shape::from(&m.arch))
        };
        data::parse_calibration_csv(&src, &chip.name, &lookup)?
    };
    let start = match &a.from {
        Some(p) => EfficiencyProfile::parse(&read_file(p)?, &p.display().to_string())?,
        None => EfficiencyProfile::builtin(&chip.name)
            .or_else(|| EfficiencyProfile::builtin("h100"))
            .context("no built-in profile")?,
    };
    let mut start = start;
    start.chip = chip.name.clone();
    let rc: Vec<(&Run, &meshplan_core::hardware::Chip)> = runs
        .iter()
        .filter(|r| r.clean)
        .map(|r| (r, &chip))
        .collect();
    if rc.is_empty() {
        anyhow::bail!(
            "no completed runs with a step time in '{}'",
            a.measurements.display()
        );
    }
    let (fit_on, held): (Vec<_>, Vec<_>) = if a.hold_out {
        rc.iter()
            .partition(|(r, _)| !meshplan_core::fidelity::is_held_out(&r.id))
    } else {
        (rc.clone(), Vec::new())
    };
    if fit_on.is_empty() {
        anyhow::bail!("--hold-out leaves no runs to fit on");
    }
    let c = calibrate(&fit_on, &start, a.iters, a.bootstrap);
    if !held.is_empty() {
        use meshplan_core::fidelity::calibrate::{median_error, Target};
        errln!(
            "held-apart half ({} runs, not fitted on): median |step-time error| {} -> {}; median |memory error| {} -> {}",
            held.len(),
            pct(median_error(&held, &start, Target::Time)),
            pct(median_error(&held, &c.profile, Target::Time)),
            pct(median_error(&held, &start, Target::Memory)),
            pct(median_error(&held, &c.profile, Target::Memory)),
        );
    }
    errln!(
        "calibrate: {} runs with step time, {} with peak memory",
        c.n_time,
        c.n_mem
    );
    errln!(
        "  median |step-time error| {} -> {}; median |memory error| {} -> {}",
        pct(c.time_median_before),
        pct(c.time_median_after),
        pct(c.mem_median_before),
        pct(c.mem_median_after)
    );
    let mut p = c.profile.clone();
    p.source = format!(
        "meshplan calibrate on {} ({} runs); median |step error| {}",
        a.measurements.display(),
        c.n_time,
        pct(c.time_median_after)
    );
    for (n, sd) in c.fitted.iter().zip(&c.stddev) {
        let v = p.get(EfficiencyProfile::index(n).unwrap_or(0));
        errln!("  {n:<24} = {v:<12.6} ± {sd:.3e} (bootstrap)");
        p.sources.insert(
            n.clone(),
            format!(
                "fitted by meshplan calibrate on {}; bootstrap sd {sd:.3e}",
                a.measurements.display()
            ),
        );
    }
    out!("{}", p.to_toml());
    Ok(ExitCode::SUCCESS)
}
