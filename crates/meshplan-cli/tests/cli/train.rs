//! `meshplan train`: the report's keys, the book's ch5 Q3 answer, the
//! memory accounting frameworks, FLOP conventions, gradient accumulation,
//! the collectives table, the efficiency-profile prediction and bad input.

use serde_json::Value;

use crate::harness::{
    assert_close, assert_contains, assert_no_panic, at, cmd, f, json, run, u, Scratch, H100X64_4M,
};

const Q3C: &str = "examples/train/ch5-q3-fsdp-tp.toml";

/// The parts of `memory_per_device` that add up to its `total_bytes`.
const MEMORY_PARTS: [&str; 6] = [
    "params_bytes",
    "grads_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "logits_bytes",
    "reserve_bytes",
];

/// LLaMA-2 13B on 64 H100s, TP 8 × DP 8, ZeRO-1 (an H100 has an efficiency
/// profile, so the report carries a prediction), training on 1T tokens, with
/// `extra` flags.
fn h100_run<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let plan = [
        "--tp",
        "8",
        "--dp",
        "8",
        "--zero",
        "1",
        "--train-tokens",
        "1T",
    ];
    cmd(&[
        &["train", "--model", "llama-2-13b"],
        &H100X64_4M,
        &plan,
        extra,
    ])
}

/// The H100 run's text report succeeds and holds every needle.
fn h100_text_contains(needles: &[&str]) {
    let (code, out, err) = run(&h100_run(&[]));
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, needles);
}

/// The H100 run with `extra` flags, as JSON.
fn h100(extra: &[&str]) -> Value {
    json(&cmd(&[&h100_run(extra), &["--json"]]))
}

#[test]
fn json_has_required_keys_and_the_book_step_time() {
    let v = json(&["train", Q3C, "--json"]);
    for k in MEMORY_PARTS.iter().chain(&["total_bytes"]) {
        assert!(v["memory_per_device"][k].is_number(), "{k}");
    }
    for k in [
        "fits",
        "flops_per_step",
        "step_time_lower_s",
        "step_time_upper_s",
        "step_time_at_mfu_s",
        "bound",
        "comms",
        "feasible",
        "reasons",
        "rules",
        "framework",
        "flop_convention",
        "config",
    ] {
        assert!(!v[k].is_null(), "{k}");
    }
    // A TPU chip has no efficiency profile: the book's accounting by default;
    // the scenario's include_attention = false is the book's 6·P·T.
    assert_eq!(v["framework"], "book");
    assert_eq!(v["flop_convention"], "book");
    // Book ch5 Q3c: "≈ 0.3 s"; exactly 6·B·P/(N·C·MFU)
    // = 6·3e6·13,015,449,600/(4096·4.59e14·0.4) = 0.3115 s.
    let want = 6.0 * 3e6 * 13_015_449_600.0 / (4096.0 * 4.59e14 * 0.4);
    assert_close(
        f(&v, "step_time_at_mfu_s"),
        want,
        1e-9,
        "step time at 40% MFU",
    );
    assert_close(f(&v, "step_time_at_mfu_s"), 0.3, 0.05, "book's 0.3 s");
}

/// Each collective says what it moves and how much each device sends: a
/// ring AllGather/ReduceScatter over X devices sends (X−1)/X of the array.
#[test]
fn comms_entries_say_the_transfer_and_the_bytes_each_device_sends() {
    let v = json(&["train", Q3C, "--json"]);
    let comms = v["comms"].as_array().unwrap();
    assert!(!comms.is_empty());
    for c in comms {
        for k in ["kind", "axis", "bytes", "seconds", "transfer", "count"] {
            assert!(!c[k].is_null(), "{k} in {c}");
        }
        // fsdp = 1024, tp = 4 in the scenario
        let x = match c["axis"].as_str().unwrap() {
            "fsdp" => 1024.0,
            "tp" => 4.0,
            other => panic!("unexpected axis {other}"),
        };
        assert_close(
            f(c, "bytes_sent_per_device"),
            f(c, "bytes") * (x - 1.0) / x,
            1e-12,
            "ring bytes sent",
        );
    }
}

/// Mixtral 8x7B on 64 H100s, expert parallelism 8 inside dp 64, with
/// `extra` flags, as JSON.
fn mixtral_ep8(extra: &[&str]) -> Value {
    let model = ["train", "--model", "mixtral-8x7b"];
    let ep = ["--ep", "8", "--dp", "64"];
    json(&cmd(&[&model, &H100X64_4M, &ep, extra, &["--json"]]))
}

/// Expert parallelism: the all-to-all's V is the global array, ep × each
/// device's buffer (issue 11).
#[test]
fn expert_all_to_all_is_costed_on_the_global_array() {
    let v = mixtral_ep8(&["--zero", "1"]);
    let a2a: Vec<&Value> = v["comms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "all-to-all")
        .collect();
    assert_eq!(a2a.len(), 2, "dispatch+combine forward and backward");
    for c in a2a {
        assert_eq!(c["axis"], "ep");
        // Mixtral: D = 4096, top-2, 32 MoE layers. B/dp = 4e6/64 = 62,500
        // tokens per device; buffer k·B_dev·D·2 B = 1.024e9 B; V = 8 × that.
        assert_eq!(f(c, "bytes"), 8.0 * 2.0 * 62_500.0 * 4096.0 * 2.0);
        // dispatch + combine in each of the 32 MoE layers
        assert_eq!(u(c, "count"), 64);
        // inside one NVLink node: V·(N−1)/(W·N²) per call, W = 450 GB/s
        let per_call = 8.192e9 * 7.0 / (450e9 * 64.0);
        assert_close(f(c, "seconds"), 64.0 * per_call, 1e-9, "all-to-all time");
    }
}

/// Regression (issue 11 review): an all-to-all's `bytes_sent_per_device` is
/// V·(N−1)/N, N times what one device sends, V·(N−1)/N² (the time uses the
/// right figure). `meshplan train --model mixtral-8x7b --hw h100 --chips 64
/// --batch-tokens 4M --seq-len 4096 --ep 8 --dp 64 --zero 1 --json`.
#[test]
fn expert_all_to_all_bytes_sent_per_device() {
    let v = mixtral_ep8(&[]);
    for c in v["comms"].as_array().unwrap() {
        if c["kind"] == "all-to-all" {
            // each device keeps 1/8 of its 1.024e9 B buffer and sends 7/8
            assert_close(f(c, "bytes_sent_per_device"), 0.896e9, 1e-9, "sent");
        }
    }
}

#[test]
fn flags_override_and_infeasible_exits_zero() {
    let v = json(&["train", Q3C, "--tp", "3", "--json"]);
    assert_eq!(v["feasible"], false);
    // 3 divides neither the 4096 chips with fsdp 1024 nor the 40 heads
    assert!(
        v["reasons"].as_array().unwrap().len() >= 2,
        "{}",
        v["reasons"]
    );
}

#[test]
fn bad_input_exits_two() {
    let args = [
        "train",
        "--model",
        "no-such-model",
        "--hw",
        "tpu-v5p",
        "--mesh",
        "4x4x4",
    ];
    let (code, _, err) = run(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown model"), "{err}");
}

#[test]
fn explain_shows_rules() {
    let (code, out, err) = run(&["train", Q3C, "--explain"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &[
            "Book rules (α = C/W = 2550)",
            "Derivation:",
            "√((B/F)·(M_X/M_Y)·N)",
        ],
    );
    // Book ch5 Q3c: FSDP+TP works with X = 1024, Y = 4
    let verdict = out
        .lines()
        .find(|l| l.starts_with("FSDP+TP"))
        .unwrap_or_else(|| panic!("no FSDP+TP verdict:\n{out}"));
    assert!(verdict.contains("yes — "), "{verdict}");
    assert!(verdict.contains("X = 1024, Y = 4"), "{verdict}");
    let v = json(&["train", Q3C, "--explain", "--json"]);
    let steps = v["derivation"].as_array().unwrap();
    assert!(steps.iter().any(|s| s["id"] == "rules.x_opt"), "{v}");
}

/// Issue 11: a chip with an efficiency profile is accounted the way
/// Megatron allocates (fp32 gradients and master weights, logits, a runtime
/// reserve); `--framework book` restores the book's accounting.
#[test]
fn megatron_accounting_by_default_on_gpus() {
    let meg = h100(&[]);
    let book = h100(&["--framework", "book"]);
    assert_eq!(meg["framework"], "megatron");
    assert_eq!(book["framework"], "book");
    let m = |v: &Value, k: &str| f(v, &format!("memory_per_device.{k}"));
    let p_dev = m(&meg, "params_per_device");
    assert_eq!(p_dev, m(&book, "params_per_device"));
    // bf16 weights both ways; fp32 gradients (4 B) vs the book's bf16 (2 B)
    assert_eq!(m(&meg, "params_bytes"), 2.0 * p_dev);
    assert_eq!(m(&meg, "grads_bytes"), 4.0 * p_dev);
    assert_eq!(m(&book, "grads_bytes"), 2.0 * p_dev);
    // Adam, ZeRO-1 over dp = 8: fp32 master + two fp32 moments = 12 B/param
    // vs the book's two moments = 8 B/param, each sharded 8 ways
    assert_eq!(m(&meg, "optimizer_bytes"), 12.0 * p_dev / 8.0);
    assert_eq!(m(&book, "optimizer_bytes"), 8.0 * p_dev / 8.0);
    assert!(m(&meg, "logits_bytes") > 0.0 && m(&meg, "reserve_bytes") > 0.0);
    assert_eq!(m(&book, "logits_bytes"), 0.0);
    assert_eq!(m(&book, "reserve_bytes"), 0.0);
    let sum: f64 = MEMORY_PARTS.iter().map(|k| m(&meg, k)).sum();
    assert_close(m(&meg, "total_bytes"), sum, 1e-12, "total = sum of parts");
    h100_text_contains(&[
        "memory per device (megatron accounting)",
        "logits",
        "runtime reserve",
    ]);
}

/// Issue 11: named FLOP conventions. `model` (the default) is 6·P_matmul·T
/// plus attention, the training FLOPs per token `model show` reports times
/// the batch; `book` is 6·P·T; `--no-attention` means `book`.
#[test]
fn flop_conventions() {
    let model = h100(&[]);
    assert_eq!(model["flop_convention"], "model");
    let show = json(&[
        "model",
        "show",
        "llama-2-13b",
        "--seq-len",
        "4096",
        "--json",
    ]);
    let b = 4e6;
    assert_close(
        f(&model, "flops_per_step"),
        b * f(&show, "flops_per_token_training"),
        1e-12,
        "model convention",
    );
    let book = h100(&["--flops", "book"]);
    assert_eq!(book["flop_convention"], "book");
    assert_close(
        f(&book, "flops_per_step"),
        6.0 * f(&show, "params_total") * b,
        1e-12,
        "6·P·T",
    );
    let no_att = h100(&["--no-attention"]);
    assert_eq!(no_att["flop_convention"], "book");
    assert_eq!(no_att["flops_per_step"], book["flops_per_step"]);
    // the hardware convention counts what the chips execute, recompute included
    let hw = h100(&["--flops", "hardware"]);
    assert_eq!(hw["flops_per_step"], model["hardware_flops_per_step"]);
    for name in ["megatron", "nanotron"] {
        let v = h100(&["--flops", name]);
        assert_eq!(v["flop_convention"], name);
        assert!(f(&v, "flops_per_step") > 0.0);
    }
}

/// Issue 11: with pp = 1, `--microbatches m` is gradient accumulation: the
/// activations (and logits) of one micro-batch are alive, not the batch.
#[test]
fn gradient_accumulation_holds_one_micro_batch() {
    for framework in ["megatron", "book"] {
        let one = h100(&["--framework", framework]);
        let four = h100(&["--framework", framework, "--microbatches", "4"]);
        for k in ["activations_bytes", "logits_bytes"] {
            let k = format!("memory_per_device.{k}");
            assert_eq!(f(&four, &k), f(&one, &k) / 4.0, "{framework} {k}");
        }
        // same batch, same FLOPs
        assert_eq!(four["flops_per_step"], one["flops_per_step"]);
        assert_eq!(u(&four, "config.microbatches"), 4);
    }
}

#[test]
fn predicted_section_with_an_efficiency_profile() {
    let v = h100(&[]);
    let p = &v["predicted"];
    for k in [
        "step_time_s",
        "mfu",
        "tokens_per_s",
        "tokens_per_s_per_device",
        "train_time_s",
        "chip_hours",
        "cost_usd",
        "micro_batch_size",
        "grad_accumulation",
    ] {
        assert!(p[k].is_number(), "predicted.{k}");
    }
    // one memory model: memory is the report's, not the prediction's
    for k in [
        "peak_memory_bytes",
        "usable_memory_bytes",
        "fits",
        "memory_breakdown_bytes",
    ] {
        assert!(p.get(k).is_none(), "predicted.{k} is gone");
    }
    assert_eq!(p["framework"], "megatron");
    assert_eq!(p["profile"], "h100");
    assert_eq!(p["profile_origin"], "built-in, infiniband network");
    // the roofline fields stay, and the prediction is not below the compute bound
    assert!(f(p, "step_time_s") > 0.5 * f(&v, "step_time_lower_s"));
    assert!(f(p, "mfu") < f(&v, "mfu_at_lower_bound"));
    h100_text_contains(&[
        "step time predicted",
        "MFU predicted",
        "roofline step time, comms overlapped",
        "roofline step time, nothing overlapped",
    ]);
}

/// `--hw-profile FILE` is used as written (its own EFA network: measured
/// NVLink and EFA curves), while the built-in profile switches to the chip's
/// InfiniBand sub-profile, so the two predictions differ.
#[test]
fn hw_profile_file_is_used_as_written() {
    let built_in = h100(&[]);
    let file = h100(&["--hw-profile", "data/profiles/h100.toml"]);
    assert_eq!(
        file["predicted"]["profile_origin"],
        "file data/profiles/h100.toml"
    );
    let t_file = f(&file, "predicted.step_time_s");
    assert!(t_file > 0.0 && t_file != f(&built_in, "predicted.step_time_s"));
}

/// Context parallelism is predicted (ring attention), its K/V exchange reported.
#[test]
fn context_parallelism_is_predicted() {
    let cp = ["--tp", "8", "--dp", "4", "--cp", "2", "--json"];
    let v = json(&cmd(&[
        &["train", "--model", "llama-2-13b"],
        &H100X64_4M,
        &cp,
    ]));
    assert!(f(&v, "predicted.time_breakdown_s.cp_comm") > 0.0, "{v}");
    assert!(
        v["comms"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["axis"] == "cp"),
        "{v}"
    );
}

/// TPU (the book's chip): the book's accounting, and a prediction from the
/// TPU profile under MaxText's runtime, flagged as not fitted on the chip
/// (issue 14). The book's 3M-token batch is ⌈3,000,000/32,768⌉ = 92
/// sequences over 1,024 FSDP ranks: no prediction, and the note says why
/// (issue 22); with 32Mi tokens (1,024 sequences) every rank has one.
#[test]
fn tpu_is_predicted_under_maxtext() {
    let book = json(&["train", Q3C, "--json"]);
    assert!(book["predicted"].is_null());
    let note = book["prediction_note"].as_str().unwrap();
    assert!(
        note.contains("92 sequences over 1024 data-parallel ranks"),
        "{note}"
    );
    let v = json(&["train", Q3C, "--batch-tokens", "32Mi", "--json"]);
    assert_eq!(v["framework"], "book");
    assert_eq!(v["predicted"]["framework"], "maxtext");
    assert_eq!(v["predicted"]["transferred_from"], "h100");
    assert!(
        v["predicted"]["step_time_s"].as_f64().unwrap() >= v["step_time_lower_s"].as_f64().unwrap()
    );
    assert!(v["prediction_note"].is_null());
}

/// Issue 11: `--chips N` on a TPU picks the offered slice of N chips; any
/// other count is an error listing the offered sizes.
#[test]
fn tpu_chips_pick_the_offered_slice() {
    let base = ["train", "--model", "llama-2-7b", "--hw", "tpu-v5p"];
    let mut ok = base.to_vec();
    ok.extend(["--chips", "64", "--fsdp", "64", "--json"]);
    let v = json(&ok);
    assert_eq!(v["mesh"], "4x4x4");
    assert_eq!(u(&v, "chips"), 64);
    let mut bad = base.to_vec();
    bad.extend(["--chips", "65", "--fsdp", "65"]);
    let (code, out, err) = run(&bad);
    assert_eq!(code, 2, "{out}{err}");
    assert_contains(&err, &["no slice of 65 chips", "4x4x4 = 64", "2x2x1 = 4"]);
}

/// A scenario file's framework: `[training] framework = "book"`.
#[test]
fn scenario_framework_key() {
    let s = Scratch::new("framework");
    let p = s.write(
        "book.toml",
        "[model]\nname = \"llama-2-13b\"\n[hardware]\nchip = \"h100\"\nchips = 64\n\
         [training]\nbatch_tokens = \"4M\"\nseq_len = 4096\nframework = \"book\"\n\
         [parallelism]\ntp = 8\ndp = 8\nzero = 1\n",
    );
    let v = json(&["train", &p, "--json"]);
    assert_eq!(v["framework"], "book");
    assert_eq!(f(&v, "memory_per_device.logits_bytes"), 0.0);
    assert_eq!(
        v["memory_per_device"],
        h100(&["--framework", "book"])["memory_per_device"]
    );
}

/// Zero degrees, chips, lengths or microbatches are bad input (exit 2 with a
/// message naming the flag), never a panic; they once reached a `% 0`.
#[test]
fn zero_values_are_rejected_without_panic() {
    let base = ["train", "--model", "llama-2-7b", "--hw", "h100"];
    for extra in [
        &["--chips", "8", "--tp", "0"][..],
        &["--chips", "8", "--pp", "0"],
        &["--chips", "8", "--dp", "0"],
        &["--chips", "0"],
        &["--chips", "8", "--seq-len", "0"],
        &["--chips", "8", "--batch-tokens", "0"],
        &["--chips", "8", "--pp", "2", "--microbatches", "0"],
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let (code, _, err) = run(&args);
        assert_no_panic(&args, &err);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("at least"), "{args:?}: {err}");
    }
}

/// `plan train` of Llama-3 8B on 16 H100s (two nodes).
const PLAN_8B_16: [&str; 8] = [
    "plan",
    "train",
    "--model",
    "llama-3-8b",
    "--hw",
    "h100",
    "--chips",
    "16",
];

/// `--tp-overlap`, `--dp-overlap`, `--sp-allgather` reach the prediction
/// (`predicted.overlap`), their non-default values are named outside the
/// fitted range, `--breakdown` prints the step by block, and bad values
/// exit 2 with the accepted names.
#[test]
fn overlap_flags_and_breakdown() {
    let base = [
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "64",
        "--tp",
        "8",
        "--sequence-parallel",
    ];
    let pred = |extra: &[&str]| json(&cmd(&[&base, extra, &["--json"]]));
    let ring = pred(&[]);
    let none = pred(&["--tp-overlap", "none"]);
    let piped = pred(&["--tp-overlap", "pipelined"]);
    let tp = |v: &Value| f(v, "predicted.time_breakdown_s.tp_comm");
    // none exposes every transfer: tp_comm = transfer + latency
    let e = |v: &Value, k: &str| f(v, &format!("predicted.overlap.{k}"));
    assert_close(
        tp(&none),
        e(&none, "tp_transfer_s") + e(&none, "tp_latency_s"),
        1e-12,
        "none",
    );
    assert!(tp(&piped) < tp(&ring) && tp(&ring) < tp(&none));
    assert_eq!(at(&piped, "predicted.overlap.tp"), "pipelined");
    assert_eq!(
        at(&piped, "predicted.outside_fitted_range.0.input"),
        "tp overlap"
    );
    assert_eq!(
        at(&ring, "predicted.outside_fitted_range"),
        &serde_json::json!([])
    );
    let off = pred(&["--dp-overlap", "off", "--sp-allgather", "redo"]);
    assert_close(
        f(&off, "predicted.time_breakdown_s.dp_comm"),
        e(&off, "dp_transfer_s"),
        1e-12,
        "dp off",
    );
    // full remat (the default): 8 SP collectives × 1.5 (the recomputed
    // forward's 4 again) + 2 redone all-gathers = 14 per layer
    assert_eq!(f(&off, "predicted.overlap.tp_collectives_per_layer"), 14.0);
    assert_eq!(at(&ring, "blocks").as_array().map(Vec::len), Some(6));
    let (code, out, _) = run(&cmd(&[&base, &["--breakdown"]]));
    assert_eq!(code, 0);
    assert_contains(
        &out,
        &[
            "Step by block",
            "MLP / MoE experts + router",
            "optimizer step",
        ],
    );
    // plan train takes the same flags
    let plan = json(&cmd(&[
        &PLAN_8B_16,
        &["--top", "1", "--tp-overlap", "none", "--json"],
    ]));
    assert!(at(&plan, "plans.0").is_object());
    crate::harness::rejects(
        &cmd(&[&base, &["--tp-overlap", "full"]]),
        &["tp_overlap", "none, ring, pipelined"],
    );
    crate::harness::rejects(
        &cmd(&[&base, &["--dp-overlap", "maybe"]]),
        &["dp_overlap", "on, off"],
    );
    crate::harness::rejects(
        &cmd(&[&base, &["--sp-allgather", "x"]]),
        &["sp_allgather", "keep, redo"],
    );
    // the same plan without sequence parallelism (base less its last flag)
    let no_sp = &base[..base.len() - 1];
    crate::harness::rejects(
        &cmd(&[no_sp, &["--tp-overlap", "pipelined"]]),
        &["--sequence-parallel"],
    );
}

/// `--rank-order tp-pp-dp` puts the pipeline stages in the node (Megatron's
/// `--use-tp-pp-dp-mapping`): the order reaches the plan's degrees, the
/// pipeline sends leave the network, and a bad name exits 2 with the two
/// accepted ones.
#[test]
fn rank_order_flag() {
    // `train` with plan train's model, chip and chips, and a 3-D plan
    let plan = [
        "--tp",
        "4",
        "--pp",
        "2",
        "--dp",
        "2",
        "--microbatches",
        "16",
        "--batch-tokens",
        "1Mi",
    ];
    let base = [&["train"][..], &PLAN_8B_16[2..], &plan].concat();
    let at_order = |o: &str| json(&cmd(&[&base, &["--rank-order", o, "--json"]]));
    let (outer, inner) = (at_order("tp-cp-ep-dp-pp"), at_order("tp-pp-dp"));
    assert_eq!(at(&inner, "degrees.order"), "tp-pp-dp");
    assert!(at(&outer, "degrees").get("order").is_none());
    let pp = |v: &Value| f(v, "predicted.time_breakdown_s.pp_comm");
    assert!(
        pp(&inner) < pp(&outer) / 2.0,
        "{} vs {}",
        pp(&inner),
        pp(&outer)
    );
    crate::harness::rejects(
        &cmd(&[&base, &["--rank-order", "pp-first"]]),
        &["tp-cp-ep-dp-pp", "tp-pp-dp"],
    );
    crate::harness::rejects(&cmd(&[&base, &["--rank-order", "auto"]]), &["plan train"]);
    // plan train searches both orders only when asked
    let plan = |extra: &[&str]| {
        f(
            &json(&cmd(&[&PLAN_8B_16, extra, &["--top", "1", "--json"]])),
            "candidates",
        )
    };
    assert!(plan(&["--rank-order", "auto"]) > plan(&[]));
}
