//! `meshplan hw list|show`: the chip catalog and one chip's figures.
//!
//! The chip's numbers come from `meshplan-core` ([`meshplan_core::hardware::Chip`]);
//! the derived critical intensities are the typed quotient `C / W`
//! (`FlopsPerSec / BytesPerSec`) from `meshplan_core::units`, recorded as
//! derivation steps so `--explain` shows each formula. (`hw_report` is written
//! against the core's `Tracer` so it can move into `meshplan_core::report`.)

#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::hardware::{fmt_shape, Chip, ChipKind, Profile, Wraparound};
use meshplan_core::trace::{NoTrace, Recorder, Step, Tracer};
use meshplan_core::units::{fmt_int, fmt_si, sig4, BytesPerSec, DType, FlopsPerSec};
use meshplan_core::{catalog, Catalog};
use serde::Serialize;

use crate::common::{self, ExplainFormat};

/// Hardware subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum HwCmd {
    /// List the chips in the catalog (vendor figures and the book's `@book` variants).
    List(ListArgs),
    /// Show one chip: peak FLOP/s, HBM, interconnect, critical intensities and price.
    Show(ShowArgs),
}

/// Arguments of `meshplan hw list`.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Print one JSON object (an array of chips under "chips") instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `meshplan hw show`.
#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// A catalog chip name or alias (e.g. tpu-v5e, "TPU v5p", h100); append
    /// @book (tpu-v5e@book) for the numbers the book uses; or a chip TOML file
    /// in catalog format.
    #[arg(value_name = "CHIP")]
    pub chip: String,
    /// Print one JSON object in SI base units (keys in docs/quantities.md).
    #[arg(long)]
    pub json: bool,
    /// Print the derivation of the critical intensities (C/W) in the book's symbols.
    #[arg(long)]
    pub explain: bool,
    /// Format of the --explain output.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text, value_name = "FORMAT")]
    pub explain_format: ExplainFormat,
}

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
        ici_max_slice_chips: ch.ici.as_ref().map(|i| i.max_slice.iter().product()),
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

/// Run the command.
pub fn run(c: HwCmd) -> Result<ExitCode> {
    let cat = common::user_catalog()?;
    match c {
        HwCmd::List(a) => list(&cat, &a),
        HwCmd::Show(a) => show(&cat, &a),
    }
}

fn list(cat: &Catalog, a: &ListArgs) -> Result<ExitCode> {
    let reports: Vec<HwReport> = cat
        .chips()
        .into_iter()
        .map(|ch| hw_report(ch, &mut NoTrace))
        .collect();
    if a.json {
        common::print_json(&serde_json::json!({ "chips": reports }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t: Vec<Vec<String>> = vec![[
        "name",
        "display name",
        "bf16 peak",
        "HBM",
        "HBM BW",
        "C/W_hbm",
        "interconnect (one way)",
        "$/chip-h",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    for r in &reports {
        let link = match (
            r.ici_link_one_way_bytes_per_s,
            r.nvlink_per_gpu_one_way_bytes_per_s,
        ) {
            (Some(w), _) => format!("ICI {w}/link"),
            (None, Some(w)) => format!("NVLink {w}/GPU"),
            _ => "-".into(),
        };
        t.push(vec![
            r.name.clone(),
            r.display_name.clone(),
            r.peak_flops_per_s
                .bf16
                .map(|x| x.to_string())
                .unwrap_or_else(|| "-".into()),
            fmt_si(r.hbm_capacity_bytes, "B"),
            r.hbm_bandwidth_bytes_per_s.to_string(),
            format!("{} FLOPs/B", sig4(r.critical_intensity_hbm)),
            link,
            r.usd_per_chip_hour
                .map(|p| format!("${p:.2}"))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    print!("{}", common::render_table(&t, &[2, 3, 4, 5, 7]));
    println!(
        "\n{} chips. NAME@book carries the numbers How To Scale Your Model uses. `meshplan hw show NAME` for details.",
        reports.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// A catalog name, or a chip TOML file in catalog format.
fn resolve_chip(cat: &Catalog, arg: &str) -> Result<Chip> {
    let p = std::path::Path::new(arg);
    if p.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
    {
        let src = common::read_file(p)?;
        let chips = catalog::parse_chip(&src, arg)?;
        return chips
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("{arg}: no chip in file"));
    }
    Ok(cat.chip(arg)?.clone())
}

fn show(cat: &Catalog, a: &ShowArgs) -> Result<ExitCode> {
    let ch = resolve_chip(cat, &a.chip)?;
    let (r, steps) = if a.explain {
        let mut rec = Recorder::default();
        let r = hw_report(&ch, &mut rec);
        (r, Some(rec.into_steps()))
    } else {
        (hw_report(&ch, &mut NoTrace), None)
    };
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        if let (Some(s), Some(o)) = (&steps, v.as_object_mut()) {
            o.insert("derivation".into(), serde_json::to_value(s)?);
        }
        common::print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render(&ch, &r));
    if let Some(s) = steps {
        println!("\nDerivation:");
        print!("{}", common::render_steps(&s, a.explain_format));
    }
    Ok(ExitCode::SUCCESS)
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

fn render(ch: &Chip, r: &HwReport) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |k: &str, v: String| rows.push(vec![k.to_string(), v]);
    row("chip", format!("{} ({})", r.name, r.display_name));
    row(
        "profile",
        match r.profile {
            Profile::Vendor => "vendor (published figures; NAME@book for the book's)".into(),
            Profile::Book => "book (the numbers How To Scale Your Model uses)".into(),
        },
    );
    row("source", r.source.clone());
    row("", String::new());
    for d in DType::ALL {
        if let Some(c) = ch.peak.get(d) {
            if d == DType::Fp16 && ch.peak.fp16.is_none() {
                continue;
            }
            row(&format!("peak {d} (C)"), c.to_string());
        }
    }
    row("HBM capacity", ch.hbm_capacity.both());
    row(
        "HBM bandwidth (W_hbm)",
        r.hbm_bandwidth_bytes_per_s.to_string(),
    );
    if let Some(i) = &ch.ici {
        row("", String::new());
        row(
            "ICI link, one way",
            format!("{} per link", i.link.one_way_rate()),
        );
        row(
            "ICI axis, bidirectional (W_ici)",
            format!(
                "{} (book's per-axis figure = 2 × one-way link)",
                i.link.bidirectional_rate()
            ),
        );
        row("ICI links per chip", i.links_per_chip.to_string());
        row("torus dims", i.torus_dims.to_string());
        row("wraparound", wrap_rule(i.wraparound).into());
        row(
            "max slice",
            format!(
                "{} ({} chips)",
                fmt_shape(&i.max_slice),
                fmt_int(i.max_slice.iter().product())
            ),
        );
        if !i.slice_shapes.is_empty() {
            row(
                "slice shapes",
                i.slice_shapes
                    .iter()
                    .map(|s| fmt_shape(s))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        row("ICI hop latency", i.hop_latency.to_string());
        row("chips per host", i.chips_per_host.to_string());
    }
    if let Some(n) = &ch.nvlink {
        row("", String::new());
        row(
            "NVLink per GPU, one way (W_nvlink)",
            n.per_gpu.one_way_rate().to_string(),
        );
        row("NVLink domain", format!("{} GPUs", n.domain_size));
        row("NVLink latency", n.latency.to_string());
    }
    if let Some(s) = &ch.scale_out {
        row(
            &format!("scale-out ({}) per chip, one way", s.kind),
            s.per_chip.one_way_rate().to_string(),
        );
        if let Some(w) = r.scale_out_per_node_one_way_bytes_per_s {
            row("scale-out per node, one way", w.to_string());
        }
        row("scale-out latency", s.latency.to_string());
    }
    if let Some(m) = r.max_chips {
        row("max chips (pod / cluster)", format!("{} chips", fmt_int(m)));
    }
    if let Some(p) = r.pcie_one_way_bytes_per_s {
        row("host PCIe, one way", p.to_string());
    }
    row("", String::new());
    row("C/W_hbm (bf16)", ci(r.critical_intensity_hbm));
    if let Some(v) = r.critical_intensity_hbm_int8 {
        row("C/W_hbm (int8)", ci(v));
    }
    if let Some(v) = r.critical_intensity_ici {
        row("C/W_ici", ci(v));
    }
    if let Some(v) = r.critical_intensity_nvlink {
        row("C/W_nvlink", ci(v));
    }
    if let Some(v) = r.critical_intensity_scale_out {
        row(
            if ch.nvlink.is_some() {
                "C/W_scale-out (per node)"
            } else {
                "C/W_scale-out (DCN, per chip)"
            },
            ci(v),
        );
    }
    if let Some(v) = r.critical_intensity_pcie {
        row("C/W_pcie", ci(v));
    }
    row("", String::new());
    row(
        "price",
        match (r.usd_per_chip_hour, &r.price_source) {
            (Some(p), Some(s)) if !s.is_empty() => format!("${p:.2} per chip-hour ({s})"),
            (Some(p), _) => format!("${p:.2} per chip-hour"),
            _ => "-".into(),
        },
    );
    common::render_table(&rows, &[])
}
