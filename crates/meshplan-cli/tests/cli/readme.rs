//! A fresh clone following the README (and the docs), start to finish, with
//! no failing example (issue 12): every `meshplan …` and `cargo run
//! --release -- …` line of their `sh` blocks runs here, as written, from the
//! repository root. A line exits 0 unless its comment says "exits 1" (a
//! `check` of a file with failing claims); `| jq` lines must print JSON;
//! files it writes (`> FILE`, `--plot FILE.svg`) go to a scratch directory,
//! and later lines that read them get the same file. A line whose comment
//! says "needs" names data outside the repository and is skipped, and so is
//! `serve` (a server runs until stopped; its own tests start and stop it).
//! No line notes its own input ("not a whole number of sequences") unless
//! its comment says "note".

use std::collections::BTreeMap;

use crate::harness::{assert_no_panic, meshplan, root, Scratch};

/// The command lines of a Markdown file's `sh` blocks, continuations joined.
fn commands(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut in_block, mut in_sh, mut cur) = (false, false, String::new());
    for line in md.lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            // a fence opens or closes a block; shell blocks are `sh`,
            // `bash`, `console` or unmarked
            in_block = !in_block;
            in_sh = in_block && matches!(t, "```" | "```sh" | "```bash" | "```console");
            continue;
        }
        if !in_sh {
            continue;
        }
        let t = t.trim_end();
        cur.push_str(t.strip_suffix('\\').map_or(t, str::trim_end));
        if t.ends_with('\\') {
            cur.push(' ');
            continue;
        }
        let c = std::mem::take(&mut cur);
        let c = c.strip_prefix("$ ").unwrap_or(&c).to_string();
        if c.starts_with("meshplan ")
            || c.starts_with("cargo run --release -- ")
            || assignment(&c).is_some()
        {
            out.push(c);
        }
    }
    out
}

/// `NAME=value` (a shell variable the next lines use as `$NAME`).
fn assignment(line: &str) -> Option<(&str, &str)> {
    let (k, v) = line.split_once('=')?;
    let shell_name = !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_');
    (shell_name && !v.contains(' ')).then_some((k, v))
}

/// Split off a trailing `# comment` (outside quotes).
fn comment(line: &str) -> (&str, &str) {
    let mut q = None;
    for (i, ch) in line.char_indices() {
        match (ch, q) {
            ('"' | '\'', None) => q = Some(ch),
            (c, Some(o)) if c == o => q = None,
            ('#', None) if i > 0 && line[..i].ends_with(' ') => {
                return (line[..i].trim_end(), &line[i + 1..]);
            }
            _ => {}
        }
    }
    (line.trim_end(), "")
}

/// Shell words (double and single quotes, no escapes: what the docs use).
fn words(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut q, mut any) = (Vec::new(), String::new(), None, false);
    for ch in s.chars() {
        match (ch, q) {
            ('"' | '\'', None) => (q, any) = (Some(ch), true),
            (c, Some(o)) if c == o => q = None,
            (' ', None) => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (c, _) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Run one documented line; `files` maps the names of files written by
/// earlier lines to their scratch paths.
fn run_line(line: &str, s: &Scratch, files: &mut BTreeMap<String, String>) -> Result<(), String> {
    let (cmd, note) = comment(line);
    if note.contains("needs ") {
        return Ok(());
    }
    let (cmd, jq) = match cmd.split_once(" | ") {
        Some((c, rest)) => (c, rest.trim_start().starts_with("jq")),
        None => (cmd, false),
    };
    let (cmd, redirect) = match cmd.split_once(" > ") {
        Some((c, f)) => (c, Some(f.trim().to_string())),
        None => (cmd, None),
    };
    let cmd = cmd
        .strip_prefix("cargo run --release -- ")
        .or_else(|| cmd.strip_prefix("meshplan "))
        .expect("a meshplan line");
    if cmd.starts_with("serve") {
        // a server runs until stopped: meshplan-web's tests and
        // python/tests/test_web.py start it and stop it
        return Ok(());
    }
    let args: Vec<String> = words(cmd)
        .into_iter()
        .flat_map(glob)
        .map(|w| match files.get(&w) {
            Some(p) => p.clone(),
            None if w.ends_with(".svg") => s.dir().join(&w).display().to_string(),
            None => w,
        })
        .collect();
    let out = meshplan().args(&args).output().expect("meshplan runs");
    let (code, stdout) = (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_no_panic(&args.iter().map(String::as_str).collect::<Vec<_>>(), &err);
    let want = if note.contains("exits 1") { 1 } else { 0 };
    if code != want {
        return Err(format!("`{line}` exited {code}, not {want}:\n{err}"));
    }
    // an example shows what it is meant to show: no note of its own
    // making (a batch that is not a whole number of its sequences), unless
    // its comment says it shows one
    let said = format!("{stdout}{err}");
    if said.contains("not a whole number of") && !note.contains("note") {
        return Err(format!("`{line}` notes its own input:\n{said}"));
    }
    if jq {
        serde_json::from_str::<serde_json::Value>(&stdout)
            .map_err(|e| format!("`{line}`: not JSON ({e})"))?;
    }
    if let Some(f) = redirect {
        let p = s.write(&f, stdout.as_bytes());
        files.insert(f, p);
    }
    Ok(())
}

/// A shell's expansion of `dir/*.ext` (the one glob form the docs use),
/// sorted as the shell sorts; any other word as it is.
fn glob(w: String) -> Vec<String> {
    let Some((dir, ext)) = w.split_once("/*") else {
        return vec![w];
    };
    let mut all: Vec<String> = std::fs::read_dir(root().join(dir))
        .expect("a globbed folder")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(ext))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    all.sort();
    all
}

fn run_doc(path: &str) -> usize {
    let md = std::fs::read_to_string(root().join(path)).expect("doc");
    let s = Scratch::new("readme");
    let mut files = BTreeMap::new();
    let lines = commands(&md);
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut failed = Vec::new();
    for l in &lines {
        if let Some((k, v)) = assignment(l) {
            vars.push((format!("${k}"), v.to_string()));
            continue;
        }
        let l = vars.iter().fold(l.clone(), |l, (k, v)| l.replace(k, v));
        failed.extend(run_line(&l, &s, &mut files).err());
    }
    assert!(failed.is_empty(), "{path}:\n{}", failed.join("\n"));
    lines.len()
}

#[test]
fn readme_examples_run() {
    assert!(run_doc("README.md") >= 30);
}

#[test]
fn docs_examples_run() {
    for d in [
        "docs/building-blocks.md",
        "docs/check.md",
        "docs/inference.md",
        "docs/planner.md",
        "docs/scenario.md",
    ] {
        assert!(run_doc(d) >= 1, "{d}");
    }
}

#[test]
fn the_extractor_reads_lines_as_written() {
    let md = "```sh\nmeshplan a \\\n    --b \"x y\"  # note\nnot me\n```\n```toml\nmeshplan no\n```\n```\nmeshplan c\n```\n";
    assert_eq!(
        commands(md),
        ["meshplan a --b \"x y\"  # note", "meshplan c"]
    );
    assert_eq!(
        comment("meshplan a --b \"x # y\"  # c"),
        ("meshplan a --b \"x # y\"", " c")
    );
    assert_eq!(words("a \"b c\" 'd' \"\""), ["a", "b c", "d", ""]);
}
