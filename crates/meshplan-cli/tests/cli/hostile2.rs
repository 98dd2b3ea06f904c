//! Hostile input, round 2 (issue 23): each case returns within 5 s with a
//! clear error (exit 2, the value the user typed, no panic) or a bounded
//! answer; outputs never replace an input of the same command and leave no
//! temporary file; one rule per fact across commands (offered TPU slices,
//! `check`'s exit status).

use std::path::Path;
use std::time::Instant;

use crate::harness::{
    assert_contains, assert_no_panic, cmd, rejects, root, run, Scratch, L3_8B_H100, SUBSET,
};

/// `run`, asserting it took under 5 s.
fn quick(args: &[&str]) -> (i32, String, String) {
    let t0 = Instant::now();
    let r = run(args);
    let s = t0.elapsed().as_secs_f64();
    assert!(s < 5.0, "{args:?} took {s:.1} s");
    assert_no_panic(args, &r.2);
    r
}

#[test]
fn max_chips_zero_is_an_error() {
    let t0 = Instant::now();
    rejects(
        &cmd(&[&["plan", "infer"], &L3_8B_H100, &["--max-chips", "0"]]),
        &["--max-chips 0", "at least one chip"],
    );
    assert!(t0.elapsed().as_secs_f64() < 5.0);
}

#[test]
fn the_largest_count_is_echoed_as_typed() {
    // 2^64 − 1 is a whole count: read exactly, then refused for its size
    // with the integer as typed (not 18446744073709552000)
    // a batch of 2^64 − 1 tokens is read and answered (a bounded report)
    let (code, _, err) = quick(&cmd(&[
        &["train"],
        &L3_8B_H100,
        &["--chips", "8", "--batch-tokens", "18446744073709551615"],
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("18446744073709552000"), "{err}");
    let (code, _, err) = quick(&cmd(&[
        &["train"],
        &L3_8B_H100,
        &["--chips", "18446744073709551615"],
    ]));
    assert_eq!(code, 2);
    assert_contains(&err, &["18446744073709551615"]);
    // one more than the largest u64
    rejects(
        &cmd(&[
            &["train"],
            &L3_8B_H100,
            &["--chips", "18446744073709551616"],
        ]),
        &["18446744073709551616", "at most 18446744073709551615"],
    );
}

/// The book's PCIe matmul never turns compute-bound: "none: …", not "inf".
#[test]
fn a_critical_batch_that_does_not_exist_is_none_not_inf() {
    for f in ["examples/book/ch2.toml", "examples/book/ch4.toml"] {
        let (code, out, err) = quick(&["explain", f]);
        assert_eq!(code, 0, "{f}: {err}");
        assert!(!out.contains("= inf"), "{f}: {out}");
        assert_contains(&out, &["turns compute-bound: none"]);
    }
    let (code, out, err) = quick(&[
        "roofline",
        "bf16[B, D] * bf16[D, F] -> bf16[B, F]",
        "--dims",
        "B=1024,D=8192,F=32768",
        "--from",
        "host",
        "--hw",
        "tpu-v5e@book",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("inf"), "{out}");
    assert_contains(
        &out,
        &[
            "compute-bound when B >",
            "none: the intensity stays below C/W",
        ],
    );
}

/// No file but `keep` in `dir`: no temporary file left behind.
fn only(dir: &Path, keep: &[&str]) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn plot_never_replaces_an_input_and_writes_atomically() {
    let s = Scratch::new("plot-input");
    let text = "[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n";
    let sc = s.write("sc.toml", text);
    // (the report is printed before the plot is drawn; the plot fails)
    let eq = format!("--plot={sc}");
    for args in [&["train", &sc, "--plot", &sc][..], &["train", &sc, &eq]] {
        let (code, _, err) = quick(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_contains(&err, &["--plot", "is an input of this command"]);
        assert_eq!(std::fs::read_to_string(&sc).unwrap(), text);
    }
    // a real output: written whole, no temporary file left
    let out = s.dir().join("m.svg");
    let (code, _, err) = quick(&["train", &sc, "--plot", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&out).unwrap().starts_with("<svg"));
    only(s.dir(), &["sc.toml", "m.svg"]);
}

#[test]
fn validate_plot_and_calibrate_output_never_replace_their_input() {
    let s = Scratch::new("validate-input");
    let src = root().join(SUBSET);
    let csv = std::fs::read_to_string(&src).unwrap();
    let models = std::fs::read_to_string(src.with_file_name("playbook_models.toml")).unwrap();
    s.write("playbook_models.toml", &models);
    let p = s.write("runs.csv", &csv);
    rejects(&["validate", &p, "--plot", &p], &["is an input"]);
    assert_eq!(std::fs::read_to_string(&p).unwrap(), csv);
    rejects(
        &[
            "calibrate",
            &p,
            "--chip",
            "h100",
            "--bootstrap",
            "0",
            "--iters",
            "1",
            "--output",
            &p,
        ],
        &["--output", "is an input"],
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), csv);
    let out = s.dir().join("prof.toml");
    let (code, stdout, err) = quick(&[
        "calibrate",
        &p,
        "--chip",
        "h100",
        "--bootstrap",
        "0",
        "--iters",
        "1",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(std::fs::read_to_string(&out).unwrap().contains("chip"));
    only(s.dir(), &["runs.csv", "playbook_models.toml", "prof.toml"]);
}

/// One rule for offered slices: an error in every command, on the vendor's
/// and the book's chips alike; one chip (1x1x1) is always accepted.
#[test]
fn an_unoffered_slice_is_an_error_in_every_command() {
    for hw in ["tpu-v5e", "tpu-v5e@book"] {
        let base = ["--model", "llama-3-8b", "--hw", hw, "--mesh", "4x16"];
        for cmd in [&["train"][..], &["plan", "train"], &["infer"]] {
            let mut args: Vec<&str> = cmd.to_vec();
            args.extend_from_slice(&base);
            let t0 = Instant::now();
            rejects(&args, &["does not offer a 4x16 slice", "offered shapes"]);
            assert!(t0.elapsed().as_secs_f64() < 5.0);
        }
    }
    for cmd in ["train", "infer"] {
        let (code, _, err) = quick(&[
            cmd,
            "--model",
            "llama-3-8b",
            "--hw",
            "tpu-v5p@book",
            "--mesh",
            "1x1x1",
        ]);
        assert_eq!(code, 0, "{cmd}: {err}");
    }
}

/// `check`: the book's annotated slips are expected FAILs (exit 0, said on
/// stderr); `--strict` and a solution's WRONG claims exit 1.
#[test]
fn check_exits_0_when_only_book_slips_fail() {
    let (code, out, err) = run(&["check", "examples/book/ch7.toml"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_contains(&out, &["4 FAIL"]);
    assert_contains(&err, &["annotated as the book's own slips", "--strict"]);
    assert_eq!(run(&["check", "--strict", "examples/book/ch7.toml"]).0, 1);
    assert_eq!(run(&["check", "examples/claims/seed-002-ch7.toml"]).0, 1);
}

/// A 100 kB model or chip name is refused at once, quoting only its start.
#[test]
fn a_huge_name_is_refused_and_not_echoed() {
    let name = "x".repeat(100_000);
    for (flag, needle) in [("--model", "at most 4096"), ("--hw", "at most 256")] {
        let mut args = vec![
            "train",
            "--model",
            "llama-3-8b",
            "--hw",
            "h100",
            "--chips",
            "8",
        ];
        let i = args.iter().position(|a| *a == flag).unwrap();
        args[i + 1] = &name;
        let (code, out, err) = quick(&args);
        assert_eq!(code, 2, "{flag}");
        assert!(out.is_empty());
        assert_contains(&err, &[flag, "a value of 100000 bytes", needle]);
        assert!(err.len() < 1000, "{flag}: {} bytes of error", err.len());
    }
}

/// A micro-batch count of 2⁶⁴−1 under every ZeRO stage: the collectives'
/// call counts saturate instead of overflowing (a debug build panicked in
/// `training/comms.rs`); the answer comes back at once.
#[test]
fn a_huge_microbatch_count_does_not_overflow() {
    for zero in ["0", "2", "3"] {
        let (code, _, err) = quick(&cmd(&[
            &["train"],
            &L3_8B_H100,
            &[
                "--chips",
                "64",
                "--tp",
                "8",
                "--pp",
                "2",
                "--dp",
                "4",
                "--zero",
                zero,
                "--microbatches",
                "18446744073709551615",
            ],
        ]));
        assert!(code == 0 || code == 2, "zero {zero}: exit {code}: {err}");
    }
}
