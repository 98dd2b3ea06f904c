//! The evaluator: a command name + scenario → the JSON object that command
//! reports (`meshplan model show --json`, `hw show --json`, …) and its
//! derivation steps. A claim's `quantity` is a dotted path into that object,
//! so every key a command reports is checkable. Adding a command is one match
//! arm in [`evaluate`].

use serde::Serialize;
use serde_json::{Map, Value};

use crate::catalog::Catalog;
use crate::error::Error;
use crate::hardware::report::hw_report;
use crate::model::report::{model_report, ModelQuery};
use crate::scenario::{Count, Scenario};
use crate::trace::{Recorder, Step};
use crate::units::DType;

/// The commands whose reports claims can refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Command {
    /// `meshplan model show`.
    Model,
    /// `meshplan hw show`.
    Hw,
    /// `meshplan train`.
    Train,
    /// `meshplan infer`.
    Infer,
    /// `meshplan collective`.
    Collective,
    /// `meshplan roofline`.
    Roofline,
    /// `meshplan shard`.
    Shard,
    /// `meshplan mfu`.
    Mfu,
}

impl Command {
    /// All commands.
    pub const ALL: [Command; 8] = [
        Command::Model,
        Command::Hw,
        Command::Train,
        Command::Infer,
        Command::Collective,
        Command::Roofline,
        Command::Shard,
        Command::Mfu,
    ];
    /// Name as written in a claims file.
    pub fn name(self) -> &'static str {
        match self {
            Command::Model => "model",
            Command::Hw => "hw",
            Command::Train => "train",
            Command::Infer => "infer",
            Command::Collective => "collective",
            Command::Roofline => "roofline",
            Command::Shard => "shard",
            Command::Mfu => "mfu",
        }
    }
    /// Parse a command name.
    pub fn parse(s: &str) -> Option<Command> {
        Command::ALL.into_iter().find(|c| c.name() == s.trim())
    }
}

/// Why a command could not produce a report.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalError {
    /// The command exists in the claims format but not in this build: the
    /// claim is CANNOT-CHECK, not an error.
    Unavailable(String),
    /// The scenario or the claim's `args` are wrong for this command
    /// (a malformed claims file).
    Input(Error),
}

impl From<Error> for EvalError {
    fn from(e: Error) -> Self {
        EvalError::Input(e)
    }
}

/// Options of a claim for its command (`args = { seq_len = "128k" }`), as JSON.
pub type Args = Map<String, Value>;

/// Run `command` on `scenario` and return its report as JSON (SI base
/// units, the keys of docs/quantities.md) and, when `with_trace`, the
/// derivation steps (the first step lists the resolved inputs).
pub fn evaluate(
    command: Command,
    scenario: &Scenario,
    catalog: &Catalog,
    args: &Args,
    with_trace: bool,
) -> Result<(Value, Vec<Step>), EvalError> {
    let input = Input {
        s: scenario,
        cat: catalog,
        args,
        with_trace,
    };
    match command {
        Command::Model => eval_model(&input),
        Command::Hw => eval_hw(&input),
        Command::Train => eval_train(&input),
        Command::Infer => eval_infer(&input),
        Command::Collective => eval_block(&input, false, crate::sharding::collective::evaluate),
        Command::Roofline => eval_block(&input, false, crate::roofline::evaluate),
        Command::Shard => eval_block(&input, false, crate::sharding::evaluate),
        Command::Mfu => eval_block(&input, true, crate::mfu::evaluate),
    }
}

/// What every command's evaluation reads: the claim's scenario, the
/// catalog, the claim's `args`, and whether to keep the derivation.
#[derive(Clone, Copy)]
struct Input<'a> {
    s: &'a Scenario,
    cat: &'a Catalog,
    args: &'a Args,
    with_trace: bool,
}

/// A building-block command (`collective`, `roofline`, `shard`, `mfu`): the
/// claim's `args` are the command's flags (`op`, `array`, `mesh`, `dims`, …);
/// `hw` defaults to the scenario's chip and, for `mfu`, `model` to its model.
fn eval_block<Q, R, F>(
    input: &Input,
    wants_model: bool,
    f: F,
) -> Result<(Value, Vec<Step>), EvalError>
where
    Q: serde::de::DeserializeOwned,
    R: Serialize,
    F: FnOnce(&Q, &Catalog, &mut Recorder) -> crate::Result<R>,
{
    let (s, cat) = (input.s, input.cat);
    let mut a = input.args.clone();
    // an inline chip joins a copy of the catalog under its own name
    let mut local = None;
    if let Some(f) = &s.hardware.inline {
        let mut c = cat.clone();
        let src = toml::to_string(f)
            .map_err(|e| EvalError::Input(Error::Invalid(format!("inline chip: {e}"))))?;
        c.add_chip_toml(&src, "inline chip")?;
        local = Some(c);
        a.entry("hw")
            .or_insert_with(|| Value::String(f.name.clone()));
    }
    let cat = local.as_ref().unwrap_or(cat);
    if !a.contains_key("hw") {
        if let Some(chip) = &s.hardware.chip {
            a.insert("hw".into(), Value::String(chip.clone()));
        }
    }
    if wants_model && !a.contains_key("model") {
        if let Some(m) = &s.model.name {
            a.insert("model".into(), Value::String(m.clone()));
        }
    }
    let q: Q = serde_json::from_value(Value::Object(a))
        .map_err(|e| EvalError::Input(Error::Invalid(format!("args: {e}"))))?;
    let mut r = Recorder::default();
    let rep = f(&q, cat, &mut r)?;
    // the block commands record their own inputs
    let steps = if input.with_trace {
        r.into_steps()
    } else {
        Vec::new()
    };
    Ok((to_value(&rep)?, steps))
}

/// Keys `args` accepts for `train`: every `[training]` and `[parallelism]`
/// key of a scenario (docs/scenario.md), plus `mesh` and `chips`.
pub fn train_arg_keys() -> Vec<String> {
    let mut v = section_keys(&crate::scenario::TrainingSection::default());
    v.extend(section_keys(&crate::scenario::ParallelismSection::default()));
    v.extend(["mesh".to_string(), "chips".to_string()]);
    v
}

/// Keys `args` accepts for `infer`: every `[inference]` key plus `tp`, `ep`,
/// `sharding`, `mesh` and `chips`.
pub fn infer_arg_keys() -> Vec<String> {
    let mut v = section_keys(&crate::scenario::InferenceSection::default());
    v.extend(
        ["tp", "ep", "sharding", "mesh", "chips"]
            .iter()
            .map(|s| s.to_string()),
    );
    v
}

fn section_keys<T: Serialize>(t: &T) -> Vec<String> {
    match serde_json::to_value(t) {
        Ok(Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Write `args` into the scenario sections (the claim's overrides), through
/// serde so that values are checked exactly as in a scenario file.
fn apply_args(s: &Scenario, args: &Args, cmd: Command) -> Result<Scenario, EvalError> {
    if args.is_empty() {
        return Ok(s.clone());
    }
    let allowed = match cmd {
        Command::Train => train_arg_keys(),
        _ => infer_arg_keys(),
    };
    let allowed_ref: Vec<&str> = allowed.iter().map(String::as_str).collect();
    check_args(args, &allowed_ref, cmd.name())?;
    let mut v = serde_json::to_value(s)
        .map_err(|e| EvalError::Input(Error::Invalid(format!("scenario: {e}"))))?;
    for (k, x) in args {
        let section = match (cmd, k.as_str()) {
            (_, "mesh" | "chips") => "hardware",
            (Command::Train, k)
                if section_keys(&crate::scenario::TrainingSection::default())
                    .iter()
                    .any(|t| t == k) =>
            {
                "training"
            }
            (Command::Train, _) => "parallelism",
            (_, "tp" | "ep" | "sharding") => "parallelism",
            _ => "inference",
        };
        if let Some(o) = v.get_mut(section).and_then(Value::as_object_mut) {
            o.insert(k.clone(), x.clone());
        }
        if k == "chips" {
            // `chips` replaces the scenario's mesh (as `--chips` does).
            if let Some(o) = v.get_mut("hardware").and_then(Value::as_object_mut) {
                o.insert("mesh".into(), Value::Null);
            }
        }
    }
    serde_json::from_value(v).map_err(|e| EvalError::Input(Error::Invalid(format!("args: {e}"))))
}

fn need_model_and_chip(s: &Scenario, cmd: Command) -> Result<(), EvalError> {
    s.require_model(&format!(
        "`{}` needs a [model] (a catalog `name` or inline hyperparameters)",
        cmd.name()
    ))?;
    if s.hardware.chip.is_none() && s.hardware.inline.is_none() {
        return Err(Error::Invalid(format!(
            "`{}` needs a [hardware] chip (and a `mesh` or `chips`)",
            cmd.name()
        ))
        .into());
    }
    Ok(())
}

fn eval_train(input: &Input) -> Result<(Value, Vec<Step>), EvalError> {
    let s = apply_args(input.s, input.args, Command::Train)?;
    need_model_and_chip(&s, Command::Train)?;
    let setup = crate::training::scenario::resolve(&s, input.cat)?;
    let (spec, chip, topo, cfg) = (&setup.spec, &setup.chip, &setup.topo, &setup.cfg);
    let report = |r: &mut Recorder| Ok(crate::training::analyze(spec, chip, topo, cfg, r));
    traced(input.with_trace, report, |_| {
        let d = cfg.degrees;
        let a = &spec.arch;
        let title = format!("Train {} on {} {}", spec.name, chip.name, topo.describe());
        let mut inputs = inputs_step("inputs.train", &title, a)
            .bind("B", cfg.batch_tokens as f64, "tokens")
            .bind("T", cfg.seq_len as f64, "tokens")
            .bind("N", topo.chips() as f64, "chips")
            .bind("C", chip.flops(cfg.compute_dtype).get(), "FLOP/s")
            .bind("HBM", chip.hbm_capacity.get(), "B");
        inputs.source = Some(format!(
            "dp={} fsdp={} tp={} pp={} cp={} ep={}, zero {}, remat {}, optimizer {} (state {}, master {}), MFU {}",
            d.dp,
            d.fsdp,
            d.tp,
            d.pp,
            d.cp,
            d.ep,
            cfg.zero,
            cfg.remat,
            cfg.optimizer,
            cfg.optimizer_dtype.name(),
            cfg.master_weights,
            cfg.mfu.map_or("-".to_string(), |m| m.to_string())
        ));
        inputs
    })
}

fn eval_infer(input: &Input) -> Result<(Value, Vec<Step>), EvalError> {
    let s = apply_args(input.s, input.args, Command::Infer)?;
    need_model_and_chip(&s, Command::Infer)?;
    let setup = crate::inference::scenario::resolve(&s, input.cat)?;
    let (m, chip, q) = (&setup.model, &setup.chip, &setup.query);
    let report = |r: &mut Recorder| Ok(crate::inference::evaluate(m, chip, q, r)?);
    traced(input.with_trace, report, |_| {
        let a = &m.arch;
        let title = format!("Serve {} on {}", m.name, chip.name);
        let mut inputs = inputs_step("inputs.infer", &title, a)
            .bind("K", a.n_kv_heads as f64, "")
            .bind("H", a.d_head as f64, "")
            .bind("B", q.batch as f64, "sequences")
            .bind("S", q.context as f64, "tokens")
            .bind("N", q.mesh.iter().product::<u64>() as f64, "chips")
            .bind("C", chip.flops(q.compute_dtype).get(), "FLOP/s")
            .bind("W_hbm", chip.hbm_bandwidth.get(), "B/s")
            .bind("HBM", chip.hbm_capacity.get(), "B");
        inputs.source = Some(format!(
            "weights {}, KV {}, compute {}, tp {}, ep {}, {} sharding",
            q.weights_dtype.name(),
            q.kv_dtype.name(),
            q.compute_dtype.name(),
            q.tp.map_or("auto".to_string(), |t| t.to_string()),
            q.ep.map_or("auto".to_string(), |e| e.to_string()),
            q.sharding
        ));
        inputs
    })
}

/// The first step of a derivation: its inputs, opened by the model's L, D
/// and F (each command binds its own symbols after them).
fn inputs_step(id: &str, title: &str, a: &crate::model::Arch) -> Step {
    Step::new(id, title, "inputs")
        .bind("L", a.n_layers as f64, "")
        .bind("D", a.d_model as f64, "")
        .bind("F", a.d_ff as f64, "")
}

/// A report as JSON and, when `with_trace`, its derivation opened by the
/// step `inputs` builds from the report. The report is always recorded: one
/// report's derivation costs microseconds, and one path serves both cases.
fn traced<R: Serialize>(
    with_trace: bool,
    report: impl FnOnce(&mut Recorder) -> Result<R, EvalError>,
    inputs: impl FnOnce(&R) -> Step,
) -> Result<(Value, Vec<Step>), EvalError> {
    let mut r = Recorder::default();
    let rep = report(&mut r)?;
    let steps = if with_trace {
        let mut steps = vec![inputs(&rep)];
        steps.extend(r.into_steps());
        steps
    } else {
        Vec::new()
    };
    Ok((to_value(&rep)?, steps))
}

fn to_value<T: Serialize>(r: &T) -> Result<Value, EvalError> {
    serde_json::to_value(r)
        .map_err(|e| EvalError::Input(Error::Invalid(format!("cannot serialise report: {e}"))))
}

fn check_args(args: &Args, allowed: &[&str], cmd: &str) -> Result<(), EvalError> {
    for k in args.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(EvalError::Input(Error::Invalid(format!(
                "unknown args key `{k}` for command `{cmd}`; expected {}",
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            ))));
        }
    }
    Ok(())
}

fn arg_count(args: &Args, k: &str) -> Result<Option<u64>, EvalError> {
    match args.get(k) {
        None => Ok(None),
        Some(v) => serde_json::from_value::<Count>(v.clone())
            .map(|c| Some(c.0))
            .map_err(|e| EvalError::Input(Error::Invalid(format!("args.{k}: {e}")))),
    }
}

fn eval_model(input: &Input) -> Result<(Value, Vec<Step>), EvalError> {
    let (s, args) = (input.s, input.args);
    check_args(args, &["seq_len", "kv_dtype", "causal"], "model")?;
    s.require_model("the scenario has no [model] (a catalog `name` or inline hyperparameters)")?;
    let spec = s.model.resolve(input.cat)?;
    let mut q = ModelQuery::default();
    if let Some(t) = s.training.seq_len.or(s.inference.context) {
        q.seq_len = t.0;
    }
    if let Some(d) = &s.inference.kv_dtype {
        q.kv_dtype = DType::parse(d)?;
    }
    if let Some(t) = arg_count(args, "seq_len")? {
        q.seq_len = t;
    }
    if let Some(v) = args.get("kv_dtype") {
        let d = v.as_str().ok_or_else(|| {
            Error::Invalid("args.kv_dtype: expected a string like \"int8\"".into())
        })?;
        q.kv_dtype = DType::parse(d)?;
    }
    if let Some(v) = args.get("causal") {
        q.causal = v
            .as_bool()
            .ok_or_else(|| Error::Invalid("args.causal: expected true or false".into()))?;
    }
    if q.seq_len == 0 {
        return Err(Error::Invalid("seq_len must be at least 1 token".into()).into());
    }
    let report = |r: &mut Recorder| Ok(model_report(&spec, &q, r));
    traced(input.with_trace, report, |_| {
        let a = &spec.arch;
        let mut inputs = inputs_step("inputs.model", &format!("Model {}", spec.name), a)
            .bind("N", a.n_heads as f64, "")
            .bind("K", a.n_kv_heads as f64, "")
            .bind("H", a.d_head as f64, "")
            .bind("V", a.vocab as f64, "");
        if let Some(m) = &a.moe {
            inputs = inputs
                .bind("E", m.n_experts as f64, "")
                .bind("k", m.top_k as f64, "");
        }
        inputs = inputs.bind("T", q.seq_len as f64, "tokens").bind(
            "bytes_kv",
            q.kv_dtype.bytes_per_element(),
            "B",
        );
        inputs.source = Some(format!(
            "{} MLP, {} embeddings, norms per layer {}, KV dtype {}",
            if a.mlp.matrices() == 3 {
                "gated"
            } else {
                "plain"
            },
            if a.tied_embeddings {
                "tied"
            } else {
                "separate"
            },
            a.norms_per_layer,
            q.kv_dtype.name()
        ));
        inputs
    })
}

fn eval_hw(input: &Input) -> Result<(Value, Vec<Step>), EvalError> {
    let s = input.s;
    check_args(input.args, &[], "hw")?;
    if s.hardware.chip.is_none() && s.hardware.inline.is_none() {
        return Err(Error::Invalid("the scenario has no [hardware] chip".into()).into());
    }
    let chip = s.hardware.resolve_chip(input.cat)?;
    let report = |r: &mut Recorder| Ok(hw_report(&chip, r));
    traced(input.with_trace, report, |rep| {
        let mut inputs = Step::new("inputs.hw", &format!("Chip {}", chip.name), "inputs")
            .bind("C", chip.flops(DType::Bf16).get(), "FLOP/s")
            .bind("W_hbm", chip.hbm_bandwidth.get(), "B/s")
            .bind("HBM", chip.hbm_capacity.get(), "B");
        if let Some(w) = rep.ici_axis_bidirectional_bytes_per_s {
            inputs = inputs.bind("W_ici", w.get(), "B/s");
        }
        inputs.source = Some(chip.source.clone());
        inputs
    })
}

/// Look up a dotted path (`memory_per_device.total_bytes`, `peak_flops_per_s.bf16`)
/// in a report. `None` when a key is missing.
pub fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for part in path.split('.') {
        cur = match cur {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Every leaf path of a report (for suggestions and slip hints).
pub fn leaf_paths(v: &Value) -> Vec<(String, &Value)> {
    fn walk<'a>(v: &'a Value, prefix: &str, out: &mut Vec<(String, &'a Value)>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(x, &p, out);
                }
            }
            _ => out.push((prefix.to_string(), v)),
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out
}

/// Keys of the `model` report.
const MODEL_KEYS: &[&str] = &[
    "name",
    "source",
    "params_total",
    "params_active",
    "params_embedding",
    "params_non_embedding",
    "params_attention",
    "params_mlp",
    "params_experts",
    "params_norms",
    "params_per_dense_layer",
    "params_per_moe_layer",
    "seq_len",
    "causal",
    "flops_per_token_forward",
    "flops_per_token_forward_matmul",
    "flops_per_token_forward_attention",
    "flops_per_token_training",
    "kv_dtype",
    "kv_cache_bytes_per_token",
    "kv_cache_bytes_per_sequence",
    "published_params",
    "attention_equals_projections_seq_len",
    "attention_equals_matmuls_seq_len",
];

/// Keys of the `hw` report.
const HW_KEYS: &[&str] = &[
    "name",
    "display_name",
    "kind",
    "vendor",
    "profile",
    "source",
    "peak_flops_per_s.fp32",
    "peak_flops_per_s.bf16",
    "peak_flops_per_s.fp16",
    "peak_flops_per_s.fp8",
    "peak_flops_per_s.int8",
    "peak_flops_per_s.int4",
    "peak_flops_per_s.fp4",
    "hbm_capacity_bytes",
    "hbm_bandwidth_bytes_per_s",
    "ici_link_one_way_bytes_per_s",
    "ici_axis_bidirectional_bytes_per_s",
    "ici_links_per_chip",
    "ici_torus_dims",
    "ici_wraparound",
    "ici_max_slice_chips",
    "ici_hop_latency_s",
    "chips_per_host",
    "nvlink_per_gpu_one_way_bytes_per_s",
    "nvlink_domain_size",
    "nvlink_latency_s",
    "scale_out_kind",
    "scale_out_per_chip_one_way_bytes_per_s",
    "scale_out_per_node_one_way_bytes_per_s",
    "scale_out_latency_s",
    "max_chips",
    "pcie_one_way_bytes_per_s",
    "critical_intensity_hbm",
    "critical_intensity_hbm_int8",
    "critical_intensity_hbm_fp8",
    "critical_intensity_hbm_fp4",
    "critical_intensity_vector",
    "critical_intensity_ici",
    "critical_intensity_nvlink",
    "critical_intensity_scale_out",
    "critical_intensity_pcie",
    "usd_per_chip_hour",
    "notes",
    "anatomy",
    "slices",
    "network_levels",
];

/// Keys of the `train` report.
const TRAIN_KEYS: &[&str] = &[
    "bound",
    "bubble_fraction",
    "chip",
    "chip_hours",
    "chips",
    "comms",
    "cost_usd",
    "degrees",
    "degrees.cp",
    "degrees.dp",
    "degrees.ep",
    "degrees.fsdp",
    "degrees.pp",
    "degrees.tp",
    "feasible",
    "fits",
    "flops_per_step",
    "hardware_flops_per_step",
    "hbm_bytes",
    "memory_margin_bytes",
    "memory_per_device.activations_bytes",
    "memory_per_device.grads_bytes",
    "memory_per_device.optimizer_bytes",
    "memory_per_device.params_bytes",
    "memory_per_device.params_plus_optimizer_bytes",
    "memory_per_device.total_bytes",
    "memory_total_unsharded_bytes",
    "mesh",
    "mfu_at_lower_bound",
    "model",
    "notes",
    "optimizer_bytes_per_param",
    "params",
    "params_active",
    "params_per_device",
    "reasons",
    "rules.alpha",
    "rules.batch_per_chip",
    "rules.dcn_min_batch_per_slice",
    "rules.dp_min_batch_per_chip",
    "rules.exact",
    "rules.exact.moe_factor",
    "rules.exact.dp_allgather_bandwidth_bytes_per_s",
    "rules.exact.dp_min_batch_per_chip",
    "rules.exact.plan_dp_min_batch_per_chip",
    "rules.exact.tp_max_degree",
    "rules.exact.notes",
    "rules.fsdp_max_chips",
    "rules.fsdp_max_chips_train_time_s",
    "rules.fsdp_min_batch_tokens",
    "rules.fsdp_tp",
    "rules.fsdp_tp.ok",
    "rules.fsdp_tp.reason",
    "rules.fsdp_tp_m_x",
    "rules.fsdp_tp_m_y",
    "rules.fsdp_tp_max_chips",
    "rules.fsdp_tp_min_batch_per_chip",
    "rules.m_all",
    "rules.pure_dp",
    "rules.pure_dp.ok",
    "rules.pure_dp.reason",
    "rules.pure_fsdp",
    "rules.pure_fsdp.ok",
    "rules.pure_fsdp.reason",
    "rules.tp_max_degree",
    "rules.x_chosen",
    "rules.x_opt",
    "rules.y_chosen",
    "slice_hbm_bytes",
    "sizing",
    "sizing.sequences",
    "sizing.max_data_parallel",
    "sizing.data_parallel_within_limit",
    "sizing.memory_bytes",
    "sizing.min_chips_memory_exact",
    "sizing.min_chips_memory",
    "sizing.min_slice",
    "sizing.checkpoint_bytes_per_bd",
    "step_time_at_mfu_s",
    "step_time_lower_s",
    "step_time_upper_s",
    "t_bubble_s",
    "t_comms_s",
    "t_comms_sum_s",
    "t_math_s",
    "tokens_per_s",
    "train_flops",
    "train_time_s",
];

/// Keys of the `infer` report.
const INFER_KEYS: &[&str] = &[
    "attention_decode_intensity",
    "attention_prefill_critical_len",
    "b_crit_tokens",
    "batch",
    "batch_fits",
    "beta_hbm_over_ici",
    "bound_decode",
    "bound_prefill",
    "chip",
    "chips",
    "chips_per_replica",
    "compute_dtype",
    "context",
    "cost_per_million_tokens_usd",
    "decode_comms_latency_bound",
    "decode_comms_time_s",
    "decode_components",
    "decode_compute_time_s",
    "decode_kv_load_time_s",
    "decode_step_time_roofline_s",
    "decode_step_time_s",
    "decode_tp_collective_bytes",
    "disagg_prefill_per_generate",
    "ep",
    "fits",
    "free_hbm_bytes_per_device",
    "gen_len",
    "hbm_bytes_per_device",
    "kv_cache_bytes_per_device",
    "kv_cache_bytes_per_sequence",
    "kv_cache_bytes_per_token",
    "kv_dtype",
    "kv_sharding",
    "latency_bound_bytes",
    "leftover_hbm_bytes_per_device",
    "max_batch",
    "max_batch_exact",
    "max_batch_one_kv_head",
    "mesh",
    "min_chips",
    "min_slice",
    "model",
    "params_active",
    "params_total",
    "prefill_comms_time_s",
    "prefill_components",
    "prefill_compute_time_s",
    "prefill_memory_time_s",
    "prefill_time_s",
    "prompt_len",
    "replicas",
    "request_latency_s",
    "sharding",
    "tokens_per_s",
    "tokens_per_s_per_chip",
    "tp",
    "tp_limit_generate",
    "tp_limit_prefill",
    "ttft_s",
    "two_d_ws",
    "two_d_ws.crossover_chips",
    "two_d_ws.t_comms",
    "two_d_ws.t_comms_1d",
    "two_d_ws.t_math",
    "two_d_ws.x_opt",
    "two_d_ws.yz_opt",
    "warnings",
    "weight_load_time_even_s",
    "weight_load_time_s",
    "weights_bytes",
    "weights_bytes_per_device",
    "weights_dtype",
    "slice_hbm_bytes",
    "slice_free_hbm_bytes",
    "kv_cache_bytes_batch",
    "weights_plus_kv_bytes",
    "min_chips_exact",
    "requests_per_s",
    "requests_per_s_per_chip",
    "flops_per_dollar",
    "critical_intensity_hbm_int8",
    "critical_intensity_hbm_fp8",
    "decode_weight_time_s",
    "decode_overhead_time_s",
    "serving.engine",
    "serving.engine_max_batch",
    "serving.static_batch.ttft_s",
    "serving.static_batch.tpot_s",
    "serving.static_batch.total_time_s",
    "serving.static_batch.output_tokens_per_s",
    "serving.static_batch.output_tokens_per_s_per_chip",
];

/// Known keys of the reports of the commands implemented now, for the default
/// command of a claim and unknown-quantity errors before any evaluation.
pub fn known_keys(c: Command) -> &'static [&'static str] {
    match c {
        Command::Model => MODEL_KEYS,
        Command::Hw => HW_KEYS,
        Command::Train => TRAIN_KEYS,
        Command::Infer => INFER_KEYS,
        Command::Collective => COLLECTIVE_KEYS,
        Command::Roofline => ROOFLINE_KEYS,
        Command::Shard => SHARD_KEYS,
        Command::Mfu => MFU_KEYS,
    }
}

/// Keys of the `collective` report.
const COLLECTIVE_KEYS: &[&str] = &[
    "chip",
    "op",
    "mesh",
    "axes",
    "axis_size",
    "placement",
    "array",
    "result",
    "bytes",
    "shard_bytes",
    "bytes_sent_per_device",
    "algorithm",
    "levels",
    "bandwidth_time_s",
    "latency_time_s",
    "time_s",
    "bound",
    "effective_bandwidth_bytes_per_s",
    "latency_bound_below_bytes",
    "alternatives",
    "notes",
];

/// Keys of the `roofline` report.
const ROOFLINE_KEYS: &[&str] = &[
    "chip",
    "op",
    "expression",
    "unit",
    "compute_dtype",
    "peak_flops_per_s",
    "memory",
    "bandwidth_bytes_per_s",
    "flops",
    "bytes",
    "operands",
    "arithmetic_intensity",
    "critical_intensity",
    "t_math_s",
    "t_mem_s",
    "time_s",
    "time_upper_s",
    "bound",
    "peak_fraction",
    "batch_dim",
    "critical_batch",
    "critical_batch_approx",
    "notes",
];

/// Keys of the `shard` report (one array, or a product).
const SHARD_KEYS: &[&str] = &[
    "array",
    "dtype",
    "shape",
    "local_shape",
    "total_bytes",
    "bytes_per_device",
    "sharded_over",
    "replicated_over",
    "replication",
    "stored_bytes",
    "unreduced_over",
    "devices",
    "expression",
    "chip",
    "mesh",
    "cases",
    "inputs",
    "contracting",
    "flops_total",
    "compute_dtype",
    "peak_flops_per_s",
    "flops_per_device",
    "t_math_s",
    "t_comms_s",
    "time_s",
    "comms_hidden",
    "strategy",
    "strategy.name",
    "strategy.collectives",
    "strategy.output",
    "strategy.flops_per_device",
    "strategy.t_math_s",
    "strategy.t_comms_s",
    "strategy.time_lower_s",
    "strategy.time_upper_s",
    "strategy.comms_hidden",
    "alternatives",
    "notes",
];

/// Keys of the `mfu` report.
const MFU_KEYS: &[&str] = &[
    "model",
    "params_active",
    "tokens",
    "train_flops",
    "chip",
    "dtype",
    "peak_flops_per_s",
    "chip_hours",
    "chips",
    "time_s",
    "available_flops",
    "achieved_flops_per_s",
    "mfu",
    "notes",
];

/// Array- and object-valued keys whose elements (`comms.0.seconds`,
/// `anatomy.sms`) are addressable.
const ARRAY_KEYS: [&str; 17] = [
    "comms",
    "notes",
    "reasons",
    "decode_components",
    "prefill_components",
    "kv_sharding",
    "warnings",
    "anatomy",
    "slices",
    "network_levels",
    "levels",
    "alternatives",
    "operands",
    "inputs",
    "strategy",
    "local_shape",
    "shape",
];

/// Whether `key` is a quantity `c` reports (an exact key, or an element path
/// under an array key).
pub fn is_known_key(c: Command, key: &str) -> bool {
    let keys = known_keys(c);
    keys.contains(&key)
        || ARRAY_KEYS
            .iter()
            .any(|a| keys.contains(a) && key.strip_prefix(a).is_some_and(|r| r.starts_with('.')))
}

/// Dimension of a known key (explicit where the name does not say it).
pub fn dim_of(c: Command, key: &str) -> super::value::Dim {
    use super::value::{dim_of_key, Dim};
    match (c, key) {
        (Command::Model, k)
            if k.starts_with("params") || k == "published_params" || k == "seq_len" =>
        {
            Dim::Count
        }
        (Command::Model, k) if k.starts_with("flops_per_token") => Dim::Flops,
        (Command::Hw, "hbm_capacity_bytes") => Dim::Bytes,
        (Command::Train | Command::Infer, "tokens_per_s" | "tokens_per_s_per_chip") => Dim::Count,
        (Command::Train, "train_flops") => Dim::Flops,
        (Command::Infer, "decode_comms_latency_bound") => Dim::Count,
        (Command::Infer, "requests_per_s" | "requests_per_s_per_chip") => Dim::Count,
        _ => dim_of_key(key),
    }
}
