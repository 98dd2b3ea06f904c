//! The named choices of a training plan besides its degrees: optimizer,
//! activation checkpointing, pipeline schedule, framework conventions and the
//! FLOP-counting convention. Each parses from the names users type (aliases
//! included) and prints as the name it parses from.

use crate::error::Result;
pub use crate::names::parse_choice;

/// Declares a named choice: a field-less enum with a `#[default]` variant
/// that parses from the names users type (kebab-case, any case, aliases as
/// `#[strum(serialize = …)]`), prints and serializes as that name, and lists
/// its names and variants. The derives and naming conventions every choice
/// shares, written once.
macro_rules! named_choice {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($body:tt)* }) => {
        #[derive(
            Clone,
            Copy,
            Debug,
            Default,
            PartialEq,
            Eq,
            Hash,
            ::serde::Serialize,
            ::serde::Deserialize,
            ::strum::Display,
            ::strum::EnumString,
            ::strum::EnumIter,
            ::strum::IntoStaticStr,
            ::strum::VariantNames,
        )]
        #[serde(rename_all = "kebab-case")]
        #[strum(serialize_all = "kebab-case", ascii_case_insensitive)]
        $(#[$meta])*
        $vis enum $name { $($body)* }
    };
}
pub(crate) use named_choice;

named_choice! {
    /// Optimizer (state per parameter).
    pub enum Optimizer {
        /// Adam: two moments.
        #[default]
        Adam,
        /// AdamW: two moments.
        #[strum(serialize = "adamw")]
        #[serde(rename = "adamw")]
        AdamW,
        /// Plain SGD: no state.
        Sgd,
        /// SGD with momentum: one moment.
        #[strum(to_string = "sgd-momentum", serialize = "momentum")]
        SgdMomentum,
        /// Adafactor without momentum: factored second moment, (rows + cols) per matrix.
        Adafactor,
    }
}

impl Optimizer {
    /// Parse "adam", "adamw", "sgd", "sgd-momentum" ("momentum"), "adafactor".
    pub fn parse(s: &str) -> Result<Self> {
        parse_choice("optimizer", s)
    }
    /// Moments kept per parameter in the optimizer dtype (Adafactor: the
    /// factored second moment, `1/D + 1/F` numbers per D×F matrix element).
    pub fn moments(self, d: u64, f: u64) -> f64 {
        match self {
            Optimizer::Adam | Optimizer::AdamW => 2.0,
            Optimizer::SgdMomentum => 1.0,
            Optimizer::Sgd => 0.0,
            Optimizer::Adafactor => 1.0 / d.max(1) as f64 + 1.0 / f.max(1) as f64,
        }
    }
}

named_choice! {
    /// Activation checkpointing policy.
    pub enum Remat {
        /// Keep everything: the book's ≈20 `[B,D]` tensors per layer.
        #[strum(to_string = "none", serialize = "off")]
        None,
        /// Block remat: save only each layer's input (1 `[B,D]` per layer).
        #[default]
        #[strum(to_string = "full", serialize = "block")]
        Full,
        /// The book's "after the big matmuls": gated MLP saves 2 `[B,F]` + 1 `[B,D]`.
        #[strum(
            to_string = "after-matmuls",
            serialize = "matmuls",
            serialize = "big-matmuls"
        )]
        AfterMatmuls,
        /// Megatron selective recompute: `34·D` elements per token·layer
        /// (Korthikanti et al. 2022, attention scores recomputed).
        Selective,
    }
}

impl Remat {
    /// Parse "none"/"off", "full"/"block", "after-matmuls"/"matmuls", "selective".
    pub fn parse(s: &str) -> Result<Self> {
        parse_choice("remat", s)
    }
    /// Every policy, in search order.
    pub const ALL: [Remat; 4] = [
        Remat::None,
        Remat::Full,
        Remat::AfterMatmuls,
        Remat::Selective,
    ];
    /// Index in [`Remat::ALL`].
    pub const fn index(self) -> usize {
        match self {
            Remat::None => 0,
            Remat::Full => 1,
            Remat::AfterMatmuls => 2,
            Remat::Selective => 3,
        }
    }
}

named_choice! {
    /// Pipeline schedule.
    pub enum Schedule {
        /// GPipe / all-forward-all-backward.
        #[strum(to_string = "gpipe", serialize = "afab")]
        #[serde(rename = "gpipe", alias = "afab")]
        Afab,
        /// One-forward-one-backward (PipeDream-flush).
        #[default]
        #[strum(to_string = "1f1b")]
        #[serde(rename = "1f1b")]
        OneFOneB,
        /// Interleaved 1F1B with `virtual_stages` chunks per device.
        #[strum(to_string = "interleaved", serialize = "interleaved-1f1b")]
        #[serde(rename = "interleaved")]
        Interleaved,
        /// DualPipe (DeepSeek-V3 technical report §3.2.1,
        /// deepseek-ai/DualPipe): micro-batches fed from both ends of the
        /// pipeline, each device holding two stages (one per direction), a
        /// forward chunk overlapped with a backward chunk so the MoE
        /// all-to-all and the pipeline sends hide under compute, and the
        /// backward split into input- and weight-gradient halves
        /// (zero-bubble). See [`super::pipeline::dualpipe_bubble`].
        #[strum(to_string = "dualpipe", serialize = "dual-pipe")]
        #[serde(rename = "dualpipe", alias = "dual-pipe")]
        DualPipe,
    }
}

impl Schedule {
    /// Parse "gpipe"/"afab", "1f1b", "interleaved", "dualpipe".
    pub fn parse(s: &str) -> Result<Self> {
        parse_choice("schedule", s)
    }
}

named_choice! {
    /// Training framework conventions: which buffers exist, how pipeline stages
    /// are split, which attention kernel runs. `book` is the book's own
    /// accounting (no framework buffers), used to reproduce its exercises.
    pub enum Framework {
        /// The book's accounting (ch4/ch5): parameters, gradients and optimizer
        /// state in the configured dtypes, the book's activation counts per remat
        /// policy, layers spread evenly over the stages, no logits or runtime
        /// reserve.
        #[default]
        Book,
        /// Megatron-LM / Megatron-Core: fp32 `main_grad` buffer, fp32 master
        /// weights, even `ceil(L/pp)` stages with the embedding on the first and
        /// the output layer on the last, FlashAttention, reductions overlapped
        /// with backward (`--overlap-grad-reduce`).
        Megatron,
        /// Megatron-LM as of 2022 (Korthikanti et al., Narayanan et al.): as
        /// `megatron` but with the unfused attention core (no FlashAttention:
        /// `QKᵀ` and `PV` as batched GEMMs, the `[b, a, s, s]` scores materialized)
        /// and the pipeline scatter/gather optimization.
        #[strum(to_string = "megatron-2022", serialize = "megatron2022")]
        #[serde(rename = "megatron-2022")]
        Megatron2022,
        /// nanotron (Ultra-Scale Playbook): fp32 gradient accumulation buffer
        /// plus bf16 gradients, fp32 master + Adam, pipeline stages balanced by
        /// compute cost, fp32 DP reduction on the last micro-batch.
        Nanotron,
        /// MaxText (JAX/XLA on TPU): fp32 weights (`weight_dtype: float32`),
        /// gradients in the weights' dtype and fp32 Adam moments, no separate
        /// master copy; one XLA program per step (no per-kernel host
        /// overhead), collectives asynchronous under the compute; even stages.
        Maxtext,
        /// Megatron-LM as of 2021 (Narayanan et al., "Efficient Large-Scale
        /// Language Model Training on GPU Clusters Using Megatron-LM", SC21):
        /// the buffers of `megatron-2022` (bf16/fp16 weights, fp32 `main_grad`,
        /// fp32 master + Adam, no distributed optimizer: ZeRO-0), the unfused
        /// attention core (no FlashAttention) and the pipeline scatter/gather
        /// optimization, but **no sequence parallelism** and **full**
        /// activation recomputation (the paper recomputes every layer; selective
        /// recompute and SP came with Korthikanti et al. 2022). Stages are even:
        /// Megatron-LM then required `L` divisible by pp (`num_layers` assert in
        /// `megatron/arguments.py`); the data-parallel all-reduce runs after the
        /// backward (no `--overlap-grad-reduce` yet; meshplan prices the
        /// overlap it is given: `dp_overlap = "off"` states it); interleaved 1F1B with
        /// `--num-layers-per-virtual-pipeline-stage`; micro-batches = global
        /// batch / (micro-batch size · dp).
        #[strum(to_string = "megatron-2021", serialize = "megatron2021")]
        #[serde(rename = "megatron-2021")]
        Megatron2021,
        /// torchtitan with FSDP2 (`fully_shard`, PyTorch ≥ 2.4; torchtitan
        /// `docs/fsdp.md`, `torchtitan/config/job_config.py`): every data rank
        /// shards the parameters, gradients and Adam state (ZeRO-3 over
        /// `dp_shard = -1`), held in fp32 (sharded fp32 parameters double as
        /// the master copy: 4 + 4 + 8 bytes per parameter, sharded);
        /// `mixed_precision_param = "bfloat16"` all-gathers each transformer
        /// block in bf16 before its forward and again before its backward, with
        /// the next block's all-gather prefetched under the current block's
        /// compute (two bf16 blocks alive), and reduce-scatters the block's
        /// gradients in fp32 (`mixed_precision_reduce = "float32"`: the bf16
        /// gradient and its fp32 copy alive for one block) under the previous
        /// block's backward. Attention runs through PyTorch SDPA
        /// (FlashAttention / cuDNN kernels). Defaults: layer-selective
        /// activation checkpointing (`activation_checkpoint.mode =
        /// "selective"`, `selective_ac_option = "2"`: every second block fully
        /// recomputed), which no [`Remat`] policy states, so meshplan keeps the
        /// remat it is given (full unless told; `op` selective AC saves the
        /// matmul outputs: `after-matmuls` is the nearest policy); ZeRO-3 over
        /// the data ranks; sequence parallelism in its TP plan; 1F1B with
        /// even stages (`pipeline_parallel_layers_per_stage` unset: layers
        /// spread evenly), one gradient-accumulation step (global batch =
        /// local batch · data ranks).
        #[strum(to_string = "torchtitan", serialize = "fsdp2")]
        #[serde(rename = "torchtitan", alias = "fsdp2")]
        Torchtitan,
        /// DeepSpeed (ZeRO, Rajbhandari et al. 2020; Megatron-DeepSpeed for
        /// TP/PP; `deepspeed/runtime/zero/config.py`): fp16/bf16 weights and
        /// gradients (2 + 2 bytes per parameter) with fp32 master + Adam moments
        /// (12 bytes: the ZeRO paper's `K = 12`), partitioned by the ZeRO stage
        /// (`zero_optimization.stage`, default 0) over the data ranks;
        /// gradients reduced in the model's 16-bit dtype
        /// (`communication_data_type` unset) through a `reduce_bucket_size` =
        /// 5·10⁸-element bucket, overlapped with the backward
        /// (`overlap_comm`); ZeRO-3 gathers each layer before use and
        /// prefetches the next (`stage3_prefetch_bucket_size`). Attention is
        /// the model's (Megatron-DeepSpeed's fused kernels, FlashAttention
        /// where enabled). Defaults: ZeRO-0, no activation checkpointing, no
        /// sequence parallelism, pipeline stages split by parameters
        /// (`partition_method = "parameters"`: the embedding counts as a
        /// layer), 1F1B (DeepSpeed's `TrainSchedule`), micro-batches = global
        /// batch / (micro-batch size · dp).
        #[strum(to_string = "deepspeed", serialize = "megatron-deepspeed")]
        #[serde(rename = "deepspeed", alias = "megatron-deepspeed")]
        Deepspeed,
    }
}

impl Framework {
    /// Parse "book", "megatron", "megatron-2022", "megatron-2021",
    /// "nanotron", "maxtext", "torchtitan" ("fsdp2"), "deepspeed"
    /// ("megatron-deepspeed").
    pub fn parse(s: &str) -> Result<Self> {
        parse_choice("framework", s)
    }
    /// A real framework (allocates framework buffers and a runtime reserve).
    pub fn is_framework(self) -> bool {
        self != Framework::Book
    }
}

named_choice! {
    /// How model FLOPs are counted (for T_math and MFU); one convention per
    /// report, named in it. See `docs/training.md`.
    pub enum FlopConvention {
        /// `6·P_matmul·T + 3·attention`: every matmul a token multiplies through
        /// (output projection included, embedding lookup excluded) and the
        /// attention scores/values (causal: half) — the PaLM-style model FLOPs,
        /// as `model show` prints them.
        #[default]
        Model,
        /// Model FLOPs plus the recomputed forward of the remat policy: what the
        /// chips execute (MFU under this convention is the HFU).
        Hardware,
        /// The book's `6·P·T` (P = all active parameters, embeddings included),
        /// attention ignored, as in its chapter-5 exercises.
        Book,
        /// nanotron's `get_flops` (Ultra-Scale Playbook MFU): full, unmasked
        /// attention and the LM head counted.
        Nanotron,
        /// Megatron (Narayanan et al. 2021): `72·L·D²·(1 + T/(6D) + V/(12·D·L))`
        /// per token, exact only for a plain `4D` MLP with `N·H = D`.
        Megatron,
    }
}

impl FlopConvention {
    /// Parse "model", "hardware", "book", "nanotron", "megatron".
    pub fn parse(s: &str) -> Result<Self> {
        parse_choice("FLOP convention", s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases() {
        assert_eq!(Remat::parse("Block").unwrap(), Remat::Full);
        assert_eq!(Remat::parse("after_matmuls").unwrap(), Remat::AfterMatmuls);
        assert_eq!(Schedule::parse("AFAB").unwrap(), Schedule::Afab);
        assert_eq!(Schedule::OneFOneB.to_string(), "1f1b");
        assert_eq!(Schedule::parse("DualPipe").unwrap(), Schedule::DualPipe);
        assert_eq!(Schedule::parse("dual-pipe").unwrap(), Schedule::DualPipe);
        assert_eq!(
            Optimizer::parse("momentum").unwrap(),
            Optimizer::SgdMomentum
        );
        assert_eq!(
            Framework::parse("megatron_2022").unwrap(),
            Framework::Megatron2022
        );
        for r in Remat::ALL {
            assert_eq!(Remat::parse(&r.to_string()).unwrap(), r);
            assert_eq!(Remat::ALL[r.index()], r);
        }
    }

    #[test]
    fn the_added_frameworks_parse_from_their_names_and_aliases() {
        for (name, fw) in [
            ("torchtitan", Framework::Torchtitan),
            ("FSDP2", Framework::Torchtitan),
            ("deepspeed", Framework::Deepspeed),
            ("megatron-deepspeed", Framework::Deepspeed),
            ("megatron-2021", Framework::Megatron2021),
            ("megatron_2021", Framework::Megatron2021),
        ] {
            assert_eq!(Framework::parse(name).unwrap(), fw, "{name}");
            // printed and serialized as the name it parses from
            assert_eq!(Framework::parse(&fw.to_string()).unwrap(), fw);
            let j = serde_json::to_value(fw).unwrap();
            assert_eq!(j.as_str().unwrap(), fw.to_string());
            assert!(fw.is_framework());
        }
        let e = Framework::parse("fsdp").unwrap_err().to_string();
        assert!(e.contains("torchtitan") && e.contains("deepspeed"), "{e}");
    }

    #[test]
    fn unknown_names_list_choices_and_suggest() {
        let e = Remat::parse("selectiv").unwrap_err().to_string();
        assert!(e.contains("selective"), "{e}");
        assert!(e.contains("did you mean"), "{e}");
    }

    #[test]
    fn json_names_match_display() {
        for s in [
            Schedule::Afab,
            Schedule::OneFOneB,
            Schedule::Interleaved,
            Schedule::DualPipe,
        ] {
            let j = serde_json::to_value(s).unwrap();
            assert_eq!(j.as_str().unwrap(), s.to_string());
        }
    }
}
