/*!
The planner (`meshplan plan`): exhaustive, fast search for the best training
and serving configuration. See `docs/planner.md`.

* [`train`]: every factorization of the chip count into
  dp·fsdp·tp·pp·cp (× ep for MoE), every TPU axis order ([`space`]), × ZeRO
  stage × remat × schedule × micro-batches × virtual stages × sequence
  parallelism; each point costed by [`crate::training::evaluate()`] — the
  evaluation `meshplan train` reports — with tracing off, in parallel
  (rayon), the best K kept in a bounded heap, ranked by the pessimistic
  end of each plan's step-time interval and flagged where no profile
  covers its regime ([`regime`]).
* [`infer`]: slice shapes × EP × TP × 1D/2D-WS × weight/KV dtypes × batch,
  costed by [`crate::inference::evaluate`]; Pareto front and best point under
  the SLOs.
*/

pub mod infer;
pub mod infer_disagg;
pub mod infer_report;
pub mod infer_request;
pub mod regime;
mod render;
pub mod report;
mod search_dims;
pub mod space;
pub mod train;

pub use crate::training::RejectReason;
pub use infer::{ChipBudget, InferObjective, InferResult, InferSearch};
pub use infer_report::{plan_infer_search, PlanInferReport};
pub use infer_request::{plan_infer, PlanInferRequest};
pub use report::{
    plan_train, plan_train_with, PlanEntry, PlanTrainReport, PlanTrainRequest, PlanVariant,
    SearchedDims,
};
pub use space::{divisors, factorizations, inner_choices, SearchDims, TrainSpace, Variant};
pub use train::{rank_orders, Cancel, Found, PredEval, TrainObjective, TrainResult, TrainSearch};
