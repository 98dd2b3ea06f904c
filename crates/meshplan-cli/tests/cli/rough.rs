//! The rough edges a newcomer hit in the first hour (issue 23, round 2),
//! each as the user met it: piped tables cut with "…", enum typos in a
//! scenario without file:line:field, a bare "70B" guessed as MHA without a
//! word, two TPOTs 10× apart without their contexts, `\mathrm{per_layer}`
//! in Markdown, "= inf" under --explain, and a long search silent on a log.

use crate::harness::{rejects, run, Scratch};

/// README: "piped output is never wrapped" — nor cut: every catalog
/// source is printed whole, so a long one is not shortened with "…".
#[test]
fn piped_tables_are_never_cut() {
    let (code, out, err) = run(&["model", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('…'), "a cut cell:\n{out}");
    // the longest source of the catalog is in the table whole
    let (_, json, _) = run(&["model", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let longest = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["source"].as_str()?.lines().next())
        .max_by_key(|s| s.chars().count())
        .unwrap();
    assert!(longest.chars().count() > 60, "{longest}");
    assert!(out.contains(longest), "'{longest}' not whole in\n{out}");
}

/// A misspelled choice in a scenario names the file, the line and the
/// field, as a misspelled key does.
#[test]
fn enum_typos_in_a_scenario_name_file_line_and_field() {
    let s = Scratch::new("rough-enum");
    let base = "[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n";
    for (section, key, bad, line, hint) in [
        ("training", "remat", "ful", 7, "did you mean 'full'"),
        ("training", "optimizer", "adamm", 7, "did you mean 'adam'"),
        ("training", "param_dtype", "bf61", 7, "did you mean 'bf16'"),
        ("parallelism", "schedule", "1f1", 7, "1f1b"),
    ] {
        let f = s.write(
            &format!("{key}.toml"),
            format!("{base}[{section}]\n{key} = \"{bad}\"\n"),
        );
        let field = format!("field `{section}.{key}`");
        rejects(&["train", &f], &[&format!("{f}:{line}:1"), &field, hint]);
    }
    // the same in [inference], for `infer`
    let f = s.write(
        "kv.toml",
        format!("{base}[inference]\nbatch = 1\nkv_dtype = \"int9\"\n"),
    );
    rejects(&["infer", &f], &[&format!("{f}:8:1"), "inference.kv_dtype"]);
}

/// `model show 70B` guesses grouped-query attention, as the 70B models in
/// use are built (LLaMA-2/3 70B: K = 8 KV heads), and says it guessed.
#[test]
fn a_bare_count_names_its_guessed_shape() {
    let (code, out, err) = run(&["model", "show", "70B"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("guessed"), "{out}");
    assert!(out.contains("GQA with K = 8"), "{out}");
    assert!(out.contains(" K=8 "), "{out}");
    // KV per token in bf16: 2 (K, V) · K · H · L · 2 bytes = 2·8·128·L·2
    let (_, json, _) = run(&["model", "show", "70B", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let l = v["arch"]["n_layers"].as_f64().unwrap();
    let kv = v["kv_cache_bytes_per_token"].as_f64().unwrap();
    assert_eq!(kv, 2.0 * 8.0 * 128.0 * l * 2.0);
}

/// Book ch7 Q2: the decode step at the full 128k context and the static
/// batch's TPOT at its mean context are 10× apart; each says which.
#[test]
fn each_tpot_names_its_context() {
    let (code, out, err) = run(&["infer", "examples/infer/ch7-q2.toml"]);
    assert_eq!(code, 0, "{err}");
    let line = |k: &str| out.lines().find(|l| l.starts_with(k)).unwrap().to_string();
    // the scenario: batch 7, context 128,000, prompt 2,048, 512 generated
    assert!(
        line("decode step").contains("at batch 7, context 128000"),
        "{out}"
    );
    // mean KV length of the generation: 2048 + 512/2 = 2304
    assert!(
        line("static batch").contains("(batch 7, mean context 2304 = prompt + gen/2)"),
        "{out}"
    );
}

/// `--explain-format markdown`: a symbol with two underscores keeps the
/// second one literal (`\_`), not a nested subscript.
#[test]
fn markdown_explain_escapes_underscores_in_mathrm() {
    let (code, out, err) = run(&[
        "model",
        "show",
        "llama-3-8b",
        "--explain",
        "--explain-format",
        "markdown",
    ]);
    assert_eq!(code, 0, "{err}");
    let math: Vec<&str> = out.split('$').skip(1).step_by(2).collect();
    assert!(!math.is_empty(), "{out}");
    for m in &math {
        // every underscore is a subscript opener `_{` or an escaped `\_`
        let bare = m
            .match_indices('_')
            .any(|(i, _)| !m[i + 1..].starts_with('{') && !m[..i].ends_with('\\'));
        assert!(!bare, "a bare underscore in ${m}$");
    }
}

/// Where no finite value exists (FLOPs with no bytes: no intensity; a
/// batch that never turns compute-bound) it is said in words, and the
/// book's chapters 2 and 4 print no "inf" under --explain.
#[test]
fn explain_never_prints_inf() {
    let has_inf = |s: &str| {
        s.split(|c: char| !c.is_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case("inf") || w.eq_ignore_ascii_case("nan"))
    };
    let (code, out, err) = run(&["roofline", "--hw", "h100", "--flops", "1e12", "--explain"]);
    assert_eq!(code, 0, "{err}");
    assert!(!has_inf(&out), "{out}");
    assert!(out.contains("unbounded"), "{out}");
    for f in ["examples/book/ch2.toml", "examples/book/ch4.toml"] {
        for fmt in ["text", "markdown"] {
            let (_, out, err) = run(&["check", f, "--explain", "--explain-format", fmt]);
            assert!(!has_inf(&out), "{f} ({fmt}):\n{out}{err}");
        }
    }
}

/// A search that runs longer than a second prints progress lines on a
/// stderr that is no terminal (a log), and none on stdout; with --json
/// stderr stays quiet.
#[test]
fn a_long_search_reports_progress_on_a_log() {
    let args = [
        "plan",
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "64",
        "--batch-tokens",
        "4Mi",
        "--seq-len",
        "8192",
        "--offload",
        "auto",
        "--rank-order",
        "auto",
        "--top",
        "1",
    ];
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    // a debug build takes several seconds over this search's 321 tuples
    assert!(err.contains("meshplan: searching, "), "no progress:\n{err}");
    assert!(err.contains("degree tuples"), "{err}");
    assert!(err.contains("meshplan: search done"), "{err}");
    assert!(!out.contains("meshplan: searching"), "progress on stdout");
    let (code, _, err) = run(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "--json wrote to stderr: {err}");
}
