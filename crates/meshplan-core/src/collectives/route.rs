/*!
A point-to-point transfer over `k` hops (book ch2 Q5: `bf16[8, 128, 8192]`
from TPU{0,0} to TPU{3,3} of a v5e 4x4): the first byte arrives after the
hops' latency, `T_first = k·T_hop`, and the whole array after
`T = k·T_hop + V/(p·W_one-way)` — the latency and bandwidth terms add
("the last byte must likewise traverse the six hops after it leaves the
source"). On a torus the hops are `Σ_i min(d_i, X_i−d_i)` with wraparound
and `Σ_i d_i` without, for an offset `d_i` along axis `i`; the source
sends down `p` disjoint shortest paths at once, one per axis it must move
along (two along an axis with wraparound when `d_i = X_i/2`, both ways
being as short): ch2 Q5's "send half the array right and half down",
`2·4.5e10 = 9e10` B/s, 6 hops, 6 µs to the first byte, 188 + 6 = 194 µs.
*/

use serde::Serialize;

use crate::error::{Error, Result};
use crate::trace::{Step, Tracer};

/// A path: hops and disjoint paths used at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Route {
    /// k: links each byte crosses.
    pub hops: u64,
    /// p: disjoint shortest paths the source sends down at once.
    pub paths: u64,
}

/// One torus axis of a route: its size, whether it wraps, the offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteHop {
    /// X: chips along the axis.
    pub size: u64,
    /// Whether the axis has a wraparound link.
    pub wraparound: bool,
    /// d: how far along the axis the destination lies (0 ≤ d < X).
    pub offset: u64,
}

/// The route from chip 0 to the chip `offset` away along each axis.
pub fn torus_route(axes: &[RouteHop]) -> Result<Route> {
    let mut r = Route { hops: 0, paths: 0 };
    for a in axes {
        if a.offset >= a.size {
            return Err(Error::Invalid(format!(
                "destination offset {} is off an axis of {} chips (0 to {})",
                a.offset,
                a.size,
                a.size.saturating_sub(1)
            )));
        }
        if a.offset == 0 {
            continue;
        }
        let back = a.size - a.offset;
        let (hops, paths) = if a.wraparound && back < a.offset {
            (back, 1)
        } else if a.wraparound && back == a.offset {
            (a.offset, 2)
        } else {
            (a.offset, 1)
        };
        r.hops += hops;
        r.paths += paths;
    }
    Ok(r)
}

/// What a routed transfer costs.
#[derive(Clone, Debug, Serialize)]
pub struct RouteCost {
    /// k: hops.
    pub hops: u64,
    /// p: disjoint paths used at once.
    pub paths: u64,
    /// p·W_one-way, bytes/s.
    pub bandwidth_bytes_per_s: f64,
    /// k·T_hop: when the first byte arrives, seconds.
    pub first_byte_s: f64,
    /// V/(p·W_one-way): streaming the array, seconds.
    pub transfer_s: f64,
    /// k·T_hop + V/(p·W_one-way): when the last byte arrives, seconds.
    pub time_s: f64,
}

impl Route {
    /// The cost of sending `v` bytes along this route over links of
    /// one-way rate `w1` with `hop_s` per hop.
    pub fn cost<T: Tracer>(&self, v: f64, w1: f64, hop_s: f64, tr: &mut T) -> RouteCost {
        let w = self.paths.max(1) as f64 * w1;
        let first = self.hops as f64 * hop_s;
        // zero hops: the destination is the source, nothing moves
        let transfer = if v <= 0.0 || self.hops == 0 {
            0.0
        } else if w <= 0.0 {
            f64::INFINITY
        } else {
            v / w
        };
        let time = first + transfer;
        tr.record(|| {
            Step::new(
                "collective.route",
                "Point-to-point over k hops",
                "k·T_hop + V/(p·W_one-way)",
            )
            .bind("V", v, "B")
            .bind("k", self.hops as f64, "hops")
            .bind("p", self.paths as f64, "paths")
            .bind("W_one-way", w1, "B/s")
            .bind("T_hop", hop_s, "s")
            .result(time, "s")
            .source("How To Scale Your Model ch2 Q5")
        });
        RouteCost {
            hops: self.hops,
            paths: self.paths,
            bandwidth_bytes_per_s: w,
            first_byte_s: first,
            transfer_s: transfer,
            time_s: time,
        }
    }
}
