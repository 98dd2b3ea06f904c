/*!
Calibration from microbenchmarks of the user's own cluster (issue 25 item
4): nccl-tests logs, a GEMM sweep and an attention sweep become the
microbenchmark-level fields of an efficiency profile, each with a
`[sources]` entry naming its input file and fit. `meshplan calibrate --gemm
FILE --attention FILE --nccl FILE…` writes it; `train` / `plan train` take
it with `--hw-profile` (alias `--profile`). `scripts/microbench.py` produces
exactly these files; their formats are in `docs/fidelity.md`.

What is fitted, each in the calibrated pricer's own form
([`crate::step::calibrated`]):

| input | fields |
|---|---|
| GEMM sweep (bf16 rows) | `matmul_efficiency`, `matmul_half_dim` ([`gemm`]) |
| attention sweep | `attention_efficiency` ([`attention`]) |
| nccl-tests on one node | `intra_node_efficiency`, `collective_latency_s` ([`nccl`]) |
| nccl-tests across nodes | `inter_node_efficiency`, `inter_node_latency_s`, `inter_node_congestion` (two or more node counts) |

Every other field keeps the starting profile's value and source (the
profile `train` uses for the chip without `--hw-profile`, or `--from`).
*/

pub mod attention;
pub mod gemm;
pub mod nccl;
pub mod table;

use serde::{Deserialize, Serialize};

use super::profile::{EfficiencyProfile, Param};
use crate::collectives::Collective;
use crate::error::Result;
use crate::hardware::Chip;
use crate::units::DType;

/// The microbenchmark files given to `calibrate`, as (name, text).
#[derive(Clone, Debug, Default)]
pub struct MicrobenchInputs {
    /// GEMM sweeps (CSV).
    pub gemm: Vec<(String, String)>,
    /// Attention sweeps (CSV).
    pub attention: Vec<(String, String)>,
    /// nccl-tests logs, with the collective a `KIND=` prefix named.
    pub nccl: Vec<(String, String, Option<Collective>)>,
}

impl MicrobenchInputs {
    /// No file given.
    pub fn is_empty(&self) -> bool {
        self.gemm.is_empty() && self.attention.is_empty() && self.nccl.is_empty()
    }
}

/// One field the microbenchmarks set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FittedField {
    /// Field name (as in the profile TOML).
    pub field: String,
    /// The starting profile's value.
    pub before: f64,
    /// The fitted value.
    pub after: f64,
    /// Its `[sources]` entry.
    pub source: String,
}

/// One nccl-tests log's α–β fit, as reported and recorded in the profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveFit {
    /// File.
    pub file: String,
    /// `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all`.
    pub collective: String,
    /// GPUs in the test.
    pub ranks: u64,
    /// Nodes they span.
    pub nodes: u64,
    /// Measurements fitted (out-of-place and in-place).
    pub points: usize,
    /// α, seconds per collective.
    pub alpha_s: f64,
    /// α/(ranks − 1): per ring step.
    pub latency_per_step_s: f64,
    /// β, bus bandwidth in GB/s.
    pub busbw_gbs: f64,
    /// β over the pricer's nominal rate for the group (NVLink one-way in a
    /// node; GPUs per node × scale-out per GPU across nodes).
    pub efficiency: f64,
    /// RMS relative residual of the fitted times.
    pub rms_rel_residual: f64,
}

/// One dtype's GEMM fit, recorded in the profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmRecord {
    /// Operand dtype (`bf16`, `fp8`, …).
    pub dtype: String,
    /// Rows fitted.
    pub points: usize,
    /// `e_max`, fraction of this dtype's peak.
    pub efficiency: f64,
    /// `x½`.
    pub half_dim: f64,
    /// Time-weighted RMS log residual.
    pub rms_log_residual: f64,
}

/// The attention fit, recorded in the profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionRecord {
    /// Rows.
    pub points: usize,
    /// Σ FLOPs / (bf16 peak · Σ time).
    pub efficiency: f64,
    /// Smallest per-row efficiency.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

/// The microbenchmark fits kept in a profile (`[microbench]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MicrobenchRecord {
    /// Per dtype (bf16 sets `matmul_efficiency` / `matmul_half_dim`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gemm: Vec<GemmRecord>,
    /// Sets `attention_efficiency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<AttentionRecord>,
    /// Per nccl-tests log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<CollectiveFit>,
}

/// The kebab-case name of a collective (as `--json` spells it).
pub fn collective_name(c: Collective) -> &'static str {
    match c {
        Collective::AllReduce => "all-reduce",
        Collective::AllGather => "all-gather",
        Collective::ReduceScatter => "reduce-scatter",
        Collective::AllToAll => "all-to-all",
        Collective::PointToPoint => "point-to-point",
        Collective::Gather => "gather",
    }
}

/// What `calibrate` from microbenchmarks produced.
#[derive(Clone, Debug, Serialize)]
pub struct MicrobenchReport {
    /// The profile with the fitted fields.
    pub profile: EfficiencyProfile,
    /// The fields set, in profile order.
    pub fitted: Vec<FittedField>,
    /// Each collective log's fit.
    pub collectives: Vec<CollectiveFit>,
    /// GEMM fits of other dtypes than bf16 (not used by the pricer, which
    /// applies the bf16 fraction to every dtype's peak): (dtype, e_max, x½).
    pub gemm_other_dtypes: Vec<(String, f64, f64)>,
}

/// Fit the microbenchmark-level fields of `start` for `chip` from `inputs`.
/// Errors on a file that does not parse (at its line), on an empty input
/// and on a GEMM sweep without bf16 rows.
pub fn calibrate(
    chip: &Chip,
    start: &EfficiencyProfile,
    inputs: &MicrobenchInputs,
) -> Result<MicrobenchReport> {
    if inputs.is_empty() {
        return Err(super::perr(
            "calibrate",
            "no microbenchmark file given (--gemm, --attention, --nccl)",
        ));
    }
    let mut p = start.clone();
    let mut fitted = Vec::new();
    let mut set = |p: &mut EfficiencyProfile, q: Param, v: f64, src: String| {
        fitted.push(FittedField {
            field: q.name().to_string(),
            before: p.param(q),
            after: v,
            source: src.clone(),
        });
        p.set_param(q, v);
        p.sources.insert(q.name().to_string(), src);
    };
    let gemm = fit_gemm(chip, inputs, &mut p, &mut set)?;
    let attention = fit_attention(chip, inputs, &mut p, &mut set)?;
    let collectives = fit_collectives(chip, inputs, &mut p, &mut set)?;
    let others = gemm
        .iter()
        .filter(|g| g.dtype != DType::Bf16.to_string())
        .map(|g| (g.dtype.clone(), g.efficiency, g.half_dim))
        .collect();
    record_curves(&mut p, &gemm, attention.as_ref(), &collectives, inputs);
    p.microbench = Some(MicrobenchRecord {
        gemm,
        attention,
        collectives: collectives.clone(),
    });
    let files: Vec<&str> = inputs
        .gemm
        .iter()
        .chain(&inputs.attention)
        .map(|x| x.0.as_str())
        .chain(inputs.nccl.iter().map(|x| x.0.as_str()))
        .collect();
    p.source = format!(
        "{} calibrated from microbenchmarks by `meshplan calibrate` ({}): the fields whose [sources] entry starts `microbench:`; every other field as in the starting profile | {}",
        chip.name,
        files.join(", "),
        start.source
    );
    Ok(MicrobenchReport {
        profile: p,
        fitted,
        collectives,
        gemm_other_dtypes: others,
    })
}

/// The fitted curves replace the starting profile's `[curves]` of the same
/// kind (those describe the chip the starting profile was measured on, not
/// this cluster): GEMM per dtype, attention, and the collectives.
fn record_curves(
    p: &mut EfficiencyProfile,
    gemm: &[GemmRecord],
    attention: Option<&AttentionRecord>,
    collectives: &[CollectiveFit],
    inputs: &MicrobenchInputs,
) {
    use super::profile::{AttentionCurve, CollectiveCurve, GemmCurve};
    let names = |v: &[(String, String)]| {
        v.iter()
            .map(|x| x.0.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let c = p.curves.get_or_insert_with(Default::default);
    if !gemm.is_empty() {
        c.gemm = gemm
            .iter()
            .map(|g| GemmCurve {
                dtype: g.dtype.clone(),
                efficiency: g.efficiency,
                half_dim: g.half_dim,
                source: format!(
                    "microbench: {} ({} {} GEMMs; `meshplan calibrate --gemm`, time-weighted rms log residual {:.1} %)",
                    names(&inputs.gemm),
                    g.points,
                    g.dtype,
                    100.0 * g.rms_log_residual
                ),
            })
            .collect();
    }
    if let Some(a) = attention {
        c.attention = Some(AttentionCurve {
            efficiency: a.efficiency,
            source: format!(
                "microbench: {} ({} forward kernels; `meshplan calibrate --attention`)",
                names(&inputs.attention),
                a.points
            ),
        });
    }
    if !collectives.is_empty() {
        c.collectives = collectives
            .iter()
            .map(|f| CollectiveCurve {
                level: if f.nodes <= 1 { "in-node" } else { "scale-out" }.to_string(),
                collective: f.collective.clone(),
                ranks: f.ranks,
                busbw_gbs: f.busbw_gbs,
                latency_s: f.alpha_s,
                source: format!(
                    "microbench: {} (`meshplan calibrate --nccl`, {} nodes)",
                    f.file, f.nodes
                ),
            })
            .collect();
    }
}

type Setter<'a> = dyn FnMut(&mut EfficiencyProfile, Param, f64, String) + 'a;

/// `matmul_efficiency` and `matmul_half_dim` from the bf16 rows of the GEMM
/// sweeps; every dtype's fit is returned for the record.
fn fit_gemm(
    chip: &Chip,
    inputs: &MicrobenchInputs,
    p: &mut EfficiencyProfile,
    set: &mut Setter,
) -> Result<Vec<GemmRecord>> {
    if inputs.gemm.is_empty() {
        return Ok(Vec::new());
    }
    let mut pts = Vec::new();
    for (name, text) in &inputs.gemm {
        pts.extend(gemm::parse(text, name, chip)?);
    }
    let names = inputs
        .gemm
        .iter()
        .map(|x| x.0.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let Some(f) = gemm::fit(&pts, DType::Bf16) else {
        return Err(super::perr(
            &names,
            "no bf16 rows: matmul_efficiency is the fraction of the bf16 peak a GEMM reaches (the pricer applies it to the fp8 peak too)",
        ));
    };
    let all: Vec<GemmRecord> = gemm::dtypes(&pts)
        .into_iter()
        .filter_map(|d| gemm::fit(&pts, d))
        .map(|g| GemmRecord {
            dtype: g.dtype.to_string(),
            points: g.points,
            efficiency: g.efficiency,
            half_dim: g.half_dim,
            rms_log_residual: g.rms_log_residual,
        })
        .collect();
    let others: Vec<(&str, f64, f64)> = all
        .iter()
        .filter(|g| g.dtype != DType::Bf16.to_string())
        .map(|g| (g.dtype.as_str(), g.efficiency, g.half_dim))
        .collect();
    let other_note = if others.is_empty() {
        String::new()
    } else {
        let o: Vec<String> = others
            .iter()
            .map(|(d, e, h)| format!("{d}: e_max {e:.4} of the {d} peak, x½ {h:.1}"))
            .collect();
        format!(
            "; other dtypes in the sweep (not used: the pricer applies the bf16 fraction to every dtype's peak): {}",
            o.join("; ")
        )
    };
    let what = format!(
        "microbench: {names} ({} bf16 GEMMs; least squares of ln(efficiency), each row weighted by its time, on the pricer's e_max·(x/ceil128(x))·x/(x + x½), x = min(m, n, k), x½ on [0, 1024]): e_max {:.4}, x½ {:.1}, time-weighted rms log residual {:.1} %, the largest GEMM at {:.4} of the {:.1} TFLOP/s bf16 peak{other_note}",
        f.points,
        f.efficiency,
        f.half_dim,
        100.0 * f.rms_log_residual,
        f.largest_efficiency,
        chip.flops(DType::Bf16).get() / 1e12,
    );
    set(p, Param::MatmulEfficiency, f.efficiency, what.clone());
    set(p, Param::MatmulHalfDim, f.half_dim, what);
    Ok(all)
}

/// `attention_efficiency` from the attention sweeps.
fn fit_attention(
    chip: &Chip,
    inputs: &MicrobenchInputs,
    p: &mut EfficiencyProfile,
    set: &mut Setter,
) -> Result<Option<AttentionRecord>> {
    let mut pts = Vec::new();
    for (name, text) in &inputs.attention {
        pts.extend(attention::parse(text, name, chip)?);
    }
    let Some(f) = attention::fit(&pts, chip) else {
        return Ok(None);
    };
    let names: Vec<&str> = inputs.attention.iter().map(|x| x.0.as_str()).collect();
    let what = format!(
        "microbench: {} ({} forward kernels; Σ FLOPs / (bf16 peak · Σ time), FLOPs = 4·batch·seq·heads·head_dim·keys_avg with keys_avg = keys − seq/2 causal, keys otherwise): {:.4} (rows {:.3}–{:.3}); backward priced at {} × forward",
        names.join(", "),
        f.points,
        f.efficiency,
        f.min,
        f.max,
        crate::step::calibrated::FA_BACKWARD_TIME,
    );
    set(p, Param::AttentionEfficiency, f.efficiency, what);
    Ok(Some(AttentionRecord {
        points: f.points,
        efficiency: f.efficiency,
        min: f.min,
        max: f.max,
    }))
}

/// The intra- and inter-node collective fields from the nccl-tests logs.
fn fit_collectives(
    chip: &Chip,
    inputs: &MicrobenchInputs,
    p: &mut EfficiencyProfile,
    set: &mut Setter,
) -> Result<Vec<CollectiveFit>> {
    let mut fits = Vec::new();
    for (name, text, kind) in &inputs.nccl {
        let log = nccl::parse(text, name, *kind)?;
        let f = nccl::fit(&log)?;
        let nominal = if f.nodes <= 1 {
            crate::step::calibrated::nominal_intra_bytes_per_s(chip)
        } else {
            (f.ranks / f.nodes.max(1)) as f64
                * crate::step::calibrated::nominal_scale_out_bytes_per_s(chip)
        };
        fits.push(CollectiveFit {
            file: f.file,
            collective: collective_name(f.kind).to_string(),
            ranks: f.ranks,
            nodes: f.nodes,
            points: f.points,
            alpha_s: f.alpha_s,
            latency_per_step_s: f.latency_per_step_s,
            busbw_gbs: f.busbw_bytes_per_s / 1e9,
            efficiency: f.busbw_bytes_per_s / nominal,
            rms_rel_residual: f.rms_rel_residual,
        });
    }
    let (intra, inter): (Vec<&CollectiveFit>, Vec<&CollectiveFit>) =
        fits.iter().partition(|f| f.nodes <= 1);
    if !intra.is_empty() {
        let list = describe(&intra);
        let eff = mean(intra.iter().map(|f| f.efficiency));
        set(
            p,
            Param::IntraNodeEfficiency,
            eff,
            format!(
                "microbench: mean over the one-node nccl-tests logs of the α–β fit's bus bandwidth β (least squares of the relative time error of t = α + bus bytes/β) over the {:.0} GB/s NVLink one-way rate: {list}",
                crate::step::calibrated::nominal_intra_bytes_per_s(chip) / 1e9
            ),
        );
        let lat = mean(intra.iter().map(|f| f.latency_per_step_s));
        set(
            p,
            Param::CollectiveLatencyS,
            lat,
            format!("microbench: mean over the one-node nccl-tests logs of the α–β fit's α/(ranks − 1), per ring step: {list}"),
        );
    }
    if !inter.is_empty() {
        fit_inter(chip, &inter, p, set);
    }
    Ok(fits)
}

/// `inter_node_efficiency` (at one node, `· nodes^−γ` beyond),
/// `inter_node_congestion` γ (a log-log fit over two or more node counts;
/// with one, the starting profile's γ stays) and `inter_node_latency_s`.
/// The measured bandwidth curves of the starting profile are dropped: they
/// would stand in for the fitted efficiency across nodes.
fn fit_inter(chip: &Chip, inter: &[&CollectiveFit], p: &mut EfficiencyProfile, set: &mut Setter) {
    let list = describe(inter);
    let mut counts: Vec<u64> = inter.iter().map(|f| f.nodes).collect();
    counts.sort_unstable();
    counts.dedup();
    let xs: Vec<f64> = inter.iter().map(|f| (f.nodes as f64).ln()).collect();
    let ys: Vec<f64> = inter.iter().map(|f| f.efficiency.ln()).collect();
    let (e0, gamma, how) = if counts.len() >= 2 {
        let (mx, my) = (mean(xs.iter().copied()), mean(ys.iter().copied()));
        let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
        let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
        let g = (-sxy / sxx).max(0.0);
        let e0 = (my + g * mx).exp();
        (
            e0,
            Some(g),
            format!("log-log least squares over {counts:?} nodes"),
        )
    } else {
        let g = p.inter_node_congestion;
        let e0 = mean(
            inter
                .iter()
                .map(|f| f.efficiency * (f.nodes as f64).powf(g)),
        );
        (
            e0,
            None,
            format!(
                "one node count ({}): mean × nodes^γ with the starting γ = {g}",
                counts[0]
            ),
        )
    };
    let so = crate::step::calibrated::nominal_scale_out_bytes_per_s(chip) / 1e9;
    set(
        p,
        Param::InterNodeEfficiency,
        e0,
        format!("microbench: the multi-node nccl-tests logs' α–β bus bandwidth β over (GPUs per node × {so:.0} GB/s scale-out per GPU), at one node ({how}): {list}"),
    );
    if let Some(g) = gamma {
        set(
            p,
            Param::InterNodeCongestion,
            g,
            format!("microbench: bandwidth decay nodes^−γ of the multi-node nccl-tests logs ({how}; held ≥ 0): {list}"),
        );
    }
    let lat = mean(inter.iter().map(|f| f.latency_per_step_s));
    set(
        p,
        Param::InterNodeLatencyS,
        lat,
        format!("microbench: mean over the multi-node nccl-tests logs of the α–β fit's α/(ranks − 1), per ring step: {list}"),
    );
    if !p.measured_bw_nodes.is_empty() {
        p.measured_bw_nodes.clear();
        p.measured_allreduce_gbs.clear();
        p.measured_allgather_gbs.clear();
        for k in [
            "measured_bw_nodes",
            "measured_allreduce_gbs",
            "measured_allgather_gbs",
        ] {
            p.sources.insert(
                k.into(),
                "dropped by `meshplan calibrate`: the nccl-tests fit of inter_node_efficiency describes this cluster".into(),
            );
        }
    }
}

fn describe(fits: &[&CollectiveFit]) -> String {
    fits.iter()
        .map(|f| {
            format!(
                "{} ({}, {} GPUs on {} node{}: α {:.1} µs, β {:.1} GB/s = {:.3} of nominal, rms {:.0} %)",
                f.file,
                f.collective,
                f.ranks,
                f.nodes,
                if f.nodes == 1 { "" } else { "s" },
                f.alpha_s * 1e6,
                f.busbw_gbs,
                f.efficiency,
                100.0 * f.rms_rel_residual
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}
