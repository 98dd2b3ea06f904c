//! The evaluator: a command name + scenario → the JSON object that command
//! reports (`meshplan model show --json`, `hw show --json`, …) and its
//! derivation steps. A claim's `quantity` is a dotted path into that object,
//! so every key a command reports is checkable. Each command is evaluated
//! through the core function its CLI command calls (`train`:
//! `resolve_with` + `TrainSetup::analyze`, so `predicted.*` is there), and
//! the keys it knows are derived from its reports ([`super::keys`]). Adding a
//! command is one match arm in [`evaluate`] and its representatives there.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::catalog::Catalog;
use crate::error::Error;
use crate::hardware::report::{hw_report_for, HwQuery};
use crate::model::report::model_report;
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
/// `pp`, `sharding`, `mesh` and `chips` (the flags of `meshplan infer`).
pub fn infer_arg_keys() -> Vec<String> {
    let mut v = section_keys(&crate::scenario::InferenceSection::default());
    v.extend(
        ["tp", "ep", "pp", "sharding", "mesh", "chips"]
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
            (_, "tp" | "ep" | "pp" | "sharding") => "parallelism",
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
    // what `meshplan train` runs (no `--hw-profile`: the chip's own profile),
    // so the calibrated prediction (`predicted.*`) is claimable
    let setup = crate::training::scenario::resolve_with(&s, input.cat, None)?;
    let (spec, chip, topo, cfg) = (&setup.spec, &setup.chip, &setup.topo, &setup.cfg);
    let report = |r: &mut Recorder| Ok(setup.analyze(r));
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
    let seq_len = arg_count(args, "seq_len")?;
    if seq_len == Some(0) {
        return Err(Error::Invalid("seq_len must be at least 1 token".into()).into());
    }
    let kv_dtype = match args.get("kv_dtype") {
        None => None,
        Some(v) => Some(DType::parse(v.as_str().ok_or_else(|| {
            Error::Invalid("args.kv_dtype: expected a string like \"int8\"".into())
        })?)?),
    };
    let causal = match args.get("causal") {
        None => true,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| Error::Invalid("args.causal: expected true or false".into()))?,
    };
    // the query `meshplan model show` builds from its flags and scenario
    let q = crate::scenario::model_query(Some(s), seq_len, kv_dtype, causal, "model")?;
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
    check_args(input.args, &["model_parallel"], "hw")?;
    if s.hardware.chip.is_none() && s.hardware.inline.is_none() {
        return Err(Error::Invalid("the scenario has no [hardware] chip".into()).into());
    }
    let chip = s.hardware.resolve_chip(input.cat)?;
    let q = HwQuery {
        model_parallel: arg_count(input.args, "model_parallel")?,
    };
    let report = |r: &mut Recorder| Ok(hw_report_for(&chip, &q, r)?);
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

/// Whether `key` is a quantity `c` reports (a path of its serialized
/// report, or an element path under an array-valued one; see [`super::keys`]).
pub fn is_known_key(c: Command, key: &str) -> bool {
    super::keys::known_keys(c).contains(key)
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
        // throughputs (`tokens_per_s`, `predicted.tokens_per_s_per_device`,
        // `serving.static_batch.output_tokens_per_s`) are plain rates, not seconds
        (Command::Train | Command::Infer, k) if is_rate(k) => Dim::Count,
        (Command::Train, "train_flops") => Dim::Flops,
        (Command::Infer, "decode_comms_latency_bound") => Dim::Count,
        _ => dim_of_key(key),
    }
}

/// A tokens- or requests-per-second key, at any depth.
fn is_rate(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    last.contains("tokens_per_s") || last.contains("requests_per_s")
}
