//! Validation data sets: the Ultra-Scale Playbook CSV (+ model table) and the
//! published-runs JSON (`../shared/validation/README.md` describes both), and
//! the user's calibration CSV. CSV files are read with the `csv` crate into
//! serde rows; a bad cell is reported with its line and column name.

use std::collections::BTreeMap;

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use super::{perr, perr_at};
use crate::error::{Error, Result};
use crate::fidelity::EfficiencyProfile;
use crate::hardware::Chip;
use crate::memory::MemoryBreakdown;
use crate::mesh::Topology;
use crate::model::params::count;
use crate::model::ModelSpec;
use crate::model::{Arch, MlpKind};
use crate::parallelism::TrainConfig;
use crate::parallelism::{FlopConvention, Framework, Overlap, Remat, RunSpec, Schedule, Unmapped};
use crate::step::calibrated::{
    predict_time, predict_time_detailed, predict_time_with, Detailed, Features, TimeBreakdown,
};
use crate::step::predict::{
    peak_memory, predict_prepared, prepare, price_step_s, Prediction, Prepared, RooflineFloor,
};
use crate::trace::NoTrace;

/// The model table shipped with the validation data (copy of
/// `shared/validation/playbook_models.toml`).
pub const PLAYBOOK_MODELS: &str = include_str!("playbook_models.toml");

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
    pub(crate) spec: RunSpec,
    /// `ok` or `oom_or_crash`.
    pub completed: bool,
    /// Measured seconds per step (completed runs).
    pub step_time_s: Option<f64>,
    /// Measured peak memory, GB.
    pub peak_mem_gb: Option<f64>,
    /// Measured MFU (fraction), under `mfu_convention`.
    pub mfu: Option<f64>,
    /// The FLOP convention of the measured MFU (Playbook: nanotron;
    /// published Megatron runs: megatron).
    pub mfu_convention: FlopConvention,
    /// A clean point for fitting and headline figures (Playbook: circle marker,
    /// consistent batch; published: has a step time).
    pub clean: bool,
    /// Pair key for recompute ratio checks (Korthikanti full vs selective).
    pub pair: Option<String>,
    /// Cluster network the run was measured on (`efa`, `infiniband`, or `""`
    /// when unknown), from [`network_of`]; selects the
    /// profile's network sub-profile.
    pub network: String,
    /// Named cluster the run was measured on (`playbook-efa` for the
    /// Playbook runs, `""` otherwise): selects the profile's cluster profile
    /// (`EfficiencyProfile::for_run` in `fidelity::profile`).
    pub cluster: String,
    /// An external-validation row (`"use": "validation-only"` in a
    /// published-runs JSON, e.g. `data/validation/external_runs.json`):
    /// compared with its prediction, never fitted on — `calibrate` refuses
    /// it and `validate`'s leave-one-source-out folds leave it out.
    pub validation_only: bool,
    /// How the run overlapped its communication, when its source states it
    /// (a published entry's `parallelism.tp_overlap` / `dp_overlap`, e.g.
    /// Megatron's `--disable-tp-comm-overlap-ag/-rs`: `none`); else the
    /// defaults every profile was fitted with.
    #[serde(skip_serializing_if = "is_default_overlap")]
    pub overlap: Overlap,
    /// The run made ready to price ([`Run::prepared`]): computed once, on
    /// first use, since a calibration prices every run thousands of times.
    #[serde(skip)]
    prepared: std::sync::OnceLock<Prepared>,
}

impl Run {
    /// An unmeasured run of `spec` on catalog chip `chip` (a user's
    /// question, or a test's): no measurement, completed, clean.
    pub(crate) fn of_spec(spec: RunSpec, chip: &str) -> Run {
        Run {
            id: "spec".into(),
            source: "user".into(),
            model: "model".into(),
            chip: chip.into(),
            nodes: 0,
            mfu_convention: FlopConvention::Model,
            spec,
            completed: true,
            step_time_s: None,
            peak_mem_gb: None,
            mfu: None,
            clean: true,
            pair: None,
            network: String::new(),
            cluster: String::new(),
            validation_only: false,
            overlap: Overlap::default(),
            prepared: Default::default(),
        }
    }

    /// An unmeasured run of `cfg` on model `arch` and catalog chip `chip`
    /// (a user's question, or a test's): the public way to describe one,
    /// with the configuration's FLOP convention and overlap; `Err` when the
    /// batch cannot be split into the configuration's micro-batches.
    pub fn of_config(arch: &Arch, cfg: &TrainConfig, chip: &str) -> Result<Run, Unmapped> {
        let spec = RunSpec::from_config(arch, count(arch, &mut NoTrace), cfg)?;
        Ok(Run {
            mfu_convention: cfg.flops,
            overlap: cfg.overlap,
            ..Run::of_spec(spec, chip)
        })
    }

    /// This row with the same model, measurement and conventions but the
    /// degrees, batch and schedule of `cfg` (the cached preparation is
    /// dropped); `Err` when `cfg` cannot be mapped onto a replica.
    pub fn with_config(&self, cfg: &TrainConfig) -> Result<Run, Unmapped> {
        let spec = RunSpec::from_config(&self.spec.arch, self.spec.params, cfg)?;
        Ok(self.with_spec(spec))
    }

    /// Predicted step time by part of the row as written, with the default
    /// [`Features`] (see [`Run::predict_time_with`]).
    pub fn predict_time(&self, chip: &Chip, p: &EfficiencyProfile) -> (TimeBreakdown, bool) {
        predict_time(&self.spec, chip, p)
    }

    /// Predicted step time by part of the row as written (no roofline floor,
    /// no plan gate: the calibrated pricer alone), with the compute dtype,
    /// attention mask and overlap of `f`, and whether the job is larger
    /// than the profile was fitted on.
    pub fn predict_time_with(
        &self,
        chip: &Chip,
        p: &EfficiencyProfile,
        f: &Features,
    ) -> (TimeBreakdown, bool) {
        predict_time_with(&self.spec, chip, p, f)
    }

    /// [`Run::predict_time_with`], and what its communication hid and
    /// exposed, the step's schedule and its inventory.
    pub fn predict_time_detailed(
        &self,
        chip: &Chip,
        p: &EfficiencyProfile,
        f: &Features,
    ) -> Detailed {
        predict_time_detailed(&self.spec, chip, p, f)
    }

    /// The row's model.
    pub fn arch(&self) -> &Arch {
        &self.spec.arch
    }

    /// Accelerators in the job as the row states them (at least the
    /// product of its degrees, which [`Run::topology`] lays out).
    pub fn n_gpus(&self) -> u64 {
        self.spec.n_gpus
    }

    /// Sequences per micro-batch on one replica (the data sets' `mbs`; the
    /// rest of the row's shape is in [`Run::config`]).
    pub fn micro_batch_sequences(&self) -> u64 {
        self.spec.mbs
    }

    /// This run with another configuration (the cached preparation is
    /// dropped: it described the old one).
    pub(crate) fn with_spec(&self, spec: RunSpec) -> Run {
        Run {
            spec,
            prepared: Default::default(),
            ..self.clone()
        }
    }

    /// The row as the training configuration `train` takes: the global
    /// batch `mbs·m·dp·T` tokens in `m` micro-batches, the row's degrees,
    /// ZeRO stage, recompute, SP and schedule under its framework, bf16
    /// mixed-precision Adam with fp32 master weights and moments (what the
    /// data sets ran), the MFU's FLOP convention, the run's overlap settings
    /// (the defaults unless its source states others).
    pub fn config(&self) -> TrainConfig {
        let s = &self.spec;
        TrainConfig {
            batch_tokens: s
                .mbs
                .saturating_mul(s.grad_acc)
                .saturating_mul(s.dp)
                .saturating_mul(s.seq_len),
            seq_len: s.seq_len,
            // the defaults' bf16 parameters, gradients, activations and
            // GEMMs and fp32 Adam moments, with fp32 master weights
            master_weights: true,
            remat: s.remat,
            flops: self.mfu_convention,
            framework: s.framework,
            degrees: s.degrees(),
            zero: s.zero,
            schedule: s.schedule,
            microbatches: s.grad_acc,
            virtual_stages: s.virtual_stages,
            sequence_parallel: s.sequence_parallel,
            overlap: self.overlap,
            ..TrainConfig::default()
        }
    }

    /// The row's GPUs in NVLink domains of the chip's size (a TPU row: one
    /// ring of its chips).
    pub fn topology(&self, chip: &Chip) -> Topology {
        let n = self.config().degrees.at_least_one().product();
        match chip.ici {
            Some(_) => Topology::Torus {
                slices: 1,
                shape: vec![n],
            },
            None => Topology::gpus(n, chip.nvlink.as_ref().map_or(1, |x| x.domain_size)),
        }
    }

    /// The row made ready to price on its chip, through the one gate
    /// `train` uses ([`crate::step::predict::prepare`]) with the roofline
    /// floor of its plan; computed once. A row the gate refuses (none of the
    /// shipped data sets) is priced as written, without a floor.
    pub fn prepared(&self, chip: &Chip) -> &Prepared {
        self.prepared.get_or_init(|| {
            let cfg = self.config();
            let topo = self.topology(chip);
            let spec = ModelSpec::custom(&self.model, self.spec.arch.clone());
            let floor = RooflineFloor::evaluate(&spec, chip, &topo, &cfg);
            prepare(
                &self.spec.arch,
                self.spec.params,
                chip,
                &cfg,
                &topo,
                chip.ici.is_some(),
                floor,
            )
            .unwrap_or_else(|_| Prepared {
                rs: self.spec.clone(),
                features: Features::default(),
                floor: RooflineFloor {
                    model_flops: floor.model_flops,
                    lower_s: 0.0,
                    offload: None,
                },
                cfg,
            })
        })
    }

    /// Predicted step time and peak memory of the row under `p`: the same
    /// [`crate::step::predict::price`] and memory model as `train`.
    pub fn predict(&self, chip: &Chip, p: &EfficiencyProfile) -> Prediction {
        predict_prepared(self.prepared(chip), chip, p)
    }

    /// Predicted seconds per step under `p` (a calibration's time loss).
    pub fn step_time(&self, chip: &Chip, p: &EfficiencyProfile) -> f64 {
        price_step_s(self.prepared(chip), chip, p)
    }

    /// Predicted peak memory under `p` (a calibration's memory loss).
    pub fn peak_memory(&self, chip: &Chip, p: &EfficiencyProfile) -> MemoryBreakdown {
        let prep = self.prepared(chip);
        peak_memory(&prep.rs.arch, &prep.rs.params, &prep.cfg, p)
    }
}

/// Whether `o` is the default overlap (then a run's JSON omits it).
fn is_default_overlap(o: &Overlap) -> bool {
    *o == Overlap::default()
}

/// The Ultra-Scale Playbook cluster (H100, AWS EFA, nanotron): its runs'
/// [`Run::cluster`].
pub const PLAYBOOK_CLUSTER: &str = "playbook-efa";

/// One entry of the Playbook model table.
#[derive(Deserialize)]
struct PlaybookModel {
    n_layers: u64,
    d_model: u64,
    d_ff: u64,
    n_heads: u64,
    n_kv_heads: u64,
    d_head: u64,
    vocab: u64,
    #[serde(default)]
    tied_embeddings: bool,
    #[serde(default)]
    mlp: Option<String>,
}

#[derive(Deserialize)]
struct PlaybookModels {
    models: BTreeMap<String, PlaybookModel>,
}

/// A dense Llama-style decoder of the data sets' dimensions.
#[allow(clippy::too_many_arguments)] // the book's symbols
fn dense(l: u64, d: u64, f: u64, n: u64, k: u64, h: u64, v: u64, tied: bool, gated: bool) -> Arch {
    let mut a = Arch::dense(l, d, f, n, k, h, v);
    a.tied_embeddings = tied;
    a.mlp = if gated {
        MlpKind::Gated
    } else {
        MlpKind::Plain
    };
    a
}

/// Parse the Playbook model table.
pub fn parse_playbook_models(src: &str) -> Result<BTreeMap<String, Arch>> {
    let t: PlaybookModels = toml::from_str(src).map_err(|e| perr("playbook_models.toml", e))?;
    Ok(t.models
        .into_iter()
        .map(|(k, m)| {
            let gated = m.mlp.as_deref() != Some("plain");
            let a = dense(
                m.n_layers,
                m.d_model,
                m.d_ff,
                m.n_heads,
                m.n_kv_heads,
                m.d_head,
                m.vocab,
                m.tied_embeddings,
                gated,
            );
            (k, a)
        })
        .collect())
}

/// Read a CSV with a header into serde rows, each with its 1-based line; a
/// cell that does not parse names its line and column.
fn csv_rows<T: DeserializeOwned>(src: &str, what: &str) -> Result<Vec<(usize, T)>> {
    let mut rd = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .flexible(true)
        .from_reader(src.as_bytes());
    let header = rd.headers().map_err(|e| perr(what, e))?.clone();
    let mut out = Vec::new();
    // the file's own line numbers (csv's skip blank lines): count newlines
    // up to each record's first byte, incrementally
    let (mut at, mut line) = (0usize, 1usize);
    for rec in rd.records() {
        let rec = rec.map_err(|e| perr(what, e))?;
        let bytes = src.as_bytes();
        // the position may point at the end of the previous line: step over it
        let mut start = rec
            .position()
            .map_or(at, |p| p.byte() as usize)
            .min(src.len());
        while start < bytes.len() && matches!(bytes[start], b'\n' | b'\r') {
            start += 1;
        }
        line += bytes[at.min(start)..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        at = start;
        let row = rec.deserialize(Some(&header)).map_err(|e| {
            let csv::ErrorKind::Deserialize { err, .. } = e.kind() else {
                return perr_at(what, line, None, e);
            };
            let field = err.field().and_then(|i| header.get(i as usize));
            let msg = match err.kind() {
                csv::DeserializeErrorKind::ParseInt(_)
                | csv::DeserializeErrorKind::ParseFloat(_) => {
                    format!("bad number `{}`", field_value(&rec, err.field()))
                }
                k => k.to_string(),
            };
            perr_at(what, line, field, msg)
        })?;
        out.push((line, row));
    }
    Ok(out)
}

fn field_value(rec: &csv::StringRecord, i: Option<u64>) -> String {
    i.and_then(|i| rec.get(i as usize))
        .unwrap_or("")
        .to_string()
}

/// A measured time or memory: finite and positive, else not measured (a zero
/// step time would make every relative error infinite).
fn fpos(s: Option<&str>) -> Option<f64> {
    s?.parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0)
}

/// ZeRO stage 0..=3 (checked before narrowing to `u8`, so 256 is not stage 0).
fn zero_stage(z: u64, what: &str, row: usize, col: &str) -> Result<u8> {
    u8::try_from(z).ok().filter(|z| *z <= 3).ok_or_else(|| {
        perr_at(
            what,
            row,
            Some(col),
            format!("ZeRO stage {z} is not 0, 1, 2 or 3"),
        )
    })
}

/// Reject a run the model cannot evaluate: a zero degree, batch or shape
/// dimension, or a DP·TP·PP beyond the GPUs (a stage split allocates one
/// entry per stage, so an unbounded PP would exhaust memory).
fn check_spec(spec: &RunSpec, what: &str, row: usize) -> Result<()> {
    let s = &spec.arch;
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

/// The Playbook CSV columns meshplan reads (the file has more).
#[derive(Deserialize)]
struct PlaybookRow {
    model: String,
    #[serde(rename = "Nodes")]
    nodes: u64,
    #[serde(rename = "MBS")]
    mbs: u64,
    #[serde(rename = "GradAcc")]
    grad_acc: u64,
    #[serde(rename = "DP")]
    dp: u64,
    #[serde(rename = "PP")]
    pp: u64,
    #[serde(rename = "TP")]
    tp: u64,
    #[serde(rename = "ZeRO")]
    zero: u64,
    gpu_mem_gb: Option<String>,
    status: String,
    seq_len: u64,
    n_gpus: u64,
    figure_marker: Option<String>,
    batch_consistent: Option<String>,
    step_time_s: Option<String>,
    mfu_recomputed_pct: Option<String>,
}

/// A run spec with the defaults the data sets share (no cp/ep/fsdp, 1F1B),
/// once the model is known to be valid (its parameters are counted here).
fn run_spec(arch: Arch, framework: Framework, what: &str, row: usize) -> Result<RunSpec> {
    // the model's own check, its field named as the data names it
    // ("n_layers (L)" → `n_layers`)
    arch.validate().map_err(|e| match e {
        Error::InvalidModel { field, reason } => {
            perr_at(what, row, field.split(' ').next(), reason)
        }
        e => perr_at(what, row, None, e),
    })?;
    let params = count(&arch, &mut NoTrace);
    Ok(RunSpec {
        arch,
        params,
        n_gpus: 1,
        dp: 1,
        tp: 1,
        pp: 1,
        cp: 1,
        zero: 0,
        mbs: 1,
        grad_acc: 1,
        seq_len: 1,
        remat: Remat::None,
        sequence_parallel: false,
        schedule: Schedule::OneFOneB,
        virtual_stages: 1,
        stage_layers: crate::parallelism::pipeline::StageLayers::EVEN,
        cp_comm: crate::parallelism::CpComm::Ring,
        framework,
        ep: 1,
        etp: 0,
        order: crate::parallelism::RankOrder::PipelineOuter,
        fsdp: 1,
    })
}

/// Parse `playbook_h100_runs.csv` (every row, completed or not).
pub fn parse_playbook_csv(src: &str, models_toml: &str) -> Result<Vec<Run>> {
    const WHAT: &str = "playbook csv";
    let models = parse_playbook_models(models_toml)?;
    let mut out = Vec::new();
    for (line, r) in csv_rows::<PlaybookRow>(src, WHAT)? {
        let arch = models.get(&r.model).cloned().ok_or_else(|| {
            perr_at(
                WHAT,
                line,
                Some("model"),
                format!("unknown model {}", r.model),
            )
        })?;
        let completed = r.status == "ok";
        let spec = RunSpec {
            n_gpus: r.n_gpus,
            dp: r.dp,
            tp: r.tp,
            pp: r.pp,
            zero: zero_stage(r.zero, WHAT, line, "ZeRO")?,
            mbs: r.mbs,
            grad_acc: r.grad_acc,
            seq_len: r.seq_len,
            sequence_parallel: true,
            ..run_spec(arch, Framework::Nanotron, WHAT, line)?
        };
        check_spec(&spec, WHAT, line)?;
        let measured = |s: &Option<String>| if completed { fpos(s.as_deref()) } else { None };
        out.push(Run {
            id: format!("playbook:{line}"),
            source: "playbook".into(),
            model: r.model,
            chip: "h100".into(),
            nodes: r.nodes,
            completed,
            step_time_s: measured(&r.step_time_s),
            peak_mem_gb: measured(&r.gpu_mem_gb),
            mfu: if completed {
                r.mfu_recomputed_pct
                    .as_deref()
                    .and_then(|x| x.parse::<f64>().ok())
                    .filter(|x| x.is_finite())
                    .map(|x| x / 100.0)
            } else {
                None
            },
            mfu_convention: FlopConvention::Nanotron,
            clean: completed
                && r.figure_marker.as_deref() == Some("circle")
                && r.batch_consistent.as_deref() == Some("1"),
            pair: None,
            // README: "communicating between nodes (EFA)"
            network: "efa".into(),
            cluster: PLAYBOOK_CLUSTER.into(),
            validation_only: false,
            overlap: Overlap::default(),
            prepared: Default::default(),
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
        match published_entry(e)? {
            Ok(run) => out.push(run),
            Err(why) => skipped.push(why),
        }
    }
    Ok((out, skipped))
}

/// Whether a published `ffn_type` names a gated MLP ("SwiGLU", "GeGLU",
/// "gated"; not "non-gated", the shipped entries' GeLU text).
fn gated_ffn(ffn_type: &str) -> bool {
    let t = ffn_type.to_ascii_lowercase();
    t.contains("swiglu") || t.contains("geglu") || (t.contains("gated") && !t.contains("non-gated"))
}

/// The `"use"` value of a published entry that is compared, never fitted
/// on (an external-validation row).
pub const VALIDATION_ONLY: &str = "validation-only";

/// The catalog chip of a published entry: `hardware.catalog_chip` when
/// given (it must be a catalog name), else A100 in the chip text →
/// `a100-80gb`, anything else `h100` (the shipped data sets' rule).
fn published_chip(hw: &serde_json::Value, what: &str) -> Result<String> {
    if let Some(name) = hw["catalog_chip"].as_str() {
        let chip = crate::Catalog::builtin()
            .chip(name)
            .map_err(|e| perr_at(what, 0, Some("catalog_chip"), e))?;
        return Ok(chip.name.clone());
    }
    let text = hw["chip"].as_str().unwrap_or("");
    Ok(if text.contains("A100") {
        "a100-80gb"
    } else {
        "h100"
    }
    .to_string())
}

/// One published entry: `Ok(Err(why))` when it has no usable step time or batch.
fn published_entry(e: &serde_json::Value) -> Result<std::result::Result<Run, String>> {
    let id = e["id"].as_str().unwrap_or("?").to_string();
    let (m, par, w, me) = (
        &e["model"],
        &e["parallelism"],
        &e["workload"],
        &e["measured"],
    );
    let u = |x: &serde_json::Value| x.as_u64();
    let what = format!("published json `{id}`");
    let chip = published_chip(&e["hardware"], &what)?;
    let n = u(&e["hardware"]["count"]).unwrap_or(0);
    let (Some(gbs), Some(seq)) = (u(&w["global_batch_seqs"]), u(&w["seq_len"])) else {
        return Ok(Err(format!("{id}: no global batch")));
    };
    let d = u(&m["D"]).unwrap_or(0);
    let n_heads = u(&m["N"]).unwrap_or(1);
    let ffn = m["ffn_type"].as_str().unwrap_or("");
    let arch = dense(
        u(&m["L"]).unwrap_or(0),
        d,
        u(&m["F"]).unwrap_or(4 * d),
        n_heads,
        u(&m["K"]).unwrap_or(n_heads),
        u(&m["H"]).unwrap_or(d / n_heads.max(1)),
        u(&m["V"]).unwrap_or(51200),
        m["tied_embeddings"].as_bool().unwrap_or(false),
        gated_ffn(ffn),
    );
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
    } else if rc.starts_with("after-matmuls") {
        Remat::AfterMatmuls
    } else {
        Remat::None
    };
    let vst = u(&par["virtual_pipeline_stages"]).unwrap_or(1);
    let megatron_core = id.starts_with("mcore");
    // an entry may name its framework (`"framework": "torchtitan"`, the
    // names `--framework` takes); else Korthikanti et al. 2022 ran
    // Megatron-LM before FlashAttention, the others Megatron-Core
    let framework = match e["framework"].as_str() {
        Some(f) => Framework::parse(f).map_err(|err| perr_at(&what, 0, Some("framework"), err))?,
        None if id.starts_with("kor22") => Framework::Megatron2022,
        None => Framework::Megatron,
    };
    let zero = match u(&par["zero_stage"]) {
        Some(z) => zero_stage(z, &what, 0, "zero_stage")?,
        None if megatron_core => 1,
        None => 0,
    };
    let spec = RunSpec {
        n_gpus: n,
        dp,
        tp,
        pp,
        cp: u(&par["CP"]).unwrap_or(1),
        // a hybrid-sharding group (PyTorch HSDP: shard inside `FSDP` ranks,
        // replicate across the rest; with ZeRO < 3), as the calibration
        // CSV's `fsdp` column
        fsdp: u(&par["FSDP"]).unwrap_or(1),
        zero,
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
        stage_layers: crate::parallelism::pipeline::StageLayers::EVEN,
        cp_comm: crate::parallelism::CpComm::Ring,
        ..run_spec(arch, framework, &what, 0)?
    };
    // the same checks as a CSV row (no line numbers in this JSON: the id names it)
    check_spec(&spec, &what, 0)?;
    // overlap settings the source states (absent: the fitted defaults)
    let overlap = Overlap::parse(
        par["tp_overlap"].as_str(),
        par["dp_overlap"].as_str(),
        par["sp_allgather"].as_str(),
    )
    .map_err(|err| perr_at(&what, 0, Some("parallelism"), err))?;
    // `train`'s rule: the userbuffers overlap chunks the SP collectives
    // (a row the gate refuses would be priced with the defaults instead)
    if overlap.tp == crate::parallelism::TpOverlap::Pipelined
        && spec.tp > 1
        && !spec.sequence_parallel
    {
        return Err(perr_at(
            &what,
            0,
            Some("tp_overlap"),
            "tp_overlap = pipelined needs sequence parallelism with tp > 1",
        ));
    }
    let tokens = spec.tokens_per_step();
    let meg = crate::accounting::megatron_per_token(&spec.arch, seq) * tokens;
    // a measured iteration time, else the one the published throughput
    // implies: tokens per step / (tokens/s per GPU · GPUs), or Megatron's
    // model FLOPs per step / (model TFLOP/s per GPU · GPUs)
    let step = match me["iteration_time_s"].as_f64() {
        Some(t) => Some(t),
        None => match me["tokens_per_s_per_gpu"].as_f64() {
            Some(tps) => Some(tokens / (tps * n as f64)),
            None => me["model_tflops_per_gpu"]
                .as_f64()
                .map(|tf| meg / (n as f64 * tf * 1e12)),
        },
    }
    .filter(|t| t.is_finite() && *t > 0.0);
    let Some(step) = step else {
        return Ok(Err(format!("{id}: no step time or throughput")));
    };
    // the peaks the shipped tables' MFU used (Megatron-Core: 989 TFLOP/s on
    // H100, Korthikanti et al.: 312 on A100); the catalog's bf16 peak else
    let peak = match chip.as_str() {
        "h100" => 989e12,
        "a100-80gb" => 312e12,
        c => crate::Catalog::builtin()
            .chip(c)
            .map_or(f64::NAN, |c| c.flops(crate::units::DType::Bf16).get()),
    };
    let pair = id
        .strip_suffix("-full")
        .or_else(|| id.strip_suffix("-seqsel"))
        .map(str::to_string);
    let network = published_network(e["hardware"]["interconnect"].as_str(), &chip);
    Ok(Ok(Run {
        source: id.split('-').next().unwrap_or("published").to_string(),
        model: m["name"].as_str().unwrap_or("?").to_string(),
        chip,
        nodes: n.div_ceil(8),
        spec,
        completed: true,
        step_time_s: Some(step),
        peak_mem_gb: None,
        mfu: Some(meg / (step * n as f64 * peak)),
        mfu_convention: FlopConvention::Megatron,
        clean: true,
        pair,
        network,
        cluster: String::new(),
        validation_only: e["use"].as_str() == Some(VALIDATION_ONLY),
        overlap,
        prepared: Default::default(),
        id,
    }))
}

/// One row of the calibration CSV (`meshplan calibrate`), read and written
/// with the same serde struct. Columns, header required:
///
/// `model,n_layers,d_model,d_ff,n_heads,n_kv_heads,d_head,vocab,tied,n_gpus,dp,tp,pp,zero,mbs,grad_acc,seq_len,step_time_s,peak_mem_gb`
///
/// `model` may be a catalog name (then the shape columns may be empty; a
/// catalog MoE model brings its experts) or a label with the shape columns
/// filled (dense). Optional columns: `tied` (0/1), `remat`
/// (none/full/selective), `sp` (0/1, default 1 when tp > 1), `framework`
/// (nanotron/megatron, default nanotron), `cp`, `ep`, `fsdp` (default 1; ep
/// and fsdp count data-parallel ranks: each must divide dp·cp, ep needs a MoE
/// model; fsdp > 1 with zero < 3 is hybrid sharding), `peak_mem_gb`.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct CalibRow {
    /// Catalog name or label.
    pub model: Option<String>,
    /// L (with the other shape columns, when `model` is not a catalog name).
    pub n_layers: Option<u64>,
    /// D.
    pub d_model: Option<u64>,
    /// F.
    pub d_ff: Option<u64>,
    /// N.
    pub n_heads: Option<u64>,
    /// K (default N).
    pub n_kv_heads: Option<u64>,
    /// H (default D/N).
    pub d_head: Option<u64>,
    /// V.
    pub vocab: Option<u64>,
    /// Tied embeddings (0/1).
    pub tied: Option<u64>,
    /// GPUs.
    pub n_gpus: Option<u64>,
    /// Data-parallel ranks.
    pub dp: Option<u64>,
    /// Tensor parallel.
    pub tp: Option<u64>,
    /// Pipeline stages.
    pub pp: Option<u64>,
    /// Context parallel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cp: Option<u64>,
    /// Expert parallel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<u64>,
    /// Hybrid-sharding group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsdp: Option<u64>,
    /// ZeRO stage.
    pub zero: Option<u64>,
    /// Micro-batch size (sequences).
    pub mbs: Option<u64>,
    /// Gradient-accumulation steps.
    pub grad_acc: Option<u64>,
    /// Sequence length.
    pub seq_len: Option<u64>,
    /// Measured step time (s).
    pub step_time_s: Option<String>,
    /// Measured peak memory (GB).
    pub peak_mem_gb: Option<String>,
    /// Remat policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remat: Option<String>,
    /// Sequence parallelism (0/1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sp: Option<u64>,
    /// Framework.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
}

/// The columns of [`CalibRow`] `to_calibration_csv` writes.
pub const CALIB_COLUMNS: &str = "model,n_layers,d_model,d_ff,n_heads,n_kv_heads,d_head,vocab,tied,n_gpus,dp,tp,pp,zero,mbs,grad_acc,seq_len,step_time_s,peak_mem_gb";

/// The model of a calibration row: its shape columns, else the catalog.
fn calib_arch(r: &CalibRow, line: usize, lookup: &dyn Fn(&str) -> Option<Arch>) -> Result<Arch> {
    let need = |v: Option<u64>, n: &str| {
        v.ok_or_else(|| perr_at("calibration csv", line, Some(n), "missing or not a number"))
    };
    let model = r.model.as_deref().unwrap_or("custom");
    match r.n_layers {
        Some(l) => {
            let d = need(r.d_model, "d_model")?;
            let nh = need(r.n_heads, "n_heads")?;
            Ok(dense(
                l,
                d,
                need(r.d_ff, "d_ff")?,
                nh,
                r.n_kv_heads.unwrap_or(nh),
                r.d_head.unwrap_or(d / nh.max(1)),
                need(r.vocab, "vocab")?,
                r.tied == Some(1),
                true,
            ))
        }
        None => lookup(model).ok_or_else(|| {
            perr_at(
                "calibration csv",
                line,
                Some("model"),
                format!("unknown model `{model}` and no shape columns"),
            )
        }),
    }
}

/// Parse a calibration CSV; `lookup` resolves catalog model names.
pub fn parse_calibration_csv(
    src: &str,
    chip: &str,
    lookup: &dyn Fn(&str) -> Option<Arch>,
) -> Result<Vec<Run>> {
    const WHAT: &str = "calibration csv";
    let mut out = Vec::new();
    for (line, r) in csv_rows::<CalibRow>(src, WHAT)? {
        let arch = calib_arch(&r, line, lookup)?;
        let need = |v: Option<u64>, n: &str| {
            v.ok_or_else(|| perr_at(WHAT, line, Some(n), "missing or not a number"))
        };
        let tp = r.tp.unwrap_or(1);
        let n_gpus = need(r.n_gpus, "n_gpus")?;
        let framework = match r.framework.as_deref() {
            Some(f) => {
                Framework::parse(f).map_err(|e| perr_at(WHAT, line, Some("framework"), e))?
            }
            None => Framework::Nanotron,
        };
        let remat = match r.remat.as_deref() {
            Some(x) => Remat::parse(x).map_err(|e| perr_at(WHAT, line, Some("remat"), e))?,
            None => Remat::None,
        };
        let spec = RunSpec {
            n_gpus,
            dp: r.dp.unwrap_or(1),
            tp,
            pp: r.pp.unwrap_or(1),
            cp: r.cp.unwrap_or(1),
            zero: zero_stage(r.zero.unwrap_or(0), WHAT, line, "zero")?,
            mbs: need(r.mbs, "mbs")?,
            grad_acc: r.grad_acc.unwrap_or(1),
            seq_len: need(r.seq_len, "seq_len")?,
            remat,
            sequence_parallel: r.sp.map_or(tp > 1, |x| x == 1),
            ep: r.ep.unwrap_or(1),
            fsdp: r.fsdp.unwrap_or(1),
            ..run_spec(arch, framework, WHAT, line)?
        };
        check_spec(&spec, WHAT, line)?;
        let step = fpos(r.step_time_s.as_deref());
        out.push(Run {
            id: format!("calib:{line}"),
            source: "user".into(),
            model: r.model.unwrap_or_else(|| "custom".into()),
            chip: chip.into(),
            nodes: n_gpus.div_ceil(8),
            spec,
            completed: step.is_some(),
            step_time_s: step,
            peak_mem_gb: fpos(r.peak_mem_gb.as_deref()),
            mfu: None,
            mfu_convention: FlopConvention::Nanotron,
            clean: step.is_some(),
            pair: None,
            network: String::new(),
            cluster: String::new(),
            validation_only: false,
            overlap: Overlap::default(),
            prepared: Default::default(),
        });
    }
    Ok(out)
}

/// Write runs as a calibration CSV (used for synthetic round trips).
pub fn to_calibration_csv(runs: &[Run]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in runs {
        let (p, h) = (&r.spec, &r.spec.arch);
        let row = CalibRow {
            model: Some(r.model.clone()),
            n_layers: Some(h.n_layers),
            d_model: Some(h.d_model),
            d_ff: Some(h.d_ff),
            n_heads: Some(h.n_heads),
            n_kv_heads: Some(h.n_kv_heads),
            d_head: Some(h.d_head),
            vocab: Some(h.vocab),
            tied: Some(u64::from(h.tied_embeddings)),
            n_gpus: Some(p.n_gpus),
            dp: Some(p.dp),
            tp: Some(p.tp),
            pp: Some(p.pp),
            zero: Some(p.zero as u64),
            mbs: Some(p.mbs),
            grad_acc: Some(p.grad_acc),
            seq_len: Some(p.seq_len),
            step_time_s: r.step_time_s.map(|x| format!("{x:.6}")),
            peak_mem_gb: r.peak_mem_gb.map(|x| format!("{x:.4}")),
            ..CalibRow::default()
        };
        // a serialization error here would be a bug in CalibRow
        let _ = w.serialize(row);
    }
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// The network a published run was measured on: the one its interconnect
/// text names, else the chip's catalog scale-out ([`crate::hardware::Chip::default_network`]),
/// the default `train` prices the same configuration with — so a run whose
/// source does not name its network is validated as `train` would predict it.
fn published_network(interconnect: Option<&str>, chip: &str) -> String {
    match network_of(interconnect.unwrap_or("")) {
        "" => crate::Catalog::builtin()
            .chip(chip)
            .map_or(String::new(), |c| c.default_network().to_string()),
        named => named.to_string(),
    }
}

/// The network a free-text interconnect description names: `infiniband`,
/// `efa`, `roce`, or `""` when none is recognised. Rule (documented in
/// `docs/fidelity.md`): case-insensitive substring match, EFA first (an EFA
/// cluster text may mention InfiniBand-like verbs), then InfiniBand, then RoCE.
pub fn network_of(interconnect: &str) -> &'static str {
    let t = interconnect.to_ascii_lowercase();
    if t.contains("efa") {
        "efa"
    } else if t.contains("infiniband") || t.contains(" ib ") || t.contains("ndr") {
        "infiniband"
    } else if t.contains("roce") {
        "roce"
    } else {
        ""
    }
}
