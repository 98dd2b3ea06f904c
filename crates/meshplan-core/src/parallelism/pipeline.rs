//! Pipeline geometry: the bubble, the micro-batches alive at once, and how a
//! framework splits the layers over the stages. The roofline analysis, the
//! memory model and the fidelity model all use these, so that memory and
//! step time always see the same stages.

use super::{Framework, Schedule};
use crate::model::Arch;

/// Bubble fraction `(p−1)/(m·v+p−1)` of a pipeline of `p` stages, `m`
/// micro-batches and `v` chunks per device (1 unless interleaved).
pub fn bubble_fraction(p: u64, m: u64, v: u64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let (pf, mf, vf) = (p as f64, m.max(1) as f64, v.max(1) as f64);
    (pf - 1.0) / (mf * vf + pf - 1.0)
}

/// Micro-batches whose activations are alive at once on the first (most
/// loaded) stage: all `m` with GPipe, `min(p, m)` with 1F1B, and
/// `min(p, m)·(1 + (p−1)/(p·v))` (at most `m`) interleaved. Without a pipeline
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
    let pp = pp.max(1);
    if pp == 1 {
        return a.n_layers;
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
    let pp = pp.max(1);
    if pp == 1 {
        return vec![(a.n_layers, true)];
    }
    if framework != Framework::Nanotron {
        if let Some((first, middle, last)) = uneven(a, pp, framework) {
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
    let pp = pp.max(1);
    if pp == 1 {
        return (0, a.n_layers);
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
