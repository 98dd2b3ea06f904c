/*!
`meshplan mfu`: the model FLOPs utilization of a measured run (book ch4
Q7): `MFU = 6·P·T / (chip-hours × 3600 × C)` with `P` the active
parameters, `T` the tokens trained and `C` the chip's peak in the dtype
the run computed in (`--dtype`; DeepSeek v3 trained in fp8). The run is
given as chip-hours, or as wall-clock time and chips.

The `6·P` convention leaves out attention's `QKᵀ` and `PV` FLOPs and any
recomputation (the book's; `meshplan train` reports the others).
*/

use serde::{Deserialize, Serialize};

use crate::accounting::mfu;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::model::params::count;
use crate::trace::{Step, Tracer};
use crate::units::{fmt_si, parse_count, parse_seconds, sig4_grouped, DType, Seconds};
use crate::view::{field, pct, Doc, Render};

/// The question, as written (flags of `meshplan mfu`, or a claim's `args`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct MfuQuery {
    /// A catalog model or a bare parameter count ("37B").
    #[cfg_attr(feature = "clap", arg(long))]
    pub model: String,
    /// Tokens trained ("14.8T").
    #[cfg_attr(feature = "clap", arg(long))]
    pub tokens: String,
    /// Wall-clock time ("54 days"), with `chips`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub time: Option<String>,
    /// Chips used.
    #[cfg_attr(feature = "clap", arg(long))]
    pub chips: Option<String>,
    /// Chip-hours ("2.79M"), instead of `time` and `chips`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub chip_hours: Option<String>,
    /// The dtype the run computed in (default bf16).
    #[cfg_attr(feature = "clap", arg(long))]
    pub dtype: Option<String>,
    /// The chip: a catalog name (NAME@book for the book's numbers).
    #[cfg_attr(feature = "clap", arg(long))]
    pub hw: Option<String>,
}

/// What `meshplan mfu` reports (SI units).
#[derive(Clone, Debug, Serialize)]
pub struct MfuReport {
    /// The model.
    pub model: String,
    /// P: active parameters.
    pub params_active: u64,
    /// T: tokens trained.
    pub tokens: f64,
    /// 6·P·T.
    pub train_flops: f64,
    /// The chip.
    pub chip: String,
    /// The dtype of C.
    pub dtype: DType,
    /// C per chip, FLOP/s.
    pub peak_flops_per_s: f64,
    /// Chip-hours.
    pub chip_hours: f64,
    /// Chips (when given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chips: Option<u64>,
    /// Wall-clock time (when given or derivable), seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// chip-hours × 3600 × C: what the chips could have done.
    pub available_flops: f64,
    /// Achieved FLOP/s per chip: 6·P·T / (chip-hours × 3600).
    pub achieved_flops_per_s: f64,
    /// MFU.
    pub mfu: f64,
    /// Remarks.
    pub notes: Vec<String>,
}

/// Answer an MFU query.
pub fn evaluate<T: Tracer>(q: &MfuQuery, cat: &Catalog, tr: &mut T) -> Result<MfuReport> {
    let spec = cat.model_or_bare(&q.model)?;
    let chip = cat.chip_given(&q.hw)?;
    let dtype = q
        .dtype
        .as_deref()
        .map(DType::parse)
        .transpose()?
        .unwrap_or(DType::Bf16);
    let c = chip
        .peak
        .get(dtype)
        .ok_or_else(|| Error::Invalid(format!("{} has no {dtype} peak in the catalog", chip.name)))?
        .get();
    let p = count(&spec.arch, &mut crate::trace::NoTrace).active;
    let tokens = parse_count(&q.tokens)? as f64;
    let chips = q.chips.as_deref().map(parse_count).transpose()?;
    let time = q
        .time
        .as_deref()
        .map(parse_seconds)
        .transpose()?
        .map(Seconds::get);
    let chip_hours = match (&q.chip_hours, chips, time) {
        (Some(h), None, None) => crate::units::parse_count(h)
            .map(|x| x as f64)
            .or_else(|_| {
                h.trim().parse::<f64>().map_err(|_| Error::BadValue {
                    what: "chip-hours".into(),
                    input: h.clone(),
                    expected: "a count like \"2.79M\" or 2790000".into(),
                })
            })?,
        (None, Some(n), Some(t)) => n as f64 * t / 3600.0,
        _ => {
            return Err(Error::Invalid(
                "give the run as --chip-hours H, or as --time T and --chips N (not both)".into(),
            ))
        }
    };
    if !(chip_hours > 0.0 && chip_hours.is_finite()) || tokens <= 0.0 || p == 0 {
        return Err(Error::Invalid(
            "tokens, chips, time and chip-hours must be positive".into(),
        ));
    }
    let flops = 6.0 * p as f64 * tokens;
    let m = mfu(flops, 1.0, c, chip_hours * 3600.0);
    tr.record(|| {
        Step::new(
            "mfu",
            "Model FLOPs utilization",
            "6·P·T / (chip-hours · 3600 · C)",
        )
        .bind("P", p as f64, "params")
        .bind("T", tokens, "tokens")
        .bind("chip-hours", chip_hours, "")
        .bind("C", c, "FLOP/s")
        .result(m, "")
        .source("How To Scale Your Model ch4 Q7")
    });
    let mut notes = vec![
        "model FLOPs 6·P·T: attention and recomputation not counted (the book's convention)".into(),
    ];
    if spec.source == "a bare parameter count" {
        notes.push(format!("P = {p} from the bare count (exact)"));
    }
    Ok(MfuReport {
        model: spec.name.clone(),
        params_active: p,
        tokens,
        train_flops: flops,
        chip: chip.name.clone(),
        dtype,
        peak_flops_per_s: c,
        chip_hours,
        chips,
        time_s: time.or(chips.map(|n| chip_hours * 3600.0 / n as f64)),
        available_flops: chip_hours * 3600.0 * c,
        achieved_flops_per_s: flops / (chip_hours * 3600.0),
        mfu: m,
        notes,
    })
}

impl Render for MfuReport {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        d.title(format!("MFU of {} on {}", self.model, self.chip));
        d.fields(vec![
            field(
                "P (active params)",
                crate::units::fmt_int(self.params_active),
            ),
            field("T (tokens)", sig4_grouped(self.tokens)),
            field("model FLOPs 6·P·T", fmt_si(self.train_flops, "FLOPs")),
            field("chip-hours", sig4_grouped(self.chip_hours)),
            field(
                "C",
                format!(
                    "{} ({})",
                    fmt_si(self.peak_flops_per_s, "FLOP/s"),
                    self.dtype
                ),
            ),
            field("available FLOPs", fmt_si(self.available_flops, "FLOPs")),
            field(
                "achieved per chip",
                fmt_si(self.achieved_flops_per_s, "FLOP/s"),
            ),
            field("MFU", pct(self.mfu)),
        ]);
        for n in &self.notes {
            d.note(n);
        }
        d
    }
}
