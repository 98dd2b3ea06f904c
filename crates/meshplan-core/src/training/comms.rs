//! The roofline's pricer of a training step's collectives (book ch5,
//! ch12): what each moves and how often is the step inventory's
//! ([`crate::step::inventory::book_sends`]); here each send is costed on the
//! placed mesh at peak. Both the report (which lists every collective) and
//! the planner (which keeps only the per-axis totals) run [`step_comms`]; a
//! [`CommSink`] decides what is kept.

use serde::Serialize;

use super::context::{MeshCtx, TrainCtx};
pub use super::transfer::Transfer;
use crate::collectives::{cost, AxisPlacement, Collective, CollectiveCost};
use crate::parallelism::{Choice, LogicalAxis};
use crate::step::inventory::book_sends::{BookStep, SendSink};
use crate::trace::Tracer;
use crate::units::{Bytes, Seconds};

/// One collective in a step, as the report lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommEntry {
    /// AllGather, …
    pub kind: Collective,
    /// Logical axis.
    pub axis: LogicalAxis,
    /// What it moves.
    pub transfer: Transfer,
    /// What it moves, in words ("fsdp: gather weights (forward)").
    pub what: String,
    /// V per call (bytes): the full array (AllToAll: all devices' buffers).
    pub bytes: Bytes,
    /// Bytes each device sends per call.
    pub bytes_sent_per_device: Bytes,
    /// Calls per step.
    pub count: u64,
    /// Seconds per step (all calls).
    pub seconds: Seconds,
    /// Whether it can overlap with compute.
    pub overlappable: bool,
    /// Latency-bound.
    pub latency_bound: bool,
}

/// One costed collective of a step.
#[derive(Clone, Copy, Debug)]
pub struct Costed {
    /// What it moves.
    pub what: Transfer,
    /// Sequence parallelism (changes how TP transfers are described).
    pub sp: bool,
    /// Logical axis.
    pub axis: LogicalAxis,
    /// Cost of one call.
    pub cost: CollectiveCost,
    /// Calls per step.
    pub calls: u64,
    /// Seconds per step, all calls.
    pub seconds: f64,
    /// Can overlap with compute.
    pub overlap: bool,
}

/// Where the collectives of a step go besides the per-axis totals.
pub trait CommSink {
    /// One collective.
    fn add(&mut self, c: &Costed);
}

/// Keep nothing (the planner).
impl CommSink for () {
    #[inline]
    fn add(&mut self, _: &Costed) {}
}

/// Keep every collective (the report).
impl CommSink for Vec<CommEntry> {
    fn add(&mut self, c: &Costed) {
        self.push(CommEntry {
            kind: c.cost.kind,
            axis: c.axis,
            transfer: c.what,
            what: c.what.describe(c.sp).to_string(),
            bytes: c.cost.bytes,
            bytes_sent_per_device: c.cost.bytes_sent_per_device,
            count: c.calls,
            seconds: Seconds::new(c.seconds),
            overlappable: c.overlap,
            latency_bound: c.cost.latency_bound,
        });
    }
}

/// Communication seconds per step, by logical axis.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommTotals {
    /// Seconds per axis, indexed by [`LogicalAxis::index`].
    pub per_axis: [f64; 7],
    /// Σ over all collectives.
    pub sum: f64,
}

impl CommTotals {
    /// The slowest axis and its seconds (axes run concurrently: the book's
    /// newer FSDP+TP analysis).
    pub fn slowest(&self) -> (Option<LogicalAxis>, f64) {
        let mut best = (None, 0.0f64);
        for (k, &v) in self.per_axis.iter().enumerate() {
            if v > best.1 {
                best = (Some(LogicalAxis::ALL[k]), v);
            }
        }
        best
    }
}

/// Prices the step's sends at peak into the totals and the sink.
struct Acc<'m, 't, T, S> {
    mesh: &'m MeshCtx,
    eff: f64,
    sp: bool,
    tr: &'t mut T,
    sink: &'t mut S,
    totals: CommTotals,
}

impl<T: Tracer, S: CommSink> SendSink for Acc<'_, '_, T, S> {
    /// Cost one send on its axis' placement: the book's collective time
    /// (`collectives::cost`) × calls / the communication efficiency.
    fn send(
        &mut self,
        axis: LogicalAxis,
        kind: Collective,
        what: Transfer,
        bytes: f64,
        calls: u64,
        overlap: bool,
    ) {
        let pl = self.mesh.axis(axis);
        if matches!(pl, AxisPlacement::Trivial) || calls == 0 || bytes <= 0.0 {
            return;
        }
        // tracing on: every collective is derived; off: each is costed once per mesh
        let c = if T::ENABLED {
            cost(kind, Bytes::new(bytes), pl, self.tr)
        } else {
            self.mesh.memo.get(what, bytes, || {
                cost(kind, Bytes::new(bytes), pl, &mut crate::trace::NoTrace)
            })
        };
        let s = c.time.get() * calls as f64 / self.eff;
        self.totals.per_axis[axis.index()] += s;
        self.totals.sum += s;
        self.sink.add(&Costed {
            what,
            sp: self.sp,
            axis,
            cost: c,
            calls,
            seconds: s,
            overlap,
        });
    }
}

/// Every collective of one step of plan `c` on `mesh`, priced at peak: what
/// is sent is derived once, in the step inventory's module
/// ([`BookStep::sends`]); this is its roofline pricer.
pub fn step_comms<T: Tracer, S: CommSink>(
    ctx: &TrainCtx,
    mesh: &MeshCtx,
    c: &Choice,
    tr: &mut T,
    sink: &mut S,
) -> CommTotals {
    let mut acc = Acc {
        mesh,
        eff: ctx.base.comm_efficiency.clamp(1e-6, 1.0),
        sp: c.sp,
        tr,
        sink,
        totals: CommTotals::default(),
    };
    BookStep::new(ctx, mesh, c).sends(&mut acc);
    acc.totals
}
