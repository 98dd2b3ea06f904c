//! Arguments shared by the commands: the target of an analysis (scenario
//! file, model, chip, mesh or chip count) and count flags.

use std::path::PathBuf;

use anyhow::Result;
use meshplan_core::scenario::Scenario;
use meshplan_core::{overrides, Catalog};
use serde_json::{json, Map, Value};

/// The target of an analysis — scenario file, model, chip, and mesh or chip
/// count — shared by `train`, `infer` and `plan` so the flags read and
/// override the scenario the same way everywhere.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Scenario TOML ([model], [hardware] and the command's workload sections); flags override it.
    #[arg(value_name = "SCENARIO")]
    pub scenario: Option<PathBuf>,
    /// Model: a catalog name or alias, a Hugging Face config.json, or a model/scenario TOML.
    #[arg(long)]
    pub model: Option<String>,
    /// Chip: a catalog name (NAME@book for the book's numbers).
    #[arg(long)]
    pub hw: Option<String>,
    /// TPU slice ("16x16x16"; "2*16x16x16" = 2 slices over DCN) or GPU layout NODESxGPUS ("8x8").
    #[arg(long)]
    pub mesh: Option<String>,
    /// Number of chips ("64", "16k"): GPUs in NVLink domains, or the TPU slice offered with that many.
    #[arg(long)]
    pub chips: Option<String>,
    /// A bare parameter count to use as P ("70e9", the book's convention; the exact count is reported beside it).
    #[arg(long, value_name = "COUNT")]
    pub params_given: Option<String>,
}

impl TargetArgs {
    /// Load the scenario (or an empty one) and write `flags` (the command's
    /// scenario sections, see `meshplan_core::overrides`) and `--hw`,
    /// `--mesh`, `--chips` over it. A `--model` file is loaded into `cat`.
    pub fn load(&self, cat: &mut Catalog, mut flags: Value) -> Result<Scenario> {
        self.short_values()?;
        // --model replaces the scenario's model, a [model] file included
        let sc = meshplan_io::target(cat, self.scenario.as_deref(), self.model.as_deref())?;
        flags["hardware"] = json!({"chip": self.hw, "mesh": self.mesh, "chips": self.chips});
        if self.params_given.is_some() {
            flags["model"] = json!({"params_given": self.params_given});
        }
        let sc = overrides::apply(&sc, &flags, &flag_name)?;
        sc.require_model("use --model NAME or a scenario with [model]")?;
        Ok(sc)
    }
}

impl TargetArgs {
    /// Refuse an over-long `--model` (a name or a path: at most 4096 bytes,
    /// the usual PATH_MAX) or `--hw`/`--mesh`/`--chips` (at most 256) before
    /// any lookup, quoting only their start: a huge name cost a "did you
    /// mean" search and was echoed whole (the web API's cap, the CLI's own).
    fn short_values(&self) -> Result<()> {
        let flags = [
            ("--model", &self.model, 4096),
            ("--hw", &self.hw, 256),
            ("--mesh", &self.mesh, 256),
            ("--chips", &self.chips, 256),
        ];
        for (flag, v, max) in flags {
            if let Some(v) = v.as_deref().filter(|v| v.len() > max) {
                let start: String = v.chars().take(40).collect();
                anyhow::bail!(
                    "{flag}: a value of {} bytes ('{start}…'); at most {max}",
                    v.len()
                );
            }
        }
        Ok(())
    }
}

/// The flag a scenario key comes from (`batch_tokens` ← `--batch-tokens`).
fn flag_name(section: &str, key: &str) -> String {
    match (section, key) {
        ("hardware", "chip") => "--hw".into(),
        ("training", "include_attention") => "--no-attention".into(),
        _ => format!("--{}", key.replace('_', "-")),
    }
}

/// The flags' sections merged into one object (`{"training": {…}}` and
/// `{"training": {…}, "parallelism": {…}}` → one `training` table).
pub fn sections(parts: &[(&str, Value)]) -> Value {
    let mut out = Map::new();
    for (section, v) in parts {
        let entry = out.entry(*section).or_insert_with(|| json!({}));
        if let (Some(dst), Some(src)) = (entry.as_object_mut(), v.as_object()) {
            dst.extend(src.clone());
        }
    }
    Value::Object(out)
}

/// Arguments of the list commands.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Output.
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

impl ListArgs {
    /// The output options; a list has no derivation, so --explain is refused.
    pub fn out(&self, what: &str) -> Result<&crate::output::OutputArgs> {
        if self.out.explain {
            anyhow::bail!("{what} list has no derivation: --explain is for `meshplan {what} show`");
        }
        Ok(&self.out)
    }
}

/// Refuse a NaN or infinite float flag: JSON, which carries the flags to
/// the core, would turn it into null, i.e. "not given".
pub fn finite(flag: &str, x: Option<f64>) -> Result<()> {
    match x {
        Some(v) if !v.is_finite() => anyhow::bail!("{flag} must be a finite number"),
        _ => Ok(()),
    }
}
