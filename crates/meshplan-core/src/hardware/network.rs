/*!
Above the chip: a TPU slice's inventory (hosts, chips, TensorCores, peak
FLOP/s, HBM, bisection bandwidth; book ch2 Q2) and a GPU cluster's network
levels (NVLink node, leaf switches of a scalable unit, spine; book ch12),
with the bandwidth an AllGather gets at each level, `D·W/(D−1)` for `D`
children of egress `W` (ch12: 514, 413 and 17,100 GB/s in a 1,024-GPU
H100 SuperPOD, so 413 GB/s overall).

A GPU cluster is read from the optional `[cluster]` table of a hardware
file (a reference design such as NVIDIA's DGX SuperPOD; sources in the
file's notes).
*/

use serde::{Deserialize, Serialize};

use super::{fmt_shape, Chip};
use crate::error::Result;
use crate::units::{parse_bytes_per_sec, BytesPerSec};

/// A GPU cluster design (`[cluster]` of a hardware file): the switch counts
/// of its levels and one switch port's bandwidth, as written (`Bw = String`,
/// [`ClusterFile`]) or with units ([`Cluster`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterDesign<Bw> {
    /// The reference design ("DGX H100 SuperPOD").
    pub name: String,
    /// NVSwitch chips per node.
    #[serde(default)]
    pub nvswitches_per_node: Option<u64>,
    /// NVLink ports per NVSwitch chip (64 on the NVLink 4 switch, ch12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvswitch_ports: Option<u64>,
    /// One NVLink port, one direction (25 GB/s on NVLink 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_port_bandwidth: Option<Bw>,
    /// Nodes per scalable unit (under one set of leaf switches).
    pub nodes_per_su: u64,
    /// Leaf switches per scalable unit.
    pub leaf_switches_per_su: u64,
    /// Scalable units in the design.
    pub sus: u64,
    /// Spine switches.
    pub spine_switches: u64,
    /// Ports per scale-out switch.
    pub switch_ports: u64,
    /// One switch port, one direction.
    pub switch_port_bandwidth: Bw,
    /// Leaf uplink oversubscription (1 = full bisection).
    #[serde(default = "one")]
    pub oversubscription: f64,
}

/// `[cluster]` as written.
pub type ClusterFile = ClusterDesign<String>;

/// A GPU cluster design with units.
pub type Cluster = ClusterDesign<BytesPerSec>;

fn one() -> f64 {
    1.0
}

impl Cluster {
    /// Convert the file's strings; sizes must be at least 1.
    pub fn from_file(f: &ClusterFile) -> Result<Cluster> {
        let bad = |field: &str| crate::Error::InvalidHardware {
            field: format!("cluster.{field}"),
            reason: "must be at least 1".into(),
        };
        for (k, v) in [
            ("nodes_per_su", f.nodes_per_su),
            ("leaf_switches_per_su", f.leaf_switches_per_su),
            ("sus", f.sus),
            ("spine_switches", f.spine_switches),
            ("switch_ports", f.switch_ports),
        ] {
            if v == 0 {
                return Err(bad(k));
            }
        }
        if !(f.oversubscription >= 1.0 && f.oversubscription.is_finite()) {
            return Err(bad("oversubscription"));
        }
        if f.nvswitch_ports == Some(0) {
            return Err(bad("nvswitch_ports"));
        }
        Ok(Cluster {
            name: f.name.clone(),
            nvswitches_per_node: f.nvswitches_per_node,
            nvswitch_ports: f.nvswitch_ports,
            nvlink_port_bandwidth: f
                .nvlink_port_bandwidth
                .as_deref()
                .map(parse_bytes_per_sec)
                .transpose()?,
            nodes_per_su: f.nodes_per_su,
            leaf_switches_per_su: f.leaf_switches_per_su,
            sus: f.sus,
            spine_switches: f.spine_switches,
            switch_ports: f.switch_ports,
            switch_port_bandwidth: parse_bytes_per_sec(&f.switch_port_bandwidth)?,
            oversubscription: f.oversubscription,
        })
    }
}

/// One network level.
#[derive(Clone, Debug, Serialize)]
pub struct NetworkLevel {
    /// "NVLink node", "leaf (scalable unit)", "spine", "ICI slice", "DCN".
    pub name: String,
    /// D: children joined at this level (GPUs, nodes, units); absent when
    /// the catalog gives no size for it (a scale-out network of any size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<u64>,
    /// GPUs (chips) under one element of this level, when sized.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chips: Option<u64>,
    /// W: one child's egress, one direction, bytes/s.
    pub child_egress_bytes_per_s: f64,
    /// Switches at this level (per element), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switches: Option<u64>,
    /// D·W: what the children's cables carry into one element, one
    /// direction (ch12's "cable bandwidth": 3.6, 12.8, 51.2 TB/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cable_bandwidth_bytes_per_s: Option<f64>,
    /// Switches × ports × port bandwidth of one element, one direction
    /// (ch12's "switch bandwidth": 6.4, 25.6, 51.2 TB/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch_bandwidth_bytes_per_s: Option<f64>,
    /// D·W/(D−1): the bandwidth an AllGather over this level gets (W when
    /// D is not given: the limit of a large level).
    pub allgather_bandwidth_bytes_per_s: f64,
    /// An AllReduce as ReduceScatter + AllGather: half the AllGather's.
    pub allreduce_bandwidth_bytes_per_s: f64,
    /// With in-network reduction (SHARP): T = V/W exactly, so W (ch12).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharp_allreduce_bandwidth_bytes_per_s: Option<f64>,
    /// Whether the switches reduce in the network (SHARP).
    pub in_network_reduction: bool,
    /// How the numbers are made.
    pub note: String,
}

/// A level's shape: its name, `D` (when sized), chips per element, `W`,
/// switches and their capacity, SHARP and a note.
struct LevelShape {
    name: String,
    children: Option<u64>,
    chips: Option<u64>,
    w: f64,
    switches: Option<u64>,
    switch_bw: Option<f64>,
    sharp: bool,
    /// A torus: no cables into a switch, and the AllGather bandwidth is
    /// W_ici × wrapped axes rather than D·W/(D−1).
    torus_allgather: Option<f64>,
    note: String,
}

impl LevelShape {
    /// The level with its bandwidths; `None` for a level that joins fewer
    /// than two children (nothing to gather).
    fn level(self) -> Option<NetworkLevel> {
        if self.children.is_some_and(|d| d < 2) {
            return None;
        }
        let ag = match (self.torus_allgather, self.children) {
            (Some(t), _) => t,
            (None, Some(d)) => d as f64 * self.w / (d - 1) as f64,
            (None, None) => self.w,
        };
        Some(NetworkLevel {
            name: self.name,
            children: self.children,
            chips: self.chips,
            child_egress_bytes_per_s: self.w,
            switches: self.switches,
            cable_bandwidth_bytes_per_s: self
                .children
                .filter(|_| self.torus_allgather.is_none())
                .map(|d| d as f64 * self.w),
            switch_bandwidth_bytes_per_s: self.switch_bw,
            allgather_bandwidth_bytes_per_s: ag,
            allreduce_bandwidth_bytes_per_s: ag / 2.0,
            sharp_allreduce_bandwidth_bytes_per_s: self.sharp.then_some(self.w),
            in_network_reduction: self.sharp,
            note: self.note,
        })
    }
}

/// The node (NVLink domain) level of a GPU.
fn node_level(ch: &Chip, nv: &super::Nvlink) -> LevelShape {
    let d = nv.domain_size;
    let c = ch.cluster.as_ref();
    LevelShape {
        // AMD's scale-up link is Infinity Fabric, not NVLink
        name: if ch.vendor.to_ascii_lowercase().contains("amd") {
            "Infinity Fabric node".into()
        } else {
            "NVLink node".into()
        },
        children: Some(d),
        chips: Some(d),
        w: nv.per_gpu.one_way_rate().get(),
        switches: c.and_then(|c| c.nvswitches_per_node),
        switch_bw: c.and_then(nvswitch_bandwidth),
        sharp: nv.in_network_reduction,
        torus_allgather: None,
        note: format!("node egress over NVLink: {d} GPUs × W_gpu"),
    }
}

/// One node's NVSwitches: switches × ports × port bandwidth, one way.
fn nvswitch_bandwidth(c: &Cluster) -> Option<f64> {
    let (n, p, w) = (
        c.nvswitches_per_node?,
        c.nvswitch_ports?,
        c.nvlink_port_bandwidth?,
    );
    Some(n as f64 * p as f64 * w.get())
}

/// The scale-out levels above a GPU node: leaf and spine of a cluster
/// design, or one unsized level when the catalog has no design.
fn scale_out_levels(ch: &Chip, d: u64, so: &super::ScaleOut) -> Vec<LevelShape> {
    let node = so.per_chip.one_way_rate().get() * d as f64;
    let sharp = so.in_network_reduction;
    let Some(c) = &ch.cluster else {
        let nodes = so.max_chips.map(|m| m / d.max(1));
        return vec![LevelShape {
            name: format!("scale-out ({})", so.kind),
            children: nodes,
            chips: nodes.map(|n| n * d),
            w: node,
            switches: None,
            switch_bw: None,
            sharp,
            torus_allgather: None,
            note: "a node's NICs: GPUs per node × W_nic (full-bisection fat tree assumed; no cluster size given: D·W/(D−1) → W)".into(),
        }];
    };
    let port = c.switch_port_bandwidth.get() * c.switch_ports as f64;
    let su = node * c.nodes_per_su as f64 / c.oversubscription;
    vec![
        LevelShape {
            name: "leaf (scalable unit)".into(),
            children: Some(c.nodes_per_su),
            chips: Some(c.nodes_per_su * d),
            w: node,
            switches: Some(c.leaf_switches_per_su),
            switch_bw: Some(c.leaf_switches_per_su as f64 * port),
            sharp,
            torus_allgather: None,
            note: "a node's NICs: GPUs per node × W_nic".into(),
        },
        LevelShape {
            name: "spine".into(),
            children: Some(c.sus),
            chips: Some(c.sus * c.nodes_per_su * d),
            w: su,
            switches: Some(c.spine_switches),
            switch_bw: Some(c.spine_switches as f64 * port),
            sharp,
            torus_allgather: None,
            note: format!(
                "a unit's uplinks: nodes per unit × node egress / oversubscription {}",
                c.oversubscription
            ),
        },
    ]
}

/// The ICI torus of a TPU pod and the DCN between slices.
fn tpu_levels(ch: &Chip, ici: &super::Ici) -> Vec<LevelShape> {
    let n = ici.max_slice_chips();
    let mut v = vec![LevelShape {
        name: format!("ICI torus {}", fmt_shape(&ici.max_slice)),
        children: Some(n),
        chips: Some(n),
        w: ici.link.one_way_rate().get() * ici.links_per_chip as f64,
        switches: None,
        switch_bw: None,
        sharp: false,
        torus_allgather: Some(
            ici.link.bidirectional_rate().get()
                * ici.max_slice.iter().filter(|&&s| s > 1).count() as f64,
        ),
        note: "chip egress = links × one-way link; an AllGather over every axis of a wrapped slice gets W_ici × axes".into(),
    }];
    if let Some(so) = &ch.scale_out {
        // whole largest slices the catalog's DCN limit holds (never more
        // chips than it gives)
        let slices = so.max_chips.map(|m| m / n.max(1));
        v.push(LevelShape {
            name: "DCN (between slices)".into(),
            children: slices,
            chips: slices.map(|k| k * n),
            w: so.per_chip.one_way_rate().get() * n as f64,
            switches: None,
            switch_bw: None,
            sharp: false,
            torus_allgather: None,
            note: format!(
                "a {}-chip slice's DCN egress: chips × W_dcn{}",
                n,
                if slices.is_none() {
                    " (no DCN size given: D·W/(D−1) → W)"
                } else {
                    ""
                }
            ),
        });
    }
    v
}

/// The network levels of a GPU chip's cluster (node, leaf, spine), or of a
/// TPU pod (ICI, DCN); a level joining fewer than two children is left out.
pub fn levels(ch: &Chip) -> Vec<NetworkLevel> {
    let mut shapes = Vec::new();
    if let Some(nv) = &ch.nvlink {
        shapes.push(node_level(ch, nv));
        if let Some(so) = &ch.scale_out {
            shapes.extend(scale_out_levels(ch, nv.domain_size, so));
        }
    }
    if let Some(ici) = &ch.ici {
        shapes.extend(tpu_levels(ch, ici));
    }
    shapes.into_iter().filter_map(LevelShape::level).collect()
}

/// One offered TPU slice, totalled (book ch2 Q2).
#[derive(Clone, Debug, Serialize)]
pub struct SliceInventory {
    /// Its shape.
    pub shape: Vec<u64>,
    /// Chips.
    pub chips: u64,
    /// Hosts (chips / chips per host, rounded up).
    pub hosts: u64,
    /// TensorCores (chips × cores per chip), when the anatomy is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensorcores: Option<u64>,
    /// Peak bf16 FLOP/s of the slice.
    pub peak_flops_per_s: f64,
    /// HBM of the slice, bytes.
    pub hbm_bytes: f64,
    /// Whether each axis has wraparound links.
    pub wraparound: Vec<bool>,
    /// Bytes/s crossing a cut through the middle of the longest axis, both
    /// directions: lines along that axis × (2 with wraparound, else 1) ×
    /// 2 × W_one-way.
    pub bisection_bytes_per_s: f64,
}

/// Every offered slice of a TPU (and the full pod), totalled.
pub fn slices(ch: &Chip) -> Vec<SliceInventory> {
    let Some(ici) = &ch.ici else {
        return Vec::new();
    };
    let mut shapes = ici.slice_shapes.clone();
    if !shapes.contains(&ici.max_slice) {
        shapes.push(ici.max_slice.clone());
    }
    let c = ch.flops(crate::units::DType::Bf16).get();
    let w = ici.link.one_way_rate().get();
    shapes
        .into_iter()
        .map(|s| {
            let chips: u64 = s.iter().product();
            let wraps: Vec<bool> = s
                .iter()
                .map(|&x| x > 2 && ici.wraparound.axis_wraps(x, &s))
                .collect();
            let (i, &longest) = s
                .iter()
                .enumerate()
                .max_by_key(|(_, &x)| x)
                .unwrap_or((0, &1));
            let lines = chips / longest.max(1);
            let cut = if longest <= 1 {
                0.0
            } else {
                lines as f64 * if wraps[i] { 2.0 } else { 1.0 } * 2.0 * w
            };
            SliceInventory {
                chips,
                hosts: chips.div_ceil(ici.chips_per_host.max(1)),
                tensorcores: ch
                    .anatomy
                    .tensorcores_per_chip
                    .and_then(|t| t.checked_mul(chips)),
                peak_flops_per_s: chips as f64 * c,
                hbm_bytes: chips as f64 * ch.hbm_capacity.get(),
                wraparound: wraps,
                bisection_bytes_per_s: cut,
                shape: s,
            }
        })
        .collect()
}
