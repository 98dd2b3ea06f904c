//! Pipeline geometry: the bubble, the micro-batches alive at once, and how a
//! framework splits the layers over the stages. The roofline analysis, the
//! memory model and the fidelity model all use these, so that memory and
//! step time always see the same stages.

use serde::Serialize;

use super::{Framework, Schedule};
use crate::model::Arch;

/// The pipeline bubble in micro-batch times (one micro-batch's forward and
/// backward through one whole stage, `t_mb`): the idle time of a stage per
/// step is `bubble_microbatches · t_mb`, the busy time `m · t_mb`.
///
/// A chunk pass takes `t_mb/v`. With `m ≥ p` micro-batches each model chunk
/// keeps every stage busy (Megatron groups `p` micro-batches per chunk; the
/// Llama 3 schedule, §3.3.2, any group of at least `p`, so `m` need not be a
/// multiple of `p`): only the fill and drain of the `p·v`-deep chain are idle,
/// `(p − 1)` chunk passes, `(p − 1)/v` micro-batch times (Narayanan et al.
/// 2021 §2.2.1; `v = 1`: `p − 1`, GPipe/1F1B).
///
/// With `m < p` no stage ever holds two chunks' work at once (micro-batch
/// `j` reaches virtual stage `s` at chunk slot `j + s`; stages `s` and `s + p`
/// of one device would need `j` and `j − p` both in `0..m`), so the step is
/// the dependency chain alone: `(m + p·v − 1)` chunk passes for `m·v` of
/// work, a bubble of `(p·v − 1 − m·(v − 1))` chunk passes, i.e.
/// `(p − m) + (m − 1)/v` micro-batch times (equal to `(p − 1)/v` at `m = p`,
/// to `p − 1` at `v = 1`).
pub fn bubble_microbatches(p: u64, m: u64, v: u64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let (pf, mf, vf) = (p as f64, m.max(1) as f64, v.max(1) as f64);
    if m >= p {
        (pf - 1.0) / vf
    } else {
        (pf - mf) + (mf - 1.0) / vf
    }
}

/// Bubble fraction of the step, `b/(m + b)` with `b` =
/// [`bubble_microbatches`]: `(p−1)/(m·v+p−1)` when `m ≥ p` (the idle share of
/// a pipeline of `p` stages, `m` micro-batches and `v` chunks per device, 1
/// unless interleaved).
pub fn bubble_fraction(p: u64, m: u64, v: u64) -> f64 {
    let b = bubble_microbatches(p, m, v);
    if b <= 0.0 {
        return 0.0;
    }
    b / (m.max(1) as f64 + b)
}

/// The compute of one micro-batch on one stage ("chunk", DeepSeek-V3
/// Table 2), split as the schedule sees it: the forward `f`, the whole
/// backward `b`, and the part of the backward that computes weight
/// gradients `w` (zero-bubble schedules run it later, out of the
/// dependency chain). Any unit (seconds, or micro-batch times).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ChunkTimes {
    /// Forward chunk.
    pub f: f64,
    /// Backward chunk (input and weight gradients, recompute included).
    pub b: f64,
    /// Of `b`: the weight-gradient GEMMs.
    pub w: f64,
}

impl ChunkTimes {
    /// The book's split of a micro-batch time (ch4: the backward costs
    /// twice the forward, half of it the weight gradients): `f = 1/3`,
    /// `b = 2/3`, `w = 1/3` of `t_mb`.
    pub const BOOK: ChunkTimes = ChunkTimes {
        f: 1.0 / 3.0,
        b: 2.0 / 3.0,
        w: 1.0 / 3.0,
    };

    /// `F&B`: a forward chunk and a backward chunk of two micro-batches run
    /// as one overlapped pair (DualPipe). Their compute is serial on the
    /// SMs; what the pairing hides is the communication (all-to-all,
    /// pipeline sends), so the pair takes `f + b`.
    pub fn overlapped_pair(&self) -> f64 {
        self.f + self.b
    }
}

/// DualPipe's bubble (DeepSeek-V3 technical report, Table 2):
/// `(pp/2 − 1)·(F&B + B − 3W)` with `F&B` the overlapped forward+backward
/// pair ([`ChunkTimes::overlapped_pair`]), against 1F1B's `(pp − 1)·(F + B)`
/// ([`one_f_one_b_bubble`]). Micro-batches enter from both ends, so the fill
/// is half as deep, and the weight-gradient chunks fill what is left.
/// `pp` is even (DualPipe's rule); 0 without a pipeline.
pub fn dualpipe_bubble(pp: u64, c: ChunkTimes) -> f64 {
    if pp <= 1 {
        return 0.0;
    }
    (pp as f64 / 2.0 - 1.0) * (c.overlapped_pair() + c.b - 3.0 * c.w)
}

/// 1F1B's bubble in the same terms, `(pp − 1)·(F + B)` (DeepSeek-V3
/// Table 2; equal to [`bubble_microbatches`]`(pp, m, 1)` micro-batch times
/// when `f + b = 1`).
pub fn one_f_one_b_bubble(pp: u64, c: ChunkTimes) -> f64 {
    (pp.max(1) as f64 - 1.0) * (c.f + c.b)
}

/// The bubble of `schedule` in micro-batch times: [`bubble_microbatches`]
/// for GPipe, 1F1B and interleaved; DualPipe's at the book's chunk split
/// ([`ChunkTimes::BOOK`]: `(pp/2 − 1)·2/3`). The calibrated pricer prices
/// DualPipe with the step's own chunk times instead.
pub fn bubble_microbatches_of(schedule: Schedule, p: u64, m: u64, v: u64) -> f64 {
    match schedule {
        Schedule::DualPipe => dualpipe_bubble(p, ChunkTimes::BOOK),
        _ => bubble_microbatches(p, m, v),
    }
}

/// Bubble fraction of the step under `schedule`, `b/(m + b)` with `b` =
/// [`bubble_microbatches_of`].
pub fn bubble_fraction_of(schedule: Schedule, p: u64, m: u64, v: u64) -> f64 {
    let b = bubble_microbatches_of(schedule, p, m, v);
    if b <= 0.0 {
        return 0.0;
    }
    b / (m.max(1) as f64 + b)
}

/// Copies of its stages' parameters a pipeline rank holds: 2 under
/// DualPipe (rank `r` holds stage `r` of the forward direction and stage
/// `pp − 1 − r` of the reverse one: DeepSeek-V3 Table 2, "2×" parameters),
/// 1 otherwise. Gradients and optimizer state follow the parameters.
pub fn parameter_copies(schedule: Schedule, pp: u64) -> u64 {
    if schedule == Schedule::DualPipe && pp > 1 {
        2
    } else {
        1
    }
}

/// Why DualPipe cannot run `pp` stages with `m` micro-batches
/// (deepseek-ai/DualPipe `DualPipe.step` asserts): an even number of
/// ranks, and an even number of micro-batches, at least `2·pp`. `None`
/// when it can (or without a pipeline).
pub fn dualpipe_problem(pp: u64, m: u64) -> Option<String> {
    if pp <= 1 {
        return None;
    }
    if pp % 2 != 0 {
        return Some(format!(
            "dualpipe needs an even number of pipeline stages (each rank pairs with rank pp − 1 − r), got pp = {pp}"
        ));
    }
    if m % 2 != 0 || m < 2 * pp {
        return Some(format!(
            "dualpipe needs an even number of micro-batches, at least 2·pp = {} (half enter from each end), got {m}",
            2 * pp
        ));
    }
    None
}

/// Layers on the first and the last pipeline stage as a user states them
/// (Megatron-Core `--decoder-first-pipeline-num-layers` /
/// `--decoder-last-pipeline-num-layers`): the other `pp − k` stages (k = the
/// counts given) share the remaining layers evenly. Unset: the framework's
/// own split ([`stages`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct StageLayers {
    /// Layers on the first stage (with the input embedding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    /// Layers on the last stage (with the LM head and the loss).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<u64>,
}

/// Why a [`StageLayers`] cannot split the layers (Megatron-Core's checks in
/// `TransformerConfig.__post_init__`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageLayersError {
    /// A count of 0 (Megatron: must be larger than 0).
    Empty,
    /// A count set with a single stage.
    NoPipeline,
    /// The counts given leave no layer, or a negative number, for the rest.
    TooMany {
        /// Layers the first/last counts take.
        taken: u64,
        /// Layers of the model.
        layers: u64,
    },
    /// The middle stages cannot share the rest evenly.
    Middle {
        /// Layers left for the middle stages.
        rest: u64,
        /// Middle stages.
        stages: u64,
    },
    /// With interleaving, a stage's layers do not split over its `v` chunks.
    Chunks {
        /// Layers of the stage.
        layers: u64,
        /// Virtual stages per device.
        v: u64,
    },
}

impl std::fmt::Display for StageLayersError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            StageLayersError::Empty => {
                f.write_str("first/last stage layers must be at least 1 (Megatron-Core's rule)")
            }
            StageLayersError::NoPipeline => {
                f.write_str("first/last stage layers need a pipeline (pp ≥ 2)")
            }
            StageLayersError::TooMany { taken, layers } => write!(
                f,
                "first/last stage layers take {taken} of the {layers} layers: none would be left for the middle stages"
            ),
            StageLayersError::Middle { rest, stages } => write!(
                f,
                "the {rest} layers left after the first/last stage counts do not split evenly over the {stages} middle stages"
            ),
            StageLayersError::Chunks { layers, v } => write!(
                f,
                "a stage's {layers} layers do not split over its {v} virtual stages (interleaved: every stage's count must be a multiple of v)"
            ),
        }
    }
}

impl StageLayers {
    /// The framework's own split.
    pub const EVEN: StageLayers = StageLayers {
        first: None,
        last: None,
    };

    /// Whether a count is given.
    pub fn is_set(&self) -> bool {
        self.first.is_some() || self.last.is_some()
    }

    /// Whether nothing is given (serde's skip).
    pub fn is_even(&self) -> bool {
        !self.is_set()
    }

    /// `(first, middle, last)` layers of `layers` over `pp` stages with `v`
    /// chunks each (1 unless interleaved), Megatron-Core's rules: counts ≥ 1,
    /// the rest `L − first − last` split evenly over the stages not given a
    /// count, and (interleaved) every stage's layers a multiple of `v`. A
    /// count not given is the middle count. `Ok(None)` when nothing is set.
    pub fn split(
        &self,
        layers: u64,
        pp: u64,
        v: u64,
    ) -> Result<Option<(u64, u64, u64)>, StageLayersError> {
        if !self.is_set() {
            return Ok(None);
        }
        if pp <= 1 {
            return Err(StageLayersError::NoPipeline);
        }
        let given = [self.first, self.last];
        if given.contains(&Some(0)) {
            return Err(StageLayersError::Empty);
        }
        let taken: u64 = given.iter().flatten().sum();
        let k = given.iter().flatten().count() as u64;
        let stages = pp - k;
        let rest = layers
            .checked_sub(taken)
            .filter(|r| *r > 0 || stages == 0)
            .ok_or(StageLayersError::TooMany { taken, layers })?;
        if stages == 0 && rest > 0 {
            // pp = 2 with both counts: they must add up to L
            return Err(StageLayersError::Middle { rest, stages });
        }
        let middle = rest.checked_div(stages).unwrap_or(0);
        if stages > 0 && (middle == 0 || rest % stages != 0) {
            return Err(StageLayersError::Middle { rest, stages });
        }
        let (first, last) = (self.first.unwrap_or(middle), self.last.unwrap_or(middle));
        let v = v.max(1);
        for n in [first, middle, last] {
            if n % v != 0 && !(n == middle && stages == 0) {
                return Err(StageLayersError::Chunks { layers: n, v });
            }
        }
        Ok(Some((first, middle, last)))
    }
}

/// Micro-batches whose activations are alive at once on the first (most
/// loaded) stage: all `m` with GPipe, `min(p, m)` with 1F1B,
/// `min(p, m)·(1 + (p−1)/(p·v))` (at most `m`) interleaved, and
/// `min(p + 1, m)` with DualPipe (DeepSeek-V3 Table 2: `PP + 1`, on every
/// rank — the two directions balance). Without a pipeline
/// only the micro-batch in hand is alive (gradient accumulation frees each
/// micro-batch's activations in its backward pass).
pub fn microbatches_in_flight(p: u64, m: u64, v: u64, schedule: Schedule) -> f64 {
    if p <= 1 {
        return 1.0;
    }
    let (pf, mf) = (p as f64, m.max(1) as f64);
    match schedule {
        Schedule::Afab => mf,
        Schedule::OneFOneB => pf.min(mf),
        Schedule::Interleaved => {
            let vf = v.max(1) as f64;
            (pf.min(mf) * (1.0 + (pf - 1.0) / (pf * vf))).min(mf)
        }
        Schedule::DualPipe => (pf + 1.0).min(mf),
    }
}

/// Micro-batches alive at once on pipeline rank `r` (0 = first): `p − r`
/// with 1F1B; interleaved, Megatron's warm-up of `2·(p−r−1) + (v−1)·p`
/// chunk forwards plus the one in hand, in units of a whole stage
/// (`v` chunks): `p + (p − 2r − 1)/v` (rank 0: [`microbatches_in_flight`]);
/// at most `m`.
pub fn microbatches_in_flight_at(r: u64, p: u64, m: u64, v: u64, schedule: Schedule) -> f64 {
    if p <= 1 || r == 0 {
        return microbatches_in_flight(p, m, v, schedule);
    }
    let (pf, mf, rf) = (p as f64, m.max(1) as f64, r.min(p - 1) as f64);
    match schedule {
        Schedule::Afab => mf,
        Schedule::OneFOneB => (pf - rf).min(mf),
        Schedule::DualPipe => (pf + 1.0).min(mf),
        Schedule::Interleaved => {
            let vf = v.max(1) as f64;
            (pf + (pf - 2.0 * rf - 1.0) / vf).max(1.0).min(mf)
        }
    }
}

/// Megatron's uneven split (`account_for_embedding_in_pipeline_split`,
/// `account_for_loss_in_pipeline_split`, Megatron-Core ≥ 0.10): when `pp`
/// does not divide `L`, the input embedding and the loss each count as one
/// layer, every stage takes `u = ⌈(L+2)/pp⌉` units, so the first stage holds
/// `u − 1` layers (plus the embedding), the middle ones `u`, the last the rest
/// (plus the LM head) — 126 layers on 8 stages: 15 | 16×6 | 15; 61 on 4:
/// 15 | 16, 16 | 14. `(first, middle, last)`; `None` when `pp` divides `L`
/// (the even split) or the accounting leaves a stage empty.
pub fn megatron_uneven(layers: u64, pp: u64) -> Option<(u64, u64, u64)> {
    if pp <= 1 || layers % pp == 0 {
        return None;
    }
    let u = (layers + 2).div_ceil(pp);
    let first = u.checked_sub(1).filter(|f| *f >= 1)?;
    let middle = if pp > 2 { u } else { 0 };
    let last = layers.checked_sub(first + (pp - 2) * middle)?;
    (last >= 1 && last <= u).then_some((first, middle, last))
}

/// Layers on the first stage (which also holds the input embedding) under
/// `framework`'s split.
pub fn first_stage_layers(a: &Arch, pp: u64, framework: Framework) -> u64 {
    first_stage_layers_with(a, pp, framework, StageLayers::EVEN)
}

/// [`first_stage_layers`] with the user's first/last stage counts, when they
/// split the layers ([`StageLayers::split`]).
pub fn first_stage_layers_with(a: &Arch, pp: u64, framework: Framework, given: StageLayers) -> u64 {
    let pp = pp.max(1);
    if pp == 1 {
        return a.n_layers;
    }
    if let Some((first, _, _)) = given_split(a, pp, given) {
        return first;
    }
    match framework {
        Framework::Nanotron => {
            let mut first = None;
            nanotron_split(a, pp, |n, _| {
                first.get_or_insert(n);
            });
            first.unwrap_or(0)
        }
        _ => megatron_uneven(a.n_layers, pp).map_or(a.n_layers.div_ceil(pp), |s| s.0),
    }
}

/// Layers per pipeline stage and whether the stage holds the LM head, as
/// `framework` splits them. nanotron balances contiguous blocks by compute
/// cost (`get_block_compute_costs`: a decoder layer costs `4·N·H·D + m·F·D`,
/// the LM head `V·D`; a block joins the current rank and the rank advances
/// once the cumulative cost passes `total·(r+1)/pp`), so with a large
/// vocabulary the head's stage holds fewer layers. The book splits evenly
/// (`ceil(L/pp)`) with the head on the last stage; Megatron too when `pp`
/// divides `L`, else [`megatron_uneven`].
pub fn stages(a: &Arch, pp: u64, framework: Framework) -> Vec<(u64, bool)> {
    stages_with(a, pp, framework, StageLayers::EVEN)
}

/// [`stages`] with the user's first/last stage counts (any framework: the
/// user states the split), when they split the layers.
pub fn stages_with(
    a: &Arch,
    pp: u64,
    framework: Framework,
    given: StageLayers,
) -> Vec<(u64, bool)> {
    let pp = pp.max(1);
    if pp == 1 {
        return vec![(a.n_layers, true)];
    }
    let stated = given_split(a, pp, given);
    if framework != Framework::Nanotron || stated.is_some() {
        if let Some((first, middle, last)) = stated.or_else(|| uneven(a, pp, framework)) {
            let mut v = vec![(middle, false); pp as usize];
            v[0].0 = first;
            v[pp as usize - 1] = (last, true);
            return v;
        }
        let ls = a.n_layers.div_ceil(pp);
        let mut v = vec![(ls, false); pp as usize];
        v[pp as usize - 1].1 = true;
        return v;
    }
    let mut out = Vec::with_capacity(pp as usize);
    nanotron_split(a, pp, |n, h| out.push((n, h)));
    out.resize(pp as usize, (0, false)); // the ranks after the head's hold nothing
    out
}

/// The user's counts as `(first, middle, last)`, `None` when none is given
/// or they do not split the layers (the feasibility rules say why).
fn given_split(a: &Arch, pp: u64, given: StageLayers) -> Option<(u64, u64, u64)> {
    given.split(a.n_layers, pp, 1).ok().flatten()
}

/// Megatron's embedding/loss-accounted split for the Megatron frameworks
/// (the book spreads layers evenly, `⌈L/pp⌉`).
fn uneven(a: &Arch, pp: u64, framework: Framework) -> Option<(u64, u64, u64)> {
    match framework {
        Framework::Megatron | Framework::Megatron2022 => megatron_uneven(a.n_layers, pp),
        _ => None,
    }
}

/// nanotron's cost-balanced split (see [`stages`]): calls
/// `stage(layers, holds_head)` for each rank in order up to the one holding
/// the LM head (the ranks after it are empty), without allocating.
fn nanotron_split(a: &Arch, pp: u64, mut stage: impl FnMut(u64, bool)) {
    let (d, f, v) = (a.d_model as f64, a.ffn_width_active(), a.vocab as f64);
    let layer = 4.0 * (a.n_heads * a.d_head) as f64 * d + a.mlp.matrices() as f64 * f * d;
    let head = v * d;
    let total = a.n_layers as f64 * layer + head;
    let (mut r, mut cum, mut cur) = (0u64, 0.0, 0u64);
    for _ in 0..a.n_layers {
        cum += layer;
        cur += 1;
        if cum > total * (r as f64 + 1.0) / pp as f64 && r + 1 < pp {
            stage(cur, false);
            r += 1;
            cur = 0;
        }
    }
    // the head joins the current rank, which is the last one with anything
    stage(cur, true);
}

/// The busiest stages of a split: (the most layers on a stage without the
/// LM head — the first stage is one of them —, the layers on the stage with
/// the head). The same split as [`stages`], without building it (the planner
/// calls this for every candidate it predicts).
pub fn stage_extremes(a: &Arch, pp: u64, framework: Framework) -> (u64, u64) {
    stage_extremes_with(a, pp, framework, StageLayers::EVEN)
}

/// [`stage_extremes`] with the user's first/last stage counts.
pub fn stage_extremes_with(
    a: &Arch,
    pp: u64,
    framework: Framework,
    given: StageLayers,
) -> (u64, u64) {
    let pp = pp.max(1);
    if pp == 1 {
        return (0, a.n_layers);
    }
    let stated = given_split(a, pp, given);
    if let Some((first, middle, last)) = stated {
        // pp = 2 has no middle stage
        return (if pp > 2 { first.max(middle) } else { first }, last);
    }
    if framework != Framework::Nanotron {
        if let Some((first, middle, last)) = uneven(a, pp, framework) {
            return (first.max(middle), last);
        }
        let ls = a.n_layers.div_ceil(pp);
        return (ls, ls);
    }
    let (mut plain, mut with_head) = (0, 0);
    nanotron_split(a, pp, |n, h| {
        if h {
            with_head = n;
        } else {
            plain = plain.max(n);
        }
    });
    (plain, with_head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bubble_and_in_flight_by_hand() {
        // p = 4, m = 8: bubble 3/11; 1F1B keeps 4 alive, GPipe 8
        assert!((bubble_fraction(4, 8, 1) - 3.0 / 11.0).abs() < 1e-15);
        assert_eq!(microbatches_in_flight(4, 8, 1, Schedule::OneFOneB), 4.0);
        assert_eq!(microbatches_in_flight(4, 8, 1, Schedule::Afab), 8.0);
        // interleaved v = 2: 4·(1 + 3/8) = 5.5
        assert_eq!(microbatches_in_flight(4, 8, 2, Schedule::Interleaved), 5.5);
        // gradient accumulation without a pipeline: one micro-batch alive
        assert_eq!(microbatches_in_flight(1, 16, 1, Schedule::OneFOneB), 1.0);
        assert_eq!(bubble_fraction(1, 16, 1), 0.0);
    }

    #[test]
    fn dualpipe_bubble_by_hand() {
        // DeepSeek-V3 Table 2 with F = 1, B = 2, W = 1 (the book's 1:2
        // split, backward half weight gradients), pp = 8:
        // DualPipe (8/2 − 1)·(F&B + B − 3W) = 3·((1 + 2) + 2 − 3) = 6;
        // 1F1B (8 − 1)·(F + B) = 7·3 = 21
        let c = ChunkTimes {
            f: 1.0,
            b: 2.0,
            w: 1.0,
        };
        assert_eq!(dualpipe_bubble(8, c), 6.0);
        assert_eq!(one_f_one_b_bubble(8, c), 21.0);
        // in micro-batch times (f + b = 1): (16/2 − 1)·2/3 = 14/3 at pp = 16,
        // whatever m; 1F1B's is pp − 1 = 15
        let b = bubble_microbatches_of(Schedule::DualPipe, 16, 32, 1);
        assert!((b - 14.0 / 3.0).abs() < 1e-12, "{b}");
        assert_eq!(bubble_microbatches_of(Schedule::OneFOneB, 16, 32, 1), 15.0);
        // bubble fraction b/(m + b) = (14/3)/(32 + 14/3) = 14/110
        let f = bubble_fraction_of(Schedule::DualPipe, 16, 32, 1);
        assert!((f - 14.0 / 110.0).abs() < 1e-12, "{f}");
        // PP + 1 micro-batches alive, two copies of the stage's parameters
        assert_eq!(microbatches_in_flight(16, 32, 1, Schedule::DualPipe), 17.0);
        assert_eq!(
            microbatches_in_flight_at(5, 16, 32, 1, Schedule::DualPipe),
            17.0
        );
        assert_eq!(parameter_copies(Schedule::DualPipe, 16), 2);
        assert_eq!(parameter_copies(Schedule::OneFOneB, 16), 1);
        // the DualPipe repository's rules
        assert!(dualpipe_problem(16, 32).is_none());
        assert!(dualpipe_problem(15, 30)
            .unwrap()
            .contains("even number of pipeline"));
        assert!(dualpipe_problem(16, 30)
            .unwrap()
            .contains("at least 2·pp = 32"));
        assert!(dualpipe_problem(4, 9)
            .unwrap()
            .contains("even number of micro"));
    }

    #[test]
    fn megatron_uneven_by_hand() {
        // 126 layers + embedding + loss = 128 units on 8 stages: 16 each, the
        // first and last give one unit to the embedding / loss
        assert_eq!(megatron_uneven(126, 8), Some((15, 16, 15)));
        // on 16 stages: 8 units each: 7 | 8×14 | 7 (7 + 112 + 7 = 126)
        assert_eq!(megatron_uneven(126, 16), Some((7, 8, 7)));
        // DeepSeek-V3, 61 layers on 4: ⌈63/4⌉ = 16: 15 | 16, 16 | 14
        assert_eq!(megatron_uneven(61, 4), Some((15, 16, 14)));
        assert_eq!(megatron_uneven(80, 4), None);
        // rank 1 of an interleaved p = 4, v = 2 pipeline: warm-up
        // 2·(4−1−1) + (2−1)·4 = 8 chunk forwards, +1 in hand = 9 chunks = 4.5 stages
        assert_eq!(
            microbatches_in_flight_at(1, 4, 8, 2, Schedule::Interleaved),
            4.5
        );
        assert_eq!(
            microbatches_in_flight_at(3, 4, 8, 1, Schedule::OneFOneB),
            1.0
        );
    }
}
