//! Worked solutions for `meshplan explain` and `check --explain`: inputs,
//! each step's formula, substituted values and result, as text, Markdown
//! (LaTeX math inline) or a LaTeX document body.

use super::{CheckReport, ClaimResult, Verdict};
use crate::trace::{fmt_value, render_markdown, render_text, to_latex, Step};

/// Output format of reports and derivations (the CLI's `--explain-format`:
/// with the `clap` feature it is a command-line value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Aligned plain text.
    #[default]
    Text,
    /// Markdown (tables; LaTeX math in derivations).
    Markdown,
    /// LaTeX (`meshplan explain` and `check --explain` only; Markdown elsewhere).
    Latex,
}

/// A LaTeX rendering of derivation steps: one `align*` row per step with
/// formula, substituted values and result.
pub fn render_latex(steps: &[Step]) -> String {
    let mut out = String::from("\\begin{align*}\n");
    fn row(s: &Step, depth: usize, out: &mut String) {
        let indent = "\\quad ".repeat(depth);
        let subst = if s.bindings.is_empty() {
            String::new()
        } else {
            let b: Vec<String> = s
                .bindings
                .iter()
                .map(|b| format!("{} = {}", to_latex(&b.symbol), tex_value(b.value, &b.unit)))
                .collect();
            format!(" \\quad ({})", b.join(",\\ "))
        };
        if s.formula == "inputs" {
            out.push_str(&format!(
                "{indent}\\text{{{}}} &: {} \\\\\n",
                tex_text(&s.label),
                subst.trim_start_matches(" \\quad ")
            ));
        } else {
            out.push_str(&format!(
                "{indent}\\text{{{}}} &= {} = {}{} \\\\\n",
                tex_text(&s.label),
                to_latex(&s.formula),
                tex_value(s.value, &s.unit),
                subst
            ));
        }
        for c in &s.children {
            row(c, depth + 1, out);
        }
    }
    for s in steps {
        row(s, 0, &mut out);
    }
    out.push_str("\\end{align*}\n");
    out
}

fn tex_text(s: &str) -> String {
    s.replace('\\', "\\textbackslash{}")
        .replace('_', "\\_")
        .replace('%', "\\%")
        .replace('&', "\\&")
        .replace('#', "\\#")
}

fn tex_value(v: f64, unit: &str) -> String {
    let s = fmt_value(v, unit);
    format!("\\text{{{}}}", tex_text(&s))
}

fn steps(steps: &[Step], f: Format) -> String {
    match f {
        Format::Text => render_text(steps),
        Format::Markdown => render_markdown(steps),
        Format::Latex => render_latex(steps),
    }
}

fn meshplan_value(r: &ClaimResult) -> String {
    match &r.meshplan {
        None => "—".into(),
        Some(serde_json::Value::Number(n)) => fmt_value(n.as_f64().unwrap_or(f64::NAN), r.unit),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// One line summarising a claim's comparison.
pub fn summary_line(r: &ClaimResult) -> String {
    let mut s = format!(
        "{} {}: claimed {} — meshplan {} ({})",
        r.verdict.as_str(),
        r.quantity,
        r.claimed,
        meshplan_value(r),
        match r.rel_error {
            Some(e) => format!("rel. error {}", fmt_rel(e)),
            None => r.reason.clone().unwrap_or_else(|| "verdict".into()),
        }
    );
    if let Some(h) = &r.hint {
        s.push_str(&format!("; hint: {}", h.message));
    }
    s
}

/// Relative error as a percentage or in scientific notation.
pub fn fmt_rel(e: f64) -> String {
    if !e.is_finite() {
        "∞".into()
    } else if e == 0.0 {
        "0".into()
    } else if e >= 1e-3 {
        format!("{:.2}%", e * 100.0)
    } else {
        format!("{e:.1e}")
    }
}

/// The derivation of the FAIL claims (`check --explain`).
pub fn explain_failures(rep: &CheckReport, f: Format) -> String {
    let mut out = String::new();
    for r in rep.claims.iter().filter(|r| r.verdict == Verdict::Fail) {
        out.push_str(&header(&format!("{} (line {})", r.id, r.line), f, 2));
        out.push_str(&para(&summary_line(r), f));
        if let Some(n) = &r.note {
            out.push_str(&para(&format!("Note: {n}"), f));
        }
        out.push_str(&steps(&r.derivation, f));
        out.push('\n');
    }
    out
}

fn header(t: &str, f: Format, level: usize) -> String {
    match f {
        Format::Text => format!(
            "{t}\n{}\n",
            if level == 1 { "=" } else { "-" }.repeat(t.chars().count())
        ),
        Format::Markdown => format!("{} {t}\n\n", "#".repeat(level)),
        Format::Latex => format!(
            "\\{}section*{{{}}}\n",
            if level == 1 { "" } else { "sub" },
            tex_text(t)
        ),
    }
}

fn para(t: &str, f: Format) -> String {
    match f {
        Format::Latex => format!("{}\n\n", tex_text(t)),
        _ => format!("{t}\n\n"),
    }
}

/// The whole worked solution of every claim (`meshplan explain`): per
/// claim, the inputs of its scenario, every step of the command that
/// computes the quantity (the derivation of the quantity first), and the
/// comparison.
pub fn explain_all(rep: &CheckReport, f: Format) -> String {
    let mut out = String::new();
    out.push_str(&header(rep.title.as_deref().unwrap_or(&rep.file), f, 1));
    if let Some(s) = &rep.source {
        out.push_str(&para(&format!("Source: {s}"), f));
    }
    for r in &rep.claims {
        out.push_str(&header(
            &format!(
                "{} — {} (scenario {}, `{}`)",
                r.id,
                r.quantity,
                r.scenario,
                r.command.name()
            ),
            f,
            2,
        ));
        if let Some(fr) = &r.from {
            out.push_str(&para(&format!("From: {fr}"), f));
        }
        out.push_str(&para(&summary_line(r), f));
        if let Some(n) = &r.note {
            out.push_str(&para(&format!("Note: {n}"), f));
        }
        if r.trace.is_empty() {
            continue;
        }
        let inputs: Vec<Step> = r
            .trace
            .iter()
            .filter(|s| s.formula == "inputs")
            .cloned()
            .collect();
        if !inputs.is_empty() {
            out.push_str(&para("Inputs:", f));
            out.push_str(&steps(&inputs, f));
            out.push('\n');
        }
        out.push_str(&para(&format!("Derivation of {}:", r.quantity), f));
        out.push_str(&steps(&r.derivation, f));
        out.push('\n');
    }
    out
}

impl crate::view::Render for CheckReport {
    fn doc(&self) -> crate::view::Doc {
        use crate::view::{Doc, Table};
        let mut t = Table::new(
            &[
                "id",
                "quantity",
                "claimed",
                "meshplan",
                "rel. error",
                "verdict",
                "hint",
            ],
            &["meshplan", "rel. error"],
        );
        for r in &self.claims {
            let hint = match (&r.hint, &r.reason) {
                (Some(h), _) => h.message.clone(),
                (None, Some(reason)) => reason.clone(),
                _ => String::new(),
            };
            t.row(vec![
                r.id.clone(),
                r.quantity.clone(),
                r.claimed.clone(),
                meshplan_value(r),
                r.rel_error.map(fmt_rel).unwrap_or_else(|| "—".into()),
                r.verdict.as_str().into(),
                hint,
            ]);
        }
        let mut d = Doc::new();
        if let Some(title) = &self.title {
            d.title(title.clone());
        }
        d.table(t);
        // each claim's note (a known book slip, a convention): a FAIL the
        // note explains must not read as a meshplan bug
        let notes: Vec<String> = self
            .claims
            .iter()
            .filter_map(|r| {
                r.note
                    .as_ref()
                    .map(|n| format!("{} ({}): {}", r.id, r.verdict.as_str(), n.trim()))
            })
            .collect();
        if !notes.is_empty() {
            d.list("notes", notes);
        }
        let s = &self.summary;
        d.line(format!(
            "{} claims: {} PASS, {} FAIL, {} CANNOT-CHECK",
            s.total, s.pass, s.fail, s.cannot_check
        ));
        d
    }
}
