//! Validation data sets: the Ultra-Scale Playbook CSV (+ model table) and the
//! published-runs JSON (`../shared/validation/README.md` describes both), and
//! the user's calibration CSV.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{Framework, RunSpec, Shape};
use super::{perr, perr_at};
use crate::error::Result;
use crate::training::{Remat, Schedule};

/// The model table shipped with the validation data (copy of
/// `shared/validation/playbook_models.toml`).
pub const PLAYBOOK_MODELS: &str = include_str!("playbook_models.toml");

/// How the measured step time was obtained (which MFU definition maps to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlopsDef {
    /// nanotron `get_flops` (variant A); used for the Playbook.
    Nanotron,
    /// Megatron/Narayanan `72·B·s·L·h²(1 + s/6h + V/12hL)`.
    Megatron,
}

/// One measured run.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Stable id (`playbook:ROW`, published id, or `calib:ROW`).
    pub id: String,
    /// Data source (`playbook`, `kor22`, `mcore24`, `user`).
    pub source: String,
    /// Model label (1B, 3B, …).
    pub model: String,
    /// Chip catalog name.
    pub chip: String,
    /// Nodes (GPUs / 8).
    pub nodes: u64,
    /// Configuration.
    pub spec: RunSpec,
    /// `ok` or `oom_or_crash`.
    pub completed: bool,
    /// Measured seconds per step (completed runs).
    pub step_time_s: Option<f64>,
    /// Measured peak memory, GB.
    pub peak_mem_gb: Option<f64>,
    /// Measured MFU (fraction), consistent definition.
    pub mfu: Option<f64>,
    /// FLOP definition for MFU.
    pub flops_def: FlopsDef,
    /// A clean point for fitting and headline figures (Playbook: circle marker,
    /// consistent batch; published: has a step time).
    pub clean: bool,
    /// Pair key for recompute ratio checks (Korthikanti full vs selective).
    pub pair: Option<String>,
    /// Cluster network the run was measured on (`efa`, `infiniband`, or `""`
    /// when unknown), from [`super::profile::network_of`]; selects the
    /// profile's network sub-profile.
    pub network: String,
}

fn num(v: &toml::Value, k: &str) -> u64 {
    v.get(k).and_then(|x| x.as_integer()).unwrap_or(0) as u64
}

/// Parse the Playbook model table.
pub fn parse_playbook_models(src: &str) -> Result<BTreeMap<String, Shape>> {
    let t: toml::Value = toml::from_str(src).map_err(|e| perr("playbook_models.toml", e))?;
    let models = t
        .get("models")
        .and_then(|m| m.as_table())
        .ok_or_else(|| perr("playbook_models.toml", "no [models] table"))?;
    let mut out = BTreeMap::new();
    for (k, v) in models {
        out.insert(
            k.clone(),
            Shape {
                n_layers: num(v, "n_layers"),
                d_model: num(v, "d_model"),
                d_ff: num(v, "d_ff"),
                n_heads: num(v, "n_heads"),
                n_kv_heads: num(v, "n_kv_heads"),
                d_head: num(v, "d_head"),
                vocab: num(v, "vocab"),
                tied_embeddings: v
                    .get("tied_embeddings")
                    .and_then(|x| x.as_bool())
                    .unwrap_or(false),
                gated: v.get("mlp").and_then(|x| x.as_str()) != Some("plain"),
                moe: None,
            },
        );
    }
    Ok(out)
}

/// Split one CSV line (the data sets have no quoted fields; quotes are stripped).
fn split_csv(line: &str) -> Vec<String> {
    line.split(',')
        .map(|c| c.trim().trim_matches('"').to_string())
        .collect()
}

fn fnum(s: &str) -> Option<f64> {
    let v: f64 = s.parse().ok()?;
    v.is_finite().then_some(v)
}

/// A measured time or memory: finite and positive, else not measured (a zero
/// step time would make every relative error infinite).
fn fpos(s: &str) -> Option<f64> {
    fnum(s).filter(|v| *v > 0.0)
}

/// ZeRO stage 0..=3 (checked before narrowing to `u8`, so 256 is not stage 0).
fn zero_stage(z: u64, what: &str, row: usize) -> Result<u8> {
    u8::try_from(z).ok().filter(|z| *z <= 3).ok_or_else(|| {
        perr_at(
            what,
            row,
            Some("ZeRO"),
            format!("ZeRO stage {z} is not 0, 1, 2 or 3"),
        )
    })
}

/// Reject a run the model cannot evaluate: a zero degree, batch or shape
/// dimension, or a DP·TP·PP beyond the GPUs (`pipeline_stages` allocates one
/// entry per stage, so an unbounded PP would exhaust memory).
fn check_spec(spec: &RunSpec, what: &str, row: usize) -> Result<()> {
    let s = &spec.shape;
    let fields = [
        ("n_gpus", spec.n_gpus),
        ("dp", spec.dp),
        ("tp", spec.tp),
        ("pp", spec.pp),
        ("cp", spec.cp),
        ("ep", spec.ep),
        ("fsdp", spec.fsdp),
        ("mbs", spec.mbs),
        ("grad_acc", spec.grad_acc),
        ("seq_len", spec.seq_len),
        ("n_layers", s.n_layers),
        ("d_model", s.d_model),
        ("n_heads", s.n_heads),
        ("vocab", s.vocab),
    ];
    if let Some((k, _)) = fields.iter().find(|(_, v)| *v == 0) {
        return Err(perr_at(what, row, Some(k), "must be at least 1"));
    }
    let gpus = spec
        .dp
        .checked_mul(spec.tp)
        .and_then(|x| x.checked_mul(spec.pp))
        .and_then(|x| x.checked_mul(spec.cp));
    if !gpus.is_some_and(|g| g <= spec.n_gpus) {
        return Err(perr_at(
            what,
            row,
            None,
            format!(
                "DP × TP × PP × CP = {} × {} × {} × {} exceeds the {} GPUs",
                spec.dp, spec.tp, spec.pp, spec.cp, spec.n_gpus
            ),
        ));
    }
    // both fit in u64: dp·cp ≤ the GPUs (checked above)
    let data = spec.dp * spec.cp;
    for (k, v) in [("ep", spec.ep), ("fsdp", spec.fsdp)] {
        if data % v != 0 {
            return Err(perr_at(
                what,
                row,
                Some(k),
                format!("{k} = {v} does not divide the {data} data-parallel ranks (dp·cp)"),
            ));
        }
    }
    if spec.ep > 1 && s.moe.is_none() {
        return Err(perr_at(
            what,
            row,
            Some("ep"),
            "expert parallelism needs a mixture-of-experts model",
        ));
    }
    Ok(())
}

/// The Playbook CSV columns read, in the order `parse_playbook_csv` indexes them.
const PB_COLS: [&str; 16] = [
    "model",
    "Nodes",
    "MBS",
    "GradAcc",
    "DP",
    "PP",
    "TP",
    "ZeRO",
    "gpu_mem_gb",
    "status",
    "seq_len",
    "n_gpus",
    "figure_marker",
    "batch_consistent",
    "step_time_s",
    "mfu_recomputed_pct",
];

/// Parse `playbook_h100_runs.csv` (every row, completed or not).
pub fn parse_playbook_csv(src: &str, models_toml: &str) -> Result<Vec<Run>> {
    let models = parse_playbook_models(models_toml)?;
    let mut lines = src.lines().filter(|l| !l.trim().is_empty());
    let header = split_csv(lines.next().ok_or_else(|| perr("playbook csv", "empty"))?);
    let col = |name: &str| -> Result<usize> {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| perr("playbook csv", format!("missing column `{name}`")))
    };
    let c = PB_COLS.iter().map(|n| col(n)).collect::<Result<Vec<_>>>()?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let f = split_csv(line);
        let g = |k: usize| f.get(c[k]).map(String::as_str).unwrap_or("");
        let u = |k: usize| -> Result<u64> {
            g(k).parse().map_err(|_| {
                perr_at(
                    "playbook csv",
                    i + 2,
                    Some(PB_COLS[k]),
                    format!("bad number `{}`", g(k)),
                )
            })
        };
        let model = g(0).to_string();
        let shape = models.get(&model).cloned().ok_or_else(|| {
            perr_at(
                "playbook csv",
                i + 2,
                Some("model"),
                format!("unknown model {model}"),
            )
        })?;
        let completed = g(9) == "ok";
        let spec = RunSpec {
            shape,
            n_gpus: u(11)?,
            dp: u(4)?,
            tp: u(6)?,
            pp: u(5)?,
            cp: 1,
            zero: zero_stage(u(7)?, "playbook csv", i + 2)?,
            mbs: u(2)?,
            grad_acc: u(3)?,
            seq_len: u(10)?,
            remat: Remat::None,
            sequence_parallel: true,
            schedule: Schedule::OneFOneB,
            virtual_stages: 1,
            framework: Framework::Nanotron,
            ep: 1,
            fsdp: 1,
        };
        check_spec(&spec, "playbook csv", i + 2)?;
        out.push(Run {
            id: format!("playbook:{}", i + 2),
            source: "playbook".into(),
            model,
            chip: "h100".into(),
            nodes: u(1)?,
            completed,
            step_time_s: if completed { fpos(g(14)) } else { None },
            peak_mem_gb: if completed { fpos(g(8)) } else { None },
            mfu: if completed {
                fnum(g(15)).map(|x| x / 100.0)
            } else {
                None
            },
            flops_def: FlopsDef::Nanotron,
            clean: completed && g(12) == "circle" && g(13) == "1",
            pair: None,
            // README: "communicating between nodes (EFA)"
            network: "efa".into(),
            spec,
        });
    }
    Ok(out)
}

/// Parse `published_runs.json`. Entries without a usable step time or batch
/// are skipped and listed in the second element.
pub fn parse_published_json(src: &str) -> Result<(Vec<Run>, Vec<String>)> {
    let v: serde_json::Value = serde_json::from_str(src).map_err(|e| perr("published json", e))?;
    let arr = v
        .as_array()
        .ok_or_else(|| perr("published json", "expected an array"))?;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for e in arr {
        let id = e["id"].as_str().unwrap_or("?").to_string();
        let m = &e["model"];
        let par = &e["parallelism"];
        let w = &e["workload"];
        let me = &e["measured"];
        let u = |x: &serde_json::Value| x.as_u64();
        let chip_s = e["hardware"]["chip"].as_str().unwrap_or("");
        let chip = if chip_s.contains("A100") {
            "a100-80gb"
        } else {
            "h100"
        };
        let n = u(&e["hardware"]["count"]).unwrap_or(0);
        let (Some(gbs), Some(seq)) = (u(&w["global_batch_seqs"]), u(&w["seq_len"])) else {
            skipped.push(format!("{id}: no global batch"));
            continue;
        };
        let d = u(&m["D"]).unwrap_or(0);
        let n_heads = u(&m["N"]).unwrap_or(1);
        let shape = Shape {
            n_layers: u(&m["L"]).unwrap_or(0),
            d_model: d,
            d_ff: u(&m["F"]).unwrap_or(4 * d),
            n_heads,
            n_kv_heads: u(&m["K"]).unwrap_or(n_heads),
            d_head: u(&m["H"]).unwrap_or(d / n_heads.max(1)),
            vocab: u(&m["V"]).unwrap_or(51200),
            tied_embeddings: false,
            gated: false,
            moe: None,
        };
        let (tp, pp, dp) = (
            u(&par["TP"]).unwrap_or(1),
            u(&par["PP"]).unwrap_or(1),
            u(&par["DP"]).unwrap_or(1),
        );
        let mbs = u(&w["micro_batch"]).unwrap_or(1);
        let rc = w["activation_recompute"].as_str().unwrap_or("");
        let remat = if rc.starts_with("full") {
            Remat::Full
        } else if rc.starts_with("selective") {
            Remat::Selective
        } else {
            Remat::None
        };
        let vst = u(&par["virtual_pipeline_stages"]).unwrap_or(1);
        let megatron_core = id.starts_with("mcore");
        let spec = RunSpec {
            shape,
            n_gpus: n,
            dp,
            tp,
            pp,
            cp: u(&par["CP"]).unwrap_or(1),
            zero: if megatron_core { 1 } else { 0 },
            mbs,
            grad_acc: (gbs / mbs.saturating_mul(dp).max(1)).max(1),
            seq_len: seq,
            remat,
            sequence_parallel: par["sequence_parallel"]
                .as_bool()
                .unwrap_or(megatron_core && tp > 1),
            schedule: if vst > 1 {
                Schedule::Interleaved
            } else {
                Schedule::OneFOneB
            },
            virtual_stages: vst,
            ep: 1,
            fsdp: 1,
            // Korthikanti et al. 2022 ran Megatron-LM before FlashAttention
            framework: if id.starts_with("kor22") {
                Framework::Megatron2022
            } else {
                Framework::Megatron
            },
        };
        // the same checks as a CSV row (no line numbers in this JSON: the id names it)
        check_spec(&spec, &format!("published json `{id}`"), 0)?;
        let tokens = spec.tokens_per_step();
        let step = if let Some(t) = me["iteration_time_s"].as_f64() {
            Some(t)
        } else {
            me["model_tflops_per_gpu"].as_f64().map(|tf| {
                spec.shape.megatron_flops_per_token(seq) * tokens / (n as f64 * tf * 1e12)
            })
        };
        let Some(step) = step else {
            skipped.push(format!("{id}: no step time or throughput"));
            continue;
        };
        let peak = if chip == "h100" { 989e12 } else { 312e12 };
        let mfu = spec.shape.megatron_flops_per_token(seq) * tokens / (step * n as f64 * peak);
        let source = id.split('-').next().unwrap_or("published").to_string();
        let pair = id
            .strip_suffix("-full")
            .or_else(|| id.strip_suffix("-seqsel"))
            .map(str::to_string);
        out.push(Run {
            id: id.clone(),
            source,
            model: m["name"].as_str().unwrap_or("?").to_string(),
            chip: chip.into(),
            nodes: n.div_ceil(8),
            spec,
            completed: true,
            step_time_s: Some(step),
            peak_mem_gb: None,
            mfu: Some(mfu),
            flops_def: FlopsDef::Megatron,
            clean: true,
            pair,
            network: super::profile::network_of(
                e["hardware"]["interconnect"].as_str().unwrap_or(""),
            )
            .into(),
        });
    }
    Ok((out, skipped))
}

/// Columns of the calibration CSV (`meshplan calibrate`), header required:
///
/// `model,n_layers,d_model,d_ff,n_heads,n_kv_heads,d_head,vocab,n_gpus,dp,tp,pp,zero,mbs,grad_acc,seq_len,step_time_s,peak_mem_gb`
///
/// `model` may be a catalog name (then the shape columns may be empty; a
/// catalog MoE model brings its experts) or a label with the shape columns
/// filled (dense). Optional columns: `tied` (0/1), `remat`
/// (none/full/selective), `sp` (0/1, default 1 when tp > 1), `framework`
/// (nanotron/megatron, default nanotron), `cp`, `ep`, `fsdp` (default 1; ep
/// and fsdp count data-parallel ranks: each must divide dp·cp, ep needs a MoE
/// model; fsdp > 1 with zero < 3 is hybrid sharding), `peak_mem_gb`.
pub const CALIB_COLUMNS: &str = "model,n_layers,d_model,d_ff,n_heads,n_kv_heads,d_head,vocab,tied,n_gpus,dp,tp,pp,zero,mbs,grad_acc,seq_len,step_time_s,peak_mem_gb";

/// Parse a calibration CSV; `lookup` resolves catalog model names.
pub fn parse_calibration_csv(
    src: &str,
    chip: &str,
    lookup: &dyn Fn(&str) -> Option<Shape>,
) -> Result<Vec<Run>> {
    let mut lines = src
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let header = split_csv(
        lines
            .next()
            .ok_or_else(|| perr("calibration csv", "empty"))?,
    );
    let idx = |n: &str| header.iter().position(|h| h == n);
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let f = split_csv(line);
        let get = |n: &str| {
            idx(n)
                .and_then(|k| f.get(k))
                .map(String::as_str)
                .filter(|s| !s.is_empty())
        };
        let un = |n: &str| get(n).and_then(|s| s.parse::<u64>().ok());
        let need = |n: &str| {
            un(n).ok_or_else(|| {
                perr_at("calibration csv", i + 2, Some(n), "missing or not a number")
            })
        };
        let model = get("model").unwrap_or("custom").to_string();
        let shape = if let Some(l) = un("n_layers") {
            let d = need("d_model")?;
            let nh = need("n_heads")?;
            Shape {
                n_layers: l,
                d_model: d,
                d_ff: need("d_ff")?,
                n_heads: nh,
                n_kv_heads: un("n_kv_heads").unwrap_or(nh),
                d_head: un("d_head").unwrap_or(d / nh.max(1)),
                vocab: need("vocab")?,
                tied_embeddings: un("tied").unwrap_or(0) == 1,
                gated: true,
                moe: None,
            }
        } else {
            lookup(&model).ok_or_else(|| {
                perr_at(
                    "calibration csv",
                    i + 2,
                    Some("model"),
                    format!("unknown model `{model}` and no shape columns"),
                )
            })?
        };
        let tp = un("tp").unwrap_or(1);
        let n_gpus = need("n_gpus")?;
        let remat = get("remat")
            .map(Remat::parse)
            .transpose()?
            .unwrap_or(Remat::None);
        let framework = if get("framework") == Some("megatron") {
            Framework::Megatron
        } else {
            Framework::Nanotron
        };
        let spec = RunSpec {
            shape,
            n_gpus,
            dp: un("dp").unwrap_or(1),
            tp,
            pp: un("pp").unwrap_or(1),
            cp: un("cp").unwrap_or(1),
            zero: zero_stage(un("zero").unwrap_or(0), "calibration csv", i + 2)?,
            mbs: need("mbs")?,
            grad_acc: un("grad_acc").unwrap_or(1),
            seq_len: need("seq_len")?,
            remat,
            sequence_parallel: un("sp").map_or(tp > 1, |x| x == 1),
            schedule: Schedule::OneFOneB,
            virtual_stages: 1,
            framework,
            ep: un("ep").unwrap_or(1),
            fsdp: un("fsdp").unwrap_or(1),
        };
        check_spec(&spec, "calibration csv", i + 2)?;
        let step = get("step_time_s").and_then(fpos);
        out.push(Run {
            id: format!("calib:{}", i + 2),
            source: "user".into(),
            model,
            chip: chip.into(),
            nodes: n_gpus.div_ceil(8),
            spec,
            completed: step.is_some(),
            step_time_s: step,
            peak_mem_gb: get("peak_mem_gb").and_then(fpos),
            mfu: None,
            flops_def: FlopsDef::Nanotron,
            clean: step.is_some(),
            pair: None,
            network: String::new(),
        });
    }
    Ok(out)
}

/// Write runs as a calibration CSV (used for synthetic round trips).
pub fn to_calibration_csv(runs: &[Run]) -> String {
    let mut s = String::from(CALIB_COLUMNS);
    s.push('\n');
    for r in runs {
        let p = &r.spec;
        let h = &p.shape;
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            r.model,
            h.n_layers,
            h.d_model,
            h.d_ff,
            h.n_heads,
            h.n_kv_heads,
            h.d_head,
            h.vocab,
            u8::from(h.tied_embeddings),
            p.n_gpus,
            p.dp,
            p.tp,
            p.pp,
            p.zero,
            p.mbs,
            p.grad_acc,
            p.seq_len,
            r.step_time_s.map(|x| format!("{x:.6}")).unwrap_or_default(),
            r.peak_mem_gb.map(|x| format!("{x:.4}")).unwrap_or_default(),
        ));
    }
    s
}
