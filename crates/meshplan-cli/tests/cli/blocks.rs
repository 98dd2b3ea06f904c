//! End-to-end tests of the building-block commands (`collective`,
//! `roofline`, `shard`, `mfu`), `hw show`'s anatomy and inventories, bare
//! parameter counts, `infer --chips` on TPUs, and `check` with an unknown
//! quantity: real values against the book or a hand derivation, `--json`
//! and `--explain`, and hostile input (exit 2, a clear message, no panic).

use serde_json::Value;

use crate::harness::{assert_contains, cmd, f, run, Scratch};

/// Run with `--json`, require success and a quiet stderr, parse the object.
fn json(args: &[&str]) -> Value {
    crate::harness::json(&[args, &["--json"]].concat())
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

/// ch3 pop quiz 2: 3 × 8.4 MB / 4.5e10 = 560 µs on a v5e axis of 4 without
/// wraparound; the derivation names the book's symbols.
#[test]
fn collective_json_and_explain() {
    let args = [
        "collective",
        "allgather_Y",
        "--array",
        "bf16[E_Y, F]",
        "--dims",
        "E=2048,F=8192",
        "--mesh",
        "X=8,Y=4",
        "--hw",
        "tpu-v5e@book",
    ];
    let v = json(&args);
    assert!(rel(f(&v, "time_s"), 560e-6) < 0.005);
    assert_eq!(v["result"], "bf16[E, F]");
    let mut e = args.to_vec();
    e.extend(["--json", "--explain"]);
    let (c, out, _) = run(&e);
    assert_eq!(c, 0);
    let d: Value = serde_json::from_str(&out).unwrap();
    assert!(d["derivation"][0]["formula"]
        .as_str()
        .unwrap()
        .contains("W_one-way"));
    let (c, text, _) = run(&[&args[..], &["--explain"]].concat());
    assert_eq!(c, 0);
    assert!(text.contains("Derivation:") && text.contains("ring without wraparound"));
}

/// ch1: a bf16 matmul on v5e turns compute-bound at B ≈ C/W = 240.
#[test]
fn roofline_matmul_and_raw() {
    let v = json(&[
        "roofline",
        "bf16[B, D] * bf16[D, F] -> bf16[B, F]",
        "--dims",
        "B=512,D=8192,F=32768",
        "--hw",
        "tpu-v5e@book",
    ]);
    assert!(rel(f(&v, "critical_batch_approx"), 1.97e14 / 8.2e11) < 1e-12);
    assert_eq!(v["bound"], "compute");
    // raw: 1.97e14 FLOPs and 8.2e11 bytes take one second each on a v5e
    let r = json(&[
        "roofline",
        "--flops",
        "1.97e14",
        "--bytes",
        "8.2e11",
        "--hw",
        "tpu-v5e@book",
    ]);
    assert!(rel(f(&r, "t_math_s"), 1.0) < 1e-12 && rel(f(&r, "t_mem_s"), 1.0) < 1e-12);
}

/// ch3 Q4 strategy 1 on v5p: AllGather Y[D_X, F] costs 2DF/W_ici.
#[test]
fn shard_matmul_and_array() {
    let v = json(&[
        "shard",
        "X[B, D] * Y[D_X, F] -> Z[B, F]",
        "--dims",
        "B=1024,D=8192,F=32768",
        "--mesh",
        "X=16,Y=16,Z=16",
        "--hw",
        "tpu-v5p@book",
    ]);
    assert!(rel(f(&v, "t_comms_s"), 2.0 * 8192.0 * 32768.0 / 1.8e11) < 1e-12);
    let (c, text, _) = run(&[
        "shard",
        "int8[I_XY, J]",
        "--dims",
        "I=128,J=2048",
        "--mesh",
        "X=2,Y=8,Z=2",
        "--hw",
        "tpu-v5p@book",
    ]);
    assert_eq!(c, 0);
    assert_contains(&text, &["[8, 2,048]", "2 copies"]);
}

/// ch4 Q7: DeepSeek v3's MFU with the book's H800 fp8 peak.
#[test]
fn mfu_deepseek() {
    let v = json(&[
        "mfu",
        "--model",
        "37B",
        "--tokens",
        "14.8T",
        "--chip-hours",
        "2.79M",
        "--hw",
        "h800",
        "--dtype",
        "fp8",
    ]);
    let want = 6.0 * 37e9 * 14.8e12 / (2.79e6 * 3600.0 * 1.513e15);
    assert!(rel(f(&v, "mfu"), want) < 1e-6);
}

/// hw show: the v5p pod's inventory (ch2 Q2) and H100's SuperPOD levels (ch12).
#[test]
fn hw_show_inventory_and_levels() {
    let v = json(&["hw", "show", "tpu-v5p@book"]);
    let pod = v["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["chips"] == 8960)
        .unwrap();
    assert_eq!(pod["hosts"], 2240);
    let h = json(&["hw", "show", "h100@book"]);
    assert!(
        rel(
            f(&h, "network_levels.1.allgather_bandwidth_bytes_per_s"),
            32.0 * 400e9 / 31.0
        ) < 1e-9
    );
    let (c, text, _) = run(&["hw", "show", "v100"]);
    assert_eq!(c, 0);
    assert!(text.contains("SMs"));
}

/// A bare count is a model; infer --chips on a TPU picks the offered slice.
#[test]
fn bare_counts_and_tpu_chips() {
    let m = json(&["model", "show", "70B"]);
    assert!(rel(f(&m, "params_total"), 70e9) < 1e-5);
    // LLaMA-3.1 70B on v5e chips: 16 is a slice (4x4), 12 is not
    let on_v5e = ["infer", "--model", "llama-3.1-70b", "--hw", "tpu-v5e@book"];
    let i = json(&cmd(&[
        &on_v5e,
        &["--chips", "16", "--weights-dtype", "int8"],
    ]));
    assert_eq!(i["mesh"], "4x4");
    let (c, _, err) = run(&cmd(&[&on_v5e, &["--chips", "12"]]));
    assert_eq!(c, 2);
    assert_contains(&err, &["does not offer a 12 slice", "4x4"]);
}

/// Issue 13 item 9: an unknown quantity is CANNOT-CHECK, the rest is judged.
#[test]
fn check_unknown_quantity_is_cannot_check() {
    let s = Scratch::new("unknown-quantity");
    let p = s.write(
        "unknown.toml",
        "[scenarios.s]\nmodel = { name = \"book-ch7-18b\" }\n\n[[claim]]\nid = \"a\"\nscenario = \"s\"\nquantity = \"params_totl\"\nclaimed = \"7\"\n\n[[claim]]\nid = \"b\"\nscenario = \"s\"\nquantity = \"params_total\"\nclaimed = \"18,385,207,296\"\n",
    );
    let (c, out, err) = run(&["check", &p, "--json"]);
    assert_eq!(c, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["claims"][0]["verdict"], "CANNOT-CHECK");
    assert!(v["claims"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("params_total"));
    assert_eq!(v["claims"][1]["verdict"], "PASS");
}

/// Hostile input to the new commands: exit 2 with a clear message, never a panic.
#[test]
fn hostile_inputs_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "collective",
                "allgathr",
                "--array",
                "1GB",
                "--mesh",
                "X=4",
                "--hw",
                "h100",
            ],
            "allgather",
        ),
        (
            &[
                "collective",
                "allgather_Q",
                "--array",
                "1GB",
                "--mesh",
                "X=4,Y=2",
                "--hw",
                "h100",
            ],
            "not in the mesh",
        ),
        (
            &[
                "collective",
                "allgather",
                "--array",
                "bf16[E_X]",
                "--dims",
                "E=10",
                "--mesh",
                "X=4",
                "--hw",
                "h100",
            ],
            "not divisible",
        ),
        (
            &[
                "collective",
                "allgather",
                "--array",
                "0B",
                "--mesh",
                "X=0",
                "--hw",
                "h100",
            ],
            "size 0",
        ),
        (
            &[
                "collective",
                "allgather",
                "--array",
                "1GB",
                "--mesh",
                "X=99999999999,Y=99999999999",
                "--hw",
                "h100",
            ],
            "2^64",
        ),
        (
            &[
                "collective",
                "allgather",
                "--array",
                "1GB",
                "--mesh",
                "X=4",
                "--hw",
                "h10",
            ],
            "unknown chip",
        ),
        (
            &[
                "roofline",
                "bf16[B, D] * bf16[D, F]",
                "--dims",
                "B=0,D=1,F=1",
                "--hw",
                "h100",
            ],
            "size 0",
        ),
        (
            &[
                "roofline",
                "bf16[B, D] * bf16[D, F]",
                "--dims",
                "B=99999999999,D=99999999999,F=99999999999",
                "--hw",
                "h100",
            ],
            "2^64",
        ),
        (&["roofline", "bf16[B, D", "--hw", "h100"], "array"),
        (&["roofline", "--hw", "h100"], "nothing to cost"),
        (
            &[
                "shard",
                "A[I_X, J_X]",
                "--dims",
                "I=8,J=8",
                "--mesh",
                "X=2",
                "--hw",
                "h100",
            ],
            "at most once",
        ),
        (
            &["shard", "A[I_X]", "--dims", "I=8", "--hw", "h100"],
            "no mesh",
        ),
        (
            &["mfu", "--model", "70B", "--tokens", "1T", "--hw", "h100"],
            "chip-hours",
        ),
        (
            &[
                "mfu",
                "--model",
                "70B",
                "--tokens",
                "0",
                "--chip-hours",
                "1",
                "--hw",
                "h100",
            ],
            "positive",
        ),
    ];
    for (args, needle) in cases {
        let (c, out, err) = run(args);
        assert_eq!(c, 2, "{args:?}: {out}{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Issue 24's collective flags end to end: ch2 Q5's route (6 hops, first
/// byte 6 µs, 6 µs + 16,777,216/9e10 in all), ch3 pop quiz 2 under
/// `--full-bandwidth` (V/9e10 with the exact 3·(V/4)/4.5e10 beside, both
/// in the text), a ragged AllToAll, a gather staged from host memory, and a
/// flag on the wrong op (exit 2, named).
#[test]
fn collective_issue_24_flags() {
    let r = json(&[
        "collective",
        "permute",
        "--array",
        "bf16[8, 128, 8192]",
        "--mesh",
        "4x4",
        "--hw",
        "tpu-v5e@book",
        "--to",
        "3,3",
    ]);
    assert_eq!(f(&r, "route.hops"), 6.0);
    assert!(rel(f(&r, "route.first_byte_s"), 6e-6) < 1e-12);
    assert!(rel(f(&r, "time_s"), 6e-6 + 16_777_216.0 / 9e10) < 1e-12);
    let v = 2.0 * 2048.0 * 8192.0;
    let args = [
        "collective",
        "allgather_Y",
        "--array",
        "bf16[E_Y, F]",
        "--dims",
        "E=2048,F=8192",
        "--mesh",
        "X=8,Y=4",
        "--hw",
        "tpu-v5e@book",
        "--full-bandwidth",
    ];
    let r = json(&args);
    assert!(rel(f(&r, "time_s"), v / 9e10) < 1e-12);
    assert!(rel(f(&r, "exact_time_s"), 3.0 * v / 4.0 / 4.5e10) < 1e-12);
    let (c, text, _) = run(&args);
    assert_eq!(c, 0);
    assert_contains(&text, &["exact time", "559.2 µs"]);
    let r = json(&[
        "collective",
        "alltoall",
        "--array",
        "1GB",
        "--mesh",
        "X=8",
        "--hw",
        "h100",
        "--topk",
        "4",
    ]);
    assert_eq!(f(&r, "ragged.fraction"), 0.5);
    let r = json(&[
        "collective",
        "gather_XY",
        "--array",
        "16e9",
        "--mesh",
        "4x4",
        "--hw",
        "tpu-v5e@book",
        "--from-host",
    ]);
    assert!(rel(f(&r, "staged.lower_bound_s"), 15e9 / 9e10) < 1e-12);
    let (c, _, err) = run(&[
        "collective",
        "allgather",
        "--array",
        "1GB",
        "--mesh",
        "X=8",
        "--hw",
        "h100",
        "--topk",
        "4",
    ]);
    assert_eq!(c, 2);
    assert_contains(&err, &["--topk applies to AllToAll"]);
}
