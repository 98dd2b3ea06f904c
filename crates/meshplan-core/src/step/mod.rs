/*!
One training step, priced: the calibrated step-time model and the one
prediction path every front end calls (issue 22; `docs/architecture.md`).

* [`inventory`]: what one step contains, exactly and with no efficiency in
  it — the GEMMs, the attention call, the element-wise traffic, every
  collective with its group's placement, the schedule, the data-parallel
  phase and the optimizer's parameters.
* [`calibrated`]: the calibrated pricer of that inventory — a step's time by part from the
  chip's efficiency profile ([`crate::fidelity::EfficiencyProfile`]): GEMMs
  by shape, attention kernels, HBM-bound work, TP/CP/EP/PP/DP collectives on
  the placed mesh with the framework's overlap, the bubble, host overheads.
* [`predict`]: the one prediction of a [`crate::parallelism::TrainConfig`] on
  a topology — `train`, `plan train`, `validate`, `calibrate`, `check`,
  Python and the web page all call [`predict::predict_step`]; the report's
  `predicted` section and its derivation (`train --explain`).

The book's roofline (the peak pricer) is [`crate::training::evaluate()`]; the
prediction never goes below its lower bound.
*/

pub mod calibrated;
pub mod inventory;
pub mod predict;
pub mod recipes;
