//! Engine profiles: how a serving engine runs the book's rooflines — the
//! fraction of peak HBM bandwidth and FLOPs its kernels reach, the fixed
//! per-step and per-layer costs, its tensor-parallel all-reduce at small
//! messages, its paged KV cache and memory reserve. Each profile is a file
//! `data/engines/NAME.toml` whose `[sources]` table names where every number
//! comes from; [`EngineProfile::validate`] refuses a profile with a missing
//! source or a value outside its physical range.
//!
//! `ideal` is the book's roofline exactly (every efficiency 1, every
//! overhead 0, communication overlapped): the default for `@book` chips and
//! TPUs, so chapter 7/8 numbers are unchanged.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hardware::{Chip, ChipKind, Profile};
use crate::units::DType;

const FILES: &[(&str, &str)] = &[
    ("ideal", include_str!("../../../../data/engines/ideal.toml")),
    ("vllm", include_str!("../../../../data/engines/vllm.toml")),
    (
        "sglang",
        include_str!("../../../../data/engines/sglang.toml"),
    ),
    (
        "trtllm",
        include_str!("../../../../data/engines/trtllm.toml"),
    ),
    (
        "trtllm-2023",
        include_str!("../../../../data/engines/trtllm-2023.toml"),
    ),
    (
        "jetstream",
        include_str!("../../../../data/engines/jetstream.toml"),
    ),
];

/// The chips an engine profile models.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// NVIDIA GPUs (CUDA kernels).
    #[default]
    Gpu,
    /// Google TPUs (XLA).
    Tpu,
    /// Any chip (the book's roofline).
    Any,
}

/// One serving engine's choices and efficiencies (SI units).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineProfile {
    /// "ideal" | "vllm" | "sglang" | "trtllm".
    pub name: String,
    /// One line.
    pub description: String,
    /// Fraction of peak HBM bandwidth weight streaming reaches.
    pub hbm_efficiency: f64,
    /// Fraction of peak HBM bandwidth the (paged) KV-cache reads reach.
    pub kv_hbm_efficiency: f64,
    /// Fraction of peak FLOPs a large GEMM reaches.
    pub gemm_efficiency: f64,
    /// M½: GEMM efficiency is `gemm_efficiency·M/(M + M½)` at M tokens per step.
    pub gemm_half_tokens: f64,
    /// Fraction of peak FLOPs prefill (flash) attention reaches.
    pub attention_efficiency: f64,
    /// Kernels per layer outside the GEMMs, attention and all-reduce
    /// (norms, RoPE, KV write, activation), each costing `kernel_latency_s`.
    pub small_kernels_per_layer: f64,
    /// Time of one short kernel including its launch (CUDA graphs), s.
    pub kernel_latency_s: f64,
    /// Fixed host cost per forward step (scheduling, inputs, sampling), s.
    pub step_overhead_s: f64,
    /// α of the TP all-reduce at small messages, s.
    pub allreduce_latency_s: f64,
    /// Bandwidth of the small-message (one-shot) all-reduce, B/s (0: none).
    pub allreduce_small_bandwidth: f64,
    /// Largest message the small-message all-reduce takes, bytes.
    pub allreduce_small_max_bytes: f64,
    /// Fraction of the link bandwidth the NCCL ring reaches (bus bandwidth).
    pub nccl_efficiency: f64,
    /// Whether communication overlaps the matmuls (the book's max) or adds.
    pub comms_overlap: bool,
    /// Paged-KV block size, tokens (a sequence holds whole blocks).
    pub kv_block_tokens: u64,
    /// Fraction of HBM the engine may use for weights + KV.
    pub memory_utilization: f64,
    /// Whether `memory_utilization` is of the memory left after the weights.
    pub memory_of_free: bool,
    /// Token budget of one step, tokens: the prefill chunk and, with
    /// chunked prefill, the prompt plus decode tokens a step may carry
    /// (vLLM `max_num_batched_tokens`, SGLang `chunked_prefill_size`,
    /// TensorRT-LLM `max_num_tokens`; 0: the whole batch in one step).
    pub max_prefill_tokens: u64,
    /// ALU ops per weight to dequantise a weight-only quantised matrix.
    pub dequant_ops_per_weight: f64,
    /// Whether fp8/int8/fp4 weights run on the chip's matching tensor cores.
    pub low_precision_compute: bool,
    /// Whether MoE decode loads only the experts the batch routes to.
    pub moe_expected_experts: bool,
    /// The chips this profile models (default GPU).
    #[serde(default)]
    pub platform: Platform,
    /// Fraction of the low-precision (8-bit and narrower) peak a large
    /// GEMM reaches, when it differs from the 16-bit `gemm_efficiency`.
    #[serde(default)]
    pub lowp_gemm_efficiency: Option<f64>,
    /// M½ of the low-precision GEMMs.
    #[serde(default)]
    pub lowp_gemm_half_tokens: Option<f64>,
    /// The ridge `C/W_hbm` (FLOP per byte: dense 16-bit peak over HBM
    /// bandwidth) of the chip the 16-bit GEMM curve was fitted on. Below
    /// M½ a decode GEMM is a weight read, so on a chip of another ridge
    /// the 16-bit M½ scales by that chip's ridge over this one
    /// ([`Self::gemm_curve_on`]; 0: no scaling).
    #[serde(default)]
    pub gemm_fit_ridge: f64,
    /// p: sharpness of the 16-bit curve's knee, `η·M/(M^p + M½^p)^(1/p)`
    /// (1: the additive `η·M/(M + M½)`, compute time plus weight-read
    /// time; larger p tend to `max` of the two, as a kernel's are).
    #[serde(default = "one")]
    pub gemm_knee: f64,
    /// Whether the decode attention kernel reads a KV head once per query
    /// head (one thread block per query head, no grouped-query kernel):
    /// the KV reads of a GQA/MQA model multiply by G = N/K.
    #[serde(default)]
    pub kv_reads_per_query_head: bool,
    /// Extra latency per ring step of the NCCL all-reduce: α(Y) =
    /// `allreduce_latency_s + 2·(Y − 1)·allreduce_step_latency_s`.
    #[serde(default)]
    pub allreduce_step_latency_s: f64,
    /// Bytes read and written per logit per sequence per step by the
    /// sampler (softmax, top-k/top-p, draw), on one chip at η_hbm.
    #[serde(default)]
    pub sampling_bytes_per_logit: f64,
    /// Most requests the scheduler runs at once (vLLM `max_num_seqs`,
    /// TensorRT-LLM `max_batch_size`; 0: only the KV cache bounds it).
    /// Requests beyond it wait in the engine's queue.
    #[serde(default)]
    pub max_num_seqs: u64,
    /// Whether a waiting prompt's prefill runs in a step of its own, the
    /// running decodes paused (SGLang's default), rather than sharing a
    /// step with them under the token budget (vLLM V1, TensorRT-LLM's
    /// in-flight batching).
    #[serde(default)]
    pub prefill_priority: bool,
    /// Most prompts one prefill forward takes (0: as many as wait, within
    /// the token budget). JetStream prefills one request per step.
    #[serde(default)]
    pub prefill_batch_max: u64,
    /// Whether the scheduler launches the next step before it processes
    /// the last one's results (SGLang's overlap scheduler): a new request
    /// is received after the next decode step is queued and waits for it.
    #[serde(default)]
    pub overlap_schedule: bool,
    /// Time a request spends outside the GPU steps before its first token
    /// reaches the client (HTTP, chat template and tokenisation, IPC to the
    /// engine, streaming the token back), s.
    #[serde(default)]
    pub frontend_s: f64,
    /// Whether the prefill forward runs without CUDA graphs, each kernel
    /// launched from Python (SGLang's `extend`): a forward then takes at
    /// least its host launch time ([`crate::inference::serving::eager_prefill`]).
    #[serde(default)]
    pub prefill_eager: bool,
    /// Host time of one eager kernel launch (the Python module, PyTorch's
    /// dispatcher, the launch), s.
    #[serde(default)]
    pub eager_launch_s: f64,
    /// The fused-MoE kernel at prefill token counts, fitted per chip on
    /// the engine's measured MoE tables
    /// ([`crate::inference::serving::moe_prefill`]; none for a chip: the
    /// dense GEMM curve prices the routed experts).
    #[serde(default)]
    pub moe_prefill: Vec<MoePrefillFit>,
    /// The 16-bit GEMM curve measured on other chips than the one
    /// `gemm_efficiency`/`gemm_half_tokens` were fitted on (a chip listed
    /// nowhere takes the profile's curve with M½ scaled by its ridge:
    /// [`Self::gemm_curve_on`]).
    #[serde(default)]
    pub gemm_chip: Vec<GemmChipFit>,
    /// Where each number comes from (`all` covers every field).
    pub sources: BTreeMap<String, String>,
}

/// The fused-MoE kernel of an engine at prefill token counts on some chips:
/// `η_moe` of the low-precision peak for the routed FLOPs and `s_act` bytes
/// per routed activation element at peak HBM bandwidth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoePrefillFit {
    /// Catalog names of the chips the fit was measured (or validated) on.
    pub chips: Vec<String>,
    /// η_moe: fraction of the chip's fp8 peak the routed FLOPs reach.
    pub efficiency: f64,
    /// s_act: bytes per routed activation element (gather, partial
    /// outputs, their sum) at peak HBM bandwidth.
    pub act_bytes: f64,
}

fn one() -> f64 {
    1.0
}

/// A GEMM efficiency curve: `η·M/(M^p + M½^p)^(1/p)` of the chip's peak
/// at M tokens per step (p = 1: `η·M/(M + M½)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmCurve {
    /// η: the large-M plateau.
    pub eta: f64,
    /// M½: where the weight read and the compute time meet.
    pub half: f64,
    /// p: the knee's sharpness.
    pub knee: f64,
}

impl GemmCurve {
    /// Efficiency at `m` tokens (at least 1).
    pub fn at(&self, m: f64) -> f64 {
        let m = m.max(1.0);
        if self.knee == 1.0 {
            return self.eta * m / (m + self.half);
        }
        // (M^p + M½^p)^(1/p) = M·(1 + (M½/M)^p)^(1/p): no overflow at large M
        let r = (self.half / m).powf(self.knee);
        self.eta / (1.0 + r).powf(1.0 / self.knee)
    }
}

/// A 16-bit GEMM curve `η·M/(M^p + M½^p)^(1/p)` measured on some chips.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmChipFit {
    /// Catalog names of the chips the curve was measured on.
    pub chips: Vec<String>,
    /// η: fraction of the chip's dense 16-bit peak a large GEMM reaches.
    pub efficiency: f64,
    /// M½, tokens.
    pub half_tokens: f64,
    /// p: the knee's sharpness (1: `η·M/(M + M½)`).
    #[serde(default = "one")]
    pub knee: f64,
}

impl GemmChipFit {
    fn validate(&self) -> std::result::Result<(), String> {
        if self.chips.is_empty() {
            return Err("gemm_chip: a fit needs at least one chip".into());
        }
        if !(self.efficiency > 0.0 && self.efficiency <= 1.0) {
            return Err(format!(
                "gemm_chip efficiency = {} must be in (0, 1]",
                self.efficiency
            ));
        }
        if !(self.half_tokens.is_finite() && self.half_tokens >= 0.0) {
            return Err(format!(
                "gemm_chip half_tokens = {} must be finite and ≥ 0",
                self.half_tokens
            ));
        }
        if !(self.knee.is_finite() && self.knee >= 1.0) {
            return Err(format!("gemm_chip knee = {} must be ≥ 1", self.knee));
        }
        Ok(())
    }
}

impl MoePrefillFit {
    fn validate(&self) -> std::result::Result<(), String> {
        if self.chips.is_empty() {
            return Err("moe_prefill: a fit needs at least one chip".into());
        }
        if !(self.efficiency > 0.0 && self.efficiency <= 1.0) {
            return Err(format!(
                "moe_prefill efficiency = {} must be in (0, 1]",
                self.efficiency
            ));
        }
        if !(self.act_bytes.is_finite() && self.act_bytes >= 0.0) {
            return Err(format!(
                "moe_prefill act_bytes = {} must be finite and ≥ 0",
                self.act_bytes
            ));
        }
        Ok(())
    }
}

/// Fields that need a `[sources]` entry.
const SOURCED: &[&str] = &[
    "hbm_efficiency",
    "kv_hbm_efficiency",
    "gemm_efficiency",
    "gemm_half_tokens",
    "attention_efficiency",
    "small_kernels_per_layer",
    "kernel_latency_s",
    "step_overhead_s",
    "allreduce_latency_s",
    "allreduce_small_bandwidth",
    "allreduce_small_max_bytes",
    "nccl_efficiency",
    "comms_overlap",
    "kv_block_tokens",
    "memory_utilization",
    "max_prefill_tokens",
    "dequant_ops_per_weight",
    "low_precision_compute",
    "moe_expected_experts",
];

/// Optional fields that need a `[sources]` entry when set.
fn optional_sourced(p: &EngineProfile) -> Vec<&'static str> {
    let mut v = Vec::new();
    if p.lowp_gemm_efficiency.is_some() {
        v.push("lowp_gemm_efficiency");
    }
    if p.lowp_gemm_half_tokens.is_some() {
        v.push("lowp_gemm_half_tokens");
    }
    if p.gemm_fit_ridge > 0.0 {
        v.push("gemm_fit_ridge");
    }
    if p.gemm_knee != 1.0 {
        v.push("gemm_knee");
    }
    if p.kv_reads_per_query_head {
        v.push("kv_reads_per_query_head");
    }
    if p.allreduce_step_latency_s > 0.0 {
        v.push("allreduce_step_latency_s");
    }
    if p.sampling_bytes_per_logit > 0.0 {
        v.push("sampling_bytes_per_logit");
    }
    if p.max_num_seqs > 0 {
        v.push("max_num_seqs");
    }
    if p.prefill_priority {
        v.push("prefill_priority");
    }
    if p.prefill_batch_max > 0 {
        v.push("prefill_batch_max");
    }
    if p.overlap_schedule {
        v.push("overlap_schedule");
    }
    if p.frontend_s > 0.0 {
        v.push("frontend_s");
    }
    if p.prefill_eager {
        v.push("prefill_eager");
        v.push("eager_launch_s");
    }
    if !p.moe_prefill.is_empty() {
        v.push("moe_prefill");
    }
    if !p.gemm_chip.is_empty() {
        v.push("gemm_chip");
    }
    v
}

impl EngineProfile {
    /// Parse and validate one profile file.
    pub fn from_toml(text: &str, origin: &str) -> Result<EngineProfile> {
        let p: EngineProfile = toml::from_str(text)
            .map_err(|e| Error::Invalid(format!("{origin}: {}", e.message())))?;
        p.validate()
            .map_err(|e| Error::Invalid(format!("{origin}: {e}")))?;
        Ok(p)
    }

    /// Every fraction in (0, 1], every time and count ≥ 0 and finite, and a
    /// source for every number.
    pub fn validate(&self) -> std::result::Result<(), String> {
        for (k, v) in [
            ("hbm_efficiency", self.hbm_efficiency),
            ("kv_hbm_efficiency", self.kv_hbm_efficiency),
            ("gemm_efficiency", self.gemm_efficiency),
            ("attention_efficiency", self.attention_efficiency),
            ("nccl_efficiency", self.nccl_efficiency),
            ("memory_utilization", self.memory_utilization),
            (
                "lowp_gemm_efficiency",
                self.lowp_gemm_efficiency.unwrap_or(1.0),
            ),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(format!("{k} = {v} must be in (0, 1]"));
            }
        }
        for (k, v) in [
            ("gemm_half_tokens", self.gemm_half_tokens),
            ("small_kernels_per_layer", self.small_kernels_per_layer),
            ("kernel_latency_s", self.kernel_latency_s),
            ("step_overhead_s", self.step_overhead_s),
            ("allreduce_latency_s", self.allreduce_latency_s),
            ("allreduce_small_bandwidth", self.allreduce_small_bandwidth),
            ("allreduce_small_max_bytes", self.allreduce_small_max_bytes),
            ("dequant_ops_per_weight", self.dequant_ops_per_weight),
            (
                "lowp_gemm_half_tokens",
                self.lowp_gemm_half_tokens.unwrap_or(0.0),
            ),
            ("allreduce_step_latency_s", self.allreduce_step_latency_s),
            ("sampling_bytes_per_logit", self.sampling_bytes_per_logit),
            ("frontend_s", self.frontend_s),
            ("eager_launch_s", self.eager_launch_s),
            ("gemm_fit_ridge", self.gemm_fit_ridge),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{k} = {v} must be finite and ≥ 0"));
            }
        }
        for f in &self.moe_prefill {
            f.validate()?;
        }
        for f in &self.gemm_chip {
            f.validate()?;
        }
        if !(self.gemm_knee.is_finite() && self.gemm_knee >= 1.0) {
            return Err(format!("gemm_knee = {} must be ≥ 1", self.gemm_knee));
        }
        if self.kv_block_tokens == 0 {
            return Err("kv_block_tokens must be at least 1".into());
        }
        if !self.sources.contains_key("all") {
            let opt = optional_sourced(self);
            if let Some(k) = SOURCED
                .iter()
                .chain(opt.iter())
                .find(|k| !self.sources.contains_key(**k))
            {
                return Err(format!("no [sources] entry for {k}"));
            }
        }
        Ok(())
    }

    /// The built-in profile `name` ("ideal", "vllm", "sglang", "trtllm",
    /// "trtllm-2023", "jetstream"; "tensorrt-llm", "trt-llm" accepted).
    pub fn builtin(name: &str) -> Result<EngineProfile> {
        let key = normalise(name);
        match FILES.iter().find(|(n, _)| *n == key) {
            Some((n, text)) => EngineProfile::from_toml(text, &format!("data/engines/{n}.toml")),
            None => Err(Error::BadValue {
                what: "engine".into(),
                input: name.into(),
                expected: format!(
                    "one of {}",
                    FILES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                ),
            }),
        }
    }

    /// The names of the built-in profiles.
    pub fn names() -> Vec<&'static str> {
        FILES.iter().map(|(n, _)| *n).collect()
    }

    /// The default engine for a chip: the ideal roofline on `@book` chips
    /// and TPUs (the book's numbers), vLLM on vendor-figure GPUs.
    pub fn default_for(chip: &Chip) -> EngineProfile {
        let name = if chip.profile == Profile::Book || chip.kind == ChipKind::Tpu {
            "ideal"
        } else {
            "vllm"
        };
        EngineProfile::builtin(name).expect("built-in engine profiles are valid")
    }

    /// Requests the scheduler runs at once when the KV cache holds
    /// `kv_max` sequences: `min(max_num_seqs, kv_max)`, at least 1.
    pub fn slots(&self, kv_max: u64) -> u64 {
        match self.max_num_seqs {
            0 => kv_max,
            n => n.min(kv_max),
        }
        .max(1)
    }

    /// Whether prefill chunks share a step with the running decodes under
    /// the token budget (chunked prefill, decodes scheduled first): the
    /// step then carries at most `max_prefill_tokens` tokens.
    pub fn mixes_prefill(&self) -> bool {
        self.max_prefill_tokens > 0 && !self.prefill_priority
    }

    /// The prefill MoE fit for the chip named `chip` (a catalog name
    /// without `@book`), if the profile has one.
    pub fn moe_prefill_for(&self, chip: &str) -> Option<&MoePrefillFit> {
        self.moe_prefill
            .iter()
            .find(|f| f.chips.iter().any(|c| c == chip))
    }

    /// Whether this is the book's ideal roofline.
    pub fn is_ideal(&self) -> bool {
        self.name == "ideal"
    }

    /// The profile's own 16-bit GEMM curve (on the chip it was fitted on).
    pub fn gemm_curve(&self) -> GemmCurve {
        GemmCurve {
            eta: self.gemm_efficiency,
            half: self.gemm_half_tokens,
            knee: self.gemm_knee,
        }
    }

    /// 16-bit GEMM efficiency at `m` tokens per step on the fit chip.
    pub fn gemm_efficiency_at(&self, m: f64) -> f64 {
        self.gemm_curve().at(m)
    }

    /// GEMM efficiency at `m` tokens in `compute` dtype on the chip the
    /// curves were fitted on: the low-precision curve (when the profile has
    /// one) below 16 bits, else [`Self::gemm_efficiency_at`].
    pub fn gemm_efficiency_for(&self, compute: DType, m: f64) -> f64 {
        self.gemm_efficiency_on(compute, m, self.gemm_curve())
    }

    /// GEMM efficiency at `m` tokens in `compute` dtype with `curve16` as
    /// the 16-bit curve (the chip's: [`Self::gemm_curve_on`]); below 16
    /// bits the low-precision curve `η·M/(M + M½)` when the profile has one.
    pub fn gemm_efficiency_on(&self, compute: DType, m: f64, curve16: GemmCurve) -> f64 {
        match (compute.bits() < 16, self.lowp_gemm_efficiency) {
            (true, Some(eta)) => GemmCurve {
                eta,
                half: self.lowp_gemm_half_tokens.unwrap_or(self.gemm_half_tokens),
                knee: 1.0,
            }
            .at(m),
            _ => curve16.at(m),
        }
    }

    /// The 16-bit GEMM curve on `chip`: the chip's own measured fit when
    /// the profile lists it (`gemm_chip`), else the profile's curve with
    /// M½ scaled by the chip's ridge `C/W_hbm` over the fit chip's
    /// (`gemm_fit_ridge`).
    ///
    /// Why M½ follows the ridge: below M½ the curve is a weight read of
    /// `2NK` bytes at `C·η/M½` bytes/s (H100 sglang: 989.5e12·0.755/292 =
    /// 2.56 TB/s at p = 2.5), so on a chip whose kernels read at the same
    /// fraction of its bandwidth M½ = M½_fit·ridge/ridge_fit. The measured
    /// bf16 tables of the other chips agree (aiconfigurator systems data,
    /// commit 095f58a; `SYSTEM=… scripts/fit_engine_gemm.py`): H200 M½
    /// 201–223 vs 204–213 scaled, B200 290–304 vs 279–291. The
    /// low-precision curve is not scaled: the fp8 tables' M½ falls only
    /// 12–19 % from H100 to H200 (246→208, 240→211, 357→288), not the
    /// ridge's 30 %: fp8 kernels at small M are not purely weight-read
    /// bound.
    pub fn gemm_curve_on(&self, chip: &Chip) -> GemmCurve {
        let name = chip.name.split('@').next().unwrap_or(&chip.name);
        if let Some(f) = self
            .gemm_chip
            .iter()
            .find(|f| f.chips.iter().any(|c| c == name))
        {
            return GemmCurve {
                eta: f.efficiency,
                half: f.half_tokens,
                knee: f.knee,
            };
        }
        let ridge = chip.flops(DType::Bf16).get() / chip.hbm_bandwidth.get();
        let half = if self.gemm_fit_ridge > 0.0 && ridge.is_finite() && ridge > 0.0 {
            self.gemm_half_tokens * ridge / self.gemm_fit_ridge
        } else {
            self.gemm_half_tokens
        };
        GemmCurve {
            half,
            ..self.gemm_curve()
        }
    }

    /// The compute dtype low-precision weights run at: the weight dtype when
    /// the engine runs low-precision GEMMs and the chip has a peak for it
    /// (fp8/int8 W8A8, fp4 W4A4), else None (bf16 activations, the weights
    /// dequantised on the fly). int4 weights are always weight-only (AWQ,
    /// GPTQ, Marlin: W4A16) even on chips with int4 tensor cores (A100):
    /// no serving engine quantises the activations to int4.
    pub fn native_compute(&self, chip: &Chip, weights: DType) -> Option<DType> {
        (self.low_precision_compute
            && weights.bits() < 16
            && weights != DType::Int4
            && chip.peak.get(weights).is_some())
        .then_some(weights)
    }

    /// Check the engine can model `chip`: GPU engines need a GPU, TPU
    /// engines a TPU.
    pub fn check_chip(&self, chip: &Chip) -> Result<()> {
        let tpu = chip.kind == ChipKind::Tpu;
        match (self.platform, tpu) {
            (Platform::Gpu, true) => Err(Error::Invalid(format!(
                "engine {} is calibrated on NVIDIA GPU kernels; use --engine ideal or jetstream on {}",
                self.name, chip.display_name
            ))),
            (Platform::Tpu, false) => Err(Error::Invalid(format!(
                "engine {} models TPUs; use --engine ideal, vllm, sglang or trtllm on {}",
                self.name, chip.display_name
            ))),
            _ => Ok(()),
        }
    }
}

fn normalise(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase().replace('_', "-");
    match n.as_str() {
        "tensorrt-llm" | "trt-llm" | "tensorrt" | "trt" => "trtllm".into(),
        "roofline" | "book" => "ideal".into(),
        "trtllm-0.5" | "trtllm-v0.5" | "trtllm-0.6" => "trtllm-2023".into(),
        "jetstream-pytorch" | "maxtext" => "jetstream".into(),
        _ => n,
    }
}

impl FromStr for EngineProfile {
    type Err = Error;
    fn from_str(s: &str) -> Result<EngineProfile> {
        EngineProfile::builtin(s)
    }
}

impl fmt::Display for EngineProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_profile_is_valid_and_sourced() {
        for n in EngineProfile::names() {
            let p = EngineProfile::builtin(n).unwrap();
            assert_eq!(p.name, n);
            assert!(p.validate().is_ok());
        }
    }

    #[test]
    fn ideal_is_the_roofline() {
        let p = EngineProfile::builtin("book").unwrap();
        assert!(p.is_ideal());
        assert_eq!(p.gemm_efficiency_at(1.0), 1.0);
        assert_eq!(p.step_overhead_s, 0.0);
        assert!(p.comms_overlap);
    }

    #[test]
    fn gemm_efficiency_at_m_half_is_eta_over_the_knee_root_of_two() {
        // η·M½/(2·M½^p)^(1/p) = η/2^(1/p); p = 1: η/2
        let p = EngineProfile::builtin("vllm").unwrap();
        let half = p.gemm_efficiency_at(p.gemm_half_tokens);
        let want = p.gemm_efficiency / 2f64.powf(1.0 / p.gemm_knee);
        assert!((half - want).abs() < 1e-12, "{half} vs {want}");
        let additive = GemmCurve {
            eta: 0.8,
            half: 300.0,
            knee: 1.0,
        };
        assert!((additive.at(300.0) - 0.4).abs() < 1e-15);
        // p = 2 at M = 3·M½/4: 0.8·225/(225² + 300²)^(1/2) = 0.8·225/375 = 0.48
        let sharp = GemmCurve {
            knee: 2.0,
            ..additive
        };
        assert!((sharp.at(225.0) - 0.48).abs() < 1e-12);
    }

    #[test]
    fn engines_model_their_platform() {
        let c = crate::Catalog::builtin();
        let (h100, v5e) = (c.chip("h100").unwrap(), c.chip("tpu-v5e").unwrap());
        let js = EngineProfile::builtin("jetstream").unwrap();
        assert!(js.check_chip(v5e).is_ok());
        assert!(js.check_chip(h100).is_err());
        let v = EngineProfile::builtin("vllm").unwrap();
        assert!(v.check_chip(h100).is_ok() && v.check_chip(v5e).is_err());
        let i = EngineProfile::builtin("ideal").unwrap();
        assert!(i.check_chip(h100).is_ok() && i.check_chip(v5e).is_ok());
        // TPUs keep the book's roofline by default
        assert!(EngineProfile::default_for(v5e).is_ideal());
        assert_eq!(
            "trtllm-v0.5".parse::<EngineProfile>().unwrap().name,
            "trtllm-2023"
        );
    }

    #[test]
    fn lowp_curve_and_unsourced_options() {
        let p = EngineProfile::builtin("trtllm-2023").unwrap();
        // 0.52·358/(358 + 358) = 0.26 at M = M½ for 8-bit compute
        assert!((p.gemm_efficiency_for(DType::Fp8, 358.0) - 0.26).abs() < 1e-12);
        let text = include_str!("../../../../data/engines/trtllm-2023.toml");
        let unsourced = text.replace("kv_reads_per_query_head = \"", "kv_reads = \"");
        let e = EngineProfile::from_toml(&unsourced, "x").unwrap_err();
        assert!(e.to_string().contains("kv_reads_per_query_head"), "{e}");
    }

    #[test]
    fn bad_profiles_are_refused() {
        let text = include_str!("../../../../data/engines/vllm.toml");
        let bad = text.replace("hbm_efficiency = 0.84", "hbm_efficiency = 1.5");
        assert!(EngineProfile::from_toml(&bad, "x").is_err());
        let unsourced = text.replace("kernel_latency_s = \"", "kernel_latency = \"");
        let e = EngineProfile::from_toml(&unsourced, "x").unwrap_err();
        assert!(e.to_string().contains("kernel_latency_s"), "{e}");
        // a knee below 1 or a per-chip curve without chips: clear errors
        let blunt = text.replace("gemm_knee = 2.5", "gemm_knee = 0.5");
        let e = EngineProfile::from_toml(&blunt, "x").unwrap_err();
        assert!(e.to_string().contains("gemm_knee = 0.5 must be ≥ 1"), "{e}");
        let nameless = text.replacen("chips = [\"h200\"]", "chips = []", 1);
        let e = EngineProfile::from_toml(&nameless, "x").unwrap_err();
        assert!(e.to_string().contains("gemm_chip"), "{e}");
        let nan = text.replacen("half_tokens = 223.0", "half_tokens = nan", 1);
        assert!(EngineProfile::from_toml(&nan, "x").is_err());
        assert!("nope".parse::<EngineProfile>().is_err());
        assert_eq!(
            "TensorRT-LLM".parse::<EngineProfile>().unwrap().name,
            "trtllm"
        );
    }
}
