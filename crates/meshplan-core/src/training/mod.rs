/*!
Training analysis: given a model, a chip, a mesh, a batch and a parallelism
plan, say whether it fits, what bounds it and how long a step takes, with the
derivation (book ch5/ch6/ch12, Ultra-Scale Playbook).

Entry point: [`analyze`] (a [`TrainConfig`] → [`TrainReport`]). See
`docs/training.md` for every formula and convention. The pieces, each a few
small functions over a context computed once ([`context`]):

* [`feasibility`]: the divisibility rules (as values);
* [`crate::memory`]: memory per device under the plan's framework;
* [`crate::accounting`]: FLOPs under the named convention, plus recompute;
* [`comms`]: every collective of a step (axes run concurrently, so
  `T_comms = max over axes`; the lower bound is
  `max(T_math + T_bubble, T_comms)`, the upper `T_math + T_bubble + Σ comms`);
* [`rules`]: the book's critical batches and verdicts;
* [`evaluate()`]: one plan's numbers — the planner calls the same function
  with tracing off;
* the calibrated prediction: [`crate::step::predict`];
* [`blocks`]: one step by block of the model (FLOPs, HBM bytes, roofline time);
* [`advice`]: what would change a framework plan's verdict (micro-batches,
  recompute, ZeRO, sequence parallelism), each re-analysed.
*/

pub mod advice;
pub mod blocks;
pub mod comms;
pub mod context;
pub mod evaluate;
pub mod feasibility;
pub mod offload;
pub mod render;
mod report;
pub mod rules;
pub(crate) mod run_time;
pub mod scenario;
pub mod sizing;
pub mod tpu;
pub mod transfer;

pub use comms::{CommEntry, CommSink, Transfer};
pub use context::{MeshCtx, TrainCtx};
pub use evaluate::{evaluate, Eval};
pub use feasibility::{Infeasible, RejectReason};
pub use report::{analyze, analyze_with, TrainReport};
pub use rules::{Rules, Verdict};

pub use crate::parallelism::{
    Choice, FlopConvention, Framework, Optimizer, Remat, Schedule, TrainConfig,
};
