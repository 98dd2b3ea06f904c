//! The calibrated range of a profile: per input of the step-time model, the
//! values its fitting data covered, and the check that names every input of
//! a prediction that lies outside them.
//!
//! The ranges are derived in one place, [`FittedRanges::of_runs`], from the
//! runs a profile was fitted on: `meshplan calibrate` stores them in the
//! profile it writes (`[fitted_on]`), and the built-in profiles carry the
//! same derivation of their data, which `tests/fitted_ranges.rs` recomputes
//! from the validation files. A prediction inside every range is no promise
//! (the inputs vary jointly, the ranges per input), but one outside any is
//! an extrapolation the user must be told about.

use serde::{Deserialize, Serialize};

use super::data::Run;
use crate::hardware::Chip;
use crate::parallelism::RunSpec;
use crate::units::{sig4, DType};

/// The dtype every run of the validation data used: none of its formats has
/// a dtype column, and every source states bf16 mixed precision (the fidelity
/// model predicts bf16 compute only, see `step::predict`).
const DATA_DTYPE: DType = DType::Bf16;

/// Smallest and largest value an input took in the fitting data.
pub type Span<T> = [T; 2];

/// What a profile was fitted on (`[fitted_on]` in a profile file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedRanges {
    /// Runs the ranges come from.
    pub runs: u64,
    /// Sequence length (tokens).
    pub seq_len: Span<u64>,
    /// ZeRO stage.
    pub zero: Span<u64>,
    /// Data-parallel ranks (dp·fsdp).
    pub dp: Span<u64>,
    /// Tensor-parallel degree.
    pub tp: Span<u64>,
    /// Pipeline-parallel degree.
    pub pp: Span<u64>,
    /// Context-parallel degree.
    pub cp: Span<u64>,
    /// Expert-parallel degree.
    pub ep: Span<u64>,
    /// Hybrid-sharding (FSDP) group.
    pub fsdp: Span<u64>,
    /// Model size, total parameters.
    pub params: Span<f64>,
    /// Nodes of the job.
    pub nodes: Span<u64>,
    /// Compute dtypes.
    pub dtype: Vec<String>,
    /// Frameworks (runtimes) measured.
    pub framework: Vec<String>,
    /// Chips measured.
    pub chip: Vec<String>,
    /// Routed experts each expert-parallel rank holds (E/ep) over the MoE
    /// runs; absent: no MoE run (every built-in profile today), so every
    /// MoE layout is outside (issue 25: the planner ranked DeepSeek-V3 with
    /// all 256 experts on every rank first, a layout no run validates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts_per_rank: Option<Span<u64>>,
}

/// Routed experts per expert-parallel rank of a MoE replica (E/ep); `None`
/// for a dense model. The input the planner's regime column names
/// "experts/rank" (`planner::regime`).
pub(crate) fn experts_per_rank(spec: &RunSpec) -> Option<u64> {
    let e = spec.arch.moe.as_ref()?.n_experts;
    (e > 1).then(|| e.div_ceil(spec.ep.max(1)))
}

/// One input of a prediction outside the fitted range (`predicted.outside_fitted_range[]`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutOfRange {
    /// The input ("sequence length", "ZeRO stage", "tp", …).
    pub input: &'static str,
    /// Its value in the prediction (a number, or a name).
    pub value: serde_json::Value,
    /// The fitted range: `[min, max]`, or the names seen.
    pub fitted_range: serde_json::Value,
}

impl OutOfRange {
    /// "8192 (fitted: 4096)", "2 (fitted: 0–1)", "a100-80gb (fitted: h100)".
    pub fn describe(&self) -> String {
        let show = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => {
                let x = n.as_f64().unwrap_or(0.0);
                if self.input == "model size" {
                    format!("{}B params", sig4(x / 1e9))
                } else {
                    format!("{x}")
                }
            }
            other => other.to_string(),
        };
        let fitted = match &self.fitted_range {
            serde_json::Value::Array(a) if a.iter().all(|v| v.is_number()) => {
                let parts: Vec<String> = a.iter().map(show).collect();
                if parts.len() == 2 && parts[0] == parts[1] {
                    parts[0].clone()
                } else {
                    parts.join("–")
                }
            }
            serde_json::Value::Array(a) => a.iter().map(show).collect::<Vec<_>>().join(", "),
            other => show(other),
        };
        format!("{} (fitted: {fitted})", show(&self.value))
    }
}

/// "sequence length 8192 (fitted: 4096), cp 2 (fitted: 1)": a list on one line.
pub fn one_line(o: &[OutOfRange]) -> String {
    o.iter()
        .map(|o| format!("{} {}", o.input, o.describe()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Nodes of a job on `chip`: GPUs over the NVLink domain (8 without one),
/// the count the step-time model's job-size terms use.
pub(crate) fn job_nodes(spec: &RunSpec, chip: &Chip) -> u64 {
    let per_node = chip.nvlink.as_ref().map_or(8, |n| n.domain_size).max(1);
    spec.n_gpus.div_ceil(per_node).max(1)
}

/// A JSON number, an integer when it is one (counts, degrees, stages).
fn number(v: f64) -> serde_json::Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        serde_json::json!(v as i64)
    } else {
        serde_json::json!(v)
    }
}

fn span<T: PartialOrd + Copy>(mut it: impl Iterator<Item = T>) -> Option<Span<T>> {
    let first = it.next()?;
    Some(it.fold([first, first], |[lo, hi], x| {
        [if x < lo { x } else { lo }, if x > hi { x } else { hi }]
    }))
}

fn names(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = it.collect();
    v.sort();
    v.dedup();
    v
}

impl FittedRanges {
    /// The ranges of `runs` (the runs a profile was fitted on); `None`
    /// without runs.
    pub fn of_runs(runs: &[&Run]) -> Option<FittedRanges> {
        let specs = || runs.iter().map(|r| &r.spec);
        Some(FittedRanges {
            runs: runs.len() as u64,
            seq_len: span(specs().map(|s| s.seq_len))?,
            zero: span(specs().map(|s| u64::from(s.zero)))?,
            dp: span(specs().map(|s| s.dp.max(1)))?,
            tp: span(specs().map(|s| s.tp.max(1)))?,
            pp: span(specs().map(|s| s.pp.max(1)))?,
            cp: span(specs().map(|s| s.cp.max(1)))?,
            ep: span(specs().map(|s| s.ep.max(1)))?,
            fsdp: span(specs().map(|s| s.fsdp.max(1)))?,
            params: span(specs().map(|s| s.params.total as f64))?,
            nodes: span(runs.iter().map(|r| r.nodes.max(1)))?,
            dtype: vec![DATA_DTYPE.to_string()],
            framework: names(specs().map(|s| s.framework.to_string())),
            chip: names(runs.iter().map(|r| r.chip.clone())),
            experts_per_rank: span(specs().filter_map(experts_per_rank)),
        })
    }

    /// Why these ranges cannot be checked against (a span whose ends are
    /// reversed or not finite), if so: a hand-edited profile is refused.
    pub fn invalid(&self) -> Option<String> {
        let spans = [
            ("seq_len", self.seq_len),
            ("zero", self.zero),
            ("dp", self.dp),
            ("tp", self.tp),
            ("pp", self.pp),
            ("cp", self.cp),
            ("ep", self.ep),
            ("fsdp", self.fsdp),
            ("nodes", self.nodes),
        ];
        let [lo, hi] = self.params;
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Some(format!(
                "params = [{lo}, {hi}]: two finite numbers, the smaller first"
            ));
        }
        spans
            .iter()
            .chain(
                self.experts_per_rank
                    .map(|s| ("experts_per_rank", s))
                    .iter(),
            )
            .find(|(_, [lo, hi])| lo > hi)
            .map(|(k, [lo, hi])| format!("{k} = [{lo}, {hi}]: the smaller first"))
    }

    /// Every input of a prediction of data-set row (or question) `run` on
    /// `chip` in `dtype` that lies outside these ranges, in a fixed order
    /// (the check `train` makes of its replica).
    pub fn outside_run(
        &self,
        run: &crate::fidelity::data::Run,
        chip: &Chip,
        dtype: DType,
    ) -> Vec<OutOfRange> {
        self.outside(&run.spec, chip, dtype)
    }

    /// Every input of a prediction of `spec` on `chip` in `dtype` that lies
    /// outside these ranges, in a fixed order.
    pub(crate) fn outside(&self, spec: &RunSpec, chip: &Chip, dtype: DType) -> Vec<OutOfRange> {
        let mut out = Vec::new();
        let mut num = |input: &'static str, v: f64, [lo, hi]: Span<f64>| {
            if v < lo || v > hi {
                out.push(OutOfRange {
                    input,
                    value: number(v),
                    fitted_range: serde_json::json!([number(lo), number(hi)]),
                });
            }
        };
        let f = |s: Span<u64>| [s[0] as f64, s[1] as f64];
        num("sequence length", spec.seq_len as f64, f(self.seq_len));
        num("ZeRO stage", f64::from(spec.zero), f(self.zero));
        num("dp", spec.dp.max(1) as f64, f(self.dp));
        num("tp", spec.tp.max(1) as f64, f(self.tp));
        num("pp", spec.pp.max(1) as f64, f(self.pp));
        num("cp", spec.cp.max(1) as f64, f(self.cp));
        num("ep", spec.ep.max(1) as f64, f(self.ep));
        num("fsdp", spec.fsdp.max(1) as f64, f(self.fsdp));
        num("model size", spec.params.total as f64, self.params);
        num("nodes", job_nodes(spec, chip) as f64, f(self.nodes));
        let mut set = |input: &'static str, v: String, seen: &[String]| {
            if !seen.contains(&v) {
                out.push(OutOfRange {
                    input,
                    value: serde_json::json!(v),
                    fitted_range: serde_json::json!(seen),
                });
            }
        };
        set("dtype", dtype.to_string(), &self.dtype);
        set("framework", spec.framework.to_string(), &self.framework);
        set("chip", chip.name.clone(), &self.chip);
        if let Some(e) = experts_per_rank(spec) {
            let fitted = self.experts_per_rank;
            if fitted.map_or(true, |[lo, hi]| e < lo || e > hi) {
                out.push(OutOfRange {
                    input: "experts/rank",
                    value: serde_json::json!(e),
                    fitted_range: fitted.map_or(serde_json::json!("no MoE run"), |[lo, hi]| {
                        serde_json::json!([lo, hi])
                    }),
                });
            }
        }
        if spec.whole_experts() {
            // every fitted run split its experts like its dense layers
            out.push(OutOfRange {
                input: "etp",
                value: serde_json::json!(1),
                fitted_range: serde_json::json!(["tp"]),
            });
        }
        out
    }

    /// The hull of two data sets' ranges (a profile whose parameters come
    /// from both, e.g. a network sub-profile fitted on its own runs on top
    /// of the base profile's compute fit).
    pub fn union(&self, o: &FittedRanges) -> FittedRanges {
        let u = |a: Span<u64>, b: Span<u64>| [a[0].min(b[0]), a[1].max(b[1])];
        let join = |a: &[String], b: &[String]| names(a.iter().chain(b).cloned());
        FittedRanges {
            runs: self.runs + o.runs,
            seq_len: u(self.seq_len, o.seq_len),
            zero: u(self.zero, o.zero),
            dp: u(self.dp, o.dp),
            tp: u(self.tp, o.tp),
            pp: u(self.pp, o.pp),
            cp: u(self.cp, o.cp),
            ep: u(self.ep, o.ep),
            fsdp: u(self.fsdp, o.fsdp),
            params: [
                self.params[0].min(o.params[0]),
                self.params[1].max(o.params[1]),
            ],
            nodes: u(self.nodes, o.nodes),
            dtype: join(&self.dtype, &o.dtype),
            framework: join(&self.framework, &o.framework),
            chip: join(&self.chip, &o.chip),
            experts_per_rank: match (self.experts_per_rank, o.experts_per_rank) {
                (Some(a), Some(b)) => Some(u(a, b)),
                (a, b) => a.or(b),
            },
        }
    }
}

/// A prediction interval of one step time (`predicted.interval`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepInterval {
    /// p10 of the step time, seconds.
    pub p10_s: f64,
    /// p90 of the step time, seconds.
    pub p90_s: f64,
    /// Where the residual quantiles come from.
    pub source: String,
}

impl StepInterval {
    /// "0.81–1.04 s (leave-one-source-out residuals of mcore24, 9 runs)".
    pub fn describe(&self) -> String {
        format!(
            "{}–{} s ({})",
            sig4(self.p10_s),
            sig4(self.p90_s),
            self.source
        )
    }
}

/// The interval of a step time `t` predicted with profile `p`: `t` times the
/// p10 and p90 of measured / predicted in the held-out residuals the profile
/// records (`interval` of the profile, its network or cluster profile, from
/// `meshplan validate` on two or more sources); `None` when it records none.
pub fn interval(p: &super::EfficiencyProfile, t: f64) -> Option<StepInterval> {
    let i = p.interval.as_ref()?;
    Some(StepInterval {
        p10_s: t * i.p10,
        p90_s: t * i.p90,
        source: format!("{}, {} runs", i.source, i.runs),
    })
}
