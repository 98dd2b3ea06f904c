//! Flags, keyword arguments and form fields written over a scenario. The
//! CLI (`--batch-tokens 3M`), Python (`batch_tokens="3M"`) and the web page
//! all hand their inputs over as one JSON object of scenario sections, so a
//! value is parsed, checked and given precedence in one place.
//!
//! The rules: a `null` (or absent) value leaves the scenario's value alone;
//! tables merge key by key; `hardware.mesh` beats `hardware.chips`, and a
//! `chips` given without a `mesh` replaces the scenario's mesh (a chip count
//! and a mesh would otherwise disagree).

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::scenario::Scenario;

/// Write `over` (`{"training": {"batch_tokens": "3M"}, …}`) over `base`.
///
/// A value that does not parse is reported under `name(section, key)`:
/// the CLI names its flag (`--batch-tokens`), Python its keyword.
pub fn apply(
    base: &Scenario,
    over: &Value,
    name: &dyn Fn(&str, &str) -> String,
) -> Result<Scenario> {
    let Some(over) = over.as_object() else {
        return Err(Error::Invalid(
            "overrides must be an object of scenario sections".into(),
        ));
    };
    let mut merged = serde_json::to_value(base).map_err(|e| Error::Invalid(e.to_string()))?;
    let over = with_mesh_rule(over);
    if let Some(m) = merged.as_object_mut() {
        merge(m, &over);
    }
    serde_path_to_error::deserialize(merged).map_err(|e| {
        let path = e.path().to_string();
        let (section, key) = path.split_once('.').unwrap_or((path.as_str(), ""));
        Error::Invalid(format!("{}: {}", name(section, key), e.inner()))
    })
}

/// The overrides with the mesh/chips rule applied: `chips` without `mesh`
/// clears the scenario's mesh; `mesh` drops a `chips` given with it.
fn with_mesh_rule(over: &Map<String, Value>) -> Map<String, Value> {
    let mut over = over.clone();
    if let Some(Value::Object(h)) = over.get_mut("hardware") {
        let given = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
        match (given(h.get("mesh")), given(h.get("chips"))) {
            (true, _) => {
                h.remove("chips");
            }
            (false, true) => {
                h.insert("mesh".into(), Value::Null);
            }
            (false, false) => {
                h.remove("mesh");
            }
        }
    }
    over
}

/// Merge `over` into `base`: tables key by key, `null` skipped except where
/// the mesh rule put it (`hardware.mesh = null`: clear the mesh).
fn merge(base: &mut Map<String, Value>, over: &Map<String, Value>) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => merge(b, o),
            (_, Value::Null) if k != "mesh" => {}
            (_, v) => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flag(_: &str, key: &str) -> String {
        format!("--{}", key.replace('_', "-"))
    }

    fn file() -> Scenario {
        Scenario::parse(
            "[model]\nname = \"llama-2-7b\"\n[hardware]\nchip = \"h100\"\nmesh = \"2x8\"\n\
             [training]\nbatch_tokens = \"1M\"\nseq_len = 4096\n",
            "t.toml",
        )
        .unwrap()
    }

    #[test]
    fn flags_override_and_nulls_keep_the_file() {
        // as Python sends them: every keyword, null when not given
        let over = json!({"training": {"batch_tokens": "4Mi", "seq_len": null},
                          "hardware": {"mesh": null, "chips": null}});
        let sc = apply(&file(), &over, &flag).unwrap();
        // "4Mi" = 4 · 2^20 = 4,194,304 tokens; seq_len stays the file's 4,096
        assert_eq!(sc.training.batch_tokens.unwrap().0, 4_194_304);
        assert_eq!(sc.training.seq_len.unwrap().0, 4096);
        assert_eq!(sc.hardware.mesh.as_deref(), Some("2x8"));
    }

    #[test]
    fn chips_replace_the_mesh_and_mesh_beats_chips() {
        let sc = apply(&file(), &json!({"hardware": {"chips": "64"}}), &flag).unwrap();
        assert_eq!((sc.hardware.mesh, sc.hardware.chips.unwrap().0), (None, 64));
        let both = json!({"hardware": {"chips": 64, "mesh": "8x8"}});
        let sc = apply(&file(), &both, &flag).unwrap();
        assert_eq!(sc.hardware.mesh.as_deref(), Some("8x8"));
        assert_eq!(sc.hardware.chips, None);
    }

    #[test]
    fn a_bad_value_names_the_flag() {
        let over = json!({"training": {"batch_tokens": "lots"}});
        let e = apply(&file(), &over, &flag).unwrap_err().to_string();
        assert!(e.contains("--batch-tokens"), "{e}");
        let e = apply(&file(), &json!({"training": {"bogus": 1}}), &flag)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus"), "{e}");
        assert!(apply(&file(), &json!([1]), &flag).is_err());
    }
}
