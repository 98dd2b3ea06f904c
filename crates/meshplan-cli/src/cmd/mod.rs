//! One module per subcommand; each owns its clap arguments and its `run`.

pub mod blocks;
pub mod check;
pub mod infer;
pub mod model;
pub mod plan;
pub mod train;
pub mod validate;
