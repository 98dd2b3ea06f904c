//! The evaluator: a command name + scenario → the JSON object that command
//! reports (`meshplan model show --json`, `hw show --json`, …) and its
//! derivation steps. A claim's `quantity` is a dotted path into that object,
//! so every key a command reports is checkable. Adding a command is one match
//! arm in [`evaluate`].

use serde::Serialize;
use serde_json::{Map, Value};

use crate::catalog::Catalog;
use crate::error::Error;
use crate::hw_report::hw_report;
use crate::report::{model_report, ModelQuery};
use crate::scenario::{Count, Scenario};
use crate::trace::{NoTrace, Recorder, Step};
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
}

impl Command {
    /// All commands.
    pub const ALL: [Command; 4] = [Command::Model, Command::Hw, Command::Train, Command::Infer];
    /// Name as written in a claims file.
    pub fn name(self) -> &'static str {
        match self {
            Command::Model => "model",
            Command::Hw => "hw",
            Command::Train => "train",
            Command::Infer => "infer",
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
    match command {
        Command::Model => eval_model(scenario, catalog, args, with_trace),
        Command::Hw => eval_hw(scenario, catalog, args, with_trace),
        // Wire `meshplan train` / `meshplan infer` here when they land.
        Command::Train | Command::Infer => Err(EvalError::Unavailable(
            "command not available in this build".into(),
        )),
    }
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

fn eval_model(
    s: &Scenario,
    cat: &Catalog,
    args: &Args,
    with_trace: bool,
) -> Result<(Value, Vec<Step>), EvalError> {
    check_args(args, &["seq_len", "kv_dtype", "causal"], "model")?;
    if s.model.name.is_none() && !s.model.has_overrides() {
        return Err(Error::Invalid(
            "the scenario has no [model] (a catalog `name` or inline hyperparameters)".into(),
        )
        .into());
    }
    let spec = s.model.resolve(cat)?;
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
    if with_trace {
        let mut r = Recorder::default();
        let a = &spec.arch;
        let mut inputs = Step::new("inputs.model", &format!("Model {}", spec.name), "inputs")
            .bind("L", a.n_layers as f64, "")
            .bind("D", a.d_model as f64, "")
            .bind("F", a.d_ff as f64, "")
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
        let rep = model_report(&spec, &q, &mut r);
        let mut steps = vec![inputs];
        steps.extend(r.into_steps());
        Ok((to_value(&rep)?, steps))
    } else {
        Ok((
            to_value(&model_report(&spec, &q, &mut NoTrace))?,
            Vec::new(),
        ))
    }
}

fn eval_hw(
    s: &Scenario,
    cat: &Catalog,
    args: &Args,
    with_trace: bool,
) -> Result<(Value, Vec<Step>), EvalError> {
    check_args(args, &[], "hw")?;
    if s.hardware.chip.is_none() && s.hardware.inline.is_none() {
        return Err(Error::Invalid("the scenario has no [hardware] chip".into()).into());
    }
    let chip = s.hardware.resolve_chip(cat)?;
    if with_trace {
        let mut r = Recorder::default();
        let rep = hw_report(&chip, &mut r);
        let mut inputs = Step::new("inputs.hw", &format!("Chip {}", chip.name), "inputs")
            .bind("C", chip.flops(DType::Bf16).get(), "FLOP/s")
            .bind("W_hbm", chip.hbm_bandwidth.get(), "B/s")
            .bind("HBM", chip.hbm_capacity.get(), "B");
        if let Some(w) = rep.ici_axis_bidirectional_bytes_per_s {
            inputs = inputs.bind("W_ici", w.get(), "B/s");
        }
        inputs.source = Some(chip.source.clone());
        let mut steps = vec![inputs];
        steps.extend(r.into_steps());
        Ok((to_value(&rep)?, steps))
    } else {
        Ok((to_value(&hw_report(&chip, &mut NoTrace))?, Vec::new()))
    }
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

/// Known keys of the reports of the commands implemented now, for the default
/// command of a claim and unknown-quantity errors before any evaluation.
pub fn known_keys(c: Command) -> &'static [&'static str] {
    match c {
        Command::Model => &[
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
        ],
        Command::Hw => &[
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
            "critical_intensity_ici",
            "critical_intensity_nvlink",
            "critical_intensity_scale_out",
            "critical_intensity_pcie",
            "usd_per_chip_hour",
            "notes",
        ],
        // Filled in when `train` / `infer` are wired: until then any key is
        // accepted and the claim is CANNOT-CHECK.
        Command::Train | Command::Infer => &[],
    }
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
        _ => dim_of_key(key),
    }
}
