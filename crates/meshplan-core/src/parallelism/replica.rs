//! One run as a data-parallel replica sees it ([`RunSpec`]): integer
//! micro-batches of whole sequences, the shape the fidelity model predicts
//! and the measured data sets describe. [`RunSpec::from_config`] is the one
//! mapping from a [`TrainConfig`].

use serde::Serialize;

use super::pipeline::StageLayers;
use super::{CpComm, Degrees, Framework, LogicalAxis, RankOrder, Remat, Schedule, TrainConfig};
use crate::model::params::ParamCounts;
use crate::model::Arch;

/// One training configuration to predict (one run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RunSpec {
    /// The model.
    pub arch: Arch,
    /// Its exact parameter counts (computed once, see [`crate::model::params::count`]).
    #[serde(skip)]
    pub params: ParamCounts,
    /// Accelerators in the job.
    pub n_gpus: u64,
    /// Data-parallel degree (all data-like ranks: dp·fsdp).
    pub dp: u64,
    /// Tensor-parallel degree.
    pub tp: u64,
    /// Pipeline-parallel degree.
    pub pp: u64,
    /// Context-parallel degree.
    pub cp: u64,
    /// ZeRO stage over dp (0–3).
    pub zero: u8,
    /// Micro-batch size (sequences).
    pub mbs: u64,
    /// Micro-batches per step per replica (gradient accumulation).
    pub grad_acc: u64,
    /// Sequence length.
    pub seq_len: u64,
    /// Recompute policy.
    pub remat: Remat,
    /// Megatron-style sequence parallelism with TP.
    pub sequence_parallel: bool,
    /// How context parallelism moves K/V.
    #[serde(skip_serializing_if = "CpComm::is_ring")]
    pub cp_comm: CpComm,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Virtual stages per device (interleaved).
    pub virtual_stages: u64,
    /// Layers on the first / last stage as stated (unset: the framework's
    /// split, [`super::pipeline::stages_with`]).
    #[serde(default, skip_serializing_if = "StageLayers::is_even")]
    pub stage_layers: StageLayers,
    /// Framework conventions.
    pub framework: Framework,
    /// Expert-parallel degree (MoE; ep ranks are data-parallel ranks that
    /// split the routed experts).
    pub ep: u64,
    /// TP degree inside each routed expert (Megatron-Core
    /// `expert_tensor_parallel_size`); 0 = tp. With etp = 1 every expert is
    /// whole on one rank and the ep group spans tp's ranks.
    #[serde(default, skip_serializing_if = "super::degrees::is_zero")]
    pub etp: u64,
    /// GPU rank order (which axes share the NVLink domain).
    #[serde(default, skip_serializing_if = "RankOrder::is_default")]
    pub order: RankOrder,
    /// Hybrid sharding: a ZeRO-3 group of this many data-parallel ranks
    /// (innermost), replicated across the rest with ZeRO stage `zero`
    /// (1 = none; `zero = 3` shards over every data-parallel rank instead).
    pub fsdp: u64,
}

/// Why a [`TrainConfig`] cannot be mapped onto one replica; the message is
/// built only when displayed, so the planner's hot loop rejects without
/// allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmapped {
    /// No tokens or no sequence length.
    Empty,
    /// Fewer sequences per replica than micro-batches.
    Micro {
        /// Sequences per data-parallel replica.
        per: u64,
        /// Micro-batches asked for.
        m: u64,
    },
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

impl RunSpec {
    /// Map a training configuration onto one replica (`params` = the counts
    /// of `arch`). Mapping (see `docs/training.md`):
    ///
    /// * `dp` = dp·fsdp; `fsdp > 1` means ZeRO-3 when dp = 1 or ZeRO-3 is
    ///   asked for, otherwise hybrid sharding (`fsdp` shards, replicated);
    /// * `mbs = ⌈⌈⌈B/T⌉/(dp·fsdp)⌉/m⌉`: uneven splits predict the busiest
    ///   replica, rounding up;
    /// * the rest is copied.
    pub fn from_config(
        arch: &Arch,
        params: ParamCounts,
        cfg: &TrainConfig,
    ) -> Result<RunSpec, Unmapped> {
        Self::from_config_as(arch, params, cfg, cfg.framework)
    }

    /// [`RunSpec::from_config`] under `framework` (the book's accounting is
    /// priced as a framework's runtime) without copying the configuration.
    pub fn from_config_as(
        arch: &Arch,
        params: ParamCounts,
        cfg: &TrainConfig,
        framework: Framework,
    ) -> Result<RunSpec, Unmapped> {
        let d = cfg.degrees.at_least_one();
        let (t, data) = (cfg.seq_len, d.data());
        let (per, m) = Self::sequences_per_microbatch(cfg)?;
        Ok(RunSpec {
            arch: arch.clone(),
            params,
            n_gpus: d.product(),
            dp: data,
            tp: d.tp,
            pp: d.pp,
            cp: d.cp,
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
            cp_comm: cfg.cp_comm,
            schedule: cfg.schedule,
            virtual_stages: cfg.virtual_stages.max(1),
            stage_layers: cfg.stage_layers,
            framework,
            ep: d.ep,
            etp: cfg.degrees.etp,
            order: cfg.degrees.order,
            fsdp: d.fsdp,
        })
    }

    /// Routed experts whole on one rank while the dense layers use tp > 1
    /// (etp = 1).
    pub fn whole_experts(&self) -> bool {
        self.degrees().etp_differs() && self.etp == 1
    }

    /// Parameters of one pipeline stage on one device: the dense part over
    /// tp, the routed experts over ep·etp (approximate: embeddings spread
    /// over the stages); twice that under DualPipe, whose ranks hold a stage
    /// of each direction ([`super::pipeline::parameter_copies`]).
    pub fn stage_params(&self) -> f64 {
        let pc = &self.params;
        let d = self.degrees();
        let routed = pc.experts_routed as f64;
        let dense = (pc.total as f64 - routed) / d.tp as f64;
        let copies = super::pipeline::parameter_copies(self.schedule, d.pp) as f64;
        copies * (dense + routed / (d.ep * d.expert_tp().max(1)) as f64) / d.pp as f64
    }

    /// Tokens per optimizer step.
    pub fn tokens_per_step(&self) -> f64 {
        // in f64: a hostile data set's degrees must not overflow u64
        self.mbs as f64 * self.grad_acc as f64 * self.dp as f64 * self.seq_len as f64
    }

    /// (sequences per replica, micro-batches) of `cfg`, or why it cannot be
    /// mapped onto a replica (the checks of [`RunSpec::from_config`], without
    /// building the spec).
    pub fn sequences_per_microbatch(cfg: &TrainConfig) -> Result<(u64, u64), Unmapped> {
        let t = cfg.seq_len;
        if t == 0 || cfg.batch_tokens == 0 {
            return Err(Unmapped::Empty);
        }
        let per = cfg
            .batch_tokens
            .div_ceil(t)
            .div_ceil(cfg.degrees.at_least_one().data());
        let m = cfg.microbatches.max(1);
        if per < m {
            return Err(Unmapped::Micro { per, m });
        }
        Ok((per, m))
    }

    /// The mesh degrees of this run (`dp` here counts the `fsdp` ranks too).
    pub fn degrees(&self) -> Degrees {
        let fsdp = self.fsdp.max(1);
        let dp = self.dp.max(1);
        let (dp, fsdp) = if dp % fsdp == 0 {
            (dp / fsdp, fsdp)
        } else {
            (dp, 1)
        };
        Degrees {
            dp,
            fsdp,
            tp: self.tp.max(1),
            pp: self.pp.max(1),
            cp: self.cp.max(1),
            ep: self.ep.max(1),
            etp: self.etp,
            order: self.order,
        }
    }

    /// The mesh axes of the groups in [`RunSpec::shard_groups`]: (shard,
    /// replicas).
    pub fn shard_axes(&self) -> (&'static [LogicalAxis], &'static [LogicalAxis]) {
        use LogicalAxis::{Cp, Dp, Fsdp};
        let (shard, _) = self.shard_groups();
        if self.zero >= 3 {
            (&[Cp, Fsdp, Dp], &[])
        } else if shard > 1 {
            (&[Fsdp], &[Cp, Dp])
        } else {
            (&[], &[Cp, Fsdp, Dp])
        }
    }

    /// (shard, replicas) of the data-parallel ranks (dp·cp): ZeRO-3 shards
    /// over all of them; hybrid sharding over `fsdp` of them (when it
    /// divides), each shard replicated across the rest; otherwise nothing is
    /// fully sharded.
    pub fn shard_groups(&self) -> (u64, u64) {
        // the cp ranks hold the same parameters as their dp peers
        let dpc = self.dp.max(1).saturating_mul(self.cp.max(1));
        let f = self.fsdp.max(1);
        if self.zero >= 3 {
            (dpc, 1)
        } else if f > 1 && dpc % f == 0 {
            (f, dpc / f)
        } else {
            (1, dpc)
        }
    }
}
