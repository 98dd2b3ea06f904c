//! External validation (issue 25, part 6): published runs outside the
//! shared validation data and the reserved tables, in
//! `data/validation/external_runs.json`, compared and never fitted on. The
//! figures `docs/fidelity.md` ("External validation") reports are
//! recomputed here from the file, so the docs and the code agree.

use std::collections::BTreeMap;

use meshplan_core::fidelity::data::{parse_published_json, VALIDATION_ONLY};
use meshplan_core::fidelity::report::{calibrate_runs, load_dataset, validate, Thresholds};
use meshplan_core::fidelity::stats::ErrStats;
use meshplan_core::fidelity::EfficiencyProfile;
use meshplan_core::parallelism::{DpOverlap, Overlap, TpOverlap};
use meshplan_core::Catalog;

const EXTERNAL: &str = include_str!("../../../data/validation/external_runs.json");
const PUBLISHED: &str = include_str!("fixtures/validation/published_runs.json");
const DOCS: &str = include_str!("../../../docs/fidelity.md");

/// The `| group | n | median | p90 |` table under "## External
/// validation": group → (n, median %, p90 %).
fn documented() -> BTreeMap<String, (usize, f64, f64)> {
    let section = DOCS
        .split("## External validation")
        .nth(1)
        .expect("docs/fidelity.md has an External validation section");
    let pct = |s: &str| {
        s.trim()
            .trim_end_matches('%')
            .trim()
            .parse::<f64>()
            .unwrap()
    };
    section
        .lines()
        .skip_while(|l| !l.starts_with("| group | n | median | p90 |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let c: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (
                c[0].to_string(),
                (c[1].parse().unwrap(), pct(c[2]), pct(c[3])),
            )
        })
        .collect()
}

fn as_doc(s: &ErrStats) -> (usize, f64, f64) {
    let r = |x: f64| (1000.0 * x).round() / 10.0;
    (s.n, r(s.median), r(s.p90))
}

#[test]
fn every_row_enters_and_is_validation_only() {
    let (runs, skipped) = load_dataset(EXTERNAL, "external_runs.json", None).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    // 7 A100 (titan24, bloom22, ibm24) + 24 B200 (simumax26) + 10 H100
    // (titan25, olmocore24, ibm24) + 1 TPU v6e (tpurecipes25)
    assert_eq!(runs.len(), 42);
    let on = |chip: &str| runs.iter().filter(|r| r.chip == chip).count();
    assert_eq!(
        [on("a100-80gb"), on("b200"), on("h100"), on("tpu-v6e")],
        [7, 24, 10, 1]
    );
    assert!(runs.iter().all(|r| r.validation_only && r.clean));
    // every row names a source URL and notes (the file's own rule)
    let v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    for e in v.as_array().unwrap() {
        assert_eq!(e["use"], VALIDATION_ONLY);
        assert!(e["source"]["url_or_repo_path"]
            .as_str()
            .unwrap()
            .starts_with("https://"));
        assert!(!e["notes"].as_str().unwrap().is_empty());
    }
}

#[test]
fn the_documented_figures_are_validates() {
    let (runs, skipped) = load_dataset(EXTERNAL, "external_runs.json", None).unwrap();
    let r = validate(&runs, skipped, None, &Thresholds::default(), true);
    let x = r.external.expect("external rows");
    let mut got = BTreeMap::new();
    got.insert("pooled".to_string(), as_doc(&x.pooled));
    for (name, m) in [
        ("source", &x.by_source),
        ("chip", &x.by_chip),
        ("framework", &x.by_framework),
    ] {
        for (k, s) in m {
            got.insert(format!("{name} {k}"), as_doc(s));
        }
    }
    assert_eq!(got, documented());
    // a single-source-per-framework file has no held-out fold to report
    assert!(r.held_out.is_none());
}

#[test]
fn the_sign_of_each_error_is_as_documented() {
    // every external run is predicted too fast (docs); the torchtitan 405B
    // and IBM 7B HSDP H100 runs, which name no fabric, were over 3× and 36 %
    // too slow while the reader priced them on the base profile's congested
    // EFA scale-out instead of the catalog network `train` uses
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    let r = validate(&runs, Vec::new(), None, &Thresholds::default(), true);
    for row in &r.runs {
        let e = row.step_error.unwrap();
        assert!(e < 0.0, "{}: {e}", row.id);
    }
}

#[test]
fn a_non_gated_ffn_text_is_a_plain_mlp() {
    // "GeLU, non-gated (4*D)" (BLOOM, GPT-3, the shipped Korthikanti entries) is
    // a plain 2-matrix MLP; "SwiGLU (gated)" a 3-matrix one
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    for r in &runs {
        let plain = r.id.starts_with("bloom") || r.id.starts_with("tpurecipes");
        assert_eq!(r.arch().mlp.matrices() == 2, plain, "{}", r.id);
    }
}

#[test]
fn calibrate_never_fits_on_external_rows() {
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    let chip = Catalog::builtin().chip("a100-80gb").unwrap();
    let start = EfficiencyProfile::builtin("a100-80gb").unwrap();
    let e = calibrate_runs(&runs, chip, &start, 5, 0, false, "external_runs.json")
        .expect_err("calibrate refuses validation-only rows")
        .to_string();
    assert!(e.contains(VALIDATION_ONLY), "{e}");
    assert!(e.contains("never fitted"), "{e}");
}

#[test]
fn leave_one_source_out_never_fits_on_external_rows() {
    // with the shipped published runs (two sources: kor22, mcore24) the
    // folds are theirs alone; the external rows are neither fitted nor
    // held out, and their comparison is the same as without the folds
    let (mut runs, _) = parse_published_json(PUBLISHED).unwrap();
    let (ext, _) = parse_published_json(EXTERNAL).unwrap();
    runs.extend(ext.iter().cloned());
    let r = validate(&runs, Vec::new(), None, &Thresholds::default(), false);
    let h = r.held_out.expect("two fitting sources");
    let folds: Vec<&str> = h.folds.iter().map(|f| f.source.as_str()).collect();
    assert_eq!(folds, ["kor22", "mcore24"]);
    for f in &h.folds {
        assert!(
            f.trained_on
                .iter()
                .all(|s| ext.iter().all(|e| e.source != *s)),
            "{f:?}"
        );
        assert_eq!(
            f.runs,
            runs.iter()
                .filter(|r| r.source == f.source && r.clean)
                .count()
        );
    }
    assert!(h.runs.iter().all(|row| ext.iter().all(|e| e.id != row.id)));
    let alone = validate(&ext, Vec::new(), None, &Thresholds::default(), false);
    assert_eq!(
        as_doc(&r.external.unwrap().pooled),
        as_doc(&alone.external.unwrap().pooled)
    );
}

#[test]
fn a_bad_framework_or_chip_is_a_clear_error() {
    let mut v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    v[0]["framework"] = "fsdp3".into();
    let e = parse_published_json(&v.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("framework") && e.contains("torchtitan"), "{e}");
    let mut v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    v[0]["hardware"]["catalog_chip"] = "a100-90gb".into();
    let e = parse_published_json(&v.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("catalog_chip"), "{e}");
}

#[test]
fn a_published_throughput_becomes_the_step_time_it_implies() {
    // tokens/s per GPU → step time = global-batch tokens / (rate · GPUs):
    // titan25 (torchtitan, 256 H100, global 512 × 8,192 = 4,194,304 tokens
    // at 597.3 tokens/s/GPU): 4,194,304 / (597.3 · 256) = 27.4302 s;
    // a logged iteration time is taken as written (SimuMax B200 70B, tp 8,
    // mbc 8: 556.7 ms; tpu-recipes GPT-3 on v6e-256: 17.182 s)
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    let step = |id: &str| {
        runs.iter()
            .find(|r| r.id == id)
            .and_then(|r| r.step_time_s)
            .unwrap()
    };
    let titan = step("titan25-h100gt-llama3-70b-fsdp32-tp8");
    assert!((titan - 27.4302).abs() < 1e-4, "{titan}");
    assert_eq!(step("simumax26-b200-70b-l12-tp8-pp1-dp1-mbc8"), 0.5567);
    assert_eq!(step("tpurecipes25-v6e-gpt3-175b"), 17.182);
    // the batch each run states: SimuMax tp 2 × dp 4 with 32 micro-batches of
    // one sequence per DP rank → 32 accumulation steps of mbs 1
    let r = runs
        .iter()
        .find(|r| r.id == "simumax26-b200-70b-l12-tp2-pp1-dp4-mbc32")
        .unwrap();
    let c = r.config();
    assert_eq!(
        (
            c.degrees.data(),
            c.degrees.tp,
            r.micro_batch_sequences(),
            c.microbatches,
            c.zero
        ),
        (4, 2, 1, 32, 1)
    );
    assert!(c.sequence_parallel);
}

#[test]
fn a_stated_overlap_reaches_the_prediction() {
    // SimuMax runs disable Megatron's TP-comm overlap and do not overlap the
    // gradient reduce-scatter (`tp_overlap: none`, `dp_overlap: off`); the
    // same row without the fields is priced with the fitted defaults (ring:
    // the profile's tp_overlap fraction hidden; on: dp_overlap hidden). The
    // GEMMs and attention are the same; the TP and DP exposures grow.
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    let stated = runs
        .iter()
        .find(|r| r.id == "simumax26-b200-70b-l12-tp8-pp1-dp1-mbc8")
        .unwrap();
    assert_eq!(
        (stated.overlap.tp, stated.overlap.dp),
        (TpOverlap::None, DpOverlap::Off)
    );
    let mut v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    let e = v
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["id"] == stated.id.as_str())
        .unwrap();
    let par = e["parallelism"].as_object_mut().unwrap();
    par.remove("tp_overlap");
    par.remove("dp_overlap");
    let (plain, _) =
        parse_published_json(&serde_json::Value::Array(vec![e.clone()]).to_string()).unwrap();
    assert_eq!(plain[0].overlap, Overlap::default());
    let chip = Catalog::builtin().chip("b200").unwrap();
    let prof = EfficiencyProfile::builtin("b200")
        .unwrap()
        .for_run(&stated.network, &stated.cluster);
    let (a, b) = (stated.predict(chip, &prof), plain[0].predict(chip, &prof));
    assert_eq!(a.time.matmul, b.time.matmul);
    assert_eq!(a.time.attention, b.time.attention);
    // tp 8 with SP: ring hides tp_overlap·T_xfer, none hides nothing
    assert!(prof.tp_overlap > 0.0);
    assert!(a.time.tp_comm > b.time.tp_comm, "{a:?} {b:?}");
    assert!(a.step_time_s > b.step_time_s);
    // a bad value is a clear error naming the setting
    let mut bad: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    bad[4]["parallelism"]["tp_overlap"] = "sometimes".into();
    let err = parse_published_json(&bad.to_string())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tp_overlap") && err.contains("none, ring, pipelined"),
        "{err}"
    );
    // pipelined TP overlap without sequence parallelism is refused, as
    // `train` refuses it (the async-TP row states SP)
    let mut v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    let e = v
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["id"] == "titan25-h100gt-llama3-70b-fsdp32-asynctp8")
        .unwrap();
    e["parallelism"]["sequence_parallel"] = false.into();
    let err = parse_published_json(&serde_json::Value::Array(vec![e.clone()]).to_string())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tp_overlap") && err.contains("sequence parallelism"),
        "{err}"
    );
}

#[test]
fn a_stated_hybrid_sharding_group_is_read() {
    // IBM's 7B: HSDP, sharded inside each 8-GPU node and replicated across
    // the 16 (A100) nodes, ZeRO 0 across replicas; the 34B/70B rows shard
    // over every rank (ZeRO 3, no group)
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    let get = |id: &str| runs.iter().find(|r| r.id == id).unwrap();
    let h = get("ibm24-a100-llama2-7b-hsdp");
    let c = h.config();
    assert_eq!((c.degrees.data(), c.degrees.fsdp, c.zero), (128, 8, 0));
    let f = get("ibm24-a100-llama2-70b-fsdp");
    let c = f.config();
    assert_eq!((c.degrees.data(), c.degrees.fsdp, c.zero), (128, 1, 3));
    // 128 × 2 × 4,096 tokens at 3,700 tokens/s/GPU: 1,048,576 / (3,700 · 128)
    // = 2.214054 s
    assert!((h.step_time_s.unwrap() - 2.214054).abs() < 1e-6);
    // a group that does not divide the data ranks is refused, naming it
    let mut v: serde_json::Value = serde_json::from_str(EXTERNAL).unwrap();
    let e = v
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["id"] == "ibm24-a100-llama2-7b-hsdp")
        .unwrap();
    e["parallelism"]["FSDP"] = 7.into();
    let err = parse_published_json(&serde_json::Value::Array(vec![e.clone()]).to_string())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fsdp") && err.contains("does not divide"),
        "{err}"
    );
}

#[test]
fn a_run_without_a_named_fabric_is_on_the_network_train_uses() {
    // the torchtitan and IBM sources name no fabric: the reader takes the
    // chip's catalog scale-out, as `train` does for the same configuration
    // (h100 → InfiniBand); OLMo-core's README names EFA
    let (runs, _) = parse_published_json(EXTERNAL).unwrap();
    let net = |id: &str| runs.iter().find(|r| r.id == id).unwrap().network.clone();
    let h100 = meshplan_core::Catalog::builtin().chip("h100").unwrap();
    assert_eq!(h100.default_network(), "infiniband");
    assert_eq!(net("titan25-h100gt-llama31-405b-fsdp16-tp8"), "infiniband");
    assert_eq!(net("ibm24-h100-llama2-7b-hsdp"), "infiniband");
    assert_eq!(net("olmocore24-h100-olmo2-13b"), "efa");
}
