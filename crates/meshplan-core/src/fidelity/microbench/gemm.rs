//! GEMM sweeps: `m,n,k,dtype,time_us` (or `time_s`, `time_ms`,
//! `latency_ms`, `tflops`) rows, and the fit of the calibrated pricer's
//! GEMM efficiency form `e_max · (x/⌈x⌉₁₂₈) · x/(x + x½)`, `x = min(m, n, k)`
//! ([`crate::step::calibrated::gemm_efficiency`]) to them.

use super::table::{plausible, seconds, time_column, Table};
use crate::error::Result;
use crate::hardware::Chip;
use crate::units::DType;

/// One measured GEMM: `[m, k] × [k, n]` in `dtype`, and the fraction of the
/// chip's `dtype` peak it reached.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmPoint {
    /// Line in the file.
    pub line: usize,
    /// Rows of the output.
    pub m: f64,
    /// Columns of the output.
    pub n: f64,
    /// Contraction.
    pub k: f64,
    /// Operand dtype.
    pub dtype: DType,
    /// Seconds per GEMM.
    pub time_s: f64,
    /// `2mnk / (time · peak(dtype))`.
    pub efficiency: f64,
}

/// Read a GEMM sweep for `chip` (its peak per dtype turns times into
/// efficiencies). A dtype the chip has no peak for is an error at its line.
pub fn parse(src: &str, file: &str, chip: &Chip) -> Result<Vec<GemmPoint>> {
    let t = Table::parse(src, file)?;
    t.require(&["m", "n", "k"])?;
    let col = time_column(&t)?;
    t.rows()
        .map(|r| {
            let (m, n, k) = (r.positive("m")?, r.positive("n")?, r.positive("k")?);
            let dtype = match r.text("dtype") {
                "" => DType::Bf16,
                d => DType::parse(d).map_err(|e| r.err("dtype", e))?,
            };
            let peak = chip.peak.get(dtype).map(|p| p.get()).filter(|p| *p > 0.0);
            let peak = peak.ok_or_else(|| {
                r.err(
                    "dtype",
                    format!("{} has no {dtype} peak in its catalog entry", chip.name),
                )
            })?;
            let flops = 2.0 * m * n * k;
            let time_s = seconds(&r, col, flops)?;
            plausible(&r, col, flops / (time_s * peak), peak)?;
            Ok(GemmPoint {
                line: r.line,
                m,
                n,
                k,
                dtype,
                time_s,
                efficiency: flops / (time_s * peak),
            })
        })
        .collect()
}

/// The fitted form for one dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmFit {
    /// Dtype the rows were in.
    pub dtype: DType,
    /// Rows fitted.
    pub points: usize,
    /// `e_max`: fraction of peak at large shapes (`matmul_efficiency`).
    pub efficiency: f64,
    /// `x½` (`matmul_half_dim`).
    pub half_dim: f64,
    /// Time-weighted root-mean-square of the log residuals (0.01 = 1 %).
    pub rms_log_residual: f64,
    /// Efficiency of the largest GEMM measured (by FLOPs).
    pub largest_efficiency: f64,
}

/// Largest `x½` the fit considers: [`crate::fidelity::profile::Param::bounds`].
pub const MAX_HALF_DIM: f64 = 1024.0;

/// `(x/⌈x⌉₁₂₈) · x/(x + h)` for the smallest dimension `x` of a point: the
/// shape part of the pricer's form.
fn shape_factor(p: &GemmPoint, h: f64) -> f64 {
    let x = p.m.min(p.n).min(p.k).max(1.0);
    let padded = (x / 128.0).ceil() * 128.0;
    (x / padded) * x / (x + h)
}

/// For a given `x½`: the weighted least-squares `ln e_max` (the weighted
/// mean log ratio) and the weighted mean of the squared log residuals. Each
/// row weighs its measured time: the GEMMs that take the time (a training
/// step's are large) set the fit, and a sweep's many small, latency-bound
/// GEMMs do not pull `e_max` above what the large ones reach.
fn at_half_dim(pts: &[&GemmPoint], h: f64) -> (f64, f64) {
    let logs: Vec<(f64, f64)> = pts
        .iter()
        .map(|p| (p.time_s, p.efficiency.ln() - shape_factor(p, h).ln()))
        .collect();
    let w: f64 = logs.iter().map(|x| x.0).sum();
    let mean = logs.iter().map(|(t, l)| t * l).sum::<f64>() / w;
    (
        mean,
        logs.iter()
            .map(|(t, l)| t * (l - mean).powi(2))
            .sum::<f64>()
            / w,
    )
}

/// Least squares of `ln(efficiency)`, each row weighted by its time, on
/// the pricer's form over the points of `dtype`: `e_max` in closed form for each `x½`, `x½` on [0, 1024] by a
/// log grid then golden-section refinement. `None` without points.
pub fn fit(points: &[GemmPoint], dtype: DType) -> Option<GemmFit> {
    let pts: Vec<&GemmPoint> = points.iter().filter(|p| p.dtype == dtype).collect();
    if pts.is_empty() {
        return None;
    }
    let sse = |h: f64| at_half_dim(&pts, h).1;
    // grid: 0 and 1e-2 … 1024 in 200 log steps
    let grid: Vec<f64> = std::iter::once(0.0)
        .chain((0..=200).map(|i| 1e-2 * (MAX_HALF_DIM / 1e-2).powf(i as f64 / 200.0)))
        .collect();
    let best = (0..grid.len())
        .min_by(|&a, &b| sse(grid[a]).total_cmp(&sse(grid[b])))
        .unwrap_or(0);
    let (mut lo, mut hi) = (
        grid[best.saturating_sub(1)],
        grid[(best + 1).min(grid.len() - 1)],
    );
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..80 {
        let (a, b) = (hi - phi * (hi - lo), lo + phi * (hi - lo));
        if sse(a) <= sse(b) {
            hi = b;
        } else {
            lo = a;
        }
    }
    let h = [grid[best], 0.5 * (lo + hi)]
        .into_iter()
        .min_by(|a, b| sse(*a).total_cmp(&sse(*b)))
        .unwrap_or(0.0);
    let (ln_e, sse_h) = at_half_dim(&pts, h);
    let largest = pts
        .iter()
        .max_by(|a, b| (a.m * a.n * a.k).total_cmp(&(b.m * b.n * b.k)))
        .map_or(0.0, |p| p.efficiency);
    Some(GemmFit {
        dtype,
        points: pts.len(),
        efficiency: ln_e.exp(),
        half_dim: h,
        rms_log_residual: sse_h.sqrt(),
        largest_efficiency: largest,
    })
}

/// The dtypes present, in first-seen order.
pub fn dtypes(points: &[GemmPoint]) -> Vec<DType> {
    let mut out: Vec<DType> = Vec::new();
    for p in points {
        if !out.contains(&p.dtype) {
            out.push(p.dtype);
        }
    }
    out
}
