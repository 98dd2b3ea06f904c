/*!
Collective cost model: AllGather, ReduceScatter, AllReduce, AllToAll,
point-to-point and gather to one device over one logical mesh axis as
placed on hardware.

`V` is always the **full** array size in bytes, as in the book: the gathered
output of an AllGather, the unreduced input of a ReduceScatter/AllReduce (per
device), all devices' buffers together of an AllToAll (`n ×` each device's
buffer, the book's convention: a ring AllToAll costs `V/(4·W_ici)`), the message of a
point-to-point send. If the array is already sharded over another axis, pass
`V / Y` (book ch3 Q2).

Every bandwidth says its direction ([`LinkBandwidth`]).

## TPU ICI torus (book ch3, `formulas.md` §4)

For each physical axis `i` the axis spans (size `X_i`):

* with wraparound the axis is a bidirectional ring and moves data at
  `w_i = W_ici,bidi = 2·W_one-way` (the book's `T = V/W_ici`, independent of
  `X`);
* without wraparound the book's model is that edge data needs `X−1` one-way
  hops: `T = (X−1)·(V/X)/W_one-way`, i.e. `w_i = W_one-way·X/(X−1)`
  (ch3 pop quiz 2: `3 × 8.4 MB / 4.5e10 = 560 µs`).

Over several axes the array is split between them, so
`T_bw = V / Σ_i w_i` (`= V/(M·W_ici)` for `M` wrapped axes).
With latency, `T = max(T_hop·Σ_i hops_i, T_bw)` with `hops_i = ⌊X_i/2⌋` on
a ring, `X_i − 1` without wraparound (book: `T_min·Σ|X_i|/2`).
AllReduce = ReduceScatter + AllGather. AllToAll on an N-D torus:
`V·max_i(c_i·X_i)/(4·N·W_ici,bidi)` with `c_i = 1` on a ring and `2` without
wraparound (a unidirectional ring halves AllToAll bandwidth, book ch3).

## GPUs (book ch12, `formulas.md` §9)

An axis of `N` GPUs with `n` of them inside each NVLink domain and
`M = N/n` domains (nodes). Levels are costed separately and the slowest wins
(`T = V·max_i (D_i−1)/(D_i·W_i)`): NVLink with `D = n`, `W = W_gpu` one-way,
and the scale-out network with `D = M`, `W = n·W_nic` one-way (the axis's
GPUs each drive their own NIC). AllToAll: in one node `V·(N−1)/(W·N²)`; across
`M` nodes `V·(M−1)/(M²·W_node)`. Latency: a ring of `n−1` NVLink hops plus
`M−1` scale-out hops.

## DCN between TPU slices (book ch5)

`S` slices of `m` chips each, every chip with `W_dcn` one-way: a ring over
slices with bandwidth `m·W_dcn`, `T = V·(S−1)/(S·m·W_dcn)` (the book's
`8DF/(M·W_dcn)` per layer drops the `(S−1)/S`).

## Gather to one device (book ch2 Q6)

Every shard but the root's flows into the root (device 0, a corner of a
torus): `V·(N−1)/N` through its `L` links (one per torus axis without
wraparound, two with), latency the farthest chip's hops; on GPUs through
the root's NVLink (and NIC) and its node's NICs.

## Beside the cost

[`Route`] (point-to-point over k hops: first byte and last),
[`ragged()`] (a top-k AllToAll), [`staged()`] (host → HBM → interconnect →
HBM read), [`cluster_levels`] (per-level AllGather bandwidth, leaf and
spine, for any node count) and [`Conventions`] (the book's full-bandwidth
axes and dropped ring factor, costed by [`cost_with`]).
*/

use serde::Serialize;

mod conventions;
mod hierarchy;
mod ragged;
mod route;
mod staged;

pub use conventions::Conventions;
pub use hierarchy::cluster_levels;
pub use ragged::{ragged, ragged_fraction, ragged_fraction_expected, Ragged};
pub use route::{torus_route, Route, RouteCost, RouteHop};
pub use staged::{staged, Staged};

use crate::hardware::{Chip, ChipKind};
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, BytesPerSec, LinkBandwidth, Seconds};

/// The collective operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Collective {
    /// Gather shards into the full array on every device.
    AllGather,
    /// Sum partial arrays and leave each device one shard.
    ReduceScatter,
    /// Sum partial arrays, everyone gets the whole sum (= RS + AG).
    AllReduce,
    /// Transpose a sharded dimension (MoE dispatch/combine, Ulysses).
    AllToAll,
    /// One send to a neighbour (pipeline stages, ring attention step).
    PointToPoint,
    /// Gather every shard onto one device, the root (book ch2 Q6: copy an
    /// array sharded over a slice to TPU{0,0}).
    Gather,
}

impl Collective {
    /// Book spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Collective::AllGather => "AllGather",
            Collective::ReduceScatter => "ReduceScatter",
            Collective::AllReduce => "AllReduce",
            Collective::AllToAll => "AllToAll",
            Collective::PointToPoint => "PointToPoint",
            Collective::Gather => "Gather",
        }
    }
    /// All kinds.
    pub const ALL: [Collective; 6] = [
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllReduce,
        Collective::AllToAll,
        Collective::PointToPoint,
        Collective::Gather,
    ];
}

impl std::fmt::Display for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One physical torus axis spanned by a logical axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TorusAxis {
    /// Chips along this physical axis that belong to the logical axis.
    pub size: u64,
    /// Whether this physical axis has a wraparound link.
    pub wraparound: bool,
}

/// A logical axis over GPUs: NVLink inside each node, the scale-out network
/// across nodes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GpuAxis {
    /// N: GPUs on the axis.
    pub size: u64,
    /// n: GPUs of this axis inside one NVLink domain.
    pub per_node: u64,
    /// W_gpu: NVLink egress per GPU.
    pub nvlink: LinkBandwidth,
    /// W_nic: scale-out per GPU (zero if the chip has none).
    pub scale_out: LinkBandwidth,
    /// NVLink hop latency.
    pub nvlink_latency: Seconds,
    /// Scale-out hop latency.
    pub scale_out_latency: Seconds,
}

/// Most physical axes one logical axis can span.
pub const MAX_TORUS_AXES: usize = 4;

/// Where a logical axis lives on hardware.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "fabric", rename_all = "kebab-case")]
pub enum AxisPlacement {
    /// Size 1 (or nothing to do): every collective is free.
    Trivial,
    /// TPU ICI torus.
    Torus {
        /// Physical axes spanned (first `n_axes` entries valid).
        axes: [TorusAxis; MAX_TORUS_AXES],
        /// Number of valid entries in `axes`.
        n_axes: usize,
        /// One ICI link.
        link: LinkBandwidth,
        /// Per-hop latency.
        hop_latency: Seconds,
    },
    /// GPUs: NVLink domain plus scale-out network.
    Gpu(GpuAxis),
    /// Between TPU slices over the data-centre network.
    Dcn {
        /// S: slices.
        slices: u64,
        /// m: chips per slice, each with its own DCN egress.
        chips_per_slice: u64,
        /// W_dcn per chip.
        per_chip: LinkBandwidth,
        /// Latency per hop.
        latency: Seconds,
    },
}

impl AxisPlacement {
    /// A logical axis on a TPU slice of shape `slice_shape`: `axis_sizes[i]`
    /// is how many chips of physical axis `i` the logical axis spans (1 = not
    /// spanned; same length as `slice_shape`). A part wraps iff it covers the
    /// whole physical axis and the chip's wraparound rule says that axis
    /// wraps. A chip without ICI gives `Trivial`.
    pub fn tpu(chip: &Chip, axis_sizes: &[u64], slice_shape: &[u64]) -> Self {
        let Some(ici) = &chip.ici else {
            return AxisPlacement::Trivial;
        };
        // The physical axis each spanned part lies on: its size in the slice
        // decides wraparound; a logical axis wraps only if it covers the whole
        // physical axis.
        let parts = axis_sizes
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s > 1)
            .map(|(i, &s)| {
                let phys = slice_shape.get(i).copied().unwrap_or(s);
                (s, s == phys && ici.wraparound.axis_wraps(phys, slice_shape))
            });
        Self::torus_parts(ici.link, ici.hop_latency, parts)
    }

    /// A torus axis given explicitly: `(size, wraparound)` per physical axis.
    pub fn torus(link: LinkBandwidth, hop_latency: Seconds, parts: &[(u64, bool)]) -> Self {
        Self::torus_parts(link, hop_latency, parts.iter().copied())
    }

    /// The torus of the first [`MAX_TORUS_AXES`] parts longer than one chip
    /// (`Trivial` when there are none).
    fn torus_parts(
        link: LinkBandwidth,
        hop_latency: Seconds,
        parts: impl Iterator<Item = (u64, bool)>,
    ) -> Self {
        let mut axes = [TorusAxis {
            size: 1,
            wraparound: false,
        }; MAX_TORUS_AXES];
        let mut n = 0;
        for (size, wraparound) in parts.filter(|p| p.0 > 1).take(MAX_TORUS_AXES) {
            axes[n] = TorusAxis { size, wraparound };
            n += 1;
        }
        if n == 0 {
            return AxisPlacement::Trivial;
        }
        AxisPlacement::Torus {
            axes,
            n_axes: n,
            link,
            hop_latency,
        }
    }

    /// A GPU axis of `size` GPUs, `gpus_per_node_in_axis` of them inside each
    /// NVLink domain (clamped to `1..=size`).
    pub fn gpu(chip: &Chip, size: u64, gpus_per_node_in_axis: u64) -> Self {
        if size <= 1 {
            return AxisPlacement::Trivial;
        }
        let (nvlink, nvl_lat, dom) = match &chip.nvlink {
            Some(n) => (n.per_gpu, n.latency, n.domain_size),
            None => (LinkBandwidth::default(), Seconds::new(2e-6), 1),
        };
        let per_node = gpus_per_node_in_axis.clamp(1, size).min(dom.max(1));
        let (so, so_lat) = match &chip.scale_out {
            Some(s) => (s.per_chip, s.latency),
            None => (LinkBandwidth::default(), Seconds::new(5e-6)),
        };
        AxisPlacement::Gpu(GpuAxis {
            size,
            per_node,
            nvlink,
            scale_out: so,
            nvlink_latency: nvl_lat,
            scale_out_latency: so_lat,
        })
    }

    /// An axis over `slices` TPU slices of `chips_per_slice` chips (DCN).
    pub fn dcn(chip: &Chip, slices: u64, chips_per_slice: u64) -> Self {
        if slices <= 1 {
            return AxisPlacement::Trivial;
        }
        let (w, lat) = match &chip.scale_out {
            Some(s) => (s.per_chip, s.latency),
            None => (LinkBandwidth::default(), Seconds::new(1e-5)),
        };
        AxisPlacement::Dcn {
            slices,
            chips_per_slice: chips_per_slice.max(1),
            per_chip: w,
            latency: lat,
        }
    }

    /// Devices on the axis.
    pub fn size(&self) -> u64 {
        match self {
            AxisPlacement::Trivial => 1,
            AxisPlacement::Torus { axes, n_axes, .. } => {
                axes[..*n_axes].iter().map(|a| a.size).product()
            }
            AxisPlacement::Gpu(g) => g.size,
            AxisPlacement::Dcn { slices, .. } => *slices,
        }
    }

    /// The book's M: number of physical axes spanned (TPU), 1 otherwise.
    pub fn n_physical_axes(&self) -> usize {
        match self {
            AxisPlacement::Trivial => 0,
            AxisPlacement::Torus { n_axes, .. } => *n_axes,
            _ => 1,
        }
    }

    /// Short description ("ici 16x16 (wrap)", "nvlink 8 x ib 4 nodes", "dcn 2 slices").
    pub fn describe(&self) -> String {
        match self {
            AxisPlacement::Trivial => "trivial".into(),
            AxisPlacement::Torus { axes, n_axes, .. } => {
                let parts: Vec<String> = axes[..*n_axes]
                    .iter()
                    .map(|a| format!("{}{}", a.size, if a.wraparound { "" } else { "(no wrap)" }))
                    .collect();
                format!("ici {}", parts.join("x"))
            }
            &AxisPlacement::Gpu(GpuAxis { size, per_node, .. }) => {
                if per_node >= size {
                    format!("nvlink {size}")
                } else {
                    format!("nvlink {per_node} x scale-out {} nodes", size / per_node)
                }
            }
            AxisPlacement::Dcn { slices, .. } => format!("dcn {slices} slices"),
        }
    }
}

/// Result of costing one collective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CollectiveCost {
    /// Which collective.
    pub kind: Collective,
    /// V: full array bytes (see module docs).
    pub bytes: Bytes,
    /// Devices on the axis.
    pub axis_size: u64,
    /// Bytes each device sends (ring schedule; for information).
    pub bytes_sent_per_device: Bytes,
    /// Bandwidth term.
    pub bandwidth_time: Seconds,
    /// Latency term (hops × per-hop latency).
    pub latency_time: Seconds,
    /// max(bandwidth, latency).
    pub time: Seconds,
    /// Latency term exceeds the bandwidth term.
    pub latency_bound: bool,
}

impl CollectiveCost {
    fn zero(kind: Collective, bytes: Bytes) -> Self {
        CollectiveCost {
            kind,
            bytes,
            axis_size: 1,
            bytes_sent_per_device: Bytes::ZERO,
            bandwidth_time: Seconds::ZERO,
            latency_time: Seconds::ZERO,
            time: Seconds::ZERO,
            latency_bound: false,
        }
    }
}

/// `v/w` seconds, 0 when nothing moves and infinite with no bandwidth.
fn div_or_inf(v: f64, w: f64) -> f64 {
    if v <= 0.0 {
        0.0
    } else if w <= 0.0 {
        f64::INFINITY
    } else {
        v / w
    }
}

/// Cost of `kind` on `bytes` (= V, the full array) over `axis`: meshplan's
/// exact figure ([`cost_with`] under the book's approximations).
pub fn cost<T: Tracer>(
    kind: Collective,
    bytes: Bytes,
    axis: &AxisPlacement,
    tr: &mut T,
) -> CollectiveCost {
    cost_with(kind, bytes, axis, Conventions::default(), tr)
}

/// Cost of `kind` on `bytes` over `axis` under `conv` (the book's
/// full-bandwidth axes and dropped ring factor when asked for).
pub fn cost_with<T: Tracer>(
    kind: Collective,
    bytes: Bytes,
    axis: &AxisPlacement,
    conv: Conventions,
    tr: &mut T,
) -> CollectiveCost {
    let axis = &if conv.full_bandwidth {
        axis.with_full_bandwidth()
    } else {
        *axis
    };
    let v = bytes.get().max(0.0);
    let n = axis.size();
    if n <= 1 {
        return CollectiveCost::zero(kind, bytes);
    }
    // Ring bytes each device sends for the gather/scatter family.
    let ring_sent = v * (n as f64 - 1.0) / n as f64;
    let sent = match kind {
        Collective::AllGather | Collective::ReduceScatter => ring_sent,
        Collective::AllReduce => 2.0 * ring_sent,
        // Each device holds V/n and keeps its own 1/n of that.
        Collective::AllToAll => ring_sent / n as f64,
        Collective::PointToPoint => v,
        // Each device but the root sends its shard once.
        Collective::Gather => v / n as f64,
    };
    let ring = RingFactor(conv.drop_ring_factor);
    let (bw, lat, formula, syms): (f64, f64, &str, [(&'static str, f64, &'static str); 4]) =
        match *axis {
            AxisPlacement::Trivial => unreachable!("size checked above"),
            AxisPlacement::Torus {
                axes,
                n_axes,
                link,
                hop_latency,
            } => torus_cost(kind, v, &axes[..n_axes], link, hop_latency),
            AxisPlacement::Gpu(g) => gpu_cost(kind, v, &g, ring),
            AxisPlacement::Dcn {
                slices,
                chips_per_slice,
                per_chip,
                latency,
            } => dcn_cost(kind, v, slices, chips_per_slice, per_chip, latency, ring),
        };
    let time = bw.max(lat);
    let c = CollectiveCost {
        kind,
        bytes,
        axis_size: n,
        bytes_sent_per_device: Bytes::new(sent),
        bandwidth_time: Seconds::new(bw),
        latency_time: Seconds::new(lat),
        time: Seconds::new(time),
        latency_bound: lat > bw,
    };
    tr.record(|| {
        let mut s = Step::new(
            &format!("collective.{}", kind.name().to_ascii_lowercase()),
            &if conv.any() {
                format!(
                    "{} over {} ({})",
                    kind.name(),
                    axis.describe(),
                    conv.describe()
                )
            } else {
                format!("{} over {}", kind.name(), axis.describe())
            },
            &format!("max(latency, {formula})"),
        )
        .bind("V", v, "B")
        .bind("X", n as f64, "");
        for (sym, val, unit) in syms {
            if !sym.is_empty() {
                s = s.bind(sym, val, unit);
            }
        }
        s.bind("T_bw", bw, "s")
            .bind("T_lat", lat, "s")
            .result(time, "s")
            .source(match axis {
                AxisPlacement::Gpu(_) => "How To Scale Your Model ch12 (GPUs)",
                AxisPlacement::Dcn { .. } => "How To Scale Your Model ch5 (DCN)",
                _ if kind == Collective::Gather => {
                    "How To Scale Your Model ch2 Q6 (gather to one chip)"
                }
                _ => "How To Scale Your Model ch3 (collectives)",
            })
    });
    c
}

/// Whether a ring level's `(D−1)/D` is kept (exact) or dropped (the book's
/// `≈ V/W`).
#[derive(Clone, Copy)]
struct RingFactor(bool);

impl RingFactor {
    /// `(d−1)/d`, or 1 when dropped.
    fn of(self, d: f64) -> f64 {
        if self.0 {
            1.0
        } else {
            (d - 1.0) / d
        }
    }
}

type Costed = (
    f64,
    f64,
    &'static str,
    [(&'static str, f64, &'static str); 4],
);

fn dcn_cost(
    kind: Collective,
    v: f64,
    slices: u64,
    chips_per_slice: u64,
    per_chip: LinkBandwidth,
    latency: Seconds,
    ring: RingFactor,
) -> Costed {
    let s = slices as f64;
    let w = per_chip.one_way_rate().get() * chips_per_slice as f64;
    let ag = div_or_inf(v * ring.of(s), w);
    let (t, f) = match kind {
        Collective::AllGather | Collective::ReduceScatter => (ag, "V·(S−1)/(S·m·W_dcn)"),
        // the root slice's m DCN links take in the other slices' shards
        Collective::Gather => (ag, "V·(S−1)/(S·m·W_dcn) into the root slice"),
        Collective::AllReduce => (2.0 * ag, "2·V·(S−1)/(S·m·W_dcn)"),
        Collective::AllToAll => (div_or_inf(v * ring.of(s), s * w), "V·(S−1)/(S²·m·W_dcn)"),
        Collective::PointToPoint => (div_or_inf(v, w), "V/(m·W_dcn)"),
    };
    let hops = match kind {
        Collective::PointToPoint => 1.0,
        Collective::AllReduce => 2.0 * (s - 1.0),
        _ => s - 1.0,
    };
    (
        t,
        hops * latency.get(),
        f,
        [
            ("S", s, ""),
            ("m", chips_per_slice as f64, "chips"),
            ("W_dcn", per_chip.one_way_rate().get(), "B/s"),
            ("T_hop", latency.get(), "s"),
        ],
    )
}

fn torus_cost(
    kind: Collective,
    v: f64,
    axes: &[TorusAxis],
    link: LinkBandwidth,
    hop: Seconds,
) -> Costed {
    let w1 = link.one_way_rate().get();
    let w2 = link.bidirectional_rate().get();
    // Effective bandwidth of each physical axis for AG/RS.
    let mut w_sum = 0.0;
    let mut hops = 0.0;
    let mut all_wrap = true;
    let mut n_total = 1.0;
    let mut a2a_max: f64 = 0.0;
    // Links into a corner chip (the root of a gather) and its farthest chip.
    let mut root_links = 0.0;
    let mut far_hops = 0.0;
    for a in axes {
        let x = a.size as f64;
        n_total *= x;
        if a.wraparound {
            w_sum += w2;
            hops += (a.size / 2) as f64;
            a2a_max = a2a_max.max(x);
            root_links += 2.0;
            far_hops += (a.size / 2) as f64;
        } else {
            all_wrap = false;
            w_sum += w1 * x / (x - 1.0);
            hops += x - 1.0;
            a2a_max = a2a_max.max(2.0 * x);
            root_links += 1.0;
            far_hops += x - 1.0;
        }
    }
    let m = axes.len() as f64;
    let ag = div_or_inf(v, w_sum);
    let (bw, lat, f) = match kind {
        Collective::AllGather | Collective::ReduceScatter => (
            ag,
            hops * hop.get(),
            if all_wrap {
                "V/(W_ici·M)"
            } else {
                "V/Σ_i w_i, w_i = W_ici (ring) or W_one-way·X_i/(X_i−1) (no wraparound)"
            },
        ),
        Collective::AllReduce => (
            2.0 * ag,
            2.0 * hops * hop.get(),
            if all_wrap {
                "2·V/(W_ici·M)"
            } else {
                "2·V/Σ_i w_i (no wraparound on some axis)"
            },
        ),
        Collective::AllToAll => (
            div_or_inf(v * a2a_max, 4.0 * n_total * w2),
            hops * hop.get(),
            if all_wrap {
                "V·max_i X_i/(4·N·W_ici)"
            } else {
                "V·max_i(c_i·X_i)/(4·N·W_ici), c_i = 2 without wraparound"
            },
        ),
        Collective::PointToPoint => (div_or_inf(v, w1), hop.get(), "V/W_one-way"),
        Collective::Gather => (
            div_or_inf(v * (n_total - 1.0) / n_total, root_links * w1),
            far_hops * hop.get(),
            "V·(N−1)/(N·L·W_one-way), L = links into the root (1 per axis without wraparound, 2 with)",
        ),
    };
    (
        bw,
        lat,
        f,
        [
            ("M", m, ""),
            ("W_ici", w2, "B/s"),
            ("W_one-way", w1, "B/s"),
            ("T_hop", hop.get(), "s"),
        ],
    )
}

fn gpu_cost(kind: Collective, v: f64, g: &GpuAxis, ring: RingFactor) -> Costed {
    let n = g.per_node.max(1) as f64;
    let nodes = (g.size as f64 / n).max(1.0);
    let w_gpu = g.nvlink.one_way_rate().get();
    let w_nic = g.scale_out.one_way_rate().get();
    let w_node = w_nic * n;
    let t_node = if n > 1.0 {
        div_or_inf(v * ring.of(n), w_gpu)
    } else {
        0.0
    };
    let t_out = if nodes > 1.0 {
        div_or_inf(v * ring.of(nodes), w_node)
    } else {
        0.0
    };
    let ring_lat = (n - 1.0) * g.nvlink_latency.get() + (nodes - 1.0) * g.scale_out_latency.get();
    let (bw, lat, f) = match kind {
        Collective::AllGather | Collective::ReduceScatter => {
            (t_node.max(t_out), ring_lat, "V·max_i (D_i−1)/(D_i·W_i)")
        }
        Collective::AllReduce => (
            2.0 * t_node.max(t_out),
            2.0 * ring_lat,
            "2·V·max_i (D_i−1)/(D_i·W_i)",
        ),
        Collective::AllToAll => {
            if nodes > 1.0 {
                (
                    div_or_inf(v * ring.of(nodes), nodes * w_node),
                    ring_lat,
                    "V·(M−1)/(M²·W_node)",
                )
            } else {
                (
                    div_or_inf(v * ring.of(n), n * w_gpu),
                    ring_lat,
                    "V·(N−1)/(N²·W_gpu)",
                )
            }
        }
        Collective::PointToPoint => {
            if nodes > 1.0 {
                (div_or_inf(v, w_nic), g.scale_out_latency.get(), "V/W_nic")
            } else {
                (div_or_inf(v, w_gpu), g.nvlink_latency.get(), "V/W_gpu")
            }
        }
        Collective::Gather => {
            // Everything but the root's shard enters the root GPU (NVLink,
            // plus its own NIC when other nodes send) and the other nodes'
            // shards enter the root's node through its n NICs.
            let n_all = n * nodes;
            let w_in = w_gpu + if nodes > 1.0 { w_nic } else { 0.0 };
            let t_root = div_or_inf(v * ring.of(n_all), w_in);
            let lat = g.nvlink_latency.get()
                + if nodes > 1.0 {
                    g.scale_out_latency.get()
                } else {
                    0.0
                };
            (
                t_root.max(t_out),
                lat,
                "max(V·(N−1)/(N·W_root), V·(M−1)/(M·W_node)), W_root = W_gpu (+ W_nic across nodes)",
            )
        }
    };
    (
        bw,
        lat,
        f,
        [
            ("D_node", n, ""),
            ("M", nodes, "nodes"),
            ("W_gpu", w_gpu, "B/s"),
            ("W_node", w_node, "B/s"),
        ],
    )
}

/// One level of links a collective runs on: a torus axis, the NVLink
/// domain, the scale-out network, DCN.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Level {
    /// "ICI axis 1", "NVLink (node)", "scale-out", "DCN".
    pub name: String,
    /// Devices (or nodes, slices) at this level.
    pub devices: u64,
    /// Bandwidth an AllGather gets here: `W_ici` (bidirectional) on a ring,
    /// `W_one-way·X/(X−1)` without wraparound, `W_gpu`, `W_node`, `m·W_dcn`.
    pub bandwidth_bytes_per_s: f64,
    /// Torus axes: whether it wraps around.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wraparound: Option<bool>,
    /// Hops of one ring pass (the latency term's count).
    pub hops: u64,
    /// The bandwidth an AllGather over this level alone gets, the book's
    /// `D·W/(D−1)` for `D` children of egress `W` on a switched level (ch12:
    /// 514 GB/s for an 8-GPU H100 node); on a torus axis the same as
    /// `bandwidth_bytes_per_s`.
    pub allgather_bandwidth_bytes_per_s: f64,
}

/// `D·W/(D−1)`: an AllGather's bandwidth over `d` children of egress `w`
/// (infinite for one child).
pub fn ring_level_bandwidth(d: u64, w: f64) -> f64 {
    if d <= 1 {
        f64::INFINITY
    } else {
        d as f64 * w / (d - 1) as f64
    }
}

/// The levels of `axis`, innermost first.
pub fn levels(axis: &AxisPlacement) -> Vec<Level> {
    match *axis {
        AxisPlacement::Trivial => Vec::new(),
        AxisPlacement::Torus {
            axes, n_axes, link, ..
        } => axes[..n_axes]
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let x = a.size as f64;
                let w = if a.wraparound {
                    link.bidirectional_rate().get()
                } else {
                    link.one_way_rate().get() * x / (x - 1.0)
                };
                Level {
                    name: format!("ICI axis {}", i + 1),
                    devices: a.size,
                    bandwidth_bytes_per_s: w,
                    wraparound: Some(a.wraparound),
                    hops: if a.wraparound { a.size / 2 } else { a.size - 1 },
                    allgather_bandwidth_bytes_per_s: w,
                }
            })
            .collect(),
        AxisPlacement::Gpu(GpuAxis {
            size,
            per_node,
            nvlink,
            scale_out,
            ..
        }) => {
            let mut v = Vec::new();
            let n = per_node.max(1);
            if n > 1 {
                v.push(Level {
                    name: "NVLink (inside a node)".into(),
                    devices: n,
                    bandwidth_bytes_per_s: nvlink.one_way_rate().get(),
                    wraparound: None,
                    hops: n - 1,
                    allgather_bandwidth_bytes_per_s: ring_level_bandwidth(
                        n,
                        nvlink.one_way_rate().get(),
                    ),
                });
            }
            let nodes = size / n;
            if nodes > 1 {
                let w_node = scale_out.one_way_rate().get() * n as f64;
                v.push(Level {
                    name: "scale-out (across nodes)".into(),
                    devices: nodes,
                    bandwidth_bytes_per_s: w_node,
                    wraparound: None,
                    hops: nodes - 1,
                    allgather_bandwidth_bytes_per_s: ring_level_bandwidth(nodes, w_node),
                });
            }
            v
        }
        AxisPlacement::Dcn {
            slices,
            chips_per_slice,
            per_chip,
            ..
        } => {
            let w = per_chip.one_way_rate().get() * chips_per_slice as f64;
            vec![Level {
                name: "DCN (across slices)".into(),
                devices: slices,
                bandwidth_bytes_per_s: w,
                wraparound: None,
                hops: slices - 1,
                allgather_bandwidth_bytes_per_s: ring_level_bandwidth(slices, w),
            }]
        }
    }
}

/// Convenience: the bandwidth-only time of `kind` (no latency term).
pub fn bandwidth_time(kind: Collective, bytes: Bytes, axis: &AxisPlacement) -> Seconds {
    cost(kind, bytes, axis, &mut crate::trace::NoTrace).bandwidth_time
}

/// Effective bandwidth V / T_bw of an AllGather on `axis` (B/s; infinite for a trivial axis).
pub fn allgather_bandwidth(axis: &AxisPlacement) -> BytesPerSec {
    let t = bandwidth_time(Collective::AllGather, Bytes::new(1e9), axis);
    if t.get() <= 0.0 {
        BytesPerSec::new(f64::INFINITY)
    } else {
        Bytes::new(1e9) / t
    }
}

/// Whether a chip is a TPU (helper for callers choosing placements).
pub fn is_tpu(chip: &Chip) -> bool {
    chip.kind == ChipKind::Tpu
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::NoTrace;
    use crate::units::BytesPerSec;

    fn v5e_link() -> LinkBandwidth {
        LinkBandwidth::one_way(BytesPerSec::new(4.5e10))
    }

    #[test]
    fn v5e_4x4_allgather_no_wrap_vs_ideal() {
        // ch3 pop quiz 2: bf16[E_X, F], E=2048, F=8192 → V = 33.55 MB, shard 8.4 MB.
        let v = Bytes::new(2.0 * 2048.0 * 8192.0);
        let nowrap = AxisPlacement::torus(v5e_link(), Seconds::new(1e-6), &[(4, false)]);
        let c = cost(Collective::AllGather, v, &nowrap, &mut NoTrace);
        let expect = 3.0 * (v.get() / 4.0) / 4.5e10;
        assert!((c.time.get() - expect).abs() / expect < 1e-12);
        assert!((c.time.get() - 559e-6).abs() < 1e-6);
        let wrap = AxisPlacement::torus(v5e_link(), Seconds::new(1e-6), &[(4, true)]);
        let c = cost(Collective::AllGather, v, &wrap, &mut NoTrace);
        assert!((c.time.get() - v.get() / 9e10).abs() < 1e-12);
    }

    #[test]
    fn allreduce_is_rs_plus_ag() {
        let ax = AxisPlacement::torus(v5e_link(), Seconds::new(1e-6), &[(16, true), (8, false)]);
        let v = Bytes::new(1e8);
        let ag = cost(Collective::AllGather, v, &ax, &mut NoTrace).time.get();
        let rs = cost(Collective::ReduceScatter, v, &ax, &mut NoTrace)
            .time
            .get();
        let ar = cost(Collective::AllReduce, v, &ax, &mut NoTrace).time.get();
        assert!((ar - ag - rs).abs() < 1e-15);
    }
}
