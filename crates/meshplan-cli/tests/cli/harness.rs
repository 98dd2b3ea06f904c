//! The one set of helpers of the CLI tests: run the `meshplan` binary from
//! the repository root, read its JSON, scratch files unique to one test, and
//! the few assertions the modules share.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

/// The repository root: examples/, data/ and the core's fixtures are named
/// relative to it, the way a user runs meshplan from a checkout.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// LLaMA-2 7B on H100s (the chip count, mesh or degrees to follow).
/// LLaMA-3 8B on H100s (add `--chips`).
pub const L3_8B_H100: [&str; 4] = ["--model", "llama-3-8b", "--hw", "h100"];

pub const L7B_H100: [&str; 4] = ["--model", "llama-2-7b", "--hw", "h100"];

/// [`L7B_H100`] on one 8-GPU node: the quick run that `train`, `infer`,
/// `plan train` and `plan infer` tests share.
pub const L7B_H100X8: [&str; 6] = ["--model", "llama-2-7b", "--hw", "h100", "--chips", "8"];

/// 1M-token batches of 4k sequences (what `plan train` needs besides a
/// model and chips).
pub const WORKLOAD_1M: [&str; 4] = ["--batch-tokens", "1M", "--seq-len", "4096"];

/// The validation subset of the Ultra-Scale Playbook's measured runs.
pub const SUBSET: &str = "crates/meshplan-core/tests/fixtures/validation/playbook_subset.csv";

/// A quick `calibrate` of [`SUBSET`]'s H100 runs: 5 iterations (the
/// bootstrap count to follow).
pub const CALIBRATE_QUICK: [&str; 6] = ["calibrate", SUBSET, "--chip", "h100", "--iters", "5"];

/// 64 H100s, 4M-token batches of 4k sequences: the H100 run of the `train`
/// and `plan train` tests (an H100 has an efficiency profile), after a model.
pub const H100X64_4M: [&str; 8] = [
    "--hw",
    "h100",
    "--chips",
    "64",
    "--batch-tokens",
    "4M",
    "--seq-len",
    "4096",
];

/// A command line joined from its pieces: `cmd(&[&["infer"], &L7B_H100X8,
/// &["--json"]])`.
pub fn cmd<'a>(parts: &[&[&'a str]]) -> Vec<&'a str> {
    parts.concat()
}

/// `meshplan` ready to run from the repository root, stdin closed (nothing
/// may wait for input).
pub fn meshplan() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_meshplan"));
    c.current_dir(root()).stdin(Stdio::null());
    c
}

/// Run `meshplan ARGS`: (exit code, stdout, stderr); -1 when killed by a signal.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out: Output = meshplan().args(args).output().expect("meshplan runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run, require exit 0 and a quiet stderr (no warning, no progress bar on a
/// pipe), parse stdout as one JSON value.
pub fn json(args: &[&str]) -> Value {
    let (code, out, err) = run(args);
    assert_eq!(code, 0, "{args:?} exited {code}: {err}");
    assert!(err.is_empty(), "{args:?} wrote to stderr: {err}");
    parse(args, &out)
}

/// Parse the stdout of `args` as one JSON value (any exit code).
pub fn parse(args: &[&str], out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{out}"))
}

/// The value at a dotted path ("predicted.step_time_s", "plans.0.rank").
pub fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) if v.is_array() => &v[i],
        _ => &v[k],
    })
}

/// The number at a dotted path; fails the test when it is missing or not a number.
pub fn f(v: &Value, path: &str) -> f64 {
    at(v, path)
        .as_f64()
        .unwrap_or_else(|| panic!("no number at {path} in {v}"))
}

/// The unsigned integer at a dotted path.
pub fn u(v: &Value, path: &str) -> u64 {
    at(v, path)
        .as_u64()
        .unwrap_or_else(|| panic!("no integer at {path} in {v}"))
}

/// `got` within `rel_tol` of `want`.
pub fn assert_close(got: f64, want: f64, rel_tol: f64, what: &str) {
    let rel = ((got - want) / want).abs();
    assert!(
        rel <= rel_tol,
        "{what}: got {got}, want {want} (rel. error {rel:.3e} > {rel_tol})"
    );
}

/// Every needle occurs in `text` (the whole text is shown on failure).
pub fn assert_contains(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "{n:?} missing from:\n{text}");
    }
}

/// No panic message (a panic is a bug whatever the input).
pub fn assert_no_panic(args: &[&str], err: &str) {
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
}

/// Bad input: exit code 2, nothing on stdout, no panic, and a message on
/// stderr containing every needle (case-insensitive).
pub fn rejects(args: &[&str], needles: &[&str]) {
    let (code, out, err) = run(args);
    assert_no_panic(args, &err);
    assert_eq!(
        code, 2,
        "{args:?}: exit {code}\nstdout: {out}\nstderr: {err}"
    );
    assert!(
        out.is_empty(),
        "{args:?}: printed to stdout on error: {out}"
    );
    let low = err.to_lowercase();
    for n in needles {
        assert!(
            low.contains(&n.to_lowercase()),
            "{args:?}: stderr lacks {n:?}:\n{err}"
        );
    }
}

/// A directory of scratch files for one test, unique within the run (process
/// id, a counter and a tag, so tests in parallel never share a file), removed
/// when dropped.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("meshplan-cli-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch { dir }
    }

    /// The scratch directory itself.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Write `body` to `name` (sub-directories created) and return its path.
    pub fn write(&self, name: &str, body: impl AsRef<[u8]>) -> String {
        let p = self.dir.join(name);
        std::fs::create_dir_all(p.parent().expect("file in a dir")).expect("scratch sub-dir");
        std::fs::write(&p, body).expect("scratch file");
        p.to_str().expect("UTF-8 temp path").to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
