/*!
The choices a training plan makes, below everything that analyses, predicts
or searches plans: degrees of each logical axis, ZeRO stage, remat policy,
pipeline schedule, optimizer, dtypes, framework conventions and the FLOP
convention ([`TrainConfig`]), the per-replica view the fidelity model
predicts (`RunSpec`, private to the crate: data-set rows and questions
are [`TrainConfig`]s) and the pipeline geometry ([`pipeline`]).

`training`, `inference`, `planner`, `memory` and `fidelity` import this
module; it imports only `model` (for the stage split) and `units`.
*/

mod choices;
mod config;
mod degrees;
mod offload;
mod overlap;
pub mod pipeline;
mod precision;
mod replica;

pub(crate) use choices::named_choice;
pub use choices::{parse_choice, FlopConvention, Framework, Optimizer, Remat, Schedule};
pub use config::{Choice, CpComm, TrainConfig};
pub use degrees::{Degrees, LogicalAxis, RankOrder};
pub use offload::Offload;
pub use overlap::{DpOverlap, Overlap, SpAllGather, TpOverlap};
pub use precision::Fp8Recipe;
pub(crate) use replica::RunSpec;
pub use replica::Unmapped;
