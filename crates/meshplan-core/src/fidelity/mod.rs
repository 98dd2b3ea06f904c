/*!
Fidelity: validation and calibration of the calibrated performance model
(issue 7; `docs/fidelity.md` has every formula and parameter). The model
itself — the step inventory and its calibrated pricer — lives in
[`crate::step`]; this module keeps what it is fitted and checked with.

* [`profile::EfficiencyProfile`]: ≈ a dozen documented efficiency parameters
  per chip (`data/profiles/NAME.toml`, embedded), global per chip, never per
  run, with the chip's measured curves.
* [`crate::step::predict::price`]: the one prediction path (step time:
  matmuls by shape, attention, HBM-bound work, TP/SP/PP/DP collectives with
  overlap, bubble, recompute, overheads) and
  [`crate::step::predict::peak_memory`] (the one memory model,
  [`crate::memory`], with the profile's calibration).
* [`data`]: the validation data sets and the calibration CSV; a row's
  prediction is [`data::Run::predict`].
* [`calibrate::calibrate`]: Nelder–Mead fit + bootstrap uncertainty.
* [`range`]: the inputs a profile was fitted on and the check that names
  a prediction's inputs outside them.
* [`stats`]: comparison, summaries, OOM accuracy, recompute-pair ratios, SVG.

Other commands use a profile with [`crate::step::predict::active_profile`]
and price through [`crate::step::predict`].
*/

pub mod calibrate;
pub mod data;
pub mod microbench;
pub mod profile;
pub mod range;
pub mod report;
pub mod stats;

use crate::error::Error;
use crate::hardware::Chip;

pub use crate::step::predict::Prediction;
pub use profile::{resolve_profile, EfficiencyProfile};

/// A parse error without a known position (a whole-document check).
pub(crate) fn perr(file: &str, msg: impl std::fmt::Display) -> Error {
    perr_at(file, 0, None, msg)
}

/// A parse error at a line (a CSV row: its 1-based line in the file) and,
/// when known, a field (the CSV column or TOML key).
pub(crate) fn perr_at(
    file: &str,
    line: usize,
    field: Option<&str>,
    msg: impl std::fmt::Display,
) -> Error {
    Error::Parse {
        file: file.into(),
        line,
        column: 0,
        field: field.map(str::to_string),
        message: msg.to_string(),
    }
}

/// Resolve each run's chip in the built-in catalog; runs on unknown chips are dropped.
pub fn with_chips(runs: &[data::Run]) -> Vec<(&data::Run, &'static Chip)> {
    let cat = crate::Catalog::builtin();
    runs.iter()
        .filter_map(|r| cat.chip(&r.chip).ok().map(|c| (r, c)))
        .collect()
}

/// Deterministic held-apart split: row hash (FNV-1a of the id) odd → held out.
pub fn is_held_out(id: &str) -> bool {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h & 1 == 1
}
