//! The serving search: slice shapes × expert/tensor layouts (tp, ep, the
//! replicas they leave) × 1D/2D-WS × weight and KV dtypes × serving engines
//! × batch sizes, each costed with
//! [`crate::inference::evaluate`]; the Pareto front of per-token latency
//! against throughput per chip, and the best point under the SLOs.

use std::cmp::Ordering;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use serde::Serialize;

use super::infer_disagg::{self, DisaggMode, DisaggPlan};
use super::space::divisors;
use crate::hardware::{fmt_shape, Chip, ChipKind};
use crate::inference::defaults;
use crate::inference::serving::EngineProfile;
use crate::inference::{evaluate, InferQuery, InferReport, Sharding};
use crate::model::ModelSpec;
use crate::trace::NoTrace;
use crate::units::DType;

crate::parallelism::named_choice! {
    /// What to optimise among the points that meet the SLOs.
    pub enum InferObjective {
        /// Most output tokens/s per chip.
        #[default]
        #[strum(to_string = "throughput", serialize = "tps")]
        Throughput,
        /// Fewest USD per million output tokens (= throughput per chip when every chip costs the same).
        Cost,
        /// Shortest time per output token, ties by TTFT.
        #[strum(to_string = "latency", serialize = "tpot")]
        Latency,
    }
}

impl InferObjective {
    /// How plans are ranked, tie-breakers included (printed in the report).
    pub const fn ranking(self) -> &'static str {
        match self {
            InferObjective::Throughput => "ranked by tokens/s per chip; ties by lower TPOT, fewer chips, smaller batch, smaller tp, fewer pipeline stages, then 1d before 2d-ws",
            InferObjective::Cost => "ranked by $ per million tokens; ties by lower TPOT, fewer chips, smaller batch, smaller tp, fewer pipeline stages, then 1d before 2d-ws",
            InferObjective::Latency => "ranked by TPOT; ties by lower TTFT, more tokens/s per chip, smaller batch, smaller tp, fewer pipeline stages, then 1d before 2d-ws",
        }
    }

    /// Parse "throughput" | "cost" | "latency".
    pub fn parse(s: &str) -> crate::Result<Self> {
        crate::parallelism::parse_choice("objective", s)
    }
}

/// Most pipeline stages the serving search tries.
pub const MAX_PP: u64 = 8;

/// How many chips the search may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChipBudget {
    /// Exactly this many (one slice).
    Exactly(u64),
    /// Any slice up to this many.
    AtMost(u64),
}

/// Why a serving point was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InferReject {
    /// tp / ep do not divide heads, d_ff, experts or chips.
    Layout,
    /// The weights and one sequence do not fit.
    WeightsDoNotFit,
    /// The batch's KV cache does not fit.
    BatchDoesNotFit,
    /// Time to first token above the SLO.
    TtftSlo,
    /// Time per output token above the SLO.
    TpotSlo,
}

impl InferReject {
    /// All, in report order.
    pub const ALL: [InferReject; 5] = [
        InferReject::Layout,
        InferReject::WeightsDoNotFit,
        InferReject::BatchDoesNotFit,
        InferReject::TtftSlo,
        InferReject::TpotSlo,
    ];
    /// JSON key.
    pub const fn key(self) -> &'static str {
        match self {
            InferReject::Layout => "layout",
            InferReject::WeightsDoNotFit => "weights-do-not-fit",
            InferReject::BatchDoesNotFit => "batch-does-not-fit",
            InferReject::TtftSlo => "ttft-slo",
            InferReject::TpotSlo => "tpot-slo",
        }
    }
    /// Sentence.
    pub const fn describe(self) -> &'static str {
        match self {
            InferReject::Layout => "tp/ep do not divide the heads, d_ff, experts or chips",
            InferReject::WeightsDoNotFit => "weights plus one sequence exceed HBM",
            InferReject::BatchDoesNotFit => "the batch's KV cache exceeds HBM",
            InferReject::TtftSlo => "time to first token above the SLO",
            InferReject::TpotSlo => "time per output token above the SLO",
        }
    }
    fn idx(self) -> usize {
        Self::ALL.iter().position(|x| *x == self).unwrap_or(0)
    }
}

/// One serving search.
#[derive(Clone, Debug)]
pub struct InferSearch<'a> {
    /// Model.
    pub spec: &'a ModelSpec,
    /// Chip.
    pub chip: &'a Chip,
    /// Chips.
    pub chips: ChipBudget,
    /// Prompt tokens.
    pub prompt_len: u64,
    /// Generated tokens.
    pub gen_len: u64,
    /// TTFT SLO (s).
    pub ttft_slo: Option<f64>,
    /// Time-per-output-token SLO (s).
    pub tpot_slo: Option<f64>,
    /// Objective.
    pub objective: InferObjective,
    /// Plans to keep.
    pub top_k: usize,
    /// Weight dtypes tried.
    pub weights_dtypes: Vec<DType>,
    /// KV dtypes tried.
    pub kv_dtypes: Vec<DType>,
    /// Whether int8/fp8 weights and KV were allowed (`--allow-quantization`).
    pub quantization_allowed: bool,
    /// Compute dtype.
    pub compute_dtype: DType,
    /// Prefill MFU.
    pub mfu: f64,
    /// Largest batch tried per replica.
    pub max_batch: u64,
    /// Threads (None = all cores).
    pub threads: Option<usize>,
    /// Serving engines searched (low-precision weights run on the chip's
    /// matching tensor cores where an engine does so); the first is the
    /// default engine for the chip.
    pub engines: Vec<EngineProfile>,
    /// Aggregated, disaggregated or both (`--disagg`).
    pub disagg: DisaggMode,
}

/// One costed serving point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InferPoint {
    /// Slice shape (TPU) or GPU count.
    pub mesh: Vec<u64>,
    /// Chips.
    pub chips: u64,
    /// Y.
    pub tp: u64,
    /// Z.
    pub ep: u64,
    /// P: pipeline stages (each of Y·Z chips).
    pub pp: u64,
    /// Copies of the model.
    pub replicas: u64,
    /// 1D or 2D-WS.
    pub sharding: Sharding,
    /// Weight dtype.
    pub weights_dtype: DType,
    /// KV dtype.
    pub kv_dtype: DType,
    /// Serving engine.
    pub engine: String,
    /// Sequences per replica.
    pub batch: u64,
    /// Time per output token (decode step), s.
    pub tpot_s: f64,
    /// Time to first token, s.
    pub ttft_s: f64,
    /// Output tokens/s per chip.
    pub tokens_per_s_per_chip: f64,
    /// Output tokens/s of the slice.
    pub tokens_per_s: f64,
    /// USD per million output tokens.
    pub cost_per_million_tokens_usd: Option<f64>,
    /// Meets both SLOs.
    pub meets_slo: bool,
    /// Replica counts (slice sizes) at which the same plan serves equally
    /// well per chip, this point's first: one plan, listed once.
    pub replica_options: Vec<u64>,
    /// Other weight/KV dtypes ("fp8/fp8") of the same plan that also meet
    /// the SLOs, ranked below this one.
    pub dtype_variants: Vec<String>,
    /// Output tokens/s one user receives, `1/TPOT`.
    pub tokens_per_s_per_user: f64,
    /// The prefill and decode pools of a disaggregated plan (then `tp`,
    /// `ep`, `pp` and `batch` are the decode worker's, `replicas` copies of
    /// the pool pair); absent for an aggregated plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disagg: Option<DisaggPlan>,
}

impl InferPoint {
    /// What makes two points one plan: the layout per replica (tp, ep, pp,
    /// sharding), the engine and the batch — not the replica count (the
    /// slice size) nor the dtypes.
    fn plan_key(&self) -> PlanKey {
        (
            self.tp,
            self.ep,
            self.pp,
            self.sharding == Sharding::TwoDWs,
            self.engine.clone(),
            self.batch,
            self.disagg.as_ref().map(DisaggPlan::key),
        )
    }

    /// "agg", or the pools of a disaggregated plan.
    pub fn serving(&self) -> String {
        self.disagg
            .as_ref()
            .map_or_else(|| "agg".into(), DisaggPlan::describe)
    }

    /// "weights/kv", e.g. "bf16/bf16".
    pub fn dtypes(&self) -> String {
        format!("{}/{}", self.weights_dtype.name(), self.kv_dtype.name())
    }

    /// Fold a lower-ranked point of the same plan into this one.
    fn fold(&mut self, other: &InferPoint) {
        if !self.replica_options.contains(&other.replicas) {
            self.replica_options.push(other.replicas);
        }
        let d = other.dtypes();
        if d != self.dtypes() && !self.dtype_variants.contains(&d) {
            self.dtype_variants.push(d);
        }
    }

    /// The query that reproduces this point (a disaggregated plan: its
    /// decode pool).
    pub fn query(&self, s: &InferSearch) -> InferQuery {
        let e = s
            .engines
            .iter()
            .find(|e| e.name == self.engine)
            .or(s.engines.first())
            .cloned();
        InferQuery {
            weights_dtype: self.weights_dtype,
            kv_dtype: self.kv_dtype,
            compute_dtype: e
                .as_ref()
                .map_or(s.compute_dtype, |e| s.compute_for(e, self.weights_dtype)),
            batch: self.batch,
            prompt_len: s.prompt_len,
            context: s.prompt_len + s.gen_len,
            gen_len: s.gen_len,
            mesh: match &self.disagg {
                Some(d) => vec![d.decode.workers * self.tp * self.ep * self.pp],
                None => self.mesh.clone(),
            },
            tp: Some(self.tp),
            ep: Some(self.ep),
            pp: Some(self.pp),
            sharding: self.sharding,
            mfu: s.mfu,
            engine: e,
            workload: Default::default(),
            speculative: None,
            prefix_cache_hit: 0.0,
        }
    }
}

/// Result of a serving search.
#[derive(Clone, Debug)]
pub struct InferResult {
    /// Best points under the SLOs, best first.
    pub plans: Vec<InferPoint>,
    /// Pareto front (TPOT ascending, throughput per chip descending) of every point that fits.
    pub pareto: Vec<InferPoint>,
    /// Rejections per reason (indexed like [`InferReject::ALL`]).
    pub rejected: [u64; 5],
    /// Points of the space.
    pub candidates: u64,
    /// Points that fit (before SLOs).
    pub fitting: u64,
    /// Slice shapes tried.
    pub slices: Vec<Vec<u64>>,
    /// Why no slice could be tried (empty when some could).
    pub slice_reasons: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

impl InferResult {
    /// Count for one reason.
    pub fn rejected_for(&self, r: InferReject) -> u64 {
        self.rejected[r.idx()]
    }
}

/// What makes two points one plan (see [`InferPoint::plan_key`]).
type PlanKey = (u64, u64, u64, bool, String, u64, Option<[u64; 8]>);

/// Points of one layout (with batch_fits), layout rejections, weight misfits.
type LayoutOutcome = (Vec<(InferPoint, bool)>, u64, u64);

struct Layout {
    mesh: Vec<u64>,
    tp: u64,
    ep: u64,
    pp: u64,
    sharding: Sharding,
    wdt: DType,
    kdt: DType,
    /// Index into `engines`.
    engine: usize,
}

impl InferSearch<'_> {
    /// A search with the serving [`defaults`]: the model's bf16 weights and
    /// KV (quantisation only when asked, [`Self::allow_quantization`]),
    /// bf16 compute.
    pub fn new<'b>(spec: &'b ModelSpec, chip: &'b Chip, chips: ChipBudget) -> InferSearch<'b> {
        InferSearch {
            spec,
            chip,
            chips,
            prompt_len: defaults::PROMPT_LEN,
            gen_len: defaults::GEN_LEN,
            ttft_slo: None,
            tpot_slo: None,
            objective: InferObjective::default(),
            top_k: defaults::PLAN_TOP,
            weights_dtypes: vec![DType::Bf16],
            kv_dtypes: vec![DType::Bf16],
            quantization_allowed: false,
            compute_dtype: DType::Bf16,
            mfu: defaults::MFU,
            max_batch: defaults::PLAN_MAX_BATCH,
            threads: None,
            engines: vec![EngineProfile::default_for(chip)],
            disagg: DisaggMode::Off,
        }
    }

    /// Also search int8 weights and KV, and fp8 where the chip has an fp8
    /// peak (`--allow-quantization`).
    pub fn allow_quantization(&mut self) {
        self.weights_dtypes = quant_choices(self.chip);
        self.kv_dtypes = quant_choices(self.chip);
        self.quantization_allowed = true;
    }

    /// What the search tried for the weights and KV, and why (the report
    /// says it: a bf16 model is never quantised silently).
    pub fn dtypes_note(&self) -> String {
        let names = |v: &[DType]| v.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ");
        let why = if self.quantization_allowed {
            "quantisation allowed (--allow-quantization)"
        } else if self.weights_dtypes == [DType::Bf16] && self.kv_dtypes == [DType::Bf16] {
            "the model's own bf16; --allow-quantization or --weights-dtype/--kv-dtype to search int8/fp8"
        } else {
            "as given (--weights-dtype/--kv-dtype)"
        };
        format!(
            "weights {}; KV {} ({why})",
            names(&self.weights_dtypes),
            names(&self.kv_dtypes)
        )
    }

    /// The compute dtype of weights in `wdt` under engine `e`.
    fn compute_for(&self, e: &EngineProfile, wdt: DType) -> DType {
        e.native_compute(self.chip, wdt)
            .unwrap_or(self.compute_dtype)
    }

    /// Slice shapes to try, and why there are none.
    pub fn slices(&self) -> (Vec<Vec<u64>>, Vec<String>) {
        let (n, exact) = match self.chips {
            ChipBudget::Exactly(n) => (n, true),
            ChipBudget::AtMost(n) => (n, false),
        };
        let mut reasons = Vec::new();
        if n == 0 {
            reasons.push("zero chips".to_string());
            return (Vec::new(), reasons);
        }
        if let (true, Err(e)) = (exact, crate::mesh::check_chip_count(n)) {
            reasons.push(e);
            return (Vec::new(), reasons);
        }
        let n = n.min(crate::mesh::MAX_CHIPS);
        let max = self.chip.max_chips().unwrap_or(u64::MAX);
        let out: Vec<Vec<u64>> = match &self.chip.ici {
            Some(ici) if self.chip.kind == ChipKind::Tpu && !ici.slice_shapes.is_empty() => {
                let v: Vec<Vec<u64>> = ici
                    .slice_shapes
                    .iter()
                    .filter(|s| {
                        let c: u64 = s.iter().product();
                        if exact {
                            c == n
                        } else {
                            c <= n
                        }
                    })
                    .cloned()
                    .collect();
                if v.is_empty() {
                    let offered: Vec<String> = ici
                        .slice_shapes
                        .iter()
                        .map(|s| format!("{} ({})", fmt_shape(s), s.iter().product::<u64>()))
                        .collect();
                    reasons.push(format!(
                        "{} offers no slice with {} {n} chips; offered: {}",
                        self.chip.name,
                        if exact { "exactly" } else { "at most" },
                        offered.join(", ")
                    ));
                }
                v
            }
            _ => {
                if exact {
                    if n > max {
                        reasons.push(format!(
                            "{n} chips exceed the largest {} deployment of {max}",
                            self.chip.name
                        ));
                        Vec::new()
                    } else {
                        vec![vec![n]]
                    }
                } else {
                    let top = n.min(max);
                    let mut v: Vec<Vec<u64>> = (0..63)
                        .map(|k| 1u64 << k)
                        .take_while(|c| *c <= top)
                        .map(|c| vec![c])
                        .collect();
                    if !v.iter().any(|x| x[0] == top) {
                        v.push(vec![top]);
                    }
                    v
                }
            }
        };
        (out, reasons)
    }

    fn layouts(&self, slices: &[Vec<u64>]) -> (Vec<Layout>, u64) {
        let a = &self.spec.arch;
        let mut out = Vec::new();
        let mut bad = 0;
        for mesh in slices {
            let chips: u64 = mesh.iter().product();
            let eps: Vec<u64> = match &a.moe {
                Some(m) => divisors(chips)
                    .into_iter()
                    .filter(|e| m.n_experts % e == 0)
                    .collect(),
                None => vec![1],
            };
            for &ep in &eps {
                for (tp, pp) in self.tp_pp(chips / ep) {
                    let shardings: &[Sharding] = if self.chip.kind == ChipKind::Tpu && tp > 1 {
                        &[Sharding::OneD, Sharding::TwoDWs]
                    } else {
                        &[Sharding::OneD]
                    };
                    for &sharding in shardings {
                        for (wdt, kdt, engine) in self.dtype_engine_choices() {
                            {
                                let ok = a.n_heads % tp == 0 && {
                                    let f_tp = if a.dense_layers() > 0 {
                                        a.d_ff
                                    } else {
                                        a.d_ff_expert()
                                    };
                                    f_tp % tp == 0 && (a.moe.is_none() || a.d_ff_expert() % tp == 0)
                                };
                                if !ok {
                                    bad += 1;
                                    continue;
                                }
                                out.push(Layout {
                                    mesh: mesh.clone(),
                                    tp,
                                    ep,
                                    pp,
                                    sharding,
                                    wdt,
                                    kdt,
                                    engine,
                                });
                            }
                        }
                    }
                }
            }
        }
        (out, bad)
    }

    /// (tp, pp) pairs over `n` chips per expert group: every tp dividing
    /// them, and pipelines of `pp` stages (dividing what tp leaves, at
    /// least one layer per stage) on GPUs when the slice spans several
    /// NVLink domains, up to one stage per domain and at most
    /// [`MAX_PP`]: pipelines serve models across nodes; inside one domain
    /// (and on a TPU torus) tensor parallelism is the better use of the links.
    fn tp_pp(&self, n: u64) -> Vec<(u64, u64)> {
        let dom = self.chip.nvlink.as_ref().map_or(0, |x| x.domain_size);
        let chips = n;
        let max_pp = if self.chip.ici.is_none() && dom > 0 && chips > dom {
            (chips / dom).min(MAX_PP).min(self.spec.arch.n_layers)
        } else {
            1
        };
        let mut v = Vec::new();
        for tp in divisors(n) {
            for pp in divisors(n / tp) {
                if pp <= max_pp {
                    v.push((tp, pp));
                }
            }
        }
        v
    }

    /// Weight dtype × KV dtype × engine.
    fn dtype_engine_choices(&self) -> Vec<(DType, DType, usize)> {
        let mut v = Vec::new();
        for &w in &self.weights_dtypes {
            for &k in &self.kv_dtypes {
                for e in 0..self.engines.len() {
                    v.push((w, k, e));
                }
            }
        }
        v
    }

    fn point(&self, l: &Layout, batch: u64) -> Option<(InferPoint, bool)> {
        let engine = &self.engines[l.engine];
        let q = InferQuery {
            weights_dtype: l.wdt,
            kv_dtype: l.kdt,
            compute_dtype: self.compute_for(engine, l.wdt),
            batch,
            prompt_len: self.prompt_len,
            context: self.prompt_len + self.gen_len,
            gen_len: self.gen_len,
            mesh: l.mesh.clone(),
            tp: Some(l.tp),
            ep: Some(l.ep),
            pp: Some(l.pp),
            sharding: l.sharding,
            mfu: self.mfu,
            engine: Some(engine.clone()),
            workload: Default::default(),
            speculative: None,
            prefix_cache_hit: 0.0,
        };
        let r = evaluate(self.spec, self.chip, &q, &mut NoTrace).ok()?;
        // an engine holds the batch in its own paged KV cache (memory reserve, blocks)
        let fits = r.batch_fits && (engine.is_ideal() || r.batch <= r.serving.engine_max_batch);
        Some((point_of(&r, l, &engine.name), fits))
    }

    fn meets(&self, p: &InferPoint) -> (bool, bool) {
        (
            self.ttft_slo.map_or(true, |s| p.ttft_s <= s),
            self.tpot_slo.map_or(true, |s| p.tpot_s <= s),
        )
    }

    fn cmp(&self, a: &InferPoint, b: &InferPoint) -> Ordering {
        let tps = |p: &InferPoint| -p.tokens_per_s_per_chip;
        let keys = |p: &InferPoint| -> [f64; 3] {
            match self.objective {
                InferObjective::Throughput => [tps(p), p.tpot_s, p.chips as f64],
                InferObjective::Cost => [
                    p.cost_per_million_tokens_usd.unwrap_or(tps(p)),
                    p.tpot_s,
                    p.chips as f64,
                ],
                InferObjective::Latency => [p.tpot_s, p.ttft_s, tps(p)],
            }
        };
        let (ka, kb) = (keys(a), keys(b));
        for i in 0..3 {
            match ka[i].total_cmp(&kb[i]) {
                Ordering::Equal => {}
                x => return x,
            }
        }
        // exact ties (the report says so, see InferObjective::ranking):
        // the smaller batch, then fewer-way tensor parallelism, then 1D
        // before 2D weight-stationary sharding
        (
            a.batch,
            a.tp,
            a.pp,
            a.sharding == Sharding::TwoDWs,
            &a.engine,
        )
            .cmp(&(
                b.batch,
                b.tp,
                b.pp,
                b.sharding == Sharding::TwoDWs,
                &b.engine,
            ))
    }

    /// Run the search.
    pub fn run(&self) -> InferResult {
        let t0 = Instant::now();
        let (slices, slice_reasons) = self.slices();
        let (layouts, bad) = self.layouts(&slices);
        let mut rejected = [0u64; 5];
        rejected[InferReject::Layout.idx()] = bad;
        let eval_layout = |l: &Layout| -> LayoutOutcome {
            // batch 1 first: the largest batch that fits follows from it
            let q1 = self.point(l, 1);
            let Some((p1, fits1)) = q1 else {
                return (Vec::new(), 1, 0);
            };
            if !fits1 {
                return (Vec::new(), 0, 1);
            }
            let mb = {
                let q = p1.query(self);
                evaluate(self.spec, self.chip, &q, &mut NoTrace)
                    .map(|r| r.max_batch)
                    .unwrap_or(1)
                    .min(self.max_batch)
            };
            let mut v = vec![(p1, true)];
            let mut b = 2;
            while b <= mb {
                if let Some(x) = self.point(l, b) {
                    v.push(x);
                }
                b *= 2;
            }
            if mb > 1 && !mb.is_power_of_two() {
                if let Some(x) = self.point(l, mb) {
                    v.push(x);
                }
            }
            (v, 0, 0)
        };
        let results: Vec<LayoutOutcome> = match self.threads {
            Some(1) => layouts.iter().map(eval_layout).collect(),
            _ => layouts.par_iter().map(eval_layout).collect(),
        };
        let mut pts: Vec<InferPoint> = Vec::new();
        let mut candidates = bad;
        for (v, lay, nofit) in results {
            rejected[InferReject::Layout.idx()] += lay;
            rejected[InferReject::WeightsDoNotFit.idx()] += nofit;
            candidates += lay + nofit + v.len() as u64;
            for (mut p, fits) in v {
                if !fits {
                    rejected[InferReject::BatchDoesNotFit.idx()] += 1;
                    continue;
                }
                let (a, b) = self.meets(&p);
                p.meets_slo = a && b;
                pts.push(p);
            }
        }
        if self.disagg != DisaggMode::Off {
            let dis = infer_disagg::points(self, &pts);
            candidates += dis.len() as u64;
            if self.disagg == DisaggMode::Only {
                pts.clear();
            } else {
                infer_disagg::colocate(self, &mut pts);
            }
            for mut p in dis {
                let (a, b) = self.meets(&p);
                p.meets_slo = a && b;
                pts.push(p);
            }
            for p in pts.iter_mut() {
                let (a, b) = self.meets(p);
                p.meets_slo = a && b;
            }
        }
        let fitting = pts.len() as u64;
        // Pareto front: TPOT ascending, keep strictly better throughput per chip.
        let mut by_lat: Vec<&InferPoint> = pts.iter().collect();
        by_lat.sort_by(|a, b| {
            a.tpot_s
                .total_cmp(&b.tpot_s)
                .then(b.tokens_per_s_per_chip.total_cmp(&a.tokens_per_s_per_chip))
        });
        let mut pareto = Vec::new();
        let mut best = f64::NEG_INFINITY;
        for p in by_lat {
            if p.tokens_per_s_per_chip > best {
                best = p.tokens_per_s_per_chip;
                pareto.push(p.clone());
            }
        }
        let mut ok: Vec<InferPoint> = Vec::new();
        for p in pts {
            let (a, b) = self.meets(&p);
            if !a {
                rejected[InferReject::TtftSlo.idx()] += 1;
            } else if !b {
                rejected[InferReject::TpotSlo.idx()] += 1;
            } else {
                ok.push(p);
            }
        }
        ok.sort_by(|a, b| self.cmp(a, b));
        let mut ok = distinct(ok);
        ok.truncate(self.top_k);
        InferResult {
            plans: ok,
            pareto,
            rejected,
            candidates,
            fitting,
            slices,
            slice_reasons,
            elapsed: t0.elapsed(),
        }
    }

    /// The full report of a point.
    pub fn report(&self, p: &InferPoint) -> crate::Result<InferReport> {
        evaluate(self.spec, self.chip, &p.query(self), &mut NoTrace)
    }
}

/// Each plan once, at its best-ranked point, its other replica counts and
/// dtypes folded into it (`ranked` is best first, so the kept point is the
/// best of its plan).
fn distinct(ranked: Vec<InferPoint>) -> Vec<InferPoint> {
    let mut out: Vec<InferPoint> = Vec::new();
    let mut seen: std::collections::HashMap<PlanKey, usize> = std::collections::HashMap::new();
    for p in ranked {
        match seen.get(&p.plan_key()) {
            Some(&i) => out[i].fold(&p),
            None => {
                seen.insert(p.plan_key(), out.len());
                out.push(p);
            }
        }
    }
    out
}

fn point_of(r: &InferReport, l: &Layout, engine: &str) -> InferPoint {
    InferPoint {
        mesh: l.mesh.clone(),
        chips: r.chips,
        tp: r.tp,
        ep: r.ep,
        pp: r.pp,
        replicas: r.replicas,
        sharding: r.sharding,
        weights_dtype: r.weights_dtype,
        kv_dtype: r.kv_dtype,
        engine: engine.to_string(),
        batch: r.batch,
        tpot_s: r.decode_step_time_s.get(),
        ttft_s: r.ttft_s.get(),
        tokens_per_s_per_chip: r.tokens_per_s_per_chip,
        tokens_per_s: r.tokens_per_s,
        cost_per_million_tokens_usd: r.cost_per_million_tokens_usd,
        meets_slo: true,
        replica_options: vec![r.replicas],
        dtype_variants: Vec::new(),
        tokens_per_s_per_user: 1.0 / r.decode_step_time_s.get(),
        disagg: None,
    }
}

/// The engines `--engine` names for the search: one name, a comma list, or
/// `all` (every built-in engine that models the chip; the book's `ideal`
/// roofline only on `@book` chips, where it is the default).
pub fn engines_for(spec: &str, chip: &Chip) -> crate::Result<Vec<EngineProfile>> {
    let mut out: Vec<EngineProfile> = Vec::new();
    if spec.trim().eq_ignore_ascii_case("all") {
        let default = EngineProfile::default_for(chip);
        out.push(default.clone());
        for n in EngineProfile::names() {
            let e = EngineProfile::builtin(n)?;
            if e.name != default.name && !e.is_ideal() && e.check_chip(chip).is_ok() {
                out.push(e);
            }
        }
        return Ok(out);
    }
    for n in spec.split(',').filter(|x| !x.trim().is_empty()) {
        let e = EngineProfile::builtin(n)?;
        e.check_chip(chip)?;
        if !out.iter().any(|x| x.name == e.name) {
            out.push(e);
        }
    }
    if out.is_empty() {
        out.push(EngineProfile::default_for(chip));
    }
    Ok(out)
}

/// Weight and KV dtypes the search tries by default: bf16 and int8, and
/// fp8 where the chip has an fp8 peak (Hopper and later).
fn quant_choices(chip: &Chip) -> Vec<DType> {
    let mut v = vec![DType::Bf16, DType::Int8];
    if chip.peak.get(DType::Fp8).is_some() {
        v.push(DType::Fp8);
    }
    v
}
