//! Helpers shared by the subcommands: catalog loading, file reading with
//! context, output of errors.

#![allow(clippy::print_stderr)]

/// Print an error chain to stderr as `error: …` lines.
pub fn print_error(e: &anyhow::Error) {
    eprintln!("error: {e}");
    for c in e.chain().skip(1) {
        eprintln!("  caused by: {c}");
    }
}
