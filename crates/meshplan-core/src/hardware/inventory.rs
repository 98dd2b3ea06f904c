/*!
A GPU cluster's network inventory (book ch12, "Networking"): what one
node's NVLink and NVSwitches carry, its bisection, the cluster's switch
count and bisection, the AllGather / AllReduce bandwidth of the whole tree
(the slowest of [`super::network::levels`]), with in-network reduction
(SHARP) where every level has it, and the data-parallel bandwidth a plan
gets when its model-parallel groups span nodes.

Every figure is one direction unless its name says bisection (both
directions, as ch12 Quiz 2 Q2 counts it), and each is recorded as a
derivation step `hw.network.<key>`.
*/

use serde::Serialize;

use super::network::{Cluster, NetworkLevel};
use super::Chip;
use crate::trace::{Step, Tracer};
use crate::units::DType;

/// `hw show`'s `network`: the cluster's totals (GPUs only).
#[derive(Clone, Debug, Default, Serialize)]
pub struct NetworkInventory {
    /// D_node: GPUs in one NVLink domain.
    pub gpus_per_node: u64,
    /// D_node · W_gpu: what the node's GPUs put into NVLink, one way
    /// (ch12 Quiz 2 Q1: 8 · 450e9 = 3.6 TB/s).
    pub node_nvlink_bandwidth_bytes_per_s: f64,
    /// NVSwitch chips per node, when the cluster design gives them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvswitches_per_node: Option<u64>,
    /// NVLink ports per NVSwitch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvswitch_ports: Option<u64>,
    /// Switches × ports × port bandwidth: what the node's NVSwitches could
    /// carry, one way (ch12: 4 · 64 · 25e9 = 6.4 TB/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_nvswitch_bandwidth_bytes_per_s: Option<f64>,
    /// min(GPUs' NVLink, NVSwitches): the node's peak (ch12: 3.6 TB/s).
    pub node_bandwidth_bytes_per_s: f64,
    /// 2 · ⌊D_node/2⌋ · W_gpu: bytes/s across an even split of the node,
    /// both directions (ch12 Quiz 2 Q2: 3.6 TB/s).
    pub node_bisection_bytes_per_s: f64,
    /// D_node · W_nic: one node's scale-out egress, one way (400 GB/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_egress_bytes_per_s: Option<f64>,
    /// Nodes in the cluster design.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_nodes: Option<u64>,
    /// GPUs in the cluster design.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_chips: Option<u64>,
    /// NVSwitches + leaf + spine switches (ch12: 512 + 32 + 16 = 560).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switches_total: Option<u64>,
    /// 2 · ⌊nodes/2⌋ · W_node / oversubscription: across an even split of
    /// the cluster's nodes, both directions (ch12 Quiz 3 Q1: 400 GB/s per
    /// node each way → 51.2 TB/s for 128 nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_bisection_bytes_per_s: Option<f64>,
    /// min over levels of D·W/(D−1): an AllGather or ReduceScatter over the
    /// whole network (ch12: min(514, 413, 17,100) = 413 GB/s).
    pub allgather_bandwidth_bytes_per_s: f64,
    /// Half of it: an AllReduce as ReduceScatter + AllGather, no SHARP.
    pub allreduce_bandwidth_bytes_per_s: f64,
    /// min over levels of W when every level reduces in the network: T =
    /// V/W (ch12: "around 400GB/s"; measured gains are ~30 %, not 2×).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharp_allreduce_bandwidth_bytes_per_s: Option<f64>,
    /// M: GPUs in one model-parallel group (TP × PP × EP …; 1 = pure DP).
    pub model_parallel_gpus: u64,
    /// The book's W_collective for the data-parallel reduction when each
    /// replica spans M GPUs: min(W_gpu · min(M, D_node), W_node · max(M,
    /// D_node)/D_node) (ch12 Quiz 5 Q2: M = 64 → 8 · 400 = 3200 GB/s).
    pub dp_bandwidth_bytes_per_s: f64,
    /// C / W_dp: tokens per GPU for a compute-bound DP reduction (2475 for
    /// M ≤ 8 on H100, 309 for M = 64).
    pub dp_critical_batch_per_gpu: f64,
}

const CH12: &str = "How To Scale Your Model, ch12 (GPUs), Networking";

/// Record `v` as step `hw.network.<id>` with its bindings.
fn rec<T: Tracer>(
    tr: &mut T,
    id: &str,
    label: &str,
    formula: &str,
    binds: &[(&str, f64, &str)],
    v: f64,
    unit: &str,
) -> f64 {
    tr.record(|| {
        let mut s = Step::new(&format!("hw.network.{id}"), label, formula);
        for (sym, val, u) in binds {
            s = s.bind(sym, *val, u);
        }
        s.result(v, unit).source(CH12)
    });
    v
}

/// The node-level figures: NVLink total, NVSwitch capacity, their min and
/// the bisection.
fn node_figures<T: Tracer>(
    d: u64,
    w_gpu: f64,
    c: Option<&Cluster>,
    tr: &mut T,
) -> (f64, Option<f64>, f64, f64) {
    let nvlink = rec(
        tr,
        "node_nvlink_bandwidth_bytes_per_s",
        "A node's NVLink bandwidth (its GPUs' egress)",
        "D_node · W_gpu",
        &[("D_node", d as f64, ""), ("W_gpu", w_gpu, "B/s")],
        d as f64 * w_gpu,
        "B/s",
    );
    let switch = c.and_then(|c| {
        let (n, p, w) = (
            c.nvswitches_per_node?,
            c.nvswitch_ports?,
            c.nvlink_port_bandwidth?,
        );
        Some(rec(
            tr,
            "node_nvswitch_bandwidth_bytes_per_s",
            "A node's NVSwitch capacity",
            "N_switch · ports · W_port",
            &[
                ("N_switch", n as f64, ""),
                ("ports", p as f64, ""),
                ("W_port", w.get(), "B/s"),
            ],
            n as f64 * p as f64 * w.get(),
            "B/s",
        ))
    });
    let peak = match switch {
        Some(sw) => rec(
            tr,
            "node_bandwidth_bytes_per_s",
            "A node's peak bandwidth (the smaller of GPUs and switches)",
            "min(D_node · W_gpu, N_switch · ports · W_port)",
            &[
                ("D_node · W_gpu", nvlink, "B/s"),
                ("N_switch · ports · W_port", sw, "B/s"),
            ],
            sw.min(nvlink),
            "B/s",
        ),
        None => rec(
            tr,
            "node_bandwidth_bytes_per_s",
            "A node's peak bandwidth (its GPUs' NVLink; no switch figures given)",
            "D_node · W_gpu",
            &[("D_node", d as f64, ""), ("W_gpu", w_gpu, "B/s")],
            nvlink,
            "B/s",
        ),
    };
    let half = (d / 2) as f64;
    let bisection = rec(
        tr,
        "node_bisection_bytes_per_s",
        "A node's bisection bandwidth (both directions)",
        "2 · ⌊D_node/2⌋ · W_gpu",
        &[("D_node", d as f64, ""), ("W_gpu", w_gpu, "B/s")],
        2.0 * half * w_gpu,
        "B/s",
    );
    (nvlink, switch, peak, bisection)
}

/// The cluster design's nodes, chips, switches and bisection.
fn cluster_figures<T: Tracer>(
    d: u64,
    w_node: Option<f64>,
    c: &Cluster,
    tr: &mut T,
) -> (u64, u64, Option<u64>, Option<f64>) {
    let nodes = c.nodes_per_su * c.sus;
    let switches = c.nvswitches_per_node.map(|n| {
        let total = n * nodes + c.leaf_switches_per_su * c.sus + c.spine_switches;
        rec(
            tr,
            "switches_total",
            "Switches in the cluster",
            "N_switch · nodes + N_leaf · SUs + N_spine",
            &[
                ("N_switch", n as f64, ""),
                ("nodes", nodes as f64, ""),
                ("N_leaf", c.leaf_switches_per_su as f64, ""),
                ("SUs", c.sus as f64, ""),
                ("N_spine", c.spine_switches as f64, ""),
            ],
            total as f64,
            "",
        );
        total
    });
    let bisection = w_node.map(|w| {
        rec(
            tr,
            "cluster_bisection_bytes_per_s",
            "The cluster's bisection bandwidth (both directions)",
            "2 · ⌊nodes/2⌋ · W_node / oversubscription",
            &[
                ("nodes", nodes as f64, ""),
                ("W_node", w, "B/s"),
                ("oversubscription", c.oversubscription, ""),
            ],
            2.0 * (nodes / 2) as f64 * w / c.oversubscription,
            "B/s",
        )
    });
    (nodes, nodes * d, switches, bisection)
}

/// The whole tree's AllGather, AllReduce and SHARP AllReduce bandwidths:
/// the slowest level's.
fn tree_figures<T: Tracer>(levels: &[NetworkLevel], tr: &mut T) -> (f64, f64, Option<f64>) {
    let ag = levels
        .iter()
        .map(|l| l.allgather_bandwidth_bytes_per_s)
        .fold(f64::INFINITY, f64::min);
    let binds: Vec<(String, f64)> = levels
        .iter()
        .map(|l| {
            (
                format!("D·W/(D−1) {}", l.name),
                l.allgather_bandwidth_bytes_per_s,
            )
        })
        .collect();
    let b: Vec<(&str, f64, &str)> = binds.iter().map(|(s, v)| (s.as_str(), *v, "B/s")).collect();
    rec(
        tr,
        "allgather_bandwidth_bytes_per_s",
        "AllGather / ReduceScatter bandwidth of the whole network (slowest level)",
        "min_i D_i·W_i/(D_i − 1)",
        &b,
        ag,
        "B/s",
    );
    let ar = rec(
        tr,
        "allreduce_bandwidth_bytes_per_s",
        "AllReduce bandwidth without in-network reduction (ReduceScatter + AllGather)",
        "min_i D_i·W_i/(D_i − 1) / 2",
        &[("AG", ag, "B/s")],
        ag / 2.0,
        "B/s",
    );
    let sharp = levels.iter().all(|l| l.in_network_reduction).then(|| {
        let w = levels
            .iter()
            .map(|l| l.child_egress_bytes_per_s)
            .fold(f64::INFINITY, f64::min);
        rec(
            tr,
            "sharp_allreduce_bandwidth_bytes_per_s",
            "AllReduce bandwidth with in-network reduction (SHARP): T = V / W",
            "min_i W_i",
            &[("min W", w, "B/s")],
            w,
            "B/s",
        )
    });
    (ag, ar, sharp)
}

/// The book's W_collective for a data-parallel reduction whose replicas
/// each span `m` GPUs, and C over it.
fn dp_figures<T: Tracer>(
    ch: &Chip,
    d: u64,
    w_gpu: f64,
    w_node: Option<f64>,
    m: u64,
    tr: &mut T,
) -> (f64, f64) {
    let in_node = w_gpu * m.min(d) as f64;
    let w = match w_node {
        Some(wn) => in_node.min(wn * m.max(d) as f64 / d as f64),
        None => in_node,
    };
    let label = "Data-parallel bandwidth when each model-parallel group spans M GPUs";
    match w_node {
        Some(wn) => rec(
            tr,
            "dp_bandwidth_bytes_per_s",
            label,
            "min(W_gpu · min(M, D_node), W_node · max(M, D_node) / D_node)",
            &[
                ("W_gpu", w_gpu, "B/s"),
                ("M", m as f64, ""),
                ("D_node", d as f64, ""),
                ("W_node", wn, "B/s"),
            ],
            w,
            "B/s",
        ),
        // no scale-out network: the data-parallel ring stays in the node
        None => rec(
            tr,
            "dp_bandwidth_bytes_per_s",
            label,
            "W_gpu · min(M, D_node)",
            &[
                ("W_gpu", w_gpu, "B/s"),
                ("M", m as f64, ""),
                ("D_node", d as f64, ""),
            ],
            w,
            "B/s",
        ),
    };
    let c = ch.flops(DType::Bf16).get();
    let b = rec(
        tr,
        "dp_critical_batch_per_gpu",
        "Tokens per GPU for a compute-bound data-parallel reduction",
        "C / W_dp",
        &[("C", c, "FLOP/s"), ("W_dp", w, "B/s")],
        c / w,
        "tokens",
    );
    (w, b)
}

/// The inventory of a GPU's network for model-parallel groups of
/// `model_parallel` GPUs; `None` for a TPU.
pub fn inventory<T: Tracer>(
    ch: &Chip,
    levels: &[NetworkLevel],
    model_parallel: u64,
    tr: &mut T,
) -> Option<NetworkInventory> {
    let nv = ch.nvlink.as_ref()?;
    let d = nv.domain_size;
    let w_gpu = nv.per_gpu.one_way_rate().get();
    let c = ch.cluster.as_ref();
    let (nvlink, switch, peak, bisection) = node_figures(d, w_gpu, c, tr);
    let w_node = ch
        .scale_out
        .as_ref()
        .map(|s| s.per_chip.one_way_rate().get() * d as f64);
    let cluster = c.map(|c| cluster_figures(d, w_node, c, tr));
    let (ag, ar, sharp) = tree_figures(levels, tr);
    let m = model_parallel.max(1);
    let (dp, dp_batch) = dp_figures(ch, d, w_gpu, w_node, m, tr);
    Some(NetworkInventory {
        gpus_per_node: d,
        node_nvlink_bandwidth_bytes_per_s: nvlink,
        nvswitches_per_node: c.and_then(|c| c.nvswitches_per_node),
        nvswitch_ports: c.and_then(|c| c.nvswitch_ports),
        node_nvswitch_bandwidth_bytes_per_s: switch,
        node_bandwidth_bytes_per_s: peak,
        node_bisection_bytes_per_s: bisection,
        node_egress_bytes_per_s: w_node,
        cluster_nodes: cluster.map(|x| x.0),
        cluster_chips: cluster.map(|x| x.1),
        switches_total: cluster.and_then(|x| x.2),
        cluster_bisection_bytes_per_s: cluster.and_then(|x| x.3),
        allgather_bandwidth_bytes_per_s: ag,
        allreduce_bandwidth_bytes_per_s: ar,
        sharp_allreduce_bandwidth_bytes_per_s: sharp,
        model_parallel_gpus: m,
        dp_bandwidth_bytes_per_s: dp,
        dp_critical_batch_per_gpu: dp_batch,
    })
}

impl NetworkInventory {
    /// Label/value rows for `hw show`; `link` names the scale-up link
    /// ("NVLink", "Infinity Fabric").
    pub fn fields(&self, link: &str) -> Vec<(String, String)> {
        use crate::units::{fmt_int, fmt_si, sig4};
        use crate::view::field;
        let bw = |v: f64| fmt_si(v, "B/s");
        let mut rows = vec![field(
            &format!("node {link} (D_node · W_gpu)"),
            format!(
                "{} GPUs × {} = {}",
                self.gpus_per_node,
                bw(self.node_nvlink_bandwidth_bytes_per_s / self.gpus_per_node.max(1) as f64),
                bw(self.node_nvlink_bandwidth_bytes_per_s)
            ),
        )];
        if let (Some(n), Some(p), Some(s)) = (
            self.nvswitches_per_node,
            self.nvswitch_ports,
            self.node_nvswitch_bandwidth_bytes_per_s,
        ) {
            rows.push(field(
                "node NVSwitches",
                format!("{n} × {p} ports = {}", bw(s)),
            ));
        }
        rows.push(field("node peak", bw(self.node_bandwidth_bytes_per_s)));
        rows.push(field(
            "node bisection (both ways)",
            bw(self.node_bisection_bytes_per_s),
        ));
        if let Some(w) = self.node_egress_bytes_per_s {
            rows.push(field("node scale-out egress (W_node)", bw(w)));
        }
        if let (Some(n), Some(c)) = (self.cluster_nodes, self.cluster_chips) {
            rows.push(field(
                "cluster design",
                format!("{} nodes, {} GPUs", fmt_int(n), fmt_int(c)),
            ));
        }
        if let Some(s) = self.switches_total {
            rows.push(field("switches in all", fmt_int(s)));
        }
        if let Some(b) = self.cluster_bisection_bytes_per_s {
            rows.push(field("cluster bisection (both ways)", bw(b)));
        }
        rows.push(field(
            "AllGather / ReduceScatter (slowest level)",
            bw(self.allgather_bandwidth_bytes_per_s),
        ));
        rows.push(field(
            "AllReduce (no SHARP)",
            bw(self.allreduce_bandwidth_bytes_per_s),
        ));
        if let Some(s) = self.sharp_allreduce_bandwidth_bytes_per_s {
            rows.push(field("AllReduce with SHARP (T = V/W)", bw(s)));
        }
        rows.push(field(
            &format!(
                "DP bandwidth, model-parallel groups of {} GPU{}",
                self.model_parallel_gpus,
                if self.model_parallel_gpus == 1 {
                    ""
                } else {
                    "s"
                }
            ),
            format!(
                "{} → C/W_dp = {} tokens per GPU",
                bw(self.dp_bandwidth_bytes_per_s),
                sig4(self.dp_critical_batch_per_gpu)
            ),
        ));
        rows
    }
}
