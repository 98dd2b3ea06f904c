/*!
Check mode: verify numeric claims (worked solutions, errata) against
meshplan's own reports.

A claims file (TOML, see docs/check.md) names scenarios and claims. Each
claim's `quantity` is a dotted path into the JSON object a command reports
(`model show`, `hw show`, `train`, `infer`: see docs/quantities.md), so every
key of every command is checkable. [`eval::evaluate`] maps a command and a
scenario to that object and its derivation; [`check`] compares, gives a
verdict (PASS / FAIL / CANNOT-CHECK) and, for a FAIL, the likely slip
([`slip`]) and the derivation of the right value.

```
use meshplan_core::check::{check, parse_claims, Verdict};
use meshplan_core::Catalog;
let src = r#"
[scenarios.ch7]
model = { name = "book-ch7-18b" }

[[claim]]
id = "q1"
scenario = "ch7"
quantity = "params_total"
claimed = "18 385 207 246"
"#;
let f = parse_claims(src, "claims.toml", &mut |_| Err("no files".into())).unwrap();
let r = check(&f, Catalog::builtin(), false).unwrap();
assert_eq!(r.claims[0].verdict, Verdict::Fail);
assert!(r.claims[0].hint.as_ref().unwrap().message.contains("digit typo"));
```
*/

pub mod claims;
pub mod eval;
pub mod keys;
pub mod render;
pub mod slip;
pub mod value;

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

pub use claims::{parse_claims, Claim, ClaimsFile, Resolver};
pub use eval::{evaluate, lookup, Command, EvalError};
pub use slip::{diagnose, Hint, SlipKind};
pub use value::{Claimed, Dim};

use crate::catalog::suggestions;
use crate::error::{Error, Result};
use crate::trace::Step;
use crate::Catalog;

/// Verdict on one claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Within tolerance (or the same verdict word).
    #[serde(rename = "PASS")]
    Pass,
    /// Outside tolerance (or a different verdict).
    #[serde(rename = "FAIL")]
    Fail,
    /// meshplan cannot compute the quantity here (command not available,
    /// value not reported for this scenario).
    #[serde(rename = "CANNOT-CHECK")]
    CannotCheck,
}

impl Verdict {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::CannotCheck => "CANNOT-CHECK",
        }
    }
}

/// The result of one claim.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    /// Claim id.
    pub id: String,
    /// Line of the claim in the file.
    pub line: usize,
    /// Scenario name.
    pub scenario: String,
    /// Command.
    pub command: Command,
    /// Quantity (dotted path).
    pub quantity: String,
    /// Unit of the quantity (SI base; "" for counts).
    pub unit: &'static str,
    /// Claimed, as written.
    pub claimed: String,
    /// Claimed value in base units (numeric claims).
    pub claimed_value: Option<f64>,
    /// meshplan's value (a number, bool or string), if computed.
    pub meshplan: Option<Value>,
    /// |claimed − meshplan| / |meshplan|.
    pub rel_error: Option<f64>,
    /// Relative tolerance used.
    pub rel_tol: Option<f64>,
    /// Absolute tolerance used.
    pub abs_tol: Option<f64>,
    /// Verdict.
    pub verdict: Verdict,
    /// Why CANNOT-CHECK, or a note on the comparison.
    pub reason: Option<String>,
    /// Likely slip (FAIL only).
    pub hint: Option<Hint>,
    /// Where the claim comes from.
    pub from: Option<String>,
    /// The claim's note.
    pub note: Option<String>,
    /// Derivation of meshplan's value (only when traced; the steps whose
    /// result is this quantity, else the command's whole trace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub derivation: Vec<Step>,
    /// The command's whole trace (inputs first), for `explain`.
    #[serde(skip)]
    pub trace: Vec<Step>,
}

/// Counts of verdicts.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// Claims.
    pub total: usize,
    /// PASS.
    pub pass: usize,
    /// FAIL.
    pub fail: usize,
    /// CANNOT-CHECK.
    pub cannot_check: usize,
}

/// The result of checking a file.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// File checked.
    pub file: String,
    /// Its title.
    pub title: Option<String>,
    /// Its source.
    pub source: Option<String>,
    /// One result per claim, in file order.
    pub claims: Vec<ClaimResult>,
    /// Verdict counts.
    pub summary: Summary,
}

impl CheckReport {
    /// Exit status: 1 when any claim fails (or, with `strict`, cannot be
    /// checked), else 0.
    pub fn exit_code(&self, strict: bool) -> u8 {
        u8::from(self.summary.fail > 0 || (strict && self.summary.cannot_check > 0))
    }
}

fn err_at(file: &str, line: usize, field: &str, message: String) -> Error {
    Error::Parse {
        file: file.into(),
        line,
        column: 1,
        field: Some(field.into()),
        message,
    }
}

/// An error in a claim's `claimed` value, at the claim's line.
fn claimed_err(file: &ClaimsFile, c: &Claim, message: String) -> Error {
    err_at(
        &file.file,
        c.line,
        &format!("claim `{}`.claimed", c.id),
        message,
    )
}

/// A claim's result before it is judged (CANNOT-CHECK, no values).
fn blank_result(c: &Claim) -> ClaimResult {
    ClaimResult {
        id: c.id.clone(),
        line: c.line,
        scenario: c.scenario.clone(),
        command: c.command,
        quantity: c.quantity.clone(),
        unit: c.dim.unit(),
        claimed: c.claimed_text.clone(),
        claimed_value: match &c.claimed {
            Claimed::Number { value, .. } => Some(*value),
            Claimed::Verdict { .. } => None,
        },
        meshplan: None,
        rel_error: None,
        rel_tol: None,
        abs_tol: None,
        verdict: Verdict::CannotCheck,
        reason: None,
        hint: None,
        from: c.from.clone(),
        note: c.note.clone(),
        derivation: Vec::new(),
        trace: Vec::new(),
    }
}

/// The claim's quantity in the report; `Err(reason)` when the report has no
/// such key (CANNOT-CHECK: an optional key this scenario does not produce,
/// or a key the command never reports, with the closest keys).
fn actual<'a>(c: &Claim, report: &'a Value) -> std::result::Result<&'a Value, String> {
    if let Some(v) = lookup(report, &c.quantity) {
        return Ok(v);
    }
    if eval::is_known_key(c.command, &c.quantity) {
        if let Some(why) = report.get("prediction_note").and_then(Value::as_str) {
            if c.quantity.starts_with("predicted.") {
                return Err(format!(
                    "`{}` reports no calibrated prediction for this scenario: {why}",
                    c.command.name()
                ));
            }
        }
        return Err(format!(
            "`{}` reports no `{}` for this scenario (it needs an input the scenario does not give, e.g. mfu or train_tokens)",
            c.command.name(),
            c.quantity
        ));
    }
    let paths: Vec<String> = eval::leaf_paths(report)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let sug = suggestions(&c.quantity, paths.iter().map(String::as_str));
    Err(format!(
        "line {}: `{}` reports no quantity '{}'{}",
        c.line,
        c.command.name(),
        c.quantity,
        if sug.is_empty() {
            String::new()
        } else {
            format!("; did you mean {}?", sug.join(", "))
        }
    ))
}

/// Judge a numeric claim: within its tolerance (or half a unit of its last
/// printed digit) of meshplan's value.
fn judge_number(
    file: &ClaimsFile,
    c: &Claim,
    a: &Value,
    report: &Value,
    r: &mut ClaimResult,
) -> Result<()> {
    let Claimed::Number {
        value,
        printed_rel_tol,
        digits,
        ..
    } = &c.claimed
    else {
        return Ok(());
    };
    let Some(a) = a.as_f64() else {
        return Err(claimed_err(
            file,
            c,
            format!(
                "claimed a number but `{}` is {a}; claim a word (e.g. \"fits\", \"comms-bound\")",
                c.quantity
            ),
        ));
    };
    let rel_err = match (a == 0.0, *value == 0.0) {
        (true, true) => 0.0,
        (true, false) => f64::INFINITY,
        _ => (value - a).abs() / a.abs(),
    };
    r.rel_error = Some(rel_err);
    let pass = if c.rel_tol.is_some() || c.abs_tol.is_some() {
        let rt = c.rel_tol.unwrap_or(0.0);
        let at = c.abs_tol.unwrap_or(0.0);
        r.rel_tol = c.rel_tol;
        r.abs_tol = c.abs_tol;
        (value - a).abs() <= (rt * a.abs()).max(at) * (1.0 + 1e-12) + 1e-300
    } else {
        // Printed precision: within half a unit of the last printed digit.
        let half = printed_rel_tol * value.abs();
        r.rel_tol = Some(if a == 0.0 {
            *printed_rel_tol
        } else {
            half / a.abs()
        });
        (value - a).abs() <= half * (1.0 + 1e-9)
    };
    r.verdict = if pass { Verdict::Pass } else { Verdict::Fail };
    if !pass {
        r.hint = diagnose(
            &c.quantity,
            *value,
            digits,
            a,
            r.rel_tol.unwrap_or(0.0),
            report,
        );
    }
    Ok(())
}

/// Judge a word claim ("fits", "comms-bound") against a verdict-like value.
fn judge_word(
    file: &ClaimsFile,
    c: &Claim,
    word: &str,
    a: &Value,
    r: &mut ClaimResult,
) -> Result<()> {
    let got = match a {
        Value::Bool(b) => b.to_string(),
        Value::String(s) => value::normalize_report_word(s),
        Value::Object(o) if o.get("ok").is_some_and(Value::is_boolean) => {
            o["ok"].as_bool().unwrap_or(false).to_string()
        }
        other => {
            return Err(claimed_err(
                file,
                c,
                format!(
                    "claimed the word '{}' but `{}` is {other}; claim a number",
                    c.claimed_text, c.quantity
                ),
            ))
        }
    };
    r.verdict = if got == word {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    Ok(())
}

type Evaluated = std::result::Result<(Value, Vec<Step>), EvalError>;

/// Judge one claim against its command's evaluated report.
fn judge(file: &ClaimsFile, c: &Claim, ev: Evaluated, with_trace: bool) -> Result<ClaimResult> {
    let mut r = blank_result(c);
    let (report, steps) = match ev {
        Ok(x) => x,
        Err(EvalError::Unavailable(m)) => {
            r.reason = Some(format!("`{}`: {m}", c.command.name()));
            return Ok(r);
        }
        Err(EvalError::Input(e)) => {
            let what = format!(
                "claim `{}` (scenario `{}`, command `{}`)",
                c.id,
                c.scenario,
                c.command.name()
            );
            return Err(err_at(&file.file, c.line, &what, e.to_string()));
        }
    };
    let a = match actual(c, &report) {
        Ok(a) => a,
        Err(reason) => {
            r.reason = Some(reason);
            return Ok(r);
        }
    };
    r.meshplan = Some(a.clone());
    if with_trace {
        r.derivation = relevant_steps(&steps, a.as_f64());
        r.trace = steps.clone();
    }
    match (&c.claimed, a) {
        (_, Value::Null) => {
            r.reason = Some(format!(
                "meshplan reports no value of `{}` for this scenario",
                c.quantity
            ));
        }
        (Claimed::Number { .. }, a) => judge_number(file, c, a, &report, &mut r)?,
        (Claimed::Verdict { word }, a) => judge_word(file, c, word, a, &mut r)?,
    }
    Ok(r)
}

/// Check every claim of a parsed file. Errors (exit 2) are claims that make
/// no sense for their scenario: a scenario without the model or chip the
/// command needs, a quantity the report does not have, a verdict word for a
/// numeric quantity.
pub fn check(file: &ClaimsFile, catalog: &Catalog, with_trace: bool) -> Result<CheckReport> {
    // the models the file's scenarios read from files join the catalog
    let with_files;
    let catalog = if file.models.is_empty() {
        catalog
    } else {
        let mut c = catalog.clone();
        for m in &file.models {
            c.add_model(m.clone());
        }
        with_files = c;
        &with_files
    };
    type Key = (String, Command, String);
    let mut cache: HashMap<Key, Evaluated> = HashMap::new();
    let mut out = Vec::new();
    for c in &file.claims {
        let key = (
            c.scenario.clone(),
            c.command,
            serde_json::to_string(&c.args).unwrap_or_default(),
        );
        if let Some(why) = &c.unknown {
            let mut r = blank_result(c);
            r.reason = Some(why.clone());
            out.push(r);
            continue;
        }
        let scen = &file.scenarios[&c.scenario];
        let ev = cache
            .entry(key)
            .or_insert_with(|| evaluate(c.command, scen, catalog, &c.args, with_trace))
            .clone();
        out.push(judge(file, c, ev, with_trace)?);
    }
    let mut s = Summary {
        total: out.len(),
        ..Summary::default()
    };
    for r in &out {
        match r.verdict {
            Verdict::Pass => s.pass += 1,
            Verdict::Fail => s.fail += 1,
            Verdict::CannotCheck => s.cannot_check += 1,
        }
    }
    Ok(CheckReport {
        file: file.file.clone(),
        title: file.title.clone(),
        source: file.source.clone(),
        claims: out,
        summary: s,
    })
}

/// The outermost steps whose result is `value` (the derivation of that
/// quantity); the whole trace when none matches.
pub fn relevant_steps(steps: &[Step], value: Option<f64>) -> Vec<Step> {
    fn find<'a>(s: &'a Step, v: f64, out: &mut Vec<&'a Step>) {
        if s.value.is_finite() && (s.value == v || (v != 0.0 && ((s.value - v) / v).abs() < 1e-12))
        {
            out.push(s);
            return;
        }
        for c in &s.children {
            find(c, v, out);
        }
    }
    if let Some(v) = value {
        let mut out = Vec::new();
        for s in steps {
            find(s, v, &mut out);
        }
        if let Some(first) = out.first() {
            return vec![(*first).clone()];
        }
    }
    steps.to_vec()
}
