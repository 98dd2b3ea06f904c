/*!
The planner (`meshplan plan`): exhaustive, fast search for the best training
and serving configuration. See `docs/planner.md`.

* [`train`]: every factorization of the chip count into
  dp·fsdp·tp·pp·cp (× ep for MoE), every TPU axis order, × ZeRO stage × remat
  × schedule × microbatches × virtual stages × sequence parallelism; each
  point costed by [`fast::fast_eval`], an allocation-free mirror of
  [`crate::training::analyze`], in parallel (rayon).
* [`infer`]: slice shapes × EP × TP × 1D/2D-WS × weight/KV dtypes × batch,
  costed by [`crate::inference::evaluate`]; Pareto front and best point under
  the SLOs.
*/

pub mod fast;
pub mod infer;
pub mod train;

pub use infer::{ChipBudget, InferObjective, InferResult, InferSearch};
pub use train::{PredEval, RejectReason, TrainObjective, TrainResult, TrainSearch, TrainSpace};
