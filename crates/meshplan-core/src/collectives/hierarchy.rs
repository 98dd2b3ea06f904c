/*!
A GPU axis's levels in a described cluster (book ch12, "Cross-node
collectives"): the NVLink node, the leaf switches of a scalable unit and
the spine, each a ring of `D_i` children of egress `W_i` with AllGather
bandwidth `D_i·W_i/(D_i−1)`; the slowest level bounds the collective
(`T = V·max_i (D_i−1)/(D_i·W_i)`). For an axis over `M` nodes of a
cluster with `u` nodes per scalable unit: leaf `D = min(M, u)`, spine
`D = ⌈M/u⌉` with a unit's uplinks `min(M, u)·W_node/oversubscription`
(ch12: 514, 413 and 17,100 GB/s for the 1,024-GPU H100 SuperPOD; 514 and
800 GB/s over exactly 2 nodes, Quiz 4 Q5).

The collective's costed time keeps one flat scale-out ring over the `M`
nodes (`V·(M−1)/(M·W_node)`); these levels say which level bounds it.
*/

use super::{levels, ring_level_bandwidth, AxisPlacement, GpuAxis, Level};
use crate::hardware::Chip;

/// The levels of `axis` on `chip`: [`levels`], with a GPU axis's
/// scale-out level split into leaf and spine when the chip describes its
/// cluster (`[cluster]`).
pub fn cluster_levels(chip: &Chip, axis: &AxisPlacement) -> Vec<Level> {
    let (AxisPlacement::Gpu(g), Some(c)) = (axis, &chip.cluster) else {
        return levels(axis);
    };
    let GpuAxis {
        size,
        per_node,
        scale_out,
        ..
    } = *g;
    let n = per_node.max(1);
    let nodes = size / n;
    let mut v: Vec<Level> = levels(axis)
        .into_iter()
        .filter(|l| !l.name.starts_with("scale-out"))
        .collect();
    if nodes <= 1 {
        return v;
    }
    let w_node = scale_out.one_way_rate().get() * n as f64;
    let per_su = c.nodes_per_su.max(1);
    let leaf = nodes.min(per_su);
    v.push(Level {
        name: format!("leaf ({} nodes of a scalable unit)", leaf),
        devices: leaf,
        bandwidth_bytes_per_s: w_node,
        wraparound: None,
        hops: leaf - 1,
        allgather_bandwidth_bytes_per_s: ring_level_bandwidth(leaf, w_node),
    });
    let units = nodes.div_ceil(per_su);
    if units > 1 {
        let w_su = leaf as f64 * w_node / c.oversubscription;
        v.push(Level {
            name: format!("spine ({units} scalable units)"),
            devices: units,
            bandwidth_bytes_per_s: w_su,
            wraparound: None,
            hops: units - 1,
            allgather_bandwidth_bytes_per_s: ring_level_bandwidth(units, w_su),
        });
    }
    v
}
