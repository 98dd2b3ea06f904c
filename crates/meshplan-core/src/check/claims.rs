//! The claims file format (TOML) and its parser. Every error names the file,
//! the line and the field. See docs/check.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::eval::{dim_of, is_known_key, Args, Command};
use super::keys::known_keys;
use super::value::{parse_claimed, Claimed, Dim};
use crate::catalog::{suggestions, Catalog};
use crate::error::{from_toml, Error, Result};
use crate::model::ModelSpec;
use crate::scenario::{
    load_model_file, HardwareSection, InferenceSection, ModelSection, ParallelismSection, Scenario,
    TrainingSection,
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
    /// Models read from the files its scenarios name (`[model] file`), by
    /// the same path as `--model FILE` and scenario files everywhere
    /// ([`crate::scenario::load_model_file`]); [`super::check`] adds them to
    /// the catalog.
    #[serde(skip)]
    pub models: Vec<ModelSpec>,
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

/// Where a claims file is being read: its name and line index, and the
/// resolver that reads the scenario files it names.
struct Reader<'r, 'a> {
    file: &'r str,
    lines: Lines<'r>,
    resolve: &'r mut Resolver<'a>,
    models: Vec<ModelSpec>,
}

impl Reader<'_, '_> {
    /// Read the scenario file `path`, named at `line` in `field`.
    fn load(&mut self, path: &str, line: usize, field: &str) -> Result<Scenario> {
        let (name, text) = (self.resolve)(path).map_err(|m| {
            perr(
                self.file,
                line,
                Some(field.into()),
                format!("cannot read scenario file '{path}': {m}"),
            )
        })?;
        let mut s = Scenario::parse(&text, &name)?;
        self.model_file(&mut s, path)?;
        Ok(s)
    }

    /// Load the model file `[model] file` names (a Hugging Face config.json
    /// or a catalog-format model TOML, relative to the scenario at `at`, a
    /// path relative to the claims file) and point `[model] name` at it.
    fn model_file(&mut self, s: &mut Scenario, at: &str) -> Result<()> {
        if s.model.file.is_none() {
            return Ok(());
        }
        let mut cat = Catalog::default();
        let resolve = &mut *self.resolve;
        load_model_file(&mut cat, s, at, &mut |p: &str| resolve(p).map(|(_, t)| t))?;
        let name = s.model.name.clone().unwrap_or_default();
        let mut m = cat.model(&name)?.clone();
        // two files of one claims file may hold models of one name (two
        // config.json): the second is then known by its path
        if self
            .models
            .iter()
            .any(|x| x.name == m.name && x.aliases != m.aliases)
        {
            m.name = m.aliases.last().cloned().unwrap_or(name);
            s.model.name = Some(m.name.clone());
        }
        self.models.retain(|x| x.name != m.name);
        self.models.push(m);
        Ok(())
    }

    /// The `[scenarios.NAME]` tables: a file, or inline sections.
    fn scenario(&mut self, name: &str, d: ScenarioDecl) -> Result<Scenario> {
        let line = self.lines.scenario(name);
        let inline = d.model.is_some()
            || d.hardware.is_some()
            || d.training.is_some()
            || d.inference.is_some()
            || d.parallelism.is_some();
        match d.file {
            Some(_) if inline => Err(perr(
                self.file,
                line,
                Some(format!("scenarios.{name}")),
                "give either `file = \"…\"` or inline sections ([model], [hardware], …), not both"
                    .into(),
            )),
            Some(f) => self.load(&f, line, &format!("scenarios.{name}.file")),
            None => {
                let mut s = Scenario {
                    description: d.description,
                    source: d.source,
                    model: d.model.unwrap_or_default(),
                    hardware: d.hardware.unwrap_or_default(),
                    training: d.training.unwrap_or_default(),
                    inference: d.inference.unwrap_or_default(),
                    parallelism: d.parallelism.unwrap_or_default(),
                };
                // an inline scenario's model file is relative to the claims
                // file itself: a name without a directory
                let here = format!("[scenarios.{}]", name.replace(['/', '\\'], "_"));
                self.model_file(&mut s, &here)?;
                Ok(s)
            }
        }
    }

    /// Claim `i`'s scenario: a name defined in the file, or a scenario file
    /// (read once and added under its path).
    fn claim_scenario(
        &mut self,
        i: usize,
        name: &str,
        scenarios: &mut BTreeMap<String, Scenario>,
    ) -> Result<()> {
        if scenarios.contains_key(name) {
            return Ok(());
        }
        let line = self.lines.field(i, "scenario");
        if name.ends_with(".toml") {
            let s = self.load(name, line, &format!("claim[{i}].scenario"))?;
            scenarios.insert(name.to_string(), s);
            return Ok(());
        }
        let names: Vec<&str> = scenarios.keys().map(String::as_str).collect();
        let hint = suggestions(name, names.iter().copied())
            .first()
            .map(|s| format!(" (did you mean '{s}'?)"))
            .unwrap_or_default();
        let defined = if names.is_empty() {
            "none (add [scenarios.NAME] or scenario = \"file.toml\")".to_string()
        } else {
            names.join(", ")
        };
        Err(perr(
            self.file,
            line,
            Some(format!("claim[{i}].scenario")),
            format!("unknown scenario '{name}'{hint}; defined: {defined}"),
        ))
    }

    /// The command whose report holds claim `i`'s quantity (explicit, or the
    /// implemented command that reports it) and, when it reports no such
    /// quantity, why (the claim is then CANNOT-CHECK, issue 13 item 9).
    fn claim_command(&self, i: usize, c: &RawClaim) -> Result<(Command, Option<String>)> {
        let at = |f: &str| self.lines.field(i, f);
        let command = match &c.command {
            Some(s) => Command::parse(s).ok_or_else(|| {
                perr(
                    self.file,
                    at("command"),
                    Some(format!("claim[{i}].command")),
                    format!("unknown command '{s}'; expected one of model, hw, train, infer, collective, roofline, shard, mfu"),
                )
            })?,
            None => [Command::Model, Command::Hw]
                .into_iter()
                .find(|k| known_keys(*k).contains(&c.quantity))
                .unwrap_or(Command::Model),
        };
        let unknown = (!is_known_key(command, &c.quantity)).then(|| {
            let explicit = c.command.is_some().then_some(command);
            unknown_quantity(self.file, at("quantity"), i, &c.quantity, explicit).to_string()
        });
        Ok((command, unknown))
    }

    /// Claim `i`'s value as written, and the tolerances checked.
    fn claimed_text(&self, i: usize, c: &RawClaim) -> Result<String> {
        let at = |f: &str| self.lines.field(i, f);
        let fld = |f: &str| Some(format!("claim[{i}].{f}"));
        for (name, t) in [("rel_tol", c.rel_tol), ("abs_tol", c.abs_tol)] {
            if let Some(t) = t.filter(|t| !t.is_finite() || *t < 0.0) {
                let msg = format!("{name} must be a non-negative number, got {t}");
                return Err(perr(self.file, at(name), fld(name), msg));
            }
        }
        match &c.claimed {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(n) => Ok(n.to_string()),
            toml::Value::Float(x) => Ok(x.to_string()),
            toml::Value::Boolean(b) => Ok(b.to_string()),
            _ => Err(perr(
                self.file,
                at("claimed"),
                fld("claimed"),
                "claimed must be a string, a number or a boolean".into(),
            )),
        }
    }

    /// Claim `i`, validated against the quantities its command reports.
    fn claim(&self, i: usize, c: RawClaim) -> Result<Claim> {
        let (command, unknown) = self.claim_command(i, &c)?;
        let dim = match unknown {
            Some(_) => super::value::dim_of_key(&c.quantity),
            None => dim_of(command, &c.quantity),
        };
        let claimed_text = self.claimed_text(i, &c)?;
        let claimed = match parse_claimed(&claimed_text, dim) {
            Ok(x) => x,
            // an unknown quantity's dimension is a guess: keep the words
            Err(_) if unknown.is_some() => Claimed::Verdict {
                word: claimed_text.trim().to_ascii_lowercase(),
            },
            Err(m) => {
                let field = Some(format!("claim[{i}].claimed"));
                return Err(perr(self.file, self.lines.field(i, "claimed"), field, m));
            }
        };
        let args: Args = c
            .args
            .iter()
            .map(|(k, v)| (k.clone(), toml_to_json(v)))
            .collect();
        Ok(Claim {
            id: c.id,
            line: self.lines.claim(i),
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
        })
    }
}

/// Parse a claims file. `resolve` reads scenario files it names.
pub fn parse_claims(src: &str, file: &str, resolve: &mut Resolver<'_>) -> Result<ClaimsFile> {
    let raw: RawFile = from_toml(src, file)?;
    let mut rd = Reader {
        file,
        lines: Lines::new(src),
        resolve,
        models: Vec::new(),
    };
    let mut scenarios = BTreeMap::new();
    for (name, d) in raw.scenarios {
        let s = rd.scenario(&name, d)?;
        scenarios.insert(name, s);
    }
    let mut claims = Vec::new();
    let mut seen = BTreeMap::new();
    for (i, c) in raw.claims.into_iter().enumerate() {
        if let Some(prev) = seen.insert(c.id.clone(), rd.lines.claim(i)) {
            let msg = format!("duplicate claim id '{}' (first at line {prev})", c.id);
            let field = Some(format!("claim[{i}].id"));
            return Err(perr(file, rd.lines.field(i, "id"), field, msg));
        }
        rd.claim_scenario(i, &c.scenario, &mut scenarios)?;
        claims.push(rd.claim(i, c)?);
    }
    Ok(ClaimsFile {
        file: file.to_string(),
        title: raw.title,
        source: raw.source,
        description: raw.description,
        scenarios,
        claims,
        models: rd.models,
    })
}

fn unknown_quantity(file: &str, line: usize, i: usize, q: &str, cmd: Option<Command>) -> Error {
    let cmds: Vec<Command> = match cmd {
        Some(c) => vec![c],
        None => vec![Command::Model, Command::Hw],
    };
    let all: Vec<&str> = cmds.iter().flat_map(|c| known_keys(*c).paths()).collect();
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
