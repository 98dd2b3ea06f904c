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

/// Layers per pipeline stage and whether the stage holds the LM head, as
/// `framework` splits them. nanotron balances contiguous blocks by compute
/// cost (`get_block_compute_costs`: a decoder layer costs `4·N·H·D + m·F·D`,
/// the LM head `V·D`; a block joins the current rank and the rank advances
/// once the cumulative cost passes `total·(r+1)/pp`), so with a large
/// vocabulary the head's stage holds fewer layers. Megatron and the book
/// split evenly (`ceil(L/pp)`) with the head on the last stage.
pub fn stages(a: &Arch, pp: u64, framework: Framework) -> Vec<(u64, bool)> {
    let pp = pp.max(1);
    if pp == 1 {
        return vec![(a.n_layers, true)];
    }
    if framework != Framework::Nanotron {
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
}
