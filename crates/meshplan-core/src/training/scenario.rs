//! Scenario → training configuration: the defaults and validation that
//! `meshplan train`, `meshplan plan train` and `meshplan check` apply. Flags
//! are written into the [`Scenario`] first (they override the file), then
//! [`resolve`] turns it into a model, a chip, a topology and a
//! [`TrainConfig`].

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::hardware::{fmt_shape, Chip};
use crate::mesh::Topology;
use crate::model::ModelSpec;
use crate::parallelism::pipeline::StageLayers;
use crate::parallelism::{
    CpComm, Degrees, FlopConvention, Fp8Recipe, Framework, Optimizer, Overlap, RankOrder, Remat,
    Schedule, TpOverlap, TrainConfig,
};
use crate::scenario::{ParallelismSection, Scenario, TrainingSection};
use crate::step::predict::{active_profile, default_framework, ActiveProfile};
use crate::units::DType;

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
    /// The efficiency profile (built-in, or the user's), if the chip has one.
    pub profile: Option<ActiveProfile>,
    /// The framework defaults applied where the user chose nothing, one
    /// phrase each ([`framework_defaults`]); empty under the book's
    /// accounting.
    pub chosen: Vec<String>,
}

impl TrainSetup {
    /// [`super::analyze_with`] of this setup with its own profile: what
    /// `train` (CLI, Python, web) reports.
    /// Under a framework, the report also names the defaults chosen for the
    /// user and what would change its verdict ([`super::advice`]).
    pub fn analyze<T: crate::trace::Tracer>(&self, tr: &mut T) -> super::TrainReport {
        let mut r = self.analyze_cfg(&self.cfg, tr);
        r.chosen = self.chosen.clone();
        super::advice::attach(self, &mut r);
        r
    }

    /// [`super::analyze_with`] of this setup's model, chip, topology and
    /// profile under another configuration (the advice's alternatives).
    pub fn analyze_cfg<T: crate::trace::Tracer>(
        &self,
        cfg: &TrainConfig,
        tr: &mut T,
    ) -> super::TrainReport {
        super::analyze_with(
            &self.spec,
            &self.chip,
            &self.topo,
            cfg,
            self.profile.as_ref(),
            tr,
        )
    }
}

/// A workload without a fixed plan (what the planner searches over).
#[derive(Clone, Debug)]
pub struct Workload {
    /// The model.
    pub spec: ModelSpec,
    /// The chip.
    pub chip: Chip,
    /// The slice / GPU layout, or why there is none (a TPU chip count no
    /// slice offers).
    pub topo: std::result::Result<Topology, String>,
    /// Chips asked for (the topology's, or the count no slice offers).
    pub chips: u64,
    /// Batch, sequence, dtypes, optimizer, framework (degrees and choices at
    /// their defaults).
    pub base: TrainConfig,
    /// The efficiency profile, if the chip has one.
    pub profile: Option<ActiveProfile>,
    /// `offload = ["auto"]` (`--offload auto`): the planner tries every
    /// offload combination.
    pub offload_auto: bool,
    /// `[parallelism] rank_order` for the planner: one order, or both
    /// (`"auto"`); empty = Megatron's default only.
    pub rank_orders: Vec<RankOrder>,
}

/// The smallest MFU accepted: below it step times leave the range of
/// meaningful (and, near 5e-324, finite) numbers.
pub const MIN_MFU: f64 = 1e-6;

/// `m` when it is an MFU meshplan accepts: a finite number in
/// [[`MIN_MFU`], 1].
pub fn check_mfu(m: f64) -> Result<f64> {
    if (MIN_MFU..=1.0).contains(&m) {
        Ok(m)
    } else if m.is_finite() {
        Err(Error::Invalid(format!(
            "--mfu must be in [{MIN_MFU:e}, 1], got {m:e}"
        )))
    } else {
        Err(Error::Invalid(format!(
            "--mfu must be a finite number in [{MIN_MFU:e}, 1]"
        )))
    }
}

/// `training.fp8_recipe` / `--fp8-recipe`: a recipe scales fp8 GEMM
/// operands, so it needs `compute_dtype = "fp8"`.
fn fp8_recipe(s: Option<&str>, compute: DType) -> Result<Option<Fp8Recipe>> {
    let Some(s) = s else {
        return Ok(None);
    };
    let r = Fp8Recipe::parse(s).map_err(|e| Error::Invalid(format!("training.fp8_recipe: {e}")))?;
    if compute != DType::Fp8 {
        return Err(Error::Invalid(format!(
            "training.fp8_recipe = \"{r}\" scales fp8 GEMMs: it needs compute_dtype = \"fp8\" (--dtype fp8), got {compute}"
        )));
    }
    Ok(Some(r))
}

fn dtype(s: &Option<String>, d: DType, what: &str) -> Result<DType> {
    match s {
        Some(x) => DType::parse(x).map_err(|e| Error::Invalid(format!("training.{what}: {e}"))),
        None => Ok(d),
    }
}

/// The slice or GPU layout of `n` chips: on a TPU the offered slice with
/// that many chips (`Err` lists the offered sizes), on GPUs `n` GPUs in
/// NVLink domains.
pub fn topology_for_chips(chip: &Chip, n: u64) -> std::result::Result<Topology, String> {
    crate::mesh::check_chip_count(n)?;
    let Some(ici) = &chip.ici else {
        return Ok(Topology::gpus(
            n,
            chip.nvlink.as_ref().map_or(1, |x| x.domain_size),
        ));
    };
    match ici.slice_shapes.iter().find(|s| s.iter().product::<u64>() == n) {
        Some(s) => Ok(Topology::Torus {
            slices: 1,
            shape: s.clone(),
        }),
        None => Err(format!(
            "{} offers no slice of {n} chips (offered: {}); give --mesh SHAPE, or use one of those sizes",
            chip.name,
            ici.slice_shapes
                .iter()
                .map(|s| format!("{} = {}", fmt_shape(s), s.iter().product::<u64>()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The topology a scenario names: its mesh, else its chip count.
fn scenario_topology(sc: &Scenario, chip: &Chip) -> Result<std::result::Result<Topology, String>> {
    match (&sc.hardware.mesh, sc.hardware.chips.map(|c| c.0)) {
        (Some(m), _) => {
            let t = Topology::parse(chip, m)?;
            // the one offered-slice rule, as `infer` applies it
            if let Topology::Torus { shape, .. } = &t {
                crate::inference::check_mesh(chip, shape)?;
            }
            Ok(Ok(t))
        }
        (None, Some(0)) => Err(Error::Invalid("the mesh needs at least one chip".into())),
        (None, Some(n)) => {
            crate::mesh::check_chip_count(n).map_err(Error::Invalid)?;
            Ok(topology_for_chips(chip, n))
        }
        (None, None) => Err(Error::Invalid(
            "give --mesh (TPU slice or NODESxGPUS) or --chips".into(),
        )),
    }
}

/// The `[training]` section over the defaults of [`TrainConfig`]: grad
/// dtype = param dtype, MFU in (0, 1], the FLOP convention (`flops`, or
/// `include_attention = false` for the book's), the framework (Megatron
/// where a profile describes the chip, the book's accounting otherwise).
fn workload_config(
    t: &TrainingSection,
    profile: Option<&ActiveProfile>,
    chip: &Chip,
) -> Result<TrainConfig> {
    let mut cfg = TrainConfig::default();
    cfg.batch_tokens = t.batch_tokens.map(|c| c.0).unwrap_or(cfg.batch_tokens);
    cfg.seq_len = t.seq_len.map(|c| c.0).unwrap_or(cfg.seq_len);
    if cfg.batch_tokens == 0 || cfg.seq_len == 0 {
        return Err(Error::Invalid(
            "--batch-tokens and --seq-len must be at least 1".into(),
        ));
    }
    cfg.param_dtype = dtype(&t.param_dtype, cfg.param_dtype, "param_dtype")?;
    cfg.grad_dtype = dtype(&t.grad_dtype, cfg.param_dtype, "grad_dtype")?;
    cfg.optimizer_dtype = dtype(&t.optimizer_dtype, cfg.optimizer_dtype, "optimizer_dtype")?;
    cfg.activation_dtype = dtype(
        &t.activation_dtype,
        cfg.activation_dtype,
        "activation_dtype",
    )?;
    cfg.compute_dtype = dtype(&t.compute_dtype, cfg.compute_dtype, "compute_dtype")?;
    cfg.fp8_recipe = fp8_recipe(t.fp8_recipe.as_deref(), cfg.compute_dtype)?;
    if let Some(o) = &t.optimizer {
        cfg.optimizer = Optimizer::parse(o)?;
    }
    cfg.master_weights = t.master_weights.unwrap_or(false);
    if let Some(r) = &t.remat {
        cfg.remat = Remat::parse(r)?;
    }
    cfg.checkpoints_per_layer = crate::memory::checkpoints_per_layer(t.checkpoints_per_layer)?;
    cfg.mfu = t.mfu;
    if let Some(m) = cfg.mfu {
        check_mfu(m)?;
    }
    cfg.train_tokens = t.train_tokens.map(|c| c.0);
    cfg.causal = t.causal.unwrap_or(true);
    cfg.flops = match (&t.flops, t.include_attention) {
        (Some(f), _) => FlopConvention::parse(f)?,
        (None, Some(false)) => FlopConvention::Book,
        (None, _) => FlopConvention::Model,
    };
    cfg.framework = match &t.framework {
        Some(f) => Framework::parse(f)?,
        None => default_framework(profile, chip.profile == crate::hardware::Profile::Book),
    };
    if cfg.checkpoints_per_layer.is_some() && cfg.framework != Framework::Book {
        // a framework saves its own tensor list: k would be silently ignored
        return Err(Error::Invalid(format!(
            "checkpoints_per_layer (the book's k checkpoints of [B, D] per layer) needs the book's memory accounting: set framework = \"book\" (--framework book); this plan uses {}",
            cfg.framework
        )));
    }
    if let Some(o) = &t.offload {
        if !o.iter().any(|x| x.trim().eq_ignore_ascii_case("auto")) {
            cfg.offload = crate::parallelism::Offload::parse_names(o.iter().map(String::as_str))?;
        }
    }
    if let Some(e) = t.comm_efficiency {
        if !(e > 0.0 && e <= 1.0) {
            return Err(Error::Invalid(format!(
                "--comm-efficiency must be in (0, 1], got {e}"
            )));
        }
        cfg.comm_efficiency = e;
    }
    cfg.overlap = Overlap::parse(
        t.tp_overlap.as_deref(),
        t.dp_overlap.as_deref(),
        t.sp_allgather.as_deref(),
    )?;
    Ok(cfg)
}

/// The `[parallelism]` section into `cfg`: without `dp`, data parallelism
/// over the chips the other degrees leave (no degree at all → pure data
/// parallelism), ZeRO ≤ 3, micro-batches default to `pp` (a framework's
/// own defaults then apply: [`framework_defaults`]).
fn plan_config(p: &ParallelismSection, chips: u64, cfg: &mut TrainConfig) -> Result<()> {
    let pick = |s: Option<u64>| s.unwrap_or(1);
    cfg.degrees = Degrees {
        dp: pick(p.dp),
        fsdp: pick(p.fsdp),
        tp: pick(p.tp),
        pp: pick(p.pp),
        cp: pick(p.cp),
        ep: pick(p.ep),
        etp: p.etp.unwrap_or(0),
        order: match p.rank_order.as_deref() {
            None => RankOrder::default(),
            Some("auto") => {
                return Err(Error::Invalid(
                    "rank_order = auto lets `plan train` choose; `train` takes tp-cp-ep-dp-pp or tp-pp-dp".into(),
                ))
            }
            Some(o) => RankOrder::parse(o)?,
        },
    };
    // Megatron-Core allows any etp with world % (etp·ep·pp) = 0; meshplan
    // models the two layouts in use: experts split like the dense layers
    // (etp = tp) or whole on one rank (etp = 1)
    if let Some(e) = p.etp {
        if e != 1 && e != cfg.degrees.tp {
            return Err(Error::Invalid(format!(
                "--etp must be 1 (each expert whole on one rank) or tp = {} (the default), got {e}",
                cfg.degrees.tp
            )));
        }
    }
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
        if v > crate::mesh::MAX_CHIPS {
            return Err(Error::Invalid(format!(
                "--{name} = {v} is more than the {} chips meshplan analyses",
                crate::mesh::MAX_CHIPS
            )));
        }
    }
    if !matches!(cfg.degrees.checked_product(), Some(n) if n <= crate::mesh::MAX_CHIPS) {
        return Err(Error::Invalid(format!(
            "dp·fsdp·tp·pp·cp overflows: the degrees multiply to more than the {} chips meshplan analyses",
            crate::mesh::MAX_CHIPS
        )));
    }
    // dp fills the chips the other degrees leave (Megatron's and NeMo's
    // convention: data-parallel size = world / (tp·pp·cp), ep carved out of
    // the data ranks); no degree at all is pure data parallelism
    if p.dp.is_none() {
        let rest = cfg.degrees.product();
        if rest > 0 && chips % rest == 0 && chips / rest > 1 {
            cfg.degrees.dp = chips / rest;
        }
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
    if cfg.schedule == Schedule::DualPipe {
        if let Some(e) =
            crate::parallelism::pipeline::dualpipe_problem(cfg.degrees.pp, cfg.microbatches)
        {
            return Err(Error::Invalid(format!("--schedule dualpipe: {e}")));
        }
    }
    cfg.stage_layers = stage_layers(p, cfg.degrees.pp)?;
    if let Some(c) = &p.cp_comm {
        cfg.cp_comm = CpComm::parse(c)?;
    }
    cfg.sequence_parallel = p.sequence_parallel.unwrap_or(false);
    Ok(())
}

/// `first_stage_layers` / `last_stage_layers`: each at least 1 (Megatron
/// refuses 0) and only with a pipeline; whether they split the layers is a
/// feasibility rule (`training::feasibility`), reported with the others.
fn stage_layers(p: &ParallelismSection, pp: u64) -> Result<StageLayers> {
    let given = StageLayers {
        first: p.first_stage_layers,
        last: p.last_stage_layers,
    };
    if given.is_set() && pp <= 1 {
        return Err(Error::Invalid(
            "--first-stage-layers / --last-stage-layers need a pipeline (--pp 2 or more)".into(),
        ));
    }
    if given.first == Some(0) || given.last == Some(0) {
        return Err(Error::Invalid(
            "--first-stage-layers / --last-stage-layers must be at least 1 (Megatron-Core's rule)"
                .into(),
        ));
    }
    Ok(given)
}

/// Transformer Engine's userbuffers overlap pipelines the SP all-gather /
/// reduce-scatter with the GEMMs; Megatron refuses `--tp-comm-overlap`
/// without `--sequence-parallel` (checked after the framework's defaults,
/// which may turn sequence parallelism on).
fn check_tp_overlap(cfg: &TrainConfig) -> Result<()> {
    if cfg.overlap.tp == TpOverlap::Pipelined && cfg.degrees.tp > 1 && !cfg.sequence_parallel {
        return Err(Error::Invalid(
            "--tp-overlap pipelined needs --sequence-parallel (Transformer Engine's comm-GEMM overlap chunks the sequence-parallel all-gather and reduce-scatter)".into(),
        ));
    }
    Ok(())
}

/// The micro-batch size the frameworks default to: Megatron-LM's and
/// NeMo's recipes run `micro_batch_size = 1` (NeMo
/// `recipes/llama3_70b.py`: `MockDataModule(seq_length=8192,
/// global_batch_size=512, micro_batch_size=1)`).
pub const FRAMEWORK_MICRO_BATCH_SEQUENCES: u64 = 1;

/// The most micro-batches a default gives: beyond it the micro-batch grows
/// (the largest count ≤ this bound that divides the sequences per rank).
/// meshplan's bound, not a framework's: real batches stay far below it
/// (512 sequences over 8 ranks is 64), and it keeps the step's timeline
/// (`--trace`, one pass per micro-batch and stage) small for any batch.
pub const MAX_DEFAULT_MICROBATCHES: u64 = 1024;

/// The frameworks' micro-batching, `(micro-batch sequences, micro-batches)`:
/// `m = global batch sequences / (micro-batch size · data-parallel ranks)`
/// with micro-batch size [`FRAMEWORK_MICRO_BATCH_SEQUENCES`] (larger only
/// past [`MAX_DEFAULT_MICROBATCHES`]), when the batch is a whole number of
/// sequences per data rank (`None` otherwise: Megatron asserts the
/// division is exact).
///
/// Sources: Megatron-Core `num_microbatches_calculator.py`
/// (`ConstantNumMicroBatchesCalculator`: `num_micro_batches =
/// global_batch_size // (micro_batch_size * data_parallel_size)`, used as
/// pipeline micro-batches when pp > 1 and as gradient-accumulation steps
/// by `forward_backward_no_pipelining` when pp = 1); nanotron's
/// `TokensArgs` (global batch = dp · `micro_batch_size` ·
/// `batch_accumulation_per_replica` · sequence length); torchtitan's
/// `global_batch_size` / (`local_batch_size` · dp) gradient-accumulation
/// steps. Data ranks are dp·fsdp: context parallelism splits each
/// sequence, it does not add sequences.
pub fn framework_micro_batching(cfg: &TrainConfig) -> Option<(u64, u64)> {
    let d = cfg.degrees.at_least_one();
    let ranks = d.dp.checked_mul(d.fsdp)?;
    if cfg.seq_len == 0 || cfg.batch_tokens % cfg.seq_len != 0 {
        return None;
    }
    let seqs = cfg.batch_tokens / cfg.seq_len;
    if seqs < ranks || seqs % ranks != 0 {
        return None;
    }
    let per_rank = seqs / ranks;
    let most = (per_rank / FRAMEWORK_MICRO_BATCH_SEQUENCES).min(MAX_DEFAULT_MICROBATCHES);
    // at most 1,024 tries; m = 1 always divides
    let m = (1..=most.max(1)).rev().find(|m| per_rank % m == 0)?;
    Some((per_rank / m, m))
}

/// The micro-batch count of [`framework_micro_batching`].
pub fn framework_microbatches(cfg: &TrainConfig) -> Option<u64> {
    framework_micro_batching(cfg).map(|(_, m)| m)
}

/// The defaults `cfg.framework` would apply where the scenario leaves a
/// choice open, written into `cfg`, one phrase each for the report. The
/// book's accounting and MaxText keep meshplan's historical defaults
/// (micro-batches = pp, full recompute, ZeRO-0, no sequence parallelism),
/// so every book figure is unchanged. The user's explicit choices are
/// never changed.
///
/// * micro-batches: [`framework_micro_batching`] (micro-batch size 1);
/// * ZeRO: Megatron-Core's distributed optimizer (ZeRO-1) — NeMo's recipes
///   use `distributed_fused_adam_with_cosine_annealing`
///   (`use_distributed_optimizer=True`) and Megatron-LM's example scripts
///   pass `--use-distributed-optimizer`; nanotron's `zero_stage` defaults
///   to 0; Megatron-LM 2022 predates the distributed optimizer;
/// * recompute: none for Megatron (Megatron-Core `TransformerConfig.
///   recompute_granularity = None`; NeMo's llama3_70b recipe sets none) and
///   nanotron (`recompute_layer: False`); selective for Megatron-LM 2022
///   (Korthikanti et al. 2022, selective recompute with sequence
///   parallelism); full for Megatron-LM 2021 (Narayanan et al. 2021) and
///   torchtitan (its default recomputes every second block, which no remat
///   policy states: full is the nearer memory bound); none for DeepSpeed
///   (activation checkpointing is opt-in);
/// * ZeRO-3 over the data ranks for torchtitan (FSDP2, `dp_shard = -1`);
/// * sequence parallelism with tp > 1: Megatron (NeMo's llama recipes
///   `sequence_parallelism=True`), Megatron-LM 2022 (the same paper) and
///   torchtitan (its TP plan); not nanotron (`tp_mode` defaults to
///   `ALL_REDUCE`), Megatron-LM 2021 (before SP) or DeepSpeed.
pub fn framework_defaults(sc: &Scenario, cfg: &mut TrainConfig) -> Vec<String> {
    let fw = cfg.framework;
    if matches!(fw, Framework::Book | Framework::Maxtext) {
        return Vec::new();
    }
    let (p, name) = (&sc.parallelism, framework_name(fw));
    let mut chosen = Vec::new();
    if p.microbatches.is_none() {
        if let Some((mbs, m)) = framework_micro_batching(cfg) {
            cfg.microbatches = m;
            let what = if cfg.degrees.pp > 1 {
                "micro-batches"
            } else {
                "gradient-accumulation steps"
            };
            let cap = if mbs > FRAMEWORK_MICRO_BATCH_SEQUENCES {
                format!("; micro-batch size {FRAMEWORK_MICRO_BATCH_SEQUENCES} would exceed meshplan's {MAX_DEFAULT_MICROBATCHES}")
            } else {
                String::new()
            };
            chosen.push(format!(
                "micro-batch size {mbs} → {m} {what} ({name}: global batch / (micro-batch size · data ranks){cap})"
            ));
        }
    }
    let d = cfg.degrees.at_least_one();
    if fw == Framework::Megatron && p.zero.is_none() && d.fsdp == 1 && d.dp * d.cp > 1 {
        cfg.zero = 1;
        chosen.push(format!("distributed optimizer (ZeRO-1, {name}'s recipes)"));
    }
    if fw == Framework::Torchtitan && p.zero.is_none() && d.fsdp == 1 && d.dp * d.cp > 1 {
        cfg.zero = 3;
        chosen.push(format!(
            "FSDP (ZeRO-3) over the data ranks ({name}'s dp_shard = -1)"
        ));
    }
    if sc.training.remat.is_none() {
        cfg.remat = match fw {
            Framework::Megatron2022 => Remat::Selective,
            Framework::Megatron2021 | Framework::Torchtitan => Remat::Full,
            _ => Remat::None,
        };
        chosen.push(format!(
            "{} ({name}'s default{})",
            match cfg.remat {
                Remat::Selective => "selective recompute",
                Remat::Full => "full recompute",
                _ => "no recompute",
            },
            if fw == Framework::Torchtitan {
                " recomputes every second block; full is the nearest policy"
            } else {
                ""
            }
        ));
    }
    let sp = matches!(
        fw,
        Framework::Megatron | Framework::Megatron2022 | Framework::Torchtitan
    );
    if sp && p.sequence_parallel.is_none() && d.tp > 1 {
        cfg.sequence_parallel = true;
        chosen.push("sequence parallelism with tp > 1".to_string());
    }
    chosen
}

/// MaxText's own defaults (`MaxText/configs/base.yml`), the framework a TPU
/// runs when none is given: the slice's data ranks shard the weights and
/// optimizer state (`ici_fsdp_parallelism: -1`, FSDP ≡ ZeRO-3 over them;
/// across several slices the DCN axis is data parallel,
/// `dcn_data_parallelism: -1`, which meshplan leaves to the user) and every
/// layer is recomputed (`remat_policy: 'full'`); one gradient-accumulation
/// step (`gradient_accumulation_steps: 1`) is meshplan's default already.
/// The user's explicit choices are never changed.
fn maxtext_defaults(sc: &Scenario, cfg: &mut TrainConfig, one_slice: bool) -> Vec<String> {
    let p = &sc.parallelism;
    let mut chosen = Vec::new();
    let d = cfg.degrees.at_least_one();
    if one_slice && p.zero.is_none() && p.fsdp.is_none() && d.fsdp == 1 && d.dp * d.cp > 1 {
        cfg.zero = 3;
        chosen.push(
            "FSDP (ZeRO-3) over the slice's data ranks (MaxText's ici_fsdp_parallelism = -1)"
                .to_string(),
        );
    }
    if sc.training.remat.is_none() {
        cfg.remat = Remat::Full;
        chosen.push("full recompute (MaxText's remat_policy = 'full')".to_string());
    }
    chosen
}

/// How the report names a framework.
fn framework_name(fw: Framework) -> &'static str {
    match fw {
        Framework::Megatron => "Megatron",
        Framework::Megatron2022 => "Megatron-LM 2022",
        Framework::Megatron2021 => "Megatron-LM 2021",
        Framework::Torchtitan => "torchtitan",
        Framework::Deepspeed => "DeepSpeed",
        Framework::Nanotron => "nanotron",
        Framework::Maxtext => "MaxText",
        Framework::Book => "the book",
    }
}

/// Resolve a scenario (with any flags already written into it) the way
/// `meshplan train` does, with the chip's built-in profile.
pub fn resolve(sc: &Scenario, cat: &Catalog) -> Result<TrainSetup> {
    resolve_with(sc, cat, None)
}

/// [`resolve`] with the user's efficiency profile (`--hw-profile`:
/// `(toml_text, file_name)`) instead of the chip's built-in one.
pub fn resolve_with(
    sc: &Scenario,
    cat: &Catalog,
    user: Option<(&str, &str)>,
) -> Result<TrainSetup> {
    let w = resolve_workload(sc, cat, user)?;
    if w.offload_auto {
        return Err(Error::Invalid(
            "offload = auto lets `plan train` choose; `train` takes a list (optimizer, weights, activations)".into(),
        ));
    }
    let topo = w.topo.map_err(Error::Invalid)?;
    let chips = topo.checked_chips().unwrap_or(0);
    if chips == 0 {
        return Err(Error::Invalid("the mesh needs at least one chip".into()));
    }
    let mut cfg = w.base;
    plan_config(&sc.parallelism, chips, &mut cfg)?;
    let one_slice = !matches!(topo, crate::mesh::Topology::Torus { slices, .. } if slices > 1);
    let mut chosen = if cfg.framework == Framework::Maxtext {
        maxtext_defaults(sc, &mut cfg, one_slice)
    } else {
        framework_defaults(sc, &mut cfg)
    };
    // a vendor TPU's framework is the chip's choice (default_framework):
    // named even when the user set every MaxText default themselves
    if sc.training.framework.is_none() && cfg.framework == Framework::Maxtext {
        chosen.push(
            "framework MaxText (a vendor TPU's default; --framework book for the book's accounting)"
                .to_string(),
        );
    }
    check_tp_overlap(&cfg)?;
    Ok(TrainSetup {
        spec: w.spec,
        chip: w.chip,
        topo,
        cfg,
        profile: w.profile,
        chosen,
    })
}

/// The model, chip, topology and workload of a scenario, without a plan
/// (`[parallelism]` is ignored): what `meshplan plan train` searches.
pub fn resolve_workload(
    sc: &Scenario,
    cat: &Catalog,
    user: Option<(&str, &str)>,
) -> Result<Workload> {
    let spec = sc.model.resolve(cat)?;
    let chip = sc.hardware.resolve_chip(cat)?;
    let profile = active_profile(&chip, user)?;
    let topo = scenario_topology(sc, &chip)?;
    let base = workload_config(&sc.training, profile.as_ref(), &chip)?;
    let chips = match &topo {
        Ok(t) => t.checked_chips().unwrap_or(u64::MAX),
        Err(_) => sc.hardware.chips.map_or(0, |c| c.0),
    };
    let offload_auto = sc
        .training
        .offload
        .as_ref()
        .is_some_and(|o| o.iter().any(|x| x.trim().eq_ignore_ascii_case("auto")));
    if offload_auto || base.offload.any() {
        if let Some(why) = super::offload::unsupported(&chip) {
            return Err(Error::Invalid(why));
        }
    }
    let rank_orders = match sc.parallelism.rank_order.as_deref().map(str::trim) {
        None => Vec::new(),
        Some("auto") => RankOrder::ALL.to_vec(),
        Some(o) => vec![RankOrder::parse(o)?],
    };
    Ok(Workload {
        spec,
        chip,
        topo,
        chips,
        base,
        profile,
        offload_auto,
        rank_orders,
    })
}
