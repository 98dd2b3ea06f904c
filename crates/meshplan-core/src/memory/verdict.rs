//! How sure the fit verdict is: the predicted peak against the usable
//! memory, with the band the memory model's own errors put around it, and
//! what would change the answer.

use serde::Serialize;

use super::{per_device, MemoryCalibration, MemoryQuery};
use crate::model::params::ParamCounts;
use crate::model::Arch;
use crate::parallelism::Remat;
use crate::trace::NoTrace;

/// The memory model's errors where the verdict matters: `predicted/measured
/// − 1` over the 225 clean completed Playbook runs predicted at ≥ 50 GB
/// (`meshplan validate ../shared/validation/playbook_h100_runs.csv --json`,
/// `runs[].mem_error`, linear-interpolated 5th and 95th percentiles; the
/// only measured peaks in ../shared/validation; tests/training_features.rs
/// recomputes them): the model over-predicts by up to 23 % and
/// under-predicts by up to 13 % on 90 % of them.
pub const ERROR_P05: f64 = -0.1341;
/// See [`ERROR_P05`].
pub const ERROR_P95: f64 = 0.2316;

/// Where the verdict stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FitLevel {
    /// Fits even if the model under-predicts as much as its 5th percentile.
    Fits,
    /// Inside the model's 90 % error band: it may or may not fit.
    Tight,
    /// Does not fit even if the model over-predicts as much as its 95th percentile.
    DoesNotFit,
}

/// The fit verdict with its margin and band.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryVerdict {
    /// Where it stands.
    pub level: FitLevel,
    /// Usable − predicted peak, bytes (negative: over).
    pub margin_bytes: f64,
    /// The peak if the model over-predicts by its 95th percentile error.
    pub peak_low_bytes: f64,
    /// The peak if the model under-predicts by its 5th percentile error.
    pub peak_high_bytes: f64,
    /// Where the band comes from.
    pub band_source: &'static str,
    /// Changes that would move the verdict, with the peak they give.
    pub would_change: Vec<String>,
}

/// Judge a predicted `peak` against `usable` bytes (no alternatives).
pub fn judge(peak: f64, usable: f64) -> MemoryVerdict {
    let (low, high) = (peak / (1.0 + ERROR_P95), peak / (1.0 + ERROR_P05));
    let level = if high <= usable {
        FitLevel::Fits
    } else if low > usable {
        FitLevel::DoesNotFit
    } else {
        FitLevel::Tight
    };
    MemoryVerdict {
        level,
        margin_bytes: usable - peak,
        peak_low_bytes: low,
        peak_high_bytes: high,
        band_source: "memory-model error band: 5th-95th percentile on 225 Playbook peaks >= 50 GB",
        would_change: Vec::new(),
    }
}

/// [`judge`] plus the single changes that move a plan that does not fit (or
/// is tight) under the usable memory: the distributed optimizer (ZeRO-1),
/// sequence parallelism, selective then full recompute.
pub fn verdict(
    a: &Arch,
    pc: &ParamCounts,
    q: &MemoryQuery,
    cal: &MemoryCalibration,
    peak: f64,
    usable: f64,
) -> MemoryVerdict {
    let mut v = judge(peak, usable);
    if v.level == FitLevel::Fits {
        return v;
    }
    let mut alts: Vec<(&str, MemoryQuery)> = Vec::new();
    if q.zero == 0 && q.repl > 1 {
        alts.push((
            "distributed optimizer (--zero 1)",
            MemoryQuery { zero: 1, ..*q },
        ));
    }
    if q.tp > 1 && !q.sp {
        alts.push(("sequence parallelism", MemoryQuery { sp: true, ..*q }));
    }
    if q.remat != Remat::Full {
        alts.push((
            "full recompute (--remat full)",
            MemoryQuery {
                remat: Remat::Full,
                ..*q
            },
        ));
    }
    for (what, alt) in alts {
        let p = per_device(a, pc, &alt, cal, &mut NoTrace).total_bytes.get();
        if p < peak {
            v.would_change.push(format!(
                "{what}: peak {:.1} GB ({})",
                p / 1e9,
                if p <= usable { "fits" } else { "still over" }
            ));
        }
    }
    if peak > usable {
        v.would_change.push(format!(
            "a device with at least {:.1} GB usable (this one: {:.1} GB)",
            peak / 1e9,
            usable / 1e9
        ));
    } else {
        v.would_change.push(format!(
            "fits unless the true peak exceeds the predicted one by more than {:.1} GB ({:.0} %)",
            (usable - peak) / 1e9,
            100.0 * (usable - peak) / peak
        ));
    }
    v
}
