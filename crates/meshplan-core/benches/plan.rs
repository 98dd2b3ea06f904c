//! Full planner searches (issue 5): 13B on 64 H100s, 70B on 1,024 H100s,
//! 405B on 16,384 H100s with a 16M-token batch; each on one thread and on
//! all cores. Candidates per search are printed once (stderr) so the
//! candidates/s figure follows from divan's time per search. `fidelity_predict`
//! times one calibrated prediction (the planner runs one per plan that passes
//! the roofline checks).

use meshplan_core::mesh::Topology;
use meshplan_core::planner::{RejectReason, TrainSearch};
use meshplan_core::training::{Framework, TrainConfig};
use meshplan_core::Catalog;

fn main() {
    for (name, m, n, b, t) in CASES {
        let s = search(m, n, b, t, None);
        let r = s.run();
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "{name}: {} candidates ({} evaluated, {} degree tuples, {} fit, {} skipped as more accumulation than needed; {} by the fidelity model: {} memory, {} unpredictable rejections)",
                r.candidates,
                r.evaluated,
                r.tuples,
                r.fitting,
                r.dominated,
                if r.predicted { "ranked" } else { "not ranked" },
                r.rejected_for(RejectReason::Memory),
                r.rejected_for(RejectReason::Unpredictable)
            );
        }
    }
    divan::main();
}

const CASES: [(&str, &str, u64, u64, u64); 3] = [
    ("13b_64", "llama-2-13b", 64, 4 << 20, 4096),
    ("70b_1024", "llama-3.1-70b", 1024, 8 << 20, 8192),
    ("405b_16384", "llama-3.1-405b", 16384, 16 << 20, 8192),
];

fn search(m: &str, n: u64, b: u64, t: u64, threads: Option<usize>) -> TrainSearch<'static> {
    let cat = Catalog::builtin();
    let spec = cat.model(m).unwrap();
    let chip = cat.chip("h100").unwrap();
    let mut s = TrainSearch::new(
        spec,
        chip,
        Topology::gpus(n, 8),
        TrainConfig {
            batch_tokens: b,
            seq_len: t,
            // what `meshplan plan train` uses on a chip with a profile
            framework: Framework::Megatron,
            ..TrainConfig::default()
        },
    );
    s.threads = threads;
    s
}

#[divan::bench(args = [0, 1, 2], sample_count = 10)]
fn plan_train_one_thread(b: divan::Bencher, case: usize) {
    let (_, m, n, bt, t) = CASES[case];
    let s = search(m, n, bt, t, Some(1));
    b.bench(|| s.run());
}

#[divan::bench(args = [0, 1, 2], sample_count = 10)]
fn plan_train_all_cores(b: divan::Bencher, case: usize) {
    let (_, m, n, bt, t) = CASES[case];
    let s = search(m, n, bt, t, None);
    b.bench(|| s.run());
}

/// One prediction as the planner makes it per fitting candidate (the gate
/// and the replica, then the calibrated pricer with the roofline floor):
/// 405B, dp=128 tp=8 pp=16 on 16,384 H100s.
#[divan::bench]
fn fidelity_predict(b: divan::Bencher) {
    use meshplan_core::step::predict::{active_profile, prepare, price_step_s, RooflineFloor};
    let cat = Catalog::builtin();
    let spec = cat.model("llama-3.1-405b").unwrap();
    let chip = cat.chip("h100").unwrap();
    let prof = active_profile(chip, None).unwrap().unwrap();
    let cfg = TrainConfig {
        batch_tokens: 16 << 20,
        seq_len: 8192,
        degrees: meshplan_core::mesh::Degrees {
            dp: 128,
            tp: 8,
            pp: 16,
            ..Default::default()
        },
        microbatches: 16,
        ..TrainConfig::default()
    };
    let pc = meshplan_core::model::params::count(&spec.arch, &mut meshplan_core::trace::NoTrace);
    let topo = meshplan_core::mesh::Topology::gpus(16_384, 8);
    let floor = RooflineFloor::evaluate(spec, chip, &topo, &cfg);
    b.bench(|| {
        let cfg = divan::black_box(&cfg);
        let p = prepare(&spec.arch, pc, chip, cfg, &topo, false, floor).unwrap();
        price_step_s(&p, chip, &prof.profile)
    });
}
