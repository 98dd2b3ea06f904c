//! Printing a report: JSON (the report's own fields, plus `derivation`
//! with `--explain`), or its document (`meshplan_core::view`) as text or
//! Markdown followed by the derivation.

use std::io::Write;

use anyhow::Result;
pub use meshplan_core::check::render::Format;
use meshplan_core::trace::{render_markdown, render_text, Step};
use meshplan_core::view::{self, Render};
use serde::Serialize;

/// Output options every report command takes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Print one JSON object in SI base units (keys in docs/quantities.md);
    /// with --explain the derivation is under "derivation".
    #[arg(long)]
    pub json: bool,
    /// Print the derivation in the book's symbols (`check`: of every FAIL).
    #[arg(long)]
    pub explain: bool,
    /// Format of the human output and the derivation.
    #[arg(long, value_enum, default_value_t = Format::Text, value_name = "FORMAT")]
    pub explain_format: Format,
}

/// Render a document; text tables wrap to the terminal (never when piped).
pub fn doc_text(d: &view::Doc, f: Format) -> String {
    let t = console::Term::stdout();
    match f {
        Format::Text => view::render_text_width(d, t.is_term().then(|| usize::from(t.size().1))),
        Format::Markdown | Format::Latex => view::render_markdown(d),
    }
}

/// Render derivation steps.
pub fn steps_text(steps: &[Step], f: Format) -> String {
    match f {
        Format::Text => render_text(steps),
        Format::Markdown | Format::Latex => render_markdown(steps),
    }
}

/// Print one JSON value (pretty) to stdout.
pub fn print_json<T: Serialize + ?Sized>(v: &T) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Print a report the way `o` asks.
pub fn emit<R: Serialize + Render>(r: &R, steps: Option<&[Step]>, o: &OutputArgs) -> Result<()> {
    if o.json {
        let mut v = serde_json::to_value(r)?;
        if let (Some(s), Some(obj)) = (steps, v.as_object_mut()) {
            obj.insert("derivation".into(), serde_json::to_value(s)?);
        }
        return print_json(&v);
    }
    out!("{}", doc_text(&r.doc(), o.explain_format));
    if let Some(s) = steps {
        outln!("\nDerivation:");
        out!("{}", steps_text(s, o.explain_format));
    }
    Ok(())
}

/// A progress bar (or, with `{spinner}` in the template, a spinner) on
/// stderr: only on a terminal and when `enabled` (never with --json),
/// drawn at most ten times a second, so a quick run shows nothing.
pub fn progress(enabled: bool, template: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    (enabled && std::io::stderr().is_terminal()).then(|| {
        let target = indicatif::ProgressDrawTarget::stderr_with_hz(10);
        let b = indicatif::ProgressBar::with_draw_target(None, target);
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            b.set_style(style);
        }
        if template.contains("{spinner}") {
            b.enable_steady_tick(std::time::Duration::from_millis(100));
        }
        b
    })
}

/// Progress of a long search on stderr: a bar on a terminal; on a file or
/// pipe (a CI log, `2> log`), a plain line once the work has run for
/// [`LINES_AFTER`] and then at most every [`LINES_EVERY`]; never with
/// `--json` (whoever reads the JSON wants stdout alone and stderr quiet),
/// never on stdout.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    lines: Option<Lines>,
}

/// A quick run prints no progress line.
pub const LINES_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// The least time between two progress lines.
pub const LINES_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

struct Lines {
    what: &'static str,
    t0: std::time::Instant,
    /// When the next line may be printed (time since `t0`); `None` until
    /// one has been.
    next: std::sync::Mutex<(std::time::Duration, bool)>,
}

impl Progress {
    /// `template` draws the terminal bar; `what` names the counted units
    /// in the plain lines ("degree tuples").
    pub fn new(enabled: bool, template: &str, what: &'static str) -> Progress {
        use std::io::IsTerminal;
        let bar = progress(enabled, template);
        let lines = (enabled && bar.is_none() && !std::io::stderr().is_terminal()).then(|| Lines {
            what,
            t0: std::time::Instant::now(),
            next: std::sync::Mutex::new((LINES_AFTER, false)),
        });
        Progress { bar, lines }
    }

    /// `done` of `total` units (called from worker threads).
    pub fn tick(&self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.set_position(done);
        }
        if let Some(l) = &self.lines {
            let now = l.t0.elapsed();
            let Ok(mut next) = l.next.lock() else { return };
            if now >= next.0 {
                *next = (now + LINES_EVERY, true);
                // best effort: a closed stderr does not stop the search
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "meshplan: searching, {done}/{total} {} ({:.0} s)",
                    l.what,
                    now.as_secs_f64()
                );
            }
        }
    }

    /// The work is done: the bar is cleared; after progress lines, one
    /// more says so.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if let Some(l) = &self.lines {
            if l.next.lock().is_ok_and(|n| n.1) {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "meshplan: search done ({:.1} s)",
                    l.t0.elapsed().as_secs_f64()
                );
            }
        }
    }
}
