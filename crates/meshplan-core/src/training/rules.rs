//! The book's training rules (ch5, ch12) as traced functions: critical batch
//! sizes per strategy, the tensor-parallel limit, the optimal FSDP × TP split
//! and the DCN bound. `alpha` is always `C / W` with `W` the bidirectional
//! per-axis ICI bandwidth on TPUs (2550 on v5p) or the collective bandwidth on
//! GPUs.
//!
//! The top-level keys follow the book's conventions (they reproduce its
//! printed answers); [`ExactRules`] (`rules.exact`) gives the same limits
//! from meshplan's collective model where the book's shortcuts go wrong
//! beyond the chapter-5 case: the MoE factor `P/P_active` (≈ E/k) in the
//! data-parallel bound, the ring's `(N−1)/N` and every level of a GPU
//! network (NVLink inside the node, the NICs across nodes), the bandwidth
//! model-parallel groups spanning several nodes give each data-parallel
//! ring, TP inside one NVLink domain on a multi-node cluster, and short TPU
//! axes without wraparound. Each difference is explained in `exact.notes`.

use serde::Serialize;

use crate::hardware::{Chip, ChipKind};
use crate::mesh::{Mesh, Topology};
use crate::model::ModelSpec;
use crate::parallelism::TrainConfig;
use crate::trace::{Step, Tracer};
use crate::units::Seconds;

/// Critical-batch rules and verdicts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rules {
    /// α = C / W_axis (W_ici bidirectional per axis, or NVLink on GPUs).
    pub alpha: f64,
    /// Physical axes of the whole slice (pure DP/FSDP M_X).
    pub m_all: f64,
    /// Tokens per chip for the actual plan: B / (data-like degrees · tp · pp) = B/N.
    pub batch_per_chip: f64,
    /// α / M_X for the pure DP/FSDP case over all chips.
    pub dp_min_batch_per_chip: f64,
    /// Tokens needed for pure DP/FSDP over all chips.
    pub fsdp_min_batch_tokens: f64,
    /// M_X, M_Y assumed for the FSDP+TP rules (book: 2 and 1 on a 3-D slice).
    pub fsdp_tp_m_x: f64,
    /// See `fsdp_tp_m_x`.
    pub fsdp_tp_m_y: f64,
    /// Most chips pure DP/FSDP over all axes can use at this batch and stay
    /// compute-bound: B·M_X/α (= B / `dp_min_batch_per_chip`).
    pub fsdp_max_chips: f64,
    /// Most chips mixed FSDP+TP can use at this batch: B·M_X·M_Y·F/α²
    /// (= B / `fsdp_tp_min_batch_per_chip`).
    pub fsdp_tp_max_chips: f64,
    /// Time to train `train_flops` on `fsdp_max_chips` chips at the MFU
    /// given: train FLOPs/(fsdp_max_chips·C·MFU) (book ch5, LLaMA-3 70B).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsdp_max_chips_train_time_s: Option<Seconds>,
    /// α²/(M_X·M_Y·F).
    pub fsdp_tp_min_batch_per_chip: f64,
    /// M_Y·F/α.
    pub tp_max_degree: f64,
    /// GPUs: the TP limit of a group beyond one node, F/α_out with the
    /// scale-out α = C/W_out (book ch12: "F/2475 beyond a node").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tp_max_degree_beyond_node: Option<f64>,
    /// GPUs: the TP limit of a group spanning exactly two nodes, G + F/α_out
    /// (book ch12: F > α_out·(Y − 8) with G = 8 GPUs per node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tp_max_degree_two_nodes: Option<f64>,
    /// TPU slices with several axes: the model-parallel limit when every
    /// axis of the slice carries it, M·F/α (book ch8: "we could dedicate 2
    /// axes to it, so we're ICI bound when Y > 2·F/2200").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tp_max_degree_all_axes: Option<f64>,
    /// √((B/F)·(M_X/M_Y)·N).
    pub x_opt: f64,
    /// Divisor of N nearest X_opt.
    pub x_chosen: u64,
    /// N / x_chosen.
    pub y_chosen: u64,
    /// C / W_dcn per slice (TPU with DCN).
    pub dcn_min_batch_per_slice: Option<f64>,
    /// Can we use pure DP? with reason.
    pub pure_dp: Verdict,
    /// Can we use pure FSDP?
    pub pure_fsdp: Verdict,
    /// Can we use FSDP + TP?
    pub fsdp_tp: Verdict,
    /// The same limits from the collective model (see the module docs).
    pub exact: ExactRules,
}

/// The book's rules recomputed from meshplan's collective model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExactRules {
    /// P_total / P_active: the MoE factor of the data-parallel bound (≈ E/k;
    /// 1 for a dense model). Compute scales with active parameters,
    /// gradient traffic with all of them.
    pub moe_factor: f64,
    /// AllGather bandwidth V/T of one data axis over every chip of the mesh,
    /// bytes/s (all levels of the network, the ring's (N−1)/N included).
    pub dp_allgather_bandwidth_bytes_per_s: f64,
    /// Tokens per chip pure DP/FSDP over every chip needs to be compute-bound:
    /// (P/P_act)·C/W_dp.
    pub dp_min_batch_per_chip: f64,
    /// For the plan's own data axis (dp or fsdp) with model parallelism
    /// M_p = N/(dp·fsdp) beside it: (P/P_act)·C/(M_p·W_data), tokens per chip
    /// (book ch12 quiz 5: 8-way PP across nodes → ≈ 309 on H100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_dp_min_batch_per_chip: Option<f64>,
    /// Largest TP degree (a divisor of N) that stays compute-bound when placed
    /// on this topology: F·W_tp(Y)/(Y·C) ≥ 1 with W_tp(Y) the AllGather
    /// bandwidth of that TP axis.
    pub tp_max_degree: u64,
    /// Where and why these differ from the book's convention.
    pub notes: Vec<String>,
}

/// Yes/no with the reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// The answer.
    pub ok: bool,
    /// Why.
    pub reason: String,
}

const CH5: &str = "How To Scale Your Model ch5 (training)";

/// α = C / W.
pub fn alpha<T: Tracer>(c: f64, w: f64, tr: &mut T) -> f64 {
    let a = c / w;
    tr.record(|| {
        Step::new("rules.alpha", "Critical intensity α", "C/W_ici")
            .bind("C", c, "FLOP/s")
            .bind("W_ici", w, "B/s")
            .result(a, "FLOPs/B")
            .source(CH5)
    });
    a
}

/// Pure data parallelism / FSDP: compute-bound iff `B/X > α/M_X` tokens per chip.
pub fn dp_min_batch_per_chip<T: Tracer>(alpha: f64, m_x: f64, tr: &mut T) -> f64 {
    let b = alpha / m_x;
    tr.record(|| {
        Step::new(
            "rules.dp_min_batch_per_chip",
            "DP/FSDP minimum batch per chip (T_math = 8BDF/(XC) vs T_comms = 8DF/(W·M_X))",
            "α/M_X",
        )
        .bind("α", alpha, "")
        .bind("M_X", m_x, "")
        .result(b, "tokens")
        .source(CH5)
    });
    b
}

/// The critical intensity of a GPU's NVLink, `C/W_nvlink` (one way per GPU):
/// what a tensor-parallel group inside the node is compared with.
pub fn alpha_nvlink<T: Tracer>(c: f64, w: f64, tr: &mut T) -> f64 {
    let a = c / w;
    tr.record(|| {
        Step::new(
            "rules.alpha_tp",
            "Critical intensity of the TP group's links (NVLink)",
            "C/W_nvlink",
        )
        .bind("C", c, "FLOP/s")
        .bind("W_nvlink", w, "B/s")
        .result(a, "FLOPs/B")
        .source("How To Scale Your Model ch12 (GPUs): TP inside the node against C/W_nvlink")
    });
    a
}

/// Tensor parallelism: compute-bound iff `Y < M_Y·F/α`.
pub fn tp_max_degree<T: Tracer>(f: f64, alpha: f64, m_y: f64, tr: &mut T) -> f64 {
    tp_limit(
        TpLimit {
            id: "rules.tp_max",
            title: "Largest compute-bound TP degree (T_math = 4BDF/(YC) vs T_comms = 4BD/(W·M_Y))",
            source: CH5,
        },
        f,
        alpha,
        m_y,
        tr,
    )
}

/// Model parallelism over every axis of a slice: `Y < M·F/α` (book ch8:
/// the same rule with M_Y = all the slice's axes).
fn tp_max_all_axes<T: Tracer>(f: f64, alpha: f64, m: f64, tr: &mut T) -> f64 {
    tp_limit(
        TpLimit {
            id: "rules.tp_max_all_axes",
            title: "Largest compute-bound model-parallel degree over every axis of the slice",
            source: "How To Scale Your Model ch8: ICI bound when Y > 2·F/2200 with 2 axes",
        },
        f,
        alpha,
        m,
        tr,
    )
}

/// How a TP limit is recorded.
struct TpLimit {
    id: &'static str,
    title: &'static str,
    source: &'static str,
}

/// `M_Y·F/α`, recorded under `w`'s id.
fn tp_limit<T: Tracer>(w: TpLimit, f: f64, alpha: f64, m_y: f64, tr: &mut T) -> f64 {
    let y = m_y * f / alpha;
    tr.record(|| {
        Step::new(w.id, w.title, "M_Y·F/α")
            .bind("M_Y", m_y, "")
            .bind("F", f, "")
            .bind("α", alpha, "")
            .result(y, "ways")
            .source(w.source)
    });
    y
}

/// A GPU's TP limits beyond its node (book ch12, "Tensor parallelism"): a
/// group that leaves the NVLink domain reads the scale-out link, so
/// `Y < F/α_out` with `α_out = C/W_out` (W_out the node's scale-out
/// bandwidth shared by its G GPUs, as the DP rules read it: 400 GB/s per
/// H100 node, α_out ≈ 2475); spanning exactly two nodes, only the `Y − G`
/// ranks beyond the first node's G cross it ("an extra 2× bandwidth"), so
/// `F > α_out·(Y − G)`, i.e. `Y < G + F/α_out`. `None` off GPUs or without
/// a scale-out network. Returns (beyond a node, two nodes).
fn tp_beyond_node<T: Tracer>(chip: &Chip, c: f64, f: f64, tr: &mut T) -> Option<(f64, f64)> {
    let (nv, out) = (chip.nvlink.as_ref()?, chip.scale_out.as_ref()?);
    let g = nv.domain_size.max(1) as f64;
    let w_out = out.per_chip.one_way_rate().get() * g;
    let alpha_out = c / w_out;
    let one = f / alpha_out;
    let two = g + one;
    tr.record(|| {
        Step::new(
            "rules.tp_max_beyond_node",
            "Largest compute-bound TP degree beyond one node",
            "F/α_out, α_out = C/W_out",
        )
        .bind("F", f, "")
        .bind("C", c, "FLOP/s")
        .bind("W_out", w_out, "B/s")
        .result(one, "ways")
        .source("How To Scale Your Model ch12 (GPUs), Tensor Parallelism: F/2475 beyond a node")
    });
    tr.record(|| {
        Step::new(
            "rules.tp_max_two_nodes",
            "Largest compute-bound TP degree over exactly two nodes",
            "G + F/α_out (F > α_out·(Y − G))",
        )
        .bind("G", g, "GPUs per node")
        .bind("F", f, "")
        .bind("α_out", alpha_out, "FLOPs/B")
        .result(two, "ways")
        .source("How To Scale Your Model ch12 (GPUs), Tensor Parallelism: F > 2475·(Y − 8), up to 19-way")
    });
    Some((one, two))
}

/// Mixed FSDP + TP: compute-bound iff `B/N > α²/(M_X·M_Y·F)` (May-2026 text;
/// the Feb-2025 text had `4α²/(M_X·M_Y·F)`, which is what you get by adding
/// T_FSDP and T_TP instead of overlapping them on their separate axes).
pub fn fsdp_tp_min_batch_per_chip<T: Tracer>(
    alpha: f64,
    m_x: f64,
    m_y: f64,
    f: f64,
    tr: &mut T,
) -> f64 {
    let b = alpha * alpha / (m_x * m_y * f);
    tr.record(|| {
        Step::new(
            "rules.fsdp_tp_min_batch_per_chip",
            "FSDP+TP minimum batch per chip",
            "α²/(M_X·M_Y·F)",
        )
        .bind("α", alpha, "")
        .bind("M_X", m_x, "")
        .bind("M_Y", m_y, "")
        .bind("F", f, "")
        .result(b, "tokens")
        .source(CH5)
    });
    b
}

/// Optimal FSDP degree `X_opt = sqrt((B/F)·(M_X/M_Y)·N)`.
pub fn x_opt<T: Tracer>(b: f64, f: f64, n: f64, m_x: f64, m_y: f64, tr: &mut T) -> f64 {
    let x = ((b / f) * (m_x / m_y) * n).sqrt();
    tr.record(|| {
        Step::new("rules.x_opt", "Optimal FSDP degree", "√((B/F)·(M_X/M_Y)·N)")
            .bind("B", b, "tokens")
            .bind("F", f, "")
            .bind("N", n, "chips")
            .bind("M_X", m_x, "")
            .bind("M_Y", m_y, "")
            .result(x, "chips")
            .source(CH5)
    });
    x
}

/// The divisor of `n` closest to `x` on a log scale (how the book rounds
/// X_opt = 1333 to 1024 and 13.7 to 16). Ties go to the smaller divisor.
pub fn nearest_divisor(n: u64, x: f64) -> u64 {
    let mut best = 1;
    let mut best_d = f64::INFINITY;
    let mut d = 1;
    // `d <= n / d`, not `d * d <= n`: no overflow for n near u64::MAX
    while d <= n / d {
        if n % d == 0 {
            for c in [d, n / d] {
                let dist = ((c as f64) / x).ln().abs();
                if dist < best_d - 1e-12 || ((dist - best_d).abs() <= 1e-12 && c < best) {
                    best = c;
                    best_d = dist;
                }
            }
        }
        d += 1;
    }
    best
}

/// Data parallelism across slices over DCN: per-slice batch > `C/W_dcn`.
pub fn dcn_min_batch_per_slice<T: Tracer>(c: f64, w_dcn: f64, tr: &mut T) -> f64 {
    let b = c / w_dcn;
    tr.record(|| {
        Step::new(
            "rules.dcn_min_batch_per_slice",
            "DCN data parallelism: minimum batch per slice (T_comms = 8DF/(M·W_dcn))",
            "C/W_dcn",
        )
        .bind("C", c, "FLOP/s")
        .bind("W_dcn", w_dcn, "B/s")
        .result(b, "tokens")
        .source(CH5)
    });
    b
}

/// FSDP+TP compute/comms ratio `sqrt(B·F·M_X·M_Y)/(α·sqrt(N))` at X_opt.
pub fn fsdp_tp_ratio(b: f64, f: f64, n: f64, alpha: f64, m_x: f64, m_y: f64) -> f64 {
    (b * f * m_x * m_y).sqrt() / (alpha * n.sqrt())
}

/// The bandwidth the book's data-parallel rules use on `mesh`: (W, M_X of the
/// whole slice, the DCN per-slice bound). TPU: the bidirectional ICI per
/// axis, M_X = axes of the slice with more than one chip. GPU: the NVLink
/// egress inside a node, the NIC share of a node across nodes.
fn rules_bandwidth<T: Tracer>(
    chip: &Chip,
    mesh: &Mesh,
    c: f64,
    tr: &mut T,
) -> (f64, f64, Option<f64>) {
    if let (Topology::Torus { shape, .. }, ChipKind::Tpu) = (&mesh.topology, chip.kind) {
        let w = chip
            .ici
            .as_ref()
            .map_or(1.0, |i| i.link.bidirectional_rate().get());
        let m = shape.iter().filter(|&&s| s > 1).count().max(1) as f64;
        let dcn = chip
            .scale_out
            .as_ref()
            .map(|s| dcn_min_batch_per_slice(c, s.per_chip.one_way_rate().get(), tr));
        return (w, m, dcn);
    }
    let nv = chip
        .nvlink
        .as_ref()
        .map_or(1.0, |x| x.per_gpu.one_way_rate().get());
    let w = match (&mesh.topology, &chip.scale_out) {
        (
            Topology::Gpu {
                nodes,
                gpus_per_node,
            },
            Some(s),
        ) if *nodes > 1 => nv.min(s.per_chip.one_way_rate().get() * *gpus_per_node as f64),
        _ => nv,
    };
    (w, 1.0, None)
}

/// What the verdicts compare.
struct RuleInputs {
    alpha: f64,
    w: f64,
    m_all: f64,
    mx: f64,
    my: f64,
    f: f64,
    b: f64,
    n: f64,
    per_chip: f64,
    dp_min: f64,
    ftmin: f64,
    xo: f64,
    xc: u64,
    chips: u64,
}

fn verdict(ok: bool, reason: String) -> Verdict {
    Verdict { ok, reason }
}

/// Can we use pure DP? (memory first, then the critical batch).
fn pure_dp_verdict(r: &RuleInputs, weights_rep: f64, bytes_per_param: f64, hbm: f64) -> Verdict {
    let (per_chip, dp_min) = (r.per_chip, r.dp_min);
    if weights_rep > hbm {
        verdict(false, format!(
            "pure DP replicates parameters + optimizer state ({:.3} GB at {} B/param) on every chip, more than the {:.3} GB of HBM",
            weights_rep / 1e9,
            bytes_per_param,
            hbm / 1e9
        ))
    } else if per_chip < dp_min {
        verdict(false, format!(
            "fits, but B/N = {per_chip:.0} tokens per chip < α/M_X = {dp_min:.0}: communication-bound"
        ))
    } else {
        verdict(
            true,
            format!("fits and B/N = {per_chip:.0} ≥ α/M_X = {dp_min:.0} tokens per chip"),
        )
    }
}

/// Can we use pure FSDP? and FSDP + TP?
fn fsdp_verdicts(r: &RuleInputs) -> (Verdict, Verdict) {
    let (per_chip, dp_min, ftmin) = (r.per_chip, r.dp_min, r.ftmin);
    let fsdp = if per_chip < dp_min {
        verdict(false, format!(
            "memory is not the issue, but FSDP over {} chips needs B > N·α/M_X = {:.4} M tokens and B = {:.4} M: communication-bound",
            r.n,
            r.n * dp_min / 1e6,
            r.b / 1e6
        ))
    } else {
        verdict(
            true,
            format!("B/N = {per_chip:.0} ≥ α/M_X = {dp_min:.0} tokens per chip"),
        )
    };
    let fsdp_tp = if per_chip > ftmin {
        verdict(true, format!(
            "B/N = {per_chip:.0} > α²/(M_X·M_Y·F) = {ftmin:.0} tokens per chip; X_opt = {:.0} → X = {}, Y = {}",
            r.xo,
            r.xc,
            r.chips / r.xc.max(1)
        ))
    } else {
        verdict(false, format!(
            "B/N = {per_chip:.0} ≤ α²/(M_X·M_Y·F) = {ftmin:.0}: communication-bound even with the best FSDP×TP split"
        ))
    };
    (fsdp, fsdp_tp)
}

/// The chips each strategy can use compute-bound at batch B.
fn max_chips<T: Tracer>(r: &RuleInputs, tr: &mut T) -> (f64, f64) {
    let (b, alpha, f, mx, my, m_all) = (r.b, r.alpha, r.f, r.mx, r.my, r.m_all);
    let fsdp_max_chips = b / r.dp_min;
    let fsdp_tp_max_chips = b / r.ftmin;
    tr.record(|| {
        Step::new(
            "rules.fsdp_max_chips",
            "Most chips pure FSDP can use compute-bound",
            "B·M_X/α",
        )
        .bind("B", b, "tokens")
        .bind("M_X", m_all, "")
        .bind("α", alpha, "")
        .result(fsdp_max_chips, "chips")
        .source(CH5)
    });
    tr.record(|| {
        Step::new(
            "rules.fsdp_tp_max_chips",
            "Most chips FSDP+TP can use compute-bound",
            "B·M_X·M_Y·F/α²",
        )
        .bind("B", b, "tokens")
        .bind("M_X", mx, "")
        .bind("M_Y", my, "")
        .bind("F", f, "")
        .bind("α", alpha, "")
        .result(fsdp_tp_max_chips, "chips")
        .source(CH5)
    });
    (fsdp_max_chips, fsdp_tp_max_chips)
}

/// The book's rules for this model, chip and mesh size, with verdicts.
/// `bytes_params_opt`: parameter + optimizer bytes per parameter (pure DP
/// replicates them).
pub fn book_rules<T: Tracer>(
    spec: &ModelSpec,
    chip: &Chip,
    mesh: &Mesh,
    cfg: &TrainConfig,
    p_total: f64,
    bytes_params_opt: f64,
    tr: &mut T,
) -> Rules {
    let n = mesh.chips.max(1) as f64;
    let c = chip.flops(cfg.compute_dtype).get();
    let (w, m_all, dcn) = rules_bandwidth(chip, mesh, c, tr);
    let alpha = alpha(c, w, tr);
    let b = cfg.batch_tokens as f64;
    let f = spec.arch.d_ff as f64;
    let dp_min = dp_min_batch_per_chip(alpha, m_all, tr);
    let (mx, my) = if m_all >= 2.0 {
        (m_all - 1.0, 1.0)
    } else {
        (1.0, 1.0)
    };
    let ftmin = fsdp_tp_min_batch_per_chip(alpha, mx, my, f, tr);
    // a TP group stays inside its NVLink domain (frameworks place tp
    // innermost), so its limit reads the NVLink α = C/W_nvlink (book ch12:
    // ≈ 2200 on H100), not the scale-out one the data axes see
    let alpha_tp = match (&mesh.topology, &chip.nvlink) {
        (Topology::Gpu { .. }, Some(nv)) => alpha_nvlink(c, nv.per_gpu.one_way_rate().get(), tr),
        _ => alpha,
    };
    let tpmax = tp_max_degree(f, alpha_tp, my, tr);
    let beyond = tp_beyond_node(chip, c, f, tr);
    // a slice's model parallelism may take every axis (serving does: book
    // ch8); the same rule with M_Y = all the slice's axes
    let all_axes = (matches!(mesh.topology, Topology::Torus { .. }) && m_all >= 2.0)
        .then(|| tp_max_all_axes(f, alpha, m_all, tr));
    let xo = x_opt(b, f, n, mx, my, tr);
    let xc = nearest_divisor(mesh.chips.max(1), xo);
    let r = RuleInputs {
        alpha,
        w,
        m_all,
        mx,
        my,
        f,
        b,
        n,
        per_chip: b / n,
        dp_min,
        ftmin,
        xo,
        xc,
        chips: mesh.chips,
    };
    let hbm = chip.hbm_capacity.get();
    let pure_dp = pure_dp_verdict(&r, p_total * bytes_params_opt, bytes_params_opt, hbm);
    let (pure_fsdp, fsdp_tp) = fsdp_verdicts(&r);
    let (fsdp_max_chips, fsdp_tp_max_chips) = max_chips(&r, tr);
    Rules {
        alpha,
        m_all,
        fsdp_max_chips,
        fsdp_tp_max_chips,
        fsdp_max_chips_train_time_s: None,
        batch_per_chip: r.per_chip,
        dp_min_batch_per_chip: dp_min,
        fsdp_min_batch_tokens: n * dp_min,
        fsdp_tp_m_x: mx,
        fsdp_tp_m_y: my,
        fsdp_tp_min_batch_per_chip: ftmin,
        tp_max_degree: tpmax,
        tp_max_degree_beyond_node: beyond.map(|(one, _)| one),
        tp_max_degree_two_nodes: beyond.map(|(_, two)| two),
        tp_max_degree_all_axes: all_axes,
        x_opt: xo,
        x_chosen: xc,
        y_chosen: mesh.chips / xc.max(1),
        dcn_min_batch_per_slice: dcn,
        pure_dp,
        pure_fsdp,
        fsdp_tp,
        exact: exact_rules(spec, chip, mesh, &r, tpmax, tr),
    }
}

/// AllGather bandwidth of axis `a` when `deg` is laid on the mesh's topology.
fn axis_bandwidth(
    chip: &Chip,
    mesh: &Mesh,
    deg: crate::parallelism::Degrees,
    a: crate::parallelism::LogicalAxis,
) -> Option<f64> {
    let m = Mesh::build(chip, &mesh.topology, deg);
    if !m.feasible() {
        return None;
    }
    m.axis(a)
        .map(|x| x.allgather_bandwidth.get())
        .filter(|w| w.is_finite() && *w > 0.0)
}

/// The largest divisor Y of N whose TP axis, placed on this topology, keeps
/// F·W_tp(Y)/(Y·C) ≥ 1 (T_math = 4BDF/(Y·C) ≥ T_comms = 4BD/W_tp(Y)).
fn exact_tp_max(chip: &Chip, mesh: &Mesh, f: f64, c: f64) -> u64 {
    use crate::parallelism::{Degrees, LogicalAxis};
    let n = mesh.chips.max(1);
    let mut best = 1;
    let mut y = 2;
    while y <= n.min(1 << 16) {
        if n % y == 0 {
            let deg = Degrees {
                tp: y,
                dp: n / y,
                ..Degrees::default()
            };
            if let Some(w) = axis_bandwidth(chip, mesh, deg, LogicalAxis::Tp) {
                if f * w / (y as f64 * c) >= 1.0 {
                    best = y;
                }
            }
        }
        y += 1;
    }
    best
}

/// The exact counterparts of the book's data- and tensor-parallel limits.
fn exact_rules<T: Tracer>(
    spec: &ModelSpec,
    chip: &Chip,
    mesh: &Mesh,
    r: &RuleInputs,
    tp_book: f64,
    tr: &mut T,
) -> ExactRules {
    use crate::parallelism::{Degrees, LogicalAxis};
    let pc = crate::model::params::count(&spec.arch, &mut crate::trace::NoTrace);
    let moe = pc.total as f64 / pc.active.max(1) as f64;
    let c = r.alpha * r.w;
    let n = mesh.chips.max(1);
    let w_dp = axis_bandwidth(
        chip,
        mesh,
        Degrees {
            dp: n,
            ..Degrees::default()
        },
        LogicalAxis::Dp,
    )
    .unwrap_or(r.w * r.m_all);
    let dp_min = moe * c / w_dp;
    tr.record(|| {
        Step::new(
            "rules.exact.dp_min_batch_per_chip",
            "DP/FSDP minimum batch per chip from the collective model",
            "(P/P_act)·C/W_dp, W_dp = V/T of an AllGather over every chip",
        )
        .bind("P/P_act", moe, "")
        .bind("C", c, "FLOP/s")
        .bind("W_dp", w_dp, "B/s")
        .result(dp_min, "tokens")
        .source("How To Scale Your Model ch5, ch12 (MoE: T_math × k, T_comms × E)")
    });
    let d = mesh.degrees;
    let data = d.dp.saturating_mul(d.fsdp);
    let plan = (data > 1).then(|| {
        let axis = if d.fsdp > 1 {
            LogicalAxis::Fsdp
        } else {
            LogicalAxis::Dp
        };
        let w = mesh
            .axis(axis)
            .map_or(w_dp, |x| x.allgather_bandwidth.get());
        let mp = (n / data.max(1)).max(1) as f64;
        moe * c / (mp * w)
    });
    let tp = exact_tp_max(chip, mesh, r.f, c);
    let mut notes = Vec::new();
    if moe > 1.0 + 1e-9 {
        notes.push(format!("MoE: compute follows the {} active parameters, gradient traffic all {}: the DP bound is {moe:.2}× the dense one (book ch12: (E/k)·C/W)", pc.active, pc.total));
    }
    if (dp_min / r.dp_min - 1.0).abs() > 0.01 {
        notes.push(format!(
            "DP over all {n} chips: the collective model gives W_dp = {:.4e} B/s against the book's {:.4e} (M_X·W), so {dp_min:.0} tokens per chip, not {:.0}",
            w_dp, r.w * r.m_all, r.dp_min
        ));
    }
    if (tp as f64 - tp_book.floor().max(1.0)).abs() >= 1.0 {
        notes.push(format!(
            "TP: placed on this topology, the largest compute-bound degree is {tp}, not ⌊M_Y·F/α⌋ = {:.0} (wraparound, scale-up vs scale-out links and the ring's (Y−1)/Y decide)",
            tp_book.floor()
        ));
    }
    ExactRules {
        moe_factor: moe,
        dp_allgather_bandwidth_bytes_per_s: w_dp,
        dp_min_batch_per_chip: dp_min,
        plan_dp_min_batch_per_chip: plan,
        tp_max_degree: tp,
        notes,
    }
}

impl crate::view::Render for ExactRules {
    fn doc(&self) -> crate::view::Doc {
        use crate::units::sig4;
        use crate::view::field;
        let mut d = crate::view::Doc::new();
        let mut rows = vec![
            field(
                "pure DP/FSDP",
                format!(
                    "needs > {} tokens per chip (MoE factor {}, W_dp = {})",
                    sig4(self.dp_min_batch_per_chip),
                    sig4(self.moe_factor),
                    crate::units::fmt_si(self.dp_allgather_bandwidth_bytes_per_s, "B/s")
                ),
            ),
            field(
                "TP limit",
                format!("{}-way on this topology", self.tp_max_degree),
            ),
        ];
        if let Some(p) = self.plan_dp_min_batch_per_chip {
            rows.insert(
                1,
                field(
                    "this plan's data axis",
                    format!("needs > {} tokens per chip", sig4(p)),
                ),
            );
        }
        d.line("Exact rules (collective model):").fields(rows);
        for n in &self.notes {
            d.note(n.clone());
        }
        d
    }
}
