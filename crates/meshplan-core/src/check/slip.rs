//! Slip hints: when a claimed number is wrong, the likely reason, recognised
//! from the ratio claimed/actual, the printed digits, and the report's other
//! keys.

use serde::Serialize;
use serde_json::Value;

use super::eval::leaf_paths;
use super::value::{dim_of_key, Dim};

/// The kinds of slip meshplan recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlipKind {
    /// Off by 10³, 10⁶, 10⁹ … (a wrong SI prefix).
    UnitPrefix,
    /// Off by 1.024ⁿ (decimal vs binary prefixes: GB vs GiB).
    DecimalVsBinary,
    /// Off by a factor 2, 3, 1/2 or 1/3.
    Factor,
    /// Total parameters given where active were asked, or vice versa.
    DenseVsMoe,
    /// Forward FLOPs given where training FLOPs were asked (×3), or vice versa.
    ForwardVsTraining,
    /// The claim equals another quantity of the same report.
    OtherQuantity,
    /// Same digits with one digit different, or two adjacent digits swapped.
    DigitTypo,
    /// Within 2%: the arithmetic is right but an input was rounded.
    RoundedInputs,
}

/// One hint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hint {
    /// Which slip.
    pub kind: SlipKind,
    /// One line for humans.
    pub message: String,
}

fn hint(kind: SlipKind, message: String) -> Option<Hint> {
    Some(Hint { kind, message })
}

fn close(a: f64, b: f64, eps: f64) -> bool {
    b != 0.0 && ((a / b) - 1.0).abs() <= eps
}

/// Recognise the slip behind a wrong number. `digits` are the claimed
/// significant digits as printed; `tol` the relative tolerance the claim was
/// judged with; `report` the whole report (for dense/MoE and other keys).
pub fn diagnose(
    quantity: &str,
    claimed: f64,
    digits: &str,
    actual: f64,
    tol: f64,
    report: &Value,
) -> Option<Hint> {
    if !claimed.is_finite() || !actual.is_finite() || actual == 0.0 || claimed == 0.0 {
        return None;
    }
    let r = claimed / actual;
    let eps = tol.clamp(0.005, 0.05);
    let last = quantity.rsplit('.').next().unwrap_or(quantity);
    let sibling = |from: &str, to: &str| -> Option<(String, f64)> {
        if !last.contains(from) {
            return None;
        }
        let p = quantity.replacen(from, to, 1);
        super::eval::lookup(report, &p)
            .and_then(Value::as_f64)
            .map(|v| (p, v))
    };
    // Dense vs MoE parameter count.
    for (from, to, asked, given) in [
        ("params_active", "params_total", "active", "total"),
        ("params_total", "params_active", "total", "active"),
        ("params_activated", "params_total", "active", "total"),
    ] {
        if let Some((p, v)) = sibling(from, to) {
            if v != actual && close(claimed, v, eps) {
                return hint(
                    SlipKind::DenseVsMoe,
                    format!("dense vs MoE parameter count: the claim equals the {given} parameters (`{p}` = {}), but the {asked} count was asked", fmt(v)),
                );
            }
        }
    }
    // Forward vs training FLOPs.
    if dim_of_key(quantity) == Dim::Flops || last.contains("flops") {
        for (f, asked, given) in [
            (3.0, "forward", "training (6·P)"),
            (1.0 / 3.0, "training", "forward (2·P)"),
        ] {
            if close(r, f, eps) {
                return hint(
                    SlipKind::ForwardVsTraining,
                    format!("forward vs training FLOPs: the claim is {given} FLOPs but {asked} FLOPs were asked (training = 3 × forward)"),
                );
            }
        }
    }
    // Another key of the same report: the closest to the claim (a report
    // can hold several near values, e.g. a step time and its p10).
    let other = leaf_paths(report)
        .into_iter()
        .filter(|(p, _)| p != quantity)
        .filter_map(|(p, v)| Some((p, v.as_f64()?)))
        .filter(|(p, x)| {
            *x != actual
                && *x != 0.0
                && close(claimed, *x, tol.clamp(1e-9, 0.02))
                && dim_of_key(p) == dim_of_key(quantity)
        })
        .min_by(|a, b| {
            let d = |x: f64| ((claimed - x) / x).abs();
            d(a.1).total_cmp(&d(b.1))
        });
    if let Some((p, x)) = other {
        return hint(
            SlipKind::OtherQuantity,
            format!(
                "the claim equals `{p}` = {} instead of `{quantity}`",
                fmt(x)
            ),
        );
    }
    // Wrong SI prefix.
    for k in [-5i32, -4, -3, -2, -1, 1, 2, 3, 4, 5] {
        let f = 1000f64.powi(k);
        if close(r, f, eps) {
            return hint(
                SlipKind::UnitPrefix,
                format!("wrong unit prefix: the claim is {}10^{} times the right value (e.g. MB for GB, ms for s)", if k > 0 { "" } else { "1/" }, 3 * k.abs()),
            );
        }
    }
    // 1e3 vs 1024.
    for n in 1..=4 {
        let f = 1.024f64.powi(n);
        for (g, dir) in [
            (f, "binary (Ki/Mi/Gi) where decimal was meant"),
            (1.0 / f, "decimal (k/M/G) where binary was meant"),
        ] {
            for k in -4..=4 {
                let target = g * 1000f64.powi(k);
                if close(r, target, 0.002) {
                    return hint(
                        SlipKind::DecimalVsBinary,
                        format!("1e3 vs 1024: the claim is off by 1.024^{n} = {:.6}{}, i.e. {dir} (GB vs GiB)", f, if k != 0 { " and a prefix" } else { "" }),
                    );
                }
            }
        }
    }
    // Factor 2 or 3.
    for (f, name) in [
        (2.0, "2"),
        (3.0, "3"),
        (0.5, "1/2"),
        (1.0 / 3.0, "1/3"),
        (4.0, "4"),
        (0.25, "1/4"),
    ] {
        if close(r, f, eps) {
            return hint(
                SlipKind::Factor,
                format!("off by a factor of {name}: claimed/meshplan = {:.4}", r),
            );
        }
    }
    // Rounding in the last printed digit: off by less than one unit of it.
    if tol > 0.0 && (claimed - actual).abs() < 2.0 * tol * actual.abs() {
        return hint(
            SlipKind::RoundedInputs,
            format!(
                "rounding: meshplan's {} is less than one unit of the last printed digit away, but rounds to a different number; rounded the wrong way or carried a rounded intermediate",
                crate::units::sig4(actual)
            ),
        );
    }
    // Digit typo.
    if let Some(m) = digit_typo(digits, actual) {
        return hint(SlipKind::DigitTypo, m);
    }
    // Rounded inputs (coarse claims of one or two digits can carry more).
    let limit = if digits.len() <= 2 { 0.08 } else { 0.02 };
    if (r - 1.0).abs() <= limit && tol < (r - 1.0).abs() {
        return hint(
            SlipKind::RoundedInputs,
            format!(
                "within {:.1}%: likely rounded inputs (e.g. 13e9 for 13.0154e9 parameters) or rounding of an intermediate result; the method is right",
                (r - 1.0).abs() * 100.0
            ),
        );
    }
    None
}

fn fmt(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e18 {
        crate::units::fmt_int(v.abs() as u64)
    } else {
        crate::units::sig4(v)
    }
}

/// The actual value's first `n` significant digits, rounded.
fn actual_digits(actual: f64, n: usize) -> String {
    let s = format!("{:.*e}", n.saturating_sub(1), actual.abs());
    let mant = s.split('e').next().unwrap_or("");
    mant.replace('.', "")
}

/// One digit different, or two adjacent digits swapped, at the printed precision.
pub fn digit_typo(digits: &str, actual: f64) -> Option<String> {
    let n = digits.len();
    if n < 3 {
        return None;
    }
    if !(0.1..10.0).contains(
        &(digits.parse::<f64>().unwrap_or(0.0)
            / actual_digits(actual, n).parse::<f64>().unwrap_or(1.0)),
    ) {
        return None;
    }
    let a = actual_digits(actual, n);
    if a.len() != n || a == digits {
        return None;
    }
    let c: Vec<char> = digits.chars().collect();
    let d: Vec<char> = a.chars().collect();
    let diff: Vec<usize> = (0..n).filter(|&i| c[i] != d[i]).collect();
    match diff.as_slice() {
        [i] => Some(format!(
            "digit typo: digit {} is '{}' but should be '{}' (claimed digits {digits}, right {a})",
            i + 1,
            c[*i],
            d[*i]
        )),
        [i, j] if *j == i + 1 && c[*i] == d[*j] && c[*j] == d[*i] => Some(format!(
            "digit typo: digits {} and {} are swapped (claimed digits {digits}, right {a})",
            i + 1,
            j + 1
        )),
        _ => None,
    }
}
