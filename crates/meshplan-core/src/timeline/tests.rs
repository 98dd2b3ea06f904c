//! The timeline against the prediction it lays out.

use super::*;
use crate::scenario::Scenario;
use crate::training::scenario::resolve_with;
use crate::Catalog;

/// The report and links of LLaMA-3 8B on `mesh` H100s (8 per node) with
/// the `[parallelism]` keys `par` (and `extra` `[training]` lines), 8,192-
/// token sequences, 4 Mi-token batches, selective recompute.
fn plan(mesh: &str, par: &str, extra: &str) -> (TrainReport, Links) {
    let text = format!(
        "[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nmesh = \"{mesh}\"\n\
         [training]\nbatch_tokens = \"4Mi\"\nseq_len = 8192\nremat = \"selective\"\n{extra}\n\
         [parallelism]\n{par}\n"
    );
    let sc = Scenario::parse(&text, "t.toml").unwrap();
    let s = resolve_with(&sc, Catalog::builtin(), None).unwrap();
    let r = s.analyze(&mut crate::trace::NoTrace);
    assert!(
        r.predicted.is_some(),
        "{:?} {:?}",
        r.prediction_note,
        r.reasons
    );
    let links = Links::of(&s.chip, &s.topo, r.degrees);
    (r, links)
}

/// The plans the tests lay out: (label, mesh, parallelism, training extra).
const PLANS: [(&str, &str, &str, &str); 7] = [
    ("pp1 tp8 grad-acc 4", "1x8", "tp = 8\nmicrobatches = 4\nsequence_parallel = true", ""),
    ("pp2 1f1b dp4 zero1", "8x8", "dp = 4\ntp = 8\npp = 2\nzero = 1\nschedule = \"1f1b\"\nmicrobatches = 8\nsequence_parallel = true", ""),
    ("pp2 gpipe dp4", "8x8", "dp = 4\ntp = 8\npp = 2\nschedule = \"gpipe\"\nmicrobatches = 4", ""),
    ("pp4 interleaved v2 dp2", "8x8", "dp = 2\ntp = 8\npp = 4\nschedule = \"interleaved\"\nvirtual_stages = 2\nmicrobatches = 8\nsequence_parallel = true", ""),
    ("pp4 interleaved v2 m6 (m not a multiple of p)", "8x8", "dp = 2\ntp = 8\npp = 4\nschedule = \"interleaved\"\nvirtual_stages = 2\nmicrobatches = 6\nsequence_parallel = true", ""),
    ("zero3 dp8 tp8", "8x8", "dp = 8\ntp = 8\nzero = 3\nmicrobatches = 2\nsequence_parallel = true", ""),
    ("pp2 offload optimizer", "8x8", "dp = 4\ntp = 8\npp = 2\nzero = 1\nmicrobatches = 8\nsequence_parallel = true", "offload = [\"optimizer\"]"),
];

/// On every plan the critical path's events add up to
/// `predicted.step_time_s` within 1 %: the layout spends exactly the
/// priced parts (m micro-batches, the bubble and fill, the tail) and
/// nothing else.
#[test]
fn the_critical_path_adds_up_to_the_predicted_step() {
    for (label, mesh, par, extra) in PLANS {
        let (r, l) = plan(mesh, par, extra);
        let t = of(&r, &l).unwrap();
        let step = r.predicted.as_ref().unwrap().step_time_s.get();
        let sum = t.critical_path_s();
        assert!(
            (sum - step).abs() <= 0.01 * step,
            "{label}: critical path {sum} s vs predicted {step} s"
        );
    }
}

/// The critical path's events tile the step: each starts where the one
/// before ended, from 0 to the predicted step time.
#[test]
fn the_critical_path_has_no_gaps_or_overlaps() {
    for (label, mesh, par, extra) in PLANS {
        let (r, l) = plan(mesh, par, extra);
        let t = of(&r, &l).unwrap();
        let mut path: Vec<&Event> = t.events.iter().filter(|e| e.critical).collect();
        path.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        let mut end = 0.0;
        for e in path {
            assert!(
                (e.start_s - end).abs() <= 1e-9 * t.step_time_s,
                "{label}: {} starts at {} after {end}",
                e.name,
                e.start_s
            );
            end = e.start_s + e.dur_s;
        }
    }
}

/// Compute events: each stage runs every micro-batch forward and backward
/// through each of its v chunks: stages × microbatches × v × 2.
#[test]
fn one_forward_and_one_backward_per_microbatch_chunk_and_stage() {
    for (label, mesh, par, extra) in PLANS {
        let (r, l) = plan(mesh, par, extra);
        let t = of(&r, &l).unwrap();
        let s = &r.predicted.as_ref().unwrap().schedule;
        let compute = t
            .events
            .iter()
            .filter(|e| matches!(e.kind, Kind::Forward | Kind::Backward))
            .count() as u64;
        assert_eq!(
            compute,
            s.stages * s.microbatches * s.virtual_stages * 2,
            "{label}"
        );
    }
}

/// The bubble is idle time on every stage. Hand derivation: with p stages,
/// v chunks and a micro-batch of t_mb on the critical stage, each pass of a
/// chunk takes t_mb/v plus its send h, and the schedule runs m·v + p − 1
/// pass slots forward and as many backward; a stage is busy in m·v of
/// them, so it idles (p − 1)·(t_mb/v + 2h): the prediction's bubble
/// (p − 1)/v·t_mb plus the fill's p − 1 sends each way (priced in pp_comm,
/// h = pp_comm / (2·(m·v + p − 1))).
#[test]
fn the_bubble_is_p_minus_1_over_v_microbatches_plus_the_fill() {
    for (label, mesh, par, extra) in [PLANS[1], PLANS[2], PLANS[3]] {
        let (r, l) = plan(mesh, par, extra);
        let t = of(&r, &l).unwrap();
        let pr = r.predicted.as_ref().unwrap();
        let s = &pr.schedule;
        let (p, v, m) = (
            s.stages as f64,
            s.virtual_stages as f64,
            s.microbatches as f64,
        );
        let h = pr.time_breakdown_s.pp_comm / (2.0 * (m * v + p - 1.0));
        let want = (p - 1.0) * (s.microbatch_s / v + 2.0 * h);
        for st in 0..s.stages {
            let got = t.bubble_s(st);
            assert!(
                (got - want).abs() <= 1e-9 * want,
                "{label} stage {st}: {got} vs {want}"
            );
        }
        // the prediction's own bubble term is the compute part of it
        let bubble = pr.time_breakdown_s.bubble;
        assert!(
            (want - 2.0 * (p - 1.0) * h - bubble).abs() <= 1e-9 * bubble,
            "{label}"
        );
    }
}

/// Interleaving v = 2 halves the bubble of the same plan in micro-batch
/// units: (p − 1)/v micro-batches of idle compute instead of p − 1.
#[test]
fn interleaving_shrinks_the_bubble() {
    let (r1, l1) = plan(
        "8x8",
        "dp = 2\ntp = 8\npp = 4\nschedule = \"1f1b\"\nmicrobatches = 8\nsequence_parallel = true",
        "",
    );
    let (r2, l2) = plan("8x8", PLANS[3].2, "");
    let idle = |r: &TrainReport, l: &Links| {
        let t = of(r, l).unwrap();
        t.bubble_s(t.critical_stage) / r.predicted.as_ref().unwrap().schedule.microbatch_s
    };
    // (p − 1)·(1 + 2h/t_mb) against (p − 1)/2·(1 + 4h/t_mb): h is small
    let (a, b) = (idle(&r1, &l1), idle(&r2, &l2));
    assert!(a > 2.9 && a < 3.3, "1f1b: {a} micro-batches idle");
    assert!(b > 1.45 && b < 1.7, "interleaved: {b} micro-batches idle");
}

/// Events are named after the pass and the collective, with the network
/// the mesh placed the axis on: TP inside the node (NVLink), DP across
/// nodes (the H100's InfiniBand).
#[test]
fn events_name_the_collective_and_its_network() {
    let (r, l) = plan("8x8", PLANS[1].2, "");
    let t = of(&r, &l).unwrap();
    let has = |n: &str| t.events.iter().any(|e| e.name == n);
    assert_eq!((l.tp.as_str(), l.dp.as_str()), ("NVLink", "InfiniBand"));
    assert!(has("F3") && has("B7") && has("pipeline bubble") && has("optimizer step"));
    assert!(has("TP all-gather/reduce-scatter (NVLink)"));
    assert!(has("DP reduce-scatter + all-gather (InfiniBand)"));
    assert!(has("PP send activations (InfiniBand)"));
}

/// No prediction: the error says why (the report's prediction note).
#[test]
fn no_prediction_is_an_error_with_the_reason() {
    let (mut r, l) = plan("1x8", PLANS[0].2, "");
    r.predicted = None;
    r.prediction_note = Some("prediction not available: because".into());
    let e = of(&r, &l).unwrap_err();
    assert!(e.contains("prediction not available: because"), "{e}");
}

/// The Chrome trace: a `traceEvents` array whose "X" events carry the
/// timeline's events in microseconds, and metadata naming every stage.
#[test]
fn the_chrome_trace_carries_every_event_in_microseconds() {
    let (r, l) = plan("8x8", PLANS[1].2, "");
    let t = of(&r, &l).unwrap();
    let j = chrome_trace(&t);
    let ev = j["traceEvents"].as_array().unwrap();
    let x: Vec<_> = ev.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(x.len(), t.events.len());
    let crit: f64 = x
        .iter()
        .filter(|e| e["args"]["critical_path"] == true)
        .map(|e| e["dur"].as_f64().unwrap())
        .sum();
    assert!((crit / 1e6 - t.step_time_s).abs() <= 0.01 * t.step_time_s);
    let names = ev.iter().filter(|e| e["name"] == "process_name").count() as u64;
    assert_eq!(names, t.stages);
}
