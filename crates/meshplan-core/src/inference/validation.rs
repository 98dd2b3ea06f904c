//! Predicted vs published serving measurements (`data/serving/measurements.csv`).
//!
//! Every row is a published serving benchmark (vLLM / SGLang serving or
//! latency benchmarks, third-party sweeps, engine blog posts), each with its
//! link; nothing here is fitted. Rows with `split = heldout` never informed
//! any engine number. A `split = in-sample` row would be one an engine number
//! was fitted on: it is reported beside the held-out figures, never inside
//! them. None is today: the five rows `step_overhead_s` and
//! `gemm_half_tokens` were once fitted on are held out since those numbers
//! come from a GEMM microbenchmark and a profiled step overhead. The reserved
//! tables (TensorRT-LLM and NIM performance pages, InferenceMAX, aiconfigurator
//! silicon samples) are not here at all, not even as comparison rows.
//!
//! [`compare`] predicts every row with its engine's built-in profile and
//! reports, per metric family (TTFT, TPOT, output tokens/s per GPU) and per
//! chip, engine, dense/MoE and aggregated/disaggregated: the rows, the median
//! and 90th-percentile |error| and the signed median (the bias).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::inference::{evaluate, InferQuery, InferReport};
use crate::trace::NoTrace;
use crate::units::DType;
use crate::view::{pct, Doc, Render, Table};

use super::serving::{EngineProfile, Percentiles, Workload};

/// The measurements file, embedded.
pub const MEASUREMENTS: &str = include_str!("../../../../data/serving/measurements.csv");

/// One published measurement.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Row {
    /// Unique id.
    pub id: String,
    /// "heldout" (never informed any engine number) or "in-sample" (an
    /// end-to-end row a shipped number was fitted on).
    pub split: String,
    /// Engine profile.
    pub engine: String,
    /// Catalog model.
    pub model: String,
    /// Catalog chip.
    pub chip: String,
    /// GPUs of the whole deployment.
    pub chips: u64,
    /// Tensor parallelism per replica (per worker when disaggregated).
    pub tp: u64,
    /// Expert parallelism per replica.
    pub ep: u64,
    /// Weight dtype.
    pub weights_dtype: String,
    /// KV dtype.
    pub kv_dtype: String,
    /// Batch (static), users (closed loop) or sequences per decode replica.
    pub batch: u64,
    /// Prompt tokens.
    pub prompt_len: u64,
    /// Output tokens.
    pub gen_len: u64,
    /// "static", "concurrency=N" or "rate=R".
    pub workload: String,
    /// "agg" (prefill and decode on the same replicas), "disagg" (the
    /// slice split into prefill and decode replicas) or "decode" (a
    /// disaggregated decode pool measured alone).
    pub layout: String,
    /// ttft_s | tpot_s | itl_s | output_tokens_per_s_per_chip (ITL rows
    /// count in the TPOT family: both are per-token latencies).
    pub metric: String,
    /// "mean" or "median": the statistic the source reports.
    pub statistic: String,
    /// The published value (SI units).
    pub measured: f64,
    /// Link.
    pub source: String,
    /// How the number was read.
    pub note: String,
}

impl Row {
    /// "dense" or "moe".
    fn arch(&self, cat: &Catalog) -> &'static str {
        match cat.model(&self.model).map(|m| m.arch.moe.is_some()) {
            Ok(true) => "moe",
            _ => "dense",
        }
    }

    /// "agg" or "disagg" (a decode pool measured alone is disaggregated).
    fn serving(&self) -> &'static str {
        if self.layout == "agg" {
            "agg"
        } else {
            "disagg"
        }
    }
}

/// One row predicted.
#[derive(Clone, Debug, Serialize)]
pub struct RowResult {
    /// The row.
    pub id: String,
    /// heldout | in-sample.
    pub split: String,
    /// Metric family: TTFT, TPOT or "tokens/s/GPU".
    pub metric: String,
    /// Chip.
    pub chip: String,
    /// Engine.
    pub engine: String,
    /// dense | moe.
    pub arch: String,
    /// agg | disagg.
    pub serving: String,
    /// The publication ([`source_key`]: "owner/repo#N", "owner/repo", a host).
    pub source: String,
    /// Published.
    pub measured: f64,
    /// meshplan (None: the configuration could not be evaluated).
    pub predicted: Option<f64>,
    /// predicted/measured − 1.
    pub error: Option<f64>,
    /// Why the row was not predicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_predicted: Option<String>,
}

/// The errors of one group of rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupStats {
    /// Metric family: TTFT, TPOT or "tokens/s/GPU".
    pub metric: String,
    /// What the rows are grouped by: all | chip | engine | arch | serving | source.
    pub by: String,
    /// The group ("all", "h100", "sglang", "moe", "disagg", …).
    pub group: String,
    /// Rows.
    pub n: usize,
    /// Median |predicted/measured − 1|.
    pub median_abs_error: f64,
    /// 90th percentile of |error| (nearest rank: the ⌈0.9·n⌉-th smallest).
    pub p90_abs_error: f64,
    /// Median signed error (the bias: < 0 predicts too low).
    pub signed_median_error: f64,
}

/// The whole comparison.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Every row.
    pub rows: Vec<RowResult>,
    /// Held-out rows, per metric and per chip / engine / dense-MoE /
    /// agg-disagg.
    pub heldout: Vec<GroupStats>,
    /// The in-sample rows, per metric (beside, never inside, the held-out).
    pub in_sample: Vec<GroupStats>,
    /// Rows that could not be evaluated (counted in no group).
    pub not_predicted: usize,
    /// Whether to list every row in the text report.
    #[serde(skip)]
    pub list_rows: bool,
}

/// The metric families, in report order.
pub const METRICS: [&str; 3] = ["TTFT", "TPOT", "tokens/s/GPU"];

/// Parse the measurements.
pub fn rows() -> Result<Vec<Row>> {
    let mut r = csv::Reader::from_reader(MEASUREMENTS.as_bytes());
    r.deserialize()
        .map(|x| x.map_err(|e| Error::Invalid(format!("data/serving/measurements.csv: {e}"))))
        .collect()
}

/// The metric family of a row: TTFT, TPOT or output tokens/s per GPU.
fn family(metric: &str) -> Result<&'static str> {
    Ok(match metric {
        "ttft_s" => "TTFT",
        // the gap between tokens: TPOT's family (a per-token latency)
        "tpot_s" | "itl_s" => "TPOT",
        "output_tokens_per_s_per_chip" => "tokens/s/GPU",
        _ => return Err(Error::Invalid(format!("unknown serving metric {metric}"))),
    })
}

/// The query a row describes, under `engine`.
fn query(cat: &Catalog, row: &Row, engine: &EngineProfile) -> Result<InferQuery> {
    let chip = cat.chip(&row.chip)?;
    let wdt = DType::parse(&row.weights_dtype)?;
    Ok(InferQuery {
        weights_dtype: wdt,
        kv_dtype: DType::parse(&row.kv_dtype)?,
        compute_dtype: engine.native_compute(chip, wdt).unwrap_or(DType::Bf16),
        batch: row.batch,
        prompt_len: row.prompt_len,
        context: row.prompt_len + row.gen_len,
        gen_len: row.gen_len,
        mesh: vec![row.chips],
        tp: Some(row.tp),
        ep: (row.ep > 1).then_some(row.ep),
        engine: Some(engine.clone()),
        workload: Workload::parse(&row.workload)?,
        ..InferQuery::default()
    })
}

/// Predict one row under `engine`.
pub fn predict(cat: &Catalog, row: &Row, engine: &EngineProfile) -> Result<f64> {
    let q = query(cat, row, engine)?;
    let r = evaluate(
        cat.model(&row.model)?,
        cat.chip(&row.chip)?,
        &q,
        &mut NoTrace,
    )?;
    metric(&r, row)
}

/// The mean or the median, as the source reports.
fn stat(p: &Percentiles, row: &Row) -> Result<f64> {
    match row.statistic.as_str() {
        "mean" => Ok(p.mean),
        "median" => Ok(p.p50),
        s => Err(Error::Invalid(format!(
            "{}: statistic {s} (mean | median)",
            row.id
        ))),
    }
}

/// The row's metric out of the `infer` report, for its layout.
fn metric(r: &InferReport, row: &Row) -> Result<f64> {
    let s = &r.serving;
    let m = row.metric.as_str();
    let fixed = |x: f64| Percentiles {
        mean: x,
        p50: x,
        p90: x,
        p99: x,
    };
    match row.layout.as_str() {
        "agg" => match (&s.continuous, m) {
            (Some(c), "ttft_s") => stat(&c.ttft_s, row),
            (Some(c), "tpot_s") => stat(&c.tpot_s, row),
            (Some(c), "itl_s") => stat(&c.itl_s, row),
            (Some(c), "output_tokens_per_s_per_chip") => Ok(c.output_tokens_per_s_per_chip),
            (None, "ttft_s") => stat(&fixed(s.static_batch.ttft_s), row),
            (None, "tpot_s" | "itl_s") => stat(&fixed(s.static_batch.tpot_s), row),
            (None, "output_tokens_per_s_per_chip") => {
                Ok(s.static_batch.output_tokens_per_s_per_chip)
            }
            _ => Err(Error::Invalid(format!("{}: metric {m}", row.id))),
        },
        "disagg" => {
            let d = s.disaggregated.as_ref().ok_or_else(|| {
                Error::Invalid(format!(
                    "{}: disaggregated serving needs two replicas or more (chips / (TP·EP))",
                    row.id
                ))
            })?;
            match m {
                "ttft_s" => stat(&d.ttft_s, row),
                // no prefill in a decode replica: every gap is the step
                "tpot_s" | "itl_s" => stat(&d.tpot_s, row),
                "output_tokens_per_s_per_chip" => Ok(d.output_tokens_per_s_per_chip),
                _ => Err(Error::Invalid(format!("{}: metric {m}", row.id))),
            }
        }
        // a decode pool alone: every replica decodes B sequences per step
        "decode" => {
            let t = s.static_batch.tpot_s;
            match m {
                "tpot_s" | "itl_s" => Ok(t),
                "output_tokens_per_s_per_chip" => {
                    Ok(r.batch as f64 / (t * r.chips_per_replica as f64))
                }
                _ => Err(Error::Invalid(format!(
                    "{}: metric {m} of a decode pool",
                    row.id
                ))),
            }
        }
        l => Err(Error::Invalid(format!(
            "{}: layout {l} (agg | disagg | decode)",
            row.id
        ))),
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// Nearest-rank percentile: the ⌈p·n⌉-th smallest.
fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    let k = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[k - 1]
}

/// The publication a row's link belongs to, so that one source's rows
/// count as one group: a GitHub issue or pull request is "owner/repo#N",
/// a file of a repository "owner/repo" (a blog's posts, a cookbook's pages
/// and a benchmark's logs are one publication each), any other page its
/// host.
pub fn source_key(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let mut parts = rest.split('/').filter(|p| !p.is_empty());
    let host = parts.next().unwrap_or_default();
    let host = host.strip_prefix("www.").unwrap_or(host);
    if host != "github.com" {
        return host.to_string();
    }
    let path: Vec<&str> = parts.collect();
    match path.as_slice() {
        [owner, repo, "issues" | "pull", n, ..] => format!("{owner}/{repo}#{n}"),
        [owner, repo, ..] => format!("{owner}/{repo}"),
        _ => host.to_string(),
    }
}

/// The statistics of the signed errors `errs`.
fn stats(metric: &str, by: &str, group: &str, errs: &[f64]) -> GroupStats {
    let abs: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
    GroupStats {
        metric: metric.into(),
        by: by.into(),
        group: group.into(),
        n: errs.len(),
        median_abs_error: median(&abs),
        p90_abs_error: percentile(&abs, 0.9),
        signed_median_error: median(errs),
    }
}

/// Per metric: all rows, then by chip, engine, dense/MoE, agg/disagg and
/// source (groups in first-seen order).
fn groups(rows: &[&RowResult]) -> Vec<GroupStats> {
    let key = |r: &RowResult, by: &str| match by {
        "chip" => r.chip.clone(),
        "engine" => r.engine.clone(),
        "arch" => r.arch.clone(),
        "source" => r.source.clone(),
        _ => r.serving.clone(),
    };
    let mut out = Vec::new();
    for m in METRICS {
        let of: Vec<&RowResult> = rows.iter().copied().filter(|r| r.metric == m).collect();
        let errs = |f: &dyn Fn(&RowResult) -> bool| -> Vec<f64> {
            of.iter().filter(|r| f(r)).filter_map(|r| r.error).collect()
        };
        let all = errs(&|_| true);
        if all.is_empty() {
            continue;
        }
        out.push(stats(m, "all", "all", &all));
        let first = out.len();
        for by in ["chip", "engine", "arch", "serving", "source"] {
            let mut seen: Vec<String> = Vec::new();
            for r in &of {
                let k = key(r, by);
                if !seen.contains(&k) {
                    seen.push(k);
                }
            }
            for g in seen {
                let e = errs(&|r| key(r, by) == g);
                if !e.is_empty() {
                    out.push(stats(m, by, &g, &e));
                }
            }
        }
        let per_source: Vec<&GroupStats> =
            out[first..].iter().filter(|g| g.by == "source").collect();
        out.insert(first, each_source_once(m, &per_source));
    }
    out
}

/// The sources' medians summarised with each publication weighted once (a
/// source of 18 rows counts as much as one of a single row): the median
/// and p90 of the sources' median |error|, and the median of their biases.
fn each_source_once(metric: &str, sources: &[&GroupStats]) -> GroupStats {
    let abs: Vec<f64> = sources.iter().map(|g| g.median_abs_error).collect();
    let bias: Vec<f64> = sources.iter().map(|g| g.signed_median_error).collect();
    GroupStats {
        metric: metric.into(),
        by: "all".into(),
        group: "each source once".into(),
        n: sources.len(),
        median_abs_error: median(&abs),
        p90_abs_error: percentile(&abs, 0.9),
        signed_median_error: median(&bias),
    }
}

/// Predict every row with its engine's built-in profile.
pub fn results(cat: &Catalog, rows: &[Row]) -> Result<Vec<RowResult>> {
    rows.iter()
        .map(|row| {
            let e = EngineProfile::builtin(&row.engine)?;
            let (predicted, not_predicted) = match predict(cat, row, &e) {
                Ok(p) if p.is_finite() && p > 0.0 => (Some(p), None),
                Ok(p) => (None, Some(format!("predicted {p}"))),
                Err(err) => (None, Some(err.to_string())),
            };
            Ok(RowResult {
                id: row.id.clone(),
                split: row.split.clone(),
                metric: family(&row.metric)?.into(),
                chip: row.chip.clone(),
                engine: row.engine.clone(),
                arch: row.arch(cat).into(),
                serving: row.serving().into(),
                source: source_key(&row.source),
                measured: row.measured,
                predicted,
                error: predicted.map(|p| p / row.measured - 1.0),
                not_predicted,
            })
        })
        .collect()
}

/// Compare every row with the shipped profiles.
pub fn compare(cat: &Catalog) -> Result<Summary> {
    let rows = results(cat, &rows()?)?;
    let of =
        |split: &str| -> Vec<&RowResult> { rows.iter().filter(|r| r.split == split).collect() };
    let heldout = groups(&of("heldout"));
    let in_sample = groups(&of("in-sample"))
        .into_iter()
        .filter(|g| g.by == "all")
        .collect();
    Ok(Summary {
        not_predicted: rows.iter().filter(|r| r.predicted.is_none()).count(),
        heldout,
        in_sample,
        rows,
        list_rows: false,
    })
}

fn signed(x: f64) -> String {
    format!("{:+.1}%", 100.0 * x)
}

/// The group table (markdown and text share it).
fn group_table(gs: &[GroupStats]) -> Table {
    let mut t = Table::new(
        &[
            "metric",
            "by",
            "group",
            "n",
            "median abs error",
            "p90 abs error",
            "bias",
        ],
        &["n", "median abs error", "p90 abs error", "bias"],
    );
    for g in gs {
        t.row(vec![
            g.metric.clone(),
            g.by.clone(),
            g.group.clone(),
            g.n.to_string(),
            pct(g.median_abs_error),
            pct(g.p90_abs_error),
            signed(g.signed_median_error),
        ]);
    }
    t
}

/// The held-out and in-sample tables as the markdown that docs/inference.md
/// ("Serving validation") carries; a test keeps the two equal.
pub fn markdown(s: &Summary) -> String {
    let mut out = String::new();
    let mut table = |title: &str, gs: &[GroupStats]| {
        let t = group_table(gs);
        let _ = writeln!(out, "{title}\n");
        let _ = writeln!(out, "| {} |", t.header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(t.header.len()));
        for r in &t.rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        out.push('\n');
    };
    table("Held out:", &s.heldout);
    if !s.in_sample.is_empty() {
        table(
            "In-sample (rows an engine number was fitted on):",
            &s.in_sample,
        );
    }
    let _ = writeln!(
        out,
        "Rows: {} held out, {} in-sample, {} not predicted.",
        s.rows.iter().filter(|r| r.split == "heldout").count(),
        s.rows.iter().filter(|r| r.split == "in-sample").count(),
        s.not_predicted
    );
    for r in s.rows.iter().filter(|r| r.predicted.is_none()) {
        let why = r.not_predicted.as_deref().unwrap_or("");
        let _ = writeln!(out, "\nNot predicted: {} ({why}).", r.id);
    }
    out
}

impl Render for Summary {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        d.title("Serving validation: predicted vs published (data/serving/measurements.csv)");
        if self.list_rows {
            let mut t = Table::new(
                &["row", "split", "metric", "measured", "predicted", "error"],
                &["measured", "predicted", "error"],
            );
            for r in &self.rows {
                t.row(vec![
                    r.id.clone(),
                    r.split.clone(),
                    r.metric.clone(),
                    format!("{:.4}", r.measured),
                    r.predicted
                        .map_or_else(|| "-".into(), |p| format!("{p:.4}")),
                    r.error
                        .map_or_else(|| r.not_predicted.clone().unwrap_or_default(), signed),
                ]);
            }
            d.table(t);
        }
        d.line("Held out (rows that never informed an engine number):");
        d.table(group_table(&self.heldout));
        if !self.in_sample.is_empty() {
            d.line("In-sample (the rows an engine number was fitted on), beside:");
            d.table(group_table(&self.in_sample));
        }
        if self.not_predicted > 0 {
            d.note(format!(
                "{} rows could not be evaluated (listed with --all); they count in no group",
                self.not_predicted
            ));
        }
        d.note("target (issue 26): TTFT and TPOT median |error| <= 15% on held-out rows");
        d
    }
}

#[cfg(test)]
mod source_tests {
    use super::{each_source_once, source_key, GroupStats};

    /// Three sources with medians 10 %, 20 % (bias −20 %) and 90 %: the
    /// summary is their median, 20 %, whatever their row counts.
    #[test]
    fn each_source_counts_once() {
        let g = |n, abs, bias| GroupStats {
            metric: "TTFT".into(),
            by: "source".into(),
            group: "x".into(),
            n,
            median_abs_error: abs,
            p90_abs_error: abs,
            signed_median_error: bias,
        };
        let (a, b, c) = (g(18, 0.1, 0.1), g(1, 0.2, -0.2), g(1, 0.9, -0.9));
        let s = each_source_once("TTFT", &[&a, &b, &c]);
        assert_eq!(
            (s.n, s.median_abs_error, s.signed_median_error),
            (3, 0.2, -0.2)
        );
        assert_eq!(s.p90_abs_error, 0.9);
    }

    #[test]
    fn sources_by_publication() {
        for (url, key) in [
            (
                "https://github.com/sgl-project/sglang/issues/1008",
                "sgl-project/sglang#1008",
            ),
            (
                "https://github.com/vllm-project/vllm/pull/26887",
                "vllm-project/vllm#26887",
            ),
            (
                "https://github.com/Michaelvll/llm-ie-benchmarks/blob/5f717fe/sgl/logs/a.log",
                "Michaelvll/llm-ie-benchmarks",
            ),
            (
                "https://lmsys.org/blog/2025-05-05-large-scale-ep/",
                "lmsys.org",
            ),
            ("https://www.example.com/x", "example.com"),
            ("github.com", "github.com"),
            ("", ""),
        ] {
            assert_eq!(source_key(url), key, "{url}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_hand() {
        // |errors| 0.1, 0.2, 0.3, 0.4: median 0.25; p90 = ⌈3.6⌉ = 4th = 0.4
        let v = [0.3, -0.1, 0.4, -0.2];
        let g = stats("TTFT", "all", "all", &v);
        assert!((g.median_abs_error - 0.25).abs() < 1e-12);
        assert!((g.p90_abs_error - 0.4).abs() < 1e-12);
        // signed: −0.2, −0.1, 0.3, 0.4 → (−0.1 + 0.3)/2 = 0.1
        assert!((g.signed_median_error - 0.1).abs() < 1e-12);
        // ten values 1..10: p90 = 9th smallest = 9
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&ten, 0.9), 9.0);
    }

    #[test]
    fn unknown_metric_and_layout_are_errors() {
        assert!(family("joules").is_err());
    }
}
