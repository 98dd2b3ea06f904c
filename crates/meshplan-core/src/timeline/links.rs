//! Which network each stream of a step uses: the links the mesh placed
//! each parallelism axis on ([`Mesh::build`], the one placement rule the
//! evaluator and the step-time model read), named for the timeline.

use serde::Serialize;

use crate::collectives::AxisPlacement;
use crate::hardware::Chip;
use crate::mesh::{Mesh, Topology};
use crate::parallelism::{Degrees, LogicalAxis};

/// The network of each communication stream, by name ("NVLink",
/// "InfiniBand", "ICI", "DCN"; "none" where the axis has size 1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Links {
    /// Tensor parallel.
    pub tp: String,
    /// Context parallel.
    pub cp: String,
    /// Expert parallel.
    pub ep: String,
    /// Pipeline point-to-point.
    pub pp: String,
    /// Data parallel / ZeRO / FSDP: the slowest link the data axes use.
    pub dp: String,
    /// The host link (offload).
    pub host: String,
}

/// A scale-out network kind of the catalog ("infiniband") as it is written.
fn network_name(kind: &str) -> String {
    match kind {
        "infiniband" => "InfiniBand".into(),
        "ethernet" => "Ethernet".into(),
        "dcn" => "DCN".into(),
        "" => "scale-out network".into(),
        k => k.to_string(),
    }
}

/// The link of one axis placement, and whether it leaves the node/slice.
fn placement_name(chip: &Chip, p: &AxisPlacement) -> (String, bool) {
    match p {
        AxisPlacement::Trivial => ("none".into(), false),
        AxisPlacement::Torus { .. } => ("ICI".into(), false),
        AxisPlacement::Dcn { .. } => ("DCN".into(), true),
        AxisPlacement::Gpu(g) if g.size <= g.per_node => (
            if chip.nvlink.is_some() {
                "NVLink"
            } else {
                "in-node links"
            }
            .into(),
            false,
        ),
        AxisPlacement::Gpu(_) => (
            network_name(chip.scale_out.as_ref().map_or("", |s| s.kind.as_str())),
            true,
        ),
    }
}

impl Links {
    /// The links of `degrees` placed on `topo` of `chip`.
    pub fn of(chip: &Chip, topo: &Topology, degrees: Degrees) -> Links {
        let mesh = Mesh::build(chip, topo, degrees);
        let name = |a| placement_name(chip, &mesh.placement(a));
        // the data axes: the one that leaves the node sets the pace
        let data = [
            LogicalAxis::Dp,
            LogicalAxis::Fsdp,
            LogicalAxis::Cp,
            LogicalAxis::DpDcn,
        ]
        .into_iter()
        .map(name)
        .filter(|(n, _)| n != "none")
        .max_by_key(|(_, out)| *out)
        .map_or_else(|| "none".to_string(), |(n, _)| n);
        Links {
            tp: name(LogicalAxis::Tp).0,
            cp: name(LogicalAxis::Cp).0,
            ep: name(LogicalAxis::Ep).0,
            pp: name(LogicalAxis::Pp).0,
            dp: data,
            host: if chip.pcie.is_some() {
                "PCIe".into()
            } else {
                "host link".into()
            },
        }
    }
}
