//! The training search: every degree tuple × every choice inside it, costed
//! with [`crate::training::evaluate()`] (the same evaluation `meshplan train`
//! reports, tracing off), ranked by an objective, in parallel, keeping the
//! best K in a bounded heap.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::regime::{least_factor, tp_across_nodes, Interval, Regime};
use super::space::{divisors, factorizations, inner_choices, permutations, TrainSpace};
use crate::hardware::Chip;
use crate::mesh::{GpuSplit, Mesh, Topology};
use crate::model::ModelSpec;
use crate::parallelism::{named_choice, Choice, Degrees, Framework, RankOrder, TrainConfig};
use crate::step::calibrated::Features;
use crate::step::inventory::StepInventory;
use crate::step::predict::{
    active_profile, batch_gate, price_replica_split_step_s, replica, unsupported, ActiveProfile,
    RooflineFloor, NO_PROFILE_NOTE,
};
use crate::trace::NoTrace;
use crate::training::evaluate::{before_comms_staged, with_comms, BeforeComms, MeshStages};
use crate::training::feasibility::{degree_problems, N_REASONS};
use crate::training::{analyze_with, Eval, MeshCtx, RejectReason, TrainCtx, TrainReport};

named_choice! {
    /// What to optimise.
    pub enum TrainObjective {
        /// Shortest step: the pessimistic end of the predicted step-time
        /// interval when the chip has an efficiency profile (ties by the point
        /// prediction, then the roofline lower bound; `planner::regime`), else
        /// the lower bound (overlapped communication), ties by the upper bound.
        #[default]
        #[strum(to_string = "time", serialize = "step-time")]
        Time,
        /// Cheapest per token: N·price·step/B. With the chip count fixed this ranks as `time`.
        Cost,
        /// Most HBM left per chip among plans that fit, ties by step time.
        #[strum(
            to_string = "memory-headroom",
            serialize = "memory",
            serialize = "headroom"
        )]
        MemoryHeadroom,
    }
}

impl TrainObjective {
    /// Parse "time" | "cost" | "memory-headroom".
    pub fn parse(s: &str) -> crate::Result<Self> {
        crate::parallelism::parse_choice("objective", s)
    }
}

/// One training search.
#[derive(Clone, Debug)]
pub struct TrainSearch<'a> {
    /// Model.
    pub spec: &'a ModelSpec,
    /// Chip.
    pub chip: &'a Chip,
    /// Hardware layout (TPU slices are also tried in their other axis orders).
    pub topology: Topology,
    /// Fixed part of the configuration (batch, sequence, dtypes, optimizer,
    /// framework…).
    pub base: TrainConfig,
    /// Objective.
    pub objective: TrainObjective,
    /// Plans to keep.
    pub top_k: usize,
    /// Choices.
    pub space: TrainSpace,
    /// Threads (None = all cores; Some(1) = this thread only).
    pub threads: Option<usize>,
    /// Efficiency profile: when set (and the model is one the fidelity model
    /// covers), `time`/`cost` rank by the predicted step time, and its memory
    /// calibration applies. [`TrainSearch::new`] sets the chip's built-in
    /// profile.
    pub profile: Option<ActiveProfile>,
    /// Set by someone who no longer wants the answer (the web server, when
    /// the client has left): the remaining degree tuples are skipped.
    pub cancel: Option<Cancel>,
    /// Flags every predicted plan of this search carries besides its own
    /// (`plan train` searching the dtype: [`Regime::searched_dtype`] when
    /// this search's dtype is outside the profile's fitted ones); none by
    /// default.
    pub searched_flags: Regime,
}

/// A flag a search polls before each degree tuple: set, it stops early.
pub type Cancel = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// The fidelity model's verdict on one plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PredEval {
    /// Predicted seconds per step.
    pub step_time_s: f64,
    /// Model FLOPs / (N·C·predicted step time).
    pub mfu: f64,
    /// The plan's flags: plan-level inputs outside the profile's fitted
    /// ranges, a TP group across nodes.
    pub regime: Regime,
    /// The step-time interval the plan is ranked by (its pessimistic end).
    pub interval: Interval,
}

/// One costed candidate.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    /// Index into [`TrainResult::topologies`].
    pub topo: usize,
    /// Degrees.
    pub deg: Degrees,
    /// Choices inside the degree tuple.
    pub choice: Choice,
    /// Costs.
    pub eval: Eval,
    /// Calibrated prediction (when the search predicts and the plan fits).
    pub pred: Option<PredEval>,
    key: [f64; 4],
    id: (u32, u32),
}

impl Found {
    /// The full configuration.
    pub fn config(&self, base: &TrainConfig) -> TrainConfig {
        self.choice.config(base, self.deg)
    }
    /// Objective value (lower is better): seconds per step (the pessimistic
    /// end of the interval when predicted), USD per token, or minus the
    /// headroom in bytes.
    pub fn score(&self) -> f64 {
        self.key[0]
    }
    /// The ranking key, compared in order (the search's order before its
    /// enumeration index): `plan train` merging searches at several batches
    /// ranks by it per token.
    pub fn key(&self) -> [f64; 4] {
        self.key
    }
    /// The predicted step time, else the roofline lower bound.
    pub fn step_time(&self) -> f64 {
        self.pred.map_or(self.eval.lower, |p| p.step_time_s)
    }
}

impl PartialEq for Found {
    fn eq(&self, o: &Found) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Found {}
impl PartialOrd for Found {
    fn partial_cmp(&self, o: &Found) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Found {
    /// Better plans are smaller: by key, then by enumeration order (so that
    /// ties break the same way on any number of threads).
    fn cmp(&self, o: &Found) -> Ordering {
        for k in 0..4 {
            match self.key[k].total_cmp(&o.key[k]) {
                Ordering::Equal => {}
                x => return x,
            }
        }
        self.id.cmp(&o.id)
    }
}

/// Result of a search.
#[derive(Clone, Debug)]
pub struct TrainResult {
    /// Topologies tried (the given one first, then its axis orders).
    pub topologies: Vec<Topology>,
    /// Best plans, best first.
    pub plans: Vec<Found>,
    /// Rejections per reason (indexed like [`RejectReason::ALL`]).
    pub rejected: [u64; N_REASONS],
    /// Every point of the space (degree tuples × choices).
    pub candidates: u64,
    /// Points that reached the evaluator (feasible degree tuples).
    pub evaluated: u64,
    /// Points that fit.
    pub fitting: u64,
    /// Points skipped because the same plan with fewer gradient-accumulation
    /// steps already fits (accumulation is used only as needed).
    pub dominated: u64,
    /// Fitting points not predicted: their roofline lower bound, which no
    /// prediction goes below, already ranks them behind the K best. A
    /// diagnostic for benchmarks: it depends on which thread saw what first,
    /// so reports leave it out (the ranking and every other count do not).
    pub bounded: u64,
    /// The best-ranked plan that did not fit, if better than the winner (or
    /// the only kind there is).
    pub best_rejected: Option<Found>,
    /// The plan that came closest to fitting (smallest memory / HBM).
    pub closest_rejected: Option<Found>,
    /// Why the topology cannot be used (empty when it can).
    pub topology_reasons: Vec<String>,
    /// Degree tuples.
    pub tuples: u64,
    /// Wall time of the search.
    pub elapsed: Duration,
    /// Whether `time`/`cost` ranked by the fidelity model's predictions.
    pub predicted: bool,
    /// Why times are roofline bounds ("no efficiency profile …" or
    /// "prediction not available: …"); `None` when predictions rank the plans.
    pub prediction_note: Option<String>,
}

impl TrainResult {
    /// Rejection count for one reason.
    pub fn rejected_for(&self, r: RejectReason) -> u64 {
        self.rejected[r.index()]
    }
}

struct Work {
    topo: usize,
    deg: Degrees,
    id: u32,
}

/// A worker's share of the search: the best K in a max-heap (its top is
/// the worst kept plan), counts, and the rejected plans worth reporting.
struct Local {
    top: BinaryHeap<Found>,
    k: usize,
    rejected: [u64; N_REASONS],
    candidates: u64,
    evaluated: u64,
    fitting: u64,
    dominated: u64,
    bounded: u64,
    best_rejected: Option<Found>,
    closest: Option<Found>,
    buf: Vec<Choice>,
}

impl Local {
    fn new(k: usize) -> Self {
        Local {
            top: BinaryHeap::with_capacity(k.min(1 << 16) + 1),
            k,
            rejected: [0; N_REASONS],
            candidates: 0,
            evaluated: 0,
            fitting: 0,
            dominated: 0,
            bounded: 0,
            best_rejected: None,
            closest: None,
            buf: Vec::with_capacity(1024),
        }
    }
    /// Keep `f` if it is among the best K: O(log K), plus a scan of the K
    /// held for a twin ([`twins`]): of two twins only the better-ordered one
    /// is held (the given axis order and the enumeration order first, on
    /// any number of threads).
    #[inline]
    fn offer(&mut self, f: Found) {
        if self.k == 0 {
            return;
        }
        let full = self.top.len() >= self.k;
        if full && !self.top.peek().is_some_and(|w| f < *w) {
            // behind the K held: it cannot enter, nor displace a twin
            // (a twin has the same key, so it is held only if `f` could be)
            return;
        }
        if let Some(t) = self.top.iter().find(|w| twins(w, &f)) {
            if f < *t {
                self.top.retain(|w| !twins(w, &f));
                self.top.push(f);
            }
            return;
        }
        if full {
            self.top.pop();
        }
        self.top.push(f);
    }
    /// The first key of the K-th best plan once K are held: a plan whose
    /// first key cannot go below more than this cannot enter.
    fn bar(&self) -> Option<f64> {
        (self.k > 0 && self.top.len() >= self.k)
            .then(|| self.top.peek().map(|w| w.key[0]))
            .flatten()
    }
    fn offer_rejected(&mut self, f: Found, hbm: f64) {
        if self.best_rejected.as_ref().map_or(true, |b| f < *b) {
            self.best_rejected = Some(f);
        }
        if self.closest.as_ref().map_or(true, |c| closer(&f, c, hbm)) {
            self.closest = Some(f);
        }
    }
    fn merge(mut self, o: Local, hbm: f64) -> Local {
        for f in o.top {
            self.offer(f);
        }
        for i in 0..N_REASONS {
            self.rejected[i] += o.rejected[i];
        }
        self.candidates += o.candidates;
        self.evaluated += o.evaluated;
        self.fitting += o.fitting;
        self.dominated += o.dominated;
        self.bounded += o.bounded;
        if let Some(b) = o.best_rejected {
            if self.best_rejected.as_ref().map_or(true, |x| b < *x) {
                self.best_rejected = Some(b);
            }
        }
        if let Some(c) = o.closest {
            if self.closest.as_ref().map_or(true, |x| closer(&c, x, hbm)) {
                self.closest = Some(c);
            }
        }
        self
    }
}

/// Two plans that are one plan to a user (issue 25: the TPU rankings listed
/// each plan once per axis order of the slice): the same choices and
/// figures (ranking key and memory per chip, to the bit) with the same
/// degrees — on another axis order or rank order — or with ZeRO-3 over dp
/// where the other shards the same ranks as fsdp (ZeRO-3 is FSDP over every
/// data rank, `RunSpec::shard_groups`).
fn twins(a: &Found, b: &Found) -> bool {
    let bits = |f: &Found| f.key.map(f64::to_bits);
    let canon = |f: &Found| {
        let d = f.deg;
        let (dp, fsdp) = if f.choice.zero >= 3 {
            (1, d.dp.saturating_mul(d.fsdp))
        } else {
            (d.dp, d.fsdp)
        };
        (dp, fsdp, d.tp, d.pp, d.cp, d.ep, d.etp)
    };
    bits(a) == bits(b)
        && a.eval.memory.total_bytes.get().to_bits() == b.eval.memory.total_bytes.get().to_bits()
        && a.choice == b.choice
        && canon(a) == canon(b)
}

/// Whether rejected plan `a` is closer to fitting than `b` (memory / HBM, then rank).
fn closer(a: &Found, b: &Found, hbm: f64) -> bool {
    let (x, y) = (
        a.eval.memory.total_bytes.get() / hbm,
        b.eval.memory.total_bytes.get() / hbm,
    );
    x < y || (x == y && a < b)
}

fn key_of(
    obj: TrainObjective,
    e: &Eval,
    pred: Option<&PredEval>,
    hbm: f64,
    usd_per_token_s: f64,
) -> [f64; 4] {
    let mem = e.memory.total_bytes.get();
    match (obj, pred) {
        (TrainObjective::Time, None) => [e.lower, e.upper, mem, 0.0],
        (TrainObjective::Cost, None) => [e.lower * usd_per_token_s, e.upper, mem, 0.0],
        (TrainObjective::MemoryHeadroom, None) => [mem - hbm, e.lower, e.upper, 0.0],
        // the pessimistic end first (`planner::regime`), then the point
        (TrainObjective::Time, Some(p)) => [p.interval.hi_s, p.step_time_s, e.lower, mem],
        (TrainObjective::Cost, Some(p)) => [
            p.interval.hi_s * usd_per_token_s,
            p.step_time_s,
            e.lower,
            mem,
        ],
        (TrainObjective::MemoryHeadroom, Some(p)) => {
            [mem - hbm, p.interval.hi_s, p.step_time_s, e.lower]
        }
    }
}

/// Why a fitting plan gets no place in the ranking.
enum Unranked {
    /// The fidelity model cannot predict it (counted as a rejection).
    Unpredictable,
    /// Predicted, and behind the K best whatever its regime (counted as
    /// fitting, not offered).
    Behind,
}

/// What every predicted plan of one degree tuple shares, worked out once
/// per tuple: whether its TP group spans nodes (a regime flag) and how its
/// degrees split for the step inventory (`StepInventory::split_of`, kept
/// with the degrees it was worked out for).
struct TuplePlacement {
    tp_across: bool,
    split: Option<(Degrees, GpuSplit)>,
}

/// What every worker reads.
struct Shared<'s, 'a> {
    search: &'s TrainSearch<'a>,
    ctx: TrainCtx<'a>,
    topologies: Vec<Topology>,
    topo_bad: bool,
    /// The profile, when predictions rank the plans.
    prof: Option<&'s ActiveProfile>,
    /// USD per token per second of step time (the cost objective).
    usd_per_token_s: f64,
    /// The profile's held-out residuals (none for a transferred profile).
    residuals: Option<&'s crate::fidelity::profile::Interval>,
    /// [`least_factor`] of them: the bound of the unpredicted plans.
    least: f64,
    /// [`least_factor`] without residuals: an offloaded plan's (its
    /// interval has none).
    least_offloaded: f64,
}

impl Shared<'_, '_> {
    /// The fidelity model's step time for a fitting plan, with its regime
    /// and interval; [`Unranked::Unpredictable`] when it cannot predict it,
    /// [`Unranked::Behind`] when its key is behind the K-th best held —
    /// already at its roofline lower bound (it is then not priced), or once
    /// predicted: the search skips it as `offer` would.
    fn predict(
        &self,
        acc: &Local,
        cfg: &TrainConfig,
        e: &Eval,
        place: &mut TuplePlacement,
    ) -> Result<Option<PredEval>, Unranked> {
        let Some(p) = self.prof else {
            return Ok(None);
        };
        let s = self.search;
        let tpu = p.profile.network == crate::training::tpu::ICI;
        // the gate and replica of `prepare`, priced in place: no `Prepared`
        // (configuration, floor) is built per plan
        let rs = replica(&s.spec.arch, self.ctx.pc, s.chip, cfg, tpu)
            .map_err(|_| Unranked::Unpredictable)?;
        let offloaded = e.offload.is_some();
        let regime = Regime::of_placed(
            &rs,
            place.tp_across,
            p.profile.fitted_on.as_ref(),
            offloaded,
        )
        .with(s.searched_flags);
        // the held-out residuals `predicted.interval` uses: none for a
        // transferred profile or an offloaded step
        let residuals = self.residuals.filter(|_| !offloaded);
        // no prediction goes below the roofline lower bound, so neither does
        // the plan's key go below its interval at that bound (its own
        // factor: a flagged plan's is wider than `least_factor`)
        if self.key_behind(acc, Interval::of(e.lower, residuals, regime).hi_s) {
            return Err(Unranked::Behind);
        }
        let features = Features::of(cfg, &s.topology);
        let deg = rs.degrees();
        let split = match place.split {
            Some((d, split)) if d == deg => split,
            _ => {
                let split = StepInventory::split_of(&rs, s.chip, &features);
                place.split = Some((deg, split));
                split
            }
        };
        let floor = RooflineFloor::of(e);
        let step = price_replica_split_step_s(&rs, &features, &floor, s.chip, &p.profile, split);
        let interval = Interval::of(step, residuals, regime);
        if self.key_behind(acc, interval.hi_s) {
            return Err(Unranked::Behind);
        }
        let n = rs.n_gpus.max(1) as f64;
        Ok(Some(PredEval {
            step_time_s: step,
            mfu: crate::accounting::mfu(e.flops.model, n, self.ctx.peak, step),
            regime,
            interval,
        }))
    }

    /// Whether a predicted plan whose interval ends at `hi_s` (or a floor
    /// of it) is behind the K-th best plan held: its first key, as
    /// [`key_of`] forms it, is above the bar.
    fn key_behind(&self, acc: &Local, hi_s: f64) -> bool {
        let key = match self.search.objective {
            TrainObjective::Time => hi_s,
            TrainObjective::Cost => hi_s * self.usd_per_token_s,
            TrainObjective::MemoryHeadroom => return false,
        };
        acc.bar().is_some_and(|bar| key > bar)
    }

    /// Whether a fitting plan cannot enter the K best: ranked by the
    /// pessimistic end of its predicted time (or cost), its key is at least
    /// `lower_s` (its roofline lower bound, which no prediction goes below,
    /// or the prediction itself) times the smallest interval factor of its
    /// kind (`regime::least_factor`; an offloaded plan's interval has no
    /// residuals), and that is already behind the K-th best plan held.
    fn behind_the_bar(&self, acc: &Local, lower_s: f64, offloaded: bool) -> bool {
        let least = if offloaded {
            self.least_offloaded
        } else {
            self.least
        };
        let floor = match (self.prof, self.search.objective) {
            (Some(_), TrainObjective::Time) => lower_s * least,
            (Some(_), TrainObjective::Cost) => lower_s * least * self.usd_per_token_s,
            _ => return false,
        };
        acc.bar().is_some_and(|bar| floor > bar)
    }

    /// Whether a plan over the HBM could still be reported as the best or
    /// the closest rejected plan, from what is known before its
    /// collectives are costed: its memory (the closest's order) and a floor
    /// of its first key (its lower bound is at least `compute_s`).
    fn may_keep_rejected(&self, acc: &Local, b: &BeforeComms) -> bool {
        let (mem, hbm) = (b.memory.total_bytes.get(), self.ctx.hbm);
        let key_floor = match self.search.objective {
            TrainObjective::Time => b.compute_s(),
            TrainObjective::Cost => b.compute_s() * self.usd_per_token_s,
            TrainObjective::MemoryHeadroom => mem - hbm,
        };
        let may_be_best = acc.best_rejected.as_ref().map_or(true, |r| {
            key_floor.total_cmp(&r.key[0]) != Ordering::Greater
        });
        let may_be_closest = acc
            .closest
            .as_ref()
            .map_or(true, |r| mem / hbm <= r.eval.memory.total_bytes.get() / hbm);
        may_be_best || may_be_closest
    }

    /// A fitting plan behind the K best: counted as the prediction would
    /// count it (so that the totals do not depend on which thread saw what
    /// first), not predicted. `false` when the batch gate rejects it.
    fn count_bounded(&self, acc: &mut Local, w: &Work, c: &Choice) -> bool {
        if batch_gate(&c.config(&self.search.base, w.deg)).is_err() {
            acc.rejected[RejectReason::Unpredictable.index()] += 1;
            return false;
        }
        acc.fitting += 1;
        acc.bounded += 1;
        true
    }

    /// Cost every choice of one degree tuple into `acc`.
    fn tuple(&self, acc: &mut Local, w: &Work) {
        let s = self.search;
        let mut buf = std::mem::take(&mut acc.buf);
        inner_choices(&s.space, &s.base, s.spec.arch.n_layers, &w.deg, &mut buf);
        let size = buf.len() as u64;
        acc.candidates += size;
        let placed = if self.topo_bad {
            Err(RejectReason::Topology)
        } else {
            self.place(w)
        };
        match placed {
            Err(r) => acc.rejected[r.index()] += size,
            Ok(mesh) => {
                acc.evaluated += size;
                self.choices(acc, w, &mesh, &buf);
            }
        }
        acc.buf = buf;
    }

    /// The degree rules, then the mesh placement.
    fn place(&self, w: &Work) -> Result<MeshCtx, RejectReason> {
        let s = self.search;
        if let Some(p) = degree_problems(&s.spec.arch, s.base.seq_len, &w.deg).next() {
            return Err(p.reason());
        }
        let mesh = Mesh::build(s.chip, &self.topologies[w.topo], w.deg);
        if !mesh.reasons.is_empty() {
            let d = w.deg;
            return Err(if d.ep > 1 && d.data().saturating_mul(d.cp) % d.ep != 0 {
                RejectReason::EpDataAxes
            } else {
                RejectReason::Placement
            });
        }
        Ok(MeshCtx::from_mesh(&mesh))
    }

    fn choices(&self, acc: &mut Local, w: &Work, mesh: &MeshCtx, buf: &[Choice]) {
        let s = self.search;
        // without a pipeline, gradient accumulation is used only as needed:
        // once (ZeRO, remat, SP) fits, more micro-batches are skipped
        let mut fitted: Option<(
            u8,
            crate::parallelism::Remat,
            bool,
            crate::parallelism::Offload,
        )> = None;
        let stages = MeshStages::of(&self.ctx, mesh);
        let mut place = TuplePlacement {
            tp_across: self.prof.is_some() && tp_across_nodes(&self.topologies[w.topo], &w.deg),
            split: None,
        };
        for (ii, c) in buf.iter().enumerate() {
            if w.deg.pp == 1 && fitted == Some((c.zero, c.remat, c.sp, c.offload)) {
                acc.dominated += 1;
                continue;
            }
            // memory and compute first: the collectives are costed only for
            // a plan that can still be ranked or reported (the lower bound is
            // at least the compute time, whatever they cost)
            let b = before_comms_staged(&self.ctx, mesh, c, &stages, &mut NoTrace);
            let within = b.within_hbm(&self.ctx);
            let surely_fits = within && b.memory.offload.is_none();
            if (surely_fits && self.behind_the_bar(acc, b.compute_s(), false))
                || (!within && !self.may_keep_rejected(acc, &b))
            {
                if !within {
                    acc.rejected[RejectReason::Memory.index()] += 1;
                } else if self.count_bounded(acc, w, c) {
                    fitted = Some((c.zero, c.remat, c.sp, c.offload));
                }
                continue;
            }
            let e = with_comms(&self.ctx, mesh, c, b, &mut NoTrace, &mut ());
            if e.fits && self.behind_the_bar(acc, e.lower, e.offload.is_some()) {
                if self.count_bounded(acc, w, c) {
                    fitted = Some((c.zero, c.remat, c.sp, c.offload));
                }
                continue;
            }
            let pred = if e.fits {
                match self.predict(acc, &c.config(&s.base, w.deg), &e, &mut place) {
                    Ok(p) => p,
                    Err(Unranked::Unpredictable) => {
                        acc.rejected[RejectReason::Unpredictable.index()] += 1;
                        continue;
                    }
                    Err(Unranked::Behind) => {
                        fitted = Some((c.zero, c.remat, c.sp, c.offload));
                        acc.fitting += 1;
                        continue;
                    }
                }
            } else {
                None
            };
            let f = Found {
                topo: w.topo,
                deg: w.deg,
                choice: *c,
                eval: e,
                pred,
                key: key_of(
                    s.objective,
                    &e,
                    pred.as_ref(),
                    self.ctx.hbm,
                    self.usd_per_token_s,
                ),
                id: (w.id, ii as u32),
            };
            if e.fits {
                fitted = Some((c.zero, c.remat, c.sp, c.offload));
                acc.fitting += 1;
                acc.offer(f);
            } else {
                acc.rejected[RejectReason::Memory.index()] += 1;
                acc.offer_rejected(f, self.ctx.hbm);
            }
        }
    }
}

/// Whether `p`'s predictions rank a search of `base`: always on GPUs; on a
/// TPU only under MaxText's accounting (the book's TPU exercises rank by the
/// roofline).
fn ranks_by_prediction(p: &ActiveProfile, base: &TrainConfig) -> bool {
    p.profile.network != crate::training::tpu::ICI || base.framework == Framework::Maxtext
}

impl<'a> TrainSearch<'a> {
    /// A search with the default space, all cores, top 10, and the chip's
    /// built-in efficiency profile.
    pub fn new(
        spec: &'a ModelSpec,
        chip: &'a Chip,
        topology: Topology,
        base: TrainConfig,
    ) -> TrainSearch<'a> {
        TrainSearch {
            spec,
            chip,
            topology,
            base,
            objective: TrainObjective::Time,
            top_k: 10,
            space: TrainSpace::default(),
            threads: None,
            profile: active_profile(chip, None)
                .ok()
                .flatten()
                .filter(|p| ranks_by_prediction(p, &base)),
            cancel: None,
            searched_flags: Regime::default(),
        }
    }

    /// The topologies searched: the given one, then (TPU, `permute_torus`)
    /// the other orders of its physical axes.
    pub fn topologies(&self) -> Vec<Topology> {
        match (&self.topology, self.space.permute_torus) {
            (Topology::Torus { slices, shape }, true) => permutations(shape)
                .into_iter()
                .map(|s| Topology::Torus {
                    slices: *slices,
                    shape: s,
                })
                .collect(),
            (t, _) => vec![t.clone()],
        }
    }

    /// Whether predictions rank the plans, and if not, why.
    fn prediction_status(&self) -> (Option<&ActiveProfile>, Option<String>) {
        let unsupported = unsupported(self.chip, &self.base);
        match (&self.profile, unsupported) {
            (None, _) => (None, Some(NO_PROFILE_NOTE.to_string())),
            (Some(p), _) if !ranks_by_prediction(p, &self.base) => (
                None,
                Some(
                    "TPU plans are ranked by roofline bounds under the book's accounting; --framework maxtext ranks them by the TPU profile's predictions"
                        .to_string(),
                ),
            ),
            (Some(_), Some(r)) => (
                None,
                Some(format!(
                    "prediction not available: {r}: times are roofline bounds"
                )),
            ),
            (Some(p), None) => (Some(p), None),
        }
    }

    /// Every degree tuple of every topology.
    fn work(&self, topologies: &[Topology]) -> Vec<Work> {
        let n = self.topology.chips();
        let moe = self.spec.arch.moe.is_some();
        let mut work = Vec::new();
        let mut id = 0u32;
        if n == 0 {
            return work;
        }
        let facts = factorizations(n);
        for (ti, topo) in topologies.iter().enumerate() {
            for f in &facts {
                let base = Degrees::from_factors(*f);
                let eps = if moe {
                    divisors(base.dp * base.fsdp * base.cp)
                } else {
                    vec![1]
                };
                for ep in eps {
                    let d = Degrees { ep, ..base };
                    let orders = match self.space.rank_orders.as_slice() {
                        // without a pipeline both orders place every axis
                        // alike; TPU slices have no rank order
                        [one] if d.pp > 1 && matches!(topo, Topology::Gpu { .. }) => vec![*one],
                        [] | [_] => vec![RankOrder::PipelineOuter],
                        _ => rank_orders(topo, &d),
                    };
                    for order in orders {
                        work.push(Work {
                            topo: ti,
                            deg: Degrees { ep, order, ..base },
                            id,
                        });
                        id = id.wrapping_add(1);
                    }
                }
            }
        }
        work
    }

    /// Run the search. `progress(done, total)` is called from worker threads
    /// as degree tuples finish (may be a no-op).
    pub fn run_with_progress(&self, progress: &(dyn Fn(u64, u64) + Sync)) -> TrainResult {
        let t0 = Instant::now();
        let topologies = self.topologies();
        let n = self.topology.chips();
        let (prof, prediction_note) = self.prediction_status();
        let cal = self
            .profile
            .as_ref()
            .map(|p| p.profile.memory_calibration());
        let ctx = TrainCtx::quiet(self.spec, self.chip, &self.base, cal);
        let price = self.chip.usd_per_chip_hour.unwrap_or(1.0);
        // The topology itself: pure data parallelism always factors, so any
        // reason it gets is the topology's.
        let pure = Mesh::build(
            self.chip,
            &self.topology,
            Degrees {
                dp: n.max(1),
                ..Degrees::default()
            },
        );
        let work = self.work(&topologies);
        let hbm = ctx.hbm;
        let residuals = prof
            .filter(|p| p.transferred_from.is_none())
            .and_then(|p| p.profile.interval.as_ref());
        let shared = Shared {
            search: self,
            residuals,
            least: least_factor(residuals),
            least_offloaded: least_factor(None),
            usd_per_token_s: n as f64 * price / 3600.0 / self.base.batch_tokens.max(1) as f64,
            ctx,
            topo_bad: !pure.reasons.is_empty(),
            topologies,
            prof,
        };
        let total = work.len() as u64;
        let done = std::sync::atomic::AtomicU64::new(0);
        let cancelled = || {
            let c = self.cancel.as_ref();
            c.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
        };
        let one = |mut acc: Local, w: &Work| -> Local {
            if cancelled() {
                return acc;
            }
            shared.tuple(&mut acc, w);
            let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if d % 64 == 0 || d == total {
                progress(d, total);
            }
            acc
        };
        let k = self.top_k;
        let run = || {
            work.par_iter()
                .fold(|| Local::new(k), one)
                .reduce(|| Local::new(k), |a, b| a.merge(b, hbm))
        };
        let acc = match self.threads {
            Some(1) => work.iter().fold(Local::new(k), one),
            Some(t) => match rayon::ThreadPoolBuilder::new()
                .num_threads(t.min(num_cpus()))
                .build()
            {
                Ok(pool) => pool.install(run),
                Err(_) => run(),
            },
            None => run(),
        };
        let plans = acc.top.into_sorted_vec();
        let best_rejected = match (acc.best_rejected, plans.first()) {
            (Some(b), Some(w)) if b < *w => Some(b),
            (Some(b), None) => Some(b),
            _ => None,
        };
        TrainResult {
            topologies: shared.topologies,
            plans,
            rejected: acc.rejected,
            candidates: acc.candidates,
            evaluated: acc.evaluated,
            fitting: acc.fitting,
            dominated: acc.dominated,
            bounded: acc.bounded,
            best_rejected,
            closest_rejected: acc.closest,
            topology_reasons: pure.reasons,
            tuples: total,
            elapsed: t0.elapsed(),
            predicted: shared.prof.is_some(),
            prediction_note,
        }
    }

    /// Run the search without progress reports.
    pub fn run(&self) -> TrainResult {
        self.run_with_progress(&|_, _| {})
    }

    /// The full `training::analyze` report of a found plan (NoTrace), with
    /// the calibrated prediction attached when the search has a profile.
    pub fn report(&self, r: &TrainResult, f: &Found) -> TrainReport {
        let cfg = f.config(&self.base);
        analyze_with(
            self.spec,
            self.chip,
            &r.topologies[f.topo],
            &cfg,
            self.profile
                .as_ref()
                .filter(|p| ranks_by_prediction(p, &self.base)),
            &mut NoTrace,
        )
    }
}

/// Worker threads the machine has (a request for more is capped to this).
pub fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The GPU rank orders worth trying for `deg` on `topo`: Megatron's default,
/// and pipeline-inside-the-node (`tp-pp-dp`) when it places some axis
/// differently (pp > 1 with room left in the node beside tp); TPU slices
/// place axes on torus dimensions (one order).
pub fn rank_orders(topo: &Topology, deg: &Degrees) -> Vec<RankOrder> {
    let mut out = vec![RankOrder::PipelineOuter];
    if let Topology::Gpu { gpus_per_node, .. } = topo {
        let inner = Degrees {
            order: RankOrder::PipelineInner,
            ..*deg
        };
        if deg.pp > 1 && GpuSplit::new(deg, *gpus_per_node) != GpuSplit::new(&inner, *gpus_per_node)
        {
            out.push(RankOrder::PipelineInner);
        }
    }
    out
}
