/*!
Scenario files: one TOML document describing a model, hardware and workload.

```toml
[model]
name = "llama-2-13b"        # a catalog name, or inline hyperparameters below
# n_layers = 40             # any Arch field overrides the catalog entry
# n_kv_heads = 8

[hardware]
chip = "tpu-v5p"            # or "tpu-v5p@book" for the book's numbers
mesh = "16x16x16"           # TPU slice, or `chips = 64` for GPUs

[training]                  # read by `meshplan train`
batch_tokens = "3M"
seq_len = 32768

[inference]                 # read by `meshplan infer`
kv_dtype = "int8"

[parallelism]               # shared by training and inference
fsdp = 1024
tp = 4
```

Keys mirror the CLI flags in snake_case (`--batch-tokens` ↔ `batch_tokens`);
flags override the file. Counts accept integers or strings with a suffix
(`"3M"`, `"128k"` = 128,000, `"128Ki"` = 131,072). Unknown keys and
misspelled choices (`remat = "ful"`) are errors with file, line and field,
so typos do not pass silently.
*/

use serde::{Deserialize, Deserializer, Serialize};

use crate::catalog::Catalog;
use crate::error::{from_toml, Error, Result};
use crate::hardware::{Chip, ChipFile, Profile};
use crate::model::report::ModelQuery;
use crate::model::{Arch, Mla, MlpKind, ModelSpec, Moe, NormKind, SlidingWindow};
use crate::units::{parse_count, DType};

/// A whole count given as an integer or a string like "3M", "128k", "128Ki".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Count(pub u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            I(i64),
            // above i64::MAX: read whole, so 2^64−1 is not rounded to a float
            U(u64),
            F(f64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::I(i) if i >= 0 => Ok(Count(i as u64)),
            Raw::U(u) => Ok(Count(u)),
            Raw::I(i) => Err(serde::de::Error::custom(format!(
                "{i} is negative; expected a count"
            ))),
            Raw::F(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Ok(Count(f as u64)),
            Raw::F(f) => Err(serde::de::Error::custom(format!(
                "{f} is not a whole non-negative count"
            ))),
            Raw::S(s) => parse_count(&s).map(Count).map_err(serde::de::Error::custom),
        }
    }
}

/// `[model]`: a catalog name and/or inline hyperparameters (overrides).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Catalog name.
    pub name: Option<String>,
    /// A model file instead of a catalog name: a Hugging Face config.json
    /// or a catalog-format model TOML, relative to the scenario file
    /// (loaded by [`load_model_file`]; inline hyperparameters override it).
    pub file: Option<String>,
    /// L.
    pub n_layers: Option<Count>,
    /// D.
    pub d_model: Option<Count>,
    /// F.
    pub d_ff: Option<Count>,
    /// N.
    pub n_heads: Option<Count>,
    /// K.
    pub n_kv_heads: Option<Count>,
    /// H.
    pub d_head: Option<Count>,
    /// V.
    pub vocab: Option<Count>,
    /// Tied embeddings.
    pub tied_embeddings: Option<bool>,
    /// "gated" | "plain".
    pub mlp: Option<MlpKind>,
    /// "rms" | "layer".
    pub norm: Option<NormKind>,
    /// Norms per layer.
    pub norms_per_layer: Option<u64>,
    /// Final norm.
    pub final_norm: Option<bool>,
    /// qk-norm.
    pub qk_norm: Option<bool>,
    /// q/k/v bias.
    pub qkv_bias: Option<bool>,
    /// out-projection bias.
    pub attn_out_bias: Option<bool>,
    /// MLP biases.
    pub mlp_bias: Option<bool>,
    /// Learned positions.
    pub learned_pos_emb: Option<Count>,
    /// E (0 removes MoE).
    pub n_experts: Option<u64>,
    /// k.
    pub top_k: Option<u64>,
    /// Expert width.
    pub d_ff_expert: Option<Count>,
    /// Shared experts.
    pub n_shared_experts: Option<u64>,
    /// Dense layers before the first MoE layer.
    pub first_dense_layers: Option<u64>,
    /// MLA table.
    pub mla: Option<Mla>,
    /// Sliding window table.
    pub sliding_window: Option<SlidingWindow>,
    /// Longest supported context.
    pub max_seq_len: Option<Count>,
    /// A bare parameter count used as given ("70e9"; the book's
    /// convention): P and P_active become it, the exact count is shown
    /// beside it (`params_total_exact`). See [`Arch::params_given`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_given: Option<Count>,
}

/// `[hardware]`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareSection {
    /// Catalog chip name (`NAME@book` for the book's numbers).
    pub chip: Option<String>,
    /// "vendor" (default) or "book".
    pub profile: Option<String>,
    /// TPU slice shape ("16x16x16") or GPU layout ("8x8" = nodes × GPUs per node).
    pub mesh: Option<String>,
    /// Number of chips (GPUs), when no mesh is given.
    pub chips: Option<Count>,
    /// An inline chip, same schema as a catalog file.
    pub inline: Option<ChipFile>,
}

/// `[training]` (filled in by `meshplan train`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSection {
    /// B: global batch in tokens.
    pub batch_tokens: Option<Count>,
    /// T: sequence length.
    pub seq_len: Option<Count>,
    /// Parameter dtype.
    pub param_dtype: Option<String>,
    /// Gradient dtype.
    pub grad_dtype: Option<String>,
    /// Optimizer-state dtype.
    pub optimizer_dtype: Option<String>,
    /// Activation dtype.
    pub activation_dtype: Option<String>,
    /// "adam" | "adamw" | "sgd" | "sgd-momentum" | "adafactor".
    pub optimizer: Option<String>,
    /// Keep an fp32 master copy of the weights.
    pub master_weights: Option<bool>,
    /// "none" | "full" | "after-matmuls" | "selective".
    pub remat: Option<String>,
    /// k: activation checkpoints of [B, D] kept per layer (the book's
    /// ch5/ch6 convention; the book accounting's saved activations become
    /// k·B·D·L·bytes_a whatever `remat` says). Default: from `remat`.
    pub checkpoints_per_layer: Option<u64>,
    /// Model-FLOPs utilisation to quote times at.
    pub mfu: Option<f64>,
    /// Tokens to train on (for total time and cost).
    pub train_tokens: Option<Count>,
    /// Causal attention (default true).
    pub causal: Option<bool>,
    /// Count attention FLOPs (default true; `false` = the book's `6·P·T`
    /// convention, as in its exercises; `flops` says the same by name).
    pub include_attention: Option<bool>,
    /// FLOP convention: "model" | "hardware" | "book" | "nanotron" | "megatron".
    pub flops: Option<String>,
    /// Memory/runtime conventions: "book" | "megatron" | "megatron-2022" | "nanotron"
    /// (default: megatron where the chip has an efficiency profile, else book).
    pub framework: Option<String>,
    /// Fraction of link bandwidth collectives achieve, in (0, 1] (default 1).
    pub comm_efficiency: Option<f64>,
    /// Compute dtype of the GEMMs: "bf16" (default), "fp8", "int8", "fp4".
    pub compute_dtype: Option<String>,
    /// TP communication overlap: "none" | "ring" (default: the profile's
    /// fitted fraction) | "pipelined" (Transformer Engine userbuffers, needs SP).
    pub tp_overlap: Option<String>,
    /// Data-parallel communication overlap: "on" (default) | "off".
    pub dp_overlap: Option<String>,
    /// The SP all-gather in the backward: "keep" (default) | "redo".
    pub sp_allgather: Option<String>,
    /// FP8 recipe of fp8 GEMMs (`compute_dtype = "fp8"`): "delayed" |
    /// "current" | "blockwise" (default: none, fp8 GEMMs at the bf16
    /// curve's fraction of the fp8 peak).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_recipe: Option<String>,
    /// Training state kept in host memory: any of "optimizer", "weights",
    /// "activations" (or "all", "none"); `["auto"]` lets `plan train` try
    /// every combination. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<Vec<String>>,
}

/// `[inference]` (filled in by `meshplan infer`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferenceSection {
    /// Weight dtype.
    pub weights_dtype: Option<String>,
    /// KV-cache dtype.
    pub kv_dtype: Option<String>,
    /// Activation/compute dtype.
    pub compute_dtype: Option<String>,
    /// Concurrent sequences.
    pub batch: Option<Count>,
    /// Prompt length.
    pub prompt_len: Option<Count>,
    /// Context to support (KV length).
    pub context: Option<Count>,
    /// Tokens generated per request.
    pub gen_len: Option<Count>,
    /// Prefill MFU in (0, 1] (default 1: the roofline).
    pub mfu: Option<f64>,
    /// Serving engine: ideal | vllm | sglang | trtllm (default: ideal on
    /// `@book` chips and TPUs, vllm on GPUs).
    pub engine: Option<String>,
    /// static | concurrency=N | lockstep=N (fixed lengths) | rate=R (requests/s).
    pub workload: Option<String>,
    /// Speculative decoding: ngram | mtp | draft:MODEL (default: none).
    pub speculative: Option<String>,
    /// γ: tokens drafted per target step (default 4).
    pub spec_gamma: Option<u64>,
    /// α: acceptance rate of each drafted token, in [0, 1] (required with `speculative`).
    pub spec_acceptance: Option<f64>,
    /// Fraction of each prompt already in the prefix cache, in [0, 1) (default 0).
    pub prefix_cache_hit: Option<f64>,
    /// Disaggregated serving: the prefill pool, "tp=4,workers=2" (keys tp,
    /// ep, pp, workers); with `decode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<String>,
    /// Disaggregated serving: the decode pool, "tp=8,ep=8,workers=1,batch=64".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<String>,
    /// Disaggregated serving: the KV moves layer by layer under the prefill
    /// (default false: after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_overlap: Option<bool>,
}

/// `[parallelism]`, shared by training and inference.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelismSection {
    /// Data-parallel degree.
    pub dp: Option<u64>,
    /// FSDP (ZeRO-3) degree.
    pub fsdp: Option<u64>,
    /// Tensor-parallel degree.
    pub tp: Option<u64>,
    /// Pipeline stages.
    pub pp: Option<u64>,
    /// Context-parallel degree.
    pub cp: Option<u64>,
    /// Expert-parallel degree.
    pub ep: Option<u64>,
    /// Expert tensor-parallel degree: the TP degree inside each expert
    /// (Megatron-Core `expert_tensor_parallel_size`; default tp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etp: Option<u64>,
    /// GPU rank order: "tp-cp-ep-dp-pp" (Megatron's default) or "tp-pp-dp"
    /// (Megatron's `--use-tp-pp-dp-mapping`: pipeline stages inside the node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_order: Option<String>,
    /// ZeRO stage 0–3 for the data-parallel axis.
    pub zero: Option<u64>,
    /// "gpipe" | "afab" | "1f1b" | "interleaved" | "dualpipe".
    pub schedule: Option<String>,
    /// Pipeline microbatches.
    pub microbatches: Option<u64>,
    /// Virtual stages per device (interleaved).
    pub virtual_stages: Option<u64>,
    /// Layers on the first pipeline stage (Megatron's
    /// `--decoder-first-pipeline-num-layers`; default: the framework's split).
    #[serde(default)]
    pub first_stage_layers: Option<u64>,
    /// Layers on the last pipeline stage (Megatron's
    /// `--decoder-last-pipeline-num-layers`; default: the framework's split).
    #[serde(default)]
    pub last_stage_layers: Option<u64>,
    /// How context parallelism moves K/V: "ring" (default) or "all-gather"
    /// (Megatron-Core's `--cp-comm-type p2p | all_gather`).
    #[serde(default)]
    pub cp_comm: Option<String>,
    /// Megatron sequence parallelism with TP.
    pub sequence_parallel: Option<bool>,
    /// Serving layout: "1d" | "2d-ws".
    pub sharding: Option<String>,
}

/// A whole scenario file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free text.
    pub description: Option<String>,
    /// Where the scenario comes from (book chapter, paper).
    pub source: Option<String>,
    /// Model.
    #[serde(default)]
    pub model: ModelSection,
    /// Hardware.
    #[serde(default)]
    pub hardware: HardwareSection,
    /// Training workload.
    #[serde(default)]
    pub training: TrainingSection,
    /// Inference workload.
    #[serde(default)]
    pub inference: InferenceSection,
    /// Parallelism.
    #[serde(default)]
    pub parallelism: ParallelismSection,
}

impl Scenario {
    /// Parse scenario TOML; errors carry file, line and field.
    pub fn parse(src: &str, file: &str) -> Result<Scenario> {
        let sc: Scenario = from_toml(src, file)?;
        sc.check_choices(src, file)?;
        Ok(sc)
    }

    /// Every named choice (dtype, optimizer, remat, schedule, engine, …)
    /// read as the commands will read it, so a typo (`remat = "ful"`) is
    /// refused with file, line and field like a wrong type is, not later
    /// without them. Flags given over the file are checked by the commands.
    fn check_choices(&self, src: &str, file: &str) -> Result<()> {
        use crate::parallelism::{
            FlopConvention, Framework, Offload, Optimizer, Overlap, RankOrder, Remat, Schedule,
        };
        type Check = fn(&str) -> Result<()>;
        let dtype: Check = |v| DType::parse(v).map(drop);
        let (t, i, p) = (&self.training, &self.inference, &self.parallelism);
        let auto = |v: &str| v.trim().eq_ignore_ascii_case("auto");
        let offload = t.offload.as_ref().filter(|o| !o.iter().any(|x| auto(x)));
        let rank_order = p.rank_order.as_deref().filter(|o| !auto(o));
        let fields: [(&str, &str, Option<&str>, Check); 21] = [
            ("training", "param_dtype", t.param_dtype.as_deref(), dtype),
            ("training", "grad_dtype", t.grad_dtype.as_deref(), dtype),
            (
                "training",
                "optimizer_dtype",
                t.optimizer_dtype.as_deref(),
                dtype,
            ),
            (
                "training",
                "activation_dtype",
                t.activation_dtype.as_deref(),
                dtype,
            ),
            (
                "training",
                "compute_dtype",
                t.compute_dtype.as_deref(),
                dtype,
            ),
            ("training", "optimizer", t.optimizer.as_deref(), |v| {
                Optimizer::parse(v).map(drop)
            }),
            ("training", "remat", t.remat.as_deref(), |v| {
                Remat::parse(v).map(drop)
            }),
            ("training", "flops", t.flops.as_deref(), |v| {
                FlopConvention::parse(v).map(drop)
            }),
            ("training", "framework", t.framework.as_deref(), |v| {
                Framework::parse(v).map(drop)
            }),
            ("training", "tp_overlap", t.tp_overlap.as_deref(), |v| {
                Overlap::parse(Some(v), None, None).map(drop)
            }),
            ("training", "dp_overlap", t.dp_overlap.as_deref(), |v| {
                Overlap::parse(None, Some(v), None).map(drop)
            }),
            ("training", "sp_allgather", t.sp_allgather.as_deref(), |v| {
                Overlap::parse(None, None, Some(v)).map(drop)
            }),
            ("training", "fp8_recipe", t.fp8_recipe.as_deref(), |v| {
                crate::parallelism::Fp8Recipe::parse(v).map(drop)
            }),
            (
                "inference",
                "weights_dtype",
                i.weights_dtype.as_deref(),
                dtype,
            ),
            ("inference", "kv_dtype", i.kv_dtype.as_deref(), dtype),
            (
                "inference",
                "compute_dtype",
                i.compute_dtype.as_deref(),
                dtype,
            ),
            ("inference", "engine", i.engine.as_deref(), |v| {
                crate::inference::engine::EngineProfile::builtin(v).map(drop)
            }),
            ("inference", "workload", i.workload.as_deref(), |v| {
                crate::inference::serving::Workload::parse(v).map(drop)
            }),
            ("parallelism", "schedule", p.schedule.as_deref(), |v| {
                Schedule::parse(v).map(drop)
            }),
            ("parallelism", "rank_order", rank_order, |v| {
                RankOrder::parse(v).map(drop)
            }),
            ("parallelism", "sharding", p.sharding.as_deref(), |v| {
                crate::inference::Sharding::parse(v).map(drop)
            }),
        ];
        let offload_check = offload.map(|o| {
            Offload::parse_names(o.iter().map(String::as_str))
                .map(drop)
                .map_err(|e| ("training", "offload", e))
        });
        let found = fields
            .into_iter()
            .find_map(|(sec, key, v, check)| Some((sec, key, check(v?).err()?)))
            .map(Err)
            .or(offload_check)
            .unwrap_or(Ok(()));
        found.map_err(|(sec, key, e)| {
            let (line, column) = key_position(src, sec, key);
            Error::Parse {
                file: file.to_string(),
                line,
                column,
                field: Some(format!("{sec}.{key}")),
                message: e.to_string(),
            }
        })
    }

    /// Refuse a scenario that names no model: neither a `[model] name` (a
    /// catalog model, or a model file already loaded under that name) nor
    /// inline hyperparameters. Every front end asks this before resolving,
    /// so a missing model reads the same everywhere instead of as the first
    /// missing hyperparameter; `how` says how that front end gives a model
    /// (`"use --model NAME or a scenario with [model]"`).
    pub fn require_model(&self, how: &str) -> Result<()> {
        if self.model.name.is_none() && !self.model.has_overrides() {
            return Err(Error::Invalid(format!("no model given: {how}")));
        }
        Ok(())
    }
}

impl ModelSection {
    /// Whether any hyperparameter is given inline.
    pub fn has_overrides(&self) -> bool {
        let probe = ModelSection {
            name: None,
            file: None,
            ..self.clone()
        };
        serde_json::to_value(&probe)
            .map(|v| {
                v.as_object()
                    .is_some_and(|o| o.values().any(|x| !x.is_null()))
            })
            .unwrap_or(false)
    }

    /// Resolve to a validated [`ModelSpec`]: catalog entry (if named) with
    /// the inline fields applied on top.
    pub fn resolve(&self, cat: &Catalog) -> Result<ModelSpec> {
        if let Some(f) = &self.file {
            return Err(Error::Invalid(format!(
                "[model] file = \"{f}\" was not loaded (a scenario's model file is read by the caller, see scenario::load_model_file)"
            )));
        }
        let mut spec = match &self.name {
            Some(n) => cat.model_or_bare(n)?,
            None => {
                let need = |v: Option<Count>, f: &str| {
                    v.map(|c| c.0).ok_or_else(|| {
                        Error::Invalid(format!(
                            "[model] needs either `name` (a catalog model) or `{f}` (and the other hyperparameters)"
                        ))
                    })
                };
                let d_model = need(self.d_model, "d_model")?;
                let n_heads = need(self.n_heads, "n_heads")?;
                let arch = Arch::dense(
                    need(self.n_layers, "n_layers")?,
                    d_model,
                    self.d_ff.map(|c| c.0).unwrap_or(d_model.saturating_mul(4)),
                    n_heads,
                    self.n_kv_heads.map(|c| c.0).unwrap_or(n_heads),
                    self.d_head
                        .map(|c| c.0)
                        .unwrap_or(d_model.checked_div(n_heads).unwrap_or(0)),
                    need(self.vocab, "vocab")?,
                );
                ModelSpec::custom("custom", arch)
            }
        };
        let a = &mut spec.arch;
        let set = |dst: &mut u64, v: Option<Count>| {
            if let Some(c) = v {
                *dst = c.0;
            }
        };
        set(&mut a.n_layers, self.n_layers);
        set(&mut a.d_model, self.d_model);
        set(&mut a.d_ff, self.d_ff);
        set(&mut a.n_heads, self.n_heads);
        set(&mut a.n_kv_heads, self.n_kv_heads);
        set(&mut a.d_head, self.d_head);
        set(&mut a.vocab, self.vocab);
        set(&mut a.learned_pos_emb, self.learned_pos_emb);
        if let Some(g) = self.params_given {
            a.params_given = Some(g.0);
        }
        macro_rules! opt {
            ($($f:ident),*) => {$( if let Some(v) = self.$f { a.$f = v; } )*};
        }
        opt!(
            tied_embeddings,
            mlp,
            norm,
            norms_per_layer,
            final_norm,
            qk_norm,
            qkv_bias,
            attn_out_bias,
            mlp_bias
        );
        if let Some(e) = self.n_experts {
            if e == 0 {
                a.moe = None;
            } else {
                let m = a.moe.get_or_insert(Moe {
                    n_experts: e,
                    top_k: 1,
                    d_ff_expert: 0,
                    n_shared_experts: 0,
                    d_ff_shared: 0,
                    first_dense_layers: 0,
                    router_bias: false,
                });
                m.n_experts = e;
            }
        }
        if let Some(m) = a.moe.as_mut() {
            if let Some(k) = self.top_k {
                m.top_k = k;
            }
            if let Some(f) = self.d_ff_expert {
                m.d_ff_expert = f.0;
            }
            if let Some(s) = self.n_shared_experts {
                m.n_shared_experts = s;
            }
            if let Some(f) = self.first_dense_layers {
                m.first_dense_layers = f;
            }
        } else if self.top_k.is_some() || self.d_ff_expert.is_some() {
            return Err(Error::Invalid(
                "[model] top_k / d_ff_expert need n_experts (E) as well".into(),
            ));
        }
        if let Some(m) = &self.mla {
            a.mla = Some(m.clone());
        }
        if let Some(w) = &self.sliding_window {
            a.sliding_window = Some(w.clone());
        }
        if let Some(c) = self.max_seq_len {
            spec.max_seq_len = c.0;
        }
        if self.name.is_some() && self.has_overrides() {
            spec.name = format!("{} (modified)", spec.name);
            spec.published = None;
        }
        spec.arch.validate()?;
        Ok(spec)
    }
}

impl HardwareSection {
    /// Resolve the chip (catalog name, profile, or inline spec).
    pub fn resolve_chip(&self, cat: &Catalog) -> Result<Chip> {
        if let Some(f) = &self.inline {
            return Chip::from_file(f, Profile::Vendor);
        }
        let name = self.chip.as_deref().ok_or_else(|| {
            Error::Invalid("no chip given: use --hw NAME or [hardware] chip = \"NAME\"".into())
        })?;
        let name = match self.profile.as_deref() {
            None | Some("vendor") => name.to_string(),
            Some("book") if !name.ends_with("@book") => format!("{name}@book"),
            Some("book") => name.to_string(),
            Some(p) => {
                return Err(Error::BadValue {
                    what: "hardware.profile".into(),
                    input: p.into(),
                    expected: "\"vendor\" or \"book\"".into(),
                })
            }
        };
        cat.chip(&name).cloned()
    }
}

/// Line and column of `key = …` inside `[section]` (or an inline
/// `section = { key = … }`, or `section.key = …`); anywhere in the text
/// when not found there; (0, 0) when not written at all.
fn key_position(src: &str, section: &str, key: &str) -> (usize, usize) {
    let mut current = String::new();
    for (n, l) in src.lines().enumerate() {
        let t = l.trim_start();
        if let Some(h) = t.strip_prefix('[').and_then(|h| h.split(']').next()) {
            current = h.trim().to_string();
            continue;
        }
        let col = l.len() - t.len() + 1;
        let assigns = |rest: &str| rest.trim_start().starts_with('=');
        let here = current == section && t.strip_prefix(key).is_some_and(assigns);
        let dotted = current.is_empty()
            && t.strip_prefix(section)
                .and_then(|r| r.trim_start().strip_prefix('.'))
                .and_then(|r| r.trim_start().strip_prefix(key))
                .is_some_and(assigns);
        let inline = current.is_empty()
            && t.strip_prefix(section).is_some_and(assigns)
            && t.contains(&format!("{key} ="));
        if here || dotted || inline {
            return (n + 1, col);
        }
    }
    crate::error::toml_key_position(src, key)
}

/// Add a model from a file's text — a Hugging Face `config.json`, a model
/// TOML in catalog format (it has an `[arch]` table), or a scenario whose
/// `[model]` names or describes one — findable afterwards under `path`
/// (an alias) and its own name. Returns the catalog name and, for a
/// scenario, the scenario.
pub fn add_model_file(
    cat: &mut Catalog,
    text: &str,
    path: &str,
) -> Result<(String, Option<Scenario>)> {
    add_model_file_with(cat, text, path, &mut |p| {
        Err(format!("cannot read '{p}' here (no file access)"))
    })
}

/// [`add_model_file`] with a reader for the model file a scenario's
/// `[model] file` names (see [`load_model_file`]).
pub fn add_model_file_with(
    cat: &mut Catalog,
    text: &str,
    path: &str,
    read: &mut dyn FnMut(&str) -> std::result::Result<String, String>,
) -> Result<(String, Option<Scenario>)> {
    let lower = path.to_ascii_lowercase();
    let (mut m, scenario) = if lower.ends_with(".json") {
        (crate::hf::import_file(text, path)?, None)
    } else if text.lines().any(|l| l.trim_start().starts_with("[arch]")) {
        (crate::catalog::parse_model(text, path)?, None)
    } else {
        let mut s = Scenario::parse(text, path)?;
        load_model_file(cat, &mut s, path, read)?;
        s.require_model(
            "a model file needs an [arch] table, a scenario a [model] section with `name`, `file` or inline hyperparameters",
        )
        .map_err(|e| Error::Invalid(format!("{path}: {e}")))?;
        let m = s
            .model
            .resolve(cat)
            .map_err(|e| Error::Invalid(format!("{path}: [model]: {e}")))?;
        (m, Some(s))
    };
    m.aliases.push(path.to_string());
    let name = m.name.clone();
    cat.add_model(m);
    Ok((name, scenario))
}

/// Load the model file a scenario's `[model] file` names (a Hugging Face
/// config.json or a catalog-format model TOML, relative to the directory of
/// `scenario_path`) into `cat` and point `[model] name` at it. `read` reads
/// a file (the CLI's bounded reader). No-op without `file`.
pub fn load_model_file(
    cat: &mut Catalog,
    sc: &mut Scenario,
    scenario_path: &str,
    read: &mut dyn FnMut(&str) -> std::result::Result<String, String>,
) -> Result<()> {
    let Some(f) = sc.model.file.take() else {
        return Ok(());
    };
    if let Some(n) = &sc.model.name {
        return Err(Error::Invalid(format!(
            "{scenario_path}: [model] has both name = \"{n}\" and file = \"{f}\": give one"
        )));
    }
    let full = match std::path::Path::new(scenario_path).parent() {
        Some(dir) if !std::path::Path::new(&f).is_absolute() => dir.join(&f),
        _ => std::path::PathBuf::from(&f),
    };
    let full = full.to_string_lossy().into_owned();
    let text =
        read(&full).map_err(|e| Error::Invalid(format!("{scenario_path}: [model] file: {e}")))?;
    let lower = full.to_ascii_lowercase();
    if !lower.ends_with(".json") && !text.lines().any(|l| l.trim_start().starts_with("[arch]")) {
        return Err(Error::Invalid(format!(
            "{scenario_path}: [model] file = \"{f}\" is neither a config.json nor a model TOML with an [arch] table"
        )));
    }
    let (name, _) = add_model_file(cat, &text, &full)?;
    sc.model.name = Some(name);
    Ok(())
}

/// The query `model show` answers: the flags first, then the scenario the
/// model came from (`[training] seq_len` or `[inference] context`,
/// `[inference] kv_dtype`), then the defaults. `what` names the file.
pub fn model_query(
    scenario: Option<&Scenario>,
    seq_len: Option<u64>,
    kv_dtype: Option<DType>,
    causal: bool,
    what: &str,
) -> Result<ModelQuery> {
    let scen_seq = scenario
        .and_then(|s| s.training.seq_len.or(s.inference.context))
        .map(|c| c.0);
    if scen_seq == Some(0) {
        return Err(Error::Invalid(format!(
            "{what}: seq_len must be at least 1 token"
        )));
    }
    let scen_kv = scenario
        .and_then(|s| s.inference.kv_dtype.as_deref())
        .map(|d| {
            DType::parse(d)
                .map_err(|e| Error::Invalid(format!("{what}: [inference] kv_dtype: {e}")))
        })
        .transpose()?;
    Ok(ModelQuery {
        seq_len: seq_len
            .or(scen_seq)
            .unwrap_or(ModelQuery::default().seq_len),
        kv_dtype: kv_dtype.or(scen_kv).unwrap_or(DType::Bf16),
        causal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_accept_suffixes() {
        let s = Scenario::parse(
            "[training]\nbatch_tokens = \"3M\"\nseq_len = \"32Ki\"\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(s.training.batch_tokens, Some(Count(3_000_000)));
        assert_eq!(s.training.seq_len, Some(Count(32768)));
    }

    #[test]
    fn unknown_key_has_line_and_field() {
        let e = Scenario::parse(
            "[model]\nname = \"x\"\n\n[training]\nbatch_tokenz = 3\n",
            "s.toml",
        )
        .unwrap_err();
        match e {
            Error::Parse {
                file, line, field, ..
            } => {
                assert_eq!(file, "s.toml");
                assert_eq!(line, 5);
                assert!(field.unwrap().contains("training"));
            }
            e => panic!("{e}"),
        }
    }

    /// A misspelled choice is found where it is written: the same key in
    /// two sections (`compute_dtype`) is told apart by its section, and an
    /// inline table's line is its own.
    #[test]
    fn choice_typos_have_line_and_field() {
        let src = "[training]\ncompute_dtype = \"bf16\"\n\n[inference]\ncompute_dtype = \"bf61\"\n";
        match Scenario::parse(src, "s.toml").unwrap_err() {
            Error::Parse {
                line,
                field,
                message,
                ..
            } => {
                assert_eq!(
                    (line, field.as_deref()),
                    (5, Some("inference.compute_dtype"))
                );
                assert!(message.contains("did you mean 'bf16'"), "{message}");
            }
            e => panic!("{e}"),
        }
        let src = "description = \"x\"\nparallelism = { tp = 2, schedule = \"gpipe2\" }\n";
        let e = Scenario::parse(src, "s.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("s.toml:2:1: field `parallelism.schedule`"),
            "{e}"
        );
        // "auto" is plan train's, not a typo
        let ok = "[training]\noffload = [\"auto\"]\n[parallelism]\nrank_order = \"auto\"\n";
        Scenario::parse(ok, "s.toml").unwrap();
    }

    #[test]
    fn bad_count_is_error() {
        let e = Scenario::parse("[training]\nbatch_tokens = \"three\"\n", "s.toml").unwrap_err();
        assert!(e.to_string().contains("s.toml:2"), "{e}");
        let e = Scenario::parse("[training]\nbatch_tokens = -5\n", "s.toml").unwrap_err();
        assert!(e.to_string().contains("negative"), "{e}");
    }

    #[test]
    fn inline_model_resolves() {
        let s = Scenario::parse(
            "[model]\nn_layers = 2\nd_model = 64\nn_heads = 4\nvocab = 100\nmlp = \"plain\"\n",
            "s.toml",
        )
        .unwrap();
        let m = s.model.resolve(&Catalog::default()).unwrap();
        assert_eq!(m.arch.d_ff, 256);
        assert_eq!(m.arch.d_head, 16);
    }

    #[test]
    fn impossible_model_is_error() {
        let s = Scenario::parse(
            "[model]\nn_layers = 2\nd_model = 64\nn_heads = 6\nn_kv_heads = 4\nvocab = 100\n",
            "s.toml",
        )
        .unwrap();
        let e = s.model.resolve(&Catalog::default()).unwrap_err();
        assert!(e.to_string().contains("not divisible"), "{e}");
    }

    #[test]
    fn require_model_wants_a_name_or_inline_hyperparameters() {
        let how = "use --model NAME";
        let none = Scenario::parse("[training]\nseq_len = 8\n", "s.toml").unwrap();
        let e = none.require_model(how).unwrap_err().to_string();
        assert_eq!(e, "no model given: use --model NAME");
        let named = Scenario::parse("[model]\nname = \"llama-2-7b\"\n", "s.toml").unwrap();
        named.require_model(how).unwrap();
        let inline = Scenario::parse("[model]\nn_layers = 2\n", "s.toml").unwrap();
        inline.require_model(how).unwrap();
    }

    #[test]
    fn model_query_takes_flags_then_the_scenario_then_defaults() {
        let sc = Scenario::parse(
            "[inference]\ncontext = \"8Ki\"\nkv_dtype = \"int8\"\n",
            "s.toml",
        )
        .unwrap();
        let q = model_query(Some(&sc), None, None, true, "s.toml").unwrap();
        assert_eq!((q.seq_len, q.kv_dtype), (8192, DType::Int8));
        let q = model_query(Some(&sc), Some(100), Some(DType::Fp8), false, "s.toml").unwrap();
        assert_eq!((q.seq_len, q.kv_dtype, q.causal), (100, DType::Fp8, false));
        let q = model_query(None, None, None, true, "x").unwrap();
        assert_eq!((q.seq_len, q.kv_dtype), (4096, DType::Bf16));
        let zero = Scenario::parse("[training]\nseq_len = 0\n", "z.toml").unwrap();
        assert!(model_query(Some(&zero), None, None, true, "z.toml").is_err());
    }
}
