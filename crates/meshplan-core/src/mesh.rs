/*!
Logical mesh axes (data, fsdp, tensor, pipeline, context, expert) mapped onto
hardware: the physical axes of a TPU slice ("16x16x16", "8x16", optionally
several slices over DCN, "2*16x16x16") or GPUs (nodes × GPUs per node).

Axes are placed innermost first, so the axis that communicates most per layer
gets the fastest links: `tp`, `cp`, `ep`, `fsdp`, `dp`, `pp`. On a TPU each
logical degree is factored greedily into the remaining capacity of the
physical axes, last physical axis first (so `tp = 4` on 16x16x16 takes 4 of
the Z axis and `fsdp = 1024` takes the other 4 of Z plus all of X and Y). On
GPUs the NVLink domain is filled first, then nodes. With several TPU slices,
the `dp` axis must be a multiple of the slice count and its outer part runs
over DCN (the axis `dp-dcn`).

Infeasibility (degrees that do not multiply to the chip count, a degree that
does not factor into the slice, a mesh larger than the chip's largest pod) is a
value ([`Mesh::reasons`]), never a panic.

The book's `M_X`, `M_Y` (number of physical axes an axis spans) are reported
two ways: [`MeshAxis::m_axes`] counts physical axes with a part > 1, and
[`MeshAxis::m_effective`] is the AllGather bandwidth of the placement in units
of one wrapped axis (`W_ici,bidi`), so a partial axis without wraparound counts
as less than one (`16x16` + 4 of a 16-ring = 2 + 2/3).
*/

use serde::Serialize;

use crate::collectives::{allgather_bandwidth, AxisPlacement};
use crate::hardware::{fmt_shape, parse_shape, Chip, ChipKind};
use crate::parallelism::RankOrder;
pub use crate::parallelism::{Degrees, LogicalAxis};
use crate::units::BytesPerSec;

/// The most chips meshplan analyses (2^24 = 16,777,216, far beyond any
/// cluster built): larger counts are refused rather than searched, so an
/// absurd input answers at once instead of enumerating divisors for minutes.
pub const MAX_CHIPS: u64 = 1 << 24;

/// `Err` (a message naming the limit) when `n` chips exceed [`MAX_CHIPS`].
pub fn check_chip_count(n: u64) -> std::result::Result<(), String> {
    if n > MAX_CHIPS {
        Err(format!(
            "{n} chips is more than the {MAX_CHIPS} meshplan analyses"
        ))
    } else {
        Ok(())
    }
}

/// Hardware the mesh is laid on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Topology {
    /// `slices` TPU slices of `shape` each.
    Torus {
        /// Slices joined over DCN.
        slices: u64,
        /// Physical shape of one slice.
        shape: Vec<u64>,
    },
    /// GPU cluster.
    Gpu {
        /// Nodes (NVLink domains).
        nodes: u64,
        /// GPUs per node.
        gpus_per_node: u64,
    },
}

impl Topology {
    /// Total chips.
    pub fn chips(&self) -> u64 {
        match self {
            Topology::Torus { slices, shape } => slices * shape.iter().product::<u64>(),
            Topology::Gpu {
                nodes,
                gpus_per_node,
            } => nodes * gpus_per_node,
        }
    }
    /// Total chips, `None` when the product overflows `u64`.
    pub fn checked_chips(&self) -> Option<u64> {
        match self {
            Topology::Torus { slices, shape } => {
                shape.iter().try_fold(*slices, |acc, &x| acc.checked_mul(x))
            }
            Topology::Gpu {
                nodes,
                gpus_per_node,
            } => nodes.checked_mul(*gpus_per_node),
        }
    }
    /// Parse a mesh string for `chip`: TPU "16x16x16" or "2*16x16x16"
    /// (2 slices); GPU "NODESxGPUS" ("8x8") or a bare count ("64", split into
    /// NVLink domains of the chip's size).
    pub fn parse(chip: &Chip, s: &str) -> crate::Result<Topology> {
        let s = s.trim();
        match chip.kind {
            ChipKind::Tpu => {
                let (slices, rest) = match s.split_once('*') {
                    Some((a, b)) => (
                        a.trim()
                            .parse::<u64>()
                            .map_err(|_| crate::Error::BadValue {
                                what: "slice count".into(),
                                input: s.into(),
                                expected: "SLICES*SHAPE like \"2*16x16x16\"".into(),
                            })?,
                        b,
                    ),
                    None => (1, s),
                };
                let t = Topology::Torus {
                    slices: slices.max(1),
                    shape: parse_shape(rest)?,
                };
                match t.checked_chips() {
                    Some(n) if n <= MAX_CHIPS => Ok(t),
                    _ => Err(crate::Error::BadValue {
                        what: "mesh".into(),
                        input: s.into(),
                        expected: format!("at most {MAX_CHIPS} chips in all"),
                    }),
                }
            }
            ChipKind::Gpu => {
                let v = parse_shape(s)?;
                if !matches!(
                    v.iter().try_fold(1u64, |acc, &x| acc.checked_mul(x)),
                    Some(n) if n <= MAX_CHIPS
                ) {
                    return Err(crate::Error::BadValue {
                        what: "GPU mesh".into(),
                        input: s.into(),
                        expected: format!("at most {MAX_CHIPS} GPUs in all"),
                    });
                }
                let dom = chip.nvlink.as_ref().map_or(1, |n| n.domain_size).max(1);
                Ok(match v.as_slice() {
                    [n] => Self::gpus(*n, dom),
                    [a, b] => Topology::Gpu {
                        nodes: *a,
                        gpus_per_node: *b,
                    },
                    _ => {
                        return Err(crate::Error::BadValue {
                            what: "GPU mesh".into(),
                            input: s.into(),
                            expected: "NODESxGPUS_PER_NODE like \"8x8\", or a GPU count".into(),
                        })
                    }
                })
            }
        }
    }
    /// `slices` TPU slices of `shape` each (`torus(2, &[16, 16, 16])` =
    /// "2*16x16x16").
    pub fn torus(slices: u64, shape: &[u64]) -> Topology {
        Topology::Torus {
            slices,
            shape: shape.to_vec(),
        }
    }
    /// `n` GPUs in domains of `domain` (a partial node if `n < domain`).
    pub fn gpus(n: u64, domain: u64) -> Topology {
        if n <= domain || n % domain != 0 {
            Topology::Gpu {
                nodes: 1,
                gpus_per_node: n,
            }
        } else {
            Topology::Gpu {
                nodes: n / domain,
                gpus_per_node: domain,
            }
        }
    }
    /// "16x16x16", "2*16x16x16", "8 nodes x 8 GPUs".
    pub fn describe(&self) -> String {
        match self {
            Topology::Torus { slices: 1, shape } => fmt_shape(shape),
            Topology::Torus { slices, shape } => format!("{slices}*{}", fmt_shape(shape)),
            Topology::Gpu {
                nodes,
                gpus_per_node,
            } => format!(
                "{nodes} node{} x {gpus_per_node} GPUs",
                if *nodes == 1 { "" } else { "s" }
            ),
        }
    }
}

/// One logical axis as placed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeshAxis {
    /// Which axis.
    pub axis: LogicalAxis,
    /// Degree.
    pub size: u64,
    /// TPU: chips of each physical axis spanned; GPU: [GPUs per node, nodes].
    pub physical: Vec<u64>,
    /// Hardware placement for collective costs.
    pub placement: AxisPlacement,
    /// Physical axes with a part > 1 (the book's M_X, M_Y counting axes).
    pub m_axes: usize,
    /// AllGather bandwidth in units of one wrapped ICI axis (TPU) or of the
    /// NVLink egress (GPU).
    pub m_effective: f64,
    /// AllGather bandwidth V/T on this axis (B/s).
    pub allgather_bandwidth: BytesPerSec,
}

/// A placed mesh, possibly infeasible.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mesh {
    /// Hardware layout.
    pub topology: Topology,
    /// Chips in the topology.
    pub chips: u64,
    /// Degrees requested.
    pub degrees: Degrees,
    /// Axes with degree > 1 (plus `dp-dcn` when slices > 1).
    pub axes: Vec<MeshAxis>,
    /// Empty iff feasible.
    pub reasons: Vec<String>,
    /// Non-fatal remarks (e.g. a slice shape the vendor does not offer).
    pub notes: Vec<String>,
}

impl Mesh {
    /// Feasible?
    pub fn feasible(&self) -> bool {
        self.reasons.is_empty()
    }
    /// The placed axis, if it has degree > 1.
    pub fn axis(&self, a: LogicalAxis) -> Option<&MeshAxis> {
        self.axes.iter().find(|x| x.axis == a)
    }
    /// Placement of an axis (Trivial if unused).
    pub fn placement(&self, a: LogicalAxis) -> AxisPlacement {
        self.axis(a).map_or(AxisPlacement::Trivial, |x| x.placement)
    }
    /// Place `deg` on `topo` for `chip`.
    pub fn build(chip: &Chip, topo: &Topology, deg: Degrees) -> Mesh {
        let chips = topo.chips();
        let mut reasons = Vec::new();
        let mut notes = Vec::new();
        for a in LogicalAxis::ORDER {
            if deg.get(a) == 0 {
                reasons.push(format!("{} degree must be at least 1", a.name()));
            }
        }
        // A zero degree makes the product and placement checks meaningless:
        // it is reported alone, with no axes.
        let axes = if reasons.is_empty() {
            place(chip, topo, deg, chips, &mut reasons, &mut notes)
        } else {
            Vec::new()
        };
        Mesh {
            topology: topo.clone(),
            chips,
            degrees: deg,
            axes,
            reasons,
            notes,
        }
    }
}

/// Place positive degrees `deg` on `topo` (`chips` chips): the axes, with
/// reasons and notes appended.
fn place(
    chip: &Chip,
    topo: &Topology,
    deg: Degrees,
    chips: u64,
    reasons: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Vec<MeshAxis> {
    if deg.product() != chips {
        reasons.push(format!(
            "dp·fsdp·tp·pp·cp = {}·{}·{}·{}·{} = {} but the mesh {} has {} chips",
            deg.dp,
            deg.fsdp,
            deg.tp,
            deg.pp,
            deg.cp,
            deg.product(),
            topo.describe(),
            chips
        ));
    }
    let data = deg.data().saturating_mul(deg.cp);
    if deg.ep > 1 && !deg.etp_differs() && data % deg.ep != 0 {
        reasons.push(format!(
            "ep = {} must divide dp·fsdp·cp = {data} (experts are spread over the data-like axes)",
            deg.ep,
        ));
    }
    // Megatron-Core: the expert grid etp·ep·edp·pp covers the same ranks
    let ranks = data.saturating_mul(deg.tp);
    let etp_ep = deg.expert_tp().max(1).saturating_mul(deg.ep);
    if deg.ep > 1 && deg.etp_differs() && ranks % etp_ep != 0 {
        reasons.push(format!(
            "etp·ep = {}·{} must divide tp·dp·fsdp·cp = {ranks} (Megatron-Core's expert grid)",
            deg.expert_tp(),
            deg.ep,
        ));
    }
    match topo {
        Topology::Torus { slices, shape } => {
            place_torus(chip, slices, shape, deg, chips, reasons, notes)
        }
        Topology::Gpu {
            nodes,
            gpus_per_node,
        } => place_gpus(chip, nodes, gpus_per_node, deg, chips, reasons),
    }
}

/// Place `deg` on `slices` TPU slices of `shape`: the axes, with reasons
/// and notes appended.
fn place_torus(
    chip: &Chip,
    slices: &u64,
    shape: &[u64],
    deg: Degrees,
    chips: u64,
    reasons: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Vec<MeshAxis> {
    let mut axes = Vec::new();
    if let Some(ici) = &chip.ici {
        let maxc: u64 = ici.max_slice.iter().product();
        let sc: u64 = shape.iter().product();
        if sc > maxc {
            reasons.push(format!(
                "slice {} ({sc} chips) is larger than the largest {} slice {} ({maxc} chips)",
                fmt_shape(shape),
                chip.name,
                fmt_shape(&ici.max_slice)
            ));
        }
        if shape.len() as u64 != ici.torus_dims {
            notes.push(format!(
                "{} has a {}-D torus; slice {} is treated axis by axis",
                chip.name,
                ici.torus_dims,
                fmt_shape(shape)
            ));
        }
        if !ici.slice_shapes.is_empty() && !ici.slice_shapes.iter().any(|s| s == shape) {
            notes.push(format!(
                "{} is not in {}'s list of offered slice shapes",
                fmt_shape(shape),
                chip.name
            ));
        }
    } else {
        reasons.push(format!("{} has no ICI; give a GPU layout", chip.name));
    }
    if *slices > 1 {
        if let Some(m) = chip.scale_out.as_ref().and_then(|s| s.max_chips) {
            if chips > m {
                reasons.push(format!(
                    "{chips} chips exceed the largest multislice deployment of {m} chips"
                ));
            }
        }
        if deg.dp % slices != 0 {
            reasons.push(format!(
                "with {slices} slices over DCN, dp = {} must be a multiple of {slices}",
                deg.dp
            ));
        }
    }
    if reasons.is_empty() {
        let mut rem = shape.to_vec();
        let sc: u64 = shape.iter().product();
        for a in LogicalAxis::ORDER {
            let mut d = deg.get(a);
            if a == LogicalAxis::Ep {
                continue; // ep reuses data axes
            }
            if a == LogicalAxis::Dp && *slices > 1 {
                d /= slices;
            }
            if d <= 1 {
                continue;
            }
            let mut parts = vec![1u64; shape.len()];
            for i in (0..shape.len()).rev() {
                let g = gcd(d, rem[i]);
                if g > 1 {
                    parts[i] = g;
                    d /= g;
                    rem[i] /= g;
                }
            }
            if d != 1 {
                reasons.push(format!(
                    "{} = {} does not factor into what is left of slice {}",
                    a.name(),
                    deg.get(a),
                    fmt_shape(shape)
                ));
                continue;
            }
            let p = AxisPlacement::tpu(chip, &parts, shape);
            axes.push(make_axis(chip, a, &parts, p));
        }
        if *slices > 1 {
            let p = AxisPlacement::dcn(chip, *slices, sc);
            axes.push(make_axis(chip, LogicalAxis::DpDcn, &[*slices], p));
        }
        if deg.ep > 1 {
            axes.push(ep_axis(chip, &axes, deg));
        }
    }
    axes
}

/// Place `deg` on `nodes` × `gpus_per_node` GPUs (NVLink domain first):
/// the axes, with reasons appended.
fn place_gpus(
    chip: &Chip,
    nodes: &u64,
    gpus_per_node: &u64,
    deg: Degrees,
    chips: u64,
    reasons: &mut Vec<String>,
) -> Vec<MeshAxis> {
    let mut axes = Vec::new();
    let dom = chip.nvlink.as_ref().map_or(1, |n| n.domain_size);
    if chip.kind != ChipKind::Gpu {
        reasons.push(format!("{} is a TPU; give a slice shape", chip.name));
    }
    if *gpus_per_node > dom {
        reasons.push(format!(
            "{gpus_per_node} GPUs per node exceed {}'s NVLink domain of {dom}",
            chip.name
        ));
    }
    if *nodes > 1 && chip.scale_out.is_none() {
        reasons.push(format!(
            "{} nodes need a scale-out network and {} has none",
            nodes, chip.name
        ));
    }
    if let Some(m) = chip.scale_out.as_ref().and_then(|s| s.max_chips) {
        if chips > m {
            reasons.push(format!(
                "{chips} GPUs exceed the largest {} cluster of {m}",
                chip.name
            ));
        }
    }
    if reasons.is_empty() {
        let split = GpuSplit::new(&deg, *gpus_per_node);
        let mut out = *nodes;
        for a in deg.order.axes() {
            let d = deg.get(a);
            if a == LogicalAxis::Ep || d <= 1 {
                continue;
            }
            let g = split.in_node(a);
            let rest = d / g;
            if out % rest != 0 {
                reasons.push(format!(
                    "{} = {d} does not factor into the remaining {} GPUs per node x {} nodes",
                    a.name(),
                    split.free_before(a),
                    out
                ));
                continue;
            }
            out /= rest;
            let p = AxisPlacement::gpu(chip, d, g);
            axes.push(make_axis(chip, a, &[g, rest], p));
        }
        if deg.ep > 1 {
            axes.push(ep_axis(chip, &axes, deg));
        }
    }

    axes
}

/// How a GPU mesh's logical axes split between the NVLink domain and the
/// scale-out network: axes are placed innermost first in
/// [`LogicalAxis::ORDER`], each taking the largest divisor of its degree that
/// fits in what the axes inside it left of the node. The one placement rule
/// for GPUs: the mesh (and so the book evaluator) and the calibrated
/// step-time model both read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuSplit {
    /// Per axis in `ORDER`: (GPUs of it inside one node, GPUs per node still
    /// free before it was placed).
    parts: [(u64, u64); 6],
}

impl GpuSplit {
    /// Split `deg` over nodes of `gpus_per_node` GPUs (expert parallelism
    /// reuses the data axes: it takes no place of its own, and its group is
    /// the data ranks beside tp in the node, then across nodes).
    pub fn new(deg: &Degrees, gpus_per_node: u64) -> GpuSplit {
        let mut parts = [(1, 1); 6];
        let mut free = gpus_per_node.max(1);
        // placed in the plan's rank order; stored by the axis' index in ORDER
        for a in deg.order.axes() {
            let i = order_index(a);
            let d = deg.get(a).max(1);
            if a == LogicalAxis::Ep {
                // the ranks nearest in the node beside each expert's TP
                // group: beside tp (etp = tp), or from the first rank on
                // (etp = 1: tp's ranks hold different experts)
                let etp_in_node = if deg.etp_differs() {
                    gcd(deg.expert_tp().max(1), gpus_per_node.max(1))
                } else {
                    parts[0].0
                };
                // pipeline stages placed inside the node (tp-pp-dp) take
                // their share of it first
                let pp_in_node = match deg.order {
                    RankOrder::PipelineInner => parts[order_index(LogicalAxis::Pp)].0,
                    RankOrder::PipelineOuter => 1,
                };
                let beside_tp = (gpus_per_node.max(1) / (etp_in_node * pp_in_node)).max(1);
                parts[i] = (gcd(d, beside_tp), beside_tp);
                continue;
            }
            let g = gcd(d, free);
            parts[i] = (g, free);
            free /= g;
        }
        GpuSplit { parts }
    }
    fn part(&self, a: LogicalAxis) -> (u64, u64) {
        match a {
            LogicalAxis::DpDcn => (1, 1),
            _ => self.parts[order_index(a)],
        }
    }
    /// GPUs of axis `a` inside one node.
    pub fn in_node(&self, a: LogicalAxis) -> u64 {
        self.part(a).0
    }
    /// GPUs per node left free by the axes placed inside `a`.
    pub fn free_before(&self, a: LogicalAxis) -> u64 {
        self.part(a).1
    }
    /// A collective group spanning the axes `group` of `deg`: (GPUs of the
    /// group in one node, nodes it spans).
    pub fn group(&self, deg: &Degrees, group: &[LogicalAxis]) -> (u64, u64) {
        group.iter().fold((1, 1), |(per, nodes), &a| {
            let g = self.in_node(a);
            (per * g, nodes * (deg.get(a).max(1) / g))
        })
    }
}

/// Position of `a` in [`LogicalAxis::ORDER`] (`DpDcn`: dp's).
fn order_index(a: LogicalAxis) -> usize {
    LogicalAxis::ORDER
        .iter()
        .position(|&x| x == a)
        .unwrap_or(LogicalAxis::ORDER.len() - 2)
}

/// Greatest common divisor (binary: shifts and subtractions, no division —
/// the planner places every plan it predicts, and degrees and node sizes
/// are mostly powers of two). `gcd(0, b) = b`.
pub(crate) fn gcd(a: u64, b: u64) -> u64 {
    if a == 0 || b == 0 {
        return a | b;
    }
    let shift = (a | b).trailing_zeros();
    let (mut a, mut b) = (a >> a.trailing_zeros(), b >> b.trailing_zeros());
    while a != b {
        if a > b {
            (a, b) = (b, a);
        }
        b -= a;
        b >>= b.trailing_zeros();
    }
    a << shift
}

fn unit_bandwidth(chip: &Chip) -> f64 {
    match (&chip.ici, &chip.nvlink) {
        (Some(i), _) => i.link.bidirectional_rate().get(),
        (None, Some(n)) => n.per_gpu.one_way_rate().get(),
        _ => 1.0,
    }
}

fn make_axis(chip: &Chip, a: LogicalAxis, parts: &[u64], p: AxisPlacement) -> MeshAxis {
    let bw = allgather_bandwidth(&p);
    MeshAxis {
        axis: a,
        size: p.size(),
        physical: parts.to_vec(),
        placement: p,
        m_axes: p.n_physical_axes(),
        m_effective: bw.get() / unit_bandwidth(chip),
        allgather_bandwidth: bw,
    }
}

/// Expert parallelism reuses the data-like axes: place it on the innermost of
/// them (cp, fsdp, dp) — on GPUs within a node when it fits.
fn ep_axis(chip: &Chip, axes: &[MeshAxis], deg: Degrees) -> MeshAxis {
    let ep = deg.ep;
    let p = match chip.kind {
        ChipKind::Gpu => {
            let dom = chip.nvlink.as_ref().map_or(1, |n| n.domain_size);
            AxisPlacement::gpu(chip, ep, GpuSplit::new(&deg, dom).in_node(LogicalAxis::Ep))
        }
        ChipKind::Tpu => {
            // Use the physical parts of the data-like axes, innermost first.
            let mut parts: Vec<u64> = Vec::new();
            let mut d = ep;
            let shape_len = axes.first().map_or(0, |x| x.physical.len());
            let mut acc = vec![1u64; shape_len];
            // whole experts (etp = 1): tp's axes are expert ranks too
            let with_tp = deg.etp_differs() && deg.expert_tp() == 1;
            for x in axes.iter().filter(|x| {
                matches!(
                    x.axis,
                    LogicalAxis::Cp | LogicalAxis::Fsdp | LogicalAxis::Dp
                ) || (with_tp && x.axis == LogicalAxis::Tp)
            }) {
                for i in (0..x.physical.len().min(shape_len)).rev() {
                    let g = gcd(d, x.physical[i]);
                    acc[i] *= g;
                    d /= g;
                }
            }
            parts.extend(acc);
            match &chip.ici {
                Some(i) => AxisPlacement::torus(
                    i.link,
                    i.hop_latency,
                    &parts.iter().map(|&s| (s, false)).collect::<Vec<_>>(),
                ),
                None => AxisPlacement::Trivial,
            }
        }
    };
    make_axis(chip, LogicalAxis::Ep, &[ep], p)
}

#[cfg(test)]
mod tests {
    use super::gcd;

    #[test]
    fn gcd_is_the_greatest_common_divisor() {
        // by hand: 12 = 2²·3, 18 = 2·3² → 6; 64 = 2⁶, 48 = 2⁴·3 → 16
        assert_eq!(gcd(12, 18), 6);
        assert_eq!(gcd(64, 48), 16);
        assert_eq!(gcd(8, 3), 1);
        assert_eq!(gcd(0, 5), 5);
        assert_eq!(gcd(7, 0), 7);
        assert_eq!(gcd(72, 72), 72);
        // every pair up to 96: it divides both, and no larger number does
        for a in 1..=96u64 {
            for b in 1..=96u64 {
                let g = gcd(a, b);
                assert!(a % g == 0 && b % g == 0, "{a} {b} {g}");
                assert!(((g + 1)..=a.min(b)).all(|d| a % d != 0 || b % d != 0));
            }
        }
    }
}
