/*!
The hardware report behind `meshplan hw show`: a chip's figures in SI units
and its critical intensities C/W (the book's 240, 2550, 2200, 2475…), each
recorded as a derivation step.
*/

use serde::Serialize;

use crate::hardware::anatomy::AnatomyReport;
use crate::hardware::fmt_shape;
use crate::hardware::inventory::{inventory, NetworkInventory};
use crate::hardware::network::{levels, slices, NetworkLevel, SliceInventory};
use crate::hardware::{Chip, ChipKind, Profile, Wraparound};
use crate::trace::{Step, Tracer};
use crate::units::{fmt_int, fmt_si, sig4, Bytes, BytesPerSec, DType, FlopsPerSec, Seconds};
use crate::view::{field, Doc, Render, Table};

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
    /// fp4 peak, FLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp4: Option<FlopsPerSec>,
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
    /// C_fp8 / W_hbm (when the chip has fp8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_hbm_fp8: Option<f64>,
    /// C_fp4 / W_hbm (when the chip has fp4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_hbm_fp4: Option<f64>,
    /// Vector peak / W_hbm: element-wise ops are memory-bound below it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_vector: Option<f64>,
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
    /// Inside the chip: cores, units, clocks, on-chip memories.
    pub anatomy: AnatomyReport,
    /// Offered TPU slices with their totals.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<SliceInventory>,
    /// Network levels: NVLink node, leaf, spine (GPU); ICI, DCN (TPU).
    pub network_levels: Vec<NetworkLevel>,
    /// GPU: the network's totals (node, cluster, whole-tree collectives, DP
    /// bandwidth for the query's model-parallel group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkInventory>,
    /// The chip's built-in efficiency profile: its microbenchmark curves
    /// and the pricer's figures, each with its source (`None` for the
    /// book's figures and chips without a profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efficiency_profile: Option<ProfileCurves>,
}

/// What `hw show` lists of a chip's efficiency profile
/// (`data/profiles/CHIP.toml`): the microbenchmark curves, and the figures
/// the calibrated pricer applies on the chip's own network, with sources.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileCurves {
    /// The profile's description.
    pub source: String,
    /// Network the figures describe.
    pub network: String,
    /// The curves (GEMM per dtype, attention, collectives per level).
    pub curves: crate::fidelity::profile::ChipCurves,
    /// The pricer's figures: (field, value, source).
    pub figures: Vec<ProfileFigure>,
}

/// One pricer figure of a profile.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileFigure {
    /// Field name (as in the profile TOML).
    pub field: String,
    /// Value (fractions, seconds).
    pub value: f64,
    /// Its `[sources]` entry.
    pub source: String,
}

/// The pricer figures `hw show` lists (compute, memory, collectives).
const SHOWN: [crate::fidelity::profile::Param; 7] = {
    use crate::fidelity::profile::Param as P;
    [
        P::MatmulEfficiency,
        P::MatmulHalfDim,
        P::AttentionEfficiency,
        P::HbmEfficiency,
        P::IntraNodeEfficiency,
        P::CollectiveLatencyS,
        P::InterNodeEfficiency,
    ]
};

impl ProfileCurves {
    /// The built-in profile of `ch` on its own scale-out network; `None`
    /// for the book's figures (`NAME@book`) and chips without one.
    /// The GEMM efficiency the pricer applies to a large (8192³) GEMM is
    /// recorded in `tr` (`hw.profile.gemm_8192`).
    pub fn of<T: Tracer>(ch: &Chip, tr: &mut T) -> Option<ProfileCurves> {
        if ch.profile == Profile::Book {
            return None;
        }
        let base = crate::fidelity::EfficiencyProfile::builtin(&ch.name)?;
        let net = ch.scale_out.as_ref().map_or("", |s| s.kind.as_str());
        let p = base.for_network(net);
        const X: f64 = 8192.0;
        let e = crate::step::calibrated::gemm_efficiency(&p, X, X, X);
        tr.record(|| {
            Step::new(
                "hw.profile.gemm_8192",
                "GEMM efficiency the pricer applies at m = n = k = 8192 (bf16 curve × stack share)",
                "e = e_max · s · (x/⌈x⌉₁₂₈) · x/(x + x½), x = min(m, n, k)",
            )
            .bind("e_max", p.matmul_efficiency, "")
            .bind("s", p.matmul_stack_share, "")
            .bind("x½", p.matmul_half_dim, "")
            .bind("x", X, "")
            .result(e, "")
            .source(
                p.sources
                    .get("matmul_efficiency")
                    .map_or("", String::as_str),
            )
        });
        let figures = SHOWN
            .iter()
            .map(|&q| ProfileFigure {
                field: q.name().to_string(),
                value: p.param(q),
                source: p.sources.get(q.name()).cloned().unwrap_or_default(),
            })
            .collect();
        Some(ProfileCurves {
            source: base.source.clone(),
            network: p.network.clone(),
            curves: p.curves.clone().unwrap_or_default(),
            figures,
        })
    }

    /// The text view: one line per curve and figure, with its source.
    fn lines(&self, d: &mut Doc) {
        d.line(format!(
            "Efficiency profile (data/profiles, network {}): {}",
            if self.network.is_empty() {
                "-"
            } else {
                &self.network
            },
            self.source
        ));
        let mut rows = Vec::new();
        for g in &self.curves.gemm {
            rows.push(field(
                &format!("GEMM {} e_max, x½", g.dtype),
                format!(
                    "{:.3} of peak, x½ {:.1} ({})",
                    g.efficiency, g.half_dim, g.source
                ),
            ));
        }
        for g in &self.curves.grouped_gemm {
            rows.push(field(
                &format!("grouped GEMM (MoE) {} e_max, x½", g.dtype),
                format!(
                    "{:.3} of peak, x½ {:.1} ({})",
                    g.efficiency, g.half_dim, g.source
                ),
            ));
        }
        if let Some(a) = &self.curves.attention {
            rows.push(field(
                "attention kernel",
                format!("{:.3} of bf16 peak ({})", a.efficiency, a.source),
            ));
        }
        for c in &self.curves.collectives {
            rows.push(field(
                &format!("{} {} ({} ranks)", c.level, c.collective, c.ranks),
                format!(
                    "bus {:.0} GB/s, α {:.1} µs ({})",
                    c.busbw_gbs,
                    c.latency_s * 1e6,
                    c.source
                ),
            ));
        }
        for f in &self.figures {
            rows.push(field(&f.field, format!("{} ({})", sig4(f.value), f.source)));
        }
        d.fields(rows);
    }
}

/// What `hw show` is asked beyond the chip.
#[derive(Clone, Copy, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HwQuery {
    /// GPUs in one model-parallel group (TP × PP × EP …) for the
    /// data-parallel bandwidth; 1 (pure data parallelism) when absent.
    #[serde(default)]
    pub model_parallel: Option<u64>,
}

impl HwQuery {
    /// Check the query against the chip: a model-parallel group is at
    /// least one GPU, on a GPU.
    pub fn validate(&self, ch: &Chip) -> crate::Result<()> {
        match self.model_parallel {
            Some(0) => Err(crate::Error::Invalid(
                "--model-parallel must be at least 1 GPU".into(),
            )),
            Some(_) if ch.nvlink.is_none() => Err(crate::Error::Invalid(format!(
                "--model-parallel applies to GPU clusters; {} is a TPU (see its slices and network levels)",
                ch.name
            ))),
            _ => Ok(()),
        }
    }
}

/// Build the report for one chip and query; the derived figures are
/// recorded in `tr`.
pub fn hw_report_for<T: Tracer>(ch: &Chip, q: &HwQuery, tr: &mut T) -> crate::Result<HwReport> {
    q.validate(ch)?;
    Ok(build(ch, q.model_parallel.unwrap_or(1), tr))
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

/// C_fp8/W_hbm, C_fp4/W_hbm and the vector units' C/W_hbm, each recorded.
fn low_precision_and_vector<T: Tracer>(
    ch: &Chip,
    tr: &mut T,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let mut low = |d: DType, id: &str| {
        ch.peak.get(d).map(|c8| {
            intensity(
                id,
                &format!("Critical intensity vs HBM ({d})"),
                &format!("C_{d} / W_hbm"),
                &format!("C_{d}"),
                c8,
                "W_hbm",
                ch.hbm_bandwidth,
                "How To Scale Your Model, ch1, ch7 (B_crit for low-precision weights and FLOPs)",
                tr,
            )
        })
    };
    let hbm_fp8 = low(DType::Fp8, "hw.critical_intensity_hbm_fp8");
    let hbm_fp4 = low(DType::Fp4, "hw.critical_intensity_hbm_fp4");
    let vector = ch.vector_peak().map(|v| {
        intensity(
            "hw.critical_intensity_vector",
            "Critical intensity of the vector units (VPU / CUDA cores) vs HBM",
            "C_vector / W_hbm",
            "C_vector",
            v,
            "W_hbm",
            ch.hbm_bandwidth,
            "How To Scale Your Model, ch1 footnote (v5p VPU ≈ 3 per core), ch12 (H100 CUDA cores ≈ 10)",
            tr,
        )
    });
    (hbm_fp8, hbm_fp4, vector)
}

/// The scale-out bandwidth per node (GPUs) and C/W over it (GPUs: per
/// node; TPUs: DCN per chip), recorded.
fn scale_out_intensity<T: Tracer>(
    ch: &Chip,
    c: FlopsPerSec,
    tr: &mut T,
) -> (Option<BytesPerSec>, Option<f64>) {
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
    (node_bw, scale_out)
}

/// Build the report for one chip (pure data parallelism for the DP
/// bandwidth); the derived figures are recorded in `tr`.
pub fn hw_report<T: Tracer>(ch: &Chip, tr: &mut T) -> HwReport {
    build(ch, 1, tr)
}

/// The report with model-parallel groups of `m` GPUs.
fn build<T: Tracer>(ch: &Chip, m: u64, tr: &mut T) -> HwReport {
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
    let (hbm_fp8, hbm_fp4, vector) = low_precision_and_vector(ch, tr);
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
    let (node_bw, scale_out) = scale_out_intensity(ch, c, tr);
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
    let levels = levels(ch);
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
            fp4: pk.fp4,
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
        critical_intensity_hbm_fp8: hbm_fp8,
        critical_intensity_hbm_fp4: hbm_fp4,
        critical_intensity_vector: vector,
        critical_intensity_ici: ici,
        critical_intensity_nvlink: nvlink,
        critical_intensity_scale_out: scale_out,
        critical_intensity_pcie: pcie,
        usd_per_chip_hour: ch.usd_per_chip_hour,
        price_source: ch.price_source.clone(),
        notes: ch.notes.clone(),
        anatomy: AnatomyReport::of(ch, tr),
        efficiency_profile: ProfileCurves::of(ch, tr),
        slices: slices(ch),
        network: inventory(ch, &levels, m, tr),
        network_levels: levels,
    }
}

fn wrap_rule(w: Wraparound) -> &'static str {
    match w {
        Wraparound::Axis16 => "an axis wraps iff its size is 16 (full pod width)",
        Wraparound::FullCube => "axes wrap only in slices of whole 4x4x4 cubes",
        Wraparound::Always => "every axis wraps",
        Wraparound::Never => "no axis wraps",
    }
}

fn ci(v: f64) -> String {
    format!("{} FLOPs/B", fmt_int(v.round().max(0.0) as u64))
}

impl HwReport {
    fn compute_fields(&self) -> Vec<(String, String)> {
        let p = &self.peak_flops_per_s;
        let mut rows = Vec::new();
        for (d, v) in [
            ("fp32", p.fp32),
            ("bf16", p.bf16),
            ("fp16", p.fp16),
            ("fp8", p.fp8),
            ("int8", p.int8),
            ("int4", p.int4),
            ("fp4", p.fp4),
        ] {
            if let Some(c) = v {
                rows.push(field(&format!("peak {d} (C)"), c));
            }
        }
        rows.push(field(
            "HBM capacity",
            Bytes::new(self.hbm_capacity_bytes).both(),
        ));
        rows.push(field(
            "HBM bandwidth (W_hbm)",
            self.hbm_bandwidth_bytes_per_s,
        ));
        rows
    }

    fn ici_fields(&self) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        if let (Some(l), Some(b)) = (
            self.ici_link_one_way_bytes_per_s,
            self.ici_axis_bidirectional_bytes_per_s,
        ) {
            rows.push(field("ICI link, one way", format!("{l} per link")));
            rows.push(field(
                "ICI axis, bidirectional (W_ici)",
                format!("{b} (book's per-axis figure = 2 × one-way link)"),
            ));
        }
        let opt = |rows: &mut Vec<(String, String)>, k: &str, v: Option<String>| {
            if let Some(v) = v {
                rows.push(field(k, v));
            }
        };
        opt(
            &mut rows,
            "ICI links per chip",
            self.ici_links_per_chip.map(|x| x.to_string()),
        );
        opt(
            &mut rows,
            "torus dims",
            self.ici_torus_dims.map(|x| x.to_string()),
        );
        opt(
            &mut rows,
            "wraparound",
            self.ici_wraparound.map(|w| wrap_rule(w).to_string()),
        );
        if let (Some(s), Some(n)) = (&self.ici_max_slice, self.ici_max_slice_chips) {
            rows.push(field(
                "max slice",
                format!("{} ({} chips)", fmt_shape(s), fmt_int(n)),
            ));
        }
        opt(
            &mut rows,
            "slice shapes",
            self.ici_slice_shapes
                .as_ref()
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.iter()
                        .map(|s| fmt_shape(s))
                        .collect::<Vec<_>>()
                        .join(", ")
                }),
        );
        opt(
            &mut rows,
            "ICI hop latency",
            self.ici_hop_latency_s.map(|x| Seconds::new(x).to_string()),
        );
        opt(
            &mut rows,
            "chips per host",
            self.chips_per_host.map(|x| x.to_string()),
        );
        rows
    }

    fn gpu_network_fields(&self) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        if let Some(w) = self.nvlink_per_gpu_one_way_bytes_per_s {
            rows.push(field(
                &format!(
                    "{} per GPU, one way (W_{})",
                    self.scale_up_name(),
                    self.scale_up_name().to_lowercase()
                ),
                w,
            ));
        }
        if let Some(n) = self.nvlink_domain_size {
            rows.push(field(
                &format!("{} domain", self.scale_up_name()),
                format!("{n} GPUs"),
            ));
        }
        if let Some(l) = self.nvlink_latency_s {
            rows.push(field(
                &format!("{} latency", self.scale_up_name()),
                Seconds::new(l),
            ));
        }
        if let (Some(k), Some(w)) = (
            &self.scale_out_kind,
            self.scale_out_per_chip_one_way_bytes_per_s,
        ) {
            rows.push(field(&format!("scale-out ({k}) per chip, one way"), w));
        }
        if let Some(w) = self.scale_out_per_node_one_way_bytes_per_s {
            rows.push(field("scale-out per node, one way", w));
        }
        if let Some(l) = self.scale_out_latency_s {
            rows.push(field("scale-out latency", Seconds::new(l)));
        }
        if let Some(m) = self.max_chips {
            rows.push(field(
                "max chips (pod / cluster)",
                format!("{} chips", fmt_int(m)),
            ));
        }
        if let Some(p) = self.pcie_one_way_bytes_per_s {
            rows.push(field("host PCIe, one way", p));
        }
        rows
    }

    /// The scale-up link's name: NVLink on NVIDIA GPUs, Infinity Fabric on
    /// AMD ones.
    pub fn scale_up_name(&self) -> &'static str {
        if self.vendor.to_ascii_lowercase().contains("amd") {
            "Infinity Fabric"
        } else {
            "NVLink"
        }
    }

    fn intensity_fields(&self) -> Vec<(String, String)> {
        let mut rows = vec![field("C/W_hbm (bf16)", ci(self.critical_intensity_hbm))];
        let scale_out = if self.nvlink_per_gpu_one_way_bytes_per_s.is_some() {
            "C/W_scale-out (per node)"
        } else {
            "C/W_scale-out (DCN, per chip)"
        };
        let nv = format!("C/W_{}", self.scale_up_name().to_lowercase());
        for (k, v) in [
            ("C/W_hbm (int8)", self.critical_intensity_hbm_int8),
            ("C/W_hbm (fp8)", self.critical_intensity_hbm_fp8),
            ("C/W_hbm (fp4)", self.critical_intensity_hbm_fp4),
            ("C_vector/W_hbm", self.critical_intensity_vector),
            ("C/W_ici", self.critical_intensity_ici),
            (nv.as_str(), self.critical_intensity_nvlink),
            (scale_out, self.critical_intensity_scale_out),
            ("C/W_pcie", self.critical_intensity_pcie),
        ] {
            if let Some(v) = v {
                rows.push(field(k, ci(v)));
            }
        }
        rows.push(field(
            "price",
            match (self.usd_per_chip_hour, &self.price_source) {
                (Some(p), Some(s)) if !s.is_empty() => format!("${p:.2} per chip-hour ({s})"),
                (Some(p), _) => format!("${p:.2} per chip-hour"),
                _ => "-".into(),
            },
        ));
        rows
    }
}

impl Render for HwReport {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        d.title(format!("{} ({})", self.name, self.display_name));
        d.fields(vec![
            field(
                "profile",
                match self.profile {
                    Profile::Vendor => "vendor (published figures; NAME@book for the book's)",
                    Profile::Book => "book (the numbers How To Scale Your Model uses)",
                },
            ),
            field("source", &self.source),
        ]);
        d.fields(self.compute_fields());
        d.fields(self.ici_fields());
        d.fields(self.gpu_network_fields());
        d.fields(self.intensity_fields());
        let a = self.anatomy.fields();
        if !a.is_empty() {
            d.line("Inside the chip:");
            d.fields(a);
        }
        self.inventory(&mut d);
        if let Some(p) = &self.efficiency_profile {
            p.lines(&mut d);
        }
        d
    }
}

impl HwReport {
    fn inventory(&self, d: &mut Doc) {
        if !self.slices.is_empty() {
            let mut t = Table::new(
                &[
                    "slice",
                    "chips",
                    "hosts",
                    "TensorCores",
                    "peak bf16",
                    "HBM",
                    "wraparound",
                    "bisection",
                ],
                &[
                    "chips",
                    "hosts",
                    "TensorCores",
                    "peak bf16",
                    "HBM",
                    "bisection",
                ],
            );
            for s in &self.slices {
                t.row(vec![
                    fmt_shape(&s.shape),
                    fmt_int(s.chips),
                    fmt_int(s.hosts),
                    s.tensorcores.map_or(String::new(), fmt_int),
                    fmt_si(s.peak_flops_per_s, "FLOP/s"),
                    fmt_si(s.hbm_bytes, "B"),
                    s.wraparound
                        .iter()
                        .map(|w| if *w { "y" } else { "n" })
                        .collect::<Vec<_>>()
                        .join(""),
                    fmt_si(s.bisection_bytes_per_s, "B/s"),
                ]);
            }
            d.table(t.drop_empty_columns());
        }
        self.levels_table(d);
        if let Some(n) = &self.network {
            d.line("Network (one direction unless bisection):");
            d.fields(n.fields(self.scale_up_name()));
        }
    }

    fn levels_table(&self, d: &mut Doc) {
        if self.network_levels.is_empty() {
            return;
        }
        let num = [
            "children D",
            "chips",
            "child egress W",
            "switches",
            "cables D·W",
            "switch capacity",
            "AllGather D·W/(D−1)",
            "AllReduce",
            "SHARP AllReduce W",
        ];
        let mut head = vec!["level"];
        head.extend(num);
        let mut t = Table::new(&head, &num);
        let bw = |x: Option<f64>| x.map_or(String::new(), |v| fmt_si(v, "B/s"));
        for l in &self.network_levels {
            t.row(vec![
                l.name.clone(),
                l.children.map_or("any".into(), fmt_int),
                l.chips.map_or(String::new(), fmt_int),
                fmt_si(l.child_egress_bytes_per_s, "B/s"),
                l.switches.map_or(String::new(), fmt_int),
                bw(l.cable_bandwidth_bytes_per_s),
                bw(l.switch_bandwidth_bytes_per_s),
                fmt_si(l.allgather_bandwidth_bytes_per_s, "B/s"),
                fmt_si(l.allreduce_bandwidth_bytes_per_s, "B/s"),
                bw(l.sharp_allreduce_bandwidth_bytes_per_s),
            ]);
        }
        d.table(t.drop_empty_columns());
    }
}

/// The chip catalog (`hw list`).
#[derive(Clone, Debug, Serialize)]
pub struct ChipList {
    /// One report per chip.
    pub chips: Vec<HwReport>,
}

impl Render for ChipList {
    fn doc(&self) -> Doc {
        let mut t = Table::new(
            &[
                "name",
                "display name",
                "bf16 peak",
                "HBM",
                "HBM BW",
                "C/W_hbm",
                "interconnect (one way)",
                "$/chip-h",
            ],
            &["bf16 peak", "HBM", "HBM BW", "C/W_hbm", "$/chip-h"],
        );
        for r in &self.chips {
            let link = match (
                r.ici_link_one_way_bytes_per_s,
                r.nvlink_per_gpu_one_way_bytes_per_s,
            ) {
                (Some(w), _) => format!("ICI {w}/link"),
                (None, Some(w)) => format!("{} {w}/GPU", r.scale_up_name()),
                _ => "-".into(),
            };
            t.row(vec![
                r.name.clone(),
                r.display_name.clone(),
                r.peak_flops_per_s
                    .bf16
                    .map_or_else(|| "-".into(), |x| x.to_string()),
                fmt_si(r.hbm_capacity_bytes, "B"),
                r.hbm_bandwidth_bytes_per_s.to_string(),
                format!("{} FLOPs/B", sig4(r.critical_intensity_hbm)),
                link,
                r.usd_per_chip_hour
                    .map_or_else(|| "-".into(), |p| format!("${p:.2}")),
            ]);
        }
        let mut d = Doc::new();
        d.table(t).line(format!(
            "{} chips. NAME@book carries the numbers How To Scale Your Model uses. `meshplan hw show NAME` for details.",
            self.chips.len()
        ));
        d
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
