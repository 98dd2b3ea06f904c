//! What an evaluation reads, computed once: [`TrainCtx`] per model, chip
//! and workload (parameter counts, FLOPs per remat policy, dtype sizes,
//! usable HBM), [`MeshCtx`] per degree tuple and topology (the placed mesh).
//! `analyze` builds both for one plan; the planner builds the first once per
//! search and the second once per degree tuple.

use super::transfer::CostMemo;
use crate::accounting::{step_flops, FlopQuery, StepFlops};
use crate::collectives::AxisPlacement;
use crate::hardware::Chip;
use crate::memory::MemoryCalibration;
use crate::mesh::{Mesh, Topology};
use crate::model::params::{count, ParamCounts};
use crate::model::ModelSpec;
use crate::parallelism::{Degrees, LogicalAxis, Remat, TrainConfig};
use crate::trace::{NoTrace, Tracer};

/// Per-model, per-chip, per-workload constants.
#[derive(Clone, Debug)]
pub struct TrainCtx<'a> {
    /// The model.
    pub spec: &'a ModelSpec,
    /// The chip.
    pub chip: &'a Chip,
    /// The workload and fixed choices (degrees and per-plan choices are
    /// replaced per evaluation).
    pub base: TrainConfig,
    /// Exact parameter counts.
    pub pc: ParamCounts,
    /// FLOPs per step for each remat policy ([`Remat::index`]).
    pub flops: [StepFlops; 4],
    /// C: peak FLOP/s in the compute dtype.
    pub peak: f64,
    /// Memory calibration (the book's when the framework is `book`).
    pub cal: MemoryCalibration,
    /// Usable HBM per chip, bytes.
    pub hbm: f64,
}

impl<'a> TrainCtx<'a> {
    /// Constants for `spec` on `chip` with the workload of `cfg`;
    /// `cal` is the efficiency profile's memory calibration (used when the
    /// framework is a real one).
    pub fn new<T: Tracer>(
        spec: &'a ModelSpec,
        chip: &'a Chip,
        cfg: &TrainConfig,
        cal: Option<MemoryCalibration>,
        tr: &mut T,
    ) -> Self {
        let pc = count(&spec.arch, tr);
        let flops = Remat::ALL.map(|remat| {
            let q = FlopQuery {
                convention: cfg.flops,
                seq_len: cfg.seq_len,
                causal: cfg.causal,
                tokens: cfg.batch_tokens as f64,
                remat,
            };
            step_flops(&spec.arch, &pc, &q)
        });
        let cal = if cfg.framework.is_framework() {
            cal.unwrap_or(MemoryCalibration::BOOK)
        } else {
            MemoryCalibration {
                usable_hbm_fraction: cfg.hbm_usable_fraction,
                ..MemoryCalibration::BOOK
            }
        };
        TrainCtx {
            spec,
            chip,
            base: *cfg,
            pc,
            flops,
            peak: chip.flops(cfg.compute_dtype).get(),
            hbm: crate::memory::runtime::usable_bytes(chip, cfg.framework, cal.usable_hbm_fraction),
            cal,
        }
    }

    /// The same without tracing (the planner's context).
    pub fn quiet(
        spec: &'a ModelSpec,
        chip: &'a Chip,
        cfg: &TrainConfig,
        cal: Option<MemoryCalibration>,
    ) -> Self {
        Self::new(spec, chip, cfg, cal, &mut NoTrace)
    }
}

/// The placed mesh of one degree tuple, reduced to what the costs need.
#[derive(Clone, Debug)]
pub struct MeshCtx {
    /// Degrees (each at least 1).
    pub deg: Degrees,
    /// Chips in the topology (at least 1).
    pub chips: f64,
    /// Placement of every logical axis, indexed by [`LogicalAxis::index`].
    pub placement: [AxisPlacement; 7],
    /// The axis data parallelism runs on (`dp-dcn` when dp spans only slices).
    pub dp_axis: LogicalAxis,
    /// A DCN part of dp exists besides its ICI part.
    pub has_dcn: bool,
    /// Collective costs met so far (used when tracing is off).
    pub memo: CostMemo,
}

impl MeshCtx {
    /// From a placed mesh.
    pub fn from_mesh(mesh: &Mesh) -> MeshCtx {
        let placement = LogicalAxis::ALL.map(|a| mesh.placement(a));
        let dp_axis = if matches!(placement[LogicalAxis::Dp.index()], AxisPlacement::Trivial) {
            LogicalAxis::DpDcn
        } else {
            LogicalAxis::Dp
        };
        MeshCtx {
            deg: mesh.degrees.at_least_one(),
            chips: mesh.chips.max(1) as f64,
            placement,
            dp_axis,
            has_dcn: mesh.axis(LogicalAxis::DpDcn).is_some(),
            memo: CostMemo::default(),
        }
    }

    /// Place `deg` on `topo` (reasons in the returned mesh when infeasible).
    pub fn place(chip: &Chip, topo: &Topology, deg: Degrees) -> (Mesh, MeshCtx) {
        let mesh = Mesh::build(chip, topo, deg);
        let ctx = MeshCtx::from_mesh(&mesh);
        (mesh, ctx)
    }

    /// Placement of one axis.
    pub fn axis(&self, a: LogicalAxis) -> &AxisPlacement {
        &self.placement[a.index()]
    }
}
