//! meshplan's contact with the file system, shared by every front end that
//! reads files (the CLI and the Python module; the web API reads none).
//! `meshplan-core` parses text it is handed; this crate hands it text read
//! the one bounded way: regular files only (a FIFO, a device or a directory
//! is refused before it is opened, so nothing blocks or reads forever), at
//! most [`MAX_FILE_BYTES`].
//!
//! Errors are typed ([`Error`]): a file that cannot be read, or the core's
//! own [`meshplan_core::Error`] for text that does not parse. Their
//! `Display` and `source()` chain are what the CLI prints (`error: …` and
//! `caused by: …`); [`one_line`] joins the chain for the other front ends.

use std::path::{Path, PathBuf};

use meshplan_core::scenario::{self, Scenario};
use meshplan_core::Catalog;

/// Largest input file read (a model config or a data set is far smaller; an
/// endless stream like /dev/zero is refused rather than read forever).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// A file that cannot be read as meshplan input.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The operating system refused (missing file, no permission, …).
    #[error("cannot read '{path}'")]
    Io {
        /// The path as given.
        path: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A directory, FIFO, socket or device: never opened, since opening a
    /// FIFO blocks and a device can be endless.
    #[error("'{0}' is not a regular file")]
    NotRegular(String),
    /// Larger than [`MAX_FILE_BYTES`].
    #[error("'{path}' is {bytes} bytes, more than the {MAX_FILE_BYTES} meshplan reads")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        bytes: u64,
    },
    /// Grew past [`MAX_FILE_BYTES`] while being read.
    #[error("'{0}' grew past {MAX_FILE_BYTES} bytes while being read")]
    Grew(String),
    /// A `--catalog DIR` that is not a directory.
    #[error("--catalog '{0}' is not a directory (expected DIR/models/*.toml and/or DIR/hardware/*.toml)")]
    NotCatalogDir(String),
    /// A catalog directory that cannot be listed.
    #[error("cannot list '{path}'")]
    List {
        /// The directory.
        path: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
}

/// Anything that stops a file from becoming meshplan input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// Its text is not valid input (the core's message).
    #[error(transparent)]
    Core(#[from] meshplan_core::Error),
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes on one line, `a: b: c` (as `anyhow`'s `{:#}`).
pub fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Read a whole text file: a regular file of at most [`MAX_FILE_BYTES`].
pub fn read_file(path: &Path) -> Result<String, FileError> {
    use std::io::Read;
    let shown = || path.display().to_string();
    let io = |source| FileError::Io {
        path: shown(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(shown()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            path: shown(),
            bytes: meta.len(),
        });
    }
    let f = std::fs::File::open(path).map_err(io)?;
    let mut s = String::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut s)
        .map_err(io)?;
    if s.len() as u64 > MAX_FILE_BYTES {
        return Err(FileError::Grew(shown()));
    }
    Ok(s)
}

/// [`read_file`] for `meshplan-core`'s callbacks: the error on one line.
pub fn read_for_core(p: &str) -> std::result::Result<String, String> {
    read_file(Path::new(p)).map_err(|e| one_line(&e))
}

/// Whether a MODEL argument names a file (a config.json, model or scenario TOML).
pub fn is_file_arg(arg: &str) -> bool {
    let l = arg.to_ascii_lowercase();
    l.ends_with(".json") || l.ends_with(".toml")
}

/// A sequence length as the front ends take it (`--seq-len`, Python's
/// `seq_len=`): a whole, positive token count, "4096", "32k" (= 32,000) or
/// "32Ki" (= 32,768).
pub fn seq_len(s: &str) -> Result<u64, meshplan_core::Error> {
    match meshplan_core::units::parse_count(s)? {
        0 => Err(meshplan_core::Error::Invalid(
            "the sequence length must be at least 1 token".into(),
        )),
        v => Ok(v),
    }
}

/// The built-in catalog plus every `DIR/models/*.toml` and
/// `DIR/hardware/*.toml` of a catalog directory (`--catalog DIR`).
pub fn catalog(dir: Option<&Path>) -> Result<Catalog> {
    let mut c = Catalog::builtin().clone();
    let Some(dir) = dir else {
        return Ok(c);
    };
    if !dir.is_dir() {
        return Err(FileError::NotCatalogDir(dir.display().to_string()).into());
    }
    for (sub, is_model) in [("models", true), ("hardware", false)] {
        let d = dir.join(sub);
        if !d.is_dir() {
            continue;
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
            .map_err(|source| FileError::List {
                path: d.display().to_string(),
                source,
            })?
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
pub fn model_arg(cat: &mut Catalog, arg: &str) -> Result<(String, Option<Scenario>)> {
    if !is_file_arg(arg) {
        return Ok((arg.to_string(), None));
    }
    let text = read_file(Path::new(arg))?;
    Ok(scenario::add_model_file_with(
        cat,
        &text,
        arg,
        &mut read_for_core,
    )?)
}

/// Read a scenario file, or an empty scenario when none is given.
pub fn scenario(path: Option<&Path>) -> Result<Scenario> {
    match path {
        None => Ok(Scenario::default()),
        Some(p) => Ok(Scenario::parse(&read_file(p)?, &p.display().to_string())?),
    }
}

/// The scenario of an analysis before its flags: the file (if any) with its
/// model resolved into `cat` — `model` (a name or a model file, which
/// replaces the scenario's model, a `[model] file` included) or else the
/// file's `[model] file`, relative to the scenario file.
pub fn target(cat: &mut Catalog, path: Option<&Path>, model: Option<&str>) -> Result<Scenario> {
    let mut sc = scenario(path)?;
    if let Some(m) = model {
        sc.model.file = None;
        sc.model.name = Some(model_arg(cat, m)?.0);
    } else if let Some(p) = path {
        let name = p.display().to_string();
        scenario::load_model_file(cat, &mut sc, &name, &mut read_for_core)?;
    }
    Ok(sc)
}

/// A chip argument: a catalog name, or a chip TOML file (its first chip).
pub fn chip_arg(cat: &Catalog, arg: &str) -> Result<meshplan_core::hardware::Chip> {
    if !arg.to_ascii_lowercase().ends_with(".toml") {
        return Ok(cat.chip(arg)?.clone());
    }
    let src = read_file(Path::new(arg))?;
    meshplan_core::catalog::parse_chip(&src, arg)?
        .into_iter()
        .next()
        .ok_or_else(|| meshplan_core::Error::Invalid(format!("{arg}: no chip in file")).into())
}

/// Read a claims file (`meshplan check`); the scenario files it names
/// resolve relative to it.
pub fn claims(path: &Path) -> Result<meshplan_core::check::ClaimsFile> {
    let src = read_file(path)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut resolve = |p: &str| {
        let full = dir.join(p);
        read_file(&full)
            .map(|t| (full.display().to_string(), t))
            .map_err(|e| one_line(&e))
    };
    Ok(meshplan_core::check::parse_claims(
        &src,
        &path.display().to_string(),
        &mut resolve,
    )?)
}

/// Read and check a claims file (`meshplan check`) against `cat`, with the
/// derivation of each claim when `with_trace`; a file without claims is
/// refused rather than reported as all-pass.
pub fn check_claims(
    path: &Path,
    cat: &Catalog,
    with_trace: bool,
) -> Result<meshplan_core::check::CheckReport> {
    let f = claims(path)?;
    let rep = meshplan_core::check::check(&f, cat, with_trace)?;
    if rep.claims.is_empty() {
        return Err(meshplan_core::Error::Invalid(format!(
            "{}: no claims found (a claims file has [[claim]] tables; see docs/check.md)",
            path.display()
        ))
        .into());
    }
    Ok(rep)
}

/// Read a data set of measured runs (`meshplan validate`), with the
/// `playbook_models.toml` beside it when there is one: (runs, skipped).
pub fn dataset(path: &Path) -> Result<(Vec<meshplan_core::fidelity::data::Run>, Vec<String>)> {
    let src = read_file(path)?;
    let side = path.with_file_name("playbook_models.toml");
    let models = if side.is_file() {
        Some(read_file(&side)?)
    } else {
        None
    };
    Ok(meshplan_core::fidelity::report::load_dataset(
        &src,
        &path.display().to_string(),
        models.as_deref(),
    )?)
}

/// Read the microbenchmark files of `meshplan calibrate` (GEMM and attention
/// sweeps, nccl-tests logs given as `FILE` or `KIND=FILE`, KIND one of
/// all_reduce, all_gather, reduce_scatter, alltoall, passed on as the
/// log's hint): their text, named by path, for
/// [`meshplan_core::fidelity::microbench::calibrate`].
pub fn microbench(
    gemm: &[PathBuf],
    attention: &[PathBuf],
    nccl: &[String],
) -> Result<meshplan_core::fidelity::microbench::MicrobenchInputs> {
    use meshplan_core::fidelity::microbench::{nccl::kind_of_name, MicrobenchInputs};
    let named =
        |p: &PathBuf| -> Result<(String, String)> { Ok((p.display().to_string(), read_file(p)?)) };
    let mut inputs = MicrobenchInputs {
        gemm: gemm.iter().map(named).collect::<Result<_>>()?,
        attention: attention.iter().map(named).collect::<Result<_>>()?,
        nccl: Vec::new(),
    };
    for arg in nccl {
        // `KIND=FILE` when the part before '=' names a collective; else a path
        let (kind, path) = match arg.split_once('=') {
            Some((k, p)) if kind_of_name(k).is_some() && !k.contains('/') => (kind_of_name(k), p),
            _ => (None, arg.as_str()),
        };
        let path = PathBuf::from(path);
        let (name, text) = named(&path)?;
        inputs.nccl.push((name, text, kind));
    }
    Ok(inputs)
}
