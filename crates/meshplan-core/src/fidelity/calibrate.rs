//! Least-squares calibration of an [`EfficiencyProfile`] (Nelder–Mead on a
//! pseudo-Huber loss of log errors) with bootstrap uncertainty.

use serde::Serialize;

use super::data::Run;
use super::profile::{EfficiencyProfile, Param, CLUSTER_FIT, MEM_FIT, SHARED_FIT, TIME_FIT};
use crate::hardware::Chip;

/// Minimise `f` from `x0` (Nelder–Mead, standard coefficients).
pub fn nelder_mead(f: &dyn Fn(&[f64]) -> f64, x0: &[f64], step: f64, iters: usize) -> Vec<f64> {
    let n = x0.len();
    let mut simplex: Vec<(Vec<f64>, f64)> = (0..=n)
        .map(|i| {
            let mut x = x0.to_vec();
            if i > 0 {
                x[i - 1] += step;
            }
            let v = f(&x);
            (x, v)
        })
        .collect();
    for _ in 0..iters {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        if (simplex[n].1 - simplex[0].1).abs() < 1e-10 * (1.0 + simplex[0].1.abs()) {
            break;
        }
        let mut c = vec![0.0; n];
        for (x, _) in &simplex[..n] {
            for (cj, xj) in c.iter_mut().zip(x) {
                *cj += xj / n as f64;
            }
        }
        let lerp = |t: f64| -> Vec<f64> {
            (0..n)
                .map(|j| c[j] + t * (simplex[n].0[j] - c[j]))
                .collect()
        };
        let xr = lerp(-1.0);
        let fr = f(&xr);
        if fr < simplex[0].1 {
            let xe = lerp(-2.0);
            let fe = f(&xe);
            simplex[n] = if fe < fr { (xe, fe) } else { (xr, fr) };
        } else if fr < simplex[n - 1].1 {
            simplex[n] = (xr, fr);
        } else {
            let xc = if fr < simplex[n].1 {
                lerp(-0.5)
            } else {
                lerp(0.5)
            };
            let fc = f(&xc);
            if fc < simplex[n].1.min(fr) {
                simplex[n] = (xc, fc);
            } else {
                let best = simplex[0].0.clone();
                for s in simplex.iter_mut().skip(1) {
                    for (sj, bj) in s.0.iter_mut().zip(&best) {
                        *sj = bj + 0.5 * (*sj - bj);
                    }
                    s.1 = f(&s.0);
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex.swap_remove(0).0
}

// unbounded ↔ bounded (logistic on [lo, hi])
fn to_u(v: f64, (lo, hi): (f64, f64)) -> f64 {
    let t = ((v - lo) / (hi - lo)).clamp(1e-6, 1.0 - 1e-6);
    (t / (1.0 - t)).ln()
}
fn from_u(u: f64, (lo, hi): (f64, f64)) -> f64 {
    lo + (hi - lo) / (1.0 + (-u).exp())
}

/// Cauchy (Lorentzian) loss of a log ratio, scale 10 %: it saturates for
/// large errors, so the fit follows the majority of runs and is not pulled
/// towards the slow mode of the bimodal multi-node timings (see docs/fidelity.md).
fn loss(pred: f64, meas: f64) -> f64 {
    let r = (pred / meas).ln() / 0.10;
    (1.0 + r * r).ln()
}

/// Which measurements the fit uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Step time.
    Time,
    /// Peak memory.
    Memory,
}

/// Mean loss of `runs` under profile `p`. The runs are predicted in
/// parallel (a fit calls this thousands of times); the losses are summed in
/// the runs' order, so the result does not depend on the thread count.
pub fn objective(runs: &[(&Run, &Chip)], p: &EfficiencyProfile, target: Target) -> f64 {
    use rayon::prelude::*;
    let losses: Vec<f64> = runs
        .par_iter()
        .filter_map(|(r, chip)| {
            let (meas, pred) = match target {
                Target::Time => (r.step_time_s?, r.step_time(chip, p)),
                Target::Memory => {
                    let m = r.peak_mem_gb.filter(|m| *m > 0.0)?;
                    let pred = r.peak_memory(chip, p).total_bytes.gb();
                    (m, pred)
                }
            };
            Some(loss(pred, meas))
        })
        .collect();
    if losses.is_empty() {
        0.0
    } else {
        losses.iter().sum::<f64>() / losses.len() as f64
    }
}

/// Fit the named parameters of `start` on `runs` for one target.
pub fn fit(
    runs: &[(&Run, &Chip)],
    start: &EfficiencyProfile,
    params: &[Param],
    target: Target,
    iters: usize,
) -> EfficiencyProfile {
    let x0: Vec<f64> = params.iter().map(|&q| start.param(q)).collect();
    let make = |x: &[f64]| {
        let mut p = start.clone();
        for (k, &q) in params.iter().enumerate() {
            p.set_param(q, x[k]);
        }
        p
    };
    let x = fit_values(&|x| objective(runs, &make(x), target), params, &x0, iters);
    make(&x)
}

/// Minimise `f` over the values of `params` (each inside its
/// [`Param::bounds`]) from `x0`; returns the values.
pub fn fit_values(
    f: &dyn Fn(&[f64]) -> f64,
    params: &[Param],
    x0: &[f64],
    iters: usize,
) -> Vec<f64> {
    let decode = |u: &[f64]| -> Vec<f64> {
        params
            .iter()
            .enumerate()
            .map(|(k, &q)| from_u(u[k], q.bounds()))
            .collect()
    };
    let g = |u: &[f64]| f(&decode(u));
    let mut x: Vec<f64> = params
        .iter()
        .zip(x0)
        .map(|(&q, &v)| to_u(v, q.bounds()))
        .collect();
    // Nelder–Mead stalls on this rugged objective (max() of host and GPU
    // paths, step-like stalls): restart from the best point with a fresh
    // simplex until a round improves the loss by less than 0.01 % (at most 12
    // rounds). On the Playbook, fitted on half the runs from literature
    // values, one round left the other half at 14 % median error, rounds until
    // convergence at 9 %.
    let mut best = g(&x);
    for round in 0..12 {
        let step = if round % 2 == 0 { 0.5 } else { 0.2 };
        let y = nelder_mead(&g, &x, step, iters);
        let fy = g(&y);
        let gain = best - fy;
        if fy < best {
            // re-encode: a parameter driven deep into its bound (u → ±∞) comes
            // back to the edge of the clamp, where the next simplex can move it
            x = params
                .iter()
                .enumerate()
                .map(|(k, &q)| to_u(from_u(y[k], q.bounds()), q.bounds()))
                .collect();
            best = g(&x);
        }
        if round >= 1 && gain < 1e-4 * best.abs().max(1e-12) {
            break;
        }
    }
    decode(&x)
}

/// Runs predicted with one profile (a source on its chip, network or
/// cluster profile) in a fit over several such groups.
pub struct Group<'a> {
    /// The runs.
    pub runs: Vec<(&'a Run, &'a Chip)>,
    /// Their profile (sources and sub-profiles stripped: it is cloned per evaluation).
    pub profile: EfficiencyProfile,
    /// Whether the group's own cluster profile applies (its terms are fitted on it).
    pub cluster: bool,
}

/// Fit `params` jointly on several groups of runs, each group weighing the
/// same whatever its size (8 published runs pull as much as 1,716 Playbook
/// runs). A parameter in `cluster_only` is applied to the groups with
/// `cluster` set only. Returns the values in the order of `params`.
pub fn fit_groups(
    groups: &[Group],
    params: &[Param],
    cluster_only: &[Param],
    x0: &[f64],
    target: Target,
    iters: usize,
) -> Vec<f64> {
    let apply = |g: &Group, x: &[f64]| {
        let mut p = g.profile.clone();
        for (k, &q) in params.iter().enumerate() {
            if g.cluster || !cluster_only.contains(&q) {
                p.set_param(q, x[k]);
            }
        }
        p
    };
    let f = |x: &[f64]| {
        groups
            .iter()
            .map(|g| objective(&g.runs, &apply(g, x), target))
            .sum::<f64>()
            / groups.len().max(1) as f64
    };
    fit_values(&f, params, x0, iters)
}

/// Result of a calibration.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// Fitted profile.
    pub profile: EfficiencyProfile,
    /// Parameters fitted.
    pub fitted: Vec<String>,
    /// Bootstrap standard deviation per fitted parameter (same order).
    pub stddev: Vec<f64>,
    /// Median |relative error| of step time before / after.
    pub time_median_before: f64,
    /// After.
    pub time_median_after: f64,
    /// Median |relative error| of peak memory before / after (NaN when no data).
    pub mem_median_before: f64,
    /// After.
    pub mem_median_after: f64,
    /// Runs used.
    pub n_time: usize,
    /// Runs with memory.
    pub n_mem: usize,
}

/// Median |pred/meas − 1| over runs.
pub fn median_error(runs: &[(&Run, &Chip)], p: &EfficiencyProfile, target: Target) -> f64 {
    let mut e: Vec<f64> = runs
        .iter()
        .filter_map(|(r, c)| match target {
            Target::Time => r.step_time_s.map(|m| (r.step_time(c, p) / m - 1.0).abs()),
            Target::Memory => r
                .peak_mem_gb
                .filter(|m| *m > 0.0)
                .map(|m| (r.peak_memory(c, p).total_bytes.gb() / m - 1.0).abs()),
        })
        .collect();
    super::stats::quantile(&mut e, 0.5)
}

/// Full calibration: time parameters, then memory parameters, then a
/// bootstrap (`boot` resamples, deterministic) for the uncertainties.
pub fn calibrate(
    runs: &[(&Run, &Chip)],
    start: &EfficiencyProfile,
    iters: usize,
    boot: usize,
) -> Calibration {
    let n_time = runs.iter().filter(|(r, _)| r.step_time_s.is_some()).count();
    let n_mem = runs.iter().filter(|(r, _)| r.peak_mem_gb.is_some()).count();
    let mut p = start.clone();
    if n_mem > 0 {
        p = fit(runs, &p, &MEM_FIT, Target::Memory, iters);
    }
    if n_time > 0 {
        p = fit(runs, &p, &TIME_FIT, Target::Time, iters);
    }
    let mut fitted: Vec<Param> = Vec::new();
    if n_time > 0 {
        fitted.extend(TIME_FIT);
    }
    if n_mem > 0 {
        fitted.extend(MEM_FIT);
    }
    // bootstrap: refit from the optimum on resampled runs (LCG, fixed seed)
    let mut samples: Vec<Vec<f64>> = Vec::new();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..boot {
        let sample: Vec<(&Run, &Chip)> = (0..runs.len())
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                runs[(seed >> 33) as usize % runs.len()]
            })
            .collect();
        let mut q = p.clone();
        if n_mem > 0 {
            q = fit(&sample, &q, &MEM_FIT, Target::Memory, iters / 4);
        }
        if n_time > 0 {
            q = fit(&sample, &q, &TIME_FIT, Target::Time, iters / 4);
        }
        samples.push(fitted.iter().map(|&n| q.param(n)).collect());
    }
    let stddev = (0..fitted.len())
        .map(|k| {
            if samples.len() < 2 {
                return f64::NAN;
            }
            let m = samples.iter().map(|s| s[k]).sum::<f64>() / samples.len() as f64;
            (samples.iter().map(|s| (s[k] - m).powi(2)).sum::<f64>() / (samples.len() - 1) as f64)
                .sqrt()
        })
        .collect();
    Calibration {
        time_median_before: median_error(runs, start, Target::Time),
        time_median_after: median_error(runs, &p, Target::Time),
        mem_median_before: median_error(runs, start, Target::Memory),
        mem_median_after: median_error(runs, &p, Target::Memory),
        profile: p,
        fitted: fitted.iter().map(|q| q.name().to_string()).collect(),
        stddev,
        n_time,
        n_mem,
    }
}

/// One fold of a leave-one-source-out fit: the parameters the held-out
/// source is predicted with.
#[derive(Clone, Debug, Serialize)]
pub struct Fold {
    /// The source held out.
    pub source: String,
    /// The sources the fit used.
    pub trained_on: Vec<String>,
    /// Clean runs of the held-out source.
    pub runs: usize,
    /// Parameters fitted on `trained_on` and carried over, with their values.
    pub fitted: Vec<(String, f64)>,
    /// Parameters no other source identifies: at their prior ([`super::profile::PRIORS`]).
    pub at_prior: Vec<(String, f64)>,
}

impl Fold {
    /// The held-out run's own profile with this fold's values.
    pub fn apply(&self, p: &EfficiencyProfile) -> EfficiencyProfile {
        let mut p = p.clone();
        for (n, v) in self.fitted.iter().chain(&self.at_prior) {
            if let Some(q) = Param::from_name(n) {
                p.set_param(q, *v);
            }
        }
        p
    }
}

/// A run's slot in a held-out fit: its source, the profile it is predicted
/// with, and whether that profile includes the run's cluster profile.
pub struct Slot<'a> {
    /// The run and its chip.
    pub run: (&'a Run, &'a Chip),
    /// Its profile (chip, network or cluster profile).
    pub profile: EfficiencyProfile,
    /// The profile includes the run's named cluster profile.
    pub cluster: bool,
}

/// Leave-one-source-out: for each source, fit every end-to-end-fitted
/// parameter on the other sources only — [`SHARED_FIT`] pooled over them
/// (each source weighing the same), [`CLUSTER_FIT`] on the runs of a named
/// cluster only, [`MEM_FIT`] on the runs with a peak memory — starting from
/// [`super::profile::PRIORS`]; the held-out source gets the shared values,
/// and its own cluster's and (without other memory data) memory parameters
/// stay at their priors. Microbenchmark-level parameters and measured curves
/// are inputs. Folds in source order.
pub fn leave_one_source_out(slots: &[Slot], iters: usize) -> Vec<Fold> {
    use super::profile::prior;
    let mut sources: Vec<&str> = slots.iter().map(|s| s.run.0.source.as_str()).collect();
    sources.sort_unstable();
    sources.dedup();
    let prior_of =
        |qs: &[Param]| -> Vec<f64> { qs.iter().map(|&q| prior(q).unwrap_or(0.0)).collect() };
    let named = |qs: &[Param], xs: &[f64]| -> Vec<(String, f64)> {
        qs.iter()
            .map(|q| q.name().to_string())
            .zip(xs.iter().copied())
            .collect()
    };
    sources
        .iter()
        .map(|&held| {
            let train: Vec<&Slot> = slots.iter().filter(|s| s.run.0.source != held).collect();
            let groups = groups_of(&train);
            let held_slots: Vec<&Slot> = slots.iter().filter(|s| s.run.0.source == held).collect();
            let held_cluster = held_slots.iter().any(|s| s.cluster);
            let any_cluster = groups.iter().any(|g| g.cluster);
            // time: the shared parameters, with the cluster terms of a
            // training cluster fitted alongside (on its runs only)
            let mut tparams: Vec<Param> = SHARED_FIT.to_vec();
            if any_cluster {
                tparams.extend(CLUSTER_FIT);
            }
            let tx = if groups.is_empty() {
                prior_of(&tparams)
            } else {
                fit_groups(
                    &groups,
                    &tparams,
                    &CLUSTER_FIT,
                    &prior_of(&tparams),
                    Target::Time,
                    iters,
                )
            };
            let mut fitted = named(&SHARED_FIT, &tx[..SHARED_FIT.len()]);
            let mut at_prior = Vec::new();
            if held_cluster {
                at_prior.extend(named(&CLUSTER_FIT, &prior_of(&CLUSTER_FIT)));
            }
            let mem_groups: Vec<Group> = groups
                .into_iter()
                .filter(|g| {
                    g.runs
                        .iter()
                        .any(|(r, _)| r.peak_mem_gb.is_some_and(|m| m > 0.0))
                })
                .collect();
            if mem_groups.is_empty() {
                at_prior.extend(named(&MEM_FIT, &prior_of(&MEM_FIT)));
            } else {
                let mx = fit_groups(
                    &mem_groups,
                    &MEM_FIT,
                    &[],
                    &prior_of(&MEM_FIT),
                    Target::Memory,
                    iters,
                );
                fitted.extend(named(&MEM_FIT, &mx));
            }
            let mut trained_on: Vec<String> =
                train.iter().map(|s| s.run.0.source.clone()).collect();
            trained_on.dedup();
            trained_on.sort();
            trained_on.dedup();
            Fold {
                source: held.to_string(),
                trained_on,
                runs: held_slots.len(),
                fitted,
                at_prior,
            }
        })
        .collect()
}

/// The fitting groups of some slots: one per (source, profile), each
/// profile stripped of its text so that cloning it per evaluation is cheap.
fn groups_of<'a>(slots: &[&Slot<'a>]) -> Vec<Group<'a>> {
    let mut out: Vec<(String, Group)> = Vec::new();
    for s in slots {
        let key = format!(
            "{}|{}|{}",
            s.run.0.source, s.profile.chip, s.profile.network
        );
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.runs.push(s.run),
            None => {
                let mut p = s.profile.clone();
                p.sources.clear();
                p.source.clear();
                p.networks.clear();
                p.clusters.clear();
                p.fitted_on = None;
                out.push((
                    key,
                    Group {
                        runs: vec![s.run],
                        profile: p,
                        cluster: s.cluster,
                    },
                ));
            }
        }
    }
    out.into_iter().map(|x| x.1).collect()
}
