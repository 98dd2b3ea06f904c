/*!
A sharded product `A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]` (book ch3): which
of the book's cases it is, the collectives that make it valid, their cost,
the FLOPs each device does and whether the communication hides under the
compute.

The book's cases, by how the **contracting** dimensions are sharded:

1. neither input is sharded along them: multiply locally, no communication;
2. one input is: AllGather it first (or slice the other input locally,
   multiply, and AllReduce / ReduceScatter the partial sums; ch3 Q4);
3. both are, along the same axes: multiply locally into partial sums
   `C{U_X}`, then AllReduce (or ReduceScatter if the output is sharded over
   that axis);
4. both inputs are sharded along the same axis on non-contracting
   dimensions: the output would use the axis twice, so AllGather one input
   first (the smaller).

Every choice the book leaves open (gather vs slice-and-reduce in case 2,
which input to gather in case 4) is costed; the book's default comes first
and the others are listed as alternatives. A requested output sharding is
reached with ReduceScatter (partial sums onto a sharded dimension),
AllReduce, AllGather (dropping an axis) or AllToAll (moving an axis between
dimensions); adding an axis is a free local slice.
*/

use serde::Serialize;

use super::mesh::NamedMesh;
use super::notation::{ArraySpec, Combine, DimSizes, DimSpec, Expr};
use super::{array_report, check_array, ArrayReport};
use crate::collectives::{cost, Collective};
use crate::error::{Error, Result};
use crate::hardware::Chip;
use crate::trace::{NoTrace, Step, Tracer};
use crate::units::{fmt_si, Bytes, DType, Seconds};
use crate::view::{field, pct, time_bounds, yes_no, Doc, Render, Table};

/// One collective of a strategy.
#[derive(Clone, Debug, Serialize)]
pub struct CollectiveStep {
    /// The collective.
    pub op: Collective,
    /// The axes it runs over.
    pub axes: Vec<String>,
    /// The array before, in the book's notation.
    pub before: String,
    /// The array after.
    pub after: String,
    /// V: the array one group moves, bytes.
    pub bytes: f64,
    /// Its time, seconds.
    pub time_s: f64,
    /// Latency-bound?
    pub latency_bound: bool,
}

/// One way to compute the product: its collectives, FLOPs and times.
#[derive(Clone, Debug, Serialize)]
pub struct Strategy {
    /// What it does, in order.
    pub name: String,
    /// The collectives, in order.
    pub collectives: Vec<CollectiveStep>,
    /// Free local slices (adding an axis to a dimension needs no communication).
    pub local_slices: Vec<String>,
    /// The output as produced.
    pub output: String,
    /// FLOPs each device does.
    pub flops_per_device: f64,
    /// Mesh axes the computation is not split over (each computes the same).
    pub duplicated_over: Vec<String>,
    /// FLOPs per device / C.
    pub t_math_s: f64,
    /// Sum of the collectives' times.
    pub t_comms_s: f64,
    /// max(T_math, T_comms): perfect overlap.
    pub time_lower_s: f64,
    /// T_math + T_comms: no overlap.
    pub time_upper_s: f64,
    /// T_comms ≤ T_math: a collective matmul can hide the communication.
    pub comms_hidden: bool,
}

/// What `meshplan shard` reports for a product.
#[derive(Clone, Debug, Serialize)]
pub struct MatmulReport {
    /// The expression as understood.
    pub expression: String,
    /// The chip.
    pub chip: String,
    /// The mesh.
    pub mesh: String,
    /// The book's cases that apply ("case 2: …").
    pub cases: Vec<String>,
    /// The inputs as given.
    pub inputs: Vec<ArrayReport>,
    /// Contracting dimensions.
    pub contracting: Vec<String>,
    /// 2 × the product of every distinct dimension (no factor 2 without a contraction).
    pub flops_total: f64,
    /// The dtype whose peak is C.
    pub compute_dtype: DType,
    /// C, FLOP/s.
    pub peak_flops_per_s: f64,
    /// FLOPs each device does (book default strategy).
    pub flops_per_device: f64,
    /// Its T_math, seconds.
    pub t_math_s: f64,
    /// Its T_comms, seconds.
    pub t_comms_s: f64,
    /// Its max(T_math, T_comms), seconds.
    pub time_s: f64,
    /// Its T_comms ≤ T_math.
    pub comms_hidden: bool,
    /// The book's default strategy.
    pub strategy: Strategy,
    /// The other valid strategies, fastest first.
    pub alternatives: Vec<Strategy>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// Which array an action applies to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

struct Ctx<'a> {
    sizes: &'a DimSizes,
    mesh: &'a NamedMesh,
    chip: &'a Chip,
}

struct Plan {
    a: ArraySpec,
    b: ArraySpec,
    unreduced: Vec<String>,
    steps: Vec<CollectiveStep>,
    slices: Vec<String>,
    names: Vec<String>,
    mask: u32,
    used: u32,
}

impl Plan {
    fn bit(&mut self) -> bool {
        let b = self.mask >> self.used & 1 == 1;
        self.used += 1;
        b
    }
    fn side(&mut self, s: Side) -> &mut ArraySpec {
        match s {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }
}

fn label(a: &ArraySpec, default: &str) -> String {
    a.name.clone().unwrap_or_else(|| default.to_string())
}

fn bytes_of(a: &ArraySpec, sizes: &DimSizes) -> Result<f64> {
    let shape = sizes.shape(a)?;
    let n = shape
        .iter()
        .try_fold(1u64, |acc, &x| acc.checked_mul(x))
        .ok_or_else(|| {
            Error::Invalid(format!("{} has more than 2^64 - 1 elements", a.notation()))
        })?;
    Ok(a.dtype.unwrap_or(DType::Bf16).bytes_for(n).get())
}

/// V of a collective over `axes` on `a`: its bytes over the axes it uses
/// that are not collected over.
fn group_bytes(a: &ArraySpec, axes: &[String], ctx: &Ctx) -> Result<f64> {
    let others: Vec<String> = a.axes().filter(|x| !axes.contains(x)).cloned().collect();
    Ok(bytes_of(a, ctx.sizes)? / ctx.mesh.size_of(&others)? as f64)
}

fn collective<T: Tracer>(
    op: Collective,
    before: &ArraySpec,
    after: &ArraySpec,
    axes: &[String],
    ctx: &Ctx,
    tr: &mut T,
) -> Result<CollectiveStep> {
    let v = group_bytes(before, axes, ctx)?;
    let p = ctx.mesh.placement(ctx.chip, axes)?;
    let c = cost(op, Bytes::new(v), &p, tr);
    Ok(CollectiveStep {
        op,
        axes: axes.to_vec(),
        before: before.notation(),
        after: after.notation(),
        bytes: v,
        time_s: c.time.get(),
        latency_bound: c.latency_bound,
    })
}

/// AllGather `side`'s dimension `dim` over `axes`.
fn gather<T: Tracer>(
    p: &mut Plan,
    s: Side,
    dim: &str,
    axes: &[String],
    ctx: &Ctx,
    tr: &mut T,
) -> Result<()> {
    let before = p.side(s).clone();
    let mut after = before.clone();
    if let Some(d) = after.dims.iter_mut().find(|d| d.name == dim) {
        d.axes.retain(|x| !axes.contains(x));
    }
    let st = collective(Collective::AllGather, &before, &after, axes, ctx, tr)?;
    p.names.push(format!(
        "AllGather {} over {}",
        label(&before, if s == Side::A { "A" } else { "B" }),
        axes.concat()
    ));
    p.steps.push(st);
    *p.side(s) = after;
    Ok(())
}

fn axes_of(a: &ArraySpec, dim: &str) -> Vec<String> {
    a.dim(dim).map(|d| d.axes.clone()).unwrap_or_default()
}

fn minus(x: &[String], y: &[String]) -> Vec<String> {
    x.iter().filter(|v| !y.contains(v)).cloned().collect()
}

/// Contracting dimensions: cases 2 and 3.
fn contract<T: Tracer>(
    p: &mut Plan,
    contracting: &[String],
    ctx: &Ctx,
    tr: &mut T,
) -> Result<bool> {
    for d in contracting {
        let (sa, sb) = (axes_of(&p.a, d), axes_of(&p.b, d));
        if sa == sb {
            p.unreduced.extend(sa);
            continue;
        }
        let (ea, eb) = (minus(&sa, &sb), minus(&sb, &sa));
        if !ea.is_empty() && !eb.is_empty() {
            gather(p, Side::A, d, &ea, ctx, tr)?;
        }
        let (sa, sb) = (axes_of(&p.a, d), axes_of(&p.b, d));
        let (side, other, extra) = if sa.len() > sb.len() {
            (Side::A, Side::B, minus(&sa, &sb))
        } else {
            (Side::B, Side::A, minus(&sb, &sa))
        };
        if !p.bit() {
            gather(p, side, d, &extra, ctx, tr)?;
            let kept = axes_of(p.side(side), d);
            p.unreduced.extend(kept);
        } else {
            let full = axes_of(p.side(side), d);
            let o = p.side(other);
            if o.axes().any(|x| extra.contains(x)) {
                return Ok(false);
            }
            if let Some(dd) = o.dims.iter_mut().find(|x| &x.name == d) {
                dd.axes = full.clone();
            }
            let sliced = o.notation();
            p.slices.push(format!("slice {sliced} locally"));
            p.unreduced.extend(full);
        }
    }
    Ok(true)
}

/// The output's dimensions with the shardings the local product gives them.
fn inherited(p: &Plan, out_dims: &[String]) -> Vec<DimSpec> {
    out_dims
        .iter()
        .map(|n| {
            let mut axes = axes_of(&p.a, n);
            for x in axes_of(&p.b, n) {
                if !axes.contains(&x) {
                    axes.push(x);
                }
            }
            DimSpec {
                name: n.clone(),
                size: p.a.dim(n).or(p.b.dim(n)).and_then(|d| d.size),
                axes,
            }
        })
        .collect()
}

/// Case 4: an axis that would shard two output dimensions (or one and the
/// partial sums): AllGather one input over it.
fn resolve_conflicts<T: Tracer>(
    p: &mut Plan,
    out_dims: &[String],
    ctx: &Ctx,
    tr: &mut T,
) -> Result<()> {
    loop {
        let dims = inherited(p, out_dims);
        let mut seen: Vec<&String> = p.unreduced.iter().collect();
        let mut clash = None;
        for d in &dims {
            for x in &d.axes {
                if seen.contains(&x) {
                    clash = Some(x.clone());
                }
                seen.push(x);
            }
        }
        let Some(x) = clash else { return Ok(()) };
        let mut cands: Vec<(Side, String)> = Vec::new();
        for (s, arr) in [(Side::A, &p.a), (Side::B, &p.b)] {
            if let Some(d) = arr
                .dims
                .iter()
                .find(|d| d.axes.contains(&x) && out_dims.contains(&d.name))
            {
                cands.push((s, d.name.clone()));
            }
        }
        if cands.len() == 2 {
            let va = group_bytes(&p.a, std::slice::from_ref(&x), ctx)?;
            let vb = group_bytes(&p.b, std::slice::from_ref(&x), ctx)?;
            if (vb < va) != p.bit() {
                cands.swap(0, 1);
            }
        }
        let Some((s, d)) = cands.first().cloned() else {
            return Ok(());
        };
        gather(p, s, &d, &[x], ctx, tr)?;
    }
}

/// One collective over `axis` that takes the output from `cur` to `next`,
/// recorded in the plan.
fn move_output<T: Tracer>(
    p: &mut Plan,
    op: Collective,
    cur: &ArraySpec,
    next: &ArraySpec,
    axis: &String,
    ctx: &Ctx,
    tr: &mut T,
) -> Result<()> {
    let axes = std::slice::from_ref(axis);
    p.steps.push(collective(op, cur, next, axes, ctx, tr)?);
    p.names
        .push(format!("{op} {} over {axis}", label(cur, "C")));
    Ok(())
}

/// Reach the requested output from the local product's output.
fn reach_output<T: Tracer>(
    p: &mut Plan,
    c: ArraySpec,
    want: Option<&ArraySpec>,
    ctx: &Ctx,
    tr: &mut T,
) -> Result<ArraySpec> {
    let mut cur = c;
    let target = match want {
        Some(w) => w.clone(),
        None => {
            let mut w = cur.clone();
            w.unreduced.clear();
            w
        }
    };
    for u in cur.unreduced.clone() {
        let onto = target
            .dims
            .iter()
            .find(|d| d.axes.contains(&u))
            .map(|d| d.name.clone());
        let mut next = cur.clone();
        next.unreduced.retain(|x| x != &u);
        let op = match &onto {
            Some(dn) if !axes_of(&cur, dn).contains(&u) => {
                if let Some(d) = next.dims.iter_mut().find(|d| &d.name == dn) {
                    d.axes.push(u.clone());
                }
                Collective::ReduceScatter
            }
            _ => Collective::AllReduce,
        };
        move_output(p, op, &cur, &next, &u, ctx, tr)?;
        cur = next;
    }
    for i in 0..cur.dims.len() {
        let name = cur.dims[i].name.clone();
        let want_here = axes_of(&target, &name);
        for x in minus(&cur.dims[i].axes, &want_here) {
            let to = target
                .dims
                .iter()
                .find(|d| d.axes.contains(&x))
                .map(|d| d.name.clone());
            let mut next = cur.clone();
            next.dims[i].axes.retain(|y| y != &x);
            let op = match to.and_then(|t| next.dims.iter().position(|d| d.name == t)) {
                Some(j) => {
                    next.dims[j].axes.push(x.clone());
                    Collective::AllToAll
                }
                None => Collective::AllGather,
            };
            move_output(p, op, &cur, &next, &x, ctx, tr)?;
            cur = next;
        }
    }
    for d in &target.dims {
        let extra = minus(&d.axes, &axes_of(&cur, &d.name));
        if !extra.is_empty() {
            p.slices.push(format!(
                "slice {} of {} over {} locally",
                d.name,
                label(&cur, "C"),
                extra.concat()
            ));
            if let Some(cd) = cur.dims.iter_mut().find(|x| x.name == d.name) {
                cd.axes.extend(extra);
            }
        }
    }
    Ok(cur)
}

/// Dimensions: contracting (in both inputs, not the output), and the output's.
fn classify(e: &Expr) -> Result<(Vec<String>, Vec<String>)> {
    let (a, b) = (&e.inputs[0], &e.inputs[1]);
    for arr in [a, b].into_iter().chain(e.output.as_ref()) {
        for (i, d) in arr.dims.iter().enumerate() {
            if arr.dims[..i].iter().any(|x| x.name == d.name) {
                return Err(Error::Invalid(format!(
                    "dimension {} appears twice in {}: name dimensions with letters (I, J, K) and give sizes with --dims",
                    d.name,
                    arr.notation()
                )));
            }
        }
    }
    let in_b = |n: &str| b.dim(n).is_some();
    let out_dims: Vec<String> = match &e.output {
        Some(o) => {
            if let Some(d) = o
                .dims
                .iter()
                .find(|d| a.dim(&d.name).is_none() && !in_b(&d.name))
            {
                return Err(Error::Invalid(format!(
                    "output dimension {} is in neither input",
                    d.name
                )));
            }
            o.dims.iter().map(|d| d.name.clone()).collect()
        }
        None => a
            .dims
            .iter()
            .filter(|d| !in_b(&d.name))
            .chain(b.dims.iter().filter(|d| a.dim(&d.name).is_none()))
            .map(|d| d.name.clone())
            .collect(),
    };
    for arr in [a, b] {
        if let Some(d) = arr
            .dims
            .iter()
            .find(|d| !out_dims.contains(&d.name) && (a.dim(&d.name).is_none() || !in_b(&d.name)))
        {
            return Err(Error::Invalid(format!(
                "dimension {} of {} is in one input only and not in the output: sum it out first",
                d.name,
                arr.notation()
            )));
        }
    }
    let contracting = a
        .dims
        .iter()
        .filter(|d| in_b(&d.name) && !out_dims.contains(&d.name))
        .map(|d| d.name.clone())
        .collect();
    Ok((contracting, out_dims))
}

fn cases(a: &ArraySpec, b: &ArraySpec, contracting: &[String], out_dims: &[String]) -> Vec<String> {
    let mut v = Vec::new();
    let sharded = |x: &ArraySpec, d: &String| !axes_of(x, d).is_empty();
    if contracting.iter().all(|d| !sharded(a, d) && !sharded(b, d)) {
        v.push(
            "case 1: no input is sharded along a contracting dimension — multiply locally".into(),
        );
    }
    if contracting.iter().any(|d| axes_of(a, d) != axes_of(b, d)) {
        v.push("case 2: one input is sharded along a contracting dimension — AllGather it first (or multiply and reduce)".into());
    }
    if contracting
        .iter()
        .any(|d| sharded(a, d) && axes_of(a, d) == axes_of(b, d))
    {
        v.push("case 3: both inputs are sharded along a contracting dimension on the same axes — multiply into partial sums, then AllReduce or ReduceScatter".into());
    }
    let free = |x: &ArraySpec, y: &ArraySpec| -> Vec<String> {
        x.dims
            .iter()
            .filter(|d| out_dims.contains(&d.name) && y.dim(&d.name).is_none())
            .flat_map(|d| d.axes.clone())
            .collect()
    };
    let (fa, fb) = (free(a, b), free(b, a));
    if let Some(x) = fa.iter().find(|x| fb.contains(x)) {
        v.push(format!("case 4: both inputs are sharded along {x} on non-contracting dimensions — AllGather one of them first"));
    }
    v
}

fn run_plan<T: Tracer>(
    e: &Expr,
    contracting: &[String],
    out_dims: &[String],
    mask: u32,
    ctx: &Ctx,
    tr: &mut T,
) -> Result<Option<Plan>> {
    let mut p = Plan {
        a: e.inputs[0].clone(),
        b: e.inputs[1].clone(),
        unreduced: Vec::new(),
        steps: Vec::new(),
        slices: Vec::new(),
        names: Vec::new(),
        mask,
        used: 0,
    };
    if !contract(&mut p, contracting, ctx, tr)? {
        return Ok(None);
    }
    for d in out_dims {
        let (sa, sb) = (axes_of(&p.a, d), axes_of(&p.b, d));
        if p.a.dim(d).is_some() && p.b.dim(d).is_some() && sa != sb {
            let (ea, eb) = (minus(&sa, &sb), minus(&sb, &sa));
            if !ea.is_empty() {
                gather(&mut p, Side::A, d, &ea, ctx, tr)?;
            }
            if !eb.is_empty() {
                gather(&mut p, Side::B, d, &eb, ctx, tr)?;
            }
        }
    }
    resolve_conflicts(&mut p, out_dims, ctx, tr)?;
    Ok(Some(p))
}

fn compute_dtype(a: &ArraySpec, b: &ArraySpec) -> DType {
    let (x, y) = (
        a.dtype.unwrap_or(DType::Bf16),
        b.dtype.unwrap_or(DType::Bf16),
    );
    if x.bits() >= y.bits() {
        x
    } else {
        y
    }
}

#[allow(clippy::too_many_arguments)] // one strategy's parts
fn finish<T: Tracer>(
    mut p: Plan,
    e: &Expr,
    out_dims: &[String],
    flops_total: f64,
    c: f64,
    ctx: &Ctx,
    tr: &mut T,
) -> Result<Strategy> {
    let mut local = ArraySpec {
        name: Some(
            e.output
                .as_ref()
                .and_then(|o| o.name.clone())
                .unwrap_or_else(|| "C".into()),
        ),
        dtype: Some(
            e.output
                .as_ref()
                .and_then(|o| o.dtype)
                .unwrap_or(compute_dtype(&p.a, &p.b)),
        ),
        dims: inherited(&p, out_dims),
        unreduced: p.unreduced.clone(),
    };
    local.dims.iter_mut().for_each(|d| {
        if d.size.is_none() {
            d.size = ctx.sizes.size_of(d).ok();
        }
    });
    let mut compute_axes: Vec<String> = p.a.axes().chain(p.b.axes()).cloned().collect();
    compute_axes.sort();
    compute_axes.dedup();
    let split = ctx.mesh.size_of(&compute_axes)? as f64;
    let flops = flops_total / split;
    let t_math = flops / c;
    tr.record(|| {
        Step::new(
            "shard.flops_per_device",
            "FLOPs per device",
            "2·Π(dims) / Π|axes sharding the computation|",
        )
        .bind("FLOPs", flops_total, "FLOPs")
        .bind("Π|axes|", split, "")
        .result(flops, "FLOPs")
        .source("How To Scale Your Model ch3, ch4 Q2")
    });
    let mut names = p.names.clone();
    names.push("multiply locally".into());
    let out = reach_output(&mut p, local, e.output.as_ref(), ctx, tr)?;
    names.extend(p.names.iter().skip(names.len() - 1).cloned());
    let t_comms = p.steps.iter().fold(0.0, |acc, s| acc + s.time_s);
    Ok(Strategy {
        name: names.join(", then "),
        duplicated_over: ctx
            .mesh
            .axes
            .iter()
            .filter(|x| !compute_axes.contains(&x.name))
            .map(|x| x.name.clone())
            .collect(),
        collectives: p.steps,
        local_slices: p.slices,
        output: out.notation(),
        flops_per_device: flops,
        t_math_s: t_math,
        t_comms_s: t_comms,
        time_lower_s: t_math.max(t_comms),
        time_upper_s: t_math + t_comms,
        comms_hidden: t_comms <= t_math,
    })
}

/// Analyze a product of two sharded arrays on `mesh` and `chip`.
pub fn analyze<T: Tracer>(
    e: &Expr,
    sizes: &DimSizes,
    mesh: &NamedMesh,
    chip: &Chip,
    tr: &mut T,
) -> Result<MatmulReport> {
    if e.inputs.len() != 2 || e.combine != Combine::Product {
        return Err(Error::Invalid(
            "meshplan shard takes one array, or a product of two: A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]".into(),
        ));
    }
    let (a, b) = (&e.inputs[0], &e.inputs[1]);
    for arr in [a, b].into_iter().chain(e.output.as_ref()) {
        check_array(arr, sizes, mesh)?;
    }
    if let Some(x) = a.unreduced.first().or(b.unreduced.first()) {
        return Err(Error::Invalid(format!(
            "an input holds partial sums over {x}: reduce it first (meshplan collective allreduce)"
        )));
    }
    let (contracting, out_dims) = classify(e)?;
    let mut all: Vec<&DimSpec> = a.dims.iter().chain(b.dims.iter()).collect();
    all.sort_by(|x, y| x.name.cmp(&y.name));
    all.dedup_by(|x, y| x.name == y.name);
    let prod = all.iter().try_fold(1f64, |acc, d| {
        Ok::<f64, Error>(acc * sizes.size_of(d)? as f64)
    })?;
    let flops_total = if contracting.is_empty() {
        prod
    } else {
        2.0 * prod
    };
    let dt = compute_dtype(a, b);
    let c = chip.flops(dt).get();
    let ctx = Ctx { sizes, mesh, chip };
    let first = run_plan(e, &contracting, &out_dims, 0, &ctx, &mut NoTrace)?;
    let k = first.as_ref().map_or(0, |p| p.used).min(4);
    let mut strategies = Vec::new();
    for mask in 0..(1u32 << k) {
        let traced = mask == 0;
        let plan = if traced {
            run_plan(e, &contracting, &out_dims, mask, &ctx, tr)?
        } else {
            run_plan(e, &contracting, &out_dims, mask, &ctx, &mut NoTrace)?
        };
        if let Some(p) = plan {
            let s = if traced {
                finish(p, e, &out_dims, flops_total, c, &ctx, tr)?
            } else {
                finish(p, e, &out_dims, flops_total, c, &ctx, &mut NoTrace)?
            };
            if !strategies.iter().any(|x: &Strategy| x.name == s.name) {
                strategies.push(s);
            }
        }
    }
    if strategies.is_empty() {
        return Err(Error::Invalid(
            "no valid way to compute this product on this mesh".into(),
        ));
    }
    let strategy = strategies.remove(0);
    strategies.sort_by(|x, y| x.time_lower_s.total_cmp(&y.time_lower_s));
    let mut notes = Vec::new();
    if let Some(best) = strategies
        .first()
        .filter(|s| s.time_lower_s < strategy.time_lower_s)
    {
        notes.push(format!(
            "the alternative \"{}\" is faster here ({} vs {})",
            best.name,
            Seconds::new(best.time_lower_s),
            Seconds::new(strategy.time_lower_s)
        ));
    }
    if !strategy.duplicated_over.is_empty() {
        notes.push(format!(
            "the computation is not split over {}: every device along it computes the same",
            strategy.duplicated_over.join(", ")
        ));
    }
    Ok(MatmulReport {
        expression: format!(
            "{} * {} -> {}",
            a.notation(),
            b.notation(),
            e.output
                .as_ref()
                .map_or_else(|| strategy.output.clone(), |o| o.notation())
        ),
        chip: chip.name.clone(),
        mesh: mesh.describe(),
        cases: cases(a, b, &contracting, &out_dims),
        inputs: vec![
            array_report(a, sizes, mesh, &mut NoTrace)?,
            array_report(b, sizes, mesh, &mut NoTrace)?,
        ],
        contracting,
        flops_total,
        compute_dtype: dt,
        peak_flops_per_s: c,
        flops_per_device: strategy.flops_per_device,
        t_math_s: strategy.t_math_s,
        t_comms_s: strategy.t_comms_s,
        time_s: strategy.time_lower_s,
        comms_hidden: strategy.comms_hidden,
        strategy,
        alternatives: strategies,
        notes,
    })
}

fn strategy_table(title: &str, s: &Strategy) -> (Vec<(String, String)>, Table) {
    let mut t = Table::new(
        &["collective", "axes", "array", "V", "time"],
        &["V", "time"],
    );
    for c in &s.collectives {
        t.row(vec![
            c.op.to_string(),
            c.axes.concat(),
            format!("{} → {}", c.before, c.after),
            fmt_si(c.bytes, "B"),
            format!(
                "{}{}",
                Seconds::new(c.time_s),
                if c.latency_bound { " (latency)" } else { "" }
            ),
        ]);
    }
    let f = vec![
        field(title, &s.name),
        field("output", &s.output),
        field("FLOPs per device", fmt_si(s.flops_per_device, "FLOPs")),
        field("T_math", Seconds::new(s.t_math_s)),
        field("T_comms", Seconds::new(s.t_comms_s)),
        time_bounds(s.time_lower_s, s.time_upper_s),
        field(
            "comms hidden by compute",
            format!(
                "{} (T_comms/T_math = {})",
                yes_no(s.comms_hidden),
                if s.t_math_s > 0.0 {
                    pct(s.t_comms_s / s.t_math_s)
                } else {
                    "-".into()
                }
            ),
        ),
    ];
    (f, t)
}

impl Render for MatmulReport {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        d.title(format!(
            "{} on {} ({})",
            self.expression, self.mesh, self.chip
        ));
        d.list("The book's cases", self.cases.clone());
        let mut t = Table::new(&["input", "local shape", "per device"], &["per device"]);
        for a in &self.inputs {
            t.row(vec![
                a.array.clone(),
                format!("{:?}", a.local_shape),
                fmt_si(a.bytes_per_device, "B"),
            ]);
        }
        d.table(t);
        d.fields(vec![
            field("FLOPs (total)", fmt_si(self.flops_total, "FLOPs")),
            field(
                "C",
                format!(
                    "{} ({})",
                    fmt_si(self.peak_flops_per_s, "FLOP/s"),
                    self.compute_dtype
                ),
            ),
        ]);
        let (f, t) = strategy_table("strategy (book default)", &self.strategy);
        d.fields(f);
        if !t.rows.is_empty() {
            d.table(t);
        }
        for s in &self.alternatives {
            let (f, t) = strategy_table("alternative", s);
            d.fields(f);
            if !t.rows.is_empty() {
                d.table(t);
            }
        }
        for s in &self.strategy.local_slices {
            d.note(format!("free: {s}"));
        }
        for n in &self.notes {
            d.note(n);
        }
        d
    }
}
