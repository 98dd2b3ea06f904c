//! A training configuration: the workload (batch, sequence, dtypes,
//! optimizer) and the plan (degrees and choices), as one value every analysis
//! takes.

use serde::Serialize;

use super::pipeline::StageLayers;
use super::{
    Degrees, FlopConvention, Fp8Recipe, Framework, Offload, Optimizer, Overlap, Remat, Schedule,
};
use crate::units::DType;

super::named_choice! {
    /// How context parallelism moves K and V between the cp ranks
    /// (Megatron-Core's `--cp-comm-type`, Transformer Engine's
    /// `cp_comm_type`). Both move the same bytes; they differ in what hides
    /// the transfer.
    pub enum CpComm {
        /// Ring attention (TE `p2p`): each K/V chunk passes to the next rank
        /// while the attention of the chunk in hand runs; one hop is exposed.
        #[default]
        Ring,
        /// All-gather K/V once per layer, then attention on the local
        /// queries (TE `all_gather`; the Llama 3 paper's context parallelism,
        /// §3.3.2): nothing hides it, small with GQA's few K/V heads.
        AllGather,
    }
}

impl CpComm {
    /// Whether this is the default (ring).
    pub fn is_ring(&self) -> bool {
        *self == CpComm::Ring
    }
    /// Parse a flag or scenario value ("ring", "all-gather").
    pub fn parse(s: &str) -> crate::error::Result<CpComm> {
        super::parse_choice("cp_comm", s)
    }
}

/// Everything a training analysis needs besides model and chip.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TrainConfig {
    /// B: global batch in tokens.
    pub batch_tokens: u64,
    /// T: sequence length.
    pub seq_len: u64,
    /// Parameter dtype.
    pub param_dtype: DType,
    /// Gradient dtype.
    pub grad_dtype: DType,
    /// Optimizer-state dtype.
    pub optimizer_dtype: DType,
    /// Activation dtype.
    pub activation_dtype: DType,
    /// Compute dtype for C.
    pub compute_dtype: DType,
    /// FP8 training recipe (scaling granularity) of fp8 GEMMs; unset: fp8
    /// GEMMs priced at the bf16 curve's fraction of the fp8 peak with
    /// delayed-scaling casts (the pricing before recipes existed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp8_recipe: Option<Fp8Recipe>,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Keep an fp32 master copy (when params are not fp32).
    pub master_weights: bool,
    /// Checkpoint policy.
    pub remat: Remat,
    /// The book's "k checkpoints of [B, D] per layer" (ch5 Q2, ch6): when
    /// set, the book accounting saves k·D activation elements per token and
    /// layer whatever `remat` says (`remat` still sets the recompute FLOPs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints_per_layer: Option<u64>,
    /// Model-FLOPs utilisation to quote a step time at.
    pub mfu: Option<f64>,
    /// Tokens to train on (total time, chip-hours, cost).
    pub train_tokens: Option<u64>,
    /// Causal attention.
    pub causal: bool,
    /// How FLOPs are counted (T_math, MFU).
    pub flops: FlopConvention,
    /// Framework conventions (memory buffers, stage split, kernels).
    pub framework: Framework,
    /// Degrees.
    pub degrees: Degrees,
    /// ZeRO stage over dp·cp (0–3).
    pub zero: u8,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Micro-batches per step: pipeline micro-batches, or gradient
    /// accumulation steps when pp = 1.
    pub microbatches: u64,
    /// Virtual stages per device (interleaved).
    pub virtual_stages: u64,
    /// Layers on the first / last pipeline stage as stated (Megatron's
    /// `--decoder-first/last-pipeline-num-layers`); unset: the framework's
    /// split.
    #[serde(skip_serializing_if = "StageLayers::is_even")]
    pub stage_layers: StageLayers,
    /// Megatron sequence parallelism with TP.
    pub sequence_parallel: bool,
    /// How context parallelism moves K/V (ring or all-gather).
    #[serde(skip_serializing_if = "CpComm::is_ring")]
    pub cp_comm: CpComm,
    /// Fraction of link bandwidth collectives achieve (1 = the roofline).
    pub comm_efficiency: f64,
    /// Fraction of HBM usable (headroom for fragmentation, workspaces) under
    /// the book's accounting; a framework uses its profile's fraction.
    pub hbm_usable_fraction: f64,
    /// How communication overlaps compute in the step-time prediction.
    pub overlap: Overlap,
    /// Training state kept in host memory (none: everything in HBM).
    #[serde(skip_serializing_if = "Offload::is_none")]
    pub offload: Offload,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            batch_tokens: 1 << 20,
            seq_len: 4096,
            param_dtype: DType::Bf16,
            grad_dtype: DType::Bf16,
            optimizer_dtype: DType::Fp32,
            activation_dtype: DType::Bf16,
            compute_dtype: DType::Bf16,
            fp8_recipe: None,
            optimizer: Optimizer::Adam,
            master_weights: false,
            remat: Remat::Full,
            checkpoints_per_layer: None,
            mfu: None,
            train_tokens: None,
            causal: true,
            flops: FlopConvention::Model,
            framework: Framework::Book,
            degrees: Degrees::default(),
            zero: 0,
            schedule: Schedule::OneFOneB,
            microbatches: 1,
            virtual_stages: 1,
            stage_layers: StageLayers::EVEN,
            sequence_parallel: false,
            cp_comm: CpComm::Ring,
            comm_efficiency: 1.0,
            hbm_usable_fraction: 1.0,
            overlap: Overlap::default(),
            offload: Offload::NONE,
        }
    }
}

impl TrainConfig {
    /// Sequences in the global batch, B/T (fractional when T does not divide B).
    pub fn sequences(&self) -> f64 {
        self.batch_tokens as f64 / self.seq_len.max(1) as f64
    }
    /// Tokens one device processes per step: B/(dp·fsdp·cp) (the book's
    /// idealization: fractional when the batch does not split evenly).
    pub fn tokens_per_device(&self) -> f64 {
        let d = self.degrees.at_least_one();
        self.batch_tokens as f64 / (d.dp as f64 * d.fsdp as f64 * d.cp as f64)
    }
    /// The per-plan choices of this configuration.
    pub fn choice(&self) -> super::Choice {
        super::Choice {
            zero: self.zero,
            remat: self.remat,
            sp: self.sequence_parallel,
            schedule: self.schedule,
            microbatches: self.microbatches,
            virtual_stages: self.virtual_stages,
            offload: self.offload,
        }
    }
}

/// The choices a planner varies inside one degree tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Choice {
    /// ZeRO stage over dp·cp.
    pub zero: u8,
    /// Checkpoint policy.
    pub remat: Remat,
    /// Megatron sequence parallelism.
    pub sp: bool,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Micro-batches (pipeline) or gradient-accumulation steps (pp = 1).
    pub microbatches: u64,
    /// Virtual stages (interleaved).
    pub virtual_stages: u64,
    /// Training state kept in host memory.
    #[serde(skip_serializing_if = "Offload::is_none")]
    pub offload: Offload,
}

impl Choice {
    /// Write these choices and `deg` into a copy of `base`.
    pub fn config(&self, base: &TrainConfig, deg: Degrees) -> TrainConfig {
        TrainConfig {
            degrees: deg,
            zero: self.zero,
            remat: self.remat,
            sequence_parallel: self.sp,
            schedule: self.schedule,
            microbatches: self.microbatches,
            virtual_stages: self.virtual_stages,
            offload: self.offload,
            ..*base
        }
    }
    /// Virtual stages the schedule actually uses (1 unless interleaved).
    pub fn chunks(&self) -> u64 {
        if self.schedule == Schedule::Interleaved {
            self.virtual_stages.max(1)
        } else {
            1
        }
    }
}
