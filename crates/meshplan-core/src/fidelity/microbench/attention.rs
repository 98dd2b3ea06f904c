//! Attention-kernel sweeps: `batch,seq,keys,heads,head_dim,causal,time_us`
//! rows (forward kernel times; `keys` defaults to `seq`), and the fit of the
//! calibrated pricer's `attention_efficiency`: the forward kernel takes
//! `4·tokens·heads·head_dim·keys_avg / (peak_bf16 · attention_efficiency)`
//! (`keys_avg` = keys, or `keys − seq/2` causal: the pricer's `seq/2` when
//! the queries are the whole sequence).

use super::table::{plausible, seconds, time_column, Table};
use crate::error::Result;
use crate::hardware::Chip;
use crate::units::DType;

/// One measured attention forward kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionPoint {
    /// Line in the file.
    pub line: usize,
    /// Forward FLOPs as the pricer counts them.
    pub flops: f64,
    /// Seconds.
    pub time_s: f64,
    /// `flops / (time · peak_bf16)`.
    pub efficiency: f64,
}

/// Read an attention sweep for `chip` (bf16 peak: the pricer's attention
/// peak). Rows in a dtype other than bf16/fp16 are refused at their line.
pub fn parse(src: &str, file: &str, chip: &Chip) -> Result<Vec<AttentionPoint>> {
    let t = Table::parse(src, file)?;
    let seq = t.first_of(&["seq", "seq_len", "queries"]).unwrap_or("seq");
    t.require(&["batch", seq, "heads", "head_dim", "causal"])?;
    let col = time_column(&t)?;
    let peak = chip.flops(DType::Bf16).get();
    t.rows()
        .map(|r| {
            match r.text("dtype").to_lowercase().as_str() {
                "" | "bf16" | "bfloat16" | "fp16" | "float16" | "half" => {}
                d => {
                    return Err(r.err(
                        "dtype",
                        format!("`{d}`: the pricer prices attention at the bf16 peak; give bf16 or fp16 rows"),
                    ))
                }
            }
            let (b, s) = (r.positive("batch")?, r.positive(seq)?);
            let keys = if r.text("keys").is_empty() {
                s
            } else {
                r.positive("keys")?
            };
            let (h, d) = (r.positive("heads")?, r.positive("head_dim")?);
            let causal = r.flag("causal", true)?;
            if causal && s > keys {
                return Err(r.err(
                    "keys",
                    format!("causal with {s} queries but {keys} keys: the queries are the last of the keys"),
                ));
            }
            let keys_avg = if causal { keys - s / 2.0 } else { keys };
            let flops = 4.0 * b * s * h * d * keys_avg;
            let time_s = seconds(&r, col, flops)?;
            plausible(&r, col, flops / (time_s * peak), peak)?;
            Ok(AttentionPoint {
                line: r.line,
                flops,
                time_s,
                efficiency: flops / (time_s * peak),
            })
        })
        .collect()
}

/// The fitted attention efficiency.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionFit {
    /// Rows.
    pub points: usize,
    /// `Σ flops / (peak · Σ time)`: the one efficiency that reproduces the
    /// sweep's total time (the large kernels a training step runs weigh most).
    pub efficiency: f64,
    /// Smallest and largest per-row efficiency.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

/// Fit `attention_efficiency` ([`AttentionFit::efficiency`]).
pub fn fit(points: &[AttentionPoint], chip: &Chip) -> Option<AttentionFit> {
    if points.is_empty() {
        return None;
    }
    let peak = chip.flops(DType::Bf16).get();
    let flops: f64 = points.iter().map(|p| p.flops).sum();
    let time: f64 = points.iter().map(|p| p.time_s).sum();
    let effs = points.iter().map(|p| p.efficiency);
    Some(AttentionFit {
        points: points.len(),
        efficiency: flops / (peak * time),
        min: effs.clone().fold(f64::INFINITY, f64::min),
        max: effs.fold(0.0, f64::max),
    })
}
