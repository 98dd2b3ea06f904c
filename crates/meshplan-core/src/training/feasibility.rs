//! Why a plan cannot run: the divisibility rules every analysis and the
//! planner apply, as values ([`Infeasible`]) with a sentence each and a
//! counted category ([`RejectReason`]) for the planner's summary.

use serde::Serialize;

use crate::model::Arch;
use crate::parallelism::pipeline::{StageLayers, StageLayersError};
use crate::parallelism::{Choice, Degrees, Schedule};

/// Why a candidate was rejected (the planner counts these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectReason {
    /// The topology itself cannot be used (slice larger than the chip offers, …).
    Topology,
    /// tp does not divide the query heads.
    TpHeads,
    /// tp and the KV heads do not divide one another.
    TpKvHeads,
    /// pp exceeds the layers (a stage would be empty).
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
    /// The fidelity model cannot predict this plan (more micro-batches than
    /// sequences); only when predictions rank the search.
    Unpredictable,
}

/// Number of [`RejectReason`]s.
pub const N_REASONS: usize = 10;

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
        RejectReason::Unpredictable,
    ];
    /// Reasons given after a candidate reached the evaluator (its degree
    /// tuple was feasible).
    pub const fn after_evaluation(self) -> bool {
        matches!(self, RejectReason::Memory | RejectReason::Unpredictable)
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
            RejectReason::Unpredictable => "unpredictable",
        }
    }
    /// Sentence.
    pub const fn describe(self) -> &'static str {
        match self {
            RejectReason::Topology => "the topology cannot be used at all",
            RejectReason::TpHeads => "tp does not divide the query heads",
            RejectReason::TpKvHeads => "tp and the KV heads do not divide one another",
            RejectReason::PpLayers => "pp exceeds the layers",
            RejectReason::CpSeqLen => "cp does not divide the sequence length",
            RejectReason::EpExperts => "ep does not divide the experts",
            RejectReason::EpDataAxes => "ep does not divide dp·fsdp·cp",
            RejectReason::Placement => "the degrees do not factor into the slice / NVLink domains",
            RejectReason::Memory => "memory per device exceeds the usable HBM",
            RejectReason::Unpredictable => {
                "the fidelity model cannot predict the plan (more micro-batches than sequences, or fewer sequences than data-parallel ranks)"
            }
        }
    }
    /// Index in [`RejectReason::ALL`].
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|x| *x == self).unwrap_or(0)
    }
}

/// One reason a plan cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Infeasible {
    /// A degree of zero.
    ZeroDegree,
    /// tp does not divide N.
    TpHeads {
        /// tp.
        tp: u64,
        /// N.
        heads: u64,
    },
    /// tp and K do not divide one another.
    TpKvHeads {
        /// tp.
        tp: u64,
        /// K.
        kv: u64,
    },
    /// pp does not divide L.
    PpLayers {
        /// pp.
        pp: u64,
        /// L.
        layers: u64,
    },
    /// ep does not divide E.
    EpExperts {
        /// ep.
        ep: u64,
        /// E.
        experts: u64,
    },
    /// ep > 1 on a dense model.
    EpDense {
        /// ep.
        ep: u64,
    },
    /// cp does not divide T.
    CpSeqLen {
        /// cp.
        cp: u64,
        /// T.
        seq: u64,
    },
    /// Fewer micro-batches than stages.
    Underfilled {
        /// Micro-batches.
        m: u64,
        /// Stages.
        pp: u64,
    },
    /// pp·v does not divide L (interleaved).
    Interleave {
        /// pp.
        pp: u64,
        /// v.
        v: u64,
        /// L.
        layers: u64,
    },
    /// The stated first/last stage layer counts do not split the layers.
    StageLayers(StageLayersError),
}

impl Infeasible {
    /// Whether a framework runs the plan anyway, only badly, so that
    /// `train` describes it (a note) rather than refusing it; the planner
    /// never proposes it. Fewer micro-batches than stages leaves the pipeline
    /// idle for most of the step, but Megatron's non-interleaved 1F1B and
    /// nanotron accept it (the Playbook measured 50 such runs); nanotron's
    /// cost-balanced split gives the embedding and the loss stages of their
    /// own, so it runs more stages than layers (one measured run). The
    /// book's accounting keeps both refused.
    pub fn runs_under(self, fw: crate::parallelism::Framework) -> bool {
        use crate::parallelism::Framework;
        match self {
            Infeasible::Underfilled { .. } => fw.is_framework(),
            Infeasible::PpLayers { .. } => fw == Framework::Nanotron,
            _ => false,
        }
    }

    /// The planner's category.
    pub fn reason(self) -> RejectReason {
        match self {
            Infeasible::ZeroDegree | Infeasible::Underfilled { .. } => RejectReason::Placement,
            Infeasible::TpHeads { .. } => RejectReason::TpHeads,
            Infeasible::TpKvHeads { .. } => RejectReason::TpKvHeads,
            Infeasible::PpLayers { .. }
            | Infeasible::Interleave { .. }
            | Infeasible::StageLayers(_) => RejectReason::PpLayers,
            Infeasible::EpExperts { .. } | Infeasible::EpDense { .. } => RejectReason::EpExperts,
            Infeasible::CpSeqLen { .. } => RejectReason::CpSeqLen,
        }
    }
}

impl std::fmt::Display for Infeasible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Infeasible::ZeroDegree => f.write_str("every parallel degree must be at least 1"),
            Infeasible::TpHeads { tp, heads } => {
                write!(f, "tp = {tp} does not divide the {heads} query heads")
            }
            Infeasible::TpKvHeads { tp, kv } => {
                write!(
                    f,
                    "tp = {tp} and the {kv} KV heads do not divide one another"
                )
            }
            Infeasible::PpLayers { pp, layers } => {
                write!(
                    f,
                    "pp = {pp} exceeds the {layers} layers: a stage would be empty"
                )
            }
            Infeasible::EpExperts { ep, experts } => {
                write!(f, "ep = {ep} does not divide the {experts} experts")
            }
            Infeasible::EpDense { ep } => write!(f, "ep = {ep} but the model has no experts"),
            Infeasible::CpSeqLen { cp, seq } => {
                write!(f, "cp = {cp} does not divide seq_len {seq}")
            }
            Infeasible::Underfilled { m, pp } => write!(
                f,
                "pipeline with {m} microbatches < {pp} stages: the pipeline never fills"
            ),
            Infeasible::Interleave { pp, v, layers } => write!(
                f,
                "interleaved schedule: pp·v = {pp}·{v} divides neither the {layers} layers nor the layers + embedding + loss (--first-stage-layers / --last-stage-layers state another split)"
            ),
            Infeasible::StageLayers(e) => e.fmt(f),
        }
    }
}

/// The rules that depend on the degrees alone, cheapest first (the planner
/// checks them before placing a mesh and takes the first).
pub fn degree_problems(a: &Arch, seq_len: u64, d: &Degrees) -> impl Iterator<Item = Infeasible> {
    let zero = d.has_zero();
    let d = d.at_least_one();
    let kv = a.n_kv_heads.max(1);
    let tp_kv_ok = if d.tp > kv {
        d.tp % kv == 0
    } else {
        kv % d.tp == 0
    };
    let ep = match &a.moe {
        Some(m) if m.n_experts % d.ep != 0 => Some(Infeasible::EpExperts {
            ep: d.ep,
            experts: m.n_experts,
        }),
        None if d.ep > 1 => Some(Infeasible::EpDense { ep: d.ep }),
        _ => None,
    };
    [
        zero.then_some(Infeasible::ZeroDegree),
        (a.n_heads % d.tp != 0).then_some(Infeasible::TpHeads {
            tp: d.tp,
            heads: a.n_heads,
        }),
        (!tp_kv_ok).then_some(Infeasible::TpKvHeads { tp: d.tp, kv }),
        // stages may hold unequal layer counts (Megatron's first/last stage
        // options, nanotron's cost-balanced split), but none can be empty
        (d.pp > a.n_layers).then_some(Infeasible::PpLayers {
            pp: d.pp,
            layers: a.n_layers,
        }),
        ep,
        (d.cp > 1 && seq_len % d.cp != 0).then_some(Infeasible::CpSeqLen {
            cp: d.cp,
            seq: seq_len,
        }),
    ]
    .into_iter()
    .flatten()
}

/// The rules on the pipeline choices (micro-batches, interleaving) under
/// the framework's own stage split.
pub fn choice_problems(a: &Arch, d: &Degrees, c: &Choice) -> impl Iterator<Item = Infeasible> {
    choice_problems_with(a, d, c, StageLayers::EVEN)
}

/// [`choice_problems`] with the first/last stage layer counts the user
/// stated: those replace the rule that pp·v divide L or L + 2 by
/// Megatron-Core's own ([`StageLayers::split`]).
pub fn choice_problems_with(
    a: &Arch,
    d: &Degrees,
    c: &Choice,
    given: StageLayers,
) -> impl Iterator<Item = Infeasible> {
    let pp = d.pp.max(1);
    let v = c.virtual_stages.max(1);
    let stated = given
        .split(a.n_layers, pp, c.chunks())
        .err()
        .map(Infeasible::StageLayers);
    [
        stated,
        (pp > 1 && c.microbatches < pp).then_some(Infeasible::Underfilled {
            m: c.microbatches,
            pp,
        }),
        // Megatron accepts L or, counting the embedding and the loss as one
        // layer each (`account_for_*_in_pipeline_split`), L + 2 units
        (c.schedule == Schedule::Interleaved
            && pp > 1
            && !given.is_set()
            && a.n_layers % pp.saturating_mul(v) != 0
            && (a.n_layers + 2) % pp.saturating_mul(v) != 0)
            .then_some(Infeasible::Interleave {
                pp,
                v,
                layers: a.n_layers,
            }),
    ]
    .into_iter()
    .flatten()
}
