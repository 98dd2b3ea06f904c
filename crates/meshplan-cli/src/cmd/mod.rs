//! One module per subcommand; each owns its clap arguments and its `run`.

pub mod hw;
pub mod infer;
pub mod model;
pub mod train;
