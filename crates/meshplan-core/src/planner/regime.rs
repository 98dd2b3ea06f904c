//! Which plans the step-time model was validated on, and how wide each
//! plan's step-time interval is (issue 25: the planner ranked layouts nobody
//! runs — TP16 across nodes, CP16 on an 8k sequence — above validated ones).
//!
//! A plan is in a validated regime when every input that differs between
//! the plans of one search (ZeRO stage, data ranks, tp, pp, cp, ep, fsdp,
//! whole experts, offload) lies inside the ranges its profile was fitted on
//! (`[fitted_on]`, [`FittedRanges`]) and its TP group stays inside one node:
//! the only runs with TP across nodes are the Playbook's, whose stalls live in
//! a cluster profile that `train` and `plan` never apply. Inputs that are the
//! same for every plan (sequence length, model size, nodes, dtype,
//! framework, chip) are the job's: the report names them once.
//!
//! The planner ranks by the **pessimistic end** of a plan's interval
//! ([`Interval::hi_s`]): the prediction times the p90 of the profile's
//! held-out residuals, and for a flagged plan times [`UNVALIDATED_FACTOR`]
//! more — so an unvalidated layout ranks above a validated one only when it
//! is predicted faster by more than that margin, and then with its flags.

use crate::fidelity::profile::Interval as Residuals;
use crate::fidelity::range::{FittedRanges, OutOfRange, Span};
use crate::mesh::{GpuSplit, LogicalAxis, Topology};
use crate::parallelism::{Degrees, RunSpec};
use crate::training::TrainReport;

/// How much wider (each end, as a factor) a plan's step-time interval is
/// when the plan lies outside the regimes its profile was validated on:
/// 1.4. Source: issue 25's test on published training runs meshplan was
/// never fitted on (other chips, frameworks, layouts), step-time |error| p90
/// ≈ 40 % (median ≈ 12 %) — the error measured where the fit has no data,
/// which is what a flagged plan is. A convention of the planner's ranking,
/// not a fitted figure; applied once per plan, whatever the number of flags.
pub const UNVALIDATED_FACTOR: f64 = 1.4;

/// The plan-level inputs, by the name [`FittedRanges::outside_run`] gives them;
/// bit `i + 1` of a [`Regime`] (bit 0: a TP group across nodes; "offload"
/// last, `OFFLOADED`; after it the bit of a compute dtype outside the
/// fitted ones when `plan train` searches the dtype, [`Regime::searched_dtype`]).
/// "experts/rank" is E/ep of a MoE model
/// (`fidelity::range::experts_per_rank`): with no MoE run in the fit
/// every MoE layout carries it, so that all 256 experts on every rank (ep 1)
/// never ranks above an expert-parallel layout unflagged.
pub const PLAN_INPUTS: [&str; 10] = [
    "ZeRO stage",
    "dp",
    "tp",
    "pp",
    "cp",
    "ep",
    "fsdp",
    "etp",
    "experts/rank",
    "offload",
];

/// A plan's flags: the plan-level inputs outside its profile's fitted ranges,
/// and a TP group across nodes (bits, so that the search carries them in
/// every candidate at no cost).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Regime(u16);

const TP_ACROSS_NODES: u16 = 1;
/// The last of [`PLAN_INPUTS`], "offload".
const OFFLOADED: u16 = 1 << PLAN_INPUTS.len();

/// The compute dtype is one the profile was not fitted on, and the search
/// varies it (`plan train --allow-fp8`, `--dtypes`): a plan-level input then.
const SEARCHED_DTYPE: u16 = 1 << (PLAN_INPUTS.len() + 1);

fn input_bit(name: &str) -> Option<u16> {
    PLAN_INPUTS
        .iter()
        .position(|x| *x == name)
        .map(|i| 1u16 << (i + 1))
}

/// Whether the tensor-parallel group of `deg` spans more than one node of a
/// GPU topology (tp is placed innermost: `GpuSplit`); never on a TPU slice.
pub fn tp_across_nodes(topo: &Topology, deg: &Degrees) -> bool {
    match topo {
        Topology::Gpu { gpus_per_node, .. } => {
            GpuSplit::new(deg, *gpus_per_node).in_node(LogicalAxis::Tp) < deg.tp.max(1)
        }
        Topology::Torus { .. } => false,
    }
}

impl Regime {
    /// The flags of a plan the search maps to replica `rs`, against `ranges`
    /// (`None`: the profile records none, so only the TP placement can be
    /// judged), with the TP placement already judged ([`tp_across_nodes`]:
    /// the same for every plan of a degree tuple, so the search works it out
    /// once per tuple). The comparisons of [`FittedRanges::outside`], for the
    /// plan-level inputs only, without its allocations.
    pub(crate) fn of_placed(
        rs: &RunSpec,
        tp_across: bool,
        ranges: Option<&FittedRanges>,
        offloaded: bool,
    ) -> Regime {
        let mut bits = if tp_across { TP_ACROSS_NODES } else { 0 };
        if let Some(r) = ranges {
            let out = |v: u64, [lo, hi]: Span<u64>| v < lo || v > hi;
            // in the order of PLAN_INPUTS (bit i + 1), compared as numbers:
            // the search judges every predicted plan
            let outside = [
                out(u64::from(rs.zero), r.zero),
                out(rs.dp.max(1), r.dp),
                out(rs.tp.max(1), r.tp),
                out(rs.pp.max(1), r.pp),
                out(rs.cp.max(1), r.cp),
                out(rs.ep.max(1), r.ep),
                out(rs.fsdp.max(1), r.fsdp),
                rs.whole_experts(),
                crate::fidelity::range::experts_per_rank(rs)
                    .is_some_and(|e| r.experts_per_rank.map_or(true, |s| out(e, s))),
            ];
            for (i, o) in outside.into_iter().enumerate() {
                if o {
                    bits |= 1 << (i + 1);
                }
            }
        }
        if offloaded {
            bits |= OFFLOADED;
        }
        Regime(bits)
    }

    /// The flags of a reported plan: its `predicted.outside_fitted_range`
    /// entries that are plan-level, and its TP placement on `topo`.
    pub fn of_report(r: &TrainReport, topo: &Topology) -> Regime {
        let mut bits = if tp_across_nodes(topo, &r.degrees) {
            TP_ACROSS_NODES
        } else {
            0
        };
        for o in outside(r) {
            bits |= input_bit(o.input).unwrap_or(0);
        }
        Regime(bits)
    }

    /// The flag of a compute dtype outside the profile's fitted dtypes when
    /// the search varies the dtype (every plan of that dtype carries it).
    pub fn searched_dtype() -> Regime {
        Regime(SEARCHED_DTYPE)
    }

    /// Both sets of flags.
    pub fn with(self, o: Regime) -> Regime {
        Regime(self.0 | o.0)
    }

    /// No flag.
    pub fn validated(self) -> bool {
        self.0 == 0
    }

    /// Whether the TP group spans nodes.
    pub fn tp_across_nodes(self) -> bool {
        self.0 & TP_ACROSS_NODES != 0
    }
}

fn outside(r: &TrainReport) -> &[OutOfRange] {
    r.predicted
        .as_ref()
        .and_then(|p| p.outside_fitted_range.as_deref())
        .unwrap_or(&[])
}

/// A reported plan's flags as the table and `--json` (`regime`) show them:
/// "tp 16 across nodes", then each plan-level input outside the fitted
/// range, "cp 16 (fitted: 1)".
pub fn plan_flags(r: &TrainReport, topo: &Topology) -> Vec<String> {
    let mut v = Vec::new();
    if tp_across_nodes(topo, &r.degrees) {
        v.push(format!("tp {} across nodes", r.degrees.tp));
    }
    v.extend(
        outside(r)
            .iter()
            .filter(|o| input_bit(o.input).is_some())
            .map(|o| format!("{} {}", o.input, o.describe())),
    );
    v
}

/// The inputs of a reported plan outside the fitted ranges that every plan
/// of the search shares (sequence length, model size, nodes, dtype,
/// framework, chip, overlap settings): the job's, not the plan's.
pub fn job_outside(r: &TrainReport) -> Vec<&OutOfRange> {
    outside(r)
        .iter()
        .filter(|o| input_bit(o.input).is_none())
        .collect()
}

/// A plan's step-time interval, seconds: [`Interval::lo_s`] to
/// [`Interval::hi_s`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Optimistic end.
    pub lo_s: f64,
    /// Pessimistic end: what the planner ranks by.
    pub hi_s: f64,
}

impl Interval {
    /// The interval of a step predicted at `step_s`: `step_s` × the p10 and
    /// p90 of `residuals` (the profile's held-out measured / predicted; none
    /// for a transferred profile or an offloaded step: both 1), each end
    /// widened by [`UNVALIDATED_FACTOR`] when the plan is flagged.
    pub fn of(step_s: f64, residuals: Option<&Residuals>, regime: Regime) -> Interval {
        let (p10, p90) = residuals.map_or((1.0, 1.0), |i| (i.p10, i.p90));
        Interval::from_ends(step_s * p10, step_s * p90, regime)
    }

    /// The interval from the validated ends (`step·p10`, `step·p90`, as
    /// `predicted.interval` reports them), widened when flagged.
    pub fn from_ends(lo_s: f64, hi_s: f64, regime: Regime) -> Interval {
        if regime.validated() {
            Interval { lo_s, hi_s }
        } else {
            Interval {
                lo_s: lo_s / UNVALIDATED_FACTOR,
                hi_s: hi_s * UNVALIDATED_FACTOR,
            }
        }
    }

    /// The interval of a reported plan on `topo` (`None` without a
    /// prediction): the report's held-out interval (the point prediction
    /// when it has none), widened when flagged — the figures the search
    /// ranked it by.
    pub fn of_report(r: &TrainReport, topo: &Topology) -> Option<Interval> {
        let p = r.predicted.as_ref()?;
        let (lo, hi) = p
            .interval
            .as_ref()
            .map_or((p.step_time_s.get(), p.step_time_s.get()), |i| {
                (i.p10_s, i.p90_s)
            });
        Some(Interval::from_ends(lo, hi, Regime::of_report(r, topo)))
    }
}

/// Record how a ranked plan's key was formed (`plan train --explain`,
/// `--explain-rank N`): the pessimistic end of its interval from the
/// prediction `t`, the held-out p90 and the widening `u` (1.4 flagged, else 1).
pub fn record<T: crate::trace::Tracer>(step_s: f64, iv: Interval, regime: Regime, tr: &mut T) {
    let u = if regime.validated() {
        1.0
    } else {
        UNVALIDATED_FACTOR
    };
    tr.record(|| {
        crate::trace::Step::new(
            "plan.ranked_on",
            "What the planner ranks the plan by: the pessimistic end of its step-time interval",
            "t_rank = t_pred · p90 · u   (u = 1.4 when the plan has a regime flag, else 1)",
        )
        .bind("t_pred", step_s, "s")
        .bind("p90", iv.hi_s / (u * step_s), "")
        .bind("u", u, "")
        .result(iv.hi_s, "s")
        .source("docs/planner.md, Ranking with uncertainty (p90: the profile's held-out residuals, 1 without them; u: issue 25's p90 error on runs never fitted)")
    });
}

/// The smallest factor between a prediction and its pessimistic end over
/// every regime, with `residuals` (`None`: an offloaded plan's or a
/// transferred profile's interval, which has none): the search's bound for
/// plans it does not rank (no ranking key is below a prediction, or the
/// roofline lower bound under it, times this).
pub fn least_factor(residuals: Option<&Residuals>) -> f64 {
    let flagged = Regime(TP_ACROSS_NODES);
    let validated = Interval::of(1.0, residuals, Regime::default()).hi_s;
    validated.min(Interval::of(1.0, residuals, flagged).hi_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tp_spans_nodes_only_beyond_the_node() {
        let topo = Topology::gpus(64, 8);
        let deg = |tp| Degrees {
            tp,
            dp: 64 / tp,
            ..Degrees::default()
        };
        assert!(!tp_across_nodes(&topo, &deg(8)));
        assert!(tp_across_nodes(&topo, &deg(16)));
        assert!(!tp_across_nodes(&Topology::torus(1, &[4, 4, 4]), &deg(16)));
    }

    #[test]
    fn a_flagged_interval_is_wider_by_the_factor_at_both_ends() {
        let r = Residuals {
            p10: 0.8,
            p90: 1.05,
            runs: 9,
            source: "test".into(),
        };
        // validated: 10 s × [0.8, 1.05] = [8, 10.5] s
        let v = Interval::of(10.0, Some(&r), Regime::default());
        assert!((v.lo_s - 8.0).abs() < 1e-12 && (v.hi_s - 10.5).abs() < 1e-12);
        // flagged: [8 / 1.4, 10.5 · 1.4] = [5.714…, 14.7] s
        let f = Interval::of(10.0, Some(&r), Regime(TP_ACROSS_NODES));
        assert!((f.lo_s - 8.0 / 1.4).abs() < 1e-12 && (f.hi_s - 14.7).abs() < 1e-12);
        // the least factor: min(1.05, 1.47, 1.4) = 1.05; without residuals min(1, 1.4) = 1
        assert!((least_factor(Some(&r)) - 1.05).abs() < 1e-12);
        assert_eq!(least_factor(None), 1.0);
    }

    #[test]
    fn plan_inputs_are_bits_in_their_order() {
        // `of_placed` sets bit i + 1 for the i-th input, offload last
        for (i, name) in PLAN_INPUTS.iter().enumerate() {
            assert_eq!(input_bit(name), Some(1 << (i + 1)));
        }
        assert_eq!(input_bit("offload"), Some(OFFLOADED));
    }
}
