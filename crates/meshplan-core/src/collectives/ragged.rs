/*!
A ragged (top-k) AllToAll (book ch12, "AllToAlls"): when each token goes
to at most `k` of the `D` destination shards, only those chunks move, so
the dense AllToAll's bandwidth term shrinks by `min(k/D, 1)` (the book's
approximation: "(N−1)/N · min(k/N, 1) · B/(W·N)"; pop quiz 2, 4 of 8 →
half). With the `k` destinations drawn independently at random some
coincide, and the expected share of shards hit is `1 − ((D−1)/D)^k` (the
book's footnote and Appendix B). `D` is the number of destinations at the
level that bounds the dense AllToAll: the GPUs of one node, the nodes of a
cross-node axis (ch12's `min(8·k/Z, 1)` for `Z` GPUs over `Z/8` nodes),
the chips of a torus, the slices over DCN.
*/

use serde::Serialize;

use super::{AxisPlacement, CollectiveCost};
use crate::trace::{Step, Tracer};

/// The ragged AllToAll beside the dense one.
#[derive(Clone, Debug, Serialize)]
pub struct Ragged {
    /// k: destinations per token.
    pub k: u64,
    /// D: destination shards at the bounding level.
    pub destinations: u64,
    /// min(k/D, 1): the book's share of the dense traffic.
    pub fraction: f64,
    /// 1 − ((D−1)/D)^k: the expected share when the k are drawn at random.
    pub expected_fraction: f64,
    /// The dense AllToAll, seconds.
    pub dense_time_s: f64,
    /// max(latency, fraction × dense bandwidth term), seconds.
    pub time_s: f64,
    /// The same with the expected share, seconds.
    pub expected_time_s: f64,
}

/// `min(k/d, 1)`.
pub fn ragged_fraction(k: u64, d: u64) -> f64 {
    if d == 0 {
        1.0
    } else {
        (k as f64 / d as f64).min(1.0)
    }
}

/// `1 − ((d−1)/d)^k`.
pub fn ragged_fraction_expected(k: u64, d: u64) -> f64 {
    if d == 0 {
        return 1.0;
    }
    let d = d as f64;
    1.0 - ((d - 1.0) / d).powf(k as f64)
}

/// Destinations of an AllToAll on `axis` at the level that bounds it.
fn destinations(axis: &AxisPlacement) -> u64 {
    match *axis {
        AxisPlacement::Gpu(g) if g.size > g.per_node.max(1) => g.size / g.per_node.max(1),
        _ => axis.size(),
    }
}

/// The ragged AllToAll of `k` destinations per token, from the dense cost.
pub fn ragged<T: Tracer>(
    k: u64,
    dense: &CollectiveCost,
    axis: &AxisPlacement,
    tr: &mut T,
) -> Ragged {
    let d = destinations(axis);
    let f = ragged_fraction(k, d);
    let fe = ragged_fraction_expected(k, d);
    let (bw, lat) = (dense.bandwidth_time.get(), dense.latency_time.get());
    let t = (bw * f).max(lat);
    tr.record(|| {
        Step::new(
            "collective.ragged",
            "Ragged (top-k) AllToAll",
            "max(T_lat, min(k/D, 1)·T_dense)",
        )
        .bind("k", k as f64, "")
        .bind("D", d as f64, "")
        .bind("T_dense", bw, "s")
        .bind("T_lat", lat, "s")
        .result(t, "s")
        .source("How To Scale Your Model ch12 (ragged AllToAll)")
    });
    Ragged {
        k,
        destinations: d,
        fraction: f,
        expected_fraction: fe,
        dense_time_s: dense.time.get(),
        time_s: t,
        expected_time_s: (bw * fe).max(lat),
    }
}
