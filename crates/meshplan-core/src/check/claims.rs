//! The claims file format (TOML) and its parser. Every error names the file,
//! the line and the field. See docs/check.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::eval::{dim_of, is_known_key, known_keys, Args, Command};
use super::value::{parse_claimed, Claimed, Dim};
use crate::catalog::suggestions;
use crate::error::{from_toml, Error, Result};
use crate::scenario::{
    HardwareSection, InferenceSection, ModelSection, ParallelismSection, Scenario, TrainingSection,
};

/// `[scenarios.NAME]`: a scenario inline, or `file = "path.toml"`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioDecl {
    file: Option<String>,
    description: Option<String>,
    source: Option<String>,
    model: Option<ModelSection>,
    hardware: Option<HardwareSection>,
    training: Option<TrainingSection>,
    inference: Option<InferenceSection>,
    parallelism: Option<ParallelismSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClaim {
    id: String,
    scenario: String,
    command: Option<String>,
    quantity: String,
    claimed: toml::Value,
    rel_tol: Option<f64>,
    abs_tol: Option<f64>,
    #[serde(default)]
    args: toml::Table,
    from: Option<String>,
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    title: Option<String>,
    source: Option<String>,
    description: Option<String>,
    #[serde(default)]
    scenarios: BTreeMap<String, ScenarioDecl>,
    #[serde(default, rename = "claim")]
    claims: Vec<RawClaim>,
}

/// One claim, validated.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    /// Identifier (unique in the file).
    pub id: String,
    /// Line of its `[[claim]]` header.
    pub line: usize,
    /// Scenario name (key of [`ClaimsFile::scenarios`]).
    pub scenario: String,
    /// The command whose report holds the quantity.
    pub command: Command,
    /// Dotted path into that report.
    pub quantity: String,
    /// The claimed value as written.
    pub claimed_text: String,
    /// The claimed value parsed.
    pub claimed: Claimed,
    /// Dimension of the quantity.
    pub dim: Dim,
    /// Explicit relative tolerance.
    pub rel_tol: Option<f64>,
    /// Explicit absolute tolerance (base units).
    pub abs_tol: Option<f64>,
    /// Options for the command.
    pub args: Args,
    /// Where the claim comes from.
    pub from: Option<String>,
    /// Free-text note.
    pub note: Option<String>,
    /// Why the quantity is not one the command reports (the claim is then
    /// CANNOT-CHECK and the rest of the file is still judged).
    pub unknown: Option<String>,
}

/// A parsed claims file.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimsFile {
    /// File name used in messages.
    pub file: String,
    /// Title.
    pub title: Option<String>,
    /// Source of the claims.
    pub source: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// Scenarios by name (file scenarios keyed by their path).
    pub scenarios: BTreeMap<String, Scenario>,
    /// Claims in file order.
    pub claims: Vec<Claim>,
}

/// Reads a scenario file named in a claims file: given the path as written
/// (relative to the claims file), returns (display name, text) or a message.
pub type Resolver<'a> = dyn FnMut(&str) -> std::result::Result<(String, String), String> + 'a;

/// Line ranges of the `[[claim]]` blocks, and header lines of scenarios.
struct Lines<'a> {
    lines: Vec<&'a str>,
    claim_starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(src: &'a str) -> Self {
        let lines: Vec<&str> = src.lines().collect();
        let claim_starts = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.trim().replace(' ', "") == "[[claim]]")
            .map(|(i, _)| i)
            .collect();
        Lines {
            lines,
            claim_starts,
        }
    }
    /// 1-based line of claim `i`'s header.
    fn claim(&self, i: usize) -> usize {
        self.claim_starts.get(i).map(|l| l + 1).unwrap_or(1)
    }
    /// 1-based line of `field = …` inside claim `i` (its header when absent).
    fn field(&self, i: usize, field: &str) -> usize {
        let Some(&start) = self.claim_starts.get(i) else {
            return 1;
        };
        for (j, l) in self.lines.iter().enumerate().skip(start + 1) {
            let t = l.trim_start();
            if t.starts_with('[') && !t.starts_with("[claim.") {
                break;
            }
            if let Some(rest) = t.strip_prefix(field) {
                if rest.trim_start().starts_with('=') {
                    return j + 1;
                }
            }
        }
        start + 1
    }
    /// 1-based line of `[scenarios.NAME]`.
    fn scenario(&self, name: &str) -> usize {
        let want = [
            format!("[scenarios.{name}]"),
            format!("[scenarios.\"{name}\"]"),
        ];
        self.lines
            .iter()
            .position(|l| {
                let t = l.trim().replace(' ', "");
                want.iter()
                    .any(|w| t == *w || t.starts_with(&format!("{}.", &w[..w.len() - 1])))
            })
            .map(|i| i + 1)
            .unwrap_or(1)
    }
}

fn perr(file: &str, line: usize, field: Option<String>, message: String) -> Error {
    Error::Parse {
        file: file.to_string(),
        line,
        column: 1,
        field,
        message,
    }
}

fn toml_to_json(v: &toml::Value) -> serde_json::Value {
    match v {
        toml::Value::String(s) => serde_json::Value::String(s.clone()),
        toml::Value::Integer(i) => serde_json::Value::from(*i),
        toml::Value::Float(f) => serde_json::Value::from(*f),
        toml::Value::Boolean(b) => serde_json::Value::Bool(*b),
        toml::Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        toml::Value::Array(a) => serde_json::Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

/// Parse a claims file. `resolve` reads scenario files it names.
pub fn parse_claims(src: &str, file: &str, resolve: &mut Resolver<'_>) -> Result<ClaimsFile> {
    let raw: RawFile = from_toml(src, file)?;
    let lines = Lines::new(src);
    let mut scenarios = BTreeMap::new();
    let mut load = |path: &str, line: usize, field: &str| -> Result<Scenario> {
        let (name, text) = resolve(path).map_err(|m| {
            perr(
                file,
                line,
                Some(field.into()),
                format!("cannot read scenario file '{path}': {m}"),
            )
        })?;
        Scenario::parse(&text, &name)
    };
    for (name, d) in raw.scenarios {
        let line = lines.scenario(&name);
        let inline = d.model.is_some()
            || d.hardware.is_some()
            || d.training.is_some()
            || d.inference.is_some()
            || d.parallelism.is_some();
        let s = match d.file {
            Some(_) if inline => return Err(perr(
                file,
                line,
                Some(format!("scenarios.{name}")),
                "give either `file = \"…\"` or inline sections ([model], [hardware], …), not both"
                    .into(),
            )),
            Some(f) => load(&f, line, &format!("scenarios.{name}.file"))?,
            None => Scenario {
                description: d.description,
                source: d.source,
                model: d.model.unwrap_or_default(),
                hardware: d.hardware.unwrap_or_default(),
                training: d.training.unwrap_or_default(),
                inference: d.inference.unwrap_or_default(),
                parallelism: d.parallelism.unwrap_or_default(),
            },
        };
        scenarios.insert(name, s);
    }
    let mut claims = Vec::new();
    let mut seen = BTreeMap::new();
    for (i, c) in raw.claims.into_iter().enumerate() {
        let at = |f: &str| lines.field(i, f);
        let fld = |f: &str| Some(format!("claim[{i}].{f}"));
        if let Some(prev) = seen.insert(c.id.clone(), lines.claim(i)) {
            return Err(perr(
                file,
                at("id"),
                fld("id"),
                format!("duplicate claim id '{}' (first at line {prev})", c.id),
            ));
        }
        // Scenario: a name, or a path to a scenario file.
        if !scenarios.contains_key(&c.scenario) {
            if c.scenario.ends_with(".toml") {
                let s = load(&c.scenario, at("scenario"), &format!("claim[{i}].scenario"))?;
                scenarios.insert(c.scenario.clone(), s);
            } else {
                let names: Vec<&str> = scenarios.keys().map(String::as_str).collect();
                let sug = suggestions(&c.scenario, names.iter().copied());
                return Err(perr(
                    file,
                    at("scenario"),
                    fld("scenario"),
                    format!(
                        "unknown scenario '{}'{}; defined: {}",
                        c.scenario,
                        if sug.is_empty() {
                            String::new()
                        } else {
                            format!(" (did you mean '{}'?)", sug[0])
                        },
                        if names.is_empty() {
                            "none (add [scenarios.NAME] or scenario = \"file.toml\")".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            }
        }
        // Command: explicit, or the implemented command that reports the quantity.
        let command = match &c.command {
            Some(s) => Command::parse(s).ok_or_else(|| {
                perr(
                    file,
                    at("command"),
                    fld("command"),
                    format!("unknown command '{s}'; expected one of model, hw, train, infer, collective, roofline, shard, mfu"),
                )
            })?,
            None => [Command::Model, Command::Hw]
                .into_iter()
                .find(|k| known_keys(*k).contains(&c.quantity.as_str()))
                .unwrap_or(Command::Model),
        };
        let unknown = if is_known_key(command, &c.quantity) {
            None
        } else {
            let explicit = c.command.is_some().then_some(command);
            Some(unknown_quantity(file, at("quantity"), i, &c.quantity, explicit).to_string())
        };
        let dim = if unknown.is_some() {
            super::value::dim_of_key(&c.quantity)
        } else {
            dim_of(command, &c.quantity)
        };
        let claimed_text = match &c.claimed {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Float(x) => x.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            _ => {
                return Err(perr(
                    file,
                    at("claimed"),
                    fld("claimed"),
                    "claimed must be a string, a number or a boolean".into(),
                ))
            }
        };
        let claimed = match parse_claimed(&claimed_text, dim) {
            Ok(x) => x,
            // an unknown quantity's dimension is a guess: keep the words
            Err(_) if unknown.is_some() => Claimed::Verdict {
                word: claimed_text.trim().to_ascii_lowercase(),
            },
            Err(m) => return Err(perr(file, at("claimed"), fld("claimed"), m)),
        };
        for (name, t) in [("rel_tol", c.rel_tol), ("abs_tol", c.abs_tol)] {
            if let Some(t) = t {
                if !t.is_finite() || t < 0.0 {
                    return Err(perr(
                        file,
                        at(name),
                        fld(name),
                        format!("{name} must be a non-negative number, got {t}"),
                    ));
                }
            }
        }
        let args: Args = c
            .args
            .iter()
            .map(|(k, v)| (k.clone(), toml_to_json(v)))
            .collect();
        claims.push(Claim {
            id: c.id,
            line: lines.claim(i),
            scenario: c.scenario,
            command,
            quantity: c.quantity,
            claimed_text,
            claimed,
            dim,
            rel_tol: c.rel_tol,
            abs_tol: c.abs_tol,
            args,
            from: c.from,
            note: c.note,
            unknown,
        });
    }
    Ok(ClaimsFile {
        file: file.to_string(),
        title: raw.title,
        source: raw.source,
        description: raw.description,
        scenarios,
        claims,
    })
}

fn unknown_quantity(file: &str, line: usize, i: usize, q: &str, cmd: Option<Command>) -> Error {
    let cmds: Vec<Command> = match cmd {
        Some(c) => vec![c],
        None => vec![Command::Model, Command::Hw],
    };
    let all: Vec<&str> = cmds
        .iter()
        .flat_map(|c| known_keys(*c).iter().copied())
        .collect();
    let sug = suggestions(q, all.iter().copied());
    let msg = match cmd {
        Some(c) => format!(
            "unknown quantity '{q}' for command `{}`{}",
            c.name(),
            if sug.is_empty() { String::new() } else { format!("; did you mean {}?", sug.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", ")) }
        ),
        None => format!(
            "unknown quantity '{q}': not a key of `model show` or `hw show`{}; for a `train` or `infer` key add command = \"train\" or \"infer\"",
            if sug.is_empty() { String::new() } else { format!(" (did you mean {}?)", sug.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", ")) }
        ),
    };
    perr(file, line, Some(format!("claim[{i}].quantity")), msg)
}
