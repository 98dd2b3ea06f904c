/*!
`meshplan collective`: the time of one AllGather, ReduceScatter, AllReduce,
AllToAll, permute or gather to one device of an array over named mesh axes
(book ch2, ch3, ch12), with the algorithm and the level that bounds it, the
bytes each device sends, whether it is latency- or bandwidth-bound, and the
alternatives the book discusses (a torus axis with or without wraparound,
in-network reduction, a latency-optimised tree). Options ask the book's
further questions: a permute's route over k hops (`--to`, `--hops`), a
ragged AllToAll (`--topk`), a pipeline staged from host memory
(`--from-host`), and the book's conventions (`--full-bandwidth`,
`--drop-ring-factor`) with the exact figure beside.

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
use crate::collectives::{
    self, cluster_levels, cost, cost_with, ragged, staged, torus_route, AxisPlacement, Collective,
    CollectiveCost, Conventions, GpuAxis, Level, Ragged, Route, RouteCost, RouteHop, Staged,
};
use crate::error::{Error, Result};
use crate::trace::{NoTrace, Step, Tracer};
use crate::units::{fmt_si, Bytes, DType, Seconds};
use crate::view::{field, Doc, Render, Table};

/// The question, as written (flags of `meshplan collective`, or a claim's
/// `args`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct CollectiveQuery {
    /// allgather | reducescatter | allreduce | alltoall | permute | gather
    /// (to one device), with the axes as a subscript (`allgather_X`).
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
    /// permute: the destination, as offsets from chip 0 along the mesh's
    /// axes ("3,3" or "X=3,Y=3"; TPU slices): hops, paths, first byte.
    #[cfg_attr(feature = "clap", arg(long))]
    pub to: Option<String>,
    /// permute: the number of hops of one path (any fabric).
    #[cfg_attr(feature = "clap", arg(long))]
    pub hops: Option<u64>,
    /// alltoall: a ragged (top-k) AllToAll, each token to at most k shards.
    #[cfg_attr(feature = "clap", arg(long))]
    pub topk: Option<u64>,
    /// The shards start in host memory: add the host → HBM load and the
    /// HBM read as pipelined stages (book ch2 Q6).
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub from_host: bool,
    /// The book's convention: every TPU axis a full bidirectional ring
    /// (wraparound) even where the slice has none; the exact figure is
    /// shown beside.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub full_bandwidth: bool,
    /// The book's approximation V·(D−1)/D ≈ V on GPU and DCN levels; the
    /// exact figure is shown beside.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub drop_ring_factor: bool,
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
    /// The book's approximations the time is costed under ("exact" when
    /// none).
    pub convention: String,
    /// The same question without the book's approximations, seconds
    /// (= `time_s` when `convention` is "exact").
    pub exact_time_s: f64,
    /// V / T: what the collective achieves, latency included, bytes/s.
    pub effective_bandwidth_bytes_per_s: f64,
    /// V / T_bandwidth: the links' rate alone, bytes/s.
    pub bandwidth_term_bytes_per_s: f64,
    /// The level with the least AllGather bandwidth (`levels`: "NVLink",
    /// "leaf", "spine", "scale-out", "DCN"), "" on a torus or one level.
    pub bounding_level: String,
    /// V below which the collective is latency-bound, bytes.
    pub latency_bound_below_bytes: f64,
    /// Other ways to run it.
    pub alternatives: Vec<Alternative>,
    /// permute with `--to` or `--hops`: the route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteCost>,
    /// alltoall with `--topk`: the ragged AllToAll beside the dense one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ragged: Option<Ragged>,
    /// `--from-host`: the staged pipeline host → HBM → collective → HBM read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staged: Option<Staged>,
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
        "allgather" | "ag" => Collective::AllGather,
        "gather" | "gathertoone" | "gatherone" | "gathertoroot" => Collective::Gather,
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
                "gather",
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
        Collective::AllGather | Collective::Gather => r
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
    let (op, mut sub) = parse_op_axes(&q.op)?;
    let chip = cat.chip_given(&q.hw)?;
    let mesh_text = q.mesh.as_deref().ok_or_else(|| {
        Error::Invalid("no mesh: give --mesh X=4,Y=4 (or a shape like 4x4; GPUs NODESxGPUS)".into())
    })?;
    let mesh = NamedMesh::parse(mesh_text, chip)?;
    check_options(q, op)?;
    let to = q.to.as_deref().map(|t| parse_to(t, &mesh)).transpose()?;
    if let (Some(to), None, None) = (&to, &sub, &q.axes) {
        // the route's axes: those it moves along
        let moved: Vec<String> = to.iter().filter(|a| a.1 > 0).map(|a| a.0.clone()).collect();
        sub = Some(if moved.is_empty() {
            vec![mesh.axes[0].name.clone()]
        } else {
            moved
        });
    }
    let o = operand(q, op, sub, &mesh)?;
    let placement = mesh.placement(chip, &o.axes)?;
    let n = mesh.size_of(&o.axes)?;
    let conv = Conventions {
        full_bandwidth: q.full_bandwidth,
        drop_ring_factor: q.drop_ring_factor,
    };
    let v = Bytes::new(o.v);
    let mut notes = o.notes;
    let (mut c, mut exact) = (
        cost_with(op, v, &placement, conv, tr),
        cost(op, v, &placement, &mut NoTrace),
    );
    let route = match (&to, q.hops) {
        (Some(to), _) => Some(torus_route_of(chip, &mesh, to, conv.full_bandwidth)?),
        (None, Some(k)) => Some(Route { hops: k, paths: 1 }),
        _ => None,
    };
    let route = route
        .map(|r| -> Result<RouteCost> {
            let (w1, hop) = link_of(&placement)?;
            let exact_r = match &to {
                Some(to) => torus_route_of(chip, &mesh, to, false)?,
                None => r,
            };
            exact = routed(&exact_r.cost(o.v, w1, hop, &mut NoTrace), v);
            let rc = r.cost(o.v, w1, hop, tr);
            c = routed(&rc, v);
            notes.push("a point-to-point's latency and bandwidth terms add: T = k·T_hop + V/(p·W) (book ch2 Q5)".into());
            Ok(rc)
        })
        .transpose()?;
    let ragged = q.topk.map(|k| {
        let r = ragged(k, &c, &placement, tr);
        let e = collectives::ragged(k, &exact, &placement, &mut NoTrace);
        c = scaled(&c, r.fraction);
        exact = scaled(&exact, e.fraction);
        r
    });
    let staged = if q.from_host {
        Some(staged_of(op, chip, o.v, n, c.time.get(), tr)?)
    } else {
        None
    };
    if n <= 1 {
        notes.push("the axes have one device: nothing to communicate".into());
    }
    if conv.any() {
        notes.push(format!(
            "{}: {} (meshplan's exact figure {})",
            conv.describe(),
            c.time,
            exact.time
        ));
    }
    let mut alternatives = if route.is_some() {
        Vec::new()
    } else {
        alternatives(op, o.v, &placement, chip, &exact, tr)
    };
    if let (Some(to), Some(r)) = (&to, &route) {
        let (w1, hop) = link_of(&placement)?;
        let wrapped = torus_route_of(chip, &mesh, to, true)?.cost(o.v, w1, hop, &mut NoTrace);
        if (wrapped.time_s - r.time_s).abs() > 0.0 {
            alternatives.push(Alternative {
                name: "with wraparound (a full bidirectional ring)".into(),
                time_s: wrapped.time_s,
                note: format!("{} hops, {} path(s)", wrapped.hops, wrapped.paths),
            });
        } else if conv.full_bandwidth {
            alternatives.push(Alternative {
                name: "as placed (exact)".into(),
                time_s: exact.time.get(),
                note: placement.describe(),
            });
        }
    }
    let mut r = report(
        op,
        chip,
        &mesh,
        o.axes,
        n,
        &placement,
        o.notation,
        o.result,
        &c,
        alternatives,
        notes,
    );
    if route.is_some() {
        r.algorithm = format!("a send over the route's hops: {}", placement.describe());
    }
    level_note(&mut r, &placement);
    r.convention = conv.describe();
    r.exact_time_s = exact.time.get();
    record_figures(&r, conv.any(), tr);
    r.route = route;
    r.ragged = ragged;
    r.staged = staged;
    Ok(r)
}

/// The report's derived figures for --explain: each level's AllGather
/// bandwidth, V/T, and the exact figure beside a convention.
fn record_figures<T: Tracer>(r: &CollectiveReport, convention: bool, tr: &mut T) {
    for (i, l) in r.levels.iter().enumerate() {
        tr.record(|| {
            Step::new(
                &format!("collective.level.{i}"),
                &format!("AllGather bandwidth of the {} level", l.name),
                "D·W/(D−1)",
            )
            .bind("D", l.devices as f64, "")
            .bind("W", l.bandwidth_bytes_per_s, "B/s")
            .result(l.allgather_bandwidth_bytes_per_s, "B/s")
            .source("How To Scale Your Model ch12 (cross-node collectives)")
        });
    }
    tr.record(|| {
        Step::new(
            "collective.effective_bandwidth",
            "Effective bandwidth",
            "V/T",
        )
        .bind("V", r.bytes, "B")
        .bind("T", r.time_s, "s")
        .result(r.effective_bandwidth_bytes_per_s, "B/s")
        .source("meshplan (issue 23: latency included)")
    });
    if convention {
        tr.record(|| {
            Step::new(
                "collective.exact",
                &format!("Exact figure beside the convention ({})", r.convention),
                "T without the book's approximations",
            )
            .bind("T_convention", r.time_s, "s")
            .result(r.exact_time_s, "s")
            .source("meshplan")
        });
    }
}

/// Where the book's per-level model (ch12, `levels`) and the costed flat
/// scale-out ring differ, say so with both figures.
fn level_note(r: &mut CollectiveReport, p: &AxisPlacement) {
    if !matches!(p, AxisPlacement::Gpu(_)) || r.op != Collective::AllGather {
        return;
    }
    let min = r
        .levels
        .iter()
        .map(|l| l.allgather_bandwidth_bytes_per_s)
        .fold(f64::INFINITY, f64::min);
    let costed = r.bandwidth_term_bytes_per_s;
    if min.is_finite() && costed.is_finite() && (min - costed).abs() > 1e-9 * costed {
        r.notes.push(format!(
            "the book's per-level model bounds it at {} ({}: V·max_i (D_i−1)/(D_i·W_i)); meshplan costs one flat ring over the nodes at {}",
            fmt_si(min, "B/s"),
            r.bounding_level,
            fmt_si(costed, "B/s")
        ));
    }
}

/// Options that belong to one op only, refused on the others.
fn check_options(q: &CollectiveQuery, op: Collective) -> Result<()> {
    let only = |flag: &str, want: Collective| {
        Err(Error::Invalid(format!(
            "--{flag} applies to {want} only, not to {op}"
        )))
    };
    if (q.to.is_some() || q.hops.is_some()) && op != Collective::PointToPoint {
        return only(
            if q.to.is_some() { "to" } else { "hops" },
            Collective::PointToPoint,
        );
    }
    if q.to.is_some() && q.hops.is_some() {
        return Err(Error::Invalid(
            "give --to (the destination; hops counted on the torus) or --hops, not both".into(),
        ));
    }
    if q.topk.is_some() && op != Collective::AllToAll {
        return only("topk", Collective::AllToAll);
    }
    if q.topk == Some(0) {
        return Err(Error::Invalid(
            "--topk must be at least 1 (each token goes to k shards)".into(),
        ));
    }
    Ok(())
}

/// `--to`: offsets along the mesh's axes, "3,3" (in the mesh's order) or
/// "X=3,Y=3" (unnamed axes 0).
fn parse_to(t: &str, mesh: &NamedMesh) -> Result<Vec<(String, u64)>> {
    let bad = || Error::BadValue {
        what: "to".into(),
        input: t.into(),
        expected: format!(
            "the destination's offsets from chip 0 along the mesh {}: \"3,3\" or \"X=3,Y=3\"",
            mesh.describe()
        ),
    };
    let parts: Vec<&str> = t
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    let mut out: Vec<(String, u64)> = mesh.axes.iter().map(|a| (a.name.clone(), 0)).collect();
    if parts.iter().all(|p| p.contains('=')) && !parts.is_empty() {
        for p in parts {
            let (name, d) = p.split_once('=').ok_or_else(bad)?;
            let a = mesh.axis(name.trim())?;
            let d = crate::units::parse_count(d.trim()).map_err(|_| bad())?;
            if let Some(slot) = out.iter_mut().find(|x| x.0 == a.name) {
                slot.1 = d;
            }
        }
    } else {
        if parts.len() != mesh.axes.len() {
            return Err(bad());
        }
        for (slot, p) in out.iter_mut().zip(parts) {
            slot.1 = crate::units::parse_count(p).map_err(|_| bad())?;
        }
    }
    Ok(out)
}

/// The torus route to `to`, each axis wrapped as the mesh places it (or
/// always, under the book's full-bandwidth convention).
fn torus_route_of(
    chip: &crate::hardware::Chip,
    mesh: &NamedMesh,
    to: &[(String, u64)],
    full_bandwidth: bool,
) -> Result<Route> {
    let mut hops = Vec::new();
    for (name, d) in to {
        let size = mesh.axis(name)?.size;
        let wraparound = match mesh.placement(chip, std::slice::from_ref(name))? {
            AxisPlacement::Torus { axes, .. } => axes[0].wraparound,
            AxisPlacement::Trivial => false,
            _ => {
                return Err(Error::Invalid(format!(
                    "--to counts hops on a TPU slice's torus; {} axis {name} is switched (GPUs, DCN): give --hops",
                    chip.name
                )))
            }
        };
        hops.push(RouteHop {
            size,
            wraparound: wraparound || full_bandwidth,
            offset: *d,
        });
    }
    torus_route(&hops)
}

/// One link's one-way rate and hop latency on `p` (a route's links).
fn link_of(p: &AxisPlacement) -> Result<(f64, f64)> {
    Ok(match *p {
        AxisPlacement::Torus {
            link, hop_latency, ..
        } => (link.one_way_rate().get(), hop_latency.get()),
        AxisPlacement::Gpu(g) if g.size > g.per_node => {
            (g.scale_out.one_way_rate().get(), g.scale_out_latency.get())
        }
        AxisPlacement::Gpu(g) => (g.nvlink.one_way_rate().get(), g.nvlink_latency.get()),
        AxisPlacement::Dcn {
            per_chip, latency, ..
        } => (per_chip.one_way_rate().get(), latency.get()),
        AxisPlacement::Trivial => {
            return Err(Error::Invalid(
                "the route's axes have one device: nothing to send".into(),
            ))
        }
    })
}

/// A route as the collective's cost: latency and bandwidth add.
fn routed(r: &RouteCost, v: Bytes) -> CollectiveCost {
    CollectiveCost {
        kind: Collective::PointToPoint,
        bytes: v,
        axis_size: 2,
        bytes_sent_per_device: v,
        bandwidth_time: Seconds::new(r.transfer_s),
        latency_time: Seconds::new(r.first_byte_s),
        time: Seconds::new(r.time_s),
        latency_bound: r.first_byte_s > r.transfer_s,
    }
}

/// `c` with its bandwidth term scaled by `f` (a ragged AllToAll).
fn scaled(c: &CollectiveCost, f: f64) -> CollectiveCost {
    let bw = c.bandwidth_time.get() * f;
    let lat = c.latency_time.get();
    CollectiveCost {
        bandwidth_time: Seconds::new(bw),
        bytes_sent_per_device: Bytes::new(c.bytes_sent_per_device.get() * f),
        time: Seconds::new(bw.max(lat)),
        latency_bound: lat > bw,
        ..*c
    }
}

/// `--from-host`: the staged pipeline around `op`.
fn staged_of<T: Tracer>(
    op: Collective,
    chip: &crate::hardware::Chip,
    v: f64,
    n: u64,
    collective_s: f64,
    tr: &mut T,
) -> Result<Staged> {
    let w_host = chip.pcie.ok_or_else(|| {
        Error::Invalid(format!(
            "--from-host needs a host link: {} has no [host] pcie_bandwidth_one_way in the catalog",
            chip.name
        ))
    })?;
    let n = n.max(1) as f64;
    let result = match op {
        Collective::ReduceScatter | Collective::AllToAll => v / n,
        _ => v,
    };
    Ok(staged(
        v / n,
        w_host.one_way_rate().get(),
        collective_s,
        result,
        chip.hbm_bandwidth.get(),
        tr,
    ))
}

#[allow(clippy::too_many_arguments)] // one report's parts
fn report(
    op: Collective,
    chip: &crate::hardware::Chip,
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
    let (bw, lat, t) = (c.bandwidth_time.get(), c.latency_time.get(), c.time.get());
    let levels = cluster_levels(chip, p);
    let hierarchical = matches!(p, AxisPlacement::Gpu(_) | AxisPlacement::Dcn { .. });
    let bounding_level = levels
        .iter()
        .filter(|_| hierarchical)
        .min_by(|a, b| {
            a.allgather_bandwidth_bytes_per_s
                .total_cmp(&b.allgather_bandwidth_bytes_per_s)
        })
        .map_or(String::new(), |l| {
            l.name.split(" (").next().unwrap_or(&l.name).to_string()
        });
    let rate = |t: f64| if t > 0.0 { v / t } else { f64::INFINITY };
    CollectiveReport {
        chip: chip.name.clone(),
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
        levels,
        bandwidth_time_s: bw,
        latency_time_s: lat,
        time_s: t,
        bound: if c.latency_bound {
            "latency"
        } else {
            "bandwidth"
        }
        .into(),
        convention: Conventions::default().describe(),
        exact_time_s: t,
        effective_bandwidth_bytes_per_s: rate(t),
        bandwidth_term_bytes_per_s: rate(bw),
        bounding_level,
        latency_bound_below_bytes: if bw > 0.0 && v > 0.0 {
            lat * v / bw
        } else {
            0.0
        },
        alternatives,
        route: None,
        ragged: None,
        staged: None,
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
    if op == Collective::Gather {
        format!("gather onto one device (the root, device 0; a corner of a torus): every other device's shard flows into the root's links; {}", p.describe())
    } else if op == Collective::AllToAll {
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
            let one_ring = n_axes == 1 && axes[0].wraparound;
            if one_ring && !matches!(op, Collective::PointToPoint | Collective::Gather) {
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
            &[
                "level",
                "devices",
                "bandwidth",
                "AllGather D·W/(D−1)",
                "wraparound",
                "hops",
            ],
            &["devices", "bandwidth", "AllGather D·W/(D−1)", "hops"],
        );
        for l in &self.levels {
            t.row(vec![
                l.name.clone(),
                l.devices.to_string(),
                fmt_si(l.bandwidth_bytes_per_s, "B/s"),
                fmt_si(l.allgather_bandwidth_bytes_per_s, "B/s"),
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
                "link rate V/T_bandwidth",
                fmt_si(self.bandwidth_term_bytes_per_s, "B/s"),
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
        self.render_extras(&mut d);
        for n in &self.notes {
            d.note(n);
        }
        d
    }
}

impl CollectiveReport {
    /// The convention, route, ragged and staged sections, when present.
    fn render_extras(&self, d: &mut Doc) {
        let mut f = Vec::new();
        if self.convention != "exact" {
            f.push(field("convention", &self.convention));
            f.push(field("exact time", Seconds::new(self.exact_time_s)));
        }
        if !self.bounding_level.is_empty() && self.levels.len() > 1 {
            f.push(field("bounding level", &self.bounding_level));
        }
        if let Some(r) = &self.route {
            f.extend([
                field(
                    "route",
                    format!("{} hops, {} path(s) at once", r.hops, r.paths),
                ),
                field("first byte after (k·T_hop)", Seconds::new(r.first_byte_s)),
                field(
                    "last byte after (k·T_hop + V/(p·W))",
                    Seconds::new(r.time_s),
                ),
            ]);
        }
        if let Some(r) = &self.ragged {
            f.extend([
                field(
                    "ragged share min(k/D, 1)",
                    format!("{:.4} (k = {}, D = {})", r.fraction, r.k, r.destinations),
                ),
                field("dense AllToAll", Seconds::new(r.dense_time_s)),
                field(
                    "random top-k 1−((D−1)/D)^k",
                    format!(
                        "{:.4}: {}",
                        r.expected_fraction,
                        Seconds::new(r.expected_time_s)
                    ),
                ),
            ]);
        }
        if let Some(s) = &self.staged {
            f.extend([
                field("host → HBM (V/N / W_host)", Seconds::new(s.host_to_hbm_s)),
                field("collective", Seconds::new(s.collective_s)),
                field("HBM read", Seconds::new(s.hbm_read_s)),
                field(
                    "staged: overlapped (max) … one after another (sum)",
                    format!(
                        "{} … {} ({} bounds)",
                        Seconds::new(s.lower_bound_s),
                        Seconds::new(s.upper_bound_s),
                        s.bound
                    ),
                ),
            ]);
        }
        if !f.is_empty() {
            d.fields(f);
        }
    }
}
