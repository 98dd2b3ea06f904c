/*!
The built-in model and hardware catalogs.

Catalog files live in `data/models/NAME.toml` and `data/hardware/NAME.toml`, one
entry per file, each with a `source`. They are embedded at build time (see
`build.rs`); users can add their own with [`Catalog::add_model_toml`] /
[`Catalog::add_chip_toml`] (the CLI reads the files; this module only parses
text).

Lookup is forgiving: case, spaces and underscores are ignored, aliases are
accepted (`v5e`, `TPU v5p`, `H100-SXM`), and an unknown name returns the
closest entries as suggestions.
*/

use std::sync::OnceLock;

use crate::error::{from_toml, Error, Result};
use crate::hardware::{Chip, ChipFile, Profile};
use crate::model::ModelSpec;

include!(concat!(env!("OUT_DIR"), "/catalog_files.rs"));

use crate::names::loose;
pub use crate::names::{normalize, suggestions};

/// Deep-merge `over` into `base` (tables merge, other values replace).
fn merge(base: &mut toml::Value, over: &toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(bv) => merge(bv, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// A model file: [`ModelSpec`] with `[moe]`, `[mla]`, `[sliding_window]`,
/// `[linear_attention]` and `[sparse_attention]` written as top-level tables (they belong to `[arch]` in the data model).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    #[serde(flatten)]
    spec: ModelSpecFields,
    #[serde(default)]
    moe: Option<crate::model::Moe>,
    #[serde(default)]
    mla: Option<crate::model::Mla>,
    #[serde(default)]
    sliding_window: Option<crate::model::SlidingWindow>,
    #[serde(default)]
    linear_attention: Option<crate::model::LinearAttention>,
    #[serde(default)]
    sparse_attention: Option<crate::model::SparseAttention>,
}

#[derive(serde::Deserialize)]
struct ModelSpecFields {
    name: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    aliases: Vec<String>,
    source: String,
    #[serde(default)]
    max_seq_len: u64,
    #[serde(default)]
    notes: String,
    #[serde(default)]
    published: Option<crate::model::Published>,
    arch: crate::model::Arch,
}

/// Parse one model file.
pub fn parse_model(src: &str, file: &str) -> Result<ModelSpec> {
    let f: ModelFile = from_toml(src, file)?;
    let s = f.spec;
    let mut arch = s.arch;
    arch.moe = f.moe.or(arch.moe);
    arch.mla = f.mla.or(arch.mla);
    arch.sliding_window = f.sliding_window.or(arch.sliding_window);
    arch.linear_attention = f.linear_attention.or(arch.linear_attention);
    arch.sparse_attention = f.sparse_attention.or(arch.sparse_attention);
    let m = ModelSpec {
        name: s.name,
        display_name: s.display_name,
        aliases: s.aliases,
        source: s.source,
        max_seq_len: s.max_seq_len,
        notes: s.notes,
        published: s.published,
        arch,
    };
    m.arch.validate().map_err(|e| match e {
        Error::InvalidModel { field, reason } => Error::InvalidModel {
            field: format!("{file}: {field}"),
            reason,
        },
        e => e,
    })?;
    Ok(m)
}

/// Parse one hardware file into its vendor chip and, if it has a `[book]`
/// table, its `@book` variant.
pub fn parse_chip(src: &str, file: &str) -> Result<Vec<Chip>> {
    let f: ChipFile = from_toml(src, file)?;
    let mut out = vec![Chip::from_file(&f, Profile::Vendor)?];
    if let Some(book) = &f.book {
        let mut v: toml::Value =
            toml::from_str(src).map_err(|e| Error::Invalid(format!("{file}: {e}")))?;
        let mut book = book.clone();
        let book_src = book
            .as_table_mut()
            .and_then(|t| t.remove("source"))
            .and_then(|s| s.as_str().map(String::from));
        merge(&mut v, &book);
        if let Some(t) = v.as_table_mut() {
            t.remove("book");
        }
        let bf: ChipFile = v.try_into().map_err(|e: toml::de::Error| {
            Error::Invalid(format!("{file}: [book]: {}", e.message()))
        })?;
        let mut chip = Chip::from_file(&bf, Profile::Book)?;
        if let Some(s) = book_src {
            chip.source = s;
        }
        chip.aliases = chip.aliases.iter().map(|a| format!("{a}@book")).collect();
        out.push(chip);
    }
    Ok(out)
}

/// Models and chips, built-in plus user-added.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    models: Vec<ModelSpec>,
    chips: Vec<Chip>,
}

impl Catalog {
    /// The built-in catalog (parsed once).
    pub fn builtin() -> &'static Catalog {
        static C: OnceLock<Catalog> = OnceLock::new();
        C.get_or_init(|| Catalog::load_builtin().expect("built-in catalog is valid (tested)"))
    }

    /// Parse the built-in files; errors name the file.
    pub fn load_builtin() -> Result<Catalog> {
        let mut c = Catalog::default();
        for (file, src) in MODEL_FILES {
            c.add_model_toml(src, &format!("data/models/{file}"))?;
        }
        for (file, src) in HARDWARE_FILES {
            c.add_chip_toml(src, &format!("data/hardware/{file}"))?;
        }
        Ok(c)
    }

    /// Add (or replace) a model from TOML text.
    pub fn add_model_toml(&mut self, src: &str, file: &str) -> Result<&ModelSpec> {
        let m = parse_model(src, file)?;
        self.models.retain(|x| x.name != m.name);
        self.models.push(m);
        Ok(self.models.last().expect("just pushed"))
    }

    /// Add (or replace) a model; it is found afterwards by its name and
    /// aliases. An older model keeps its own name but loses an alias that
    /// is the new model's name: an imported `Llama-2-7b-hf/config.json` is
    /// found as `Llama-2-7b-hf`, not the built-in llama-2-7b of that alias.
    pub fn add_model(&mut self, m: ModelSpec) {
        self.models.retain(|x| x.name != m.name);
        let taken = crate::names::normalize(&m.name);
        for x in &mut self.models {
            x.aliases.retain(|a| crate::names::normalize(a) != taken);
        }
        self.models.push(m);
    }

    /// Add (or replace) a chip (and its `@book` variant) from TOML text.
    pub fn add_chip_toml(&mut self, src: &str, file: &str) -> Result<()> {
        for ch in parse_chip(src, file)? {
            self.chips.retain(|x| x.name != ch.name);
            self.chips.push(ch);
        }
        Ok(())
    }

    /// All models, sorted by name.
    pub fn models(&self) -> Vec<&ModelSpec> {
        let mut v: Vec<&ModelSpec> = self.models.iter().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// All chips, sorted by name.
    pub fn chips(&self) -> Vec<&Chip> {
        let mut v: Vec<&Chip> = self.chips.iter().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Find a model by name or alias.
    pub fn model(&self, name: &str) -> Result<&ModelSpec> {
        lookup(&self.models, name, "model", |m| (&m.name, &m.aliases))
    }

    /// Find a model, or read `name` as a bare parameter count ("70B": a
    /// guessed dense shape, see [`crate::model::bare`]).
    pub fn model_or_bare(&self, name: &str) -> Result<ModelSpec> {
        match self.model(name) {
            Ok(m) => Ok(m.clone()),
            Err(e) => match crate::model::bare::parse_bare(name) {
                Some(p) => crate::model::bare::bare_model(p),
                None => Err(e),
            },
        }
    }

    /// The chip a query names (`--hw`), or an error that says how to name one.
    pub fn chip_given(&self, hw: &Option<String>) -> Result<&Chip> {
        match hw {
            Some(h) => self.chip(h),
            None => Err(Error::Invalid(
                "no chip given: use --hw NAME (e.g. tpu-v5e@book, h100@book)".into(),
            )),
        }
    }

    /// Find a chip by name or alias; `NAME@book` selects the book's numbers.
    pub fn chip(&self, name: &str) -> Result<&Chip> {
        lookup(&self.chips, name, "chip", |c| (&c.name, &c.aliases))
    }
}

/// Find the entry `name` refers to (exact after [`normalize`], then after
/// [`loose`]), or an [`Error::UnknownName`] with the closest entries' canonical
/// names as suggestions.
fn lookup<'a, T>(
    items: &'a [T],
    name: &str,
    kind: &str,
    names: impl Fn(&T) -> (&String, &Vec<String>),
) -> Result<&'a T> {
    let matches = |t: &T, f: &dyn Fn(&str) -> String, q: &str| {
        let (n, aliases) = names(t);
        f(n) == q || aliases.iter().any(|a| f(a) == q)
    };
    let (q, ql) = (normalize(name), loose(name));
    if let Some(hit) = items
        .iter()
        .find(|t| matches(t, &normalize, &q))
        .or_else(|| items.iter().find(|t| matches(t, &loose, &ql)))
    {
        return Ok(hit);
    }
    let all = items.iter().flat_map(|t| {
        let (n, aliases) = names(t);
        std::iter::once(n.as_str()).chain(aliases.iter().map(String::as_str))
    });
    let mut canonical: Vec<String> = Vec::new();
    for cand in suggestions(name, all) {
        let canon = items
            .iter()
            .map(&names)
            .find(|(n, aliases)| **n == cand || aliases.contains(&cand))
            .map_or(cand, |(n, _)| n.clone());
        if !canonical.contains(&canon) {
            canonical.push(canon);
        }
    }
    Err(Error::UnknownName {
        kind: kind.into(),
        name: name.into(),
        suggestions: canonical,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization() {
        assert_eq!(normalize("TPU v5p"), "tpu-v5p");
        assert_eq!(normalize(" H100_SXM "), "h100-sxm");
        assert_eq!(loose("llama2-7b"), loose("Llama-2 7B"));
    }

    #[test]
    fn suggest_close_names() {
        let names = ["llama-2-7b", "llama-2-13b", "mistral-7b", "gpt-3-175b"];
        let s = suggestions("lama-2-7b", names.iter().copied());
        assert_eq!(s[0], "llama-2-7b");
        assert!(suggestions("zzzzzz", names.iter().copied()).is_empty());
    }

    #[test]
    fn merge_tables() {
        let mut a: toml::Value = toml::from_str("[x]\na = 1\nb = 2").unwrap();
        let b: toml::Value = toml::from_str("[x]\nb = 3").unwrap();
        merge(&mut a, &b);
        assert_eq!(a["x"]["a"].as_integer(), Some(1));
        assert_eq!(a["x"]["b"].as_integer(), Some(3));
    }
}
