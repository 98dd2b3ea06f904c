/*!
Derivations: the formula, substituted values and result behind each number.

Formula functions take `tr: &mut impl Tracer` and, after computing a value,
record it with one call whose argument is a *closure*:

```
use meshplan_core::trace::{Recorder, Step, Tracer, NoTrace};
fn mlp_params<T: Tracer>(d: u64, f: u64, tr: &mut T) -> u64 {
    let p = 3 * d * f;
    tr.record(|| Step::new("params.mlp", "MLP parameters per layer", "3·D·F")
        .bind("D", d as f64, "").bind("F", f as f64, "").result(p as f64, "params"));
    p
}
// Off: the closure is never called; with `NoTrace` the call compiles to nothing.
assert_eq!(mlp_params(4, 8, &mut NoTrace), 96);
// On: the step is kept.
let mut r = Recorder::default();
mlp_params(4, 8, &mut r);
assert_eq!(r.steps()[0].formula, "3·D·F");
```

Groups nest with [`Tracer::scope`]. The planner uses [`NoTrace`], so it pays
nothing for explanations.
*/

use serde::Serialize;

use crate::units::{fmt_si, sig4};

/// One bound symbol of a formula: `D = 5120`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Binding {
    /// The book's symbol (`D`, `W_ici`, …).
    pub symbol: String,
    /// Value in the unit below (SI base).
    pub value: f64,
    /// Unit ("" for dimensionless counts).
    pub unit: String,
}

/// One derivation step, possibly with sub-steps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    /// Stable dotted identifier, e.g. `params.attention`.
    pub id: String,
    /// Human label.
    pub label: String,
    /// Formula in the book's symbols.
    pub formula: String,
    /// Substituted values.
    pub bindings: Vec<Binding>,
    /// Result value (SI base unit).
    pub value: f64,
    /// Result unit.
    pub unit: String,
    /// Where the formula comes from (book chapter, paper).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Nested steps this one used.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Step>,
}

impl Step {
    /// Start a step.
    pub fn new(id: &str, label: &str, formula: &str) -> Self {
        Step {
            id: id.into(),
            label: label.into(),
            formula: formula.into(),
            bindings: Vec::new(),
            value: f64::NAN,
            unit: String::new(),
            source: None,
            children: Vec::new(),
        }
    }
    /// Bind a symbol to a value.
    pub fn bind(mut self, symbol: &str, value: f64, unit: &str) -> Self {
        self.bindings.push(Binding {
            symbol: symbol.into(),
            value,
            unit: unit.into(),
        });
        self
    }
    /// Set the result.
    pub fn result(mut self, value: f64, unit: &str) -> Self {
        self.value = value;
        self.unit = unit.into();
        self
    }
    /// Cite a source.
    pub fn source(mut self, s: &str) -> Self {
        self.source = Some(s.into());
        self
    }
    /// Find a step by id in this subtree.
    pub fn find(&self, id: &str) -> Option<&Step> {
        if self.id == id {
            return Some(self);
        }
        self.children.iter().find_map(|c| c.find(id))
    }
}

/// Receiver of derivation steps.
pub trait Tracer {
    /// Whether steps are kept (lets callers skip building expensive labels).
    const ENABLED: bool;
    /// Record a step; `make` is only called when tracing is on.
    fn record(&mut self, make: impl FnOnce() -> Step);
    /// Run `f` with its steps nested under a group step; the group's result is
    /// filled by `finish` from the value `f` returns.
    fn scope<R>(
        &mut self,
        make: impl FnOnce() -> Step,
        f: impl FnOnce(&mut Self) -> R,
        finish: impl FnOnce(&R, Step) -> Step,
    ) -> R;
}

/// Tracing off: every method is empty and inlined away.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTrace;

impl Tracer for NoTrace {
    const ENABLED: bool = false;
    #[inline(always)]
    fn record(&mut self, _make: impl FnOnce() -> Step) {}
    #[inline(always)]
    fn scope<R>(
        &mut self,
        _make: impl FnOnce() -> Step,
        f: impl FnOnce(&mut Self) -> R,
        _finish: impl FnOnce(&R, Step) -> Step,
    ) -> R {
        f(self)
    }
}

/// Tracing on: keeps the tree of steps.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    stack: Vec<Vec<Step>>,
    done: Vec<Step>,
}

impl Recorder {
    /// Top-level steps recorded so far.
    pub fn steps(&self) -> &[Step] {
        &self.done
    }
    /// Take the recorded steps.
    pub fn into_steps(self) -> Vec<Step> {
        self.done
    }
    /// Find a step anywhere by id.
    pub fn find(&self, id: &str) -> Option<&Step> {
        self.done.iter().find_map(|s| s.find(id))
    }
    fn push(&mut self, s: Step) {
        match self.stack.last_mut() {
            Some(level) => level.push(s),
            None => self.done.push(s),
        }
    }
}

impl Tracer for Recorder {
    const ENABLED: bool = true;
    fn record(&mut self, make: impl FnOnce() -> Step) {
        let s = make();
        self.push(s);
    }
    fn scope<R>(
        &mut self,
        make: impl FnOnce() -> Step,
        f: impl FnOnce(&mut Self) -> R,
        finish: impl FnOnce(&R, Step) -> Step,
    ) -> R {
        let head = make();
        self.stack.push(Vec::new());
        let r = f(self);
        let children = self.stack.pop().unwrap_or_default();
        let mut s = finish(&r, head);
        s.children = children;
        self.push(s);
        r
    }
}

// ---------------------------------------------------------------- rendering

/// Format a value with its unit for humans: SI prefix for physical units,
/// thousands separators for exact counts.
pub fn fmt_value(v: f64, unit: &str) -> String {
    // no finite value (an intensity with no bytes, a batch that never
    // turns compute-bound): words, never "inf" or "NaN"
    if v.is_nan() {
        return "undefined".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "unbounded"
        } else {
            "unbounded below"
        }
        .into();
    }
    match unit {
        "" | "params" | "tokens" | "chips" | "sequences" | "ways" => {
            if v.fract() == 0.0 && v.abs() < 1e18 {
                let s = crate::units::fmt_int(v.abs() as u64);
                let s = if v < 0.0 { format!("-{s}") } else { s };
                if unit.is_empty() {
                    s
                } else {
                    format!("{s} {unit}")
                }
            } else if unit.is_empty() {
                sig4(v)
            } else {
                format!("{} {unit}", sig4(v))
            }
        }
        "B" | "FLOPs" | "s" | "FLOP/s" | "B/s" => fmt_si(v, unit),
        u => format!("{} {u}", sig4(v)),
    }
}

fn fmt_binding(b: &Binding) -> String {
    format!("{} = {}", b.symbol, fmt_value(b.value, &b.unit))
}

/// Plain-text rendering, indented by depth.
pub fn render_text(steps: &[Step]) -> String {
    render(steps, &text_step)
}

/// Markdown rendering: a nested list, formulas in LaTeX math.
pub fn render_markdown(steps: &[Step]) -> String {
    render(steps, &md_step)
}

/// The steps depth first, each written by `step` (given its indent); one
/// walk for every format.
fn render(steps: &[Step], step: &dyn Fn(&Step, &str, &mut String)) -> String {
    fn walk(s: &Step, depth: usize, step: &dyn Fn(&Step, &str, &mut String), out: &mut String) {
        step(s, &"  ".repeat(depth), out);
        for c in &s.children {
            walk(c, depth + 1, step, out);
        }
    }
    let mut out = String::new();
    for s in steps {
        walk(s, 0, step, &mut out);
    }
    out
}

fn text_step(s: &Step, pad: &str, out: &mut String) {
    if s.formula == "inputs" {
        // a list of inputs has no value of its own (it holds NaN)
        out.push_str(&format!("{pad}{}: inputs\n", s.label));
    } else {
        out.push_str(&format!(
            "{pad}{}: {} = {}\n",
            s.label,
            s.formula,
            fmt_value(s.value, &s.unit)
        ));
    }
    if !s.bindings.is_empty() {
        let b: Vec<String> = s.bindings.iter().map(fmt_binding).collect();
        out.push_str(&format!("{pad}    with {}\n", b.join(", ")));
    }
    if let Some(src) = &s.source {
        out.push_str(&format!("{pad}    [{src}]\n"));
    }
}

fn md_step(s: &Step, pad: &str, out: &mut String) {
    if s.formula == "inputs" {
        out.push_str(&format!("{pad}- **{}** (inputs)", s.label));
    } else {
        out.push_str(&format!(
            "{pad}- **{}**: ${}$ = **{}**",
            s.label,
            to_latex(&s.formula),
            fmt_value(s.value, &s.unit)
        ));
    }
    if !s.bindings.is_empty() {
        let b: Vec<String> = s
            .bindings
            .iter()
            .map(|b| {
                format!(
                    "${}$ = {}",
                    to_latex(&b.symbol),
                    fmt_value(b.value, &b.unit)
                )
            })
            .collect();
        out.push_str(&format!(" (with {})", b.join(", ")));
    }
    if let Some(src) = &s.source {
        out.push_str(&format!(" — _{src}_"));
    }
    out.push('\n');
}

/// Turn a book-style formula ("2·K·H·L·bytes", "W_ici", "⌊x⌋", "√(N/8)") into
/// LaTeX math.
pub fn to_latex(f: &str) -> String {
    let mut out = String::with_capacity(f.len() + 16);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.is_empty() {
            return;
        }
        if let Some((base, sub)) = word.split_once('_') {
            let base = if base.chars().count() > 1 {
                format!("\\mathrm{{{base}}}")
            } else {
                base.to_string()
            };
            // an underscore inside \mathrm is a literal one ("per_layer"),
            // not a second subscript
            let sub = sub.replace('_', "\\_");
            out.push_str(&format!("{base}_{{\\mathrm{{{sub}}}}}"));
        } else if word.chars().count() > 1 && word.chars().all(|c| c.is_alphabetic()) {
            out.push_str(&format!("\\mathrm{{{word}}}"));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in f.chars() {
        if c.is_alphanumeric() || c == '_' || c == '.' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut out);
        match c {
            '·' | '×' => out.push_str(" \\cdot "),
            '√' => out.push_str("\\sqrt"),
            '≤' => out.push_str(" \\le "),
            '≥' => out.push_str(" \\ge "),
            '⌊' => out.push_str("\\lfloor "),
            '⌋' => out.push_str(" \\rfloor"),
            '⌈' => out.push_str("\\lceil "),
            '⌉' => out.push_str(" \\rceil"),
            '²' => out.push_str("^2"),
            'α' => out.push_str("\\alpha "),
            'β' => out.push_str("\\beta "),
            'Σ' => out.push_str("\\sum "),
            '−' => out.push('-'),
            '%' => out.push_str("\\%"),
            c => out.push(c),
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traced<T: Tracer>(tr: &mut T) -> u64 {
        tr.scope(
            || Step::new("total", "Total", "a + b"),
            |tr| {
                let a = 2;
                tr.record(|| Step::new("a", "A", "2").result(a as f64, "params"));
                let b = 3;
                tr.record(|| Step::new("b", "B", "3").result(b as f64, "params"));
                a + b
            },
            |r, s| s.result(*r as f64, "params"),
        )
    }

    #[test]
    fn notrace_never_builds_steps() {
        let mut called = false;
        NoTrace.record(|| {
            called = true;
            Step::new("x", "x", "x")
        });
        assert!(!called);
        assert_eq!(traced(&mut NoTrace), 5);
    }

    #[test]
    fn recorder_nests() {
        let mut r = Recorder::default();
        assert_eq!(traced(&mut r), 5);
        let top = &r.steps()[0];
        assert_eq!(top.value, 5.0);
        assert_eq!(top.children.len(), 2);
        assert_eq!(r.find("b").unwrap().value, 3.0);
        let t = render_text(r.steps());
        assert!(t.contains("Total: a + b = 5 params"), "{t}");
        let m = render_markdown(r.steps());
        assert!(m.contains("- **Total**"), "{m}");
    }

    #[test]
    fn latex() {
        assert_eq!(to_latex("2·K·H"), "2 \\cdot K \\cdot H");
        assert_eq!(to_latex("W_ici"), "W_{\\mathrm{ici}}");
        // the second underscore is literal, not a nested subscript
        assert_eq!(
            to_latex("norms_per_layer"),
            "\\mathrm{norms}_{\\mathrm{per\\_layer}}"
        );
    }

    #[test]
    fn no_finite_value_is_said_in_words() {
        assert_eq!(fmt_value(f64::INFINITY, "FLOPs/B"), "unbounded");
        assert_eq!(fmt_value(f64::NAN, ""), "undefined");
        assert_eq!(fmt_value(2.0, "tokens"), "2 tokens");
    }
}
