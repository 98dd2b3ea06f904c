/*!
A staged transfer from host memory (book ch2 Q6: an array offloaded to
each chip's host DRAM, loaded over PCIe, gathered over ICI onto one chip,
read from its HBM): each stage streams, so overlapped they take as long as
the slowest (a lower bound, "at least 167ms") and one after another their
sum (an upper bound).

* host → HBM: every device loads its own shard over its own host link,
  `V/N / W_host` (Q6: 1 GB per chip at 1.6e10 B/s, 63 ms);
* the collective itself (Q6's gather over ICI, 167 ms);
* HBM read: the result read once on a device, `bytes / W_hbm` (Q6's
  `16e9 / 8.2e11 = 20ms`).
*/

use serde::Serialize;

use crate::trace::{Step, Tracer};

/// The stages and their bounds, seconds.
#[derive(Clone, Debug, Serialize)]
pub struct Staged {
    /// Each device's shard over its host link (PCIe), seconds.
    pub host_to_hbm_s: f64,
    /// The collective, seconds.
    pub collective_s: f64,
    /// The result read once from one device's HBM, seconds.
    pub hbm_read_s: f64,
    /// max of the stages (perfect overlap), seconds.
    pub lower_bound_s: f64,
    /// sum of the stages (none overlapped), seconds.
    pub upper_bound_s: f64,
    /// The slowest stage: "host → HBM", "interconnect" (the collective) or
    /// "HBM read".
    pub bound: String,
}

/// The staged pipeline: `shard` bytes per device over `w_host`, then the
/// collective of `collective_s`, then `result` bytes read at `w_hbm`.
pub fn staged<T: Tracer>(
    shard: f64,
    w_host: f64,
    collective_s: f64,
    result: f64,
    w_hbm: f64,
    tr: &mut T,
) -> Staged {
    let host = super::div_or_inf(shard, w_host);
    let hbm = super::div_or_inf(result, w_hbm);
    let stages = [
        ("host → HBM", host),
        ("interconnect", collective_s),
        ("HBM read", hbm),
    ];
    let (bound, lower) = stages.iter().fold(("host → HBM", 0.0f64), |acc, &(n, t)| {
        if t > acc.1 {
            (n, t)
        } else {
            acc
        }
    });
    let upper = host + collective_s + hbm;
    tr.record(|| {
        Step::new(
            "collective.staged",
            "From host memory: host → HBM, collective, HBM read (overlapped)",
            "max(V/(N·W_host), T_collective, V_result/W_hbm)",
        )
        .bind("V/N", shard, "B")
        .bind("W_host", w_host, "B/s")
        .bind("T_collective", collective_s, "s")
        .bind("V_result", result, "B")
        .bind("W_hbm", w_hbm, "B/s")
        .bind("T_upper", upper, "s")
        .result(lower, "s")
        .source("How To Scale Your Model ch2 Q6")
    });
    Staged {
        host_to_hbm_s: host,
        collective_s,
        hbm_read_s: hbm,
        lower_bound_s: lower,
        upper_bound_s: upper,
        bound: bound.into(),
    }
}
