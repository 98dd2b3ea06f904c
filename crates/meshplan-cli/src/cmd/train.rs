//! `meshplan train`: memory per device, collectives, step time and the book's
//! verdicts for one training configuration.
//!
//! Exit codes: 0 when the analysis ran (also when the configuration is
//! infeasible or does not fit: that is the answer, printed with its reasons and
//! `"feasible": false` / `"fits": false` in JSON); 2 only for input that
//! cannot be understood (unknown model/chip, malformed scenario, bad units).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::training::scenario::{resolve, TrainSetup};
use meshplan_core::training::{analyze, predicted, TrainReport};
use meshplan_core::units::{fmt_si, sig4};

use crate::common::{self, ExplainFormat};

/// Arguments of `meshplan train`.
#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// Scenario, model, chip, mesh or chip count.
    #[command(flatten)]
    pub target: common::TargetArgs,
    /// Global batch B in tokens ("3M", "16Mi").
    #[arg(long)]
    pub batch_tokens: Option<String>,
    /// Sequence length T ("32Ki" = 32,768).
    #[arg(long)]
    pub seq_len: Option<String>,
    /// Data-parallel degree.
    #[arg(long)]
    pub dp: Option<u64>,
    /// FSDP degree.
    #[arg(long)]
    pub fsdp: Option<u64>,
    /// Tensor-parallel degree.
    #[arg(long)]
    pub tp: Option<u64>,
    /// Pipeline stages.
    #[arg(long)]
    pub pp: Option<u64>,
    /// Context-parallel degree.
    #[arg(long)]
    pub cp: Option<u64>,
    /// Expert-parallel degree.
    #[arg(long)]
    pub ep: Option<u64>,
    /// Pipeline microbatches.
    #[arg(long)]
    pub microbatches: Option<u64>,
    /// Pipeline schedule: gpipe/afab, 1f1b, interleaved.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Virtual stages per device (interleaved).
    #[arg(long)]
    pub virtual_stages: Option<u64>,
    /// Activation checkpointing: none, full, after-matmuls, selective.
    #[arg(long)]
    pub remat: Option<String>,
    /// ZeRO stage over dp·cp (0–3).
    #[arg(long)]
    pub zero: Option<u64>,
    /// Model-FLOPs utilisation to quote the step time at (0–1).
    #[arg(long)]
    pub mfu: Option<f64>,
    /// Optimizer: adam, adamw, sgd, sgd-momentum, adafactor.
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Megatron sequence parallelism with TP.
    #[arg(long)]
    pub sequence_parallel: bool,
    /// Keep an fp32 master copy of the weights.
    #[arg(long)]
    pub master_weights: bool,
    /// Ignore attention FLOPs (as the book's exercises do).
    #[arg(long)]
    pub no_attention: bool,
    /// Tokens to train on (total time, chip-hours, cost).
    #[arg(long)]
    pub train_tokens: Option<String>,
    /// Fraction of link bandwidth collectives achieve (default 1).
    #[arg(long)]
    pub comm_efficiency: Option<f64>,
    /// Efficiency profile TOML (`meshplan calibrate` output) instead of the chip's built-in one.
    #[arg(long, value_name = "FILE")]
    pub hw_profile: Option<PathBuf>,
    /// Print one JSON object in SI base units (keys in docs/quantities.md).
    #[arg(long)]
    pub json: bool,
    /// Print the derivation in the book's symbols.
    #[arg(long)]
    pub explain: bool,
    /// Format of the --explain output.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text, value_name = "FORMAT")]
    pub explain_format: ExplainFormat,
}

/// Run the command.
pub fn run(a: TrainArgs) -> Result<ExitCode> {
    let cat = common::user_catalog()?;
    let mut sc: Scenario = a.target.load()?;
    apply_flags(&a, &mut sc)?;
    let TrainSetup {
        spec,
        chip,
        topo,
        cfg,
    } = resolve(&sc, &cat)?;
    let profile = super::plan::load_profile(&chip, a.hw_profile.as_deref())?;

    if a.explain {
        let mut rec = Recorder::default();
        let mut r = analyze(&spec, &chip, &topo, &cfg, &mut rec);
        predicted::attach(&mut r, &spec, &chip, &cfg, profile.as_ref());
        out!("{}", common::render_steps(rec.steps(), a.explain_format));
        outln!();
        print_prediction(&r);
        print_verdicts(&r);
        return Ok(ExitCode::SUCCESS);
    }
    let mut r = analyze(&spec, &chip, &topo, &cfg, &mut NoTrace);
    // the calibrated prediction: after the (traced) roofline analysis, off its hot path
    predicted::attach(&mut r, &spec, &chip, &cfg, profile.as_ref());
    if a.json {
        common::print_json(&r)?;
    } else {
        print_human(&r);
    }
    Ok(ExitCode::SUCCESS)
}

/// Write the flags into the scenario (flags override the file).
fn apply_flags(a: &TrainArgs, sc: &mut Scenario) -> Result<()> {
    let count = crate::common::count_flag;
    let t = &mut sc.training;
    if let Some(b) = count(&a.batch_tokens, "batch-tokens")? {
        t.batch_tokens = Some(b);
    }
    if let Some(x) = count(&a.seq_len, "seq-len")? {
        t.seq_len = Some(x);
    }
    if let Some(x) = count(&a.train_tokens, "train-tokens")? {
        t.train_tokens = Some(x);
    }
    if a.optimizer.is_some() {
        t.optimizer.clone_from(&a.optimizer);
    }
    if a.remat.is_some() {
        t.remat.clone_from(&a.remat);
    }
    if a.mfu.is_some() {
        t.mfu = a.mfu;
    }
    if a.master_weights {
        t.master_weights = Some(true);
    }
    if a.no_attention {
        t.include_attention = Some(false);
    }
    if a.comm_efficiency.is_some() {
        t.comm_efficiency = a.comm_efficiency;
    }
    let p = &mut sc.parallelism;
    for (dst, src) in [
        (&mut p.dp, a.dp),
        (&mut p.fsdp, a.fsdp),
        (&mut p.tp, a.tp),
        (&mut p.pp, a.pp),
        (&mut p.cp, a.cp),
        (&mut p.ep, a.ep),
        (&mut p.zero, a.zero),
        (&mut p.microbatches, a.microbatches),
        (&mut p.virtual_stages, a.virtual_stages),
    ] {
        if src.is_some() {
            *dst = src;
        }
    }
    if a.schedule.is_some() {
        p.schedule.clone_from(&a.schedule);
    }
    if a.sequence_parallel {
        p.sequence_parallel = Some(true);
    }
    Ok(())
}

const EXTRAPOLATED: &str = "the job is larger than the profile was fitted on; its job-size terms are held at the calibrated size — treat the prediction as indicative (docs/fidelity.md)";

/// The calibrated prediction beside the roofline bounds, or why there is none.
fn print_prediction(r: &TrainReport) {
    match (&r.predicted, &r.prediction_note) {
        (Some(p), _) => {
            outln!(
                "predicted (efficiency profile {}, {}): step {} (roofline {} … {}), MFU {:.1}% (roofline bound {:.1}%), {} tokens/s per device, peak memory {} of {} usable ({})",
                p.profile,
                p.profile_origin,
                p.step_time_s,
                r.step_time_lower_s,
                r.step_time_upper_s,
                100.0 * p.mfu,
                100.0 * r.mfu_at_lower_bound,
                sig4(p.tokens_per_s_per_device),
                p.peak_memory_bytes,
                p.usable_memory_bytes,
                if p.fits { "fits" } else { "does NOT fit" }
            );
            if p.extrapolated {
                outln!("note: {EXTRAPOLATED}");
            }
        }
        (None, Some(n)) => outln!("note: {n}"),
        (None, None) => {}
    }
}

fn print_verdicts(r: &TrainReport) {
    let q = &r.rules;
    outln!("Book rules (α = C/W = {}):", sig4(q.alpha));
    outln!(
        "  pure DP:   {} — {}",
        if q.pure_dp.ok { "yes" } else { "no" },
        q.pure_dp.reason
    );
    outln!(
        "  pure FSDP: {} — {}",
        if q.pure_fsdp.ok { "yes" } else { "no" },
        q.pure_fsdp.reason
    );
    outln!(
        "  FSDP+TP:   {} — {}",
        if q.fsdp_tp.ok { "yes" } else { "no" },
        q.fsdp_tp.reason
    );
    outln!(
        "  TP limit Y < M_Y·F/α = {}; X_opt = {} (M_X = {}, M_Y = {})",
        sig4(q.tp_max_degree),
        sig4(q.x_opt),
        q.fsdp_tp_m_x,
        q.fsdp_tp_m_y
    );
    if let Some(d) = q.dcn_min_batch_per_slice {
        outln!(
            "  DCN data parallelism needs > {} tokens per slice",
            sig4(d)
        );
    }
}

fn print_human(r: &TrainReport) {
    let d = r.degrees;
    outln!(
        "{} on {} ({}, {} chips): dp={} fsdp={} tp={} pp={} cp={} ep={}",
        r.model,
        r.chip,
        r.mesh,
        r.chips,
        d.dp,
        d.fsdp,
        d.tp,
        d.pp,
        d.cp,
        d.ep
    );
    if !r.feasible {
        outln!("INFEASIBLE:");
        for x in &r.reasons {
            outln!("  - {x}");
        }
    }
    for x in &r.notes {
        outln!("note: {x}");
    }
    let m = &r.memory_per_device;
    let mut rows = vec![
        vec!["memory per device".into(), String::new()],
        vec!["  params".into(), m.params_bytes.both()],
        vec!["  grads".into(), m.grads_bytes.both()],
        vec!["  optimizer".into(), m.optimizer_bytes.both()],
        vec!["  activations".into(), m.activations_bytes.both()],
        vec!["  total".into(), m.total_bytes.both()],
        vec![
            "  fits".into(),
            format!(
                "{} (HBM {}, margin {})",
                if r.fits { "yes" } else { "NO" },
                r.hbm_bytes,
                fmt_si(r.memory_margin_bytes, "B")
            ),
        ],
        vec![
            "FLOPs per step (model)".into(),
            r.flops_per_step.to_string(),
        ],
        vec![
            "FLOPs per step (hardware)".into(),
            r.hardware_flops_per_step.to_string(),
        ],
        vec!["T_math".into(), r.t_math_s.to_string()],
        vec![
            "pipeline bubble".into(),
            format!("{} ({:.1}%)", r.t_bubble_s, 100.0 * r.bubble_fraction),
        ],
        vec!["T_comms (slowest axis)".into(), r.t_comms_s.to_string()],
        vec!["bound".into(), r.bound.clone()],
        vec![
            "step time lower (overlap)".into(),
            r.step_time_lower_s.to_string(),
        ],
        vec![
            "step time upper (no overlap)".into(),
            r.step_time_upper_s.to_string(),
        ],
    ];
    if let Some(p) = &r.predicted {
        rows.extend([
            vec![
                "step time predicted".into(),
                format!(
                    "{} (profile {}, {})",
                    p.step_time_s, p.profile, p.profile_origin
                ),
            ],
            vec![
                "prediction range".into(),
                if p.extrapolated {
                    EXTRAPOLATED.into()
                } else {
                    "within the profile's calibrated range".into()
                },
            ],
            vec![
                "MFU predicted".into(),
                format!(
                    "{:.1}% (roofline bound {:.1}%)",
                    100.0 * p.mfu,
                    100.0 * r.mfu_at_lower_bound
                ),
            ],
            vec![
                "tokens/s per device (pred.)".into(),
                sig4(p.tokens_per_s_per_device),
            ],
            vec![
                "peak memory (pred.)".into(),
                format!(
                    "{} of {} usable: {}",
                    p.peak_memory_bytes,
                    p.usable_memory_bytes,
                    if p.fits { "fits" } else { "does NOT fit" }
                ),
            ],
        ]);
    }
    out!("{}", common::render_table(&rows, &[]));
    if let Some(t) = r.step_time_at_mfu_s {
        outln!("step time at MFU: {t}");
    }
    outln!("tokens/s: {}", sig4(r.tokens_per_s));
    if let (Some(t), Some(h)) = (r.train_time_s, r.chip_hours) {
        outln!("train time: {} ({} chip-hours)", t.human(), sig4(h));
    }
    if let Some(c) = r.cost_usd {
        outln!("cost: ${}", sig4(c));
    }
    if let Some(p) = &r.predicted {
        if let (Some(t), Some(h)) = (p.train_time_s, p.chip_hours) {
            outln!(
                "train time (predicted): {} ({} chip-hours)",
                t.human(),
                sig4(h)
            );
        }
        if let Some(c) = p.cost_usd {
            outln!("cost (predicted): ${}", sig4(c));
        }
    }
    if let Some(n) = &r.prediction_note {
        outln!("note: {n}");
    }
    if !r.comms.is_empty() {
        let mut rows = vec![vec![
            "collective".to_string(),
            "axis".into(),
            "what".into(),
            "V".into(),
            "calls".into(),
            "time/step".into(),
        ]];
        for c in &r.comms {
            rows.push(vec![
                c.kind.name().into(),
                c.axis.name().into(),
                c.what.clone(),
                c.bytes.to_string(),
                c.count.to_string(),
                c.seconds.to_string(),
            ]);
        }
        out!("{}", common::render_table(&rows, &[3, 4, 5]));
    }
    print_verdicts(r);
}
