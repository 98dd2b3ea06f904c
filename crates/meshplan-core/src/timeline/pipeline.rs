//! The order in which each pipeline stage runs its micro-batches' forward
//! and backward passes (GPipe, 1F1B, interleaved 1F1B), and when each pass
//! starts once every stage runs at the same pace: a list schedule driven by
//! the passes' dependencies, so the bubble is the idle time it leaves.

use crate::parallelism::Schedule;

/// One forward or backward pass of one micro-batch through one model chunk
/// of one stage, placed in time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pass {
    /// Pipeline stage (device), 0 = first.
    pub stage: u64,
    /// Micro-batch, 0-based.
    pub microbatch: u64,
    /// Model chunk on the stage (interleaved: 0..v; otherwise 0).
    pub chunk: u64,
    /// Forward (else backward).
    pub forward: bool,
    /// Start, seconds from the step's start.
    pub start_s: f64,
    /// Duration, seconds.
    pub dur_s: f64,
}

/// What the layout needs: the pipeline's shape and one pass's duration (per
/// model chunk: a stage's share of a micro-batch divided over its `v`
/// chunks), the same on every stage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Pipeline stages (≥ 1).
    pub stages: u64,
    /// Micro-batches per step (≥ 1).
    pub microbatches: u64,
    /// Model chunks per stage (interleaved; 1 otherwise).
    pub chunks: u64,
    /// The schedule.
    pub schedule: Schedule,
    /// One chunk's forward pass, seconds.
    pub forward_s: f64,
    /// One chunk's backward pass, seconds.
    pub backward_s: f64,
}

/// (micro-batch, chunk, forward) in the order one stage runs them.
type Order = Vec<(u64, u64, bool)>;

/// Micro-batch groups of the interleaved schedule: each group goes through
/// every chunk in turn. Megatron's groups are `stages` micro-batches; when
/// `stages` does not divide `m` the groups here are the ⌊m/p⌋ most even
/// ones (each at least `stages` long, so no chunk waits on the previous
/// stage): the first `m mod n` take one more. (first micro-batch, size).
fn groups(s: &Shape) -> Vec<(u64, u64)> {
    let (p, m) = (s.stages, s.microbatches);
    let n = (m / p).max(1);
    let (base, extra) = (m / n, m % n);
    let mut first = 0;
    (0..n)
        .map(|i| {
            let size = base + u64::from(i < extra);
            first += size;
            (first - size, size)
        })
        .collect()
}

/// The (micro-batch, chunk) of the `k`-th forward (or backward) pass of a
/// stage under the interleaved schedule: micro-batches by [`groups`], each
/// group through every chunk in turn (the backward through the chunks in
/// reverse).
fn interleaved_pass(k: u64, s: &Shape, g: &[(u64, u64)], forward: bool) -> (u64, u64) {
    let v = s.chunks;
    let mut k = k;
    for &(first, size) in g {
        if k < size * v {
            let chunk = k / size;
            let chunk = if forward { chunk } else { v - 1 - chunk };
            return (first + k % size, chunk);
        }
        k -= size * v;
    }
    (0, 0)
}

/// The passes of stage `stage` in the order it runs them.
fn order(s: &Shape, stage: u64) -> Order {
    let (p, m, v) = (s.stages, s.microbatches, s.chunks);
    let n = m * v;
    let g = groups(s);
    let pass = |k: u64, fwd: bool| {
        let (mb, c) = if v > 1 {
            interleaved_pass(k, s, &g, fwd)
        } else {
            (k, 0)
        };
        (mb, c, fwd)
    };
    // forwards run before the first backward: all of them (GPipe), the
    // stages after this one (1F1B), or Megatron's interleaved warm-up
    let warmup = match s.schedule {
        Schedule::Afab if p > 1 => n,
        _ if v > 1 && m == p => n,
        _ if v > 1 => ((p - stage - 1) * 2 + (v - 1) * g[0].1).min(n),
        _ => (p - stage - 1).min(n),
    };
    let mut out: Order = (0..warmup).map(|k| pass(k, true)).collect();
    for i in 0..n - warmup {
        out.push(pass(warmup + i, true));
        out.push(pass(i, false));
    }
    out.extend((n - warmup..n).map(|k| pass(k, false)));
    out
}

/// Lay out every stage's passes: each starts when its stage is free and
/// the pass it needs has ended (the previous virtual stage's forward, the
/// next one's backward, or the same micro-batch's forward on the last).
/// `None` if the orders deadlock (they do not for the schedules above).
pub fn layout(s: &Shape) -> Option<Vec<Pass>> {
    let (p, m, v) = (s.stages.max(1), s.microbatches.max(1), s.chunks.max(1));
    let s = &Shape {
        stages: p,
        microbatches: m,
        chunks: v,
        ..*s
    };
    let vs_count = (p * v) as usize;
    // end[(fwd, virtual stage, micro-batch)]
    let idx = |fwd: bool, vs: u64, mb: u64| -> usize {
        ((usize::from(fwd) * vs_count) + vs as usize) * m as usize + mb as usize
    };
    let mut end: Vec<Option<f64>> = vec![None; 2 * vs_count * m as usize];
    let orders: Vec<Order> = (0..p).map(|st| order(s, st)).collect();
    let mut next = vec![0usize; p as usize];
    let mut free = vec![0.0f64; p as usize];
    let mut out = Vec::with_capacity(orders.iter().map(Vec::len).sum());
    let last = p * v - 1;
    loop {
        let mut progressed = false;
        for st in 0..p {
            let i = st as usize;
            while let Some(&(mb, c, fwd)) = orders[i].get(next[i]) {
                let vs = c * p + st;
                let dep = match (fwd, vs) {
                    (true, 0) => Some(0.0),
                    (true, _) => end[idx(true, vs - 1, mb)],
                    (false, x) if x == last => end[idx(true, vs, mb)],
                    (false, _) => end[idx(false, vs + 1, mb)],
                };
                let Some(ready) = dep else { break };
                let start = free[i].max(ready);
                let dur = if fwd { s.forward_s } else { s.backward_s };
                free[i] = start + dur;
                end[idx(fwd, vs, mb)] = Some(free[i]);
                out.push(Pass {
                    stage: st,
                    microbatch: mb,
                    chunk: c,
                    forward: fwd,
                    start_s: start,
                    dur_s: dur,
                });
                next[i] += 1;
                progressed = true;
            }
        }
        if next.iter().zip(&orders).all(|(n, o)| *n == o.len()) {
            return Some(out);
        }
        if !progressed {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(p: u64, m: u64, v: u64, schedule: Schedule) -> Shape {
        Shape {
            stages: p,
            microbatches: m,
            chunks: v,
            schedule,
            forward_s: 1.0,
            backward_s: 2.0,
        }
    }

    fn makespan(passes: &[Pass]) -> f64 {
        passes
            .iter()
            .map(|x| x.start_s + x.dur_s)
            .fold(0.0, f64::max)
    }

    /// Every stage runs each micro-batch's forward and backward through
    /// each of its chunks exactly once.
    #[test]
    fn every_pass_runs_once() {
        for (p, m, v, sch) in [
            (4, 8, 1, Schedule::Afab),
            (4, 8, 1, Schedule::OneFOneB),
            (4, 8, 2, Schedule::Interleaved),
            (4, 6, 2, Schedule::Interleaved),
        ] {
            let passes = layout(&shape(p, m, v, sch)).unwrap();
            assert_eq!(passes.len() as u64, p * m * v * 2, "{sch:?}");
        }
    }

    /// GPipe and 1F1B with p = 4 stages, m = 8 micro-batches, forward 1 s
    /// and backward 2 s per stage: the step takes (m + p − 1)·(F + B) =
    /// 11·3 = 33 s and each stage idles (p − 1)·(F + B) = 9 s (Huang et al.
    /// 2019; Narayanan et al. 2021 §2.2). Interleaved with v = 2 chunks of
    /// F/2, B/2: the bubble shrinks to (p − 1)·(F + B)/v = 4.5 s, the step
    /// to 8·3 + 4.5 = 28.5 s (Narayanan et al. 2021 §2.2.1); with m = 6
    /// micro-batches (not a multiple of p) 6·3 + 4.5 = 22.5 s.
    #[test]
    fn the_bubble_is_p_minus_1_passes_over_v() {
        for (m, v, sch, span) in [
            (8, 1, Schedule::Afab, 33.0),
            (8, 1, Schedule::OneFOneB, 33.0),
            (8, 2, Schedule::Interleaved, 28.5),
            (6, 2, Schedule::Interleaved, 22.5),
        ] {
            let mut s = shape(4, m, v, sch);
            s.forward_s /= v as f64;
            s.backward_s /= v as f64;
            let passes = layout(&s).unwrap();
            let got = makespan(&passes);
            assert!((got - span).abs() < 1e-9, "{sch:?} m {m}: {got} s");
        }
    }

    /// 1F1B's last stage alternates from its first micro-batch on; its first
    /// stage runs p − 1 = 3 forwards ahead.
    #[test]
    fn one_f_one_b_warms_up_by_the_stages_after() {
        let s = shape(4, 8, 1, Schedule::OneFOneB);
        let fwd = |st: u64| order(&s, st).iter().take_while(|(_, _, f)| *f).count();
        assert_eq!((fwd(0), fwd(3)), (4, 1));
    }
}
