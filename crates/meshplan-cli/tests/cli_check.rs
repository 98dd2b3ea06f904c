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
    assert_eq!(c, 0, "{out}");
    let (c, out, _) = run(&["check", "examples/claims/seed-002-ch7.toml"]);
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("digit typo"), "{out}");
    assert!(out.contains("forward vs training"), "{out}");
    let (c, _, _) = run(&["check", "--strict", "examples/claims/seed-000-ch5.toml"]);
    assert_eq!(c, 1, "CANNOT-CHECK fails with --strict");
    for f in ["examples/book/ch5.toml", "examples/book/ch7.toml"] {
        assert_eq!(run(&["check", f]).0, 0, "{f}");
    }
    assert_eq!(run(&["check", "examples/playbook/seed-003.toml"]).0, 1);
}

#[test]
fn json_output() {
    let (c, out, _) = run(&["check", "--json", "examples/claims/seed-002-ch7.toml"]);
    assert_eq!(c, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["fail"], 2);
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
        ("q.toml", format!("{head}quantity = \"params_totl\"\nclaimed = \"7\"\n"), ":7:"),
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
