//! The quantities `check` knows are the reports' own paths (issue 22), and
//! `check` evaluates each command through the entry point its CLI command
//! calls: a claim on the calibrated prediction (`predicted.step_time_s`), a
//! predicted MFU or throughput, or a serving TPOT is refereed like any other.

mod common;

use std::path::{Path, PathBuf};

use meshplan_core::check::eval::{evaluate, is_known_key, leaf_paths, Args, Command};
use meshplan_core::check::{check, parse_claims, Verdict};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::Catalog;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

/// Every leaf path of `report` that `command` does not know, as
/// "`command` PATH (from WHERE)".
fn unknown_paths(command: Command, report: &serde_json::Value, from: &str) -> Vec<String> {
    leaf_paths(report)
        .into_iter()
        .filter(|(p, _)| !is_known_key(command, p))
        .map(|(p, _)| format!("`{}` {p} (from {from})", command.name()))
        .collect()
}

/// Every leaf path of every report the examples produce is a key `check`
/// knows: `train` and `infer` (and `model`, `hw`) of every example scenario
/// (scenario files, and the scenarios of the claims files), and the report
/// of every claim of every shipped claims file (which covers
/// `collective`, `roofline`, `shard` and `mfu` with the book's arguments).
/// A report field no representative fills fails here, by name.
#[test]
fn every_report_path_is_known() {
    let cat = Catalog::builtin();
    let none = Args::new();
    let mut missing = Vec::new();
    let mut evaluated = std::collections::BTreeSet::new();
    let dirs = [
        "examples",
        "examples/train",
        "examples/infer",
        "examples/plan",
    ];
    for f in dirs.iter().flat_map(|d| toml_files(&root().join(d))) {
        let src = std::fs::read_to_string(&f).unwrap();
        let s = Scenario::parse(&src, &f.display().to_string()).unwrap();
        for c in [Command::Train, Command::Infer, Command::Model, Command::Hw] {
            if let Ok((rep, _)) = evaluate(c, &s, cat, &none, false) {
                evaluated.insert(c);
                missing.extend(unknown_paths(c, &rep, &f.display().to_string()));
            }
        }
    }
    for d in ["examples/book", "examples/claims", "examples/playbook"] {
        for f in toml_files(&root().join(d)) {
            let file = common::claims_file(&f);
            let mut local = cat.clone();
            for m in &file.models {
                local.add_model(m.clone());
            }
            for (name, s) in &file.scenarios {
                for c in [Command::Train, Command::Infer] {
                    if let Ok((rep, _)) = evaluate(c, s, &local, &none, false) {
                        let from = format!("{}, scenario {name}", f.display());
                        missing.extend(unknown_paths(c, &rep, &from));
                    }
                }
            }
            for c in &file.claims {
                let s = &file.scenarios[&c.scenario];
                if let Ok((rep, _)) = evaluate(c.command, s, &local, &c.args, false) {
                    evaluated.insert(c.command);
                    let from = format!("{}, claim {}", f.display(), c.id);
                    missing.extend(unknown_paths(c.command, &rep, &from));
                }
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "paths check does not know: {missing:#?}"
    );
    assert_eq!(
        evaluated.len(),
        Command::ALL.len(),
        "every command was evaluated"
    );
}

/// The known keys still give what the hand lists gave: the keys claims use
/// in the shipped files, element paths under arrays, the default command of
/// a claim without one, and no typo accepted.
#[test]
fn known_keys_cover_the_old_cases() {
    use meshplan_core::check::keys::known_keys;
    assert!(is_known_key(Command::Train, "predicted.step_time_s"));
    assert!(is_known_key(Command::Train, "prediction_note"));
    assert!(is_known_key(
        Command::Train,
        "memory_per_device.total_bytes"
    ));
    assert!(is_known_key(Command::Train, "rules.pure_dp"));
    assert!(is_known_key(Command::Train, "comms.0.seconds"));
    assert!(is_known_key(Command::Infer, "serving.static_batch.tpot_s"));
    assert!(is_known_key(
        Command::Infer,
        "serving.continuous.tpot_s.p99"
    ));
    assert!(is_known_key(Command::Hw, "peak_flops_per_s.fp4"));
    assert!(is_known_key(Command::Hw, "slices.7.peak_flops_per_s"));
    assert!(is_known_key(Command::Mfu, "mfu"));
    assert!(!is_known_key(Command::Train, "predicted.step_time"));
    assert!(!is_known_key(Command::Model, "params_totl"));
    assert!(is_known_key(Command::Train, "comms"));
    // the hw report is not a model key: a claim on it defaults to `hw`
    assert!(!known_keys(Command::Model).contains("hbm_capacity_bytes"));
    assert!(known_keys(Command::Hw).contains("hbm_capacity_bytes"));
}

/// LLaMA-3 8B on 64 H100 (H100 has a calibrated efficiency profile).
const RUN: &str = "model = { name = \"llama-3-8b\" }\nhardware = { chip = \"h100\", mesh = \"8x8\" }\ntraining = { batch_tokens = \"4Mi\", seq_len = 8192, remat = \"selective\", master_weights = true }\nparallelism = { dp = 4, tp = 8, pp = 2, zero = 1, schedule = \"1f1b\", microbatches = 128, sequence_parallel = true }\n";

/// Llama-3.1 70B served by vLLM on 8 H100, a static batch of 64.
const SERVE: &str = "model = { name = \"llama-3.1-70b\" }\nhardware = { chip = \"h100\", chips = 8 }\nparallelism = { tp = 8 }\ninference = { engine = \"vllm\", batch = 64, prompt_len = 1000, gen_len = 500 }\n";

/// The scenario of a claims-file body (`[scenarios.run]`), as `check` reads it.
fn scenario(body: &str) -> Scenario {
    let src = format!(
        "[scenarios.run]\n{body}\n[[claim]]\nid = \"x\"\nscenario = \"run\"\nquantity = \"params_total\"\nclaimed = \"1\"\n"
    );
    let f = parse_claims(&src, "run.toml", &mut |p| Err(format!("no file {p}"))).unwrap();
    f.scenarios["run"].clone()
}

/// `train --json`'s report of `body`, through the function `meshplan
/// train` calls (`resolve_with` then `TrainSetup::analyze`).
fn train_report(body: &str) -> serde_json::Value {
    let s = scenario(body);
    let setup =
        meshplan_core::training::scenario::resolve_with(&s, Catalog::builtin(), None).unwrap();
    serde_json::to_value(setup.analyze(&mut NoTrace)).unwrap()
}

/// `infer --json`'s report of `body`, through the functions `meshplan
/// infer` calls (`inference::scenario::resolve` then `inference::evaluate`).
fn infer_report(body: &str) -> serde_json::Value {
    let s = scenario(body);
    let r = meshplan_core::inference::scenario::resolve(&s, Catalog::builtin()).unwrap();
    let rep =
        meshplan_core::inference::evaluate(&r.model, &r.chip, &r.query, &mut NoTrace).unwrap();
    serde_json::to_value(rep).unwrap()
}

/// The verdict on one claim `quantity = claimed` (rel_tol 1 %) about `body`.
fn verdict(body: &str, command: &str, quantity: &str, claimed: f64) -> Verdict {
    let src = format!(
        "[scenarios.run]\n{body}\n[[claim]]\nid = \"c\"\nscenario = \"run\"\ncommand = \"{command}\"\nquantity = \"{quantity}\"\nclaimed = {claimed:?}\nrel_tol = 0.01\n"
    );
    let f = parse_claims(&src, "c.toml", &mut |p| Err(format!("no file {p}")))
        .unwrap_or_else(|e| panic!("{e}\n{src}"));
    let r = check(&f, Catalog::builtin(), false).unwrap();
    let c = &r.claims[0];
    assert!(c.reason.is_none(), "{quantity}: {:?}", c.reason);
    c.verdict
}

/// A claim states meshplan's own value (as `train --json` / `infer --json`
/// print it, from the core function the CLI calls): PASS. The same claim
/// 20 % off, outside its 1 % tolerance: FAIL.
fn pass_at_own_value_fail_20_off(
    body: &str,
    command: &str,
    quantity: &str,
    report: &serde_json::Value,
) {
    let own = meshplan_core::check::lookup(report, quantity)
        .and_then(|v| v.as_f64())
        .unwrap_or_else(|| panic!("{command} reports no {quantity}"));
    assert!(own.is_finite() && own > 0.0, "{quantity} = {own}");
    assert_eq!(
        verdict(body, command, quantity, own),
        Verdict::Pass,
        "{quantity}"
    );
    assert_eq!(
        verdict(body, command, quantity, own * 1.2),
        Verdict::Fail,
        "{quantity}"
    );
    assert_eq!(
        verdict(body, command, quantity, own * 0.8),
        Verdict::Fail,
        "{quantity}"
    );
}

#[test]
fn predicted_training_figures_are_claimable() {
    let rep = train_report(RUN);
    for q in [
        "predicted.step_time_s",
        "predicted.mfu",
        "predicted.tokens_per_s",
    ] {
        pass_at_own_value_fail_20_off(RUN, "train", q, &rep);
    }
}

#[test]
fn serving_tpot_is_claimable() {
    let rep = infer_report(SERVE);
    pass_at_own_value_fail_20_off(SERVE, "infer", "serving.static_batch.tpot_s", &rep);
}

/// A claimed throughput is a rate, not seconds: "31k tokens/s" parses.
#[test]
fn predicted_throughput_takes_a_count_unit() {
    let rep = train_report(RUN);
    let own = meshplan_core::check::lookup(&rep, "predicted.tokens_per_s")
        .and_then(|v| v.as_f64())
        .unwrap();
    let src = format!(
        "[scenarios.run]\n{RUN}\n[[claim]]\nid = \"c\"\nscenario = \"run\"\ncommand = \"train\"\nquantity = \"predicted.tokens_per_s\"\nclaimed = \"{:.1}k\"\nrel_tol = 0.01\n",
        own / 1e3
    );
    let f = parse_claims(&src, "c.toml", &mut |p| Err(format!("no file {p}"))).unwrap();
    let r = check(&f, Catalog::builtin(), false).unwrap();
    assert_eq!(r.claims[0].verdict, Verdict::Pass, "{:?}", r.claims[0]);
}

/// Unknown predicted keys are caught before evaluation, with suggestions.
#[test]
fn unknown_predicted_key_suggests_the_right_one() {
    let src = format!(
        "[scenarios.run]\n{RUN}\n[[claim]]\nid = \"c\"\nscenario = \"run\"\ncommand = \"train\"\nquantity = \"predicted.step_time\"\nclaimed = \"15 s\"\n"
    );
    let f = parse_claims(&src, "c.toml", &mut |p| Err(format!("no file {p}"))).unwrap();
    let why = f.claims[0]
        .unknown
        .clone()
        .expect("unknown before evaluation");
    assert!(why.contains("predicted.step_time_s"), "{why}");
}

/// A claim on the prediction of a plan that has none (16 sequences over
/// 64-way DP: 48 ranks would hold no sequence) is CANNOT-CHECK, and the
/// reason says why.
#[test]
fn no_prediction_says_why() {
    let body = RUN.replace(
        "parallelism = { dp = 4, tp = 8, pp = 2, zero = 1, schedule = \"1f1b\", microbatches = 128, sequence_parallel = true }",
        "parallelism = { dp = 64, microbatches = 128 }",
    )
    .replace("\"4Mi\"", "\"64Ki\"");
    let src = format!(
        "[scenarios.run]\n{body}\n[[claim]]\nid = \"c\"\nscenario = \"run\"\ncommand = \"train\"\nquantity = \"predicted.step_time_s\"\nclaimed = \"1 s\"\n"
    );
    let f = parse_claims(&src, "c.toml", &mut |p| Err(format!("no file {p}"))).unwrap();
    let r = check(&f, Catalog::builtin(), false).unwrap();
    let c = &r.claims[0];
    assert_eq!(c.verdict, Verdict::CannotCheck);
    let why = c.reason.clone().unwrap_or_default();
    assert!(
        why.contains("no calibrated prediction") && why.contains("data-parallel ranks"),
        "{why}"
    );
}
