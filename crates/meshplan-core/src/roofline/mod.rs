/*!
`meshplan roofline`: the roofline of one operation on one chip (book ch1,
ch12).

* An einsum in the book's notation with dtypes, `bf16[B, D] * int8[D, F]
  -> bf16[B, F]` (a matmul; batched, `int8[B, D] * int8[B, D, F]`; a dot
  product, `bf16[N] * bf16[N] -> bf16[]`): FLOPs `2·Π(dims)`, bytes of
  every input and the output, on the matrix units (MXU / Tensor Cores) at
  the peak of the compute dtype (the wider input's, or `--dtype`).
* An element-wise op, `fp32[N] + fp32[N] -> fp32[N]` (or a product without
  a contraction): `Π(dims)` FLOPs on the vector units (VPU / CUDA cores).
* `attention` with `--dims B=…,T=…,S=…,N=…,K=…,H=…`: FLOPs `4·B·T·S·N·H`,
  bytes of Q, K, V and the output, `2·B·H·(2·T·N + 2·S·K)` in bf16 (ch4).
* `load ARRAY` from HBM, host (PCIe), ICI, NVLink or DCN (`--from`).
* Raw `--flops` and `--bytes`.

Reported: FLOPs, exact bytes, arithmetic intensity, `T_math = FLOPs / C`,
`T_mem = bytes / W`, the bound, and for a matmul the batch at which it
turns compute-bound: exactly (`α·b / (k − α·a)` with FLOPs `k·B` and bytes
`a·B + b`) and as the book approximates it (`B ≪ D, F`: `α·b / k`, the
240 of a bf16 matmul on TPU v5e).
*/

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::hardware::Chip;
use crate::sharding::notation::{parse_array, parse_expr, ArraySpec, Combine, DimSizes};
use crate::trace::{Step, Tracer};
use crate::units::{fmt_si, sig4, DType, Seconds};
use crate::view::{field, pct, time_bounds, Doc, Render, Table};

/// The question, as written (flags of `meshplan roofline`, or a claim's `args`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct RooflineQuery {
    /// An einsum, an element-wise op, `attention`, or `load ARRAY`.
    pub what: Option<String>,
    /// Raw FLOPs ("1e12", "62.4 GFLOPs").
    #[cfg_attr(feature = "clap", arg(long))]
    pub flops: Option<String>,
    /// Raw bytes ("1 GB").
    #[cfg_attr(feature = "clap", arg(long))]
    pub bytes: Option<String>,
    /// Dimension sizes ("B=512,D=8192,F=32768").
    #[cfg_attr(feature = "clap", arg(long))]
    pub dims: Option<String>,
    /// Where the bytes come from: hbm (default), host (PCIe), ici, nvlink, dcn.
    #[cfg_attr(feature = "clap", arg(long))]
    pub from: Option<String>,
    /// Compute dtype (default: the wider input's).
    #[cfg_attr(feature = "clap", arg(long))]
    pub dtype: Option<String>,
    /// The chip: a catalog name (NAME@book for the book's numbers).
    #[cfg_attr(feature = "clap", arg(long))]
    pub hw: Option<String>,
}

/// One operand's bytes.
#[derive(Clone, Debug, Serialize)]
pub struct Operand {
    /// The array.
    pub array: String,
    /// "input" or "output".
    pub role: String,
    /// Its bytes.
    pub bytes: f64,
}

/// What `meshplan roofline` reports (SI units).
#[derive(Clone, Debug, Serialize)]
pub struct RooflineReport {
    /// The chip.
    pub chip: String,
    /// einsum | elementwise | attention | load | raw.
    pub op: String,
    /// The operation as understood.
    pub expression: String,
    /// Which units compute it.
    pub unit: String,
    /// The dtype whose peak is C.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_dtype: Option<DType>,
    /// C, FLOP/s (0 for a load).
    pub peak_flops_per_s: f64,
    /// Where the bytes come from.
    pub memory: String,
    /// W, bytes/s.
    pub bandwidth_bytes_per_s: f64,
    /// FLOPs.
    pub flops: f64,
    /// Bytes moved (inputs read + output written).
    pub bytes: f64,
    /// Each operand's bytes.
    pub operands: Vec<Operand>,
    /// FLOPs / bytes.
    pub arithmetic_intensity: f64,
    /// C / W.
    pub critical_intensity: f64,
    /// FLOPs / C, seconds.
    pub t_math_s: f64,
    /// bytes / W, seconds.
    pub t_mem_s: f64,
    /// max(T_math, T_mem): perfect overlap, seconds.
    pub time_s: f64,
    /// T_math + T_mem: no overlap, seconds.
    pub time_upper_s: f64,
    /// "compute" or "memory" (HBM) / "bandwidth" (a link).
    pub bound: String,
    /// T_math / time: the fraction of peak FLOP/s reached at perfect overlap.
    pub peak_fraction: f64,
    /// The batch-like dimension (first free dimension of the first input).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_dim: Option<String>,
    /// The size of `batch_dim` above which the op is compute-bound, exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_batch: Option<f64>,
    /// The same, as the book approximates it (batch ≪ other dims).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_batch_approx: Option<f64>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// Where the bytes come from, and at what rate.
fn memory(chip: &Chip, from: Option<&str>) -> Result<(String, f64)> {
    let f = from.unwrap_or("hbm").trim().to_ascii_lowercase();
    let missing = |what: &str| {
        Error::Invalid(format!(
            "{} has no {what} bandwidth in the catalog",
            chip.name
        ))
    };
    Ok(match f.as_str() {
        "hbm" | "memory" => ("HBM".into(), chip.hbm_bandwidth.get()),
        "host" | "pcie" => (
            "host (PCIe, one way)".into(),
            chip.pcie
                .ok_or_else(|| missing("PCIe"))?
                .one_way_rate()
                .get(),
        ),
        "ici" => (
            "ICI (one link, one way)".into(),
            chip.ici
                .as_ref()
                .ok_or_else(|| missing("ICI"))?
                .link
                .one_way_rate()
                .get(),
        ),
        "nvlink" => (
            "NVLink (per GPU, one way)".into(),
            chip.nvlink
                .as_ref()
                .ok_or_else(|| missing("NVLink"))?
                .per_gpu
                .one_way_rate()
                .get(),
        ),
        "dcn" | "scale-out" | "network" | "ib" => (
            "scale-out / DCN (per chip, one way)".into(),
            chip.scale_out
                .as_ref()
                .ok_or_else(|| missing("scale-out"))?
                .per_chip
                .one_way_rate()
                .get(),
        ),
        _ => {
            return Err(Error::UnknownName {
                kind: "memory".into(),
                name: f,
                suggestions: vec![
                    "hbm".into(),
                    "host".into(),
                    "ici".into(),
                    "nvlink".into(),
                    "dcn".into(),
                ],
            })
        }
    })
}

fn matrix_peak(chip: &Chip, dt: DType) -> Result<f64> {
    chip.peak.get(dt).map(|c| c.get()).ok_or_else(|| {
        Error::Invalid(format!(
            "{} has no {dt} matrix peak in the catalog (it has: {}); give --dtype to compute in another dtype",
            chip.name,
            DType::ALL
                .iter()
                .filter(|d| chip.peak.get(**d).is_some())
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// The parts of one operation before the chip is applied.
struct Work {
    op: &'static str,
    expression: String,
    vector: bool,
    dtype: Option<DType>,
    flops: f64,
    operands: Vec<Operand>,
    /// (batch dim, FLOPs per unit of it, bytes per unit, other bytes)
    batch: Option<(String, f64, f64, f64)>,
    notes: Vec<String>,
}

fn checked_elems(shape: &[u64], what: &str) -> Result<u64> {
    shape
        .iter()
        .try_fold(1u64, |a, &x| a.checked_mul(x))
        .ok_or_else(|| Error::Invalid(format!("{what} has more than 2^64 - 1 elements")))
}

fn array_bytes(a: &ArraySpec, sizes: &DimSizes) -> Result<f64> {
    let n = checked_elems(&sizes.shape(a)?, &a.notation())?;
    Ok(a.dtype.unwrap_or(DType::Bf16).bytes_for(n).get())
}

fn einsum_work(text: &str, sizes: &DimSizes) -> Result<Work> {
    let e = parse_expr(text)?;
    if let Some(a) = e
        .inputs
        .iter()
        .chain(e.output.as_ref())
        .find(|a| a.axes().next().is_some())
    {
        return Err(Error::Invalid(format!(
            "{}: roofline is one chip's; drop the mesh subscripts (meshplan shard costs sharded ops)",
            a.notation()
        )));
    }
    let a = &e.inputs[0];
    let b = e.inputs.get(1);
    let in_b = |n: &str| b.is_some_and(|b| b.dim(n).is_some());
    let out = match &e.output {
        Some(o) => o.clone(),
        None => ArraySpec {
            name: None,
            dtype: a.dtype,
            dims: a
                .dims
                .iter()
                .filter(|d| e.combine == Combine::Sum || !in_b(&d.name))
                .chain(
                    b.into_iter()
                        .flat_map(|b| b.dims.iter())
                        .filter(|d| a.dim(&d.name).is_none()),
                )
                .cloned()
                .collect(),
            unreduced: Vec::new(),
        },
    };
    let mut all: Vec<&crate::sharding::notation::DimSpec> = e
        .inputs
        .iter()
        .flat_map(|x| x.dims.iter())
        .chain(out.dims.iter())
        .collect();
    all.sort_by(|x, y| x.name.cmp(&y.name));
    all.dedup_by(|x, y| x.name == y.name);
    let prod = all.iter().try_fold(1f64, |acc, d| {
        Ok::<f64, Error>(acc * sizes.size_of(d)? as f64)
    })?;
    let contracting =
        e.combine == Combine::Product && all.iter().any(|d| out.dim(&d.name).is_none());
    let flops = if contracting { 2.0 * prod } else { prod };
    let mut operands = Vec::new();
    for x in &e.inputs {
        operands.push(Operand {
            array: x.notation(),
            role: "input".into(),
            bytes: array_bytes(x, sizes)?,
        });
    }
    let mut out = out;
    if out.dtype.is_none() {
        out.dtype = a.dtype;
    }
    operands.push(Operand {
        array: out.notation(),
        role: "output".into(),
        bytes: array_bytes(&out, sizes)?,
    });
    let dtype = match (a.dtype, b.and_then(|b| b.dtype)) {
        (Some(x), Some(y)) => Some(if x.bits() >= y.bits() { x } else { y }),
        (x, y) => x.or(y),
    };
    let batch = if contracting {
        a.dims
            .iter()
            .find(|d| !in_b(&d.name))
            .map(|d| -> Result<(String, f64, f64, f64)> {
                let n = sizes.size_of(d)? as f64;
                let mut with = 0.0;
                let mut without = 0.0;
                for (arr, op) in e.inputs.iter().chain(std::iter::once(&out)).zip(&operands) {
                    if arr.dim(&d.name).is_some() {
                        with += op.bytes / n;
                    } else {
                        without += op.bytes;
                    }
                }
                Ok((d.name.clone(), flops / n, with, without))
            })
            .transpose()?
    } else {
        None
    };
    Ok(Work {
        op: if contracting { "einsum" } else { "elementwise" },
        expression: format!(
            "{} -> {}",
            e.inputs
                .iter()
                .map(ArraySpec::notation)
                .collect::<Vec<_>>()
                .join(if e.combine == Combine::Sum {
                    " + "
                } else {
                    " * "
                }),
            out.notation()
        ),
        vector: !contracting,
        dtype,
        flops,
        operands,
        batch,
        notes: Vec::new(),
    })
}

fn attention_work(sizes: &DimSizes, dtype: DType) -> Result<Work> {
    let get = |n: &str, default: Option<&str>| -> Result<f64> {
        let d = crate::sharding::notation::DimSpec {
            name: n.into(),
            size: None,
            axes: Vec::new(),
        };
        match sizes.size_of(&d) {
            Ok(v) => Ok(v as f64),
            Err(e) => match default {
                Some(o) => get_named(sizes, o).ok_or(e),
                None => Err(Error::Invalid(format!(
                    "attention needs --dims B,T,S,N,K,H: no size for {n}"
                ))),
            },
        }
    };
    let (b, t, n, h) = (
        get("B", None)?,
        get("T", None)?,
        get("N", None)?,
        get("H", None)?,
    );
    let s = get("S", Some("T"))?;
    let k = get("K", Some("N"))?;
    let e = dtype.bytes_per_element();
    let q = b * t * n * h * e;
    let kv = 2.0 * b * s * k * h * e;
    Ok(Work {
        op: "attention",
        expression: format!("attention B={b} T={t} S={s} N={n} K={k} H={h} ({dtype})"),
        vector: false,
        dtype: Some(dtype),
        flops: 4.0 * b * t * s * n * h,
        operands: vec![
            Operand {
                array: "Q[B, T, N, H]".into(),
                role: "input".into(),
                bytes: q,
            },
            Operand {
                array: "K, V[B, S, K, H]".into(),
                role: "input".into(),
                bytes: kv,
            },
            Operand {
                array: "O[B, T, N, H]".into(),
                role: "output".into(),
                bytes: q,
            },
        ],
        batch: None,
        notes: vec![
            "FLOPs 4·B·T·S·N·H (QKᵀ and PV, ch4); a causal mask that skips blocks halves them"
                .into(),
        ],
    })
}

fn get_named(sizes: &DimSizes, n: &str) -> Option<f64> {
    sizes.0.iter().find(|(k, _)| k == n).map(|(_, v)| *v as f64)
}

fn work(q: &RooflineQuery, sizes: &DimSizes) -> Result<Work> {
    let dt = q.dtype.as_deref().map(DType::parse).transpose()?;
    let what = q.what.as_deref().map(str::trim).filter(|w| !w.is_empty());
    match what {
        None => {
            if q.flops.is_none() && q.bytes.is_none() {
                return Err(Error::Invalid(
                    "nothing to cost: give an op (\"bf16[B, D] * bf16[D, F]\", attention, load ARRAY) or --flops and --bytes".into(),
                ));
            }
            let flops = q
                .flops
                .as_deref()
                .map(crate::units::parse_flops)
                .transpose()?
                .map_or(0.0, |f| f.get());
            let bytes = q
                .bytes
                .as_deref()
                .map(crate::units::parse_bytes)
                .transpose()?
                .map_or(0.0, |b| b.get());
            Ok(Work {
                op: "raw",
                expression: format!("{} FLOPs, {} bytes", sig4(flops), sig4(bytes)),
                vector: false,
                dtype: Some(dt.unwrap_or(DType::Bf16)),
                flops,
                operands: vec![Operand {
                    array: "given".into(),
                    role: "input".into(),
                    bytes,
                }],
                batch: None,
                notes: Vec::new(),
            })
        }
        Some(w) if w.eq_ignore_ascii_case("attention") => {
            attention_work(sizes, dt.unwrap_or(DType::Bf16))
        }
        Some(w) if w.to_ascii_lowercase().starts_with("load ") => {
            let a = parse_array(&w[5..])?;
            let bytes = array_bytes(&a, sizes)?;
            Ok(Work {
                op: "load",
                expression: format!("load {}", a.notation()),
                vector: false,
                dtype: None,
                flops: 0.0,
                operands: vec![Operand {
                    array: a.notation(),
                    role: "input".into(),
                    bytes,
                }],
                batch: None,
                notes: Vec::new(),
            })
        }
        Some(w) => {
            if q.flops.is_some() || q.bytes.is_some() {
                return Err(Error::Invalid(
                    "give an op or --flops/--bytes, not both".into(),
                ));
            }
            let mut wk = einsum_work(w, sizes)?;
            if let Some(d) = dt {
                wk.dtype = Some(d);
            }
            Ok(wk)
        }
    }
}

/// Answer a roofline query.
pub fn evaluate<T: Tracer>(q: &RooflineQuery, cat: &Catalog, tr: &mut T) -> Result<RooflineReport> {
    let chip = cat.chip_given(&q.hw)?;
    let sizes = DimSizes::parse(q.dims.as_deref().unwrap_or(""))?;
    let wk = work(q, &sizes)?;
    let (memory, w) = memory(chip, q.from.as_deref())?;
    let dt = wk.dtype.unwrap_or(DType::Bf16);
    let (unit, c) = if wk.op == "load" {
        ("none (a transfer)".to_string(), 0.0)
    } else if wk.vector {
        let c = chip.vector_peak().ok_or_else(|| {
            Error::Invalid(format!(
                "the catalog has no vector (VPU / CUDA-core) peak for {}: an element-wise op cannot be costed",
                chip.name
            ))
        })?;
        ("vector (VPU / CUDA cores)".to_string(), c.get())
    } else {
        (
            "matrix (MXU / Tensor Cores)".to_string(),
            matrix_peak(chip, dt)?,
        )
    };
    let bytes: f64 = wk.operands.iter().map(|o| o.bytes).sum();
    let t_math = if wk.flops > 0.0 { wk.flops / c } else { 0.0 };
    let t_mem = bytes / w;
    let alpha = if c > 0.0 { c / w } else { 0.0 };
    let ai = if bytes > 0.0 {
        wk.flops / bytes
    } else {
        f64::INFINITY
    };
    tr.record(|| {
        Step::new("roofline.t_math", "Compute time", "T_math = FLOPs / C")
            .bind("FLOPs", wk.flops, "FLOPs")
            .bind("C", c, "FLOP/s")
            .result(t_math, "s")
            .source("How To Scale Your Model ch1 (rooflines)")
    });
    tr.record(|| {
        Step::new(
            "roofline.t_mem",
            "Memory / transfer time",
            "T_mem = bytes / W",
        )
        .bind("bytes", bytes, "B")
        .bind("W", w, "B/s")
        .result(t_mem, "s")
        .source("How To Scale Your Model ch1 (rooflines)")
    });
    tr.record(|| {
        Step::new(
            "roofline.intensity",
            "Arithmetic intensity vs the critical intensity",
            "FLOPs / bytes vs C / W",
        )
        .bind("FLOPs", wk.flops, "FLOPs")
        .bind("bytes", bytes, "B")
        .bind("C/W", alpha, "FLOPs/B")
        .result(ai, "FLOPs/B")
        .source("How To Scale Your Model ch1: compute-bound iff intensity > C/W")
    });
    let crit = wk.batch.as_ref().map(|(n, k, a, b)| {
        let exact = if *k > alpha * a {
            alpha * b / (k - alpha * a)
        } else {
            f64::INFINITY
        };
        let approx = alpha * b / k;
        tr.record(|| {
            if exact.is_finite() {
                Step::new(
                    "roofline.critical_batch",
                    &format!("Size of {n} at which the op turns compute-bound"),
                    "α·b / (k − α·a), FLOPs = k·B, bytes = a·B + b (book: α·b/k for B ≪ D, F)",
                )
                .result(exact, "")
            } else {
                // k ≤ α·a: each unit of the batch adds more bytes than C/W
                // FLOPs can cover, so no batch makes it compute-bound
                Step::new(
                    "roofline.critical_batch",
                    &format!("Size of {n} at which the op turns compute-bound: none, the intensity stays below C/W for every {n} because α·a ≥ k (ratio shown)"),
                    "α·a / k, FLOPs = k·B, bytes = a·B + b",
                )
                .result(alpha * a / k, "")
            }
            .bind("α", alpha, "FLOPs/B")
            .bind("k", *k, "FLOPs")
            .bind("a", *a, "B")
            .bind("b", *b, "B")
            .source("How To Scale Your Model ch1")
        });
        (n.clone(), exact, approx)
    });
    let time = t_math.max(t_mem);
    let mut notes = wk.notes;
    if wk.vector && chip.anatomy.sms.is_some() {
        notes.push("CUDA cores: one operation per core per cycle (the published FP32 peak / 2, which counts an FMA as two)".into());
    }
    Ok(RooflineReport {
        chip: chip.name.clone(),
        op: wk.op.into(),
        expression: wk.expression,
        unit,
        compute_dtype: if wk.op == "load" { None } else { Some(dt) },
        peak_flops_per_s: c,
        bandwidth_bytes_per_s: w,
        bound: if wk.op == "load" || t_mem > t_math {
            if memory == "HBM" {
                "memory"
            } else {
                "bandwidth"
            }
            .to_string()
        } else {
            "compute".into()
        },
        memory,
        flops: wk.flops,
        bytes,
        operands: wk.operands,
        arithmetic_intensity: ai,
        critical_intensity: alpha,
        t_math_s: t_math,
        t_mem_s: t_mem,
        time_s: time,
        time_upper_s: t_math + t_mem,
        peak_fraction: if time > 0.0 { t_math / time } else { 0.0 },
        batch_dim: crit.as_ref().map(|c| c.0.clone()),
        critical_batch: crit.as_ref().map(|c| c.1),
        critical_batch_approx: crit.as_ref().map(|c| c.2),
        notes,
    })
}

impl Render for RooflineReport {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        d.title(format!("{} on {}", self.expression, self.chip));
        let mut t = Table::new(&["operand", "role", "bytes"], &["bytes"]);
        for o in &self.operands {
            t.row(vec![o.array.clone(), o.role.clone(), fmt_si(o.bytes, "B")]);
        }
        d.table(t);
        let mut f = vec![
            field("FLOPs", fmt_si(self.flops, "FLOPs")),
            field("bytes", fmt_si(self.bytes, "B")),
            field("units", &self.unit),
        ];
        if self.peak_flops_per_s > 0.0 {
            f.push(field(
                "C",
                format!(
                    "{}{}",
                    fmt_si(self.peak_flops_per_s, "FLOP/s"),
                    self.compute_dtype
                        .map_or(String::new(), |d| format!(" ({d})"))
                ),
            ));
        }
        f.extend([
            field(
                "W",
                format!(
                    "{} ({})",
                    fmt_si(self.bandwidth_bytes_per_s, "B/s"),
                    self.memory
                ),
            ),
            field(
                "arithmetic intensity",
                if self.arithmetic_intensity.is_finite() {
                    format!("{} FLOPs/B", sig4(self.arithmetic_intensity))
                } else {
                    "unbounded: FLOPs and no bytes".to_string()
                },
            ),
            field(
                "critical intensity C/W",
                format!("{} FLOPs/B", sig4(self.critical_intensity)),
            ),
            field("T_math", Seconds::new(self.t_math_s)),
            field("T_mem", Seconds::new(self.t_mem_s)),
            time_bounds(self.time_s, self.time_upper_s),
            field(
                "bound",
                format!(
                    "{} ({} of peak FLOP/s)",
                    self.bound,
                    pct(self.peak_fraction)
                ),
            ),
        ]);
        if let (Some(n), Some(x), Some(a)) = (
            &self.batch_dim,
            self.critical_batch,
            self.critical_batch_approx,
        ) {
            f.push(if x.is_finite() {
                field(
                    &format!("compute-bound when {n} >"),
                    format!(
                        "{} (book's approximation for {n} ≪ the other dims: {})",
                        sig4(x),
                        sig4(a)
                    ),
                )
            } else {
                field(
                    &format!("compute-bound when {n} >"),
                    format!("none: the intensity stays below C/W for every {n} (the bytes per unit of {n} need more than its FLOPs; the book's approximation, {}, assumes {n} ≪ the other dims)", sig4(a)),
                )
            });
        }
        d.fields(f);
        for n in &self.notes {
            d.note(n);
        }
        d
    }
}
