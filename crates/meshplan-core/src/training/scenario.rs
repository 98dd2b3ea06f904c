//! Scenario → training configuration: the defaults and validation that
//! `meshplan train` applies (shared with `meshplan check`). Flags are
//! written into the [`Scenario`] first (they override the file), then
//! [`resolve`] turns it into a model, a chip, a topology and a
//! [`TrainConfig`].

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::hardware::Chip;
use crate::mesh::{Degrees, Topology};
use crate::model::ModelSpec;
use crate::scenario::Scenario;
use crate::units::DType;

use super::{Optimizer, Remat, Schedule, TrainConfig};

/// Everything [`super::analyze`] needs.
#[derive(Clone, Debug)]
pub struct TrainSetup {
    /// The model.
    pub spec: ModelSpec,
    /// The chip.
    pub chip: Chip,
    /// The slice / GPU layout.
    pub topo: Topology,
    /// The configuration.
    pub cfg: TrainConfig,
}

fn dtype(s: &Option<String>, d: DType, what: &str) -> Result<DType> {
    match s {
        Some(x) => DType::parse(x).map_err(|e| Error::Invalid(format!("training.{what}: {e}"))),
        None => Ok(d),
    }
}

/// Resolve a scenario (with any flags already written into it) the way
/// `meshplan train` does: defaults of [`TrainConfig`], grad dtype = param
/// dtype, MFU in (0, 1], no degree at all → pure data parallelism over every
/// chip, ZeRO ≤ 3, microbatches default to `pp`.
pub fn resolve(sc: &Scenario, cat: &Catalog) -> Result<TrainSetup> {
    let spec = sc.model.resolve(cat)?;
    let chip = sc.hardware.resolve_chip(cat)?;
    let topo = match (&sc.hardware.mesh, sc.hardware.chips.map(|c| c.0)) {
        (Some(m), _) => Topology::parse(&chip, m)?,
        (None, Some(n)) => match &chip.ici {
            Some(_) => {
                return Err(Error::Invalid(
                    "a TPU needs --mesh with a slice shape like 16x16x16".into(),
                ))
            }
            None => Topology::gpus(n, chip.nvlink.as_ref().map_or(1, |x| x.domain_size)),
        },
        (None, None) => {
            return Err(Error::Invalid(
                "give --mesh (TPU slice or NODESxGPUS) or --chips".into(),
            ))
        }
    };
    let t = &sc.training;
    let p = &sc.parallelism;
    let mut cfg = TrainConfig::default();
    cfg.batch_tokens = t.batch_tokens.map(|c| c.0).unwrap_or(cfg.batch_tokens);
    cfg.seq_len = t.seq_len.map(|c| c.0).unwrap_or(cfg.seq_len);
    cfg.param_dtype = dtype(&t.param_dtype, cfg.param_dtype, "param_dtype")?;
    cfg.grad_dtype = dtype(&t.grad_dtype, cfg.param_dtype, "grad_dtype")?;
    cfg.optimizer_dtype = dtype(&t.optimizer_dtype, cfg.optimizer_dtype, "optimizer_dtype")?;
    cfg.activation_dtype = dtype(
        &t.activation_dtype,
        cfg.activation_dtype,
        "activation_dtype",
    )?;
    if let Some(o) = &t.optimizer {
        cfg.optimizer = Optimizer::parse(o)?;
    }
    cfg.master_weights = t.master_weights.unwrap_or(false);
    if let Some(r) = &t.remat {
        cfg.remat = Remat::parse(r)?;
    }
    cfg.mfu = t.mfu;
    if let Some(m) = cfg.mfu {
        if !(m > 0.0 && m <= 1.0) {
            return Err(Error::Invalid(format!("--mfu must be in (0, 1], got {m}")));
        }
    }
    cfg.train_tokens = t.train_tokens.map(|c| c.0);
    cfg.causal = t.causal.unwrap_or(true);
    cfg.include_attention = t.include_attention.unwrap_or(true);
    let pick = |s: Option<u64>| s.unwrap_or(1);
    cfg.degrees = Degrees {
        dp: pick(p.dp),
        fsdp: pick(p.fsdp),
        tp: pick(p.tp),
        pp: pick(p.pp),
        cp: pick(p.cp),
        ep: pick(p.ep),
    };
    for (name, v) in [
        ("dp", cfg.degrees.dp),
        ("fsdp", cfg.degrees.fsdp),
        ("tp", cfg.degrees.tp),
        ("pp", cfg.degrees.pp),
        ("cp", cfg.degrees.cp),
        ("ep", cfg.degrees.ep),
    ] {
        if v == 0 {
            return Err(Error::Invalid(format!(
                "--{name} must be at least 1 (1 = not used), got 0"
            )));
        }
    }
    if topo.chips() == 0 {
        return Err(Error::Invalid("the mesh needs at least one chip".into()));
    }
    if cfg.batch_tokens == 0 || cfg.seq_len == 0 {
        return Err(Error::Invalid(
            "--batch-tokens and --seq-len must be at least 1".into(),
        ));
    }
    // No degree given at all: pure data parallelism over every chip.
    if cfg.degrees == Degrees::default() && topo.chips() > 1 {
        cfg.degrees.dp = topo.chips();
    }
    let zero = p.zero.unwrap_or(0);
    if zero > 3 {
        return Err(Error::Invalid(format!(
            "--zero must be 0, 1, 2 or 3, got {zero}"
        )));
    }
    cfg.zero = zero as u8;
    if let Some(s) = &p.schedule {
        cfg.schedule = Schedule::parse(s)?;
    }
    cfg.microbatches = p.microbatches.unwrap_or(cfg.degrees.pp.max(1));
    cfg.virtual_stages = p.virtual_stages.unwrap_or(1);
    if cfg.microbatches == 0 || cfg.virtual_stages == 0 {
        return Err(Error::Invalid(
            "--microbatches and --virtual-stages must be at least 1".into(),
        ));
    }
    cfg.sequence_parallel = p.sequence_parallel.unwrap_or(false);
    if let Some(e) = t.comm_efficiency {
        if !(e > 0.0 && e <= 1.0) {
            return Err(Error::Invalid(format!(
                "--comm-efficiency must be in (0, 1], got {e}"
            )));
        }
        cfg.comm_efficiency = e;
    }
    Ok(TrainSetup {
        spec,
        chip,
        topo,
        cfg,
    })
}
