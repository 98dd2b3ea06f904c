//! A timeline of one predicted training step: the events of every stream
//! of every pipeline stage (compute, exposed TP/CP/EP communication,
//! pipeline point-to-point, data-parallel communication, optimizer, host),
//! laid out from the calibrated prediction of a [`TrainReport`]
//! (`predicted.time_breakdown_s`, `predicted.schedule`,
//! `predicted.overlap`). Nothing is priced here: each event is a share of a
//! priced part, placed in the schedule's order, so the events on the
//! critical path add up to the predicted step time and the pipeline bubble
//! is the idle time the schedule leaves on each stage.
//!
//! Every stage is drawn at the pace of the prediction's critical stage (the
//! prediction prices that one only; the slowest stage sets the pace).

mod chrome;
mod links;
mod pipeline;

use serde::Serialize;

pub use chrome::chrome_trace;
pub use links::Links;
pub use pipeline::{layout, Pass, Shape};

use crate::parallelism::Schedule;
use crate::training::scenario::TrainSetup;
use crate::training::TrainReport;

/// A stream of work on one stage: a track of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stream {
    /// Forward and backward passes (and the bubble between them).
    Compute,
    /// Tensor-parallel collectives.
    Tp,
    /// Context-parallel K/V exchange.
    Cp,
    /// Expert-parallel all-to-all.
    Ep,
    /// Pipeline point-to-point sends.
    Pipeline,
    /// Data-parallel / ZeRO / FSDP collectives.
    DataParallel,
    /// Optimizer update.
    Optimizer,
    /// Host: launch stalls, per-step overhead, offload, the roofline floor.
    Host,
}

impl Stream {
    /// Every stream, in the order tracks are drawn.
    pub const ALL: [Stream; 8] = [
        Stream::Compute,
        Stream::Tp,
        Stream::Cp,
        Stream::Ep,
        Stream::Pipeline,
        Stream::DataParallel,
        Stream::Optimizer,
        Stream::Host,
    ];

    /// Track name.
    pub const fn name(self) -> &'static str {
        match self {
            Stream::Compute => "compute",
            Stream::Tp => "TP comm",
            Stream::Cp => "CP comm",
            Stream::Ep => "EP comm",
            Stream::Pipeline => "pipeline p2p",
            Stream::DataParallel => "data parallel",
            Stream::Optimizer => "optimizer",
            Stream::Host => "host",
        }
    }
}

/// What an event is (its colour in a plot, its category in a trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A micro-batch's forward pass (compute only).
    Forward,
    /// A micro-batch's backward pass (recompute included).
    Backward,
    /// Idle compute stream: the pipeline bubble.
    Bubble,
    /// Exposed communication: the compute stream waits for it.
    Comm,
    /// Communication hidden under compute (never on the critical path).
    Hidden,
    /// Pipeline point-to-point.
    P2p,
    /// Optimizer update.
    Optimizer,
    /// Host stalls and overheads, offload, the roofline floor.
    Host,
}

impl Kind {
    /// Every kind, in legend order.
    pub const ALL: [Kind; 8] = [
        Kind::Forward,
        Kind::Backward,
        Kind::Bubble,
        Kind::Comm,
        Kind::Hidden,
        Kind::P2p,
        Kind::Optimizer,
        Kind::Host,
    ];

    /// Legend name.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Forward => "forward",
            Kind::Backward => "backward",
            Kind::Bubble => "pipeline bubble (idle)",
            Kind::Comm => "exposed communication",
            Kind::Hidden => "hidden communication",
            Kind::P2p => "pipeline p2p",
            Kind::Optimizer => "optimizer",
            Kind::Host => "host / overhead",
        }
    }
}

/// One event of the step on one stage's stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// "F3", "B3 c1", "DP all-reduce (InfiniBand)", "pipeline bubble", …
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// Pipeline stage.
    pub stage: u64,
    /// Its stream.
    pub stream: Stream,
    /// Start, seconds from the step's start.
    pub start_s: f64,
    /// Duration, seconds.
    pub dur_s: f64,
    /// On the critical path: the critical path's events tile the step.
    pub critical: bool,
}

/// The events of one predicted step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timeline {
    /// Model name.
    pub model: String,
    /// Chip name.
    pub chip: String,
    /// Chips.
    pub chips: u64,
    /// "gpipe", "1f1b", "interleaved".
    pub schedule: String,
    /// Pipeline stages.
    pub stages: u64,
    /// Micro-batches per step.
    pub microbatches: u64,
    /// Model chunks per stage.
    pub virtual_stages: u64,
    /// The predicted step time (`predicted.step_time_s`).
    pub step_time_s: f64,
    /// The stage whose events form the critical path (the last to finish
    /// its passes).
    pub critical_stage: u64,
    /// The links each stream uses.
    pub links: Links,
    /// Events, by stage and start.
    pub events: Vec<Event>,
}

impl Timeline {
    /// Seconds of the events on the critical path (equals the predicted
    /// step time: the test of the layout).
    pub fn critical_path_s(&self) -> f64 {
        self.events
            .iter()
            .filter(|e| e.critical)
            .map(|e| e.dur_s)
            .sum()
    }

    /// Seconds stage `stage` idles in the bubble.
    pub fn bubble_s(&self, stage: u64) -> f64 {
        self.events
            .iter()
            .filter(|e| e.stage == stage && e.kind == Kind::Bubble)
            .map(|e| e.dur_s)
            .sum()
    }

    /// The end of the last event.
    pub fn end_s(&self) -> f64 {
        self.events
            .iter()
            .map(|e| e.start_s + e.dur_s)
            .fold(0.0, f64::max)
    }

    /// The streams with at least one event, in drawing order.
    pub fn streams(&self) -> Vec<Stream> {
        Stream::ALL
            .into_iter()
            .filter(|s| self.events.iter().any(|e| e.stream == *s))
            .collect()
    }
}

/// One micro-batch on the critical stage, by part (seconds), and the
/// step's parts after the passes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Parts {
    compute: f64,
    tp: f64,
    cp: f64,
    ep: f64,
    /// Exposed ZeRO-3/FSDP gathers of the micro-batch.
    fsdp: f64,
    /// Host stall beyond the GPU work.
    stall: f64,
    hidden_tp: f64,
    forward_fraction: f64,
    /// One point-to-point hop (each pass sends once).
    hop: f64,
    dp: f64,
    hidden_dp: f64,
    optimizer: f64,
    offload: f64,
    overhead: f64,
    floor: f64,
}

/// Split the priced step into the micro-batch's parts (the per-step parts
/// over `m` micro-batches) and the parts after the passes. The prediction
/// books a micro-batch's host stall to overhead and its exposed FSDP
/// gathers to `dp_comm`; the schedule carries both per micro-batch.
fn parts(r: &TrainReport, p: &crate::step::predict::Predicted) -> Parts {
    let (t, s, e) = (&p.time_breakdown_s, &p.schedule, &p.overlap.exposure);
    let m = s.microbatches.max(1) as f64;
    let v = s.virtual_stages.max(1) as f64;
    let pp = s.stages.max(1) as f64;
    let gpu = (t.matmul + t.attention + t.memory_bound + t.tp_comm + t.cp_comm + t.ep_comm) / m;
    // what the micro-batch takes beyond its GPU parts: the exposed gathers,
    // then the host's stall (the rest, so the parts add up to microbatch_s)
    let rest = (s.microbatch_s - gpu).max(0.0);
    let sharded = p.zero >= 3 || r.degrees.fsdp > 1;
    let fsdp = s.fsdp_exposed_s.min(rest);
    let offloaded_opt = r.offload.is_some_and(|o| o.parts.optimizer);
    Parts {
        compute: (t.matmul + t.attention + t.memory_bound) / m,
        tp: t.tp_comm / m,
        cp: t.cp_comm / m,
        ep: t.ep_comm / m,
        fsdp,
        stall: rest - fsdp,
        hidden_tp: (e.tp_transfer_s + e.tp_latency_s - e.tp_exposed_s).max(0.0) / m,
        forward_fraction: s.forward_fraction.clamp(0.0, 1.0),
        // the prediction charges a send per pass on the critical stage and
        // per pass of the fill: 2·(m·v + p − 1) hops
        hop: if pp > 1.0 {
            t.pp_comm / (2.0 * (m * v + pp - 1.0))
        } else {
            0.0
        },
        dp: (t.dp_comm - m * fsdp).max(0.0),
        hidden_dp: if sharded {
            0.0
        } else {
            (e.dp_transfer_s - e.dp_exposed_s).max(0.0)
        },
        optimizer: if offloaded_opt { 0.0 } else { t.optimizer },
        offload: p.offload_exposed_s.map_or(0.0, |x| x.get()),
        overhead: (t.overhead - m * (rest - fsdp)).max(0.0),
        floor: t.floor_raise,
    }
}

/// Event names of one step's collectives.
struct Names {
    tp: String,
    cp: String,
    ep: String,
    pp_fwd: String,
    pp_bwd: String,
    fsdp: String,
    dp: String,
    offload: String,
}

impl Names {
    fn of(r: &TrainReport, zero: u8, l: &Links) -> Names {
        let tp = if r.config.sequence_parallel {
            "TP all-gather/reduce-scatter"
        } else {
            "TP all-reduce"
        };
        let dp = match zero {
            0 => "DP all-reduce",
            _ => "DP reduce-scatter + all-gather",
        };
        Names {
            tp: format!("{tp} ({})", l.tp),
            cp: format!("CP ring K/V exchange ({})", l.cp),
            ep: format!("EP all-to-all ({})", l.ep),
            pp_fwd: format!("PP send activations ({})", l.pp),
            pp_bwd: format!("PP send gradients ({})", l.pp),
            fsdp: format!("FSDP gather/reduce-scatter ({})", l.dp),
            dp: format!("{dp} ({})", l.dp),
            offload: format!("offload: host copies + CPU optimizer ({})", l.host),
        }
    }
}

/// Shortest event drawn (seconds): shorter ones are rounding residues of
/// the differences the parts are split by.
const MIN_EVENT_S: f64 = 1e-12;

/// Appends events one after another on one stage.
struct Cursor<'a> {
    out: &'a mut Vec<Event>,
    stage: u64,
    t: f64,
    critical: bool,
}

impl Cursor<'_> {
    /// An event of `dur_s` at the cursor, which moves past it; nothing for
    /// a duration under a picosecond (a difference's rounding residue).
    fn push(&mut self, name: &str, kind: Kind, stream: Stream, dur_s: f64) {
        if dur_s <= MIN_EVENT_S {
            self.t += dur_s.max(0.0);
            return;
        }
        self.out.push(Event {
            name: name.to_string(),
            kind,
            stage: self.stage,
            stream,
            start_s: self.t,
            dur_s,
            critical: self.critical,
        });
        self.t += dur_s;
    }
}

/// The events of one pass: its compute, then what its stream waits for
/// (exposed TP/CP/EP, FSDP gathers, host stall) and its send, each the
/// pass's share of the micro-batch's part; the hidden TP under its compute.
fn pass_events(c: &mut Cursor, x: &Pass, q: &Parts, n: &Names, v: f64) {
    let share = if x.forward {
        q.forward_fraction
    } else {
        1.0 - q.forward_fraction
    } / v;
    let chunk = if v > 1.0 {
        format!(" c{}", x.chunk)
    } else {
        String::new()
    };
    let (letter, kind, send) = if x.forward {
        ("F", Kind::Forward, &n.pp_fwd)
    } else {
        ("B", Kind::Backward, &n.pp_bwd)
    };
    let hidden = (q.hidden_tp * share).min(q.compute * share);
    if hidden > 0.0 {
        c.out.push(Event {
            name: format!("{} (hidden)", n.tp),
            kind: Kind::Hidden,
            stage: c.stage,
            stream: Stream::Tp,
            start_s: c.t,
            dur_s: hidden,
            critical: false,
        });
    }
    let name = format!("{letter}{}{chunk}", x.microbatch);
    c.push(&name, kind, Stream::Compute, q.compute * share);
    c.push(&n.tp, Kind::Comm, Stream::Tp, q.tp * share);
    c.push(&n.cp, Kind::Comm, Stream::Cp, q.cp * share);
    c.push(&n.ep, Kind::Comm, Stream::Ep, q.ep * share);
    c.push(&n.fsdp, Kind::Comm, Stream::DataParallel, q.fsdp * share);
    c.push("host stall", Kind::Host, Stream::Host, q.stall * share);
    c.push(send, Kind::P2p, Stream::Pipeline, q.hop);
}

/// The pipeline's shape from the prediction's schedule.
fn shape(r: &TrainReport, q: &Parts, s: &crate::step::calibrated::StepSchedule) -> Shape {
    let v = s.virtual_stages.max(1);
    let mb = q.compute + q.tp + q.cp + q.ep + q.fsdp + q.stall;
    let f = q.forward_fraction;
    Shape {
        stages: s.stages.max(1),
        microbatches: s.microbatches.max(1),
        chunks: v,
        schedule: if s.stages > 1 {
            r.config.schedule
        } else {
            Schedule::OneFOneB
        },
        forward_s: f * mb / v as f64 + q.hop,
        backward_s: (1.0 - f) * mb / v as f64 + q.hop,
    }
}

/// The idle gaps of one stage's passes before `end`: the bubble.
fn bubbles(stage_passes: &[&Pass], stage: u64, end: f64, critical: bool) -> Vec<Event> {
    let mut t = 0.0;
    let mut out = Vec::new();
    let gap = |from: f64, to: f64, out: &mut Vec<Event>| {
        if to - from > 1e-12 * end.max(1e-30) {
            out.push(Event {
                name: "pipeline bubble".into(),
                kind: Kind::Bubble,
                stage,
                stream: Stream::Compute,
                start_s: from,
                dur_s: to - from,
                critical,
            });
        }
    };
    for x in stage_passes {
        gap(t, x.start_s, &mut out);
        t = x.start_s + x.dur_s;
    }
    gap(t, end, &mut out);
    out
}

/// The events after the passes on one stage: the exposed DP reduction
/// (its hidden part drawn under the last backward passes), the optimizer,
/// offload, the per-step host overhead and the roofline floor.
fn tail_events(c: &mut Cursor, q: &Parts, n: &Names) {
    if q.hidden_dp > 0.0 {
        c.out.push(Event {
            name: format!("{} (hidden)", n.dp),
            kind: Kind::Hidden,
            stage: c.stage,
            stream: Stream::DataParallel,
            start_s: (c.t - q.hidden_dp).max(0.0),
            dur_s: q.hidden_dp.min(c.t),
            critical: false,
        });
    }
    c.push(&n.dp, Kind::Comm, Stream::DataParallel, q.dp);
    c.push(
        "optimizer step",
        Kind::Optimizer,
        Stream::Optimizer,
        q.optimizer,
    );
    c.push(&n.offload, Kind::Host, Stream::Host, q.offload);
    c.push(
        "host overhead (per step)",
        Kind::Host,
        Stream::Host,
        q.overhead,
    );
    c.push("roofline floor", Kind::Host, Stream::Host, q.floor);
}

/// The most forward and backward passes a timeline lays out (stages ×
/// micro-batches × virtual stages × 2): a trace of them stays a few MB and
/// is built in well under a second, whatever micro-batch count is asked.
pub const MAX_PASSES: u64 = 1 << 17;

/// The timeline of the predicted step of `r` with the streams on `links`;
/// an error saying why when the report has no prediction or too many
/// passes to draw.
pub fn of(r: &TrainReport, links: &Links) -> Result<Timeline, String> {
    let Some(p) = &r.predicted else {
        return Err(format!(
            "no predicted step to lay out: {}",
            r.prediction_note
                .as_deref()
                .unwrap_or("the report has no prediction")
        ));
    };
    let sc = &p.schedule;
    if sc.dualpipe.is_some() {
        return Err("the timeline lays out GPipe, 1F1B and interleaved pipelines; DualPipe's two directions and paired chunks are not drawn (its bubble and overlap are in predicted.schedule.dualpipe)".into());
    }
    let passes = sc
        .stages
        .max(1)
        .saturating_mul(sc.microbatches.max(1))
        .saturating_mul(sc.virtual_stages.max(1))
        .saturating_mul(2);
    if passes > MAX_PASSES {
        return Err(format!(
            "{passes} forward and backward passes ({} stages × {} micro-batches × {} virtual stages × 2) are more than a timeline lays out ({MAX_PASSES}); use fewer micro-batches (a larger micro-batch)",
            sc.stages, sc.microbatches, sc.virtual_stages
        ));
    }
    let q = parts(r, p);
    let sh = shape(r, &q, &p.schedule);
    let passes = layout(&sh).ok_or("the pipeline schedule deadlocks")?;
    let end_of = |st: u64| {
        passes
            .iter()
            .filter(|x| x.stage == st)
            .map(|x| x.start_s + x.dur_s)
            .fold(0.0, f64::max)
    };
    let critical = (0..sh.stages)
        .max_by(|a, b| end_of(*a).total_cmp(&end_of(*b)))
        .unwrap_or(0);
    let end = end_of(critical);
    let names = Names::of(r, p.zero, links);
    let mut events = Vec::new();
    for st in 0..sh.stages {
        let mine: Vec<&Pass> = passes.iter().filter(|x| x.stage == st).collect();
        let on_path = st == critical;
        events.extend(bubbles(&mine, st, end, on_path));
        for x in &mine {
            let mut c = Cursor {
                out: &mut events,
                stage: st,
                t: x.start_s,
                critical: on_path,
            };
            pass_events(&mut c, x, &q, &names, sh.chunks as f64);
        }
        let mut c = Cursor {
            out: &mut events,
            stage: st,
            t: end,
            critical: on_path,
        };
        tail_events(&mut c, &q, &names);
    }
    events.sort_by(|a, b| {
        (a.stage, a.start_s)
            .partial_cmp(&(b.stage, b.start_s))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(Timeline {
        model: r.model.clone(),
        chip: r.chip.clone(),
        chips: r.chips,
        schedule: r.config.schedule.to_string(),
        stages: sh.stages,
        microbatches: sh.microbatches,
        virtual_stages: sh.chunks,
        step_time_s: p.step_time_s.get(),
        critical_stage: critical,
        links: links.clone(),
        events,
    })
}

/// The timeline of `r`, the report of `s` (whose chip and topology place
/// the streams on their links): what every front end lays out.
pub fn of_setup(s: &TrainSetup, r: &TrainReport) -> Result<Timeline, String> {
    of(r, &Links::of(&s.chip, &s.topo, r.degrees))
}

#[cfg(test)]
mod tests;
