//! The CLI's contact with the outside: bounded file reads, the catalog
//! (built-in plus `--catalog DIR` plus model files named on the command
//! line), and writing to stdout/stderr. `meshplan-core` parses text it is
//! handed; only this module touches the file system.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use meshplan_core::Catalog;

/// Largest input file read (a model config or a data set is far smaller; an
/// endless stream like /dev/zero is refused rather than read forever).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Write report text to stdout. A closed pipe (the reader stopped, as `head`
/// does) exits with status 0 like other Unix tools; any other write error
/// exits with status 2 and a message on stderr.
pub fn write_out(args: std::fmt::Arguments) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        write_err(format_args!(
            "error: cannot write to standard output: {e}\n"
        ));
        std::process::exit(2);
    }
}

/// Write diagnostics to stderr, ignoring failures (a closed stderr must not
/// stop the report on stdout).
pub fn write_err(args: std::fmt::Arguments) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Read a whole text file: a regular file of at most [`MAX_FILE_BYTES`].
pub fn read_file(path: &Path) -> Result<String> {
    use std::io::Read;
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read '{}'", path.display()))?;
    if !meta.is_file() {
        bail!("'{}' is not a regular file", path.display());
    }
    if meta.len() > MAX_FILE_BYTES {
        bail!(
            "'{}' is {} bytes, more than the {} meshplan reads",
            path.display(),
            meta.len(),
            MAX_FILE_BYTES
        );
    }
    let f =
        std::fs::File::open(path).with_context(|| format!("cannot read '{}'", path.display()))?;
    let mut s = String::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut s)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    if s.len() as u64 > MAX_FILE_BYTES {
        bail!(
            "'{}' grew past {} bytes while being read",
            path.display(),
            MAX_FILE_BYTES
        );
    }
    Ok(s)
}

/// Whether a MODEL argument names a file (a config.json, model or scenario TOML).
pub fn is_file_arg(arg: &str) -> bool {
    let l = arg.to_ascii_lowercase();
    l.ends_with(".json") || l.ends_with(".toml")
}

static CATALOG_DIR: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Remember the global `--catalog DIR` option (called once by `main`).
pub fn set_catalog_dir(dir: Option<PathBuf>) {
    let _ = CATALOG_DIR.set(dir);
}

/// The built-in catalog plus every `DIR/models/*.toml` and
/// `DIR/hardware/*.toml` of `--catalog DIR`.
pub fn catalog() -> Result<Catalog> {
    let mut c = Catalog::builtin().clone();
    let Some(dir) = CATALOG_DIR.get().and_then(|d| d.as_deref()) else {
        return Ok(c);
    };
    if !dir.is_dir() {
        bail!(
            "--catalog '{}' is not a directory (expected DIR/models/*.toml and/or DIR/hardware/*.toml)",
            dir.display()
        );
    }
    for (sub, is_model) in [("models", true), ("hardware", false)] {
        let d = dir.join(sub);
        if !d.is_dir() {
            continue;
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
            .with_context(|| format!("cannot list '{}'", d.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let (src, name) = (read_file(&f)?, f.display().to_string());
            if is_model {
                c.add_model_toml(&src, &name)?;
            } else {
                c.add_chip_toml(&src, &name)?;
            }
        }
    }
    Ok(c)
}

/// Load a MODEL argument that names a file into `cat`; returns the name to
/// look it up by (the argument itself otherwise) and, for a scenario file,
/// the scenario.
pub fn model_arg(
    cat: &mut Catalog,
    arg: &str,
) -> Result<(String, Option<meshplan_core::scenario::Scenario>)> {
    if !is_file_arg(arg) {
        return Ok((arg.to_string(), None));
    }
    let text = read_file(Path::new(arg))?;
    Ok(meshplan_core::scenario::add_model_file_with(
        cat,
        &text,
        arg,
        &mut read_for_core,
    )?)
}

/// [`read_file`] for `meshplan-core`'s callbacks: the error as one line.
pub fn read_for_core(p: &str) -> std::result::Result<String, String> {
    read_file(Path::new(p)).map_err(|e| format!("{e:#}"))
}
