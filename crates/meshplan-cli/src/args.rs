//! Arguments shared by the commands: the target of an analysis (scenario
//! file, model, chip, mesh or chip count) and count flags.

use std::path::PathBuf;

use anyhow::{Context, Result};
use meshplan_core::scenario::{Count, Scenario};
use meshplan_core::Catalog;

use crate::io;

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
}

/// Load a scenario file, or an empty scenario when none is given.
pub fn scenario(path: Option<&std::path::Path>) -> Result<Scenario> {
    match path {
        None => Ok(Scenario::default()),
        Some(p) => Ok(Scenario::parse(
            &io::read_file(p)?,
            &p.display().to_string(),
        )?),
    }
}

impl TargetArgs {
    /// Load the scenario (or an empty one) and write the flags into it:
    /// `--mesh` beats `--chips`, and either replaces the file's mesh/chips.
    /// A `--model` file is loaded into `cat`.
    pub fn load(&self, cat: &mut Catalog) -> Result<Scenario> {
        let mut sc = scenario(self.scenario.as_deref())?;
        if let Some(m) = &self.model {
            // --model replaces the scenario's model, a [model] file included
            sc.model.file = None;
            sc.model.name = Some(io::model_arg(cat, m)?.0);
        } else if let Some(p) = &self.scenario {
            meshplan_core::scenario::load_model_file(
                cat,
                &mut sc,
                &p.display().to_string(),
                &mut io::read_for_core,
            )?;
        }
        if let Some(h) = &self.hw {
            sc.hardware.chip = Some(h.clone());
        }
        if let Some(m) = &self.mesh {
            sc.hardware.mesh = Some(m.clone());
        } else if let Some(c) = count_flag(&self.chips, "chips")? {
            sc.hardware.mesh = None;
            sc.hardware.chips = Some(c);
        }
        if sc.model.name.is_none() && !sc.model.has_overrides() {
            anyhow::bail!("no model given: use --model NAME or a scenario with [model]");
        }
        Ok(sc)
    }
}

/// Parse an optional count flag ("3M", "128k", "128Ki"), naming it on error.
pub fn count_flag(s: &Option<String>, flag: &str) -> Result<Option<Count>> {
    s.as_deref()
        .map(|x| {
            meshplan_core::units::parse_count(x)
                .map(Count)
                .with_context(|| format!("--{flag}"))
        })
        .transpose()
}

/// Arguments of the list commands.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Output.
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}
