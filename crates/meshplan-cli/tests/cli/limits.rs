//! Issue 12's hostile-input reproducers: absurd chip counts and degrees,
//! thread counts, denormal MFUs, degenerate bootstrap counts and endless
//! streams as input files. Each one exits 0 or 2 quickly, never panics and
//! prints no NaN or inf.

use std::time::{Duration, Instant};

use crate::harness::{
    assert_no_panic, cmd, meshplan, Scratch, CALIBRATE_QUICK, L7B_H100, L7B_H100X8, SUBSET,
    WORKLOAD_1M,
};

/// Wall-time limit of one reproducer. The issue asks for < 2 s of a release
/// build; a debug build under a parallel test run gets more slack.
const LIMIT: Duration = Duration::from_secs(if cfg!(debug_assertions) { 20 } else { 2 });

/// Run `args` with a deadline: (exit code, stdout, stderr); the process is
/// killed and the test fails when it runs past [`LIMIT`].
fn run_bounded(args: &[&str]) -> (i32, String, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = meshplan()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("meshplan starts");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} ran past {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = String::from_utf8_lossy(&t_out.join().expect("stdout reader")).into_owned();
    let err = String::from_utf8_lossy(&t_err.join().expect("stderr reader")).into_owned();
    (status.code().unwrap_or(-1), out, err)
}

/// Whether `text` has a word NaN or inf (any case): a printed non-finite number.
fn non_finite_word(text: &str) -> Option<&str> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| w.eq_ignore_ascii_case("nan") || w.eq_ignore_ascii_case("inf"))
}

/// Exit 0 or 2 within the limit, no panic, no NaN/inf anywhere, and a
/// message on stderr when refused. Returns (code, stdout, stderr).
fn tame(args: &[&str]) -> (i32, String, String) {
    let (code, out, err) = run_bounded(args);
    assert_no_panic(args, &err);
    assert!(
        code == 0 || code == 2,
        "{args:?}: exit {code}\nstdout: {out}\nstderr: {err}"
    );
    if code == 2 {
        assert!(err.contains("error:"), "{args:?}: no message: {err}");
    }
    for t in [&out, &err] {
        if let Some(w) = non_finite_word(t) {
            panic!("{args:?} printed {w:?}:\n{out}\n{err}");
        }
    }
    (code, out, err)
}

/// Like [`tame`], and the answer is a refusal whose message holds every needle.
fn refused(args: &[&str], needles: &[&str]) {
    let (code, out, err) = tame(args);
    assert_eq!(code, 2, "{args:?}: accepted:\n{out}");
    let low = err.to_lowercase();
    for n in needles {
        assert!(
            low.contains(&n.to_lowercase()),
            "{args:?}: stderr lacks {n:?}:\n{err}"
        );
    }
}

/// `train` of LLaMA-2 7B on H100s, 1M-token batches, with `extra` flags.
fn train<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    cmd(&[&["train"], &L7B_H100, &WORKLOAD_1M, extra])
}

#[test]
fn plan_train_with_a_chip_count_whose_products_overflow() {
    let mut a = vec!["plan"];
    a.extend(train(&["--chips", "2305843009213693952"]));
    tame(&a);
    a.push("--json");
    tame(&a);
}

#[test]
fn plan_train_with_absurd_thread_counts_is_capped() {
    let threads = ["--threads", "10000", "--json"];
    let a = cmd(&[&["plan", "train"], &L7B_H100X8, &WORKLOAD_1M, &threads]);
    let (code, _, _) = tame(&a);
    assert_eq!(code, 0);
}

#[test]
fn huge_chip_counts_in_train_and_infer() {
    for chips in ["1e19", "2305843009213693952", "18446744073709551615"] {
        tame(&train(&["--chips", chips]));
        tame(&train(&["--chips", chips, "--json"]));
        tame(&cmd(&[&["infer"], &L7B_H100, &["--chips", chips]]));
    }
}

#[test]
fn degree_products_that_wrap_are_refused() {
    refused(
        &train(&["--chips", "8", "--tp", "4294967296", "--pp", "4294967296"]),
        &["--tp", "4294967296"],
    );
    // An absurd tensor parallelism is refused, not printed as "0.4336 nB".
    refused(&train(&["--chips", "8", "--tp", "4294967296"]), &["--tp"]);
    refused(
        &train(&["--chips", "8", "--tp", "65536", "--pp", "65536"]),
        &["overflows"],
    );
}

#[test]
fn denormal_and_out_of_range_mfu() {
    for mfu in ["5e-324", "1e-300", "0", "-1", "1.5", "NaN", "inf"] {
        let flag = format!("--mfu={mfu}");
        refused(&train(&["--chips", "8", &flag]), &["mfu"]);
        refused(&cmd(&[&["infer"], &L7B_H100X8, &[&flag]]), &["mfu"]);
    }
}

#[test]
fn calibrate_with_no_or_one_bootstrap_sample_prints_no_nan() {
    for b in ["0", "1"] {
        tame(&cmd(&[&CALIBRATE_QUICK, &["--bootstrap", b]]));
    }
}

#[test]
fn endless_streams_as_input_files_are_refused() {
    let s = Scratch::new("streams");
    let dir = s.dir().to_str().expect("UTF-8 temp path").to_string();
    let link = |name: &str| {
        let p = format!("{dir}/{name}");
        std::os::unix::fs::symlink("/dev/zero", &p).expect("symlink");
        p
    };
    let (zt, zj) = (link("zero.toml"), link("zero.json"));
    let z = "/dev/zero";
    let cases: Vec<Vec<&str>> = vec![
        vec!["model", "show", &zt],
        vec!["model", "show", &zj],
        vec!["hw", "show", &zt],
        vec!["train", "--model", &zj, "--hw", "h100", "--chips", "8"],
        vec!["infer", "--model", &zt, "--hw", "h100", "--chips", "8"],
        vec![
            "plan", "infer", "--model", &zj, "--hw", "h100", "--chips", "8",
        ],
        vec!["validate", &zj],
        vec!["train", z],
        vec!["infer", z],
        vec!["plan", "train", z],
        vec!["plan", "infer", z],
        cmd(&[&["train"], &L7B_H100X8, &["--hw-profile", z]]),
        vec!["check", z],
        vec!["explain", z],
        vec!["validate", z],
        vec!["calibrate", z, "--chip", "h100"],
        vec!["validate", SUBSET, "--hw-profile", z],
    ];
    for a in cases {
        refused(&a, &["not a regular file"]);
    }
}
