//! How a [`TrainReport`] reads: the memory, the FLOPs and step-time bounds,
//! the calibrated prediction beside them, every collective, and the book's
//! verdicts.

use super::rules::Rules;
use super::TrainReport;
use crate::step::predict::Predicted;
use crate::units::{fmt_si, sig4, sig4_grouped, Seconds};
use crate::view::{field, pct, yes_no, Doc, Render, Table};

/// What the prediction's range note says when the job is beyond the
/// profile's calibrated size.
pub const EXTRAPOLATED: &str = "the job is larger than the profile was fitted on; its job-size terms are held at the calibrated size — treat the prediction as indicative (docs/fidelity.md)";

fn memory_fields(r: &TrainReport) -> Vec<(String, String)> {
    let m = &r.memory_per_device;
    let mut rows = vec![
        field(
            &format!("memory per device ({} accounting)", r.framework),
            "",
        ),
        field("  params", m.params_bytes.both()),
        field("  grads", m.grads_bytes.both()),
        field("  optimizer", m.optimizer_bytes.both()),
        field("  activations", m.activations_bytes.both()),
    ];
    if m.logits_bytes.get() > 0.0 {
        rows.push(field("  logits", m.logits_bytes.both()));
    }
    if m.reserve_bytes.get() > 0.0 {
        rows.push(field("  runtime reserve", m.reserve_bytes.both()));
    }
    rows.push(field("  total", m.total_bytes.both()));
    rows.push(field(
        "  fits",
        format!(
            "{} (usable HBM {}, margin {})",
            if r.fits { "yes" } else { "NO" },
            r.hbm_bytes,
            fmt_si(r.memory_margin_bytes, "B")
        ),
    ));
    let v = &r.memory_verdict;
    rows.push(field(
        "  fit verdict",
        format!(
            "{} (true peak likely {}-{}: {})",
            match v.level {
                crate::memory::FitLevel::Fits => "fits",
                crate::memory::FitLevel::Tight => "tight: within the memory model's error band",
                crate::memory::FitLevel::DoesNotFit => "does not fit",
            },
            fmt_si(v.peak_low_bytes, "B"),
            fmt_si(v.peak_high_bytes, "B"),
            v.band_source
        ),
    ));
    for w in &v.would_change {
        rows.push(field("    would change it", w.clone()));
    }
    rows
}

fn time_fields(r: &TrainReport) -> Vec<(String, String)> {
    let mut rows = vec![
        field(
            &format!("FLOPs per step ({} convention)", r.flop_convention),
            r.flops_per_step,
        ),
        field(
            "FLOPs per step (hardware, with recompute)",
            r.hardware_flops_per_step,
        ),
        field("T_math", r.t_math_s),
        field(
            "pipeline bubble",
            format!("{} ({})", r.t_bubble_s, pct(r.bubble_fraction)),
        ),
        field("T_comms (slowest axis)", r.t_comms_s),
        field("bound (roofline)", &r.bound),
        field("roofline step time, comms overlapped", r.step_time_lower_s),
        field(
            "roofline step time, nothing overlapped",
            r.step_time_upper_s,
        ),
        field("MFU at the roofline", pct(r.mfu_at_lower_bound)),
    ];
    if let Some(p) = &r.predicted {
        rows.extend(predicted_fields(p));
    }
    rows
}

/// What the prediction rests on: a profile fitted on this chip or one
/// transferred from another, and every input outside the ranges it was
/// fitted on, one row each (the job size beyond them: its terms are held).
fn prediction_range(p: &Predicted) -> Vec<(String, String)> {
    let transferred = p.transferred_from.as_ref().map(|base| {
        format!("not fitted on this chip: efficiencies measured on {base}, peak rates from the catalog — indicative; ")
    });
    let t = transferred.unwrap_or_default();
    let mut rows = vec![match &p.outside_fitted_range {
        None => field(
            "prediction range",
            format!("{t}the profile records no fitted ranges (`meshplan calibrate` writes them)"),
        ),
        Some(o) if o.is_empty() => field(
            "prediction range",
            format!("{t}every input within the ranges the profile was fitted on"),
        ),
        Some(o) => field(
            "prediction range",
            format!(
                "{t}{} input{} outside the ranges the profile was fitted on — an extrapolation, treat as indicative",
                o.len(),
                if o.len() == 1 { "" } else { "s" }
            ),
        ),
    }];
    for o in p.outside_fitted_range.iter().flatten() {
        rows.push(field(&format!("  {}", o.input), o.describe()));
    }
    if p.extrapolated {
        rows.push(field("  job size", EXTRAPOLATED));
    }
    rows
}

fn predicted_fields(p: &Predicted) -> Vec<(String, String)> {
    let mut rows = vec![
        field(
            "step time predicted",
            format!(
                "{} ({} runtime, profile {}, {})",
                p.step_time_s, p.framework, p.profile, p.profile_origin
            ),
        ),
        field("MFU predicted", pct(p.mfu)),
        field(
            "tokens/s per device (pred.)",
            sig4_grouped(p.tokens_per_s_per_device),
        ),
    ];
    let o = &p.overlap;
    if !o.settings.unfitted().is_empty() {
        let e = &o.exposure;
        rows.push(field(
            "overlap settings",
            format!(
                "tp {} (TP exposed {} of {} transfers + latency), dp {} (DP exposed {} of {}), SP all-gather {}",
                o.settings.tp,
                Seconds::new(e.tp_exposed_s),
                Seconds::new(e.tp_transfer_s + e.tp_latency_s),
                o.settings.dp,
                Seconds::new(e.dp_exposed_s),
                Seconds::new(e.dp_transfer_s),
                o.settings.sp_allgather
            ),
        ));
    }
    rows.extend(prediction_range(p));
    if let Some(i) = &p.interval {
        rows.push(field("step time p10–p90", i.describe()));
    }
    let raise = p.time_breakdown_s.floor_raise;
    if raise > 0.0 {
        rows.push(field(
            "held at the lower bound",
            format!(
                "the calibrated overlap terms undercut the roofline lower bound by {}; the prediction is the bound",
                Seconds::new(raise)
            ),
        ));
    }
    rows
}

fn cost_fields(r: &TrainReport) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    if let Some(t) = r.step_time_at_mfu_s {
        rows.push(field("step time at the given MFU", t));
    }
    rows.push(field(
        "tokens/s (roofline or at MFU)",
        sig4_grouped(r.tokens_per_s),
    ));
    let run =
        |t: Option<Seconds>, h: Option<f64>, c: Option<f64>, what: &str, rows: &mut Vec<_>| {
            if let (Some(t), Some(h)) = (t, h) {
                rows.push(field(
                    &format!("train time{what}"),
                    format!("{} ({} chip-hours)", t.human(), sig4_grouped(h)),
                ));
            }
            if let Some(c) = c {
                rows.push(field(
                    &format!("cost{what}"),
                    format!("${}", sig4_grouped(c)),
                ));
            }
        };
    run(r.train_time_s, r.chip_hours, r.cost_usd, "", &mut rows);
    if let Some(p) = &r.predicted {
        run(
            p.train_time_s,
            p.chip_hours,
            p.cost_usd,
            " (predicted)",
            &mut rows,
        );
    }
    rows
}

fn comms_table(r: &TrainReport) -> Table {
    let mut t = Table::new(
        &["collective", "axis", "what", "V", "calls", "time/step"],
        &["V", "calls", "time/step"],
    );
    for c in &r.comms {
        t.row(vec![
            c.kind.name().into(),
            c.axis.name().into(),
            c.what.clone(),
            c.bytes.to_string(),
            c.count.to_string(),
            c.seconds.to_string(),
        ]);
    }
    t
}

/// The book's verdicts (ch5).
pub fn rules_doc(q: &Rules) -> Doc {
    let mut d = Doc::new();
    let mut rows = vec![
        field(
            "pure DP",
            format!("{} — {}", yes_no(q.pure_dp.ok), q.pure_dp.reason),
        ),
        field(
            "pure FSDP",
            format!("{} — {}", yes_no(q.pure_fsdp.ok), q.pure_fsdp.reason),
        ),
        field(
            "FSDP+TP",
            format!("{} — {}", yes_no(q.fsdp_tp.ok), q.fsdp_tp.reason),
        ),
        field(
            "TP limit",
            format!(
                "Y < M_Y·F/α = {}; X_opt = {} (M_X = {}, M_Y = {})",
                sig4(q.tp_max_degree),
                sig4(q.x_opt),
                q.fsdp_tp_m_x,
                q.fsdp_tp_m_y
            ),
        ),
    ];
    if let Some(dcn) = q.dcn_min_batch_per_slice {
        rows.push(field(
            "DCN data parallelism",
            format!("needs > {} tokens per slice", sig4(dcn)),
        ));
    }
    d.line(format!("Book rules (α = C/W = {}):", sig4(q.alpha)))
        .fields(rows);
    d
}

impl Render for TrainReport {
    fn doc(&self) -> Doc {
        let r = self;
        let mut d = Doc::new();
        d.title(format!(
            "{} on {} ({}, {} chips): {}",
            r.model, r.chip, r.mesh, r.chips, r.degrees
        ));
        if !r.chosen.is_empty() {
            d.line(format!("chosen: {}", r.chosen.join("; ")));
        }
        if !r.feasible {
            d.verdict(
                false,
                "INFEASIBLE",
                "the plan cannot run",
                r.reasons.clone(),
            );
        }
        for n in &r.notes {
            d.note(n.clone());
        }
        let mut rows = memory_fields(r);
        rows.extend(r.offload.iter().flat_map(super::offload::fields));
        rows.extend(time_fields(r));
        rows.extend(cost_fields(r));
        d.fields(rows);
        if let Some(n) = &r.prediction_note {
            d.note(n.clone());
        }
        d.table(comms_table(r));
        d.extend(rules_doc(&r.rules));
        d.extend(r.rules.exact.doc());
        d.extend(r.sizing.doc());
        d
    }
}

/// The step by block (`meshplan train --breakdown`): FLOPs, HBM bytes and
/// roofline time per device of each block, then where the communication is.
pub fn blocks_doc(r: &TrainReport) -> Doc {
    let mut d = Doc::new();
    if r.blocks.is_empty() {
        d.note(
            "no step-by-block breakdown: the plan is infeasible or cannot be mapped onto a replica",
        );
        return d;
    }
    // every column but the first and "bound" is a number (right-aligned);
    // "predicted" (the calibrated pricer's time per block) with a prediction
    const COLUMNS: [&str; 10] = [
        "block",
        "FLOPs",
        "recompute",
        "HBM bytes",
        "eff",
        "T_math",
        "T_mem",
        "time",
        "bound",
        "predicted",
    ];
    let with_pred = r.blocks.iter().all(|b| b.predicted_s.is_some());
    let cols = if with_pred {
        &COLUMNS[..]
    } else {
        &COLUMNS[..9]
    };
    let mut numeric = COLUMNS[1..8].to_vec();
    numeric.push(COLUMNS[9]);
    let mut t = Table::new(cols, &numeric);
    for b in &r.blocks {
        let mut row = vec![
            b.block.into(),
            fmt_si(b.flops, "FLOPs"),
            fmt_si(b.recompute_flops, "FLOPs"),
            fmt_si(b.hbm_bytes, "B"),
            if b.flops > 0.0 {
                pct(b.efficiency)
            } else {
                "–".into()
            },
            Seconds::new(b.t_math_s).to_string(),
            Seconds::new(b.t_mem_s).to_string(),
            Seconds::new(b.time_s).to_string(),
            b.bound.into(),
        ];
        if let (true, Some(p)) = (with_pred, b.predicted_s) {
            row.push(Seconds::new(p).to_string());
        }
        t.row(row);
    }
    let sum: f64 = r.blocks.iter().map(|b| b.time_s).sum();
    d.line(format!(
        "Step by block (FLOPs and HBM bytes of the whole step, times per device of {} chips; {}):",
        r.chips,
        if r.predicted.is_some() {
            "efficiencies of the profile"
        } else {
            "peak rates"
        }
    ))
    .table(t)
    .fields(vec![field("compute, sum of the blocks", Seconds::new(sum))]);
    if let Some(p) = &r.predicted {
        let tb = &p.time_breakdown_s;
        if with_pred {
            let blocks: f64 = r.blocks.iter().filter_map(|b| b.predicted_s).sum();
            d.fields(vec![field(
                "predicted, sum of the blocks",
                format!(
                    "{} + bubble {} + overhead {} + floor raise {} + exposed communication below = {} (predicted step time by part)",
                    Seconds::new(blocks),
                    Seconds::new(tb.bubble),
                    Seconds::new(tb.overhead),
                    Seconds::new(tb.floor_raise),
                    Seconds::new(tb.total)
                ),
            )]);
        }
        d.fields(vec![field(
            "communication (predicted, exposed)",
            format!(
                "TP {}, CP {}, EP {}, PP {}, DP {} (collectives: the table above)",
                Seconds::new(tb.tp_comm),
                Seconds::new(tb.cp_comm),
                Seconds::new(tb.ep_comm),
                Seconds::new(tb.pp_comm),
                Seconds::new(tb.dp_comm)
            ),
        )]);
    }
    d
}
