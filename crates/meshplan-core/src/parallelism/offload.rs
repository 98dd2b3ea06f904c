//! Which training state lives in host memory instead of HBM (DeepSpeed
//! ZeRO-Offload / ZeRO-Infinity, Megatron's `--optimizer-cpu-offload`, the
//! offload terms of Calculon and llm-analysis). The memory it moves is in
//! `memory::offload`, the host-link traffic and its exposed time in
//! `training::offload`.

use serde::{Serialize, Serializer};

use crate::error::{Error, Result};

/// The parts of training state kept in host DRAM (all off: today's plans).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Offload {
    /// Optimizer state and fp32 master weights in host memory, the
    /// optimizer step on the CPU (ZeRO-Offload).
    pub optimizer: bool,
    /// Weights in host memory, each layer copied in before its forward and
    /// backward (ZeRO-Infinity parameter offload).
    pub weights: bool,
    /// Saved activations written to host memory in the forward and read back
    /// in the backward (activation offload).
    pub activations: bool,
}

impl Offload {
    /// Nothing offloaded.
    pub const NONE: Offload = Offload {
        optimizer: false,
        weights: false,
        activations: false,
    };
    /// The names users type, in the order [`Offload::parts`] lists them.
    pub const NAMES: [&'static str; 3] = ["optimizer", "weights", "activations"];

    /// Whether anything is offloaded.
    pub fn any(self) -> bool {
        self.optimizer || self.weights || self.activations
    }
    /// Whether nothing is offloaded (serde's skip test).
    pub fn is_none(&self) -> bool {
        !self.any()
    }
    /// The flags in [`Offload::NAMES`] order.
    pub fn parts(self) -> [bool; 3] {
        [self.optimizer, self.weights, self.activations]
    }
    /// Parse one list of names: `optimizer`, `weights` (`params`),
    /// `activations` (`acts`), `all`, or `none`.
    pub fn parse_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Offload> {
        let mut o = Offload::NONE;
        for n in names.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
            match n.to_ascii_lowercase().as_str() {
                "optimizer" | "optim" | "optimizer-state" => o.optimizer = true,
                "weights" | "params" | "parameters" => o.weights = true,
                "activations" | "acts" => o.activations = true,
                "all" => o = Offload {
                    optimizer: true,
                    weights: true,
                    activations: true,
                },
                "none" => {}
                _ => {
                    return Err(Error::Invalid(format!(
                        "offload: unknown part '{n}' (choose from optimizer, weights, activations, all, none)"
                    )))
                }
            }
        }
        Ok(o)
    }
    /// Parse a comma-separated list (`--offload optimizer,activations`).
    pub fn parse(s: &str) -> Result<Offload> {
        Self::parse_names(s.split(','))
    }
    /// Every combination, nothing first (what `plan train --offload auto`
    /// tries).
    pub fn all_combinations() -> impl Iterator<Item = Offload> {
        (0u8..8).map(|b| Offload {
            optimizer: b & 1 != 0,
            weights: b & 2 != 0,
            activations: b & 4 != 0,
        })
    }
}

impl std::fmt::Display for Offload {
    /// `optimizer,activations`, or `none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on: Vec<&str> = Self::NAMES
            .iter()
            .zip(self.parts())
            .filter_map(|(n, b)| b.then_some(*n))
            .collect();
        if on.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&on.join(","))
        }
    }
}

impl Serialize for Offload {
    /// As the list of offloaded parts.
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let on: Vec<&str> = Self::NAMES
            .iter()
            .zip(self.parts())
            .filter_map(|(n, b)| b.then_some(*n))
            .collect();
        on.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_prints_them_back() {
        let o = Offload::parse("optimizer, acts").unwrap();
        assert!(o.optimizer && o.activations && !o.weights);
        assert_eq!(o.to_string(), "optimizer,activations");
        assert_eq!(Offload::parse(&o.to_string()).unwrap(), o);
        assert!(Offload::parse("none").unwrap().is_none());
        assert_eq!(Offload::parse("all").unwrap().parts(), [true; 3]);
        assert!(Offload::parse("gpu").is_err());
        assert_eq!(Offload::all_combinations().count(), 8);
        assert!(Offload::all_combinations().next().unwrap().is_none());
    }
}
