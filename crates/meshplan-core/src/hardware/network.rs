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
        Ok(Cluster {
            name: f.name.clone(),
            nvswitches_per_node: f.nvswitches_per_node,
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
    /// D: children joined at this level (GPUs, nodes, units).
    pub children: u64,
    /// GPUs (chips) under one element of this level.
    pub chips: u64,
    /// W: one child's egress, one direction, bytes/s.
    pub child_egress_bytes_per_s: f64,
    /// Switches at this level (per element), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switches: Option<u64>,
    /// D·W/(D−1): the bandwidth an AllGather over this level gets.
    pub allgather_bandwidth_bytes_per_s: f64,
    /// Whether the switches reduce in the network (SHARP).
    pub in_network_reduction: bool,
    /// How the numbers are made.
    pub note: String,
}

fn ag(d: u64, w: f64) -> f64 {
    if d <= 1 {
        f64::INFINITY
    } else {
        d as f64 * w / (d - 1) as f64
    }
}

/// The network levels of a GPU chip's cluster (node, leaf, spine), or of a
/// TPU pod (ICI, DCN).
pub fn levels(ch: &Chip) -> Vec<NetworkLevel> {
    let mut v = Vec::new();
    if let Some(nv) = &ch.nvlink {
        let d = nv.domain_size;
        let w = nv.per_gpu.one_way_rate().get();
        v.push(NetworkLevel {
            // AMD's scale-up link is Infinity Fabric, not NVLink
            name: if ch.vendor.to_ascii_lowercase().contains("amd") {
                "Infinity Fabric node".into()
            } else {
                "NVLink node".into()
            },
            children: d,
            chips: d,
            child_egress_bytes_per_s: w,
            switches: ch.cluster.as_ref().and_then(|c| c.nvswitches_per_node),
            allgather_bandwidth_bytes_per_s: ag(d, w),
            in_network_reduction: nv.in_network_reduction,
            note: format!("node egress over NVLink: {} GPUs × W_gpu", d),
        });
        if let (Some(so), Some(c)) = (&ch.scale_out, &ch.cluster) {
            let node = so.per_chip.one_way_rate().get() * d as f64;
            v.push(NetworkLevel {
                name: "leaf (scalable unit)".into(),
                children: c.nodes_per_su,
                chips: c.nodes_per_su * d,
                child_egress_bytes_per_s: node,
                switches: Some(c.leaf_switches_per_su),
                allgather_bandwidth_bytes_per_s: ag(c.nodes_per_su, node),
                in_network_reduction: so.in_network_reduction,
                note: "a node's NICs: GPUs per node × W_nic".into(),
            });
            let su = node * c.nodes_per_su as f64 / c.oversubscription;
            v.push(NetworkLevel {
                name: "spine".into(),
                children: c.sus,
                chips: c.sus * c.nodes_per_su * d,
                child_egress_bytes_per_s: su,
                switches: Some(c.spine_switches),
                allgather_bandwidth_bytes_per_s: ag(c.sus, su),
                in_network_reduction: so.in_network_reduction,
                note: format!(
                    "a unit's uplinks: nodes per unit × node egress / oversubscription {}",
                    c.oversubscription
                ),
            });
        } else if let Some(so) = &ch.scale_out {
            let node = so.per_chip.one_way_rate().get() * d as f64;
            v.push(NetworkLevel {
                name: format!("scale-out ({})", so.kind),
                children: so.max_chips.map_or(0, |m| m / d.max(1)),
                chips: so.max_chips.unwrap_or(0),
                child_egress_bytes_per_s: node,
                switches: None,
                allgather_bandwidth_bytes_per_s: node,
                in_network_reduction: so.in_network_reduction,
                note: "a node's NICs: GPUs per node × W_nic (full-bisection fat tree assumed)"
                    .into(),
            });
        }
    }
    if let Some(ici) = &ch.ici {
        let n = ici.max_slice_chips();
        v.push(NetworkLevel {
            name: format!("ICI torus {}", fmt_shape(&ici.max_slice)),
            children: n,
            chips: n,
            child_egress_bytes_per_s: ici.link.one_way_rate().get() * ici.links_per_chip as f64,
            switches: None,
            allgather_bandwidth_bytes_per_s: ici.link.bidirectional_rate().get()
                * ici.max_slice.iter().filter(|&&s| s > 1).count() as f64,
            in_network_reduction: false,
            note: "chip egress = links × one-way link; an AllGather over every axis of a wrapped slice gets W_ici × axes".into(),
        });
        if let Some(so) = &ch.scale_out {
            v.push(NetworkLevel {
                name: "DCN (between slices)".into(),
                children: so.max_chips.map_or(0, |m| m / n.max(1)),
                chips: so.max_chips.unwrap_or(0),
                child_egress_bytes_per_s: so.per_chip.one_way_rate().get() * n as f64,
                switches: None,
                allgather_bandwidth_bytes_per_s: so.per_chip.one_way_rate().get() * n as f64,
                in_network_reduction: false,
                note: "a slice's DCN egress: chips × W_dcn".into(),
            });
        }
    }
    v
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
