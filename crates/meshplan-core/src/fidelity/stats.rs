//! Validation: per-run comparison, summaries, OOM accuracy, recompute pairs, SVG.

use std::collections::BTreeMap;

use serde::Serialize;

use super::data::Run;
use super::profile::{EfficiencyProfile, Interval};
use crate::hardware::Chip;
use crate::step::predict::Prediction;

/// `q`-quantile (linear interpolation); NaN on empty input.
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// One run compared.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Run id.
    pub id: String,
    /// Source.
    pub source: String,
    /// Profile used: `chip` or `chip@network` when a network sub-profile was picked.
    pub profile: String,
    /// Chip.
    pub chip: String,
    /// Framework (runtime).
    pub framework: String,
    /// Model label.
    pub model: String,
    /// Nodes.
    pub nodes: u64,
    /// "dp·tp·pp zZ mbs×ga".
    pub config: String,
    /// Clean point.
    pub clean: bool,
    /// Completed.
    pub completed: bool,
    /// Measured step time.
    pub step_measured_s: Option<f64>,
    /// Predicted.
    pub step_predicted_s: f64,
    /// pred/meas − 1.
    pub step_error: Option<f64>,
    /// Measured MFU.
    pub mfu_measured: Option<f64>,
    /// Predicted MFU (same FLOP definition as measured).
    pub mfu_predicted: f64,
    /// Predicted tokens/s/GPU.
    pub tok_s_gpu_predicted: f64,
    /// Measured memory GB.
    pub mem_measured_gb: Option<f64>,
    /// Predicted.
    pub mem_predicted_gb: f64,
    /// pred/meas − 1.
    pub mem_error: Option<f64>,
    /// Predicted to fit.
    pub fits: bool,
    /// Recompute pair key.
    pub pair: Option<String>,
    /// Full prediction (time and memory breakdowns).
    pub prediction: Option<Prediction>,
}

/// Error statistics of one group.
#[derive(Clone, Debug, Serialize, Default)]
pub struct ErrStats {
    /// Points.
    pub n: usize,
    /// Median |error|.
    pub median: f64,
    /// 90th percentile |error|.
    pub p90: f64,
    /// Worst |error|.
    pub max: f64,
    /// Id of the worst.
    pub worst: String,
}

/// Error statistics of `(row, signed error)` pairs.
pub fn err_stats<'a>(rows: impl Iterator<Item = (&'a Row, f64)>) -> ErrStats {
    let mut v: Vec<(f64, &str)> = rows.map(|(r, e)| (e.abs(), r.id.as_str())).collect();
    if v.is_empty() {
        return ErrStats::default();
    }
    let mut e: Vec<f64> = v.iter().map(|x| x.0).collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0));
    ErrStats {
        n: e.len(),
        median: quantile(&mut e, 0.5),
        p90: quantile(&mut e, 0.9),
        max: v[0].0,
        worst: v[0].1.to_string(),
    }
}

/// Measured vs predicted ratio of a full/selective recompute pair.
#[derive(Clone, Debug, Serialize)]
pub struct PairRatio {
    /// Pair key.
    pub pair: String,
    /// Measured t_full / t_selective.
    pub measured: f64,
    /// Predicted.
    pub predicted: f64,
    /// predicted/measured − 1.
    pub error: f64,
}

/// Everything `validate` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Step time, clean completed runs.
    pub step: ErrStats,
    /// Step time, all completed runs (incl. `x`-marked and inconsistent batches).
    pub step_all: ErrStats,
    /// Peak memory, clean completed runs with a measurement.
    pub memory: ErrStats,
    /// By model label: (step, memory).
    pub by_model: BTreeMap<String, (ErrStats, ErrStats)>,
    /// By node count.
    pub by_nodes: BTreeMap<u64, (ErrStats, ErrStats)>,
    /// By source.
    pub by_source: BTreeMap<String, (ErrStats, ErrStats)>,
    /// OOM classification: runs with a status, correct, accuracy.
    pub oom_runs: usize,
    /// Correct classifications.
    pub oom_correct: usize,
    /// Accuracy.
    pub oom_accuracy: f64,
    /// Failed runs predicted to fit (missed failures).
    pub oom_missed: usize,
    /// Completed runs predicted not to fit (false alarms).
    pub oom_false_alarm: usize,
    /// OOM accuracy by model.
    pub oom_by_model: BTreeMap<String, f64>,
    /// OOM accuracy by nodes.
    pub oom_by_nodes: BTreeMap<u64, f64>,
    /// Recompute pairs.
    pub pairs: Vec<PairRatio>,
}

/// Model FLOPs of one step of a run under `conv` (causal attention, the
/// run's own recompute for the `hardware` convention).
pub fn run_model_flops(r: &Run, conv: crate::parallelism::FlopConvention) -> f64 {
    let s = &r.spec;
    let q = crate::accounting::FlopQuery {
        convention: conv,
        seq_len: s.seq_len,
        causal: true,
        tokens: s.tokens_per_step(),
        remat: s.remat,
    };
    crate::accounting::step_flops(&s.arch, &s.params, &q).model
}

/// Compare every run with its prediction.
pub fn compare(
    runs: &[(&Run, &Chip)],
    profile_for: &dyn Fn(&str) -> EfficiencyProfile,
) -> Vec<Row> {
    compare_with(runs, &|r: &Run| {
        // the chip's profile on the run's network or cluster (its
        // sub-profile when it has one)
        let base = profile_for(&r.chip);
        (base.for_run(&r.network, &r.cluster), profile_key(&base, r))
    })
}

/// Compare every run with its prediction under the profile `profile_of`
/// gives it (with the name shown for it).
pub fn compare_with(
    runs: &[(&Run, &Chip)],
    profile_of: &dyn Fn(&Run) -> (EfficiencyProfile, String),
) -> Vec<Row> {
    runs.iter()
        .map(|(r, chip)| {
            let (p, key) = profile_of(r);
            let pr = r.predict(chip, &p);
            let peak = chip.flops(crate::units::DType::Bf16).get();
            let n = r.spec.n_gpus.max(1) as f64;
            // the measured MFU's own convention, so the two compare
            let fl = run_model_flops(r, r.mfu_convention);
            let s = &r.spec;
            Row {
                id: r.id.clone(),
                source: r.source.clone(),
                profile: key,
                chip: r.chip.clone(),
                framework: r.spec.framework.to_string(),
                model: r.model.clone(),
                nodes: r.nodes,
                config: format!(
                    "dp{} tp{} pp{} z{} mbs{}×{}{}",
                    s.dp,
                    s.tp,
                    s.pp,
                    s.zero,
                    s.mbs,
                    s.grad_acc,
                    match s.remat {
                        crate::parallelism::Remat::Full => " full-remat",
                        crate::parallelism::Remat::Selective => " sel-remat",
                        _ => "",
                    }
                ),
                clean: r.clean,
                completed: r.completed,
                step_measured_s: r.step_time_s,
                step_predicted_s: pr.step_time_s,
                step_error: r.step_time_s.map(|m| pr.step_time_s / m - 1.0),
                mfu_measured: r.mfu,
                mfu_predicted: crate::accounting::mfu(fl, n, peak, pr.step_time_s),
                tok_s_gpu_predicted: pr.tokens_per_s_per_gpu,
                mem_measured_gb: r.peak_mem_gb,
                mem_predicted_gb: pr.peak_mem_gb,
                mem_error: r
                    .peak_mem_gb
                    .filter(|m| *m > 0.0)
                    .map(|m| pr.peak_mem_gb / m - 1.0),
                fits: pr.fits,
                pair: r.pair.clone(),
                prediction: Some(pr),
            }
        })
        .collect()
}

/// `chip`, `chip@network` or `chip@cluster`: the profile [`EfficiencyProfile::for_run`]
/// of `base` gives run `r`.
pub fn profile_key(base: &EfficiencyProfile, r: &Run) -> String {
    if !r.cluster.is_empty() && base.clusters.contains_key(&r.cluster) {
        return format!("{}@{}", base.chip, r.cluster);
    }
    let net = if r.network.is_empty() || !base.networks.contains_key(&r.network) {
        &base.network
    } else {
        &r.network
    };
    if net.is_empty() {
        base.chip.clone()
    } else {
        format!("{}@{net}", base.chip)
    }
}

/// The prediction interval of some compared rows: p10 and p90 of
/// measured / predicted step time (`None` with fewer than 5 rows: too few
/// for a p10).
pub fn interval_of<'a>(rows: impl Iterator<Item = &'a Row>, source: &str) -> Option<Interval> {
    let mut v: Vec<f64> = rows
        .filter_map(|r| r.step_measured_s.map(|m| m / r.step_predicted_s))
        .filter(|x| x.is_finite())
        .collect();
    (v.len() >= 5).then(|| Interval {
        p10: quantile(&mut v, 0.1),
        p90: quantile(&mut v, 0.9),
        runs: v.len() as u64,
        source: source.to_string(),
    })
}

/// Summarise compared rows.
pub fn summarize(rows: &[Row]) -> Summary {
    let step = |f: &dyn Fn(&Row) -> bool| {
        err_stats(
            rows.iter()
                .filter(|r| r.clean && f(r))
                .filter_map(|r| r.step_error.map(|e| (r, e))),
        )
    };
    let mem = |f: &dyn Fn(&Row) -> bool| {
        err_stats(
            rows.iter()
                .filter(|r| r.clean && f(r))
                .filter_map(|r| r.mem_error.map(|e| (r, e))),
        )
    };
    let mut by_model = BTreeMap::new();
    let mut by_nodes = BTreeMap::new();
    let mut by_source = BTreeMap::new();
    for r in rows {
        by_model.entry(r.model.clone()).or_insert_with(|| {
            let m = r.model.clone();
            (step(&|x| x.model == m), mem(&|x| x.model == m))
        });
        by_nodes.entry(r.nodes).or_insert_with(|| {
            let n = r.nodes;
            (step(&|x| x.nodes == n), mem(&|x| x.nodes == n))
        });
        by_source.entry(r.source.clone()).or_insert_with(|| {
            let s = r.source.clone();
            (step(&|x| x.source == s), mem(&|x| x.source == s))
        });
    }
    // OOM: Playbook rows (those that carry a status)
    let st: Vec<&Row> = rows.iter().filter(|r| r.source == "playbook").collect();
    let ok = |r: &Row| r.fits == r.completed;
    let acc = |v: Vec<&&Row>| -> f64 {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().filter(|r| ok(r)).count() as f64 / v.len() as f64
        }
    };
    let mut oom_by_model = BTreeMap::new();
    let mut oom_by_nodes = BTreeMap::new();
    for r in &st {
        oom_by_model
            .entry(r.model.clone())
            .or_insert_with(|| acc(st.iter().filter(|x| x.model == r.model).collect()));
        oom_by_nodes
            .entry(r.nodes)
            .or_insert_with(|| acc(st.iter().filter(|x| x.nodes == r.nodes).collect()));
    }
    let oom_correct = st.iter().filter(|r| ok(r)).count();
    // recompute pairs
    let mut pairs = Vec::new();
    let mut keys: Vec<&String> = rows.iter().filter_map(|r| r.pair.as_ref()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let full = rows
            .iter()
            .find(|r| r.pair.as_ref() == Some(k) && r.id.ends_with("-full"));
        let sel = rows
            .iter()
            .find(|r| r.pair.as_ref() == Some(k) && r.id.ends_with("-seqsel"));
        if let (Some(f), Some(s)) = (full, sel) {
            if let (Some(mf), Some(ms)) = (f.step_measured_s, s.step_measured_s) {
                let measured = mf / ms;
                let predicted = f.step_predicted_s / s.step_predicted_s;
                pairs.push(PairRatio {
                    pair: k.clone(),
                    measured,
                    predicted,
                    error: predicted / measured - 1.0,
                });
            }
        }
    }
    Summary {
        step: step(&|_| true),
        step_all: err_stats(
            rows.iter()
                .filter(|r| r.completed)
                .filter_map(|r| r.step_error.map(|e| (r, e))),
        ),
        memory: mem(&|_| true),
        by_model,
        by_nodes,
        by_source,
        oom_runs: st.len(),
        oom_correct,
        oom_accuracy: if st.is_empty() {
            f64::NAN
        } else {
            oom_correct as f64 / st.len() as f64
        },
        oom_missed: st.iter().filter(|r| !r.completed && r.fits).count(),
        oom_false_alarm: st.iter().filter(|r| r.completed && !r.fits).count(),
        oom_by_model,
        oom_by_nodes,
        pairs,
    }
}

/// Predicted-vs-measured scatter of step time (log–log), hand-written SVG.
pub fn svg_scatter(rows: &[Row]) -> String {
    let pts: Vec<(f64, f64, &str)> = rows
        .iter()
        .filter_map(|r| {
            r.step_measured_s
                .map(|m| (m, r.step_predicted_s, r.model.as_str()))
        })
        .filter(|(m, p, _)| *m > 0.0 && *p > 0.0)
        .collect();
    let (w, h, pad) = (640.0, 640.0, 60.0);
    let lo = pts
        .iter()
        .map(|p| p.0.min(p.1))
        .fold(f64::INFINITY, f64::min)
        .max(1e-3)
        .log10()
        .floor();
    let hi = pts
        .iter()
        .map(|p| p.0.max(p.1))
        .fold(0.0, f64::max)
        .max(1e-2)
        .log10()
        .ceil();
    let sx = |v: f64| pad + (v.log10() - lo) / (hi - lo) * (w - 2.0 * pad);
    let sy = |v: f64| h - pad - (v.log10() - lo) / (hi - lo) * (h - 2.0 * pad);
    let colors = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    ];
    let mut labels: Vec<&str> = pts.iter().map(|p| p.2).collect();
    labels.sort();
    labels.dedup();
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let (a, b) = (10f64.powf(lo), 10f64.powf(hi));
    s +=
        &format!(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\" stroke-dasharray=\"4\"/>\n",
        sx(a), sy(a), sx(b), sy(b)
    );
    for k in (lo as i32)..=(hi as i32) {
        let v = 10f64.powi(k);
        s += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{v}</text>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v}</text>\n",
            sx(v), h - pad + 18.0, pad - 6.0, sy(v) + 4.0
        );
    }
    s += &format!(
        "<rect x=\"{pad}\" y=\"{pad}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n",
        w - 2.0 * pad, h - 2.0 * pad
    );
    for (m, p, l) in &pts {
        let c = colors[labels.iter().position(|x| x == l).unwrap_or(0) % colors.len()];
        s += &format!(
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{c}\" fill-opacity=\"0.6\"/>\n",
            sx(*m),
            sy(*p)
        );
    }
    for (i, l) in labels.iter().enumerate() {
        let c = colors[i % colors.len()];
        s += &format!(
            "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{c}\"/><text x=\"{}\" y=\"{}\">{l}</text>\n",
            pad + 12.0, pad + 14.0 + 16.0 * i as f64, pad + 20.0, pad + 18.0 + 16.0 * i as f64
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">measured step time (s)</text>\n<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">predicted step time (s)</text>\n</svg>\n",
        w / 2.0, h - 14.0, h / 2.0, h / 2.0
    );
    s
}
