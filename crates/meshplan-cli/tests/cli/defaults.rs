//! `meshplan train` under a framework picks what the framework would
//! (micro-batch size 1, distributed optimizer, its recompute policy,
//! sequence parallelism with tp > 1), names each choice, never overrides
//! the user's, and its "would change it" advice re-runs the analysis.

use serde_json::Value;

use crate::harness::{assert_close, assert_contains, at, cmd, f, json, run, u, Scratch};

/// Llama-3.1-70B on 256 H100s, 4Mi-token batches of 8,192-token sequences,
/// tp 8 · pp 4 · dp 8, no other choice (issue 23's first-hour command).
const LLAMA70B_256: [&str; 18] = [
    "train",
    "--model",
    "llama-3.1-70b",
    "--hw",
    "h100",
    "--chips",
    "256",
    "--batch-tokens",
    "4Mi",
    "--seq-len",
    "8192",
    "--tp",
    "8",
    "--pp",
    "4",
    "--dp",
    "8",
    "--json",
];

/// The command without `--json`.
fn text_args() -> &'static [&'static str] {
    &LLAMA70B_256[..17]
}

fn llama70b(extra: &[&str]) -> Value {
    json(&cmd(&[&LLAMA70B_256, extra]))
}

fn chosen(v: &Value) -> Vec<String> {
    v.get("chosen")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Must-show: the command with no extra flag fits with a bubble under 15 %
/// and names its defaults.
///
/// 4Mi tokens / 8,192 = 4,194,304 / 8,192 = 512 sequences; 512 / 8 data
/// ranks = 64 per rank; micro-batch size 1 → m = 64 micro-batches; the
/// 1F1B bubble (pp−1)/(m+pp−1) = 3/67 = 4.48 % (< 15 %). Megatron's
/// distributed optimizer (ZeRO-1), no recompute, sequence parallelism
/// (tp = 8 > 1).
#[test]
fn llama70b_on_256_h100_fits_with_the_frameworks_defaults() {
    let v = llama70b(&[]);
    assert_eq!(at(&v, "framework"), "megatron");
    assert_eq!(u(&v, "config.microbatches"), 512 / 8);
    assert_close(f(&v, "bubble_fraction"), 3.0 / 67.0, 1e-9, "bubble 3/67");
    assert!(f(&v, "bubble_fraction") < 0.15);
    assert_eq!(at(&v, "fits"), true, "the plan fits");
    assert_eq!(at(&v, "memory_verdict.level"), "fits");
    assert_eq!(u(&v, "config.zero"), 1);
    assert_eq!(at(&v, "config.remat"), "none");
    assert_eq!(at(&v, "config.sequence_parallel"), true);
    let c = chosen(&v);
    assert_eq!(c.len(), 4, "{c:?}");
    assert!(
        c[0].starts_with("micro-batch size 1 → 64 micro-batches"),
        "{c:?}"
    );
    assert!(c[1].contains("ZeRO-1"), "{c:?}");
    assert!(c[2].contains("no recompute"), "{c:?}");
    assert!(c[3].contains("sequence parallelism"), "{c:?}");
    // the same plan spelled out by hand gives the same report
    let by_hand = llama70b(&[
        "--microbatches",
        "64",
        "--zero",
        "1",
        "--remat",
        "none",
        "--sequence-parallel",
    ]);
    assert!(chosen(&by_hand).is_empty(), "nothing left to choose");
    for k in [
        "memory_per_device.total_bytes",
        "predicted.mfu",
        "bubble_fraction",
    ] {
        assert_eq!(f(&v, k), f(&by_hand, k), "{k}");
    }
    let (code, out, err) = run(text_args());
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &[
            "chosen: micro-batch size 1 → 64 micro-batches (Megatron: global batch / (micro-batch size · data ranks)); distributed optimizer (ZeRO-1",
            "no recompute",
            "sequence parallelism with tp > 1",
            "pipeline bubble",
            "(4.5%)",
        ],
    );
}

/// The user's explicit choices stand; the advice then puts the framework's
/// micro-batch count first, with the figures a run with that flag gives.
#[test]
fn explicit_choices_stand_and_the_advice_is_rerun() {
    // m = pp = 4 and no recompute: 16 sequences per micro-batch do not fit
    let v = llama70b(&["--microbatches", "4", "--remat", "none"]);
    assert_eq!(u(&v, "config.microbatches"), 4);
    assert_eq!(at(&v, "config.remat"), "none");
    assert_eq!(at(&v, "fits"), false);
    let c = chosen(&v);
    assert!(
        !c.iter()
            .any(|x| x.contains("micro-batch") || x.contains("recompute")),
        "{c:?}"
    );
    let advice: Vec<&str> = at(&v, "memory_verdict.would_change")
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(advice[0].starts_with("64 micro-batches"), "{advice:?}");
    assert!(
        advice.last().unwrap().starts_with("a device with at least"),
        "{advice:?}"
    );
    // the advice's figures are those of the run with the flag
    let m64 = llama70b(&["--microbatches", "64", "--remat", "none"]);
    let want = format!(
        "peak {:.1} GB (fits), bubble {:.1} %, MFU predicted {:.1} %",
        f(&m64, "memory_per_device.total_bytes") / 1e9,
        100.0 * f(&m64, "bubble_fraction"),
        100.0 * f(&m64, "predicted.mfu")
    );
    assert!(advice[0].ends_with(&want), "{} vs {want}", advice[0]);
    let full = llama70b(&["--microbatches", "4", "--remat", "full"]);
    let want_full = format!(
        "full recompute (--remat full): peak {:.1} GB",
        f(&full, "memory_per_device.total_bytes") / 1e9
    );
    assert!(
        advice.iter().any(|a| a.starts_with(&want_full)),
        "{advice:?} lacks {want_full}"
    );
}

/// The book's accounting keeps meshplan's historical defaults: m = pp,
/// full recompute, ZeRO-0, no sequence parallelism, nothing "chosen".
#[test]
fn the_books_accounting_keeps_its_defaults() {
    let v = llama70b(&["--framework", "book"]);
    assert_eq!(u(&v, "config.microbatches"), 4);
    assert_eq!(at(&v, "config.remat"), "full");
    assert_eq!(u(&v, "config.zero"), 0);
    assert_eq!(at(&v, "config.sequence_parallel"), false);
    assert!(v.get("chosen").is_none());
}

/// With pp = 1 the rule gives gradient-accumulation steps: Llama-3.1-8B on
/// 8 H100s, 1Mi tokens of 4,096 = 256 sequences, 256 / 8 data ranks = 32
/// steps of one sequence. A batch of 255·4,096 tokens (255 sequences over
/// 8 ranks, not whole) keeps one step per rank and names no micro-batches.
#[test]
fn gradient_accumulation_when_pp_is_one() {
    let base = [
        "train",
        "--model",
        "llama-3.1-8b",
        "--hw",
        "h100",
        "--chips",
        "8",
        "--seq-len",
        "4096",
        "--json",
    ];
    let v = json(&cmd(&[&base, &["--batch-tokens", "1Mi"]]));
    assert_eq!(u(&v, "config.microbatches"), (1 << 20) / 4096 / 8);
    assert!(
        chosen(&v)[0].contains("32 gradient-accumulation steps"),
        "{v}"
    );
    let odd = (255 * 4096).to_string();
    let w = json(&cmd(&[&base, &["--batch-tokens", &odd]]));
    assert_eq!(u(&w, "config.microbatches"), 1);
    assert!(!chosen(&w).iter().any(|c| c.contains("micro-batch")));
}

/// A scenario file's `sequence_parallel = false` is the user's choice.
#[test]
fn a_scenario_files_explicit_false_stands() {
    let s = Scratch::new("defaults-sp");
    let file = s.write(
        "sp.toml",
        "[model]\nname = \"llama-3.1-70b\"\n[hardware]\nchip = \"h100\"\nchips = 256\n\
         [training]\nbatch_tokens = \"4Mi\"\nseq_len = 8192\n\
         [parallelism]\ntp = 8\npp = 4\ndp = 8\nsequence_parallel = false\n",
    );
    let v = json(&["train", &file, "--json"]);
    assert_eq!(at(&v, "config.sequence_parallel"), false);
    assert!(!chosen(&v).iter().any(|c| c.contains("sequence")));
}

/// One-token sequences: 64Mi over 8 ranks = 2^23 per rank, so micro-batch
/// size 1 would mean 8,388,608 micro-batches; the default stops at 1,024
/// (micro-batches of 2^23 / 2^10 = 8,192 sequences) and the step's trace,
/// one pass per micro-batch, is written at once.
#[test]
fn the_default_micro_batch_count_is_bounded() {
    let s = Scratch::new("defaults-trace");
    let trace = s.dir().join("step.json");
    let trace = trace.to_str().unwrap();
    let args = [
        "train",
        "--model",
        "llama-3.1-8b",
        "--hw",
        "h100",
        "--chips",
        "8",
        "--seq-len",
        "1",
        "--batch-tokens",
        "64Mi",
        "--trace",
        trace,
        "--json",
    ];
    let start = std::time::Instant::now();
    let v = json(&args);
    assert!(start.elapsed().as_secs() < 30, "{:?}", start.elapsed());
    assert_eq!(u(&v, "config.microbatches"), 1024);
    assert!(
        chosen(&v)[0].starts_with("micro-batch size 8192 → 1024"),
        "{v}"
    );
    assert!(std::fs::metadata(trace).unwrap().len() > 0);
}

/// A TPU runs MaxText when no framework is given (issue 25): FSDP (ZeRO-3)
/// over the slice's data ranks and full recompute, as MaxText's base.yml
/// sets them (`ici_fsdp_parallelism: -1`, `remat_policy: 'full'`), both
/// named; an explicit `--zero`/`--remat` is kept; the book's `@book` chips
/// keep the book's accounting (its exercises); and `plan train` on a slice
/// ranks by predictions, not by a roofline at 100 % MFU.
#[test]
fn a_tpu_runs_maxtext_with_its_defaults() {
    let base = [
        "--model",
        "llama-3-8b",
        "--chips",
        "256",
        "--batch-tokens",
        "4Mi",
        "--seq-len",
        "8192",
        "--json",
    ];
    let v = json(&cmd(&[&["train", "--hw", "tpu-v5p"], &base[..]]));
    assert_eq!(v["framework"], "maxtext", "{}", v["framework"]);
    assert_eq!(v["config"]["zero"], 3);
    assert_eq!(v["config"]["remat"], "full");
    let chosen = v["chosen"].to_string();
    assert_contains(&chosen, &["ici_fsdp_parallelism", "remat_policy"]);
    assert!(v["predicted"]["step_time_s"]
        .as_f64()
        .is_some_and(|s| s > 0.0));
    let own = json(&cmd(&[
        &["train", "--hw", "tpu-v5p", "--zero", "1", "--remat", "none"],
        &base[..],
    ]));
    assert_eq!(own["config"]["zero"], 1);
    assert_eq!(own["config"]["remat"], "none");
    let book = json(&cmd(&[&["train", "--hw", "tpu-v5p@book"], &base[..]]));
    assert_eq!(book["framework"], "book");
    let plan = json(&cmd(&[
        &["plan", "train", "--hw", "tpu-v5p", "--top", "3"],
        &base[..],
    ]));
    assert_eq!(plan["framework"], "maxtext");
    assert_eq!(
        plan["ranked_by_prediction"], true,
        "{}",
        plan["prediction_note"]
    );
}
