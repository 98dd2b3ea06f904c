//! End-to-end tests of `meshplan check` and `meshplan explain`: exit codes
//! (0 pass, 1 fail, 2 malformed), JSON shape, explanations, bad files.

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("meshplan")
        .unwrap()
        .current_dir(root())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tmp(name: &str, body: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("meshplan-cli-check-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn seed_files_exit_codes() {
    let (c, out, _) = run(&["check", "examples/claims/seed-000-ch5.toml"]);
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("25 PASS, 4 FAIL, 0 CANNOT-CHECK"), "{out}");
    let (c, out, _) = run(&["check", "examples/claims/seed-002-ch7.toml"]);
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("digit typo"), "{out}");
    assert!(out.contains("forward vs training"), "{out}");
    // A claim on an optional key the scenario does not produce (no MFU →
    // no step_time_at_mfu_s) is CANNOT-CHECK: exit 0, but 1 with --strict.
    let cc = tmp(
        "cc.toml",
        "[scenarios.s]\nmodel = { name = \"book-ch5-llama-2-13b\" }\nhardware = { chip = \"tpu-v5p@book\", mesh = \"4x4x4\" }\n\n[[claim]]\nid = \"a\"\nscenario = \"s\"\ncommand = \"train\"\nquantity = \"step_time_at_mfu_s\"\nclaimed = \"1 s\"\n",
    );
    let cc = cc.to_str().unwrap();
    let (c, out, _) = run(&["check", cc]);
    assert_eq!(c, 0, "{out}");
    assert!(out.contains("CANNOT-CHECK"), "{out}");
    assert_eq!(
        run(&["check", "--strict", cc]).0,
        1,
        "CANNOT-CHECK fails with --strict"
    );
    // ch5: every official answer passes; ch7: four claims fail where the
    // book itself approximates or slips (each carries a note).
    assert_eq!(run(&["check", "examples/book/ch5.toml"]).0, 0);
    let (c, out, _) = run(&["check", "examples/book/ch7.toml"]);
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("26 PASS, 4 FAIL, 0 CANNOT-CHECK"), "{out}");
    assert_eq!(run(&["check", "examples/playbook/seed-003.toml"]).0, 1);
}

#[test]
fn json_output() {
    let (c, out, _) = run(&["check", "--json", "examples/claims/seed-002-ch7.toml"]);
    assert_eq!(c, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["fail"], 7);
    assert_eq!(v["summary"]["cannot_check"], 0);
    let q1 = &v["claims"][0];
    assert_eq!(q1["id"], "q1-params");
    assert_eq!(q1["verdict"], "FAIL");
    assert_eq!(q1["meshplan"], 18385207296u64);
    assert_eq!(q1["hint"]["kind"], "digit-typo");
}

#[test]
fn explain_formats() {
    let (c, out, _) = run(&["check", "--explain", "examples/claims/seed-002-ch7.toml"]);
    assert_eq!(c, 1);
    assert!(
        out.contains("Forward matmul FLOPs per token: 2·P_matmul"),
        "{out}"
    );
    for (fmt, needle) in [
        ("text", "Inputs:"),
        ("markdown", "## q1-params"),
        ("latex", "\\begin{align*}"),
    ] {
        let (c, out, err) = run(&[
            "explain",
            "--format",
            fmt,
            "examples/claims/seed-002-ch7.toml",
        ]);
        assert_eq!(c, 0, "{err}");
        assert!(out.contains(needle), "{fmt}: {out}");
        assert!(out.contains("L = 64") || out.contains("64"), "{fmt}");
    }
}

#[test]
fn bad_files_exit_2_with_line() {
    let head = "[scenarios.s]\nmodel = { name = \"book-ch7-18b\" }\n\n[[claim]]\nid = \"a\"\nscenario = \"s\"\n";
    for (name, body, needle) in [
        ("u.toml", format!("{head}quantity = \"kv_cache_bytes_per_token\"\nclaimed = \"2 s\"\n"), ":8:"),
        ("s.toml", "[[claim]]\nid = \"a\"\nscenario = \"x\"\nquantity = \"params_total\"\nclaimed = \"7\"\n".to_string(), ":3:"),
        ("m.toml", "[[claim\nid = 1\n".to_string(), ":1:"),
        ("c.toml", format!("{head}command = \"serve\"\nquantity = \"params_total\"\nclaimed = \"7\"\n"), ":7:"),
    ] {
        let p = tmp(name, &body);
        let (c, _, err) = run(&["check", p.to_str().unwrap()]);
        assert_eq!(c, 2, "{name}: {err}");
        assert!(err.contains(needle), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (c, _, _) = run(&["check", "does-not-exist.toml"]);
    assert_eq!(c, 2);
}

#[test]
fn scenario_file_relative_to_claims_file() {
    let p = tmp(
        "rel.toml",
        "[[claim]]\nid = \"p\"\nscenario = \"scen.toml\"\nquantity = \"params_total\"\nclaimed = \"13,015,449,600\"\n",
    );
    std::fs::write(
        p.with_file_name("scen.toml"),
        "[model]\nname = \"book-ch5-llama-2-13b\"\n",
    )
    .unwrap();
    let (c, out, err) = run(&["check", p.to_str().unwrap()]);
    assert_eq!(c, 0, "{out}{err}");
}
