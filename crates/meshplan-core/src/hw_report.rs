/*!
The hardware report behind `meshplan hw show`: a chip's figures in SI units
and its critical intensities C/W (the book's 240, 2550, 2200, 2475…), each
recorded as a derivation step.
*/

use serde::Serialize;

use crate::hardware::{Chip, ChipKind, Profile, Wraparound};
use crate::trace::{Step, Tracer};
use crate::units::{BytesPerSec, DType, FlopsPerSec};

/// Peak dense FLOP/s per dtype (absent where the chip has no such path).
#[derive(Clone, Debug, Serialize)]
pub struct PeakReport {
    /// fp32 peak, FLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp32: Option<FlopsPerSec>,
    /// bf16 peak, FLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bf16: Option<FlopsPerSec>,
    /// fp16 peak, FLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp16: Option<FlopsPerSec>,
    /// fp8 peak, FLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp8: Option<FlopsPerSec>,
    /// int8 peak, OP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub int8: Option<FlopsPerSec>,
    /// int4 peak, OP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub int4: Option<FlopsPerSec>,
}

/// Everything `hw show` reports, SI base units (see docs/quantities.md).
#[derive(Clone, Debug, Serialize)]
pub struct HwReport {
    /// Catalog name (`NAME@book` for the book's numbers).
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// "tpu" or "gpu".
    pub kind: ChipKind,
    /// Vendor.
    pub vendor: String,
    /// "vendor" or "book".
    pub profile: Profile,
    /// Where the figures come from.
    pub source: String,
    /// Peak FLOP/s per dtype.
    pub peak_flops_per_s: PeakReport,
    /// HBM per chip, bytes.
    pub hbm_capacity_bytes: f64,
    /// HBM bandwidth per chip, bytes/s.
    pub hbm_bandwidth_bytes_per_s: BytesPerSec,
    /// One ICI link, one direction, bytes/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_link_one_way_bytes_per_s: Option<BytesPerSec>,
    /// The book's W_ici: one axis with wraparound, both directions, bytes/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_axis_bidirectional_bytes_per_s: Option<BytesPerSec>,
    /// ICI links per chip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_links_per_chip: Option<u64>,
    /// Torus dimensionality.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_torus_dims: Option<u64>,
    /// Wraparound rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_wraparound: Option<Wraparound>,
    /// Largest slice, e.g. [16, 16].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_max_slice: Option<Vec<u64>>,
    /// Chips in the largest slice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_max_slice_chips: Option<u64>,
    /// Offered slice shapes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_slice_shapes: Option<Vec<Vec<u64>>>,
    /// Per-hop latency, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ici_hop_latency_s: Option<f64>,
    /// Chips per host (TPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chips_per_host: Option<u64>,
    /// NVLink egress per GPU, one direction, bytes/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink_per_gpu_one_way_bytes_per_s: Option<BytesPerSec>,
    /// GPUs in one NVLink domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink_domain_size: Option<u64>,
    /// NVLink small-message latency, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink_latency_s: Option<f64>,
    /// "dcn", "infiniband", "ethernet".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_out_kind: Option<String>,
    /// Scale-out bandwidth per chip, one direction, bytes/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_out_per_chip_one_way_bytes_per_s: Option<BytesPerSec>,
    /// GPU: scale-out bandwidth per NVLink domain (node), one direction, bytes/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_out_per_node_one_way_bytes_per_s: Option<BytesPerSec>,
    /// Scale-out latency, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_out_latency_s: Option<f64>,
    /// Largest cluster or pod the figures apply to, chips.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_chips: Option<u64>,
    /// Host PCIe, one direction, bytes/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcie_one_way_bytes_per_s: Option<BytesPerSec>,
    /// C_bf16 / W_hbm, FLOPs per byte.
    pub critical_intensity_hbm: f64,
    /// C_int8 / W_hbm, OPs per byte (when the chip has int8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_hbm_int8: Option<f64>,
    /// C_bf16 / W_ici (axis, bidirectional), FLOPs per byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_ici: Option<f64>,
    /// C_bf16 / W_nvlink (per GPU, one way), FLOPs per byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_nvlink: Option<f64>,
    /// C_bf16 / W_scale-out (TPU: per chip; GPU: per node), FLOPs per byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_scale_out: Option<f64>,
    /// C_bf16 / W_pcie, FLOPs per byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_pcie: Option<f64>,
    /// USD per chip-hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd_per_chip_hour: Option<f64>,
    /// Where the price comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_source: Option<String>,
    /// Free-text notes (vendor vs book differences).
    pub notes: String,
}

/// One critical intensity `C / W`, recorded as a derivation step.
#[allow(clippy::too_many_arguments)] // one step's labels, symbols and values
fn intensity<T: Tracer>(
    id: &str,
    label: &str,
    formula: &str,
    c_sym: &str,
    c: FlopsPerSec,
    w_sym: &str,
    w: BytesPerSec,
    src: &str,
    tr: &mut T,
) -> f64 {
    let v: f64 = c / w;
    tr.record(|| {
        Step::new(id, label, formula)
            .bind(c_sym, c.get(), "FLOP/s")
            .bind(w_sym, w.get(), "B/s")
            .result(v, "FLOPs/B")
            .source(src)
    });
    v
}

/// Build the report for one chip; the critical intensities are recorded in `tr`.
pub fn hw_report<T: Tracer>(ch: &Chip, tr: &mut T) -> HwReport {
    let c = ch.flops(DType::Bf16);
    let hbm = intensity(
        "hw.critical_intensity_hbm",
        "Critical intensity vs HBM (critical batch, bf16)",
        "C / W_hbm",
        "C",
        c,
        "W_hbm",
        ch.hbm_bandwidth,
        "How To Scale Your Model, ch1: B_crit = C/W_hbm (240 for TPU v5e)",
        tr,
    );
    let hbm_int8 = ch.peak.int8.map(|c8| {
        intensity(
            "hw.critical_intensity_hbm_int8",
            "Critical intensity vs HBM (int8)",
            "C_int8 / W_hbm",
            "C_int8",
            c8,
            "W_hbm",
            ch.hbm_bandwidth,
            "How To Scale Your Model, ch1",
            tr,
        )
    });
    let ici = ch.ici.as_ref().map(|i| {
        intensity(
            "hw.critical_intensity_ici",
            "Critical intensity vs ICI (one axis, bidirectional)",
            "C / W_ici",
            "C",
            c,
            "W_ici",
            i.link.bidirectional_rate(),
            "How To Scale Your Model, ch3/ch5: C/W_ici (2550 for TPU v5p); W_ici = 2 × one-way link",
            tr,
        )
    });
    let nvlink = ch.nvlink.as_ref().map(|n| {
        intensity(
            "hw.critical_intensity_nvlink",
            "Critical intensity vs NVLink (per GPU, one way)",
            "C / W_nvlink",
            "C",
            c,
            "W_nvlink",
            n.per_gpu.one_way_rate(),
            "How To Scale Your Model, ch12: C/W_nvlink (2200 for H100)",
            tr,
        )
    });
    // GPUs: the book compares one GPU's C with one node's scale-out bandwidth
    // (ch12: 990e12 / 400e9 = 2475 for an 8-GPU H100 node).
    let node_bw = match (&ch.scale_out, &ch.nvlink) {
        (Some(s), Some(n)) => Some(s.per_chip.one_way_rate() * n.domain_size as f64),
        _ => None,
    };
    let scale_out = ch.scale_out.as_ref().map(|s| match node_bw {
        Some(w) => intensity(
            "hw.critical_intensity_scale_out",
            "Critical intensity vs scale-out (per node)",
            "C / W_node",
            "C",
            c,
            "W_node",
            w,
            "How To Scale Your Model, ch12: C/W_node (2475 for H100, 8 × 50 GB/s per node)",
            tr,
        ),
        None => intensity(
            "hw.critical_intensity_scale_out",
            "Critical intensity vs DCN (per chip)",
            "C / W_dcn",
            "C",
            c,
            "W_dcn",
            s.per_chip.one_way_rate(),
            "How To Scale Your Model, ch2/ch5: C/W_dcn (71,360 for TPU v5p)",
            tr,
        ),
    });
    let pcie = ch.pcie.map(|p| {
        intensity(
            "hw.critical_intensity_pcie",
            "Critical intensity vs host PCIe",
            "C / W_pcie",
            "C",
            c,
            "W_pcie",
            p.one_way_rate(),
            "How To Scale Your Model, ch2 Q3",
            tr,
        )
    });
    let pk = &ch.peak;
    HwReport {
        name: ch.name.clone(),
        display_name: ch.display_name.clone(),
        kind: ch.kind,
        vendor: ch.vendor.clone(),
        profile: ch.profile,
        source: ch.source.clone(),
        peak_flops_per_s: PeakReport {
            fp32: pk.fp32,
            bf16: pk.bf16,
            fp16: pk.fp16,
            fp8: pk.fp8,
            int8: pk.int8,
            int4: pk.int4,
        },
        hbm_capacity_bytes: ch.hbm_capacity.get(),
        hbm_bandwidth_bytes_per_s: ch.hbm_bandwidth,
        ici_link_one_way_bytes_per_s: ch.ici.as_ref().map(|i| i.link.one_way_rate()),
        ici_axis_bidirectional_bytes_per_s: ch.ici.as_ref().map(|i| i.link.bidirectional_rate()),
        ici_links_per_chip: ch.ici.as_ref().map(|i| i.links_per_chip),
        ici_torus_dims: ch.ici.as_ref().map(|i| i.torus_dims),
        ici_wraparound: ch.ici.as_ref().map(|i| i.wraparound),
        ici_max_slice: ch.ici.as_ref().map(|i| i.max_slice.clone()),
        ici_max_slice_chips: ch.ici.as_ref().map(|i| i.max_slice_chips()),
        ici_slice_shapes: ch.ici.as_ref().map(|i| i.slice_shapes.clone()),
        ici_hop_latency_s: ch.ici.as_ref().map(|i| i.hop_latency.get()),
        chips_per_host: ch.ici.as_ref().map(|i| i.chips_per_host),
        nvlink_per_gpu_one_way_bytes_per_s: ch.nvlink.as_ref().map(|n| n.per_gpu.one_way_rate()),
        nvlink_domain_size: ch.nvlink.as_ref().map(|n| n.domain_size),
        nvlink_latency_s: ch.nvlink.as_ref().map(|n| n.latency.get()),
        scale_out_kind: ch.scale_out.as_ref().map(|s| s.kind.clone()),
        scale_out_per_chip_one_way_bytes_per_s: ch
            .scale_out
            .as_ref()
            .map(|s| s.per_chip.one_way_rate()),
        scale_out_per_node_one_way_bytes_per_s: node_bw,
        scale_out_latency_s: ch.scale_out.as_ref().map(|s| s.latency.get()),
        max_chips: ch.max_chips(),
        pcie_one_way_bytes_per_s: ch.pcie.map(|p| p.one_way_rate()),
        critical_intensity_hbm: hbm,
        critical_intensity_hbm_int8: hbm_int8,
        critical_intensity_ici: ici,
        critical_intensity_nvlink: nvlink,
        critical_intensity_scale_out: scale_out,
        critical_intensity_pcie: pcie,
        usd_per_chip_hour: ch.usd_per_chip_hour,
        price_source: ch.price_source.clone(),
        notes: ch.notes.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{NoTrace, Recorder};
    use crate::Catalog;

    #[test]
    fn book_critical_intensities() {
        let c = Catalog::builtin();
        // ch1: 1.97e14 / 8.2e11 = 240.2; ch3: 1.97e14 / 9e10 = 2189
        let r = hw_report(c.chip("tpu-v5e@book").unwrap(), &mut NoTrace);
        assert!((r.critical_intensity_hbm - 240.24).abs() < 0.01);
        assert!((r.critical_intensity_ici.unwrap() - 2188.9).abs() < 0.1);
        // ch5: 4.59e14 / 1.8e11 = 2550
        let r = hw_report(c.chip("tpu-v5p@book").unwrap(), &mut NoTrace);
        assert!((r.critical_intensity_ici.unwrap() - 2550.0).abs() < 0.5);
        // ch12: H100 990e12 / 450e9 = 2200 in node, / 400e9 = 2475 across nodes
        let mut rec = Recorder::default();
        let r = hw_report(c.chip("h100@book").unwrap(), &mut rec);
        let nv = r.critical_intensity_nvlink.unwrap();
        let so = r.critical_intensity_scale_out.unwrap();
        assert!((nv / 2200.0 - 1.0).abs() < 0.01, "{nv}");
        assert!((so / 2475.0 - 1.0).abs() < 0.01, "{so}");
        assert!(rec.find("hw.critical_intensity_nvlink").is_some());
    }
}
