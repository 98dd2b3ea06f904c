//! `meshplan plan train|infer`: search every parallelism for the best
//! training or serving plan (issue 5; docs/planner.md).
//!
//! Exit codes: 0 when the search ran — also when nothing fits (that verdict,
//! with what would fit, is the answer); 2 only for input that cannot be
//! understood (unknown model/chip, malformed scenario, bad units).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use meshplan_core::hardware::{fmt_shape, Chip};
use meshplan_core::inference::{self, InferReport};
use meshplan_core::mesh::Topology;
use meshplan_core::model::ModelSpec;
use meshplan_core::planner::infer::{InferPoint, InferReject};
use meshplan_core::planner::train::{axis_layout, leading_collective, nearby_chip_counts, Found};
use meshplan_core::planner::{
    ChipBudget, InferObjective, InferSearch, RejectReason, TrainObjective, TrainResult, TrainSearch,
};
use meshplan_core::trace::Recorder;
use meshplan_core::training::predicted::{active_profile, ActiveProfile};
use meshplan_core::training::{analyze, Optimizer, TrainConfig, TrainReport};
use meshplan_core::units::{fmt_int, fmt_si, parse_count, parse_seconds, sig4, DType};
use serde::Serialize;

use crate::common::{self, ExplainFormat};

/// Planner subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum PlanCmd {
    /// Search training plans: dp × fsdp × tp × pp × cp × ep, ZeRO, remat, schedule, microbatches, SP.
    Train(PlanTrainArgs),
    /// Search serving plans: slices, TP/2D-WS/EP, replicas, batch, dtypes; Pareto front and SLOs.
    Infer(PlanInferArgs),
}

/// Arguments of `meshplan plan train`.
#[derive(clap::Args, Debug)]
pub struct PlanTrainArgs {
    /// Scenario, model, chip, mesh or chip count.
    #[command(flatten)]
    pub target: common::TargetArgs,
    /// Global batch B in tokens ("4M", "16Mi").
    #[arg(long)]
    pub batch_tokens: Option<String>,
    /// Sequence length T.
    #[arg(long)]
    pub seq_len: Option<String>,
    /// time | cost | memory-headroom.
    #[arg(long, default_value = "time")]
    pub objective: String,
    /// Plans to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Optimizer: adam, adamw, sgd, sgd-momentum, adafactor.
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Keep an fp32 master copy of the weights.
    #[arg(long)]
    pub master_weights: bool,
    /// Ignore attention FLOPs (as the book's exercises do).
    #[arg(long)]
    pub no_attention: bool,
    /// Fraction of link bandwidth collectives achieve (default 1).
    #[arg(long)]
    pub comm_efficiency: Option<f64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Efficiency profile TOML (`meshplan calibrate` output) instead of the chip's built-in one.
    #[arg(long, value_name = "FILE")]
    pub hw_profile: Option<PathBuf>,
    /// One JSON object (keys in docs/quantities.md).
    #[arg(long)]
    pub json: bool,
    /// Print the derivation of the chosen plan.
    #[arg(long)]
    pub explain: bool,
    /// Print the derivation of the plan ranked N (1 = the best).
    #[arg(long, value_name = "N")]
    pub explain_rank: Option<usize>,
    /// Format of the derivation.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text, value_name = "FORMAT")]
    pub explain_format: ExplainFormat,
}

/// Arguments of `meshplan plan infer`.
#[derive(clap::Args, Debug)]
pub struct PlanInferArgs {
    /// Scenario TOML ([model], [hardware], [inference]); flags override it.
    #[arg(value_name = "SCENARIO")]
    pub scenario: Option<PathBuf>,
    /// Model (catalog name).
    #[arg(long)]
    pub model: Option<String>,
    /// Chip.
    #[arg(long)]
    pub hw: Option<String>,
    /// Exactly this many chips.
    #[arg(long, conflicts_with = "max_chips")]
    pub chips: Option<String>,
    /// Any slice up to this many chips.
    #[arg(long)]
    pub max_chips: Option<String>,
    /// Prompt tokens.
    #[arg(long)]
    pub prompt_len: Option<String>,
    /// Generated tokens per request.
    #[arg(long)]
    pub gen_len: Option<String>,
    /// Time-to-first-token SLO ("500ms").
    #[arg(long)]
    pub ttft_slo: Option<String>,
    /// Time-per-output-token SLO ("50ms").
    #[arg(long)]
    pub tpot_slo: Option<String>,
    /// throughput | cost | latency.
    #[arg(long, default_value = "throughput")]
    pub objective: String,
    /// Plans to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
    /// Print the derivation of the chosen plan.
    #[arg(long)]
    pub explain: bool,
    /// Print the derivation of the plan ranked N.
    #[arg(long, value_name = "N")]
    pub explain_rank: Option<usize>,
    /// Format of the derivation.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text, value_name = "FORMAT")]
    pub explain_format: ExplainFormat,
}

/// Run the command.
pub fn run(c: PlanCmd) -> Result<ExitCode> {
    match c {
        PlanCmd::Train(a) => run_train(a),
        PlanCmd::Infer(a) => run_infer(a),
    }
}

fn dtype(s: &Option<String>, d: DType, what: &str) -> Result<DType> {
    match s {
        Some(x) => DType::parse(x).with_context(|| format!("training.{what}")),
        None => Ok(d),
    }
}

/// A progress bar on stderr, shown only on a terminal, never with --json,
/// and only once the search has run for a moment.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    shown: AtomicBool,
    t0: Instant,
}

impl Progress {
    fn new(enabled: bool) -> Self {
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::hidden();
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "searching {bar:30} {pos}/{len} degree tuples ({elapsed})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Progress {
            bar,
            shown: AtomicBool::new(false),
            t0: Instant::now(),
        }
    }
    fn tick(&self, done: u64, total: u64) {
        let Some(b) = &self.bar else { return };
        if !self.shown.load(Ordering::Relaxed) {
            if self.t0.elapsed().as_millis() < 300 {
                return;
            }
            if !self.shown.swap(true, Ordering::Relaxed) {
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
        }
        b.set_length(total);
        b.set_position(done);
    }
    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

struct TrainInput {
    spec: ModelSpec,
    chip: Chip,
    topo: Option<Topology>,
    topo_problem: Option<String>,
    base: TrainConfig,
    profile: Option<ActiveProfile>,
}

/// The efficiency profile for `chip`: `--hw-profile FILE` when given, else the built-in one.
pub(crate) fn load_profile(
    chip: &Chip,
    file: Option<&std::path::Path>,
) -> Result<Option<ActiveProfile>> {
    let user = match file {
        Some(p) => Some((
            std::fs::read_to_string(p).with_context(|| format!("--hw-profile {}", p.display()))?,
            p.display().to_string(),
        )),
        None => None,
    };
    Ok(active_profile(
        chip,
        user.as_ref().map(|(t, f)| (t.as_str(), f.as_str())),
    )?)
}

fn train_input(a: &PlanTrainArgs) -> Result<TrainInput> {
    let cat = common::user_catalog()?;
    let sc = a.target.load()?;
    if sc.model.name.is_none() && !sc.model.has_overrides() {
        bail!("no model given: use --model NAME or a scenario with [model]");
    }
    let spec = sc.model.resolve(&cat)?;
    let chip = sc.hardware.resolve_chip(&cat)?;
    let chips_flag = a.target.chips.as_deref().map(parse_count).transpose()?;
    let mut topo_problem = None;
    let topo = match (
        &sc.hardware.mesh,
        chips_flag.or(sc.hardware.chips.map(|c| c.0)),
    ) {
        (Some(m), _) => Some(Topology::parse(&chip, m)?),
        (None, Some(0)) => bail!("--chips must be at least 1"),
        (None, Some(n)) => match &chip.ici {
            Some(ici) => {
                let hit = ici
                    .slice_shapes
                    .iter()
                    .find(|s| s.iter().product::<u64>() == n);
                match hit {
                    Some(s) => Some(Topology::Torus {
                        slices: 1,
                        shape: s.clone(),
                    }),
                    None => {
                        topo_problem = Some(format!(
                            "{} offers no slice of {n} chips (offered: {}); give --mesh SHAPE, or use one of those sizes",
                            chip.name,
                            ici.slice_shapes
                                .iter()
                                .map(|s| format!("{} = {}", fmt_shape(s), s.iter().product::<u64>()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                        None
                    }
                }
            }
            None => Some(Topology::gpus(
                n,
                chip.nvlink.as_ref().map_or(1, |x| x.domain_size),
            )),
        },
        (None, None) => bail!("give --chips N (or --mesh SHAPE for a TPU slice)"),
    };
    let t = &sc.training;
    let mut base = TrainConfig::default();
    base.batch_tokens = match &a.batch_tokens {
        Some(s) => parse_count(s).context("--batch-tokens")?,
        None => t.batch_tokens.map(|c| c.0).unwrap_or(base.batch_tokens),
    };
    base.seq_len = match &a.seq_len {
        Some(s) => parse_count(s).context("--seq-len")?,
        None => t.seq_len.map(|c| c.0).unwrap_or(base.seq_len),
    };
    if base.batch_tokens == 0 || base.seq_len == 0 {
        bail!("--batch-tokens and --seq-len must be at least 1");
    }
    base.param_dtype = dtype(&t.param_dtype, base.param_dtype, "param_dtype")?;
    base.grad_dtype = dtype(&t.grad_dtype, base.param_dtype, "grad_dtype")?;
    base.optimizer_dtype = dtype(&t.optimizer_dtype, base.optimizer_dtype, "optimizer_dtype")?;
    base.activation_dtype = dtype(
        &t.activation_dtype,
        base.activation_dtype,
        "activation_dtype",
    )?;
    if let Some(o) = a.optimizer.as_ref().or(t.optimizer.as_ref()) {
        base.optimizer = Optimizer::parse(o)?;
    }
    base.master_weights = a.master_weights || t.master_weights.unwrap_or(false);
    base.mfu = t.mfu;
    base.train_tokens = t.train_tokens.map(|c| c.0);
    base.causal = t.causal.unwrap_or(true);
    base.include_attention = !a.no_attention && t.include_attention.unwrap_or(true);
    if let Some(e) = a.comm_efficiency {
        if !(e > 0.0 && e <= 1.0) {
            bail!("--comm-efficiency must be in (0, 1], got {e}");
        }
        base.comm_efficiency = e;
    }
    let profile = load_profile(&chip, a.hw_profile.as_deref())?;
    Ok(TrainInput {
        spec,
        chip,
        topo,
        topo_problem,
        base,
        profile,
    })
}

#[derive(Serialize)]
struct PlanJson<'a> {
    rank: usize,
    score: f64,
    zero: u8,
    remat: meshplan_core::training::Remat,
    schedule: meshplan_core::training::Schedule,
    microbatches: u64,
    virtual_stages: u64,
    sequence_parallel: bool,
    axis_placement: Vec<(String, String)>,
    leading_collective: Option<String>,
    predicted_step_time_s: Option<f64>,
    predicted_mfu: Option<f64>,
    predicted_peak_memory_bytes: Option<f64>,
    #[serde(flatten)]
    report: &'a TrainReport,
}

#[derive(Serialize)]
struct TrainJson<'a> {
    model: &'a str,
    chip: &'a str,
    mesh: Option<String>,
    chips: u64,
    batch_tokens: u64,
    seq_len: u64,
    objective: TrainObjective,
    candidates: u64,
    evaluated: u64,
    degree_tuples: u64,
    fitting: u64,
    search_time_s: f64,
    ranked_by_prediction: bool,
    profile: Option<String>,
    prediction_note: Option<String>,
    rejected: serde_json::Map<String, serde_json::Value>,
    plans: Vec<PlanJson<'a>>,
    best_rejected: Option<PlanJson<'a>>,
    verdict: Option<String>,
    suggestions: Vec<String>,
}

fn leading(r: &TrainReport) -> Option<String> {
    leading_collective(r)
        .map(|c| format!("{} {}: {} ({})", c.kind, c.axis.name(), c.what, c.seconds))
}

fn plan_json<'a>(
    rank: usize,
    f: &Found,
    rep: &'a TrainReport,
    chip: &Chip,
    res: &TrainResult,
) -> PlanJson<'a> {
    PlanJson {
        rank,
        score: f.score(),
        zero: f.inner.zero,
        remat: f.inner.remat,
        schedule: f.inner.schedule,
        microbatches: f.inner.microbatches,
        virtual_stages: f.inner.virtual_stages,
        sequence_parallel: f.inner.sp,
        axis_placement: axis_layout(chip, &res.topologies[f.topo], f.deg)
            .into_iter()
            .map(|(a, d)| (a.name().to_string(), d))
            .collect(),
        leading_collective: leading(rep),
        predicted_step_time_s: f.pred.map(|p| p.step_time_s),
        predicted_mfu: f.pred.map(|p| p.mfu),
        predicted_peak_memory_bytes: f.pred.map(|p| p.peak_bytes),
        report: rep,
    }
}

fn remat_name(r: meshplan_core::training::Remat) -> &'static str {
    use meshplan_core::training::Remat::*;
    match r {
        None => "none",
        Full => "full",
        AfterMatmuls => "after-matmuls",
        Selective => "selective",
    }
}

fn sched_name(f: &Found) -> String {
    use meshplan_core::training::Schedule::*;
    if f.deg.pp <= 1 {
        return "-".into();
    }
    match f.inner.schedule {
        Afab => format!("gpipe m={}", f.inner.microbatches),
        OneFOneB => format!("1f1b m={}", f.inner.microbatches),
        Interleaved => format!(
            "interleaved m={} v={}",
            f.inner.microbatches, f.inner.virtual_stages
        ),
    }
}

/// What would make something fit, found by searching again with one thing changed.
fn train_suggestions(inp: &TrainInput, topo: Option<&Topology>, a: &PlanTrainArgs) -> Vec<String> {
    let mut out = Vec::new();
    let run = |topo: Topology, base: TrainConfig| -> Option<(TrainResult, TrainSearch)> {
        let mut s = TrainSearch::new(&inp.spec, &inp.chip, topo, base);
        s.profile.clone_from(&inp.profile);
        s.top_k = 1;
        s.threads = a.threads;
        let r = s.run();
        if r.plans.is_empty() {
            None
        } else {
            Some((r, s))
        }
    };
    let n = topo.map_or(
        a.target
            .chips
            .as_deref()
            .and_then(|c| parse_count(c).ok())
            .unwrap_or(1),
        |t| t.chips(),
    );
    // more chips
    for m in nearby_chip_counts(&inp.chip, n) {
        let t = match &inp.chip.ici {
            Some(ici) => match ici
                .slice_shapes
                .iter()
                .find(|s| s.iter().product::<u64>() == m)
            {
                Some(s) => Topology::Torus {
                    slices: 1,
                    shape: s.clone(),
                },
                None => continue,
            },
            None => Topology::gpus(m, inp.chip.nvlink.as_ref().map_or(1, |x| x.domain_size)),
        };
        if let Some((r, s)) = run(t.clone(), inp.base.clone()) {
            let f = &r.plans[0];
            out.push(format!(
                "more chips: {} ({}) fits, best {} at {} per step",
                m,
                r.topologies[f.topo].describe(),
                deg_str(f),
                step_str(f, &s.report(&r, f))
            ));
            break;
        }
    }
    if let Some(t) = topo {
        // smaller batch
        let mut b = inp.base.batch_tokens / 2;
        while b >= inp.base.seq_len.max(1) && b > 0 {
            let base = TrainConfig {
                batch_tokens: b,
                ..inp.base.clone()
            };
            if let Some((r, _)) = run(t.clone(), base) {
                out.push(format!(
                    "smaller batch: {} tokens fits ({})",
                    fmt_int(b),
                    deg_str(&r.plans[0])
                ));
                break;
            }
            b /= 2;
        }
        // lower precision of the optimizer state, no master copy
        if inp.base.optimizer_dtype.bytes_per_element() > 2.0 || inp.base.master_weights {
            let base = TrainConfig {
                optimizer_dtype: DType::Bf16,
                master_weights: false,
                ..inp.base.clone()
            };
            if let Some((r, _)) = run(t.clone(), base) {
                out.push(format!(
                    "lower precision: bf16 optimizer state (no fp32 master copy) fits ({})",
                    deg_str(&r.plans[0])
                ));
            }
        }
        if out.is_empty() {
            out.push("every remat policy and ZeRO stage was already tried; none of more chips (up to the next 4 sizes), a batch down to one sequence, or bf16 optimizer state makes it fit".into());
        }
    }
    out
}

fn deg_str(f: &Found) -> String {
    let d = f.deg;
    let mut v = Vec::new();
    for (n, x) in [
        ("dp", d.dp),
        ("fsdp", d.fsdp),
        ("tp", d.tp),
        ("pp", d.pp),
        ("cp", d.cp),
        ("ep", d.ep),
    ] {
        if x > 1 {
            v.push(format!("{n} {x}"));
        }
    }
    if v.is_empty() {
        v.push("1 chip".into());
    }
    format!(
        "{}, zero {}, remat {}",
        v.join(" × "),
        f.inner.zero,
        remat_name(f.inner.remat)
    )
}

/// Step time of a plan: the prediction when there is one, else the roofline lower bound.
fn step_str(f: &Found, r: &TrainReport) -> String {
    match f.pred {
        Some(p) => format!(
            "{} (predicted; roofline ≥ {})",
            fmt_si(p.step_time_s, "s"),
            fmt_si(r.step_time_lower_s.get(), "s")
        ),
        None => fmt_si(r.step_time_lower_s.get(), "s"),
    }
}

/// What the best rejected plan needs to fit (activations scale with the batch).
fn fix_for(f: &Found, hbm: f64, batch: u64) -> String {
    let e = &f.eval;
    if let Some(p) = f.pred.filter(|p| !p.fits && e.fits) {
        return format!(
            "its roofline memory ({}) fits, but the predicted peak memory ({}, fidelity model: fp32 gradient buffer, logits, runtime reserve) exceeds the usable HBM — shard more (higher fsdp/ZeRO/tp/pp) or save fewer activations",
            fmt_si(e.total_bytes, "B"),
            fmt_si(p.peak_bytes, "B")
        );
    }
    let over = e.total_bytes - hbm;
    if e.static_bytes >= hbm {
        format!(
            "needs {} less per chip: its parameters, gradients and optimizer state alone ({}) exceed the {} of HBM — shard more (higher fsdp/ZeRO/tp/pp) or lower their precision",
            fmt_si(over, "B"),
            fmt_si(e.static_bytes, "B"),
            fmt_si(hbm, "B")
        )
    } else {
        let b_max = batch as f64 * (hbm - e.static_bytes) / e.activation_bytes;
        format!(
            "needs {} less per chip: fits with a batch of at most {} tokens (activations scale with B), or with a remat policy that saves fewer activations",
            fmt_si(over, "B"),
            fmt_int(b_max.floor() as u64)
        )
    }
}

fn run_train(a: PlanTrainArgs) -> Result<ExitCode> {
    let inp = train_input(&a)?;
    let objective = TrainObjective::parse(&a.objective)?;
    let Some(topo) = inp.topo.clone() else {
        let verdict = inp.topo_problem.clone().unwrap_or_default();
        let sugg = train_suggestions(&inp, None, &a);
        if a.json {
            common::print_json(&serde_json::json!({
                "model": inp.spec.name, "chip": inp.chip.name, "plans": [], "rejected": {},
                "candidates": 0, "evaluated": 0, "search_time_s": 0.0,
                "verdict": verdict, "suggestions": sugg,
            }))?;
        } else {
            outln!("No plan: {verdict}");
            for s in sugg {
                outln!("  - {s}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let mut s = TrainSearch::new(&inp.spec, &inp.chip, topo.clone(), inp.base.clone());
    s.profile.clone_from(&inp.profile);
    s.objective = objective;
    s.top_k = a.top.max(1).max(a.explain_rank.unwrap_or(0));
    s.threads = a.threads;
    let prog = Progress::new(!a.json);
    let res = s.run_with_progress(&|d, t| prog.tick(d, t));
    prog.finish();
    let hbm = inp.chip.hbm_capacity.get() * inp.base.hbm_usable_fraction;

    // explain
    if a.explain || a.explain_rank.is_some() {
        let rank = a.explain_rank.unwrap_or(1);
        let Some(f) = res.plans.get(rank.saturating_sub(1)) else {
            bail!(
                "--explain-rank {rank}: the search found {} plan(s)",
                res.plans.len()
            );
        };
        let mut rec = Recorder::default();
        let r = analyze(
            &inp.spec,
            &inp.chip,
            &res.topologies[f.topo],
            &f.config(&inp.base),
            &mut rec,
        );
        outln!(
            "Plan #{rank}: {} on {} — {}, {}",
            inp.spec.name,
            r.mesh,
            deg_str(f),
            sched_name(f)
        );
        out!("{}", common::render_steps(rec.steps(), a.explain_format));
        outln!();
        outln!(
            "memory {} per chip (fits: {}), step {} (lower) … {} (upper), bound: {}",
            r.memory_per_device.total_bytes,
            if r.fits { "yes" } else { "no" },
            r.step_time_lower_s,
            r.step_time_upper_s,
            r.bound
        );
        return Ok(ExitCode::SUCCESS);
    }

    let reports: Vec<TrainReport> = res
        .plans
        .iter()
        .take(a.top.max(1))
        .map(|f| s.report(&res, f))
        .collect();
    let best_rej = res.best_rejected.or(res.closest_rejected);
    let best_rej_report = best_rej.map(|f| s.report(&res, &f));
    let (verdict, suggestions) = if res.plans.is_empty() {
        let v = if !res.topology_reasons.is_empty() {
            format!(
                "no plan can run on {} {}: {}",
                inp.chip.name,
                topo.describe(),
                res.topology_reasons.join("; ")
            )
        } else if res.evaluated == 0 {
            format!(
                "no factorization of {} chips satisfies the model's divisibility and the topology ({})",
                topo.chips(),
                RejectReason::ALL
                    .iter()
                    .filter(|r| res.rejected_for(**r) > 0)
                    .map(|r| r.describe())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        } else {
            let c = res
                .closest_rejected
                .as_ref()
                .map(|f| fix_for(f, hbm, inp.base.batch_tokens))
                .unwrap_or_default();
            format!(
                "nothing fits in {} of HBM per chip: of {} feasible candidates none fits; the closest ({}) {}",
                fmt_si(hbm, "B"),
                fmt_int(res.evaluated),
                res.closest_rejected.as_ref().map(deg_str).unwrap_or_default(),
                c
            )
        };
        (Some(v), train_suggestions(&inp, Some(&topo), &a))
    } else {
        (None, Vec::new())
    };

    if a.json {
        let mut rej = serde_json::Map::new();
        for r in RejectReason::ALL {
            rej.insert(r.key().into(), res.rejected_for(r).into());
        }
        let out = TrainJson {
            model: &inp.spec.name,
            chip: &inp.chip.name,
            mesh: Some(topo.describe()),
            chips: topo.chips(),
            batch_tokens: inp.base.batch_tokens,
            seq_len: inp.base.seq_len,
            objective,
            candidates: res.candidates,
            evaluated: res.evaluated,
            degree_tuples: res.tuples,
            fitting: res.fitting,
            search_time_s: res.elapsed.as_secs_f64(),
            ranked_by_prediction: res.predicted,
            profile: s
                .profile
                .as_ref()
                .filter(|_| res.predicted)
                .map(|p| format!("{} ({})", p.profile.chip, p.origin)),
            prediction_note: res.prediction_note.clone(),
            rejected: rej,
            plans: res
                .plans
                .iter()
                .zip(&reports)
                .enumerate()
                .map(|(i, (f, r))| plan_json(i + 1, f, r, &inp.chip, &res))
                .collect(),
            best_rejected: match (&best_rej, &best_rej_report) {
                (Some(f), Some(r)) => Some(plan_json(0, f, r, &inp.chip, &res)),
                _ => None,
            },
            verdict,
            suggestions,
        };
        common::print_json(&out)?;
        return Ok(ExitCode::SUCCESS);
    }

    outln!(
        "{} on {} {} ({} chips), batch {} tokens × seq {}, objective {}",
        inp.spec.name,
        inp.chip.name,
        topo.describe(),
        fmt_int(topo.chips()),
        fmt_int(inp.base.batch_tokens),
        fmt_int(inp.base.seq_len),
        a.objective
    );
    outln!(
        "searched {} candidates ({} evaluated over {} degree tuples{}) in {}; {} fit",
        fmt_int(res.candidates),
        fmt_int(res.evaluated),
        fmt_int(res.tuples),
        if res.topologies.len() > 1 {
            format!(", {} axis orders", res.topologies.len())
        } else {
            String::new()
        },
        fmt_si(res.elapsed.as_secs_f64(), "s"),
        fmt_int(res.fitting)
    );
    match (&res.prediction_note, &s.profile) {
        (Some(n), _) => outln!("note: {n}"),
        (None, Some(p)) => {
            outln!(
                "ranked by predicted step time (efficiency profile {}, {}); MFU (pred.) is a prediction; 'step ≥' is the roofline lower bound",
                p.profile.chip, p.origin
            );
            let nodes = s.chip.nvlink.as_ref().map_or(1, |n| n.domain_size.max(1));
            let max = p.profile.calibrated_max_nodes;
            if max > 0 && s.topology.chips().div_ceil(nodes) > max {
                outln!(
                    "note: {} nodes is beyond the {max} nodes this profile was fitted on; its job-size terms are held at {max} nodes — treat predicted times as indicative (see docs/fidelity.md)",
                    s.topology.chips().div_ceil(nodes)
                );
            }
        }
        (None, None) => {}
    }
    let pred = res.predicted;
    if !reports.is_empty() {
        let mut rows = vec![vec![
            "#".to_string(),
            "mesh".into(),
            "dp".into(),
            "fsdp".into(),
            "tp".into(),
            "pp".into(),
            "cp".into(),
            "ep".into(),
            "zero".into(),
            "remat".into(),
            "pipeline".into(),
            "sp".into(),
            if pred { "mem/chip (pred.)" } else { "mem/chip" }.into(),
            if pred { "step (pred.)" } else { "step" }.into(),
            if pred { "step ≥" } else { "" }.into(),
            if pred { "MFU (pred.)" } else { "MFU" }.into(),
            "bound".into(),
            "leading collective".into(),
        ]];
        for (i, (f, r)) in res.plans.iter().zip(&reports).enumerate() {
            let d = f.deg;
            rows.push(vec![
                (i + 1).to_string(),
                r.mesh.clone(),
                d.dp.to_string(),
                d.fsdp.to_string(),
                d.tp.to_string(),
                d.pp.to_string(),
                d.cp.to_string(),
                d.ep.to_string(),
                f.inner.zero.to_string(),
                remat_name(f.inner.remat).into(),
                sched_name(f),
                if f.inner.sp { "yes" } else { "-" }.into(),
                match f.pred {
                    Some(p) => fmt_si(p.peak_bytes, "B"),
                    None => fmt_si(r.memory_per_device.total_bytes.get(), "B"),
                },
                match f.pred {
                    Some(p) => fmt_si(p.step_time_s, "s"),
                    None => fmt_si(r.step_time_lower_s.get(), "s"),
                },
                if pred {
                    fmt_si(r.step_time_lower_s.get(), "s")
                } else {
                    String::new()
                },
                match f.pred {
                    Some(p) => format!("{:.1}%", 100.0 * p.mfu),
                    None => format!("{:.1}%", 100.0 * r.mfu_at_lower_bound),
                },
                r.bound.clone(),
                leading_collective(r)
                    .map(|c| format!("{} {} ({})", c.kind, c.axis.name(), c.seconds))
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        let right: &[usize] = if pred {
            &[0, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15]
        } else {
            // no prediction: drop the empty roofline column
            for r in rows.iter_mut() {
                r.remove(14);
            }
            &[0, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14]
        };
        out!("{}", common::render_table(&rows, right));
    }
    let rej: Vec<String> = RejectReason::ALL
        .iter()
        .filter(|r| res.rejected_for(**r) > 0)
        .map(|r| format!("{} ({})", fmt_int(res.rejected_for(*r)), r.describe()))
        .collect();
    if !rej.is_empty() {
        outln!("rejected: {}", rej.join("; "));
    }
    if let (Some(f), Some(r)) = (&best_rej, &best_rej_report) {
        if !res.plans.is_empty() {
            outln!(
                "best rejected plan: {} on {} — {} per step, {} per chip: {}",
                deg_str(f),
                r.mesh,
                step_str(f, r),
                fmt_si(r.memory_per_device.total_bytes.get(), "B"),
                fix_for(f, hbm, inp.base.batch_tokens)
            );
        }
    }
    if let Some(v) = verdict {
        outln!("VERDICT: {v}");
        for s in suggestions {
            outln!("  - {s}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

// ------------------------------------------------------------------ infer

#[derive(Serialize)]
struct InferPlanJson<'a> {
    rank: usize,
    #[serde(flatten)]
    report: &'a InferReport,
}

fn run_infer(a: PlanInferArgs) -> Result<ExitCode> {
    let cat = common::user_catalog()?;
    let mut sc = common::scenario(a.scenario.as_deref())?;
    if let Some(m) = &a.model {
        sc.model.name = Some(m.clone());
    }
    if let Some(h) = &a.hw {
        sc.hardware.chip = Some(h.clone());
    }
    if sc.model.name.is_none() && !sc.model.has_overrides() {
        bail!("no model given: use --model NAME or a scenario with [model]");
    }
    let spec = sc.model.resolve(&cat)?;
    let chip = sc.hardware.resolve_chip(&cat)?;
    let budget = match (&a.chips, &a.max_chips) {
        (Some(c), _) => ChipBudget::Exactly(parse_count(c).context("--chips")?),
        (None, Some(c)) => ChipBudget::AtMost(parse_count(c).context("--max-chips")?),
        (None, None) => match sc.hardware.chips {
            Some(c) => ChipBudget::Exactly(c.0),
            None => bail!("give --chips N or --max-chips N"),
        },
    };
    let inf = &sc.inference;
    let cnt = |s: &Option<String>, f: Option<u64>, d: u64, w: &str| -> Result<u64> {
        match s {
            Some(v) => parse_count(v).with_context(|| format!("--{w}")),
            None => Ok(f.unwrap_or(d)),
        }
    };
    let mut s = InferSearch::new(&spec, &chip, budget);
    s.prompt_len = cnt(
        &a.prompt_len,
        inf.prompt_len.map(|c| c.0),
        2048,
        "prompt-len",
    )?;
    s.gen_len = cnt(&a.gen_len, inf.gen_len.map(|c| c.0), 512, "gen-len")?;
    if s.prompt_len == 0 || s.gen_len == 0 {
        bail!("--prompt-len and --gen-len must be at least 1");
    }
    s.ttft_slo = a
        .ttft_slo
        .as_deref()
        .map(parse_seconds)
        .transpose()?
        .map(|x| x.get());
    s.tpot_slo = a
        .tpot_slo
        .as_deref()
        .map(parse_seconds)
        .transpose()?
        .map(|x| x.get());
    s.objective = InferObjective::parse(&a.objective)?;
    s.top_k = a.top.max(1).max(a.explain_rank.unwrap_or(0));
    s.mfu = inf.mfu.unwrap_or(1.0);
    let res = s.run();

    if a.explain || a.explain_rank.is_some() {
        let rank = a.explain_rank.unwrap_or(1);
        let Some(p) = res.plans.get(rank.saturating_sub(1)) else {
            bail!(
                "--explain-rank {rank}: the search found {} plan(s)",
                res.plans.len()
            );
        };
        let mut rec = Recorder::default();
        inference::evaluate(&spec, &chip, &p.query(&s), &mut rec)?;
        outln!("Plan #{rank}: {}", point_str(p));
        out!("{}", common::render_steps(rec.steps(), a.explain_format));
        return Ok(ExitCode::SUCCESS);
    }
    let reports: Vec<InferReport> = res
        .plans
        .iter()
        .take(a.top.max(1))
        .filter_map(|p| s.report(p).ok())
        .collect();
    let verdict = if res.plans.is_empty() {
        Some(if !res.slice_reasons.is_empty() {
            res.slice_reasons.join("; ")
        } else if res.fitting == 0 {
            format!(
                "{} does not fit on any layout of {}: the weights plus one {}-token sequence exceed HBM even at int8; use more chips (≥ {} by memory alone) or a smaller context",
                spec.name,
                chip.name,
                s.prompt_len + s.gen_len,
                min_chips(&spec, &chip)
            )
        } else {
            let fastest = res.pareto.first();
            format!(
                "{} layouts fit but none meets the SLOs; the lowest TPOT reachable is {} (TTFT {}) — relax the SLOs or add chips",
                fmt_int(res.fitting),
                fastest.map_or("?".into(), |p| fmt_si(p.tpot_s, "s")),
                fastest.map_or("?".into(), |p| fmt_si(p.ttft_s, "s")),
            )
        })
    } else {
        None
    };
    if a.json {
        let mut rej = serde_json::Map::new();
        for r in InferReject::ALL {
            rej.insert(r.key().into(), res.rejected_for(r).into());
        }
        common::print_json(&serde_json::json!({
            "model": spec.name,
            "chip": chip.name,
            "objective": s.objective,
            "prompt_len": s.prompt_len,
            "gen_len": s.gen_len,
            "ttft_slo_s": s.ttft_slo,
            "tpot_slo_s": s.tpot_slo,
            "slices": res.slices.iter().map(|x| fmt_shape(x)).collect::<Vec<_>>(),
            "candidates": res.candidates,
            "fitting": res.fitting,
            "search_time_s": res.elapsed.as_secs_f64(),
            "rejected": rej,
            "plans": reports.iter().enumerate().map(|(i, r)| InferPlanJson { rank: i + 1, report: r }).collect::<Vec<_>>(),
            "pareto": res.pareto,
            "verdict": verdict,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} on {} ({}), prompt {} + generate {} tokens, objective {}{}{}",
        spec.name,
        chip.name,
        match budget {
            ChipBudget::Exactly(n) => format!("{n} chips"),
            ChipBudget::AtMost(n) => format!("up to {n} chips"),
        },
        s.prompt_len,
        s.gen_len,
        a.objective,
        s.ttft_slo
            .map_or(String::new(), |x| format!(", TTFT ≤ {}", fmt_si(x, "s"))),
        s.tpot_slo
            .map_or(String::new(), |x| format!(", TPOT ≤ {}", fmt_si(x, "s"))),
    );
    outln!(
        "searched {} candidates over {} slice shape(s) in {}; {} fit",
        fmt_int(res.candidates),
        res.slices.len(),
        fmt_si(res.elapsed.as_secs_f64(), "s"),
        fmt_int(res.fitting)
    );
    let header = || {
        vec![
            "#".to_string(),
            "mesh".into(),
            "tp".into(),
            "ep".into(),
            "replicas".into(),
            "layout".into(),
            "weights".into(),
            "kv".into(),
            "batch".into(),
            "TPOT".into(),
            "TTFT".into(),
            "tok/s/chip".into(),
            "$/Mtok".into(),
        ]
    };
    let row = |i: usize, p: &InferPoint| {
        vec![
            i.to_string(),
            fmt_shape(&p.mesh),
            p.tp.to_string(),
            p.ep.to_string(),
            p.replicas.to_string(),
            serde_json::to_value(p.sharding)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            p.weights_dtype.name().into(),
            p.kv_dtype.name().into(),
            p.batch.to_string(),
            fmt_si(p.tpot_s, "s"),
            fmt_si(p.ttft_s, "s"),
            sig4(p.tokens_per_s_per_chip),
            p.cost_per_million_tokens_usd.map_or("-".into(), sig4),
        ]
    };
    if !res.plans.is_empty() {
        let mut rows = vec![header()];
        for (i, p) in res.plans.iter().enumerate() {
            rows.push(row(i + 1, p));
        }
        out!(
            "{}",
            common::render_table(&rows, &[0, 2, 3, 4, 8, 9, 10, 11, 12])
        );
    }
    outln!(
        "Pareto front (TPOT vs tokens/s per chip, all fitting points): {} points",
        res.pareto.len()
    );
    let mut rows = vec![header()];
    let step = (res.pareto.len() / 8).max(1);
    for (i, p) in res
        .pareto
        .iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0 || *i + 1 == res.pareto.len())
    {
        rows.push(row(i + 1, p));
    }
    if rows.len() > 1 {
        out!(
            "{}",
            common::render_table(&rows, &[0, 2, 3, 4, 8, 9, 10, 11, 12])
        );
    }
    let rej: Vec<String> = InferReject::ALL
        .iter()
        .filter(|r| res.rejected_for(**r) > 0)
        .map(|r| format!("{} ({})", fmt_int(res.rejected_for(*r)), r.describe()))
        .collect();
    if !rej.is_empty() {
        outln!("rejected: {}", rej.join("; "));
    }
    if let Some(v) = verdict {
        outln!("VERDICT: {v}");
    }
    Ok(ExitCode::SUCCESS)
}

fn point_str(p: &InferPoint) -> String {
    format!(
        "{} tp {} ep {} × {} replicas, {:?}, weights {} kv {}, batch {}",
        fmt_shape(&p.mesh),
        p.tp,
        p.ep,
        p.replicas,
        p.sharding,
        p.weights_dtype.name(),
        p.kv_dtype.name(),
        p.batch
    )
}

fn min_chips(spec: &ModelSpec, chip: &Chip) -> u64 {
    let p = meshplan_core::model::params::count(&spec.arch, &mut meshplan_core::trace::NoTrace);
    let w = p.total as f64; // int8: one byte per parameter
    (w / chip.hbm_capacity.get()).ceil().max(1.0) as u64
}
