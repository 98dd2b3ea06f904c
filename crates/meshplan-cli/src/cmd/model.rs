//! `meshplan model list|show`: the model catalog and one model's counts.
//!
//! Every number comes from [`meshplan_core::report::model_report`]; this module
//! only resolves the model argument (catalog name, HF `config.json`, model or
//! scenario TOML) and renders the report as a table, JSON, or a derivation.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use meshplan_core::model::ModelSpec;
use meshplan_core::report::{model_report, ModelQuery, ModelReport};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::units::{fmt_int, fmt_si, sig4, DType};
use meshplan_core::{catalog, hf, Catalog};

use crate::common::{self, ExplainFormat};

/// Model subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ModelCmd {
    /// List the models in the catalog with their sizes and hyperparameters.
    List(common::ListArgs),
    /// Show one model's parameter counts, FLOPs per token and KV-cache size.
    Show(ShowArgs),
}

/// Arguments of `meshplan model show`.
#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// A catalog name (e.g. llama-2-13b), a Hugging Face config.json, a model
    /// TOML file in catalog format, or a scenario TOML file with a [model] section.
    #[arg(value_name = "MODEL")]
    pub model: String,
    /// Sequence length T for attention FLOPs and KV per sequence; accepts
    /// 4096, 32k (= 32,000) or 32Ki (= 32,768).
    #[arg(long, value_name = "TOKENS", value_parser = parse_seq_len, allow_hyphen_values = true)]
    pub seq_len: Option<u64>,
    /// Data type of the KV cache: fp32, bf16, fp16, fp8, int8 or int4.
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype, allow_hyphen_values = true)]
    pub kv_dtype: Option<DType>,
    /// Count attention FLOPs for bidirectional (non-causal) attention.
    #[arg(long)]
    pub non_causal: bool,
    /// Print one JSON object in SI base units (keys in docs/quantities.md).
    #[arg(long)]
    pub json: bool,
    /// Print the derivation of every number in the book's symbols.
    #[arg(long)]
    pub explain: bool,
    /// Format of the --explain output.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text, value_name = "FORMAT")]
    pub explain_format: ExplainFormat,
}

/// `--seq-len`: a whole, positive token count.
fn parse_seq_len(s: &str) -> std::result::Result<u64, String> {
    match meshplan_core::units::parse_count(s) {
        Ok(0) => Err("the sequence length must be at least 1 token".into()),
        Ok(v) => Ok(v),
        Err(e) => Err(e.to_string()),
    }
}

/// `--kv-dtype`.
fn parse_dtype(s: &str) -> std::result::Result<DType, String> {
    DType::parse(s).map_err(|e| e.to_string())
}

/// Run the command.
pub fn run(c: ModelCmd) -> Result<ExitCode> {
    let cat = common::user_catalog()?;
    match c {
        ModelCmd::List(a) => list(&cat, &a),
        ModelCmd::Show(a) => show(&cat, &a),
    }
}

fn list(cat: &Catalog, a: &common::ListArgs) -> Result<ExitCode> {
    let q = ModelQuery::default();
    let rows: Vec<(&ModelSpec, ModelReport)> = cat
        .models()
        .into_iter()
        .map(|m| (m, model_report(m, &q, &mut NoTrace)))
        .collect();
    if a.json {
        let models: Vec<serde_json::Value> = rows
            .iter()
            .map(|(m, r)| {
                serde_json::json!({
                    "name": m.name,
                    "display_name": m.display_name,
                    "aliases": m.aliases,
                    "params_total": r.params_total,
                    "params_active": r.params_active,
                    "n_layers": m.arch.n_layers,
                    "d_model": m.arch.d_model,
                    "d_ff": m.arch.d_ff,
                    "n_heads": m.arch.n_heads,
                    "n_kv_heads": m.arch.n_kv_heads,
                    "d_head": m.arch.d_head,
                    "vocab": m.arch.vocab,
                    "n_experts": m.arch.moe.as_ref().map(|x| x.n_experts),
                    "top_k": m.arch.moe.as_ref().map(|x| x.top_k),
                    "source": m.source,
                })
            })
            .collect();
        common::print_json(&serde_json::json!({ "models": models }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let header = [
        "name",
        "display name",
        "params total",
        "params active",
        "L",
        "D",
        "F",
        "N",
        "K",
        "H",
        "V",
        "source",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for (m, r) in &rows {
        let a = &m.arch;
        table.push(vec![
            m.name.clone(),
            m.display_name.clone(),
            fmt_si(r.params_total as f64, "params"),
            fmt_si(r.params_active as f64, "params"),
            a.n_layers.to_string(),
            a.d_model.to_string(),
            a.d_ff.to_string(),
            a.n_heads.to_string(),
            a.n_kv_heads.to_string(),
            a.d_head.to_string(),
            a.vocab.to_string(),
            short(&m.source, 60),
        ]);
    }
    out!(
        "{}",
        common::render_table(&table, &[2, 3, 4, 5, 6, 7, 8, 9, 10])
    );
    outln!(
        "\n{} models. Params with SI prefixes (G = 1e9). `meshplan model show NAME` for exact counts.",
        rows.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// First line of `s`, cut to `n` characters.
fn short(s: &str, n: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() <= n {
        line.to_string()
    } else {
        let cut: String = line.chars().take(n.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// Resolve the MODEL argument: `.json` → HF import, `.toml` → model file or
/// scenario, otherwise a catalog name. (For `train`/`infer`.)
#[allow(dead_code)]
pub fn resolve_model(cat: &Catalog, arg: &str) -> Result<ModelSpec> {
    Ok(resolve_model_and_scenario(cat, arg)?.0)
}

/// Like [`resolve_model`], also returning the scenario when the argument was one.
pub fn resolve_model_and_scenario(
    cat: &Catalog,
    arg: &str,
) -> Result<(ModelSpec, Option<Scenario>)> {
    let path = Path::new(arg);
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("json") => {
            let src = common::read_file(path)?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "imported".into());
            Ok((hf::import(&src, arg, &name)?, None))
        }
        Some("toml") => {
            let src = common::read_file(path)?;
            model_from_toml(cat, &src, arg)
        }
        _ => Ok((cat.model(arg)?.clone(), None)),
    }
}

/// A TOML file is a catalog model file when it has a top-level `[arch]`
/// table, otherwise a scenario with a `[model]` section.
fn model_from_toml(cat: &Catalog, src: &str, file: &str) -> Result<(ModelSpec, Option<Scenario>)> {
    // Look at the top-level tables only to pick the schema; the chosen parser
    // reports every error with file, line and field.
    let is_model_file = src.lines().any(|l| l.trim_start().starts_with("[arch]"));
    if is_model_file {
        return Ok((catalog::parse_model(src, file)?, None));
    }
    let s = Scenario::parse(src, file)?;
    if s.model.name.is_none() && !s.model.has_overrides() {
        anyhow::bail!(
            "{file}: no model found: a model file needs an [arch] table, a scenario needs a [model] section with `name` or inline hyperparameters"
        );
    }
    let m = s
        .model
        .resolve(cat)
        .with_context(|| format!("{file}: [model]"))?;
    Ok((m, Some(s)))
}

fn show(cat: &Catalog, a: &ShowArgs) -> Result<ExitCode> {
    let (spec, scen) = resolve_model_and_scenario(cat, &a.model)?;
    // Flags override the scenario: --seq-len ↔ [training] seq_len,
    // --kv-dtype ↔ [inference] kv_dtype.
    let scen_seq = scen
        .as_ref()
        .and_then(|s| s.training.seq_len.or(s.inference.context))
        .map(|c| c.0);
    if scen_seq == Some(0) {
        anyhow::bail!("{}: seq_len must be at least 1 token", a.model);
    }
    let scen_kv = match scen.as_ref().and_then(|s| s.inference.kv_dtype.as_deref()) {
        Some(d) => {
            Some(DType::parse(d).with_context(|| format!("{}: [inference] kv_dtype", a.model))?)
        }
        None => None,
    };
    let q = ModelQuery {
        seq_len: a
            .seq_len
            .or(scen_seq)
            .unwrap_or(ModelQuery::default().seq_len),
        kv_dtype: a.kv_dtype.or(scen_kv).unwrap_or(DType::Bf16),
        causal: !a.non_causal,
    };
    let (r, steps) = if a.explain {
        let mut rec = Recorder::default();
        let r = model_report(&spec, &q, &mut rec);
        (r, Some(rec.into_steps()))
    } else {
        (model_report(&spec, &q, &mut NoTrace), None)
    };
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        if let (Some(steps), Some(o)) = (&steps, v.as_object_mut()) {
            o.insert("derivation".into(), serde_json::to_value(steps)?);
        }
        common::print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    out!("{}", render_report(&spec, &r));
    if let Some(steps) = steps {
        outln!("\nDerivation:");
        out!("{}", common::render_steps(&steps, a.explain_format));
    }
    Ok(ExitCode::SUCCESS)
}

fn params(v: u64) -> String {
    format!("{} params ({})", fmt_int(v), fmt_si(v as f64, "params"))
}

fn render_report(m: &ModelSpec, r: &ModelReport) -> String {
    let a = &m.arch;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |k: &str, v: String| rows.push(vec![k.to_string(), v]);
    let title = if m.display_name.is_empty() || m.display_name == m.name {
        m.name.clone()
    } else {
        format!("{} ({})", m.name, m.display_name)
    };
    row("model", title);
    row("source", short(&m.source, 100));
    let mut hp = format!(
        "L={} D={} F={} N={} K={} H={} V={}",
        a.n_layers, a.d_model, a.d_ff, a.n_heads, a.n_kv_heads, a.d_head, a.vocab
    );
    if let Some(moe) = &a.moe {
        hp.push_str(&format!(" E={} k={}", moe.n_experts, moe.top_k));
    }
    row("hyperparameters", hp);
    row(
        "embeddings / MLP",
        format!(
            "{}, {:?} MLP",
            if a.tied_embeddings { "tied" } else { "untied" },
            a.mlp
        )
        .to_lowercase(),
    );
    row("", String::new());
    row("params total", params(r.params_total));
    row("params active (per token)", params(r.params_active));
    row("params embedding", params(r.params_embedding));
    row("params non-embedding", params(r.params_non_embedding));
    row("params attention", params(r.params_attention));
    if r.params_per_dense_layer > 0 {
        row("params dense MLP", params(r.params_mlp));
    }
    if r.params_experts > 0 {
        row("params routed experts", params(r.params_experts));
    }
    row("params norms", params(r.params_norms));
    if r.params_per_dense_layer > 0 {
        row("params per dense layer", params(r.params_per_dense_layer));
    }
    if r.params_per_moe_layer > 0 {
        row("params per MoE layer", params(r.params_per_moe_layer));
    }
    if let Some(p) = r.published_params {
        let d = r.params_total as i128 - p as i128;
        row(
            "published total",
            format!("{} (difference {d} params)", params(p)),
        );
    }
    row("", String::new());
    row(
        "sequence length T",
        format!(
            "{} tokens ({})",
            fmt_int(r.seq_len),
            if r.causal { "causal" } else { "non-causal" }
        ),
    );
    row(
        "forward FLOPs / token",
        format!("{}/token", r.flops_per_token_forward),
    );
    row(
        "  of which matmuls",
        format!("{}/token", r.flops_per_token_forward_matmul),
    );
    row(
        "  of which attention",
        format!("{}/token", r.flops_per_token_forward_attention),
    );
    row(
        "training FLOPs / token",
        format!("{}/token", r.flops_per_token_training),
    );
    row("", String::new());
    row(
        &format!("KV cache / token ({})", r.kv_dtype),
        format!(
            "{}/token ({}, {} KiB)",
            fmt_bytes_exact(r.kv_cache_bytes_per_token.get()),
            r.kv_cache_bytes_per_token,
            sig4(r.kv_cache_bytes_per_token.get() / 1024.0)
        ),
    );
    row(
        "KV cache / sequence of T",
        r.kv_cache_bytes_per_sequence.both(),
    );
    row(
        "weights in bf16",
        DType::Bf16.bytes_for(r.params_total).both(),
    );
    common::render_table(&rows, &[])
}

/// "262,144 B" for an exact byte count.
fn fmt_bytes_exact(v: f64) -> String {
    if v.fract() == 0.0 && (0.0..1.8e19).contains(&v) {
        format!("{} B", fmt_int(v as u64))
    } else {
        fmt_si(v, "B")
    }
}
