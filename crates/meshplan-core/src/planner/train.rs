//! The training search: every degree tuple × every inner choice, costed with
//! [`super::fast::fast_eval`], ranked by an objective, in parallel.

use std::cmp::Ordering;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use serde::Serialize;

use super::fast::{fast_eval, tuple_ctx, FastEval, Inner, TrainCtx, TupleCtx};
use crate::hardware::{Chip, ChipKind};
use crate::mesh::{Degrees, LogicalAxis, Mesh, Topology};
use crate::model::ModelSpec;
use crate::trace::NoTrace;
use crate::training::predicted::{
    active_profile, attach, model_unsupported, run_spec_for, ActiveProfile, NO_PROFILE_NOTE,
};
use crate::training::{analyze, Remat, Schedule, TrainConfig, TrainReport};
use crate::units::DType;

/// What to optimise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrainObjective {
    /// Shortest step: the predicted step time when the chip has an efficiency
    /// profile (ties by the roofline lower bound), else the lower bound
    /// (overlapped communication), ties by the upper bound.
    #[default]
    Time,
    /// Cheapest per token: N·price·step/B. With the chip count fixed this ranks as `time`.
    Cost,
    /// Most HBM left per chip among plans that fit, ties by step time.
    MemoryHeadroom,
}

impl TrainObjective {
    /// Parse "time" | "cost" | "memory-headroom".
    pub fn parse(s: &str) -> crate::Result<Self> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "time" | "step-time" => Ok(Self::Time),
            "cost" => Ok(Self::Cost),
            "memory-headroom" | "memory" | "headroom" => Ok(Self::MemoryHeadroom),
            _ => Err(crate::Error::BadValue {
                what: "objective".into(),
                input: s.into(),
                expected: "time, cost or memory-headroom".into(),
            }),
        }
    }
}

/// Why a candidate was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectReason {
    /// The topology itself cannot be used (slice larger than the chip offers, …).
    Topology,
    /// tp does not divide the query heads.
    TpHeads,
    /// tp and the KV heads do not divide one another.
    TpKvHeads,
    /// pp does not divide the layers.
    PpLayers,
    /// cp does not divide the sequence length.
    CpSeqLen,
    /// ep does not divide the experts.
    EpExperts,
    /// ep does not divide dp·fsdp·cp.
    EpDataAxes,
    /// The degrees do not factor into the slice / NVLink domains.
    Placement,
    /// Memory per device exceeds the usable HBM.
    Memory,
    /// The fidelity model's peak memory exceeds the profile's usable HBM.
    PredictedMemory,
    /// The fidelity model cannot predict this plan (more micro-batches than
    /// sequences); only when predictions rank the search.
    Unpredictable,
}

/// Number of [`RejectReason`]s.
pub const N_REASONS: usize = 11;

impl RejectReason {
    /// All reasons, in report order.
    pub const ALL: [RejectReason; N_REASONS] = [
        RejectReason::Topology,
        RejectReason::TpHeads,
        RejectReason::TpKvHeads,
        RejectReason::PpLayers,
        RejectReason::CpSeqLen,
        RejectReason::EpExperts,
        RejectReason::EpDataAxes,
        RejectReason::Placement,
        RejectReason::Memory,
        RejectReason::PredictedMemory,
        RejectReason::Unpredictable,
    ];
    /// Reasons given after a candidate reached the evaluator (its degree
    /// tuple was feasible): memory and the fidelity model's verdicts.
    pub const fn after_evaluation(self) -> bool {
        matches!(
            self,
            RejectReason::Memory | RejectReason::PredictedMemory | RejectReason::Unpredictable
        )
    }
    /// JSON key.
    pub const fn key(self) -> &'static str {
        match self {
            RejectReason::Topology => "topology",
            RejectReason::TpHeads => "tp-heads",
            RejectReason::TpKvHeads => "tp-kv-heads",
            RejectReason::PpLayers => "pp-layers",
            RejectReason::CpSeqLen => "cp-seq-len",
            RejectReason::EpExperts => "ep-experts",
            RejectReason::EpDataAxes => "ep-data-axes",
            RejectReason::Placement => "placement",
            RejectReason::Memory => "memory",
            RejectReason::PredictedMemory => "predicted-memory",
            RejectReason::Unpredictable => "unpredictable",
        }
    }
    /// Sentence.
    pub const fn describe(self) -> &'static str {
        match self {
            RejectReason::Topology => "the topology cannot be used at all",
            RejectReason::TpHeads => "tp does not divide the query heads",
            RejectReason::TpKvHeads => "tp and the KV heads do not divide one another",
            RejectReason::PpLayers => "pp does not divide the layers",
            RejectReason::CpSeqLen => "cp does not divide the sequence length",
            RejectReason::EpExperts => "ep does not divide the experts",
            RejectReason::EpDataAxes => "ep does not divide dp·fsdp·cp",
            RejectReason::Placement => "the degrees do not factor into the slice / NVLink domains",
            RejectReason::Memory => "memory per device exceeds HBM",
            RejectReason::PredictedMemory => "predicted peak memory exceeds HBM (fidelity model)",
            RejectReason::Unpredictable => {
                "the fidelity model cannot predict the plan (more micro-batches than sequences)"
            }
        }
    }
    fn idx(self) -> usize {
        Self::ALL.iter().position(|x| *x == self).unwrap_or(0)
    }
}

/// The choices searched besides the degrees.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainSpace {
    /// Remat policies.
    pub remats: Vec<Remat>,
    /// ZeRO stages (only when dp·cp > 1; otherwise the stage changes nothing).
    pub zero_stages: Vec<u8>,
    /// Pipeline schedules (only when pp > 1).
    pub schedules: Vec<Schedule>,
    /// Microbatch counts are pp·2^k for 2^k ≤ this, and no more than the
    /// sequences per replica unless m = pp.
    pub max_microbatch_factor: u64,
    /// Virtual stages tried with the interleaved schedule (those dividing L/pp).
    pub virtual_stages: Vec<u64>,
    /// Sequence parallelism settings (only when tp > 1).
    pub sequence_parallel: Vec<bool>,
    /// TPU: also try every distinct ordering of the slice's physical axes
    /// (which axes tp, fsdp, … land on).
    pub permute_torus: bool,
}

impl Default for TrainSpace {
    fn default() -> Self {
        TrainSpace {
            remats: vec![
                Remat::None,
                Remat::Full,
                Remat::AfterMatmuls,
                Remat::Selective,
            ],
            zero_stages: vec![0, 1, 2, 3],
            schedules: vec![Schedule::Afab, Schedule::OneFOneB, Schedule::Interleaved],
            max_microbatch_factor: 32,
            virtual_stages: vec![2, 4, 8],
            sequence_parallel: vec![false, true],
            permute_torus: true,
        }
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
    /// Fixed part of the configuration (batch, sequence, dtypes, optimizer…).
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
    /// covers), `time`/`cost` rank by the predicted step time and plans whose
    /// predicted peak memory exceeds HBM are rejected. [`TrainSearch::new`]
    /// sets the chip's built-in profile.
    pub profile: Option<ActiveProfile>,
}

/// The fidelity model's verdict on one plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PredEval {
    /// Predicted seconds per step.
    pub step_time_s: f64,
    /// Model FLOPs / (N·C·predicted step time).
    pub mfu: f64,
    /// Predicted peak memory (bytes) of the most loaded device.
    pub peak_bytes: f64,
    /// Peak ≤ the profile's usable HBM.
    pub fits: bool,
}

/// One costed candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Found {
    /// Index into [`TrainResult::topologies`].
    pub topo: usize,
    /// Degrees.
    pub deg: Degrees,
    /// Inner choices.
    pub inner: Inner,
    /// Costs.
    pub eval: FastEval,
    /// Calibrated prediction (when the search predicts and the plan fits the roofline memory check).
    pub pred: Option<PredEval>,
    key: [f64; 3],
    id: (u32, u32),
}

impl Found {
    /// The full configuration.
    pub fn config(&self, base: &TrainConfig) -> TrainConfig {
        self.inner.config(base, self.deg)
    }
    /// Objective value (lower is better): seconds per step, USD per token,
    /// or minus the headroom in bytes.
    pub fn score(&self) -> f64 {
        self.key[0]
    }
    fn cmp(&self, o: &Found) -> Ordering {
        for k in 0..3 {
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
    /// Every point of the space (degree tuples × inner choices).
    pub candidates: u64,
    /// Points that reached the evaluator (feasible degree tuples).
    pub evaluated: u64,
    /// Points that fit.
    pub fitting: u64,
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
        self.rejected[r.idx()]
    }
}

/// All ordered ways to write `n` as dp·fsdp·tp·pp·cp.
pub fn factorizations(n: u64) -> Vec<[u64; 5]> {
    let divs = divisors(n);
    let mut out = Vec::new();
    for &tp in &divs {
        let r1 = n / tp;
        for &pp in divs.iter().filter(|d| r1 % **d == 0) {
            let r2 = r1 / pp;
            for &cp in divs.iter().filter(|d| r2 % **d == 0) {
                let r3 = r2 / cp;
                for &fsdp in divs.iter().filter(|d| r3 % **d == 0) {
                    out.push([r3 / fsdp, fsdp, tp, pp, cp]);
                }
            }
        }
    }
    out
}

/// Divisors of `n`, ascending.
pub fn divisors(n: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut i = 1;
    // `i <= n / i`, not `i * i <= n`: no overflow for n near u64::MAX
    while i <= n / i {
        if n % i == 0 {
            v.push(i);
            if i != n / i {
                v.push(n / i);
            }
        }
        i += 1;
    }
    v.sort_unstable();
    v
}

fn permutations(shape: &[u64]) -> Vec<Vec<u64>> {
    fn rec(cur: &mut Vec<u64>, rest: &mut Vec<u64>, out: &mut Vec<Vec<u64>>) {
        if rest.is_empty() {
            if !out.contains(cur) {
                out.push(cur.clone());
            }
            return;
        }
        for i in 0..rest.len() {
            let x = rest.remove(i);
            cur.push(x);
            rec(cur, rest, out);
            cur.pop();
            rest.insert(i, x);
        }
    }
    let mut out = vec![shape.to_vec()];
    rec(&mut Vec::new(), &mut shape.to_vec(), &mut out);
    out
}

/// The inner choices for one degree tuple, appended to `out` (cleared first).
pub fn inner_choices(
    space: &TrainSpace,
    base: &TrainConfig,
    n_layers: u64,
    deg: &Degrees,
    out: &mut Vec<Inner>,
) {
    out.clear();
    let zeros: &[u8] = if deg.dp * deg.cp > 1 {
        &space.zero_stages
    } else {
        &[0]
    };
    let sps: &[bool] = if deg.tp > 1 {
        &space.sequence_parallel
    } else {
        &[false]
    };
    let spr = base.batch_tokens as f64 / base.seq_len.max(1) as f64 / (deg.dp * deg.fsdp) as f64;
    for &zero in zeros {
        for &remat in &space.remats {
            for &sp in sps {
                if deg.pp <= 1 {
                    out.push(Inner {
                        zero,
                        remat,
                        sp,
                        schedule: Schedule::OneFOneB,
                        microbatches: 1,
                        virtual_stages: 1,
                    });
                    continue;
                }
                for &schedule in &space.schedules {
                    let mut f = 1;
                    while f <= space.max_microbatch_factor.max(1) {
                        let m = deg.pp * f;
                        f *= 2;
                        if m != deg.pp && m as f64 > spr {
                            break;
                        }
                        if schedule == Schedule::Interleaved {
                            for &v in &space.virtual_stages {
                                if v >= 2 && n_layers % (deg.pp * v) == 0 {
                                    out.push(Inner {
                                        zero,
                                        remat,
                                        sp,
                                        schedule,
                                        microbatches: m,
                                        virtual_stages: v,
                                    });
                                }
                            }
                        } else {
                            out.push(Inner {
                                zero,
                                remat,
                                sp,
                                schedule,
                                microbatches: m,
                                virtual_stages: 1,
                            });
                        }
                    }
                }
            }
        }
    }
}

struct Work {
    topo: usize,
    deg: Degrees,
    id: u32,
}

struct Local {
    top: Vec<Found>,
    k: usize,
    rejected: [u64; N_REASONS],
    candidates: u64,
    evaluated: u64,
    fitting: u64,
    best_rejected: Option<Found>,
    closest: Option<Found>,
    buf: Vec<Inner>,
}

impl Local {
    fn new(k: usize) -> Self {
        Local {
            top: Vec::with_capacity(k + 1),
            k,
            rejected: [0; N_REASONS],
            candidates: 0,
            evaluated: 0,
            fitting: 0,
            best_rejected: None,
            closest: None,
            buf: Vec::with_capacity(1024),
        }
    }
    #[inline]
    fn offer(&mut self, f: Found) {
        if self.k == 0 {
            return;
        }
        if self.top.len() == self.k {
            if let Some(w) = self.top.last() {
                if f.cmp(w) != Ordering::Less {
                    return;
                }
            }
            self.top.pop();
        }
        let pos = self
            .top
            .iter()
            .position(|x| f.cmp(x) == Ordering::Less)
            .unwrap_or(self.top.len());
        self.top.insert(pos, f);
    }
    fn offer_rejected(&mut self, f: Found, hbm: f64) {
        if self
            .best_rejected
            .as_ref()
            .map_or(true, |b| f.cmp(b) == Ordering::Less)
        {
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
        if let Some(b) = o.best_rejected {
            if self
                .best_rejected
                .as_ref()
                .map_or(true, |x| b.cmp(x) == Ordering::Less)
            {
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

/// Whether rejected plan `a` is closer to fitting than `b` (memory / HBM, then rank).
fn closer(a: &Found, b: &Found, hbm: f64) -> bool {
    let (x, y) = (a.eval.total_bytes / hbm, b.eval.total_bytes / hbm);
    x < y || (x == y && a.cmp(b) == Ordering::Less)
}

fn key_of(
    obj: TrainObjective,
    e: &FastEval,
    pred: Option<&PredEval>,
    hbm: f64,
    usd_per_token_s: f64,
) -> [f64; 3] {
    match (obj, pred) {
        (TrainObjective::Time, None) => [e.lower, e.upper, e.total_bytes],
        (TrainObjective::Cost, None) => [e.lower * usd_per_token_s, e.upper, e.total_bytes],
        (TrainObjective::MemoryHeadroom, None) => [e.total_bytes - hbm, e.lower, e.upper],
        (TrainObjective::Time, Some(p)) => [p.step_time_s, e.lower, e.total_bytes],
        (TrainObjective::Cost, Some(p)) => {
            [p.step_time_s * usd_per_token_s, e.lower, e.total_bytes]
        }
        (TrainObjective::MemoryHeadroom, Some(p)) => [e.total_bytes - hbm, p.step_time_s, e.lower],
    }
}

impl TrainSearch<'_> {
    /// A search with the default space, all cores, top 10.
    pub fn new<'b>(
        spec: &'b ModelSpec,
        chip: &'b Chip,
        topology: Topology,
        base: TrainConfig,
    ) -> TrainSearch<'b> {
        TrainSearch {
            spec,
            chip,
            topology,
            base,
            objective: TrainObjective::Time,
            top_k: 10,
            space: TrainSpace::default(),
            threads: None,
            profile: active_profile(chip, None).ok().flatten(),
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

    /// Run the search. `progress(done, total)` is called from worker threads
    /// as degree tuples finish (may be a no-op).
    pub fn run_with_progress(&self, progress: &(dyn Fn(u64, u64) + Sync)) -> TrainResult {
        let t0 = Instant::now();
        let topologies = self.topologies();
        let n = self.topology.chips();
        let ctx = TrainCtx::new(self.spec, self.chip, &self.base);
        let unsupported = model_unsupported(self.spec, &self.base);
        let prof = self.profile.as_ref().filter(|_| unsupported.is_none());
        let prediction_note = match (&self.profile, &unsupported) {
            (None, _) => Some(NO_PROFILE_NOTE.to_string()),
            (Some(_), Some(r)) => Some(format!(
                "prediction not available: {r}: times are roofline bounds"
            )),
            (Some(_), None) => None,
        };
        let c_bf16 = self.chip.flops(DType::Bf16).get();
        let model_flops = ctx.model_flops();
        let hbm = ctx.hbm();
        let price = self.chip.usd_per_chip_hour.unwrap_or(1.0);
        let usd_per_token_s = n as f64 * price / 3600.0 / self.base.batch_tokens.max(1) as f64;
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
        let mut work = Vec::new();
        let moe = self.spec.arch.moe.is_some();
        let mut id = 0u32;
        if n > 0 {
            for (ti, _) in topologies.iter().enumerate() {
                for f in factorizations(n) {
                    let base = Degrees {
                        dp: f[0],
                        fsdp: f[1],
                        tp: f[2],
                        pp: f[3],
                        cp: f[4],
                        ep: 1,
                    };
                    let eps = if moe {
                        divisors(f[0] * f[1] * f[4])
                    } else {
                        vec![1]
                    };
                    for ep in eps {
                        work.push(Work {
                            topo: ti,
                            deg: Degrees { ep, ..base },
                            id,
                        });
                        id += 1;
                    }
                }
            }
        }
        let total = work.len() as u64;
        let done = std::sync::atomic::AtomicU64::new(0);
        let topo_bad = !pure.reasons.is_empty();
        let nl = self.spec.arch.n_layers;
        // the fidelity model's view of the model, built once per search
        let shape = crate::fidelity::Shape::from(&self.spec.arch);
        let one = |mut acc: Local, w: &Work| -> Local {
            let mut buf = std::mem::take(&mut acc.buf);
            inner_choices(&self.space, &self.base, nl, &w.deg, &mut buf);
            let size = buf.len() as u64;
            acc.candidates += size;
            let tc: Result<TupleCtx, RejectReason> = if topo_bad {
                Err(RejectReason::Topology)
            } else {
                tuple_ctx(&ctx, self.spec, self.chip, &topologies[w.topo], w.deg)
            };
            match tc {
                Err(r) => acc.rejected[r.idx()] += size,
                Ok(tc) => {
                    acc.evaluated += size;
                    for (ii, inner) in buf.iter().enumerate() {
                        let e = fast_eval(&ctx, &tc, inner);
                        // the fidelity model, only for plans that pass the roofline checks
                        let pred = match prof {
                            Some(p) if e.fits => {
                                let cfg = inner.config(&self.base, w.deg);
                                match run_spec_for(shape.clone(), &cfg) {
                                    Err(_) => {
                                        acc.rejected[RejectReason::Unpredictable.idx()] += 1;
                                        continue;
                                    }
                                    Ok(rs) => {
                                        let x =
                                            crate::fidelity::predict(&rs, self.chip, &p.profile);
                                        let n = rs.n_gpus.max(1) as f64;
                                        Some(PredEval {
                                            step_time_s: x.step_time_s,
                                            mfu: if x.step_time_s > 0.0 {
                                                model_flops / (n * c_bf16 * x.step_time_s)
                                            } else {
                                                0.0
                                            },
                                            peak_bytes: x.memory.total,
                                            fits: x.fits,
                                        })
                                    }
                                }
                            }
                            _ => None,
                        };
                        let f = Found {
                            topo: w.topo,
                            deg: w.deg,
                            inner: *inner,
                            eval: e,
                            pred,
                            key: key_of(self.objective, &e, pred.as_ref(), hbm, usd_per_token_s),
                            id: (w.id, ii as u32),
                        };
                        if e.fits && pred.map_or(true, |p| p.fits) {
                            acc.fitting += 1;
                            acc.offer(f);
                        } else if e.fits {
                            acc.rejected[RejectReason::PredictedMemory.idx()] += 1;
                            acc.offer_rejected(f, hbm);
                        } else {
                            acc.rejected[RejectReason::Memory.idx()] += 1;
                            acc.offer_rejected(f, hbm);
                        }
                    }
                }
            }
            acc.buf = buf;
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
            Some(t) => match rayon::ThreadPoolBuilder::new().num_threads(t).build() {
                Ok(pool) => pool.install(run),
                Err(_) => run(),
            },
            None => run(),
        };
        let best_rejected = match (acc.best_rejected, acc.top.first()) {
            (Some(b), Some(w)) if b.cmp(w) == Ordering::Less => Some(b),
            (Some(b), None) => Some(b),
            _ => None,
        };
        TrainResult {
            topologies,
            plans: acc.top,
            rejected: acc.rejected,
            candidates: acc.candidates,
            evaluated: acc.evaluated,
            fitting: acc.fitting,
            best_rejected,
            closest_rejected: acc.closest,
            topology_reasons: pure.reasons,
            tuples: total,
            elapsed: t0.elapsed(),
            predicted: prof.is_some(),
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
        let mut rep = analyze(
            self.spec,
            self.chip,
            &r.topologies[f.topo],
            &cfg,
            &mut NoTrace,
        );
        attach(&mut rep, self.spec, self.chip, &cfg, self.profile.as_ref());
        rep
    }
}

/// The collective that takes longest in a report ("AllGather fsdp: …").
pub fn leading_collective(r: &TrainReport) -> Option<&crate::training::CommEntry> {
    r.comms
        .iter()
        .max_by(|a, b| a.seconds.get().total_cmp(&b.seconds.get()))
}

/// Chip counts worth suggesting near `n` for `chip` (GPU: whole NVLink
/// domains; TPU: offered slice sizes), ascending, at most 4 above `n`.
pub fn nearby_chip_counts(chip: &Chip, n: u64) -> Vec<u64> {
    let mut v: Vec<u64> = match (&chip.ici, chip.kind) {
        (Some(ici), ChipKind::Tpu) => {
            let mut s: Vec<u64> = ici
                .slice_shapes
                .iter()
                .map(|s| s.iter().product())
                .collect();
            s.sort_unstable();
            s.dedup();
            s
        }
        _ => {
            let dom = chip.nvlink.as_ref().map_or(1, |x| x.domain_size).max(1);
            let mut s: Vec<u64> = (0..20).map(|k| 1u64 << k).filter(|x| *x <= dom).collect();
            let mut m = dom;
            while s.len() < 64 && m <= n.saturating_mul(64).max(dom) {
                s.push(m);
                m = if m < n { n.div_ceil(dom) * dom } else { m * 2 };
            }
            s.sort_unstable();
            s.dedup();
            s
        }
    };
    let max = chip.max_chips().unwrap_or(u64::MAX);
    v.retain(|x| *x > n && *x <= max);
    v.truncate(4);
    v
}

/// The axis-by-axis description of a found plan's mesh.
pub fn axis_layout(chip: &Chip, topo: &Topology, deg: Degrees) -> Vec<(LogicalAxis, String)> {
    Mesh::build(chip, topo, deg)
        .axes
        .iter()
        .map(|a| (a.axis, a.placement.describe()))
        .collect()
}
