//! The one prediction path: every front end that predicts a training step
//! (`train`, `plan train`, `validate`, `calibrate`, `check`, Python, the
//! page) goes through [`prepare`] (the gate and the replica the calibrated
//! model prices, with the roofline floor) and [`price`] (the calibrated
//! pricer, the floor and offload), so the same plan gets the same figure to
//! the last bit. Also: the efficiency profile a command uses
//! ([`active_profile`]), the `predicted` section of a [`TrainReport`]
//! ([`attach`]) and its derivation ([`record`]).
//!
//! The roofline numbers of [`crate::training::analyze`] are bounds; the
//! calibrated pricer ([`super::calibrated`]) predicts the step time a real
//! framework reaches with the chip's efficiency profile. Memory is not
//! predicted separately: the report's memory is the one memory model under
//! the plan's framework ([`peak_memory`] with the profile's calibration).
//!
//! Not predicted ([`Unpredictable`]; the report says `prediction not
//! available: <reason>`): fp32 GEMMs, a low-precision dtype the chip has no
//! peak for, optimizers other than Adam/AdamW, etp other than 1 or tp, more
//! micro-batches than sequences per replica, fewer sequences than
//! data-parallel ranks. MLA, sliding windows, non-causal masks and
//! fp8/int8/fp4 GEMMs are predicted (the last outside the fitted range:
//! `fitted_on.dtype`).

use serde::Serialize;

use crate::error::Result;
use crate::fidelity::range::OutOfRange;
use crate::fidelity::{self, EfficiencyProfile};
use crate::hardware::Chip;
use crate::memory::{MemoryBreakdown, MemoryQuery};
use crate::mesh::Topology;
use crate::model::params::ParamCounts;
use crate::model::Arch;
use crate::model::ModelSpec;
use crate::parallelism::Unmapped;
use crate::parallelism::{Framework, Optimizer, Overlap, RunSpec, TrainConfig};
use crate::step::calibrated::{
    predict_time_detailed, CommExposure, Detailed, Features, StepSchedule, TimeBreakdown,
};
use crate::step::inventory::StepInventory;
use crate::trace::NoTrace;
use crate::training::run_time::RunTime;
use crate::training::TrainReport;
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
/// fitted chip (`transfer_base`); a TPU its MaxText/ICI profile
/// ([`crate::training::tpu::tpu_profile`]). A user profile is used as written: it was
/// calibrated on the user's own cluster.
pub fn active_profile(chip: &Chip, user: Option<(&str, &str)>) -> Result<Option<ActiveProfile>> {
    let Some(profile) = fidelity::resolve_profile(&chip.name, user)? else {
        if chip.ici.is_some() {
            return Ok(
                crate::training::tpu::tpu_profile(chip).map(|profile| ActiveProfile {
                    profile,
                    origin: crate::training::tpu::ORIGIN.into(),
                    transferred_from: Some("h100".into()),
                }),
            );
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
            let profile = profile.for_network(chip.default_network());
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
/// the framework people run on the chip where an efficiency profile
/// describes it — Megatron on GPUs, MaxText on TPUs (so `plan train` on a
/// TPU slice ranks by predictions, not by a roofline that puts every plan at
/// 100 % MFU) — and the book's accounting where none does and on the
/// `@book` chips of the book's exercises (`book`).
pub fn default_framework(profile: Option<&ActiveProfile>, book: bool) -> Framework {
    match profile {
        Some(p) if p.profile.network == crate::training::tpu::ICI && book => Framework::Book,
        Some(p) if p.profile.network == crate::training::tpu::ICI => Framework::Maxtext,
        Some(_) => Framework::Megatron,
        None => Framework::Book,
    }
}

/// The one-line note shown when a chip has no efficiency profile.
pub const NO_PROFILE_NOTE: &str = "no efficiency profile for this chip: times are roofline bounds";

/// Why a configuration has no calibrated prediction. The planner's hot loop
/// rejects with it, so nothing is formatted until it is displayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unpredictable {
    /// fp32 GEMMs: the profiles describe tensor-core GEMMs.
    Fp32,
    /// Not mixed-precision Adam/AdamW.
    Optimizer,
    /// An expert TP degree that is neither 1 nor tp.
    Etp {
        /// Expert tensor-parallel degree.
        etp: u64,
        /// Tensor-parallel degree.
        tp: u64,
    },
    /// The chip has no peak for the compute dtype.
    NoPeak(DType),
    /// The batch cannot be cut into the micro-batches asked for.
    Unmapped(Unmapped),
    /// Fewer sequences than data-parallel ranks: a framework gives each
    /// rank whole sequences, so some ranks would hold none, where the
    /// roofline splits tokens evenly.
    Idle {
        /// Sequences in the global batch, ⌈B/T⌉.
        sequences: u64,
        /// Data-parallel ranks (dp·fsdp).
        ranks: u64,
    },
}

impl std::fmt::Display for Unpredictable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Unpredictable::Fp32 => f.write_str(
                "compute dtype fp32 (the efficiency profiles describe tensor-core GEMMs)",
            ),
            Unpredictable::Optimizer => f.write_str(
                "the fidelity model assumes mixed-precision Adam; other optimizers are not modelled",
            ),
            Unpredictable::Etp { etp, tp } => {
                write!(f, "etp = {etp} (neither 1 nor tp = {tp}) is not modelled")
            }
            Unpredictable::NoPeak(d) => write!(
                f,
                "the chip has no {d} peak in its catalog entry (no {d} tensor-core path)"
            ),
            Unpredictable::Unmapped(u) => u.fmt(f),
            Unpredictable::Idle { sequences, ranks } => write!(
                f,
                "{sequences} sequences over {ranks} data-parallel ranks: a framework gives each rank whole sequences, so {} ranks would hold none (the roofline splits the tokens evenly); to use every rank, give at most {sequences} data-parallel ranks (fewer chips, or more tp/pp), a batch of at least {ranks} sequences, or split each sequence by context parallelism over at least {} of the data-parallel ranks",
                ranks - sequences,
                ranks.div_ceil(sequences.max(1)),
            ),
        }
    }
}

/// Why the calibrated model cannot predict `cfg` whatever its parallelism:
/// fp32 GEMMs (the profiles describe tensor-core GEMMs) or an optimizer
/// other than Adam/AdamW. MLA, sliding windows, non-causal masks and
/// low-precision GEMMs are predicted.
/// Also on `chip`: a low-precision compute dtype it has no peak for.
pub fn unsupported(chip: &Chip, cfg: &TrainConfig) -> Option<Unpredictable> {
    let dt = cfg.compute_dtype;
    if matches!(dt, DType::Fp32) {
        return Some(Unpredictable::Fp32);
    }
    if !matches!(cfg.optimizer, Optimizer::Adam | Optimizer::AdamW) {
        return Some(Unpredictable::Optimizer);
    }
    if dt.bytes_per_element() < 2.0 && chip.peak.get(dt).is_none() {
        return Some(Unpredictable::NoPeak(dt));
    }
    None
}

/// Whether the batch of `cfg` splits into whole sequences on every
/// data-parallel rank and into its micro-batches (the checks of [`prepare`]
/// that depend on the batch and the degrees; cheap, no allocation).
pub fn batch_gate(cfg: &TrainConfig) -> std::result::Result<(), Unpredictable> {
    idle_ranks(cfg)?;
    RunSpec::sequences_per_microbatch(cfg)
        .map(|_| ())
        .map_err(Unpredictable::Unmapped)
}

/// Whether every data-parallel rank gets a whole sequence.
fn idle_ranks(cfg: &TrainConfig) -> std::result::Result<(), Unpredictable> {
    let ranks = cfg.degrees.at_least_one().data();
    let sequences = cfg.batch_tokens.div_ceil(cfg.seq_len.max(1));
    if cfg.seq_len > 0 && sequences < ranks {
        return Err(Unpredictable::Idle { sequences, ranks });
    }
    Ok(())
}

/// What the book's roofline says of the same plan, as the prediction reads
/// it: the MFU's numerator and the floor no prediction goes below.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RooflineFloor {
    /// The report's model FLOPs per step (its FLOP convention).
    pub model_flops: f64,
    /// The roofline lower bound, offload's exposed time included.
    pub lower_s: f64,
    /// Host-offload traffic and its exposed time.
    pub offload: Option<crate::training::offload::OffloadTime>,
}

impl RooflineFloor {
    /// The floor of an evaluated plan ([`crate::training::evaluate()`]).
    pub fn of(e: &crate::training::Eval) -> RooflineFloor {
        RooflineFloor {
            model_flops: e.flops.model,
            lower_s: e.lower,
            offload: e.offload,
        }
    }

    /// Evaluate the roofline of `cfg` on `topo` (tracing off) for its floor:
    /// the same [`crate::training::evaluate()`] `train` reports.
    pub fn evaluate(spec: &ModelSpec, chip: &Chip, topo: &Topology, cfg: &TrainConfig) -> Self {
        let ctx = crate::training::TrainCtx::new(spec, chip, cfg, None, &mut NoTrace);
        let mesh = crate::mesh::Mesh::build(chip, topo, cfg.degrees);
        let mctx = crate::training::MeshCtx::from_mesh(&mesh);
        let e = crate::training::evaluate(&ctx, &mctx, &cfg.choice(), &mut NoTrace, &mut ());
        RooflineFloor::of(&e)
    }
}

/// One configuration made ready to price: the replica the calibrated model
/// reads, its features and its roofline floor — everything but the profile,
/// so a calibration prices it under thousands of profiles.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// The replica ([`RunSpec::from_config`]) under the framework whose
    /// runtime is predicted.
    pub(crate) rs: RunSpec,
    /// Compute dtype, mask, overlap settings, TPU slices.
    pub features: Features,
    /// The roofline floor.
    pub floor: RooflineFloor,
    /// The configuration (memory and run-time figures read it).
    pub cfg: TrainConfig,
}

/// Check `cfg` and map it onto the replica the calibrated model prices
/// (the book's accounting has no runtime: it is predicted as Megatron on
/// GPUs and as MaxText on a TPU, `tpu`). The one gate every front end goes
/// through: `train`, `plan train`, `validate`, `calibrate`.
#[allow(clippy::too_many_arguments)]
pub fn prepare(
    arch: &Arch,
    pc: ParamCounts,
    chip: &Chip,
    cfg: &TrainConfig,
    topo: &Topology,
    tpu: bool,
    floor: RooflineFloor,
) -> std::result::Result<Prepared, Unpredictable> {
    Ok(Prepared {
        rs: replica(arch, pc, chip, cfg, tpu)?,
        features: Features::of(cfg, topo),
        floor,
        cfg: *cfg,
    })
}

/// [`prepare`]'s gate and replica alone: what the planner prices per plan
/// (it keeps the configuration and the floor itself, so nothing else is
/// built or moved).
pub(crate) fn replica(
    arch: &Arch,
    pc: ParamCounts,
    chip: &Chip,
    cfg: &TrainConfig,
    tpu: bool,
) -> std::result::Result<RunSpec, Unpredictable> {
    if let Some(u) = unsupported(chip, cfg) {
        return Err(u);
    }
    let d = cfg.degrees;
    if d.etp_differs() && d.etp != 1 {
        // experts split like the dense layers (etp = tp) or whole (etp = 1)
        return Err(Unpredictable::Etp {
            etp: d.etp,
            tp: d.tp,
        });
    }
    // the micro-batch check is RunSpec::from_config's own, below
    idle_ranks(cfg)?;
    let framework = match cfg.framework {
        Framework::Book if tpu => Framework::Maxtext,
        Framework::Book => Framework::Megatron,
        f => f,
    };
    RunSpec::from_config_as(arch, pc, cfg, framework).map_err(Unpredictable::Unmapped)
}

/// A prepared configuration priced under one profile: the calibrated time
/// by part held at the roofline floor, with offload's exposed time added.
#[derive(Clone, Debug, PartialEq)]
pub struct PricedStep {
    /// The calibrated model's parts, exposure and schedule (floor applied
    /// to `detailed.time`).
    pub detailed: Detailed,
    /// Predicted seconds per optimizer step.
    pub step_s: f64,
}

/// Price `p` with profile `prof` on `chip`: the one step-time figure of
/// `train`, `plan train`, `validate`, `calibrate` and `check`.
pub fn price(p: &Prepared, chip: &Chip, prof: &EfficiencyProfile) -> PricedStep {
    let mut detailed = predict_time_detailed(&p.rs, chip, prof, &p.features);
    let (time, step_s) = floored(detailed.time, &p.floor);
    detailed.time = time;
    PricedStep { detailed, step_s }
}

/// [`price`]'s step time alone: the planner ranks thousands of plans by it
/// and reads nothing else (the same parts and floor, nothing assembled).
pub fn price_step_s(p: &Prepared, chip: &Chip, prof: &EfficiencyProfile) -> f64 {
    price_replica_step_s(&p.rs, &p.features, &p.floor, chip, prof)
}

/// [`price_step_s`] of a [`replica`] with its features and floor.
pub(crate) fn price_replica_step_s(
    rs: &RunSpec,
    features: &Features,
    floor: &RooflineFloor,
    chip: &Chip,
    prof: &EfficiencyProfile,
) -> f64 {
    let split = StepInventory::split_of(rs, chip, features);
    price_replica_split_step_s(rs, features, floor, chip, prof, split)
}

/// [`price_replica_step_s`] with the replica's placement
/// ([`StepInventory::split_of`]), which the planner works out once per
/// degree tuple.
pub(crate) fn price_replica_split_step_s(
    rs: &RunSpec,
    features: &Features,
    floor: &RooflineFloor,
    chip: &Chip,
    prof: &EfficiencyProfile,
    split: crate::mesh::GpuSplit,
) -> f64 {
    let t = crate::step::calibrated::predict_time_parts_split(rs, chip, prof, features, split);
    floored(t, floor).1
}

/// The calibrated parts held at the roofline floor (without the offload's
/// exposed time, which is added on its own), and the step time with it.
fn floored(t: TimeBreakdown, f: &RooflineFloor) -> (TimeBreakdown, f64) {
    let exposed = f.offload.map_or(0.0, |o| o.exposed_s);
    let t = t.at_least(f.lower_s - exposed);
    let step_s = match &f.offload {
        None => t.total,
        Some(o) => crate::training::offload::predicted_step(t.total, t.optimizer, o, f.lower_s),
    };
    (t, step_s)
}

/// A prepared run's prediction as `validate` and `calibrate` compare it
/// with a measurement: step time and peak memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    /// Seconds per optimizer step.
    pub step_time_s: f64,
    /// Tokens/s per device.
    pub tokens_per_s_per_gpu: f64,
    /// Time parts (floor applied).
    pub time: TimeBreakdown,
    /// Memory parts (the busiest device).
    pub memory: MemoryBreakdown,
    /// Peak memory, GB (1e9 bytes).
    pub peak_mem_gb: f64,
    /// Usable device memory, GB.
    pub usable_gb: f64,
    /// peak ≤ usable.
    pub fits: bool,
    /// The job is larger than the profile's calibrated range
    /// (`calibrated_max_nodes`): job-size terms were held at that size.
    pub extrapolated: bool,
}

/// Price `p` under `prof` and account its memory: the figures `train`
/// reports for the same configuration, to the last bit.
pub fn predict_prepared(p: &Prepared, chip: &Chip, prof: &EfficiencyProfile) -> Prediction {
    let priced = price(p, chip, prof);
    let rs = &p.rs;
    let memory = peak_memory(&rs.arch, &rs.params, &p.cfg, prof);
    let usable = crate::memory::runtime::usable_bytes(chip, rs.framework, prof.usable_hbm_fraction);
    let n = rs.n_gpus.max(1) as f64;
    Prediction {
        step_time_s: priced.step_s,
        tokens_per_s_per_gpu: rs.tokens_per_step() / priced.step_s / n,
        peak_mem_gb: memory.total_bytes.gb(),
        usable_gb: usable / 1e9,
        fits: memory.total_bytes.get() <= usable,
        extrapolated: priced.detailed.extrapolated,
        time: priced.detailed.time,
        memory,
    }
}

/// Peak memory of the busiest device of `cfg` under the framework's
/// accounting with `prof`'s calibration: the one memory model
/// ([`crate::memory::per_device`] on [`MemoryQuery::from_config`]) that
/// `train` reports, priced with the profile `validate` and `calibrate` fit.
pub fn peak_memory(
    arch: &Arch,
    pc: &ParamCounts,
    cfg: &TrainConfig,
    prof: &EfficiencyProfile,
) -> MemoryBreakdown {
    crate::memory::per_device(
        arch,
        pc,
        &MemoryQuery::from_config(cfg),
        &prof.memory_calibration(),
        &mut NoTrace,
    )
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
    /// What the step contains, as priced: GEMMs, attention, element-wise
    /// bytes, collectives with their placement, schedule, DP phase.
    pub inventory: StepInventory,
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
    /// The step's compute by block, as priced (the JSON `blocks`'
    /// `predicted_s` shows it).
    #[serde(skip)]
    pub block_times_s: crate::step::calibrated::BlockTimes,
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

/// The calibrated prediction of `cfg` on `topo` with `prof` (the report's
/// `predicted` section): [`prepare`], [`price`], then the run-time figures.
#[allow(clippy::too_many_arguments)]
pub fn predict_step(
    arch: &Arch,
    pc: ParamCounts,
    chip: &Chip,
    cfg: &TrainConfig,
    topo: &Topology,
    prof: &ActiveProfile,
    floor: RooflineFloor,
) -> std::result::Result<Predicted, Unpredictable> {
    let tpu = prof.profile.network == crate::training::tpu::ICI;
    let prep = prepare(arch, pc, chip, cfg, topo, tpu, floor)?;
    let priced = price(&prep, chip, &prof.profile);
    Ok(report_section(&prep, priced, chip, prof))
}

/// The `predicted` section of a priced step.
fn report_section(
    prep: &Prepared,
    priced: PricedStep,
    chip: &Chip,
    prof: &ActiveProfile,
) -> Predicted {
    let (rs, cfg) = (&prep.rs, &prep.cfg);
    let d = priced.detailed;
    let step = priced.step_s;
    let n = rs.n_gpus.max(1) as f64;
    let c = chip.flops(cfg.compute_dtype).get();
    let run = RunTime::at_step(step, cfg, n, chip);
    let mut outside = match (&prof.profile.fitted_on, cfg.overlap.unfitted().is_empty()) {
        (None, true) => None,
        // the profiles were fitted at the default settings, recorded or not
        (f, _) => Some(
            f.iter()
                .flat_map(|f| f.outside(rs, chip, cfg.compute_dtype))
                .chain(unfitted_settings(&cfg.overlap))
                .collect::<Vec<_>>(),
        ),
    };
    if let Some(o) = &prep.floor.offload {
        // no validation run offloaded anything
        outside.get_or_insert_with(Vec::new).push(OutOfRange {
            input: "offload",
            value: serde_json::Value::String(o.parts.to_string()),
            fitted_range: serde_json::Value::String("none (no validation run offloads)".into()),
        });
    }
    Predicted {
        profile: prof.profile.chip.clone(),
        profile_origin: prof.origin.clone(),
        profile_source: prof.profile.source.clone(),
        transferred_from: prof.transferred_from.clone(),
        framework: rs.framework,
        step_time_s: Seconds::new(step),
        mfu: crate::accounting::mfu(prep.floor.model_flops, n, c, step),
        tokens_per_s: run.tokens_per_s,
        tokens_per_s_per_device: run.tokens_per_s / n,
        train_time_s: run.train_time_s.map(Seconds::new),
        chip_hours: run.chip_hours,
        cost_usd: run.cost_usd,
        zero: rs.zero,
        micro_batch_size: rs.mbs,
        grad_accumulation: rs.grad_acc,
        extrapolated: d.extrapolated,
        outside_fitted_range: outside,
        // The residuals were measured on the profile's own chip, without
        // offload: a profile transferred to another chip (or a TPU), or an
        // offloaded step, has no held-out interval.
        interval: match (&prof.transferred_from, &prep.floor.offload) {
            (None, None) => fidelity::range::interval(&prof.profile, step),
            _ => None,
        },
        offload_exposed_s: prep.floor.offload.map(|o| Seconds::new(o.exposed_s)),
        time_breakdown_s: d.time,
        schedule: d.schedule,
        inventory: d.inventory,
        block_times_s: d.blocks,
        overlap: OverlapPrediction {
            settings: cfg.overlap,
            tp_fitted_fraction: prof.profile.tp_overlap,
            dp_fitted_fraction: prof.profile.dp_overlap,
            exposure: d.exposure,
        },
    }
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
    let floor = RooflineFloor {
        model_flops: report.flops_per_step.get(),
        lower_s: report.step_time_lower_s.get(),
        offload: report.offload,
    };
    match predict_step(&spec.arch, pc, chip, cfg, topo, prof, floor) {
        Ok(p) => report.predicted = Some(p),
        Err(r) => report.prediction_note = Some(format!("prediction not available: {r}")),
    }
}

/// Record the predicted step term by term (`train --explain`): the step
/// as the sum of its parts on the critical pipeline stage, the micro-batch
/// and bubble behind them, the overlap settings' exposed communication, and
/// the MFU — each with its values.
pub fn record<T: crate::trace::Tracer>(p: &Predicted, tr: &mut T) {
    use crate::trace::Step;
    let t = &p.time_breakdown_s;
    let sc = &p.schedule;
    const SRC: &str = "docs/fidelity.md (the step-time model); the profile's parameters";
    tr.record(|| {
        Step::new(
            "train.predicted.microbatch",
            "One micro-batch on the critical pipeline stage (forward + backward + recompute, exposed TP/CP/EP communication, host stalls, exposed ZeRO-3/FSDP gathers)",
            "T_mb = max(L_stage·t_layer,GPU (+ LM head), L_stage·t_layer,host + t_mb,host) + T_FSDP,mb",
        )
        .bind("L_stage", sc.layers, "layers")
        .bind("head", if sc.head { 1.0 } else { 0.0 }, "")
        .bind("f_fwd", sc.forward_fraction, "")
        .result(sc.microbatch_s, "s")
        .source(SRC)
    });
    if sc.stages > 1 && sc.dualpipe.is_none() {
        tr.record(|| {
            Step::new(
                "train.predicted.bubble",
                "Pipeline bubble (the stages' fill and drain)",
                "T_bubble = (pp − 1)/v · T_mb (m ≥ pp); ((pp − m) + (m − 1)/v) · T_mb (m < pp)",
            )
            .bind("pp", sc.stages as f64, "")
            .bind("m", sc.microbatches as f64, "")
            .bind("v", sc.virtual_stages as f64, "")
            .bind("T_mb", sc.microbatch_s, "s")
            .result(t.bubble, "s")
            .source(SRC)
        });
    }
    super::recipes::record(p, tr);
    record_overlap(p, tr);
    let floor = if t.floor_raise > 0.0 {
        " + T_floor"
    } else {
        ""
    };
    let offload = p.offload_exposed_s.map_or(String::new(), |_| {
        " (offload: − T_opt,GPU + T_offload,exposed, at least the roofline)".to_string()
    });
    tr.record(|| {
        let mut st = Step::new(
            "train.predicted.step_time",
            &format!(
                "Predicted step time ({} runtime, profile {})",
                p.framework, p.profile
            ),
            &format!(
                "T_step = T_mm + T_attn + T_ew + T_TP + T_CP + T_EP (over m micro-batches × L_stage layers) + T_PP + T_bubble + T_DP + T_opt + T_overhead{floor}{offload}"
            ),
        )
        .bind("m", sc.microbatches as f64, "micro-batches")
        .bind("T_mm", t.matmul, "s")
        .bind("T_attn", t.attention, "s")
        .bind("T_ew", t.memory_bound, "s")
        .bind("T_TP", t.tp_comm, "s")
        .bind("T_CP", t.cp_comm, "s")
        .bind("T_EP", t.ep_comm, "s")
        .bind("T_PP", t.pp_comm, "s")
        .bind("T_bubble", t.bubble, "s")
        .bind("T_DP", t.dp_comm, "s")
        .bind("T_opt", t.optimizer, "s")
        .bind("T_overhead", t.overhead, "s");
        if t.floor_raise > 0.0 {
            st = st.bind("T_floor", t.floor_raise, "s");
        }
        if let Some(o) = p.offload_exposed_s {
            st = st.bind("T_offload,exposed", o.get(), "s");
        }
        st.result(p.step_time_s.get(), "s").source(&format!(
            "docs/fidelity.md; profile {} ({})",
            p.profile, p.profile_origin
        ))
    });
    tr.record(|| {
        Step::new(
            "train.predicted.mfu",
            "MFU at the predicted step time",
            "MFU = model FLOPs per step / (N·C·T_step)",
        )
        .bind("T_step", p.step_time_s.get(), "s")
        .result(p.mfu, "")
        .source("the report's FLOP convention and the chip's peak for the compute dtype")
    });
}

/// Record how the prediction's overlap settings turned its TP and DP
/// communication into exposed time (`--explain`).
fn record_overlap<T: crate::trace::Tracer>(p: &Predicted, tr: &mut T) {
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
