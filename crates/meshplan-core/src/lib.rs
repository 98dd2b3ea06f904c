/*!
# meshplan-core

The quantitative reasoning of *How To Scale Your Model* (the JAX Scaling Book)
and the *Ultra-Scale Playbook*, exact and fast: parameter and FLOP counts, KV
caches, memory, and (in later modules) collectives, step times and plans.

## Design

* **Units are types** ([`units`]): bytes, FLOPs, seconds, FLOP/s and bytes/s
  are distinct newtypes in SI base units; link bandwidths carry their
  direction. Prefixes exist only when parsing and printing.
* **Derivations are data** ([`trace`]): formula functions take a
  [`trace::Tracer`]; with [`trace::NoTrace`] the explanation costs nothing.
* **Catalogs are files** ([`catalog`]): `data/models/NAME.toml` and
  `data/hardware/NAME.toml`, embedded at build time, one entry per file with its
  source.
* **No I/O**: the library parses text it is handed; the CLI reads files.
* **Bad input is an [`Error`]**, infeasible configurations are values.

## Symbols

| symbol | meaning | field |
|---|---|---|
| B | batch (tokens unless stated) | `batch_tokens` |
| T | sequence length | `seq_len` |
| S | KV length | `context` |
| D | model width | `d_model` |
| F | feed-forward width | `d_ff` |
| N | query heads | `n_heads` |
| K | KV heads | `n_kv_heads` |
| H | head dimension | `d_head` |
| L | layers | `n_layers` |
| V | vocabulary | `vocab` |
| E, k | experts, experts per token | `n_experts`, `top_k` |
| C | peak FLOP/s per chip | `Chip::peak` |
| W | bandwidth (B/s) | `hbm_bandwidth`, `LinkBandwidth` |
| X, Y, Z | mesh axis sizes | |
*/

#![deny(missing_docs)]

pub mod accounting;
pub mod catalog;
pub mod check;
pub mod collectives;
pub mod error;
pub mod fidelity;
#[doc(hidden)]
pub mod fuzzing;
pub mod hardware;
pub mod hf;
pub mod inference;
pub mod memory;
pub mod mesh;
pub mod mfu;
pub mod model;
pub mod names;
pub mod overrides;
pub mod parallelism;
pub mod planner;
pub mod roofline;
pub mod scenario;
pub mod sharding;
pub mod step;
pub mod timeline;
pub mod trace;
pub mod training;
pub mod units;
pub mod view;

pub use catalog::Catalog;
pub use error::{Error, Result};
