//! Workloads as serving benchmarks define them: a static batch (prefill every
//! prompt, then decode them together) and continuous batching in steady
//! state under a fixed concurrency (users at random or fixed lengths) or a
//! request rate.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::{Error, Result};

/// What the serving benchmark does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// `batch` prompts prefilled together, then decoded together to the end.
    #[default]
    Static,
    /// Continuous batching with this many requests in flight per replica.
    Concurrency(u64),
    /// Continuous batching under Poisson arrivals at this many requests/s
    /// (the whole slice).
    Rate(f64),
    /// A closed loop of this many users per replica whose requests all have
    /// the same prompt and output lengths (a benchmark's fixed lengths with
    /// `--ignore-eos`): the users finish together and send together, so the
    /// loop may run in lockstep waves ([`super::lockstep`]).
    Lockstep(u64),
}

impl Workload {
    /// Parse `static`, `concurrency=N` (or `c=N`, `concurrency:N`),
    /// `lockstep=N` (N users at fixed lengths) or `rate=R` (requests/s;
    /// `qps=R`).
    pub fn parse(s: &str) -> Result<Workload> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || {
            Error::BadValue {
            what: "workload".into(),
            input: s.into(),
            expected:
                "static, concurrency=N (requests in flight per replica), lockstep=N (N users at fixed prompt and output lengths) or rate=R (requests/s)"
                    .into(),
        }
        };
        if t == "static" {
            return Ok(Workload::Static);
        }
        let (k, v) = t.split_once(['=', ':']).ok_or_else(bad)?;
        let users = || match v.trim().parse::<u64>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(bad()),
        };
        match k.trim() {
            "concurrency" | "c" => users().map(Workload::Concurrency),
            "lockstep" => users().map(Workload::Lockstep),
            "rate" | "qps" | "r" => match v.trim().parse::<f64>() {
                Ok(r) if r.is_finite() && r > 0.0 => Ok(Workload::Rate(r)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

impl FromStr for Workload {
    type Err = Error;
    fn from_str(s: &str) -> Result<Workload> {
        Workload::parse(s)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Static => f.write_str("static"),
            Workload::Concurrency(n) => write!(f, "concurrency={n}"),
            Workload::Lockstep(n) => write!(f, "lockstep={n}"),
            Workload::Rate(r) if (1e-3..1e6).contains(r) => write!(f, "rate={r}"),
            Workload::Rate(r) => write!(f, "rate={r:e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips() {
        for (s, w) in [
            ("static", Workload::Static),
            ("concurrency=64", Workload::Concurrency(64)),
            ("c:8", Workload::Concurrency(8)),
            ("lockstep=16", Workload::Lockstep(16)),
            ("rate=2.5", Workload::Rate(2.5)),
            ("rate=1e308", Workload::Rate(1e308)),
        ] {
            assert_eq!(Workload::parse(s).unwrap(), w);
            assert_eq!(Workload::parse(&w.to_string()).unwrap(), w);
        }
        for s in [
            "",
            "concurrency=0",
            "lockstep=0",
            "lockstep=-2",
            "rate=-1",
            "rate=nan",
            "burst=3",
        ] {
            assert!(Workload::parse(s).is_err(), "{s}");
        }
    }
}
