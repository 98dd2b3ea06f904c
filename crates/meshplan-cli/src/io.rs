//! The CLI's contact with the outside: bounded file reads, the catalog
//! (built-in plus `--catalog DIR` plus model files named on the command
//! line) through `meshplan-io` (which the Python module shares), and
//! writing to stdout/stderr. `meshplan-core` parses text it is handed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Result;
use meshplan_core::Catalog;

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

/// Read a whole text file: a regular file of at most
/// [`meshplan_io::MAX_FILE_BYTES`] (meshplan-io's bounded reader).
pub fn read_file(path: &Path) -> Result<String> {
    Ok(meshplan_io::read_file(path)?)
}

static CATALOG_DIR: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Remember the global `--catalog DIR` option (called once by `main`).
pub fn set_catalog_dir(dir: Option<PathBuf>) {
    let _ = CATALOG_DIR.set(dir);
}

/// The built-in catalog plus every `DIR/models/*.toml` and
/// `DIR/hardware/*.toml` of `--catalog DIR`.
pub fn catalog() -> Result<Catalog> {
    Ok(meshplan_io::catalog(
        CATALOG_DIR.get().and_then(|d| d.as_deref()),
    )?)
}

/// Load a MODEL argument that names a file into `cat`; returns the name to
/// look it up by (the argument itself otherwise) and, for a scenario file,
/// the scenario.
pub fn model_arg(
    cat: &mut Catalog,
    arg: &str,
) -> Result<(String, Option<meshplan_core::scenario::Scenario>)> {
    Ok(meshplan_io::model_arg(cat, arg)?)
}
