//! `meshplan hw list|show`: the chip catalog and one chip's figures.
//!
//! The chip's numbers come from `meshplan-core` ([`meshplan_core::hardware::Chip`]);
//! the derived critical intensities are the typed quotient `C / W`
//! (`FlopsPerSec / BytesPerSec`) from `meshplan_core::units`, recorded as
//! derivation steps so `--explain` shows each formula. (`meshplan_core::hw_report` computes them.)

use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::hardware::{fmt_shape, Chip, Profile, Wraparound};
use meshplan_core::hw_report::{hw_report, HwReport};
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::units::{fmt_int, fmt_si, sig4, DType};
use meshplan_core::{catalog, Catalog};

use crate::common::{self, ExplainFormat};

/// Hardware subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum HwCmd {
    /// List the chips in the catalog (vendor figures and the book's `@book` variants).
    List(common::ListArgs),
    /// Show one chip: peak FLOP/s, HBM, interconnect, critical intensities and price.
    Show(ShowArgs),
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

/// Run the command.
pub fn run(c: HwCmd) -> Result<ExitCode> {
    let cat = common::user_catalog()?;
    match c {
        HwCmd::List(a) => list(&cat, &a),
        HwCmd::Show(a) => show(&cat, &a),
    }
}

fn list(cat: &Catalog, a: &common::ListArgs) -> Result<ExitCode> {
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
    out!("{}", common::render_table(&t, &[2, 3, 4, 5, 7]));
    outln!(
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
    out!("{}", render(&ch, &r));
    if let Some(s) = steps {
        outln!("\nDerivation:");
        out!("{}", common::render_steps(&s, a.explain_format));
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
                fmt_int(i.max_slice_chips())
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
