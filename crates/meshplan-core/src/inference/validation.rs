//! Predicted vs published serving measurements (`data/serving/measurements.csv`).
//!
//! Rows with `split = fit` come from the serving engines' own benchmarks
//! (vLLM, SGLang): the only end-to-end data the engine profiles' two fitted
//! numbers (`step_overhead_s`, `gemm_half_tokens`) see, through [`fit`].
//! Rows with `split = heldout` (TensorRT-LLM performance tables) are never
//! fitted on: they measure the held-out error, reported next to the
//! in-sample one by [`compare`].

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::inference::{evaluate, InferQuery, InferReport};
use crate::trace::NoTrace;
use crate::units::DType;

use super::serving::{EngineProfile, Workload};

/// The measurements file, embedded.
pub const MEASUREMENTS: &str = include_str!("../../../../data/serving/measurements.csv");

/// One published measurement.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Row {
    /// Unique id.
    pub id: String,
    /// "fit" (vLLM/SGLang's own benchmarks) or "heldout" (never fitted).
    pub split: String,
    /// Engine profile.
    pub engine: String,
    /// Catalog model.
    pub model: String,
    /// Catalog chip.
    pub chip: String,
    /// GPUs.
    pub chips: u64,
    /// Tensor parallelism.
    pub tp: u64,
    /// Weight dtype.
    pub weights_dtype: String,
    /// KV dtype.
    pub kv_dtype: String,
    /// Batch (static) or requests in flight.
    pub batch: u64,
    /// Prompt tokens.
    pub prompt_len: u64,
    /// Output tokens.
    pub gen_len: u64,
    /// "static" or a continuous workload.
    pub workload: String,
    /// ttft_s | tpot_s | output_tokens_per_s | output_tokens_per_s_per_chip.
    pub metric: String,
    /// The published value.
    pub measured: f64,
    /// Link.
    pub source: String,
    /// How the number was read.
    pub note: String,
}

/// One row predicted.
#[derive(Clone, Debug, Serialize)]
pub struct RowResult {
    /// The row.
    pub id: String,
    /// fit | heldout.
    pub split: String,
    /// Metric.
    pub metric: String,
    /// Published.
    pub measured: f64,
    /// meshplan.
    pub predicted: f64,
    /// predicted/measured − 1.
    pub error: f64,
}

/// Median |error| by split and metric family.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Every row.
    pub rows: Vec<RowResult>,
    /// In-sample, all metrics.
    pub fit_median_abs_error: f64,
    /// Held out, all metrics.
    pub heldout_median_abs_error: f64,
    /// (split, metric family, rows, median |error|).
    pub by_metric: Vec<(String, String, usize, f64)>,
}

/// Parse the measurements.
pub fn rows() -> Result<Vec<Row>> {
    let mut r = csv::Reader::from_reader(MEASUREMENTS.as_bytes());
    r.deserialize()
        .map(|x| x.map_err(|e| Error::Invalid(format!("data/serving/measurements.csv: {e}"))))
        .collect()
}

/// Predict one row under `engine`.
pub fn predict(cat: &Catalog, row: &Row, engine: &EngineProfile) -> Result<f64> {
    let m = cat.model(&row.model)?;
    let chip = cat.chip(&row.chip)?;
    let wdt = DType::parse(&row.weights_dtype)?;
    let q = InferQuery {
        weights_dtype: wdt,
        kv_dtype: DType::parse(&row.kv_dtype)?,
        compute_dtype: engine.native_compute(chip, wdt).unwrap_or(DType::Bf16),
        batch: row.batch,
        prompt_len: row.prompt_len,
        context: row.prompt_len + row.gen_len,
        gen_len: row.gen_len,
        mesh: vec![row.chips],
        tp: Some(row.tp),
        ep: None,
        engine: Some(engine.clone()),
        workload: Workload::parse(&row.workload)?,
        ..InferQuery::default()
    };
    let r = evaluate(m, chip, &q, &mut NoTrace)?;
    metric(&r, &row.metric)
}

fn metric(r: &InferReport, name: &str) -> Result<f64> {
    let s = &r.serving;
    Ok(match (name, &s.continuous) {
        ("output_tokens_per_s", Some(c)) => c.output_tokens_per_s,
        ("ttft_s", Some(c)) => c.ttft_s.mean,
        ("tpot_s", Some(c)) => c.tpot_s.mean,
        ("output_tokens_per_s", None) => s.static_batch.output_tokens_per_s,
        ("output_tokens_per_s_per_chip", None) => s.static_batch.output_tokens_per_s_per_chip,
        ("ttft_s", None) => s.static_batch.ttft_s,
        ("tpot_s", None) => s.static_batch.tpot_s,
        _ => return Err(Error::Invalid(format!("unknown serving metric {name}"))),
    })
}

/// The metric family a row's error counts under: TTFT, TPOT or throughput.
fn family(metric: &str) -> &'static str {
    match metric {
        "ttft_s" => "TTFT",
        "tpot_s" => "TPOT",
        _ => "output tokens/s",
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Every row predicted with its own engine's built-in profile, `with`
/// applied to it (the fit varies the fitted numbers through it).
fn results(
    cat: &Catalog,
    rows: &[Row],
    with: &dyn Fn(&mut EngineProfile),
) -> Result<Vec<RowResult>> {
    rows.iter()
        .map(|row| {
            let mut e = EngineProfile::builtin(&row.engine)?;
            with(&mut e);
            let p = predict(cat, row, &e)?;
            Ok(RowResult {
                id: row.id.clone(),
                split: row.split.clone(),
                metric: row.metric.clone(),
                measured: row.measured,
                predicted: p,
                error: p / row.measured - 1.0,
            })
        })
        .collect()
}

/// Compare every row with the shipped profiles.
pub fn compare(cat: &Catalog) -> Result<Summary> {
    let rows = results(cat, &rows()?, &|_| {})?;
    let med = |split: &str, fam: Option<&str>| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r.split == split && fam.map_or(true, |f| family(&r.metric) == f))
            .map(|r| r.error.abs())
            .collect();
        (v.len(), median(v))
    };
    let mut by_metric = Vec::new();
    for split in ["fit", "heldout"] {
        for fam in ["TTFT", "TPOT", "output tokens/s"] {
            let (n, m) = med(split, Some(fam));
            if n > 0 {
                by_metric.push((split.to_string(), fam.to_string(), n, m));
            }
        }
    }
    Ok(Summary {
        fit_median_abs_error: med("fit", None).1,
        heldout_median_abs_error: med("heldout", None).1,
        by_metric,
        rows,
    })
}

/// Fit `step_overhead_s` and `gemm_half_tokens` (shared by the vLLM and
/// SGLang profiles) on the `fit` rows only: the grid point (0.05 ms and
/// 8-token steps) of least median |error|. Returns (step overhead s, M½).
pub fn fit(cat: &Catalog) -> Result<(f64, f64)> {
    let fit_rows: Vec<Row> = rows()?.into_iter().filter(|r| r.split == "fit").collect();
    let mut best = (f64::INFINITY, 0.0, 0.0);
    for oi in 0..=60 {
        let o = oi as f64 * 0.05e-3;
        for hi in 0..=32 {
            let h = hi as f64 * 8.0;
            let set = |e: &mut EngineProfile| {
                e.step_overhead_s = o;
                e.gemm_half_tokens = h;
            };
            let errs: Vec<f64> = results(cat, &fit_rows, &set)?
                .iter()
                .map(|r| r.error.abs())
                .collect();
            let m = median(errs);
            if m < best.0 - 1e-12 {
                best = (m, o, h);
            }
        }
    }
    Ok((best.1, best.2))
}
