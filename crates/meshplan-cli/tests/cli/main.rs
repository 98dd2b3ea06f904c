//! The CLI tests: one integration-test binary that runs the `meshplan`
//! executable the way a user does. `harness` holds the only helpers.

mod blocks;
mod check;
mod claims_models;
mod defaults;
mod disagg;
mod harness;
mod hostile;
mod hostile2;
mod hw;
mod infer;
mod json_every;
mod layouts;
mod limits;
mod model;
mod model_files;
mod plan;
mod polish;
mod ranges;
mod readme;
mod rough;
mod schedules;
mod serving_benchmark;
mod serving_request;
mod serving_validation;
mod sizing_flags;
mod snapshots;
mod trace;
mod train;
mod validate;
