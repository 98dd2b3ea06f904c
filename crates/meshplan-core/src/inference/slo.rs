//! Latency SLOs (TTFT, TPOT) as every front end takes them — a number of
//! seconds or a duration with its unit ("50ms") — and the one check they
//! all apply: a positive, finite duration of at most [`MAX_SLO_S`].
//!
//! Why a ceiling: an SLO only bounds latencies, so a value far above any
//! step time means "no SLO"; the serving plot scales its axis to the SLO
//! line, and an infinite or near-`f64::MAX` one made that axis infinite
//! (the plot never finished). Refusing such values with the same message in
//! the CLI, the web API and Python is clearer than silently dropping them.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::units::parse_seconds;

/// The largest SLO accepted: one day. No serving latency a plan is judged
/// by comes near it; leave the SLO out for "no SLO".
pub const MAX_SLO_S: f64 = 86_400.0;

/// An SLO as given: seconds, or text with a unit ("50ms", "0.2 s", "0.05").
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SloValue {
    /// Seconds.
    Seconds(f64),
    /// A duration with its unit, read as the CLI's flags are.
    Text(String),
}

impl<'de> Deserialize<'de> for SloValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SloValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("seconds (a number) or a duration like \"50ms\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<SloValue, E> {
                Ok(SloValue::Seconds(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<SloValue, E> {
                Ok(SloValue::Seconds(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<SloValue, E> {
                Ok(SloValue::Seconds(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<SloValue, E> {
                Ok(SloValue::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The two serving SLOs as `infer` takes them (lines on its serving plot).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slos {
    /// Time to first token.
    #[serde(default)]
    pub ttft_slo: Option<SloValue>,
    /// Time per output token.
    #[serde(default)]
    pub tpot_slo: Option<SloValue>,
}

impl Slos {
    /// (TTFT, TPOT) in seconds, each checked by [`check_slo_seconds`].
    pub fn seconds(&self) -> Result<(Option<f64>, Option<f64>)> {
        Ok((
            slo_seconds("ttft_slo", self.ttft_slo.as_ref())?,
            slo_seconds("tpot_slo", self.tpot_slo.as_ref())?,
        ))
    }
}

impl From<f64> for SloValue {
    fn from(s: f64) -> Self {
        SloValue::Seconds(s)
    }
}

impl From<&str> for SloValue {
    fn from(s: &str) -> Self {
        SloValue::Text(s.to_string())
    }
}

fn expected() -> String {
    format!(
        "a positive duration of at most {} (1 day), like \"50ms\" or 0.05 (seconds); leave it out for no SLO",
        fmt_seconds(MAX_SLO_S)
    )
}

fn fmt_seconds(s: f64) -> String {
    if s.is_finite() && s.abs() >= 1e6 {
        format!("{s:e} s")
    } else {
        format!("{s} s")
    }
}

fn refuse(name: &str, input: String) -> Error {
    Error::BadValue {
        what: name.to_string(),
        input,
        expected: expected(),
    }
}

/// Check an SLO in seconds: NaN, zero, negative, infinite and
/// above-[`MAX_SLO_S`] values are refused with one message naming `name`.
pub fn check_slo_seconds(name: &str, s: f64) -> Result<f64> {
    if s.is_finite() && s > 0.0 && s <= MAX_SLO_S {
        Ok(s)
    } else {
        Err(refuse(name, fmt_seconds(s)))
    }
}

impl SloValue {
    /// The SLO in seconds, checked by [`check_slo_seconds`]. Text that is a
    /// bare number ("0.05", "inf", "-1") is seconds, as a number is, so both
    /// spellings get the same verdict.
    pub fn seconds(&self, name: &str) -> Result<f64> {
        let s = match self {
            SloValue::Seconds(s) => *s,
            SloValue::Text(t) => {
                let t = t.trim();
                match t.parse::<f64>() {
                    Ok(s) => s,
                    Err(_) => match t.strip_prefix('-') {
                        Some(rest) => -text_seconds(name, rest, t)?,
                        None => text_seconds(name, t, t)?,
                    },
                }
            }
        };
        check_slo_seconds(name, s)
    }
}

fn text_seconds(name: &str, t: &str, given: &str) -> Result<f64> {
    parse_seconds(t)
        .map(|s| s.get())
        .map_err(|_| refuse(name, given.to_string()))
}

/// An optional SLO in seconds (None: no SLO).
pub fn slo_seconds(name: &str, v: Option<&SloValue>) -> Result<Option<f64>> {
    v.map(|v| v.seconds(name)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_text_agree() {
        // 50 ms = 0.05 s, however written
        for v in [
            SloValue::from(0.05),
            "50ms".into(),
            "0.05".into(),
            " 50 ms ".into(),
        ] {
            assert!(
                (v.seconds("tpot_slo").unwrap() - 0.05).abs() < 1e-15,
                "{v:?}"
            );
        }
        assert_eq!(SloValue::from("1 day").seconds("x").unwrap(), MAX_SLO_S);
    }

    #[test]
    fn json_takes_numbers_and_text_and_names_what_else() {
        let s: Slos = serde_json::from_str(r#"{"ttft_slo": 1, "tpot_slo": "50ms"}"#).unwrap();
        assert_eq!(s.seconds().unwrap(), (Some(1.0), Some(0.05)));
        let e = serde_json::from_str::<Slos>(r#"{"tpot_slo": true}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("seconds (a number) or a duration"), "{e}");
    }

    #[test]
    fn every_bad_value_gets_the_same_message() {
        let bad: [SloValue; 12] = [
            f64::NAN.into(),
            (-1.0).into(),
            0.0.into(),
            f64::INFINITY.into(),
            f64::MAX.into(),
            (MAX_SLO_S * 1.01).into(),
            "0s".into(),
            "-50ms".into(),
            "inf".into(),
            "nan".into(),
            "2 days".into(),
            "soon".into(),
        ];
        for v in bad {
            let e = v.seconds("tpot_slo").unwrap_err().to_string();
            assert!(
                e.starts_with("cannot read tpot_slo from '") && e.ends_with(&expected()),
                "{v:?}: {e}"
            );
        }
    }
}
