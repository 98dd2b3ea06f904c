//! Planner: the fast evaluator equals `training::analyze`; the search's top
//! plan equals a brute-force loop over `training::analyze`; every returned
//! plan is feasible and fits; plans are ranked; bad input gives a verdict.
//! With an efficiency profile (H100) the objective is the calibrated
//! predicted step time, in the search and in the brute-force reference alike.

mod common;

use common::{cube, l13b_h100_4m, llama13, model_and_chip, q3_workload, v5p};
use meshplan_core::mesh::{Degrees, Topology};
use meshplan_core::model::params::count;
use meshplan_core::parallelism::{FlopConvention, Framework};
use meshplan_core::planner::regime::{Interval, Regime, UNVALIDATED_FACTOR};
use meshplan_core::planner::{
    factorizations, inner_choices, ChipBudget, InferSearch, RejectReason, TrainObjective,
    TrainSearch, TrainSpace,
};
use meshplan_core::step::predict::{
    active_profile, prepare, unsupported, RooflineFloor, NO_PROFILE_NOTE,
};
use meshplan_core::trace::NoTrace;
use meshplan_core::training::feasibility::degree_problems;
use meshplan_core::training::{analyze, analyze_with, evaluate, MeshCtx, TrainConfig, TrainCtx};
use meshplan_core::Catalog;

/// The replica the fidelity model predicts, after the gate every front end
/// goes through (`prepare`), as a data-set row (test shorthand).
fn run_spec(
    spec: &meshplan_core::model::ModelSpec,
    cfg: &TrainConfig,
) -> Result<meshplan_core::fidelity::data::Run, String> {
    let cat = Catalog::builtin();
    let chip = cat.chip("h100").unwrap();
    let topo = Topology::gpus(cfg.degrees.at_least_one().product(), 8);
    let floor = RooflineFloor {
        model_flops: 0.0,
        lower_s: 0.0,
        offload: None,
    };
    let pc = count(&spec.arch, &mut NoTrace);
    prepare(&spec.arch, pc, chip, cfg, &topo, false, floor).map_err(|e| e.to_string())?;
    meshplan_core::fidelity::data::Run::of_config(&spec.arch, cfg, "h100")
        .map_err(|e| e.to_string())
}

fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / a.abs().max(b.abs())
    }
}

fn cases() -> Vec<(&'static str, &'static str, Topology, TrainConfig)> {
    let base = |b: u64, t: u64| TrainConfig {
        batch_tokens: b,
        seq_len: t,
        ..TrainConfig::default()
    };
    vec![
        (
            "llama-2-13b",
            "h100",
            Topology::gpus(64, 8),
            base(4 << 20, 4096),
        ),
        (
            "llama-3.1-8b",
            "h100",
            Topology::gpus(32, 8),
            base(1 << 20, 8192),
        ),
        (
            "book-ch5-llama-2-13b",
            "tpu-v5p@book",
            Topology::torus(1, &[4, 4, 8]),
            base(1 << 20, 4096),
        ),
        (
            "mixtral-8x7b",
            "h100",
            Topology::gpus(32, 8),
            base(2 << 20, 4096),
        ),
        (
            "llama-2-7b",
            "tpu-v5p",
            Topology::torus(2, &[2, 2, 4]),
            TrainConfig {
                master_weights: true,
                comm_efficiency: 0.7,
                hbm_usable_fraction: 0.9,
                ..base(1 << 19, 2048)
            },
        ),
    ]
}

/// The planner costs every candidate with `training::evaluate`, the function
/// `training::analyze` reports from; on sampled candidates of every case the
/// two agree exactly (same feasibility, memory, bounds and bound).
#[test]
fn planner_evaluation_equals_analyze() {
    let space = TrainSpace::default();
    let mut compared = 0u64;
    let mut infeasible = 0u64;
    for (m, h, topo, base) in cases() {
        let (spec, chip) = model_and_chip(m, h);
        let ctx = TrainCtx::quiet(spec, chip, &base, None);
        let n = topo.chips();
        let mut buf = Vec::new();
        for (k, f) in factorizations(n).into_iter().enumerate() {
            let eps: Vec<u64> = if spec.arch.moe.is_some() {
                vec![1, 2, 8]
            } else {
                vec![1]
            };
            for ep in eps {
                let deg = Degrees {
                    ep,
                    ..Degrees::from_factors(f)
                };
                inner_choices(&space, &base, spec.arch.n_layers, &deg, &mut buf);
                let problem = degree_problems(&spec.arch, base.seq_len, &deg).next();
                let (mesh, mctx) = MeshCtx::place(chip, &topo, deg);
                // sample the inner choices (every 7th, offset by the tuple)
                for (i, c) in buf.iter().enumerate() {
                    if (i + k) % 7 != 0 && i != 0 {
                        continue;
                    }
                    let cfg = c.config(&base, deg);
                    let r = analyze(spec, chip, &topo, &cfg, &mut NoTrace);
                    if problem.is_some() || !mesh.reasons.is_empty() {
                        assert!(!r.feasible, "{m} {deg:?}: planner rejects, analyze accepts");
                        infeasible += 1;
                        continue;
                    }
                    assert!(r.feasible, "{m} {deg:?}: {:?}", r.reasons);
                    let e = evaluate(&ctx, &mctx, c, &mut NoTrace, &mut ());
                    assert_eq!(e.fits, r.fits, "{m} {deg:?} {c:?}");
                    assert_eq!(e.memory, r.memory_per_device, "{m} {deg:?} {c:?}");
                    assert_eq!(e.lower, r.step_time_lower_s.get(), "{m} {deg:?} {c:?}");
                    assert_eq!(e.upper, r.step_time_upper_s.get(), "{m} {deg:?} {c:?}");
                    assert_eq!(e.t_comms_sum, r.t_comms_sum_s.get());
                    assert_eq!(e.t_bubble, r.t_bubble_s.get());
                    let bound = match e.comm_bound_axis {
                        None => "compute".to_string(),
                        Some(ax) => format!("communication ({})", ax.name()),
                    };
                    assert_eq!(bound, r.bound, "{m} {deg:?} {c:?}");
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 2000, "compared {compared}");
    assert!(infeasible > 100, "infeasible {infeasible}");
}

fn brute_best(
    spec: &meshplan_core::model::ModelSpec,
    chip: &meshplan_core::hardware::Chip,
    topo: &Topology,
    base: &TrainConfig,
    obj: TrainObjective,
) -> Option<(f64, f64, f64)> {
    // the same objective as the search: the calibrated prediction when the
    // chip has an efficiency profile and the model is one it covers
    // (a TPU's profile ranks only under MaxText's accounting)
    let prof = active_profile(chip, None)
        .unwrap()
        .filter(|p| p.profile.network != "ici" || base.framework == Framework::Maxtext);
    let predicting = prof.is_some() && unsupported(chip, base).is_none();
    let space = TrainSpace {
        permute_torus: false,
        ..TrainSpace::default()
    };
    let mut best: Option<(f64, f64, f64)> = None;
    let mut buf = Vec::new();
    for f in factorizations(topo.chips()) {
        let deg = Degrees::from_factors(f);
        inner_choices(&space, base, spec.arch.n_layers, &deg, &mut buf);
        // without a pipeline the search accumulates gradients only as needed
        let mut fitted = None;
        for c in &buf {
            if deg.pp == 1 && fitted == Some((c.zero, c.remat, c.sp)) {
                continue;
            }
            let cfg = c.config(base, deg);
            let r = analyze_with(spec, chip, topo, &cfg, prof.as_ref(), &mut NoTrace);
            if !r.feasible || !r.fits {
                continue;
            }
            fitted = Some((c.zero, c.remat, c.sp));
            if predicting && r.predicted.is_none() {
                continue; // not predictable
            }
            let k = objective_key(&r, obj, topo);
            if best.map_or(true, |b| k < b) {
                best = Some(k);
            }
        }
    }
    best
}

/// The search's objective on a report: (pessimistic end of the predicted
/// step's interval, predicted step | lower, …) for time, (−margin, the
/// same | lower, …) for memory headroom.
fn objective_key(
    r: &meshplan_core::training::TrainReport,
    obj: TrainObjective,
    topo: &Topology,
) -> (f64, f64, f64) {
    let lower = r.step_time_lower_s.get();
    let hi = Interval::of_report(r, topo).map(|i| i.hi_s);
    match (obj, &r.predicted, hi) {
        (TrainObjective::MemoryHeadroom, Some(_), Some(hi)) => (-r.memory_margin_bytes, hi, lower),
        (TrainObjective::MemoryHeadroom, _, _) => {
            (-r.memory_margin_bytes, lower, r.step_time_upper_s.get())
        }
        (_, Some(p), Some(hi)) => (hi, p.step_time_s.get(), lower),
        (_, _, _) => (
            lower,
            r.step_time_upper_s.get(),
            r.memory_per_device.total_bytes.get(),
        ),
    }
}

#[test]
fn top_plan_equals_brute_force_and_plans_are_feasible_and_ranked() {
    for (m, h, topo, base) in cases().into_iter().take(3) {
        for obj in [TrainObjective::Time, TrainObjective::MemoryHeadroom] {
            let (spec, chip) = model_and_chip(m, h);
            let mut s = TrainSearch::new(spec, chip, topo.clone(), base);
            s.space.permute_torus = false;
            s.objective = obj;
            s.top_k = 20;
            let r = s.run();
            let want = brute_best(spec, chip, &topo, &base, obj).expect("something fits");
            let top = &r.plans[0];
            let rep = s.report(&r, top);
            assert_eq!(
                r.predicted,
                h == "h100",
                "{m}: H100 searches rank by predictions, TPU ones cannot"
            );
            assert_eq!(rep.predicted.is_some(), r.predicted, "{m}");
            let got = objective_key(&rep, obj, &topo);
            assert!(
                rel(got.0, want.0) < 1e-9 && rel(got.1, want.1) < 1e-9,
                "{m} {obj:?}: {got:?} vs {want:?}"
            );
            let mut prev = f64::NEG_INFINITY;
            for p in &r.plans {
                let rep = s.report(&r, p);
                assert!(
                    rep.feasible && rep.fits,
                    "{m}: returned plan {:?} infeasible",
                    p.deg
                );
                if r.predicted {
                    let pr = rep.predicted.as_ref().expect("predicted");
                    let fp = p.pred.expect("pred");
                    assert!(rel(fp.step_time_s, pr.step_time_s.get()) < 1e-12);
                    assert!(rel(fp.mfu, pr.mfu) < 1e-12);
                    // one rule for the flags and the interval: the search's
                    // allocation-free comparisons equal the report's list
                    let t = &r.topologies[p.topo];
                    assert_eq!(fp.regime, Regime::of_report(&rep, t), "{m}: {:?}", p.deg);
                    assert_eq!(Some(fp.interval), Interval::of_report(&rep, t), "{m}");
                }
                assert_eq!(p.eval.memory, rep.memory_per_device);
                assert!(p.score() >= prev, "{m}: not ranked");
                prev = p.score();
            }
            assert_eq!(
                r.candidates,
                r.evaluated
                    + RejectReason::ALL
                        .iter()
                        .filter(|x| !x.after_evaluation())
                        .map(|x| r.rejected_for(*x))
                        .sum::<u64>()
            );
            assert_eq!(
                r.evaluated,
                r.fitting
                    + r.dominated
                    + RejectReason::ALL
                        .iter()
                        .filter(|x| x.after_evaluation())
                        .map(|x| r.rejected_for(*x))
                        .sum::<u64>()
            );
            if !r.predicted {
                assert_eq!(r.rejected_for(RejectReason::Unpredictable), 0);
            }
        }
    }
}

#[test]
fn single_thread_equals_parallel() {
    let (spec, chip, base) = l13b_h100_4m();
    let mut s = TrainSearch::new(spec, chip, Topology::gpus(64, 8), base);
    let a = s.run();
    s.threads = Some(1);
    let b = s.run();
    assert_eq!(a.plans, b.plans);
    assert_eq!(a.rejected, b.rejected);
}

/// Book ch5 Q3: LLaMA-2 13B, v5p 16x16x16, 3M tokens, 32k sequences. The
/// book picks FSDP 1024 × TP 4 (X_opt = √(B·M_X·N/(F·M_Y)) ≈ 1,100 → 1024)
/// with remat after the matmuls and no attention FLOPs; meshplan's search,
/// on the book's own terms, finds a plan at least as fast and reports the
/// book's plan as feasible with the time the search assigns it.
#[test]
fn book_ch5_q3() {
    let (spec, chip, topo) = (llama13(), v5p(), cube());
    let base = TrainConfig {
        flops: FlopConvention::Book,
        ..q3_workload()
    };
    let s = TrainSearch::new(spec, chip, topo.clone(), base);
    let r = s.run();
    let top = r.plans[0];
    let book = analyze(
        spec,
        chip,
        &topo,
        &TrainConfig {
            degrees: Degrees {
                fsdp: 1024,
                tp: 4,
                ..Degrees::default()
            },
            remat: meshplan_core::training::Remat::AfterMatmuls,
            ..base
        },
        &mut NoTrace,
    );
    assert!(book.feasible && book.fits);
    assert_eq!(book.bound, "compute");
    // Agreement on the step: the book's plan ties the winner at the lower
    // bound (both compute-bound, T_math of the same FLOPs on 4096 chips).
    assert!(rel(top.eval.lower, book.step_time_lower_s.get()) < 1e-12);
    // The tie is broken by the no-overlap upper bound: ZeRO-2 over dp moves
    // the weights once per step where FSDP gathers them forward and backward,
    // so meshplan lists dp·tp (ZeRO-2) first; the book's plan has more total traffic.
    assert!(top.eval.upper < book.step_time_upper_s.get());
    // The winner is compute-bound with fsdp × tp only (no pipeline, no cp, no dp):
    // the same shape of answer as the book; the step is the pure T_math of
    // the cheapest remat that fits.
    assert_eq!(top.eval.comm_bound_axis, None);
    assert_eq!((top.deg.pp, top.deg.cp), (1, 1), "{:?}", top.deg);
    assert!(top.deg.fsdp * top.deg.dp >= 256, "{:?}", top.deg);
    assert!(top.deg.tp <= 8, "{:?}", top.deg);
    // the book's plan is among the compute-bound plans ranked with the same step
    // time at remat after-matmuls
    let rep = s.report(&r, &top);
    assert!(rep.fits && rep.feasible);
}

#[test]
fn bad_input_gives_a_verdict() {
    let cat = Catalog::builtin();
    let (spec, chip) = model_and_chip("llama-2-70b", "h100");
    let base = TrainConfig {
        batch_tokens: 1 << 20,
        seq_len: 4096,
        ..TrainConfig::default()
    };
    // prime chip count: 13 GPUs do not make NVLink domains of 8
    let r = TrainSearch::new(spec, chip, Topology::gpus(13, 8), base).run();
    assert!(r.plans.is_empty());
    assert!(!r.topology_reasons.is_empty());
    // 70B on 2 GPUs: nothing fits
    let r = TrainSearch::new(spec, chip, Topology::gpus(2, 8), base).run();
    assert!(r.plans.is_empty());
    assert!(r.rejected_for(RejectReason::Memory) > 0);
    assert!(r.closest_rejected.is_some());
    // TPU slice larger than the pod
    let tpu = cat.chip("tpu-v5p").unwrap();
    let r = TrainSearch::new(spec, tpu, Topology::torus(1, &[32, 32, 32]), base).run();
    assert!(r.plans.is_empty() && !r.topology_reasons.is_empty());
    // serving: no offered slice of 7 chips
    let s = InferSearch::new(spec, tpu, ChipBudget::Exactly(7));
    let r = s.run();
    assert!(r.plans.is_empty() && !r.slice_reasons.is_empty());
}

#[test]
fn infer_search_pareto_and_slo() {
    let (spec, chip) = model_and_chip("llama-3.1-70b", "tpu-v5e");
    let mut s = InferSearch::new(spec, chip, ChipBudget::AtMost(64));
    s.tpot_slo = Some(0.05);
    s.ttft_slo = Some(1.0);
    let r = s.run();
    assert!(!r.plans.is_empty());
    for w in r.plans.windows(2) {
        assert!(w[0].tokens_per_s_per_chip >= w[1].tokens_per_s_per_chip);
    }
    for p in &r.plans {
        assert!(p.tpot_s <= 0.05 && p.ttft_s <= 1.0);
        let rep = s.report(p).unwrap();
        assert!(rep.batch_fits);
        assert_eq!(rep.decode_step_time_s.get(), p.tpot_s);
    }
    for w in r.pareto.windows(2) {
        assert!(
            w[0].tpot_s <= w[1].tpot_s && w[0].tokens_per_s_per_chip < w[1].tokens_per_s_per_chip
        );
    }
}

#[test]
fn prediction_mapping_and_fallbacks() {
    let cat = Catalog::builtin();
    let (spec, chip, base) = l13b_h100_4m();
    let cfg = |dp, fsdp, tp, pp, cp, zero, m| TrainConfig {
        degrees: Degrees::from_factors([dp, fsdp, tp, pp, cp]),
        zero,
        microbatches: m,
        ..base
    };
    // 1024 sequences: fsdp 16 × dp 2 = 32 replicas of 32 sequences, 4 micro-batches of 8
    let rs = run_spec(spec, &cfg(2, 16, 2, 1, 1, 3, 4)).unwrap();
    let c = rs.config();
    assert_eq!(
        (
            c.degrees.data(),
            c.zero,
            c.degrees.tp,
            rs.micro_batch_sequences(),
            c.microbatches,
            rs.n_gpus()
        ),
        (32, 3, 2, 8, 4, 64)
    );
    // fsdp alone is ZeRO-3 whatever `zero` says
    let zero = |c: TrainConfig| run_spec(spec, &c).unwrap().config().zero;
    assert_eq!(zero(cfg(1, 64, 1, 1, 1, 0, 1)), 3);
    assert_eq!(zero(cfg(64, 1, 1, 1, 1, 1, 1)), 1);
    // context parallelism maps through (ring attention in the fidelity model)
    let rs = run_spec(spec, &cfg(32, 1, 1, 1, 2, 0, 1)).unwrap();
    let d = rs.config().degrees;
    assert_eq!((d.data(), d.cp, rs.n_gpus()), (32, 2, 64));
    // hybrid sharding: fsdp 32 shards (ZeRO-3 inside), ZeRO-1 across the 2 replicas
    let c = run_spec(spec, &cfg(2, 32, 1, 1, 1, 1, 1)).unwrap().config();
    assert_eq!((c.degrees.data(), c.degrees.fsdp, c.zero), (64, 32, 1));
    // more micro-batches than sequences: no prediction, the roofline untouched;
    // the message word for word (the planner builds it lazily from an enum):
    // 1024 sequences over dp 16 = 64 per replica, fewer than 128 micro-batches
    let c = cfg(16, 1, 1, 4, 1, 0, 128);
    assert_eq!(
        run_spec(spec, &c).unwrap_err(),
        "64 sequences per replica cannot fill 128 micro-batches"
    );
    // the roofline report with the prediction attached (or its note)
    let with_prediction = |c: &TrainConfig| {
        let p = active_profile(chip, None).unwrap();
        analyze_with(
            spec,
            chip,
            &Topology::gpus(64, 8),
            c,
            p.as_ref(),
            &mut NoTrace,
        )
    };
    let rl = analyze(spec, chip, &Topology::gpus(64, 8), &c, &mut NoTrace).step_time_lower_s;
    let r = with_prediction(&c);
    assert!(r.predicted.is_none());
    assert!(r
        .prediction_note
        .as_deref()
        .unwrap()
        .starts_with("prediction not available:"));
    assert_eq!(r.step_time_lower_s, rl, "roofline untouched");
    // a supported plan: the prediction is above the compute roofline, MFU below 1
    let r = with_prediction(&cfg(8, 1, 8, 1, 1, 1, 1));
    let p = r.predicted.as_ref().unwrap();
    assert!(p.step_time_s.get() > r.t_math_s.get() * 0.9);
    assert!(p.mfu > 0.05 && p.mfu < r.mfu_at_lower_bound, "{}", p.mfu);
    assert!(p.tokens_per_s_per_device > 0.0);
    assert_eq!(p.framework, Framework::Megatron);
    // bf16 Adam is predicted on H100; fp32 GEMMs and SGD are not (MoE and
    // MLA are modelled whatever the plan); a TPU gets its MaxText/ICI profile
    let h100 = cat.chip("h100").unwrap();
    assert!(unsupported(h100, &TrainConfig::default()).is_none());
    let fp32 = TrainConfig {
        compute_dtype: meshplan_core::units::DType::Fp32,
        ..TrainConfig::default()
    };
    assert!(unsupported(h100, &fp32).is_some());
    let tpu = active_profile(cat.chip("tpu-v5p").unwrap(), None)
        .unwrap()
        .expect("TPU profile");
    assert_eq!(tpu.profile.network, "ici");
}

#[test]
fn searches_without_predictions_say_why() {
    let cat = Catalog::builtin();
    let base = TrainConfig {
        batch_tokens: 1 << 20,
        seq_len: 4096,
        ..TrainConfig::default()
    };
    let tpu = TrainSearch::new(
        cat.model("llama-2-7b").unwrap(),
        cat.chip("tpu-v5p").unwrap(),
        Topology::torus(1, &[2, 2, 4]),
        base,
    );
    assert!(tpu.profile.is_none());
    let r = tpu.run();
    assert!(!r.predicted && r.plans.iter().all(|p| p.pred.is_none()));
    assert_eq!(r.prediction_note.as_deref(), Some(NO_PROFILE_NOTE));
    let mla = TrainSearch::new(
        cat.model("deepseek-v3").unwrap(),
        cat.chip("h100").unwrap(),
        Topology::gpus(128, 8),
        TrainConfig {
            batch_tokens: 8 << 20,
            ..base
        },
    );
    // MLA is predicted (issue 14)
    let r = mla.run();
    assert!(r.predicted, "{:?}", r.prediction_note);
    // MoE without MLA: ranked by predicted time, expert-parallel plans included
    let moe = TrainSearch::new(
        cat.model("mixtral-8x7b").unwrap(),
        cat.chip("h100").unwrap(),
        Topology::gpus(32, 8),
        TrainConfig {
            batch_tokens: 2 << 20,
            ..base
        },
    );
    let r = moe.run();
    assert!(r.predicted, "{:?}", r.prediction_note);
    assert!(!r.plans.is_empty() && r.plans.iter().all(|p| p.pred.is_some()));
}

#[test]
fn mesh_chip_count_overflow_is_bad_input() {
    // 2^64 - 1 slices of 16x16x16 = 4096 chips overflow u64: the parser
    // rejects it (before, the product wrapped and the divisor search spun)
    let cat = Catalog::builtin();
    let tpu = cat.chip("tpu-v5p").unwrap();
    assert!(Topology::parse(tpu, "18446744073709551615*16x16x16").is_err());
    assert!(Topology::parse(tpu, "4294967296x4294967296x2").is_err());
    // 2^31 × 2^32 = 2^63 fits in u64 but is beyond meshplan::mesh::MAX_CHIPS
    // (issue 12: absurd counts are refused, not searched); 2^12 × 2^12 is accepted
    assert!(Topology::parse(tpu, "2147483648x4294967296").is_err());
    let t = Topology::parse(tpu, "4096x4096").unwrap();
    assert_eq!(t.chips(), meshplan_core::mesh::MAX_CHIPS);
    let gpu = cat.chip("h100").unwrap();
    assert!(Topology::parse(gpu, "4294967296x4294967296").is_err());
    // factorizations of a prime: only the 5 ways to place the prime on one axis
    assert_eq!(factorizations(97).len(), 5);
}

/// No prediction is faster than physics: on every sampled candidate of the
/// GPU cases, for every framework, the calibrated step time is at least the
/// roofline lower bound `max(T_math, T_comms) + bubble` (which costs the
/// same collectives at peak bandwidth and the FLOPs at peak compute).
#[test]
fn predicted_step_never_below_the_roofline_lower_bound() {
    let space = TrainSpace::default();
    let mut checked = 0u64;
    for (m, h, topo, base) in cases() {
        let (spec, chip) = model_and_chip(m, h);
        let Some(profile) = active_profile(chip, None).unwrap() else {
            continue;
        };
        let mut buf = Vec::new();
        for (k, f) in factorizations(topo.chips()).into_iter().enumerate() {
            let deg = Degrees::from_factors(f);
            inner_choices(&space, &base, spec.arch.n_layers, &deg, &mut buf);
            for (i, c) in buf.iter().enumerate() {
                if (i + k) % 11 != 0 {
                    continue;
                }
                for framework in [Framework::Megatron, Framework::Nanotron] {
                    let cfg = TrainConfig {
                        framework,
                        ..c.config(&base, deg)
                    };
                    let r = analyze_with(spec, chip, &topo, &cfg, Some(&profile), &mut NoTrace);
                    let Some(p) = r.predicted.as_ref().filter(|_| r.feasible) else {
                        continue;
                    };
                    let lower = r.step_time_lower_s.get();
                    assert!(
                        p.step_time_s.get() >= lower * (1.0 - 1e-9),
                        "{m} {deg:?} {c:?} {framework:?}: predicted {} s < lower bound {lower} s",
                        p.step_time_s.get()
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} candidates checked");
}

/// The GPU rank order (issue 14: which network each axis runs on, searched):
/// tp 4 × pp 2 × dp 2 on two 8-GPU nodes. Megatron's default order
/// (tp-cp-ep-dp-pp) fills the node with tp 4 then dp 2 (gcd(2, 8/4) = 2) and
/// sends pp across the two nodes; `tp-pp-dp` puts pp 2 in the node and dp
/// across. The planner searches both for that tuple, one order where pp = 1.
#[test]
fn rank_order_moves_the_pipeline_into_the_node() {
    use meshplan_core::mesh::GpuSplit;
    use meshplan_core::parallelism::{LogicalAxis, RankOrder};
    let outer = Degrees {
        dp: 2,
        tp: 4,
        pp: 2,
        ..Degrees::default()
    };
    let inner = Degrees {
        order: RankOrder::PipelineInner,
        ..outer
    };
    let (so, si) = (GpuSplit::new(&outer, 8), GpuSplit::new(&inner, 8));
    assert_eq!(
        (so.in_node(LogicalAxis::Pp), so.in_node(LogicalAxis::Dp)),
        (1, 2)
    );
    assert_eq!(
        (si.in_node(LogicalAxis::Pp), si.in_node(LogicalAxis::Dp)),
        (2, 1)
    );
    assert_eq!(
        RankOrder::parse("tp-pp-dp").unwrap(),
        RankOrder::PipelineInner
    );
    assert!(RankOrder::parse("pp-tp").is_err());
    // the search tries both orders for this tuple, one where they coincide
    use meshplan_core::planner::rank_orders;
    let both = [RankOrder::PipelineOuter, RankOrder::PipelineInner];
    assert_eq!(rank_orders(&Topology::gpus(16, 8), &outer), both);
    let no_pp = Degrees {
        pp: 1,
        dp: 4,
        ..outer
    };
    assert_eq!(
        rank_orders(&Topology::gpus(16, 8), &no_pp),
        [RankOrder::PipelineOuter]
    );
    // tp 8 fills the node: nothing else fits beside it
    let full = Degrees {
        tp: 8,
        dp: 1,
        ..outer
    };
    assert_eq!(
        rank_orders(&Topology::gpus(16, 8), &full),
        [RankOrder::PipelineOuter]
    );
    assert_eq!(rank_orders(&cube(), &outer), [RankOrder::PipelineOuter]);
}

/// Issue 25: a TPU slice's search tries every axis order, and ZeRO-3 over
/// dp shards the same ranks as fsdp; before, LLaMA-3 8B on a v5p 4x8x8
/// slice under MaxText listed its best plan six times (3 axis orders × dp
/// or fsdp) with the same figures. The top plans are now distinct: no two
/// share choices, degrees (ZeRO-3's data ranks counted once) and figures.
#[test]
fn the_top_plans_are_distinct() {
    let cat = Catalog::builtin();
    let (spec, chip) = (
        cat.model("llama-3-8b").unwrap(),
        cat.chip("tpu-v5p").unwrap(),
    );
    let s = TrainSearch::new(
        spec,
        chip,
        Topology::torus(1, &[4, 8, 8]),
        TrainConfig {
            batch_tokens: 4 << 20,
            seq_len: 8192,
            framework: Framework::Maxtext,
            ..TrainConfig::default()
        },
    );
    let r = s.run();
    assert_eq!(r.plans.len(), 10);
    let canon = |f: &meshplan_core::planner::Found| {
        let d = f.deg;
        let data = if f.choice.zero >= 3 {
            (1, d.dp * d.fsdp)
        } else {
            (d.dp, d.fsdp)
        };
        (data, d.tp, d.pp, d.cp, f.choice, f.step_time().to_bits())
    };
    for (i, a) in r.plans.iter().enumerate() {
        for b in &r.plans[i + 1..] {
            assert_ne!(canon(a), canon(b), "{:?} / {:?}", a.deg, b.deg);
        }
    }
    // the kept twin is the first in enumeration order: the given axis order
    assert_eq!(r.plans[0].topo, 0);
}

/// The search costs a plan's collectives only when the plan can still be
/// ranked or reported (issue 22: a plan over the HBM whose compute time
/// alone is behind the best rejected plan, and whose memory is above the
/// closest one's, is counted and dropped). The plans it reports as the
/// best and the closest rejected equal a brute-force loop over `analyze`
/// that costs every plan: (best key, closest memory).
#[test]
fn rejected_plans_equal_brute_force() {
    for (m, gpus) in [("llama-2-13b", 8), ("llama-2-70b", 8)] {
        for obj in [TrainObjective::Time, TrainObjective::MemoryHeadroom] {
            let (spec, chip) = model_and_chip(m, "h100");
            let topo = Topology::gpus(gpus, 8);
            let base = TrainConfig {
                batch_tokens: 1 << 20,
                seq_len: 4096,
                framework: Framework::Megatron,
                ..TrainConfig::default()
            };
            let mut s = TrainSearch::new(spec, chip, topo.clone(), base);
            s.space.permute_torus = false;
            s.objective = obj;
            let r = s.run();
            let prof = active_profile(chip, None).unwrap();
            let mut best: Option<(f64, f64, f64)> = None;
            let mut closest = f64::INFINITY;
            let mut buf = Vec::new();
            for f in factorizations(topo.chips()) {
                let deg = Degrees::from_factors(f);
                inner_choices(&s.space, &base, spec.arch.n_layers, &deg, &mut buf);
                let mut fitted = None;
                for c in &buf {
                    if deg.pp == 1 && fitted == Some((c.zero, c.remat, c.sp, c.offload)) {
                        continue;
                    }
                    let cfg = c.config(&base, deg);
                    let rep = analyze_with(spec, chip, &topo, &cfg, prof.as_ref(), &mut NoTrace);
                    if !rep.feasible {
                        continue;
                    }
                    if rep.fits {
                        fitted = Some((c.zero, c.remat, c.sp, c.offload));
                        continue;
                    }
                    let mem = rep.memory_per_device.total_bytes.get();
                    let (lower, upper) = (rep.step_time_lower_s.get(), rep.step_time_upper_s.get());
                    let key = match obj {
                        TrainObjective::MemoryHeadroom => (-rep.memory_margin_bytes, lower, upper),
                        _ => (lower, upper, mem),
                    };
                    if best.map_or(true, |b| key < b) {
                        best = Some(key);
                    }
                    closest = closest.min(mem);
                }
            }
            let got = r.closest_rejected.as_ref().expect("a rejected plan");
            assert!(
                rel(got.eval.memory.total_bytes.get(), closest) < 1e-12,
                "{m} {obj:?}: closest {} vs {closest}",
                got.eval.memory.total_bytes.get()
            );
            let want = best.expect("a rejected plan");
            match (&r.best_rejected, r.plans.first()) {
                (Some(b), _) => {
                    // a rejected plan is ranked by its roofline bounds
                    let second = match obj {
                        TrainObjective::MemoryHeadroom => b.eval.lower,
                        _ => b.eval.upper,
                    };
                    let k = (b.score(), second);
                    assert!(
                        rel(k.0, want.0) < 1e-9 && rel(k.1, want.1) < 1e-9,
                        "{m} {obj:?}: best rejected {k:?} vs {want:?}"
                    );
                }
                // reported only when better than the winner
                (None, Some(w)) => assert!(w.score() <= want.0, "{m} {obj:?}"),
                (None, None) => panic!("{m} {obj:?}: neither a plan nor a rejected one"),
            }
        }
    }
}

/// The 70B model on 256 H100 (issue 25): the plans are ranked by the
/// pessimistic end of their interval, and none of the top 5 is in an
/// unvalidated regime without a flag — each plan-level input outside the
/// profile's fitted ranges, or a TP group across nodes, is in its `regime`,
/// and the job's own (sequence 8192 against 4096 fitted) is in the report's
/// `job_outside_fitted_range`.
#[test]
fn seventy_b_on_256_h100_ranks_with_uncertainty_and_flags_every_unvalidated_plan() {
    use meshplan_core::planner::{plan_train, PlanTrainRequest};
    use meshplan_core::scenario::Scenario;
    use meshplan_core::training::scenario::resolve_workload;
    let sc = Scenario::parse(
        "[model]\nname = \"llama-3.1-70b\"\n[hardware]\nchip = \"h100\"\nchips = 256\n[training]\nbatch_tokens = 4194304\nseq_len = 8192\n",
        "test",
    )
    .unwrap();
    let req = PlanTrainRequest {
        workload: resolve_workload(&sc, Catalog::builtin(), None).unwrap(),
        objective: TrainObjective::Time,
        top: 5,
        threads: None,
        explain_rank: None,
        cancel: None,
    };
    let rep = plan_train(&req, &|_, _| {}).unwrap();
    assert!(rep.ranked_by_prediction && rep.plans.len() == 5);
    // the job: sequence length 8192 against the fitted 4096
    let job = rep.job_outside_fitted_range.as_deref().unwrap_or("");
    assert!(job.contains("sequence length 8192"), "{job}");
    let iv = req
        .workload
        .profile
        .as_ref()
        .and_then(|p| p.profile.interval.clone())
        .expect("the H100 InfiniBand profile records held-out residuals");
    let mut prev = f64::NEG_INFINITY;
    for p in &rep.plans {
        let pred = p.report.predicted.as_ref().expect("predicted");
        let t = pred.step_time_s.get();
        // every plan-level input outside the ranges is a flag
        let plan_level: Vec<_> = pred
            .outside_fitted_range
            .iter()
            .flatten()
            .filter(|o| meshplan_core::planner::regime::PLAN_INPUTS.contains(&o.input))
            .collect();
        let across = p.report.degrees.tp > 8;
        assert_eq!(
            p.regime.len(),
            plan_level.len() + usize::from(across),
            "plan {}: {:?}",
            p.rank,
            p.regime
        );
        // hand-derived interval: t·p90, × 1.4 when flagged
        let [_, hi] = p.ranking_interval_s.expect("interval");
        let want = if p.regime.is_empty() {
            t * iv.p90
        } else {
            t * iv.p90 * UNVALIDATED_FACTOR
        };
        assert!(rel(hi, want) < 1e-12, "plan {}: {hi} vs {want}", p.rank);
        assert_eq!(p.score, hi);
        assert!(hi >= prev, "ranked by the pessimistic end");
        prev = hi;
    }
    // the table shows the flags: every row carries "job*" (the job's own
    // inputs, named in the note) or "in range"
    let text = meshplan_core::view::render_text(&meshplan_core::view::Render::doc(&rep));
    assert!(text.contains("regime") && text.contains("job*"), "{text}");
}

/// An unvalidated layout is not ranked above a validated one on its point
/// prediction alone: the 70B plan issue 25 found ranked first before this
/// rule (dp 16 × fsdp 2 × tp 2 × pp 2 × cp 2, ZeRO-2, interleaved m = 16,
/// v = 5: cp, fsdp and ZeRO-2 all outside the H100 profile's ranges) is
/// predicted faster than the validated tp 4 × pp 4 × dp 16 plan, but its
/// pessimistic end is t·p90·1.4 (p90 = 1.035 → ×1.449), behind the validated
/// plan's t·p90 (×1.035), so it ranks below it.
#[test]
fn a_flagged_plan_needs_the_margin_to_rank_above_a_validated_one() {
    use meshplan_core::parallelism::{Remat, Schedule};
    let (spec, chip) = model_and_chip("llama-3.1-70b", "h100");
    let topo = Topology::gpus(256, 8);
    let prof = active_profile(chip, None).unwrap();
    let base = TrainConfig {
        batch_tokens: 4 << 20,
        seq_len: 8192,
        framework: Framework::Megatron,
        remat: Remat::None,
        sequence_parallel: true,
        schedule: Schedule::Interleaved,
        ..TrainConfig::default()
    };
    let flagged = TrainConfig {
        degrees: Degrees {
            dp: 16,
            fsdp: 2,
            tp: 2,
            pp: 2,
            cp: 2,
            ..Degrees::default()
        },
        zero: 2,
        microbatches: 16,
        virtual_stages: 5,
        ..base
    };
    let validated = TrainConfig {
        degrees: Degrees {
            dp: 16,
            tp: 4,
            pp: 4,
            ..Degrees::default()
        },
        zero: 1,
        microbatches: 32,
        virtual_stages: 5,
        ..base
    };
    let f = analyze_with(spec, chip, &topo, &flagged, prof.as_ref(), &mut NoTrace);
    let v = analyze_with(spec, chip, &topo, &validated, prof.as_ref(), &mut NoTrace);
    assert!(f.fits && v.fits);
    let (fr, vr) = (Regime::of_report(&f, &topo), Regime::of_report(&v, &topo));
    assert!(!fr.validated() && vr.validated());
    let (ft, vt) = (
        f.predicted.as_ref().unwrap().step_time_s.get(),
        v.predicted.as_ref().unwrap().step_time_s.get(),
    );
    assert!(
        ft < vt,
        "the flagged plan is predicted faster: {ft} vs {vt}"
    );
    let (fi, vi) = (
        Interval::of_report(&f, &topo).unwrap(),
        Interval::of_report(&v, &topo).unwrap(),
    );
    let p90 = prof
        .as_ref()
        .unwrap()
        .profile
        .interval
        .as_ref()
        .unwrap()
        .p90;
    assert!(rel(fi.hi_s, ft * p90 * 1.4) < 1e-12 && rel(vi.hi_s, vt * p90) < 1e-12);
    assert!(
        fi.hi_s > vi.hi_s,
        "but ranks below it: {} vs {}",
        fi.hi_s,
        vi.hi_s
    );
}

/// The "behind the bar" pruning with the interval factor is exact: the
/// best 5 of a search keeping 5 are the first 5 of one keeping 2,000
/// (whose bar is far looser, so it predicts many more plans).
#[test]
fn pruning_by_the_interval_bound_keeps_the_ranking() {
    let (spec, chip, base) = l13b_h100_4m();
    let run = |k: usize| {
        let mut s = TrainSearch::new(spec, chip, Topology::gpus(64, 8), base);
        s.top_k = k;
        s.threads = Some(1);
        s.run()
    };
    let (small, large) = (run(5), run(2000));
    assert!(small.predicted && small.bounded > large.bounded);
    let key = |f: &meshplan_core::planner::Found| (f.deg, f.choice, f.score().to_bits());
    let a: Vec<_> = small.plans.iter().map(key).collect();
    let b: Vec<_> = large.plans.iter().take(5).map(key).collect();
    assert_eq!(a, b);
}
