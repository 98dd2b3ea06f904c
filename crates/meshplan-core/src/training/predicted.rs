//! Calibrated predictions for `meshplan train` and `meshplan plan train`
//! (issue 7): the [`TrainConfig`] → [`fidelity::RunSpec`] adapter and the
//! `predicted` section of a [`TrainReport`].
//!
//! The roofline numbers of [`super::analyze`] are bounds; the fidelity model
//! ([`crate::fidelity::predict`]) predicts what a real framework reaches with
//! the chip's efficiency profile. Mapping (see `docs/training.md`):
//!
//! | TrainConfig | RunSpec |
//! |---|---|
//! | `dp·fsdp` | `dp` |
//! | `fsdp > 1` | `zero = 3` when dp = 1 or ZeRO-3; with dp > 1 and ZeRO < 3, hybrid sharding: `fsdp` (a ZeRO-3 group inside dp·fsdp), `zero` across the replicas |
//! | `fsdp = 1` | `zero` as given (sharded over the `dp·cp` data-parallel ranks) |
//! | `tp`, `pp`, `cp`, `ep` | the same (ring attention for `cp > 1`; MoE experts split over `ep`, all-to-all) |
//! | `microbatches` | `grad_acc` |
//! | `⌈⌈⌈B/T⌉/(dp·fsdp)⌉/microbatches⌉` | `mbs` (uneven splits: the busiest replica, rounded up) |
//! | `seq_len`, `remat`, `sequence_parallel`, `schedule`, `virtual_stages` | the same |
//! | — | `framework = megatron`, bf16 mixed-precision Adam |
//!
//! Not predicted (the report says `prediction not available: <reason>`):
//! MLA, sliding-window attention, non-causal attention,
//! a compute dtype other than bf16, optimizers other than Adam/AdamW,
//! and more micro-batches than sequences per replica.

use serde::Serialize;

use super::{Optimizer, TrainConfig, TrainReport};
use crate::error::Result;
use crate::fidelity::model::{Framework, MemoryBreakdown, TimeBreakdown};
use crate::fidelity::{self, EfficiencyProfile, RunSpec, Shape};
use crate::hardware::Chip;
use crate::model::ModelSpec;
use crate::units::{Bytes, DType, Seconds};

/// The efficiency profile a command uses, and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveProfile {
    /// The profile.
    pub profile: EfficiencyProfile,
    /// "built-in" or "file NAME" (`--hw-profile`).
    pub origin: String,
}

/// The profile for `chip`: the user's (`--hw-profile`: `(toml_text, file_name)`)
/// when given, else the built-in one on the chip's own scale-out network
/// (`[scale_out] kind` of the catalog entry, e.g. InfiniBand for `h100`: the
/// built-in H100 profile was fitted on the Playbook's AWS EFA cluster and
/// carries an InfiniBand sub-profile that shares its compute and memory
/// parameters); `None` when the chip has none (TPUs). A user profile is used
/// as written: it was calibrated on the user's own cluster.
pub fn active_profile(chip: &Chip, user: Option<(&str, &str)>) -> Result<Option<ActiveProfile>> {
    let Some(profile) = fidelity::resolve_profile(&chip.name, user)? else {
        return Ok(None);
    };
    Ok(Some(match user {
        Some((_, f)) => ActiveProfile {
            profile,
            origin: format!("file {f}"),
        },
        None => {
            let net = chip.scale_out.as_ref().map_or("", |s| s.kind.as_str());
            let profile = profile.for_network(net);
            let origin = format!("built-in, {} network", profile.network);
            ActiveProfile { profile, origin }
        }
    }))
}

/// The one-line note shown when a chip has no efficiency profile.
pub const NO_PROFILE_NOTE: &str = "no efficiency profile for this chip: times are roofline bounds";

/// Why the fidelity model cannot predict this model / fixed configuration at
/// all (whatever the parallelism), if it cannot.
pub fn model_unsupported(spec: &ModelSpec, cfg: &TrainConfig) -> Option<String> {
    let a = &spec.arch;
    if a.mla.is_some() {
        return Some("multi-head latent attention is not modelled by the fidelity model".into());
    }
    if a.sliding_window.is_some() {
        return Some("sliding-window attention is not modelled by the fidelity model".into());
    }
    if !cfg.causal {
        return Some("non-causal attention is not modelled by the fidelity model".into());
    }
    if cfg.compute_dtype != DType::Bf16 {
        return Some(format!(
            "compute dtype {} (the efficiency profiles are calibrated for bf16)",
            cfg.compute_dtype
        ));
    }
    if !matches!(cfg.optimizer, Optimizer::Adam | Optimizer::AdamW) {
        return Some(
            "the fidelity memory model assumes mixed-precision Adam; other optimizers are not modelled"
                .into(),
        );
    }
    None
}

/// Map a training configuration onto the fidelity model's [`RunSpec`]
/// (module docs); `Err(reason)` when the combination is not modelled.
pub fn run_spec(spec: &ModelSpec, cfg: &TrainConfig) -> std::result::Result<RunSpec, String> {
    if let Some(r) = model_unsupported(spec, cfg) {
        return Err(r);
    }
    run_spec_unchecked(spec, cfg)
}

/// [`run_spec`] without the per-model checks (the planner runs them once).
pub(crate) fn run_spec_unchecked(
    spec: &ModelSpec,
    cfg: &TrainConfig,
) -> std::result::Result<RunSpec, String> {
    run_spec_for(Shape::from(&spec.arch), cfg).map_err(|e| e.to_string())
}

/// Why [`run_spec_for`] cannot map a configuration; the message is built only
/// when displayed, so the planner's hot loop rejects without allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unmapped {
    Empty,
    Micro { per: u64, m: u64 },
}

impl std::fmt::Display for Unmapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Unmapped::Empty => f.write_str("empty batch or sequence"),
            Unmapped::Micro { per, m } => write!(
                f,
                "{per} sequences per replica cannot fill {m} micro-batches"
            ),
        }
    }
}

/// [`run_spec_unchecked`] with the model's [`Shape`] already built (the
/// planner builds it once per search) and a non-allocating error.
pub(crate) fn run_spec_for(
    shape: Shape,
    cfg: &TrainConfig,
) -> std::result::Result<RunSpec, Unmapped> {
    let d = cfg.degrees;
    let t = cfg.seq_len;
    if t == 0 || cfg.batch_tokens == 0 {
        return Err(Unmapped::Empty);
    }
    // uneven splits (B not a whole number of sequences, sequences not
    // divisible by dp·fsdp or by the micro-batches): predict the busiest
    // replica, rounding up (conservative), as the roofline only notes them
    let seqs = cfg.batch_tokens.div_ceil(t);
    let data = (d.dp * d.fsdp).max(1);
    let per = seqs.div_ceil(data);
    let m = cfg.microbatches.max(1);
    if per < m {
        return Err(Unmapped::Micro { per, m });
    }
    Ok(RunSpec {
        shape,
        n_gpus: d.dp * d.fsdp * d.tp * d.pp * d.cp,
        dp: data,
        tp: d.tp,
        pp: d.pp,
        cp: d.cp,
        // fsdp alone (dp = 1) is ZeRO-3 over every data-parallel rank; with
        // dp > 1 and ZeRO < 3 it is hybrid sharding (`fsdp` shards, replicated)
        zero: if d.fsdp > 1 && (d.dp == 1 || cfg.zero >= 3) {
            3
        } else {
            cfg.zero.min(3)
        },
        mbs: per.div_ceil(m),
        grad_acc: m,
        seq_len: t,
        remat: cfg.remat,
        sequence_parallel: cfg.sequence_parallel,
        schedule: cfg.schedule,
        virtual_stages: cfg.virtual_stages.max(1),
        framework: Framework::Megatron,
        ep: d.ep.max(1),
        fsdp: d.fsdp.max(1),
    })
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
    /// Predicted seconds per optimizer step.
    pub step_time_s: Seconds,
    /// Model FLOPs per step (as `flops_per_step`) / (N·C·predicted step time).
    pub mfu: f64,
    /// Tokens per second (whole job).
    pub tokens_per_s: f64,
    /// Tokens per second per device.
    pub tokens_per_s_per_device: f64,
    /// Predicted peak memory of the most loaded device.
    pub peak_memory_bytes: Bytes,
    /// Usable HBM per the profile (`usable_hbm_fraction`).
    pub usable_memory_bytes: Bytes,
    /// Peak ≤ usable.
    pub fits: bool,
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
    /// Step time by part (seconds).
    pub time_breakdown_s: TimeBreakdown,
    /// Peak memory by part (bytes).
    pub memory_breakdown_bytes: MemoryBreakdown,
}

/// Predict one configuration; `model_flops` is the report's model FLOPs per
/// step (for the MFU, same convention as `mfu_at_lower_bound`).
pub fn predict_train(
    spec: &ModelSpec,
    chip: &Chip,
    cfg: &TrainConfig,
    prof: &ActiveProfile,
    model_flops: f64,
) -> std::result::Result<Predicted, String> {
    let rs = run_spec(spec, cfg)?;
    let p = fidelity::predict(&rs, chip, &prof.profile);
    let n = rs.n_gpus.max(1) as f64;
    let step = p.step_time_s;
    let c = chip.flops(DType::Bf16).get();
    let tokens_per_s = if step > 0.0 {
        cfg.batch_tokens as f64 / step
    } else {
        0.0
    };
    let train_time = cfg
        .train_tokens
        .filter(|_| tokens_per_s > 0.0)
        .map(|t| t as f64 / tokens_per_s);
    let chip_hours = train_time.map(|t| t * n / 3600.0);
    Ok(Predicted {
        profile: prof.profile.chip.clone(),
        profile_origin: prof.origin.clone(),
        profile_source: prof.profile.source.clone(),
        step_time_s: Seconds::new(step),
        mfu: if step > 0.0 {
            model_flops / (n * c * step)
        } else {
            0.0
        },
        tokens_per_s,
        tokens_per_s_per_device: tokens_per_s / n,
        peak_memory_bytes: Bytes::new(p.memory.total),
        usable_memory_bytes: Bytes::new(p.usable_gb * 1e9),
        fits: p.fits,
        train_time_s: train_time.map(Seconds::new),
        chip_hours,
        cost_usd: chip_hours.and_then(|h| chip.usd_per_chip_hour.map(|u| h * u)),
        zero: rs.zero,
        micro_batch_size: rs.mbs,
        grad_accumulation: rs.grad_acc,
        extrapolated: p.extrapolated,
        time_breakdown_s: p.time,
        memory_breakdown_bytes: p.memory,
    })
}

/// Fill `report.predicted` / `report.prediction_note` for `cfg` with `prof`
/// (`None`: the chip has no profile). The roofline fields are untouched.
pub fn attach(
    report: &mut TrainReport,
    spec: &ModelSpec,
    chip: &Chip,
    cfg: &TrainConfig,
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
    match predict_train(spec, chip, cfg, prof, report.flops_per_step.get()) {
        Ok(p) => report.predicted = Some(p),
        Err(r) => report.prediction_note = Some(format!("prediction not available: {r}")),
    }
}
