//! Claimed values: numbers with an optional unit ("1.3 ms", "42 TB",
//! "13,015,449,600", "18 385 207 246", "3.2 Million"), verdict words
//! ("fits", "comms-bound"), unit dimensions, and the default tolerance implied
//! by the printed precision.

use serde::Serialize;

/// Physical dimension of a quantity or of a claimed value's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    /// Counts, ratios, intensities (parameters, tokens, chips, FLOPs/B).
    Count,
    /// Bytes.
    Bytes,
    /// Seconds.
    Seconds,
    /// FLOPs.
    Flops,
    /// FLOP/s.
    FlopsPerSec,
    /// Bytes per second.
    BytesPerSec,
}

impl Dim {
    /// Base unit symbol.
    pub fn unit(self) -> &'static str {
        match self {
            Dim::Count => "",
            Dim::Bytes => "B",
            Dim::Seconds => "s",
            Dim::Flops => "FLOPs",
            Dim::FlopsPerSec => "FLOP/s",
            Dim::BytesPerSec => "B/s",
        }
    }
    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            Dim::Count => "a plain number (count or ratio)",
            Dim::Bytes => "bytes",
            Dim::Seconds => "seconds",
            Dim::Flops => "FLOPs",
            Dim::FlopsPerSec => "FLOP/s",
            Dim::BytesPerSec => "bytes per second",
        }
    }
}

/// Dimension of a report key, inferred from its name (the JSON key
/// conventions of docs/quantities.md: `_bytes`, `_s`, `_bytes_per_s`, `flops`…).
pub fn dim_of_key(key: &str) -> Dim {
    let k = key.to_ascii_lowercase();
    let last = k.rsplit('.').next().unwrap_or(&k);
    if k.starts_with("peak_flops_per_s")
        || last.ends_with("flops_per_s")
        || last.ends_with("flop_per_s")
    {
        return Dim::FlopsPerSec;
    }
    if last.ends_with("bytes_per_s") {
        return Dim::BytesPerSec;
    }
    if last.starts_with("critical_intensity")
        || last.contains("intensity")
        || last.contains("per_byte")
    {
        return Dim::Count;
    }
    if last.contains("bytes") || last == "hbm" {
        return Dim::Bytes;
    }
    if last.ends_with("_s")
        || last.ends_with("_seconds")
        || last == "s"
        || last.contains("time")
        || last.contains("latency")
    {
        return Dim::Seconds;
    }
    if last.contains("flops") {
        return Dim::Flops;
    }
    Dim::Count
}

/// A parsed claimed value.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Claimed {
    /// A number in the quantity's base unit.
    Number {
        /// Value in SI base units.
        value: f64,
        /// Dimension of the unit written (None: no unit, a bare number).
        #[serde(skip_serializing_if = "Option::is_none")]
        unit_dim: Option<Dim>,
        /// Default relative tolerance from the printed precision.
        printed_rel_tol: f64,
        /// Significant digits as printed ("18385207246").
        digits: String,
    },
    /// A verdict word or string ("fits", "comms-bound", "true").
    Verdict {
        /// Normalised word.
        word: String,
    },
}

/// Multipliers of unit words, by dimension.
fn unit_table(u: &str, target: Dim) -> Option<(f64, Dim)> {
    let u = u.trim();
    let lower = u.to_ascii_lowercase();
    // Count words.
    let count = match lower.as_str() {
        "" => Some(1.0),
        "k" | "thousand" => Some(1e3),
        "m" | "million" | "millions" | "mil" => Some(1e6),
        "billion" | "billions" | "bn" | "g" => Some(1e9),
        "t" | "trillion" | "trillions" => Some(1e12),
        "ki" => Some(1024.0),
        "mi" => Some(1048576.0),
        "gi" => Some(1073741824.0),
        "params" | "parameters" | "tokens" | "chips" | "sequences" | "ways" | "devices" | "x"
        | "flops/b" | "flops/byte" | "ops/b" | "tokens/s" | "tok/s" | "sequences/s" => Some(1.0),
        "%" | "percent" => Some(0.01),
        _ => None,
    };
    // "B" after a count is billion, after a size byte.
    if u == "B" && target == Dim::Count {
        return Some((1e9, Dim::Count));
    }
    if let Some(c) = count {
        if !(lower == "m" && u == "m" && target == Dim::Seconds) {
            // "m" alone is million for counts; minutes are written "min".
            return Some((c, Dim::Count));
        }
    }
    for (suffix, f, d) in word_params() {
        if lower == *suffix {
            return Some((*f, *d));
        }
    }
    let prefixes: [(&str, f64); 11] = [
        ("", 1.0),
        ("k", 1e3),
        ("m", 1e6),
        ("g", 1e9),
        ("t", 1e12),
        ("p", 1e15),
        ("e", 1e18),
        ("ki", 1024.0),
        ("mi", 1048576.0),
        ("gi", 1073741824.0),
        ("ti", 1099511627776.0),
    ];
    // Sizes: B, KB, MB, GB, TB, KiB…; bits b, Gb.
    for (p, f) in prefixes {
        for (unit, d, mul) in [
            ("b/s", Dim::BytesPerSec, 1.0),
            ("flop/s", Dim::FlopsPerSec, 1.0),
            ("flops/s", Dim::FlopsPerSec, 1.0),
            ("ops", Dim::FlopsPerSec, 1.0),
            ("flops", Dim::Flops, 1.0),
            ("flop", Dim::Flops, 1.0),
            ("b", Dim::Bytes, 1.0),
            ("byte", Dim::Bytes, 1.0),
            ("bytes", Dim::Bytes, 1.0),
        ] {
            if lower == format!("{p}{unit}") {
                // Lower-case b is bits (Gb, Gb/s) when written with a prefix.
                let bits = unit.starts_with('b')
                    && u.ends_with(if unit == "b/s" { "b/s" } else { "b" })
                    && !p.is_empty();
                let m = if bits { mul / 8.0 } else { mul };
                return Some((f * m, d));
            }
        }
    }
    // Time.
    let t = match lower.as_str() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "ms" | "msec" => 1e-3,
        "us" | "µs" | "μs" | "usec" => 1e-6,
        "ns" => 1e-9,
        "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        _ => return None,
    };
    Some((t, Dim::Seconds))
}

fn word_params() -> &'static [(&'static str, f64, Dim)] {
    &[
        ("million params", 1e6, Dim::Count),
        ("billion params", 1e9, Dim::Count),
        ("b params", 1e9, Dim::Count),
        ("m params", 1e6, Dim::Count),
    ]
}

/// Split "13,015,449,600 params" into ("13015449600", "params"). Thousands
/// separators (commas, spaces, thin spaces, underscores) between digit groups
/// are removed.
fn split(s: &str) -> Option<(String, String)> {
    let s = s.trim();
    let mut num = String::new();
    let mut end = 0;
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        let next_digit = chars.get(i + 1).is_some_and(|(_, n)| n.is_ascii_digit());
        let sign = (c == '-' || c == '+') && (num.is_empty() || num.ends_with(['e', 'E']));
        if c.is_ascii_digit() || c == '.' || sign {
            num.push(c);
        } else if (c == 'e' || c == 'E')
            && !num.is_empty()
            && (next_digit
                || chars
                    .get(i + 1)
                    .is_some_and(|(_, n)| *n == '-' || *n == '+'))
        {
            num.push('e');
        } else if matches!(c, ',' | ' ' | '\u{2009}' | '\u{202f}' | '_' | '\'')
            && !num.is_empty()
            && next_digit
            && !num.contains('e')
        {
            // a separator between digit groups: the next three chars are digits
            let group: String = chars[i + 1..].iter().take(3).map(|(_, c)| *c).collect();
            let after = chars.get(i + 4).map(|(_, c)| *c);
            if group.len() == 3
                && group.chars().all(|c| c.is_ascii_digit())
                && !after.is_some_and(|a| a.is_ascii_digit())
            {
                // skip the separator
            } else {
                end = pos;
                break;
            }
        } else {
            end = pos;
            break;
        }
        i += 1;
        end = s.len();
        if i < chars.len() {
            end = chars[i].0;
        }
    }
    if num.is_empty() || !num.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    Some((num, s[end..].trim().to_string()))
}

/// Significant digits of a printed number ("13015449600" → "130154496",
/// "0.0013" → "13", "1.30" → "130") and the power of ten of the last one.
fn significant(num: &str) -> (String, i32) {
    let (mant, exp) = match num.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (num, 0),
    };
    let mant = mant.trim_start_matches(['+', '-']);
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let all: String = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let mut digits = all[lead..].to_string();
    let mut last_pow = -(frac.len() as i32) + exp;
    if frac.is_empty() {
        // trailing zeros of an integer are not significant
        let t = digits.trim_end_matches('0').len();
        last_pow += (digits.len() - t) as i32;
        digits.truncate(t);
    }
    if digits.is_empty() {
        digits.push('0');
    }
    (digits, last_pow)
}

/// Parse a claimed string for a quantity of dimension `target`. Errors are
/// human messages (the caller adds file and line).
pub fn parse_claimed(s: &str, target: Dim) -> Result<Claimed, String> {
    let t = s
        .trim()
        .trim_start_matches(['~', '≈', '<', '>', '='])
        .trim_start_matches("approx.")
        .trim_start_matches("about")
        .trim();
    let Some((num, unit)) = split(t) else {
        let w = normalize_word(t);
        if w.is_empty() {
            return Err("empty claimed value".into());
        }
        return Ok(Claimed::Verdict { word: w });
    };
    // "10^9", "· 10^9" are rare in claims files; a unit must be a word.
    let value: f64 = num
        .parse()
        .map_err(|_| format!("cannot read the number '{num}' in claimed value '{s}'"))?;
    if unit_table(&unit, target).is_none() && unit.chars().any(|c| c.is_ascii_digit()) {
        // A shape or label such as "4x16": compared as a word.
        return Ok(Claimed::Verdict {
            word: normalize_word(t),
        });
    }
    let (mul, d) = unit_table(&unit, target).ok_or_else(|| {
        format!(
            "unknown unit '{unit}' in claimed value '{s}' (expected e.g. 42 TB, 16 GiB, 1.3 ms, 4.6e14 FLOP/s, 13 billion, 262144)"
        )
    })?;
    let unit_dim = if unit.is_empty()
        || (d == Dim::Count && target != Dim::Count && unit_is_pure_multiplier(&unit))
    {
        None
    } else {
        Some(d)
    };
    if let Some(ud) = unit_dim {
        if ud != target {
            return Err(format!(
                "unit mismatch: claimed '{s}' is in {} but the quantity is in {}",
                ud.name(),
                target.name()
            ));
        }
    }
    let v = value * mul;
    if !v.is_finite() {
        // "1e400 s" reads as infinity, which would pass any tolerance
        return Err(format!(
            "claimed value '{s}' is out of range (beyond ±{:e} in base units)",
            f64::MAX
        ));
    }
    let (digits, last_pow) = significant(&num);
    let half_ulp = 0.5 * 10f64.powi(last_pow) * mul;
    let printed_rel_tol = if v == 0.0 {
        0.0
    } else {
        (half_ulp / v.abs()).max(1e-12)
    };
    Ok(Claimed::Number {
        value: v,
        unit_dim,
        printed_rel_tol,
        digits,
    })
}

fn unit_is_pure_multiplier(u: &str) -> bool {
    matches!(
        u.to_ascii_lowercase().as_str(),
        "k" | "thousand"
            | "million"
            | "millions"
            | "billion"
            | "billions"
            | "trillion"
            | "ki"
            | "mi"
            | "gi"
            | "bn"
    )
}

/// Normalise a verdict word: lower case, separators removed, synonyms folded.
pub fn normalize_word(s: &str) -> String {
    let w = crate::names::squash(s);
    match w.as_str() {
        "true" | "yes" | "fits" | "fit" | "ok" | "feasible" => "true".into(),
        "false" | "no" | "doesnotfit" | "doesntfit" | "notfit" | "oom" | "infeasible"
        | "notfeasible" => "false".into(),
        "commsbound" | "communicationbound" | "commbound" | "icibound" | "networkbound"
        | "collectivebound" => "commsbound".into(),
        "computebound" | "flopsbound" | "mathbound" | "flopbound" => "computebound".into(),
        "memorybound" | "hbmbound" | "bandwidthbound" | "membound" => "memorybound".into(),
        "latencybound" => "latencybound".into(),
        _ => w,
    }
}

/// Normalise a word a report gives (`bound` = "communication (fsdp)" or
/// "compute", `bound_decode` = "kv-load"): the parenthetical goes, and a
/// bare regime name becomes its "…-bound" word so it compares with claims
/// such as "comms-bound". Weight and KV loading are memory-bound.
pub fn normalize_report_word(s: &str) -> String {
    let head = s.split('(').next().unwrap_or(s);
    let w = normalize_word(head);
    match w.as_str() {
        "compute" | "math" | "flops" => "computebound".into(),
        "communication" | "comms" | "comm" | "collective" | "ici" => "commsbound".into(),
        "memory" | "hbm" | "weightload" | "kvload" => "memorybound".into(),
        "latency" => "latencybound".into(),
        _ => w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str, d: Dim) -> (f64, f64, String) {
        match parse_claimed(s, d).unwrap() {
            Claimed::Number {
                value,
                printed_rel_tol,
                digits,
                ..
            } => (value, printed_rel_tol, digits),
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn numbers_and_units() {
        assert_eq!(num("13,015,449,600", Dim::Count).0, 13_015_449_600.0);
        assert_eq!(num("18 385 207 246", Dim::Count).0, 18_385_207_246.0);
        assert_eq!(num("18 385 207 246", Dim::Count).2, "18385207246");
        assert_eq!(num("42 TB", Dim::Bytes).0, 42e12);
        assert_eq!(num("16 GiB", Dim::Bytes).0, 17_179_869_184.0);
        assert!((num("1.3 ms", Dim::Seconds).0 - 1.3e-3).abs() < 1e-15);
        assert_eq!(num("13 billion", Dim::Count).0, 13e9);
        assert_eq!(num("13B", Dim::Count).0, 13e9);
        assert_eq!(num("26e9 B", Dim::Bytes).0, 26e9);
        assert_eq!(num("4.59e14 FLOP/s", Dim::FlopsPerSec).0, 4.59e14);
        assert_eq!(num("8.2e11 B/s", Dim::BytesPerSec).0, 8.2e11);
        assert_eq!(num("400 Gb/s", Dim::BytesPerSec).0, 50e9);
        assert_eq!(num("3.2 Million", Dim::Count).0, 3.2e6);
        assert_eq!(num("7", Dim::Count).0, 7.0);
        let (_, tol, _) = num("42 TB", Dim::Bytes);
        assert!((tol - 0.5 / 42.0).abs() < 1e-12);
        let (_, tol, _) = num("13e9", Dim::Count);
        assert!((tol - 0.5 / 13.0).abs() < 1e-12);
    }

    #[test]
    fn mismatch_and_words() {
        assert!(parse_claimed("1.3 ms", Dim::Bytes)
            .unwrap_err()
            .contains("unit mismatch"));
        assert!(parse_claimed("42 TB", Dim::Seconds).is_err());
        assert_eq!(
            parse_claimed("does not fit", Dim::Count).unwrap(),
            Claimed::Verdict {
                word: "false".into()
            }
        );
        assert_eq!(
            parse_claimed("Comms-bound", Dim::Count).unwrap(),
            Claimed::Verdict {
                word: "commsbound".into()
            }
        );
    }

    #[test]
    fn keys_have_dimensions() {
        assert_eq!(dim_of_key("kv_cache_bytes_per_token"), Dim::Bytes);
        assert_eq!(dim_of_key("memory_per_device.total_bytes"), Dim::Bytes);
        assert_eq!(dim_of_key("step_time_at_mfu_s"), Dim::Seconds);
        assert_eq!(dim_of_key("hbm_bandwidth_bytes_per_s"), Dim::BytesPerSec);
        assert_eq!(dim_of_key("peak_flops_per_s.bf16"), Dim::FlopsPerSec);
        assert_eq!(dim_of_key("flops_per_token_training"), Dim::Flops);
        assert_eq!(dim_of_key("critical_intensity_hbm"), Dim::Count);
        assert_eq!(dim_of_key("params_total"), Dim::Count);
        assert_eq!(dim_of_key("max_batch"), Dim::Count);
        assert_eq!(normalize_report_word("communication (fsdp)"), "commsbound");
        assert_eq!(normalize_report_word("compute"), "computebound");
        assert_eq!(normalize_report_word("kv-load"), "memorybound");
    }
}
