//! `plan train` searching the global batch and the compute dtype (issue 25):
//! `--max-global-batch`, `--dtypes`, `--allow-fp8` (`planner::search_dims`).

use meshplan_core::planner::regime::UNVALIDATED_FACTOR;
use meshplan_core::planner::{
    plan_train, plan_train_with, PlanTrainReport, PlanTrainRequest, SearchDims, TrainObjective,
};
use meshplan_core::scenario::Scenario;
use meshplan_core::training::scenario::resolve_workload;
use meshplan_core::Catalog;

fn request(toml: &str, top: usize) -> PlanTrainRequest {
    let sc = Scenario::parse(toml, "test").unwrap();
    PlanTrainRequest {
        workload: resolve_workload(&sc, Catalog::builtin(), None).unwrap(),
        objective: TrainObjective::Time,
        top,
        threads: None,
        explain_rank: None,
        cancel: None,
    }
}

fn run(req: &PlanTrainRequest, dims: &SearchDims) -> meshplan_core::Result<PlanTrainReport> {
    plan_train_with(req, dims, &|_, _| {})
}

fn batch(max: &str) -> SearchDims {
    SearchDims {
        max_global_batch: Some(max.into()),
        ..SearchDims::default()
    }
}

/// GPT-2 on one TPU v5e under the book's accounting (roofline, no
/// prediction), the book's 6·P FLOPs per token (no attention): on one chip
/// there is no collective and no pipeline, so the lower bound of the best
/// plan (no remat) is T_math = 6·P·B / C and its tokens/s is C / (6·P) at
/// every batch — with P = 124,439,808 (GPT-2 small: 12 layers of 12·768²
/// plus biases and norms, 50,257·768 tied embedding, 1,024·768 positions)
/// and C = 1.97e14 bf16, 1.97e14 / (6 · 124,439,808) = 263,849.7 tokens/s.
/// The batches tie per token, so the plan at the requested batch (less
/// memory) ranks first: a larger batch is never chosen for nothing.
#[test]
fn on_one_chip_every_batch_ties_per_token_and_the_requested_batch_ranks_first() {
    let req = request(
        "[model]\nname = \"gpt-2\"\n[hardware]\nchip = \"tpu-v5e\"\nmesh = \"1x1\"\n[training]\nbatch_tokens = 8192\nseq_len = 1024\ninclude_attention = false\nflops = \"book\"\nframework = \"book\"\n",
        8,
    );
    let r = run(&req, &batch("32 seqs")).unwrap();
    assert!(
        !r.ranked_by_prediction,
        "the book's TPU accounting ranks by the roofline"
    );
    let s = r.searched.as_ref().unwrap();
    assert_eq!(s.batches_tokens, [8192, 16384, 32768]);
    assert!(s.ranked_per_token);
    let want = 1.97e14 / (6.0 * 124_439_808.0);
    let best = r.plans[0].variant.as_ref().unwrap();
    assert_eq!(best.batch_tokens, 8192, "ties go to the requested batch");
    assert!(
        (best.tokens_per_s / want - 1.0).abs() < 1e-9,
        "{}",
        best.tokens_per_s
    );
    // the same plan at 2B and 4B: the same tokens/s, ranked behind
    for b in [16384, 32768] {
        let p = r
            .plans
            .iter()
            .find(|p| p.variant.as_ref().unwrap().batch_tokens == b)
            .expect("the larger batches are listed");
        let v = p.variant.as_ref().unwrap();
        assert!(
            (v.tokens_per_s / want - 1.0).abs() < 1e-9,
            "{b}: {}",
            v.tokens_per_s
        );
        // time to N = 10¹² tokens: N / tokens/s
        assert!((v.time_to_n_tokens_s * want / 1e12 - 1.0).abs() < 1e-9);
    }
}

/// Llama-3 8B on 8 H100 with 16 sequences of 4,096: the merged ranking is
/// the per-token order of the searches at each batch (B, 2B, 4B run on their
/// own, without the flag): plan 1 is the per-batch winner with the smallest
/// pessimistic step time over B. Per-step costs (the gradient reduction and
/// the optimizer update, the fixed step overhead) do not grow with B, so
/// here a larger batch wins — and says so.
#[test]
fn the_batch_search_ranks_per_token_and_reports_the_batch_it_chose() {
    let toml = |b: u64| {
        format!("[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n[training]\nbatch_tokens = {b}\nseq_len = 4096\n")
    };
    let b0 = 16 * 4096;
    let req = request(&toml(b0), 5);
    let r = run(&req, &batch("256Ki")).unwrap();
    assert!(r.ranked_by_prediction);
    // the reference: one plain search per batch, each winner per token
    let (mut best_b, mut best_key, mut best) = (0, f64::INFINITY, None);
    let mut candidates = 0;
    for b in [b0, 2 * b0, 4 * b0] {
        let alone = plan_train(&request(&toml(b), 1), &|_, _| {}).unwrap();
        candidates += alone.candidates;
        let p = alone.plans[0].clone();
        let key = p.ranking_interval_s.unwrap()[1] / b as f64;
        if key < best_key {
            (best_b, best_key, best) = (b, key, Some(p));
        }
    }
    assert_eq!(r.candidates, candidates, "one search per batch");
    let (p1, want) = (&r.plans[0], best.unwrap());
    let v = p1.variant.as_ref().unwrap();
    assert_eq!(v.batch_tokens, best_b);
    assert!(
        best_b > b0,
        "per-step costs amortise: a larger batch wins here"
    );
    assert_eq!(p1.report.degrees, want.report.degrees);
    assert_eq!(p1.ranking_interval_s, want.ranking_interval_s);
    // tokens/s = B / t and the ranked time to N tokens = N · t_hi / B
    let t = p1.predicted_step_time_s.unwrap();
    assert!((v.tokens_per_s - best_b as f64 / t).abs() <= 1e-9 * v.tokens_per_s);
    let hi = p1.ranking_interval_s.unwrap()[1];
    let n = r.searched.as_ref().unwrap().reference_tokens as f64;
    assert!((v.ranked_time_to_n_tokens_s - n * hi / best_b as f64).abs() < 1e-6);
    assert!((v.batch_vs_requested - best_b as f64 / b0 as f64).abs() < 1e-12);
    // ranked per token, best first
    let keys: Vec<f64> = r
        .plans
        .iter()
        .map(|p| p.variant.as_ref().unwrap().ranked_time_to_n_tokens_s)
        .collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{keys:?}");
}

/// Without the flags the report is the plain search's; with a limit equal
/// to the batch, the plans are the same (one batch: ranked per step).
#[test]
fn the_search_is_unchanged_unless_asked() {
    let req = request(
        "[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n[training]\nbatch_tokens = 65536\nseq_len = 4096\n",
        5,
    );
    let plain = plan_train(&req, &|_, _| {}).unwrap();
    let off = run(&req, &SearchDims::default()).unwrap();
    assert!(off.searched.is_none() && off.plans.iter().all(|p| p.variant.is_none()));
    let same = run(&req, &batch("65536")).unwrap();
    assert!(!same.searched.as_ref().unwrap().ranked_per_token);
    for (a, b) in [(&plain, &off), (&plain, &same)] {
        assert_eq!(a.candidates, b.candidates);
        let ids = |r: &PlanTrainReport| -> Vec<_> {
            r.plans
                .iter()
                .map(|p| (p.report.degrees, p.score, p.ranking_interval_s))
                .collect()
        };
        assert_eq!(ids(a), ids(b));
    }
}

/// `--dtypes bf16,fp8` on H100: each fp8 plan is flagged (the profile was
/// fitted on bf16 runs only) and so ranked on t·p90·1.4, the bf16 plans on
/// their own flags; an fp8 plan's prediction is `--dtype fp8`'s (one
/// pricer), and the dtype leaves the job's note.
#[test]
fn fp8_plans_carry_the_dtype_flag_and_its_margin() {
    let toml = "[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n[training]\nbatch_tokens = 65536\nseq_len = 4096\n";
    let req = request(toml, 40);
    let dims = SearchDims {
        dtypes: Some("bf16,fp8".into()),
        ..SearchDims::default()
    };
    let r = run(&req, &dims).unwrap();
    let s = r.searched.as_ref().unwrap();
    assert_eq!(s.dtypes.len(), 2);
    assert!(!s.ranked_per_token, "one batch: ranked per step");
    let job = r.job_outside_fitted_range.clone().unwrap_or_default();
    assert!(!job.contains("dtype"), "{job}");
    let p90 = req
        .workload
        .profile
        .as_ref()
        .and_then(|p| p.profile.interval.as_ref())
        .map(|i| i.p90)
        .expect("held-out residuals");
    let fp8 = r
        .plans
        .iter()
        .find(|p| p.variant.as_ref().unwrap().dtype_changed)
        .expect("an fp8 plan among the 40");
    assert!(
        fp8.regime.iter().any(|f| f == "dtype fp8 (fitted: bf16)"),
        "{:?}",
        fp8.regime
    );
    let t = fp8.predicted_step_time_s.unwrap();
    let hi = fp8.ranking_interval_s.unwrap()[1];
    assert!(
        (hi - t * p90 * UNVALIDATED_FACTOR).abs() < 1e-9 * hi,
        "{hi} vs {t}"
    );
    // the same plan predicted by `--dtype fp8` alone
    let alone = request(&format!("{toml}compute_dtype = \"fp8\"\n"), 2000);
    let alone = plan_train(&alone, &|_, _| {}).unwrap();
    let twin = alone
        .plans
        .iter()
        .find(|p| p.report.config == fp8.report.config)
        .expect("the fp8 plan is in the fp8 search");
    assert_eq!(twin.predicted_step_time_s, fp8.predicted_step_time_s);
    for p in r
        .plans
        .iter()
        .filter(|p| !p.variant.as_ref().unwrap().dtype_changed)
    {
        assert!(
            p.regime.iter().all(|f| !f.starts_with("dtype")),
            "{:?}",
            p.regime
        );
    }
}

/// Bad input is refused with a message naming the flag, in the core (so
/// the CLI, Python and the web API alike); `--allow-fp8` where fp8 cannot
/// be searched says why instead.
#[test]
fn bad_search_dimensions_are_refused_clearly() {
    let req = |chip: &str, extra: &str| {
        request(
            &format!("[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"{chip}\"\nchips = 8\n[training]\nbatch_tokens = 65536\nseq_len = 4096\n{extra}"),
            3,
        )
    };
    let h100 = req("h100", "");
    let err = |r: &PlanTrainRequest, d: SearchDims| run(r, &d).unwrap_err().to_string();
    let e = err(&h100, batch("32Ki"));
    assert!(e.contains("below the batch"), "{e}");
    let e = err(&h100, batch("lots"));
    assert!(
        e.contains("--max-global-batch") && e.contains("seqs"),
        "{e}"
    );
    let e = err(&h100, batch("0 seqs"));
    assert!(e.contains("at least one sequence"), "{e}");
    let e = err(&h100, batch("65536 seqs"));
    assert!(e.contains("at most 6"), "{e}");
    let dt = |s: &str| SearchDims {
        dtypes: Some(s.into()),
        ..SearchDims::default()
    };
    let e = err(&h100, dt("bf16,fp4"));
    assert!(e.contains("--dtypes") && e.contains("fp4"), "{e}");
    let e = err(&h100, dt("bf16,nonsense"));
    assert!(e.contains("--dtypes"), "{e}");
    let e = err(&req("a100-80gb", ""), dt("fp8"));
    assert!(e.contains("no fp8 peak"), "{e}");
    let old = req("h100", "framework = \"megatron-2022\"\n");
    let e = err(&old, dt("bf16,fp8"));
    assert!(e.contains("no fp8 training recipe"), "{e}");
    // --allow-fp8 is a permission: on an A100 it searches bf16 and says why
    let allow = SearchDims {
        allow_fp8: true,
        ..SearchDims::default()
    };
    let r = run(&req("a100-80gb", ""), &allow).unwrap();
    let s = r.searched.unwrap();
    assert_eq!(s.dtypes.len(), 1);
    assert!(s.note.unwrap().contains("a100-80gb has no fp8 peak"));
}

/// A MoE model on a profile fitted on dense runs only (issue 25: DeepSeek-V3
/// ranked with all 256 experts on every rank, unflagged): every plan carries
/// `experts/rank` E/ep — Mixtral's 8 experts with ep 1 is "experts/rank 8",
/// with ep 2 "experts/rank 4" — so no MoE layout ranks first unflagged.
#[test]
fn every_moe_layout_is_flagged_when_no_moe_run_was_fitted() {
    let req = request(
        "[model]\nname = \"mixtral-8x7b\"\n[hardware]\nchip = \"h100\"\nchips = 16\n[training]\nbatch_tokens = 1048576\nseq_len = 4096\n",
        20,
    );
    let r = plan_train(&req, &|_, _| {}).unwrap();
    assert!(r.ranked_by_prediction && !r.plans.is_empty());
    for p in &r.plans {
        let ep = p.report.degrees.ep.max(1);
        let want = format!("experts/rank {} (fitted: no MoE run)", 8 / ep);
        assert!(p.regime.contains(&want), "ep {ep}: {:?}", p.regime);
        let hi = p.ranking_interval_s.unwrap()[1];
        let t = p.predicted_step_time_s.unwrap();
        assert!(
            hi >= t * UNVALIDATED_FACTOR * 0.999,
            "flagged: ×1.4 at least"
        );
    }
}

/// GPT-2 on a TPU v5e 2x2 (4 chips; the book's roofline, 6·P FLOPs per
/// token), 2 sequences of 1,024 asked for, up to 64 sequences: the best plan
/// at every batch is compute-bound (tp 4 at 2,048 tokens, dp 4 at 65,536),
/// so every batch ties on the overlapped lower bound at N·C / (6·P) =
/// 4 · 1.97e14 / (6 · 124,439,808) = 1,055,398.9 tokens/s. The roofline's
/// tie-break is the no-overlap upper bound, T_math + ΣT_comms, per token:
/// 6P/(N·C) + ΣT_comms/B. Data parallelism's collectives move the gradients
/// and weights, whatever the batch, so their share per token falls as 1/B,
/// while tp's grow with B: the largest batch with dp 4 ranks first.
#[test]
fn on_four_chips_the_largest_batch_wins_the_no_overlap_tie_break() {
    let req = request(
        "[model]\nname = \"gpt-2\"\n[hardware]\nchip = \"tpu-v5e\"\nmesh = \"2x2\"\n[training]\nbatch_tokens = 2048\nseq_len = 1024\ninclude_attention = false\nflops = \"book\"\nframework = \"book\"\n",
        400,
    );
    let r = run(&req, &batch("64 seqs")).unwrap();
    assert_eq!(r.searched.as_ref().unwrap().batches_tokens.len(), 6);
    let want = 4.0 * 1.97e14 / (6.0 * 124_439_808.0);
    let p1 = &r.plans[0];
    let v = p1.variant.as_ref().unwrap();
    assert_eq!(v.batch_tokens, 65536);
    assert_eq!((p1.report.degrees.dp, p1.report.degrees.tp), (4, 1));
    assert!(
        (v.tokens_per_s / want - 1.0).abs() < 1e-9,
        "{}",
        v.tokens_per_s
    );
    // the best plan at the requested batch: the same tokens/s, a larger
    // upper bound per token
    let asked = r
        .plans
        .iter()
        .find(|p| p.variant.as_ref().unwrap().batch_tokens == 2048)
        .expect("the requested batch is listed");
    let va = asked.variant.as_ref().unwrap();
    assert!(
        (va.tokens_per_s / want - 1.0).abs() < 1e-9,
        "{}",
        va.tokens_per_s
    );
    let upper = |p: &meshplan_core::planner::PlanEntry| {
        p.report.step_time_upper_s.get() / p.variant.as_ref().unwrap().batch_tokens as f64
    };
    assert!(upper(p1) < upper(asked));
}

/// Issue 25's Must-show for DeepSeek-V3 on 2,048 H800 (16Mi tokens of
/// 4,096): none of the top 5 is in an unvalidated regime without a flag.
/// Before `experts/rank`, the first plan was tp 8 × pp 8 × dp 32 with ep 1 —
/// all 256 experts on every rank, a layout no validation run has — with no
/// flag of its own; now an ep 1 plan shows "experts/rank 256".
#[test]
fn deepseek_v3_on_2048_h800_ranks_no_unflagged_moe_layout() {
    let req = request(
        "[model]\nname = \"deepseek-v3\"\n[hardware]\nchip = \"h800\"\nchips = 2048\n[training]\nbatch_tokens = 16777216\nseq_len = 4096\n",
        5,
    );
    let r = plan_train(&req, &|_, _| {}).unwrap();
    assert!(r.ranked_by_prediction && r.plans.len() == 5);
    for p in &r.plans {
        let ep = p.report.degrees.ep.max(1);
        let want = format!("experts/rank {} (fitted: no MoE run)", 256 / ep);
        assert!(p.regime.contains(&want), "ep {ep}: {:?}", p.regime);
    }
}
