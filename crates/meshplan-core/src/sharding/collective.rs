/*!
`meshplan collective`: the time of one AllGather, ReduceScatter, AllReduce,
AllToAll or permute of an array over named mesh axes (book ch3, ch12), with
the algorithm and the level that bounds it, the bytes each device sends,
whether it is latency- or bandwidth-bound, and the alternatives the book
discusses (a torus axis with or without wraparound, in-network reduction,
a latency-optimised tree).

The array is given as bytes (`V`, the full array as in the book) or in the
book's notation (`bf16[E_X, F]` with sizes), in which case `V` is the array
as seen by one group of the collective: divided by the axes that shard it
and are not collected over (book ch3 Q2: `AllGather_X(A[B_X, D_Y])` moves
`V/Y`).
*/

use serde::{Deserialize, Serialize};

use super::mesh::NamedMesh;
use super::notation::{parse_array, ArraySpec, DimSizes};
use crate::catalog::{suggestions, Catalog};
use crate::collectives::{cost, levels, AxisPlacement, Collective, CollectiveCost, GpuAxis, Level};
use crate::error::{Error, Result};
use crate::trace::{Step, Tracer};
use crate::units::{fmt_si, Bytes, DType, Seconds};
use crate::view::{field, Doc, Render, Table};

/// The question, as written (flags of `meshplan collective`, or a claim's
/// `args`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct CollectiveQuery {
    /// allgather | reducescatter | allreduce | alltoall | permute, with the
    /// axes as a subscript (`allgather_X`).
    pub op: String,
    /// The array: V, the full array's size ("32 MiB"), or the array in the
    /// book's notation ("bf16[E_X, F]").
    #[cfg_attr(feature = "clap", arg(long))]
    pub array: String,
    /// Dimension sizes for the array ("E=2048,F=8192").
    #[cfg_attr(feature = "clap", arg(long))]
    pub dims: Option<String>,
    /// The mesh ("X=4,Y=4", "4x4", "2*16x16x16", GPUs "4x8").
    #[cfg_attr(feature = "clap", arg(long))]
    pub mesh: Option<String>,
    /// Axes to run over ("X", "X,Y" or "XY"); default from the array.
    #[cfg_attr(feature = "clap", arg(long))]
    pub axes: Option<String>,
    /// The chip: a catalog name (NAME@book for the book's numbers).
    #[cfg_attr(feature = "clap", arg(long))]
    pub hw: Option<String>,
    /// The array's dtype when it writes none (default bf16).
    #[cfg_attr(feature = "clap", arg(long))]
    pub dtype: Option<String>,
}

/// Another way to run the same collective, with its time.
#[derive(Clone, Debug, Serialize)]
pub struct Alternative {
    /// What it is.
    pub name: String,
    /// Its time, seconds.
    pub time_s: f64,
    /// The formula or the caveat.
    pub note: String,
}

/// What `meshplan collective` reports (SI units).
#[derive(Clone, Debug, Serialize)]
pub struct CollectiveReport {
    /// The chip.
    pub chip: String,
    /// The collective.
    pub op: Collective,
    /// The mesh, as named axes.
    pub mesh: String,
    /// The axes collected over.
    pub axes: Vec<String>,
    /// Devices in one group (product of the axes' sizes).
    pub axis_size: u64,
    /// Where the group runs ("ici 4(no wrap)", "nvlink 8 x scale-out 4 nodes").
    pub placement: String,
    /// The array before, in the book's notation (when given as an array).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    /// The array after (when given as an array).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// V: bytes of the array one group works on.
    pub bytes: f64,
    /// V / N: one device's shard.
    pub shard_bytes: f64,
    /// Bytes each device sends.
    pub bytes_sent_per_device: f64,
    /// The algorithm costed.
    pub algorithm: String,
    /// The links the algorithm runs on.
    pub levels: Vec<Level>,
    /// Bandwidth term, seconds.
    pub bandwidth_time_s: f64,
    /// Latency term (hops × per-hop latency), seconds.
    pub latency_time_s: f64,
    /// max(bandwidth, latency), seconds.
    pub time_s: f64,
    /// "bandwidth" or "latency".
    pub bound: String,
    /// V / T_bandwidth, bytes/s.
    pub effective_bandwidth_bytes_per_s: f64,
    /// V below which the collective is latency-bound, bytes.
    pub latency_bound_below_bytes: f64,
    /// Other ways to run it.
    pub alternatives: Vec<Alternative>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// Parse a collective's name with optional axes in the book's subscript
/// (`AllGather_X`, `allreduce_XY`, `ReduceScatter_{X,Y}`).
pub fn parse_op_axes(s: &str) -> Result<(Collective, Option<Vec<String>>)> {
    match s.split_once('_') {
        Some((op, axes)) => {
            let axes = axes.trim().trim_start_matches('{').trim_end_matches('}');
            Ok((parse_op(op)?, Some(parse_axes(axes))))
        }
        None => Ok((parse_op(s)?, None)),
    }
}

/// Parse a collective's name (AllGather, all-gather, ag, psum, ppermute …).
pub fn parse_op(s: &str) -> Result<Collective> {
    Ok(match crate::names::squash(s).as_str() {
        "allgather" | "ag" | "gather" => Collective::AllGather,
        "reducescatter" | "rs" | "psumscatter" => Collective::ReduceScatter,
        "allreduce" | "ar" | "psum" => Collective::AllReduce,
        "alltoall" | "a2a" | "all2all" => Collective::AllToAll,
        "permute" | "ppermute" | "p2p" | "pointtopoint" | "send" | "collectivepermute" => {
            Collective::PointToPoint
        }
        _ => {
            let names = [
                "allgather",
                "reducescatter",
                "allreduce",
                "alltoall",
                "permute",
            ];
            let sug = suggestions(s, names.iter().copied());
            return Err(Error::UnknownName {
                kind: "collective".into(),
                name: s.into(),
                suggestions: if sug.is_empty() {
                    names.iter().map(|x| x.to_string()).collect()
                } else {
                    sug
                },
            });
        }
    })
}

/// Axes written as "X,Y", "X Y" or "XY" (single letters).
pub fn parse_axes(s: &str) -> Vec<String> {
    let parts: Vec<String> = s
        .split([',', ' '])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect();
    if parts.len() == 1 && parts[0].chars().all(|c| c.is_ascii_uppercase()) {
        parts[0].chars().map(|c| c.to_string()).collect()
    } else {
        parts
    }
}

/// The array as given, its group bytes V, the axes and the array after.
struct Operand {
    notation: Option<String>,
    result: Option<String>,
    v: f64,
    axes: Vec<String>,
    notes: Vec<String>,
}

fn array_bytes(a: &ArraySpec, sizes: &DimSizes, notes: &mut Vec<String>) -> Result<f64> {
    let shape = sizes.shape(a)?;
    let n = shape
        .iter()
        .try_fold(1u64, |acc, &x| acc.checked_mul(x))
        .ok_or_else(|| Error::Invalid("the array has more than 2^64 - 1 elements".into()))?;
    let dt = a.dtype.unwrap_or_else(|| {
        notes.push("no dtype written: bf16 assumed (write bf16[…], int8[…], …)".into());
        DType::Bf16
    });
    Ok(dt.bytes_for(n).get())
}

/// Which axes the op runs over by default, and the array after it.
fn default_axes(op: Collective, a: &ArraySpec) -> Vec<String> {
    match op {
        Collective::ReduceScatter | Collective::AllReduce => a.unreduced.clone(),
        _ => a.dims.iter().flat_map(|d| d.axes.clone()).collect(),
    }
}

fn after(op: Collective, a: &ArraySpec, axes: &[String]) -> ArraySpec {
    let mut r = a.clone();
    let free = r.dims.iter().position(|d| d.axes.is_empty()).unwrap_or(0);
    match op {
        Collective::AllGather => r
            .dims
            .iter_mut()
            .for_each(|d| d.axes.retain(|x| !axes.contains(x))),
        Collective::AllReduce => r.unreduced.retain(|x| !axes.contains(x)),
        Collective::ReduceScatter => {
            r.unreduced.retain(|x| !axes.contains(x));
            if let Some(d) = r.dims.get_mut(free) {
                d.axes.extend(axes.iter().cloned());
            }
        }
        Collective::AllToAll => {
            r.dims
                .iter_mut()
                .for_each(|d| d.axes.retain(|x| !axes.contains(x)));
            if let Some(d) = r.dims.get_mut(free) {
                d.axes.extend(axes.iter().cloned());
            }
        }
        Collective::PointToPoint => {}
    }
    r
}

fn check_uses(op: Collective, a: &ArraySpec, axes: &[String]) -> Result<()> {
    let uses = |x: &String| match op {
        Collective::ReduceScatter | Collective::AllReduce => a.unreduced.contains(x),
        Collective::PointToPoint => true,
        _ => a.dims.iter().any(|d| d.axes.contains(x)),
    };
    if let Some(x) = axes.iter().find(|x| !uses(x)) {
        let what = match op {
            Collective::ReduceScatter | Collective::AllReduce => {
                format!("partial sums over {x}: write them as {{U_{x}}} after the brackets")
            }
            _ => format!("a dimension sharded over {x} (like I_{x})"),
        };
        return Err(Error::Invalid(format!(
            "{op} over {x} needs {what}; {} has none",
            a.notation()
        )));
    }
    Ok(())
}

fn operand(
    q: &CollectiveQuery,
    op: Collective,
    sub: Option<Vec<String>>,
    mesh: &NamedMesh,
) -> Result<Operand> {
    let axes_flag = q.axes.as_deref().map(parse_axes).or(sub);
    let mut notes = Vec::new();
    if !q.array.contains('[') {
        let v = crate::units::parse_bytes(&q.array).map_err(|_| Error::BadValue {
            what: "array".into(),
            input: q.array.clone(),
            expected:
                "V in bytes (\"32MiB\") or an array like \"bf16[E_X, F]\" with --dims E=2048,F=8192"
                    .into(),
        })?;
        let axes = match axes_flag {
            Some(a) => a,
            None if mesh.axes.len() == 1 => vec![mesh.axes[0].name.clone()],
            None => {
                return Err(Error::Invalid(format!(
                "which axes? the mesh {} has several: name them after the op, e.g. allreduce_{}",
                mesh.describe(),
                mesh.axes[0].name
            )))
            }
        };
        return Ok(Operand {
            notation: None,
            result: None,
            v: v.get(),
            axes,
            notes,
        });
    }
    let mut a = parse_array(&q.array)?;
    if a.dtype.is_none() {
        a.dtype = q.dtype.as_deref().map(DType::parse).transpose()?;
    }
    let sizes = DimSizes::parse(q.dims.as_deref().unwrap_or(""))?;
    super::check_array(&a, &sizes, mesh)?;
    let total = array_bytes(&a, &sizes, &mut notes)?;
    let axes = axes_flag.unwrap_or_else(|| default_axes(op, &a));
    if axes.is_empty() {
        return Err(Error::Invalid(format!(
            "{} uses no mesh axis for a {op}: name the axes after the op (allgather_X), or write the sharding (A[I_X, J], or {{U_X}} for partial sums)",
            a.notation()
        )));
    }
    check_uses(op, &a, &axes)?;
    let others: Vec<String> = a.axes().filter(|x| !axes.contains(x)).cloned().collect();
    let other = mesh.size_of(&others)? as f64;
    if other > 1.0 {
        notes.push(format!(
            "{} is also sharded over {}: each group moves V/{} (book ch3 Q2)",
            a.notation(),
            others.join(""),
            other
        ));
    }
    Ok(Operand {
        notation: Some(a.notation()),
        result: Some(after(op, &a, &axes).notation()),
        v: total / other,
        axes,
        notes,
    })
}

/// Answer a collective query.
pub fn evaluate<T: Tracer>(
    q: &CollectiveQuery,
    cat: &Catalog,
    tr: &mut T,
) -> Result<CollectiveReport> {
    let (op, sub) = parse_op_axes(&q.op)?;
    let chip = cat.chip_given(&q.hw)?;
    let mesh_text = q.mesh.as_deref().ok_or_else(|| {
        Error::Invalid("no mesh: give --mesh X=4,Y=4 (or a shape like 4x4; GPUs NODESxGPUS)".into())
    })?;
    let mesh = NamedMesh::parse(mesh_text, chip)?;
    let o = operand(q, op, sub, &mesh)?;
    let placement = mesh.placement(chip, &o.axes)?;
    let n = mesh.size_of(&o.axes)?;
    let c = cost(op, Bytes::new(o.v), &placement, tr);
    let mut notes = o.notes;
    if n <= 1 {
        notes.push("the axes have one device: nothing to communicate".into());
    }
    let alternatives = alternatives(op, o.v, &placement, chip, &c, tr);
    Ok(report(
        op,
        chip.name.clone(),
        &mesh,
        o.axes,
        n,
        &placement,
        o.notation,
        o.result,
        &c,
        alternatives,
        notes,
    ))
}

#[allow(clippy::too_many_arguments)] // one report's parts
fn report(
    op: Collective,
    chip: String,
    mesh: &NamedMesh,
    axes: Vec<String>,
    n: u64,
    p: &AxisPlacement,
    array: Option<String>,
    result: Option<String>,
    c: &CollectiveCost,
    alternatives: Vec<Alternative>,
    notes: Vec<String>,
) -> CollectiveReport {
    let v = c.bytes.get();
    let (bw, lat) = (c.bandwidth_time.get(), c.latency_time.get());
    CollectiveReport {
        chip,
        op,
        mesh: mesh.describe(),
        axes,
        axis_size: n,
        placement: p.describe(),
        array,
        result,
        bytes: v,
        shard_bytes: v / n.max(1) as f64,
        bytes_sent_per_device: c.bytes_sent_per_device.get(),
        algorithm: algorithm(op, p),
        levels: levels(p),
        bandwidth_time_s: bw,
        latency_time_s: lat,
        time_s: c.time.get(),
        bound: if c.latency_bound {
            "latency"
        } else {
            "bandwidth"
        }
        .into(),
        effective_bandwidth_bytes_per_s: if bw > 0.0 { v / bw } else { f64::INFINITY },
        latency_bound_below_bytes: if bw > 0.0 && v > 0.0 {
            lat * v / bw
        } else {
            0.0
        },
        alternatives,
        notes,
    }
}

fn algorithm(op: Collective, p: &AxisPlacement) -> String {
    let base = match op {
        Collective::AllReduce => "ReduceScatter then AllGather, ",
        _ => "",
    };
    let how = match p {
        AxisPlacement::Trivial => "nothing to do (one device)".to_string(),
        AxisPlacement::Torus { axes, n_axes, .. } => {
            let ring = if axes[..*n_axes].iter().all(|a| a.wraparound) {
                "bidirectional ring"
            } else {
                "ring without wraparound (edge data travels X−1 hops one way)"
            };
            if *n_axes > 1 {
                format!("{ring} on each of {n_axes} torus axes at once, the array split between them")
            } else {
                format!("{ring} on one torus axis")
            }
        }
        AxisPlacement::Gpu(g) if g.per_node >= g.size => {
            "ring over the NVLink switch (one node)".into()
        }
        AxisPlacement::Gpu(_) => {
            "hierarchical: ring inside each node over NVLink, then across nodes on the scale-out network; the slowest level bounds it".into()
        }
        AxisPlacement::Dcn { .. } => "ring over slices on the data-centre network".into(),
    };
    if op == Collective::AllToAll {
        format!("AllToAll: {how}")
    } else if op == Collective::PointToPoint {
        format!("one send to a neighbour: {how}")
    } else {
        format!("{base}{how}")
    }
}

fn alt_step<T: Tracer>(tr: &mut T, id: &str, label: &str, formula: &str, v: f64, w: f64, t: f64) {
    tr.record(|| {
        Step::new(id, label, formula)
            .bind("V", v, "B")
            .bind("W", w, "B/s")
            .result(t, "s")
            .source("How To Scale Your Model ch3, ch12")
    });
}

/// `op` over a one-directional ring of `x` chips with one-way link rate
/// `w1`: (seconds, formula, why). AllGather / ReduceScatter move
/// V·(X−1)/X through every link (V(X−1)/(X·W), half the bidirectional
/// ring's bandwidth), AllReduce twice that. An AllToAll sends each of the
/// X−1 chunks of V/X² a chip holds d = 1 … X−1 hops the one way round, so
/// every link carries X·Σd·V/X²/X = V·(X−1)/(2X): T = V·(X−1)/(2·X·W),
/// ≈ 4× the bidirectional ring's V/(4·W_bidir) = V/(8·W) (book ch3's
/// all-to-all on a ring), not the all-gather's V·(X−1)/(X·W).
fn unidirectional(op: Collective, v: f64, x: f64, w1: f64) -> (f64, &'static str, &'static str) {
    match op {
        Collective::AllToAll => (
            v * (x - 1.0) / (2.0 * x * w1),
            "V·(X−1)/(2·X·W_one-way)",
            "each chunk rides one way round, (X−1)/2 hops on average: ~4× the bidirectional ring",
        ),
        Collective::AllReduce => (
            2.0 * v * (x - 1.0) / (x * w1),
            "2·V·(X−1)/(X·W_one-way)",
            "reduce-scatter then all-gather at half the bidirectional ring's bandwidth",
        ),
        _ => (
            v * (x - 1.0) / (x * w1),
            "V·(X−1)/(X·W_one-way)",
            "half the bandwidth of the bidirectional ring",
        ),
    }
}

/// The book's alternatives to the ring costed in [`cost`].
fn alternatives<T: Tracer>(
    op: Collective,
    v: f64,
    p: &AxisPlacement,
    chip: &crate::hardware::Chip,
    c: &CollectiveCost,
    tr: &mut T,
) -> Vec<Alternative> {
    let mut out = Vec::new();
    match *p {
        AxisPlacement::Torus {
            axes,
            n_axes,
            link,
            hop_latency,
        } => {
            let parts: Vec<(u64, bool)> = axes[..n_axes]
                .iter()
                .map(|a| (a.size, !a.wraparound))
                .collect();
            let flipped = AxisPlacement::torus(link, hop_latency, &parts);
            let t = cost(op, Bytes::new(v), &flipped, &mut crate::trace::NoTrace)
                .time
                .get();
            let name = if axes[..n_axes].iter().any(|a| !a.wraparound) {
                "with wraparound (a full bidirectional ring)"
            } else {
                "without wraparound"
            };
            out.push(Alternative {
                name: name.into(),
                time_s: t,
                note: flipped.describe(),
            });
            if n_axes == 1 && axes[0].wraparound && op != Collective::PointToPoint {
                let x = axes[0].size as f64;
                let w1 = link.one_way_rate().get();
                let (t, formula, note) = unidirectional(op, v, x, w1);
                alt_step(
                    tr,
                    "collective.unidirectional",
                    "Unidirectional ring",
                    formula,
                    v,
                    w1,
                    t,
                );
                out.push(Alternative {
                    name: "unidirectional ring".into(),
                    time_s: t,
                    note: format!("{formula}: {note}"),
                });
            }
        }
        AxisPlacement::Gpu(GpuAxis {
            size,
            per_node,
            nvlink,
            scale_out,
            nvlink_latency,
            scale_out_latency,
        }) => {
            let nodes = size / per_node.max(1);
            if op == Collective::AllReduce {
                let sharp_nv = chip.nvlink.as_ref().is_some_and(|n| n.in_network_reduction);
                let sharp_so = chip
                    .scale_out
                    .as_ref()
                    .is_some_and(|s| s.in_network_reduction);
                if nodes <= 1 && sharp_nv {
                    let w = nvlink.one_way_rate().get();
                    let t = v / w;
                    alt_step(
                        tr,
                        "collective.sharp",
                        "AllReduce with NVLink SHARP (in-network reduction)",
                        "V/W_gpu",
                        v,
                        w,
                        t,
                    );
                    out.push(Alternative {
                        name: "NVLink SHARP (in-network reduction)".into(),
                        time_s: t,
                        note: "V/W_gpu: the switch reduces, each GPU sends V once; the book measures ≈30% over the ring, not 2x".into(),
                    });
                } else if nodes > 1 && sharp_nv && sharp_so {
                    let w_node = scale_out.one_way_rate().get() * per_node as f64;
                    let t = (v / nvlink.one_way_rate().get()).max(v / w_node);
                    alt_step(
                        tr,
                        "collective.sharp",
                        "AllReduce with in-network reduction at every level",
                        "max(V/W_gpu, V/W_node)",
                        v,
                        w_node,
                        t,
                    );
                    out.push(Alternative {
                        name: "SHARP at every level (in-network reduction)".into(),
                        time_s: t,
                        note: "max(V/W_gpu, V/W_node)".into(),
                    });
                }
            }
            if matches!(
                op,
                Collective::AllGather | Collective::ReduceScatter | Collective::AllReduce
            ) {
                let rounds = if op == Collective::AllReduce {
                    2.0
                } else {
                    1.0
                };
                let hops = (per_node.max(1) as f64).log2().ceil() * nvlink_latency.get()
                    + (nodes.max(1) as f64).log2().ceil() * scale_out_latency.get();
                let t = c.bandwidth_time.get().max(rounds * hops);
                out.push(Alternative {
                    name: "latency-optimised tree".into(),
                    time_s: t,
                    note: format!(
                        "log2(N) hops instead of N−1 (latency {} instead of {}), same bandwidth term",
                        Seconds::new(rounds * hops),
                        c.latency_time
                    ),
                });
            }
        }
        _ => {}
    }
    out
}

impl Render for CollectiveReport {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        d.title(format!(
            "{} over {} ({} devices) on {}",
            self.op,
            self.axes.join(""),
            self.axis_size,
            self.chip
        ));
        let mut f = vec![
            field("mesh", &self.mesh),
            field("placement", &self.placement),
        ];
        if let (Some(a), Some(r)) = (&self.array, &self.result) {
            f.push(field("array", format!("{a} → {r}")));
        }
        f.extend([
            field("V (array per group)", Bytes::new(self.bytes).both()),
            field("shard per device (V/N)", fmt_si(self.shard_bytes, "B")),
            field("sent per device", fmt_si(self.bytes_sent_per_device, "B")),
            field("algorithm", &self.algorithm),
        ]);
        d.fields(f);
        let mut t = Table::new(
            &["level", "devices", "bandwidth", "wraparound", "hops"],
            &["devices", "bandwidth", "hops"],
        );
        for l in &self.levels {
            t.row(vec![
                l.name.clone(),
                l.devices.to_string(),
                fmt_si(l.bandwidth_bytes_per_s, "B/s"),
                l.wraparound
                    .map_or(String::new(), |w| crate::view::yes_no(w).into()),
                format!("{}", l.hops),
            ]);
        }
        d.table(t.drop_empty_columns());
        d.fields(vec![
            field("T_bandwidth", Seconds::new(self.bandwidth_time_s)),
            field("T_latency", Seconds::new(self.latency_time_s)),
            field(
                "time",
                format!("{} ({}-bound)", Seconds::new(self.time_s), self.bound),
            ),
            field(
                "effective bandwidth V/T",
                fmt_si(self.effective_bandwidth_bytes_per_s, "B/s"),
            ),
            field(
                "latency-bound below",
                fmt_si(self.latency_bound_below_bytes, "B"),
            ),
        ]);
        if !self.alternatives.is_empty() {
            let mut t = Table::new(&["alternative", "time", "how"], &["time"]);
            for a in &self.alternatives {
                t.row(vec![
                    a.name.clone(),
                    Seconds::new(a.time_s).to_string(),
                    a.note.clone(),
                ]);
            }
            d.table(t);
        }
        for n in &self.notes {
            d.note(n);
        }
        d
    }
}
