//! Calibrated predictions for `meshplan train` and `meshplan plan train`:
//! the efficiency profile a command uses and the `predicted` section of a
//! [`TrainReport`].
//!
//! The roofline numbers of [`super::analyze`] are bounds; the fidelity model
//! ([`crate::fidelity::predict`]) predicts the step time a real framework
//! reaches with the chip's efficiency profile, for the configuration mapped
//! by [`RunSpec::from_config`]. Memory is not predicted separately: the
//! report's memory is the one memory model under the plan's framework.
//!
//! Not predicted (the report says `prediction not available: <reason>`):
//! fp32 GEMMs, a low-precision dtype the chip has no peak for, optimizers
//! other than Adam/AdamW, and more micro-batches than sequences per replica.
//! MLA, sliding windows, non-causal masks and fp8/int8/fp4 GEMMs are
//! predicted (the last outside the fitted range: `fitted_on.dtype`).

use serde::Serialize;

use super::run_time::RunTime;
use super::TrainReport;
use crate::error::Result;
use crate::fidelity::model::{
    predict_time_detailed, CommExposure, Features, StepSchedule, TimeBreakdown,
};
use crate::fidelity::range::OutOfRange;
use crate::fidelity::{self, EfficiencyProfile};
use crate::hardware::Chip;
use crate::mesh::Topology;
use crate::model::params::ParamCounts;
use crate::model::ModelSpec;
use crate::parallelism::{Framework, Optimizer, Overlap, RunSpec, TrainConfig};
use crate::units::{DType, Seconds};

/// The efficiency profile a command uses, and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveProfile {
    /// The profile.
    pub profile: EfficiencyProfile,
    /// "built-in" or "file NAME" (`--hw-profile`).
    pub origin: String,
    /// The fitted chip whose profile stands in for a chip that has none.
    pub transferred_from: Option<String>,
}

/// The fitted profile that stands in for a GPU with none of its own: the
/// A100 one for A100 variants, else the H100 one (Megatron-Core on
/// InfiniBand, whose parameters are fractions of peak rates and small
/// latencies). The chip's own peak FLOP/s, HBM and link rates come from its
/// catalog entry; the efficiencies were measured on another chip, so every
/// prediction with it says so.
fn transfer_base(chip: &Chip) -> Option<&'static str> {
    if chip.kind != crate::hardware::ChipKind::Gpu {
        return None;
    }
    let name = crate::catalog::normalize(&chip.name);
    Some(if name.starts_with("a100") {
        "a100-80gb"
    } else {
        "h100"
    })
}

/// A built-in profile for `chip` from the fitted one of `base`.
fn transferred(chip: &Chip, base: &str) -> Option<ActiveProfile> {
    let fitted = EfficiencyProfile::builtin(base)?;
    let mut profile = fitted.for_network("infiniband");
    profile.source = format!(
        "not fitted on {}: the {base} profile's efficiencies on network '{}' with {}'s own peak rates | {}",
        chip.name, profile.network, chip.name, profile.source
    );
    profile.chip = chip.name.clone();
    let origin = format!("transferred from {base}, {} network", profile.network);
    Some(ActiveProfile {
        profile,
        origin,
        transferred_from: Some(base.to_string()),
    })
}

/// The profile for `chip`: the user's (`--hw-profile`: `(toml_text, file_name)`)
/// when given, else the built-in one on the chip's own scale-out network
/// (`[scale_out] kind` of the catalog entry, e.g. InfiniBand for `h100`: the
/// built-in H100 profile was fitted on the Playbook's AWS EFA cluster and
/// carries an InfiniBand sub-profile that shares its compute and memory
/// parameters); a GPU without a fitted profile gets one transferred from a
/// fitted chip ([`transfer_base`]); a TPU its MaxText/ICI profile
/// ([`super::tpu::tpu_profile`]). A user profile is used as written: it was
/// calibrated on the user's own cluster.
pub fn active_profile(chip: &Chip, user: Option<(&str, &str)>) -> Result<Option<ActiveProfile>> {
    let Some(profile) = fidelity::resolve_profile(&chip.name, user)? else {
        if chip.ici.is_some() {
            return Ok(super::tpu::tpu_profile(chip).map(|profile| ActiveProfile {
                profile,
                origin: super::tpu::ORIGIN.into(),
                transferred_from: Some("h100".into()),
            }));
        }
        return Ok(transfer_base(chip).and_then(|b| transferred(chip, b)));
    };
    Ok(Some(match user {
        Some((_, f)) => ActiveProfile {
            profile,
            origin: format!("file {f}"),
            transferred_from: None,
        },
        None => {
            let net = chip.scale_out.as_ref().map_or("", |s| s.kind.as_str());
            let profile = profile.for_network(net);
            let origin = format!("built-in, {} network", profile.network);
            ActiveProfile {
                profile,
                origin,
                transferred_from: None,
            }
        }
    }))
}

/// The framework a plan is predicted and accounted under when none is given:
/// Megatron where a GPU efficiency profile describes the chip, the book's
/// accounting otherwise (TPUs included: their predictions run MaxText's
/// runtime; `--framework maxtext` accounts memory as MaxText does).
pub fn default_framework(profile: Option<&ActiveProfile>) -> Framework {
    match profile {
        // TPUs keep the book's accounting (its exercises are TPU ones); their
        // prediction runs MaxText's runtime ([`predict_train`])
        Some(p) if p.profile.network == super::tpu::ICI => Framework::Book,
        Some(_) => Framework::Megatron,
        None => Framework::Book,
    }
}

/// The one-line note shown when a chip has no efficiency profile.
pub const NO_PROFILE_NOTE: &str = "no efficiency profile for this chip: times are roofline bounds";

/// Why the fidelity model cannot predict this model / fixed configuration at
/// all (whatever the parallelism), if it cannot. MLA (its projections and
/// per-head widths), sliding windows and non-causal masks (the keys each
/// query attends to, `model::flops`) and low-precision GEMMs (the chip's
/// peak for the dtype, with the casts) are predicted; optimizers other than
/// Adam are not.
pub fn model_unsupported(spec: &ModelSpec, cfg: &TrainConfig) -> Option<String> {
    let _ = spec;
    if matches!(cfg.compute_dtype, DType::Fp32) {
        return Some(
            "compute dtype fp32 (the efficiency profiles describe tensor-core GEMMs)".into(),
        );
    }
    if !matches!(cfg.optimizer, Optimizer::Adam | Optimizer::AdamW) {
        return Some(
            "the fidelity model assumes mixed-precision Adam; other optimizers are not modelled"
                .into(),
        );
    }
    None
}

/// Why `chip` cannot run the GEMMs of `cfg` in its compute dtype (the
/// catalog gives no peak for it), if it cannot.
pub fn dtype_unsupported(chip: &Chip, cfg: &TrainConfig) -> Option<String> {
    let d = cfg.compute_dtype;
    (d.bytes_per_element() < 2.0 && chip.peak.get(d).is_none()).then(|| {
        format!(
            "{} has no {d} peak in its catalog entry (no {d} tensor-core path)",
            chip.name
        )
    })
}

/// The replica the fidelity model predicts for `cfg` (the book's accounting
/// is predicted as Megatron: it has no runtime of its own).
pub fn run_spec(
    spec: &ModelSpec,
    pc: ParamCounts,
    cfg: &TrainConfig,
) -> std::result::Result<RunSpec, String> {
    if let Some(r) = model_unsupported(spec, cfg) {
        return Err(r);
    }
    if cfg.degrees.etp_differs() && cfg.degrees.etp != 1 {
        // the fidelity model times experts split like the dense layers (etp
        // = tp) or whole (etp = 1)
        return Err(format!(
            "etp = {} (neither 1 nor tp = {}) is not modelled",
            cfg.degrees.etp, cfg.degrees.tp
        ));
    }
    let mut cfg = *cfg;
    if cfg.framework == Framework::Book {
        cfg.framework = Framework::Megatron;
    }
    RunSpec::from_config(&spec.arch, pc, &cfg).map_err(|e| e.to_string())
}

/// The calibrated prediction for one training configuration (`predicted.*`
/// in `meshplan train --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Predicted {
    /// Chip the profile is for.
    pub profile: String,
    /// "built-in" or "file NAME".
    pub profile_origin: String,
    /// The profile's own `source` line.
    pub profile_source: String,
    /// The fitted chip whose profile stands in (the chip has none of its own).
    pub transferred_from: Option<String>,
    /// The framework whose runtime is predicted.
    pub framework: Framework,
    /// Predicted seconds per optimizer step.
    pub step_time_s: Seconds,
    /// The report's model FLOPs per step (same convention) / (N·C·predicted step time).
    pub mfu: f64,
    /// Tokens per second (whole job).
    pub tokens_per_s: f64,
    /// Tokens per second per device.
    pub tokens_per_s_per_device: f64,
    /// Training time at the predicted step time (with `train_tokens`).
    pub train_time_s: Option<Seconds>,
    /// Chip-hours at the predicted step time.
    pub chip_hours: Option<f64>,
    /// Cost at the predicted step time.
    pub cost_usd: Option<f64>,
    /// ZeRO stage the prediction used.
    pub zero: u8,
    /// Micro-batch size (sequences) the prediction used.
    pub micro_batch_size: u64,
    /// Micro-batches per step (gradient accumulation) the prediction used.
    pub grad_accumulation: u64,
    /// The job is larger than the profile was fitted on: terms that grow with
    /// the job size were held at the profile's `calibrated_max_nodes`.
    pub extrapolated: bool,
    /// Every input of the prediction outside the ranges the profile was
    /// fitted on (empty: all inside); `None` when the profile records none.
    pub outside_fitted_range: Option<Vec<OutOfRange>>,
    /// Step time by part (seconds).
    pub time_breakdown_s: TimeBreakdown,
    /// The step's schedule on its critical pipeline stage (what a timeline
    /// lays out).
    pub schedule: StepSchedule,
    /// p10–p90 step-time interval from the profile's held-out calibration
    /// residuals ([`fidelity::range::interval`]); `None` when it has none.
    pub interval: Option<fidelity::range::StepInterval>,
    /// Offload: the exposed host-link and CPU-optimizer seconds added to the
    /// step (the GPU optimizer update of `time_breakdown_s` taken out when
    /// the optimizer is offloaded); absent without offload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload_exposed_s: Option<Seconds>,
    /// The overlap settings and what they hid and exposed.
    pub overlap: OverlapPrediction,
}

/// The overlap settings of a prediction, the profile's fitted fractions
/// the defaults use, and the communication hidden and exposed
/// (`predicted.overlap`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OverlapPrediction {
    /// `tp`, `dp`, `sp_allgather`.
    #[serde(flatten)]
    pub settings: Overlap,
    /// Fraction of the TP transfers `ring` hides (the profile's `tp_overlap`).
    pub tp_fitted_fraction: f64,
    /// Fraction of the DP reduction `on` hides (the profile's `dp_overlap`).
    pub dp_fitted_fraction: f64,
    /// Seconds per step, hidden and exposed.
    #[serde(flatten)]
    pub exposure: CommExposure,
}

/// The settings that differ from the ones every profile was fitted with,
/// as inputs outside the fitted range.
fn unfitted_settings(o: &Overlap) -> impl Iterator<Item = OutOfRange> {
    o.unfitted()
        .into_iter()
        .map(|(input, v, fitted)| OutOfRange {
            input,
            value: serde_json::json!(v),
            fitted_range: serde_json::json!([fitted]),
        })
}

/// Predict one configuration; `model_flops` is the report's model FLOPs per
/// step (for the MFU, same convention as `mfu_at_lower_bound`), `floor_s` its
/// roofline lower bound (the prediction never goes below it).
#[allow(clippy::too_many_arguments)]
pub fn predict_train(
    spec: &ModelSpec,
    pc: ParamCounts,
    chip: &Chip,
    cfg: &TrainConfig,
    topo: &Topology,
    prof: &ActiveProfile,
    model_flops: f64,
    floor_s: f64,
) -> std::result::Result<Predicted, String> {
    let mut rs = run_spec(spec, pc, cfg)?;
    if prof.profile.network == super::tpu::ICI && cfg.framework == Framework::Book {
        // the book's accounting has no runtime: a TPU runs MaxText's
        rs.framework = Framework::Maxtext;
    }
    if let Some(r) = dtype_unsupported(chip, cfg) {
        return Err(r);
    }
    let features = Features::of(cfg, topo);
    let detailed = predict_time_detailed(&rs, chip, &prof.profile, &features);
    let (extrapolated, exposure, schedule) =
        (detailed.extrapolated, detailed.exposure, detailed.schedule);
    let time = detailed.time.at_least(floor_s);
    let n = rs.n_gpus.max(1) as f64;
    let step = time.total;
    let c = chip.flops(cfg.compute_dtype).get();
    let run = RunTime::at_step(step, cfg, n, chip);
    Ok(Predicted {
        profile: prof.profile.chip.clone(),
        profile_origin: prof.origin.clone(),
        profile_source: prof.profile.source.clone(),
        transferred_from: prof.transferred_from.clone(),
        framework: rs.framework,
        step_time_s: Seconds::new(step),
        mfu: crate::accounting::mfu(model_flops, n, c, step),
        tokens_per_s: run.tokens_per_s,
        tokens_per_s_per_device: run.tokens_per_s / n,
        train_time_s: run.train_time_s.map(Seconds::new),
        chip_hours: run.chip_hours,
        cost_usd: run.cost_usd,
        zero: rs.zero,
        micro_batch_size: rs.mbs,
        grad_accumulation: rs.grad_acc,
        extrapolated,
        outside_fitted_range: match (&prof.profile.fitted_on, cfg.overlap.unfitted().is_empty()) {
            (None, true) => None,
            // the profiles were fitted at the default settings, recorded or not
            (f, _) => Some(
                f.iter()
                    .flat_map(|f| f.outside(&rs, chip, cfg.compute_dtype))
                    .chain(unfitted_settings(&cfg.overlap))
                    .collect(),
            ),
        },
        // The residuals were measured on the profile's own chip: a profile
        // transferred to another chip (or a TPU) has no held-out interval.
        interval: match prof.transferred_from {
            None => fidelity::range::interval(&prof.profile, step),
            Some(_) => None,
        },
        time_breakdown_s: time,
        schedule,
        overlap: OverlapPrediction {
            settings: cfg.overlap,
            tp_fitted_fraction: prof.profile.tp_overlap,
            dp_fitted_fraction: prof.profile.dp_overlap,
            exposure,
        },
        offload_exposed_s: None,
    })
}

/// Add the exposed offload time `o` to prediction `p` (no GPU optimizer
/// update when the CPU runs it) and say the input is outside the fitted
/// range: no validation run offloaded anything.
fn with_offload(
    p: &mut Predicted,
    o: &super::offload::OffloadTime,
    cfg: &TrainConfig,
    chip: &Chip,
    model_flops: f64,
    floor: f64,
) {
    let step =
        super::offload::predicted_step(p.step_time_s.get(), p.time_breakdown_s.optimizer, o, floor);
    let n = (p.tokens_per_s / p.tokens_per_s_per_device.max(f64::MIN_POSITIVE)).max(1.0);
    let run = RunTime::at_step(step, cfg, n, chip);
    p.step_time_s = Seconds::new(step);
    p.mfu = crate::accounting::mfu(model_flops, n, chip.flops(cfg.compute_dtype).get(), step);
    p.tokens_per_s = run.tokens_per_s;
    p.tokens_per_s_per_device = run.tokens_per_s / n;
    p.train_time_s = run.train_time_s.map(Seconds::new);
    p.chip_hours = run.chip_hours;
    p.cost_usd = run.cost_usd;
    // the held-out residuals describe runs without offload
    p.interval = None;
    p.offload_exposed_s = Some(Seconds::new(o.exposed_s));
    p.outside_fitted_range
        .get_or_insert_with(Vec::new)
        .push(OutOfRange {
            input: "offload",
            value: serde_json::Value::String(o.parts.to_string()),
            fitted_range: serde_json::Value::String("none (no validation run offloads)".into()),
        });
}

/// Fill `report.predicted` / `report.prediction_note` for `cfg` with `prof`
/// (`None`: the chip has no profile). The roofline fields are untouched.
pub fn attach(
    report: &mut TrainReport,
    spec: &ModelSpec,
    chip: &Chip,
    cfg: &TrainConfig,
    topo: &Topology,
    prof: Option<&ActiveProfile>,
) {
    report.predicted = None;
    report.prediction_note = None;
    let Some(prof) = prof else {
        report.prediction_note = Some(NO_PROFILE_NOTE.into());
        return;
    };
    if !report.feasible {
        report.prediction_note =
            Some("prediction not available: the configuration is infeasible".into());
        return;
    }
    let pc = crate::model::params::count(&spec.arch, &mut crate::trace::NoTrace);
    // the roofline floor without the offload's exposed time, which is
    // added to the prediction on its own
    let exposed = report.offload.map_or(0.0, |o| o.exposed_s);
    let (flops, floor) = (
        report.flops_per_step.get(),
        report.step_time_lower_s.get() - exposed,
    );
    match predict_train(spec, pc, chip, cfg, topo, prof, flops, floor) {
        Ok(mut p) => {
            if let Some(o) = &report.offload {
                with_offload(&mut p, o, cfg, chip, flops, floor + exposed);
            }
            report.predicted = Some(p)
        }
        Err(r) => report.prediction_note = Some(format!("prediction not available: {r}")),
    }
}

/// Record how the prediction's overlap settings turned its TP and DP
/// communication into exposed time (`--explain`).
pub fn record_overlap<T: crate::trace::Tracer>(p: &Predicted, tr: &mut T) {
    use crate::parallelism::{DpOverlap, TpOverlap};
    use crate::trace::Step;
    let o = &p.overlap;
    let e = &o.exposure;
    let k = e.tp_collectives_per_layer;
    if k > 0.0 {
        let formula = match (o.settings.tp, e.tp_chunks > 0.0) {
            (TpOverlap::None, _) => "T_TP,exposed = T_xfer + T_lat (nothing hidden)",
            (TpOverlap::Pipelined, true) => {
                "T_TP,exposed = T_xfer/c + (c−1)/c·max(0, T_xfer − T_GEMM) + T_lat, c = tp chunks"
            }
            _ => "T_TP,exposed = (1 − f_tp)·T_xfer + T_lat (the profile's fitted fraction)",
        };
        tr.record(|| {
            Step::new(
                "train.predicted.tp_overlap",
                &format!(
                    "Exposed TP communication (tp_overlap = {}, sp_allgather = {})",
                    o.settings.tp, o.settings.sp_allgather
                ),
                formula,
            )
            .bind("collectives/layer", k, "")
            .bind("T_xfer", e.tp_transfer_s, "s")
            .bind("T_lat", e.tp_latency_s, "s")
            .bind("T_GEMM", e.tp_gemm_s, "s")
            .bind("f_tp", o.tp_fitted_fraction, "")
            .bind("c", e.tp_chunks, "")
            .result(e.tp_exposed_s, "s")
            .source("docs/fidelity.md (overlap settings); NeMo docs, Communication Overlap (TP: pipelined ring exchange); Korthikanti et al. 2022 §4.2.2 (SP all-gather redone in the backward)")
        });
    }
    if e.dp_transfer_s > 0.0 {
        let formula = match o.settings.dp {
            DpOverlap::Off => "T_DP,exposed = T_DP (after the backward, nothing hidden)",
            DpOverlap::On => {
                "T_DP,exposed = (1 − f_dp)·T_DP (+ ZeRO-2/3 per-micro-batch parts beyond the micro-batch)"
            }
        };
        tr.record(|| {
            Step::new(
                "train.predicted.dp_overlap",
                &format!(
                    "Exposed data-parallel communication (dp_overlap = {})",
                    o.settings.dp
                ),
                formula,
            )
            .bind("T_DP", e.dp_transfer_s, "s")
            .bind("f_dp", o.dp_fitted_fraction, "")
            .result(e.dp_exposed_s, "s")
            .source("docs/fidelity.md (overlap settings)")
        });
    }
}
