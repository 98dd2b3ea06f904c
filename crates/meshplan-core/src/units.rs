/*!
Typed physical quantities.

Every quantity is stored in its SI base unit (bytes, FLOPs, seconds, bytes/s,
FLOP/s). Prefixes appear only at the edges: in `parse` functions and in
`Display`. The types only implement operations that mean something, so
`Bytes + Seconds` or `Flops / BytesPerSec` does not compile:

```
use meshplan_core::units::{Bytes, BytesPerSec, Flops, FlopsPerSec, Seconds};
let t: Seconds = Flops::new(1e15) / FlopsPerSec::new(1e15);
let u: Seconds = Bytes::new(2e9) / BytesPerSec::new(1e9);
assert_eq!((t + u).get(), 3.0);
```

```compile_fail
use meshplan_core::units::{Bytes, Seconds};
let _ = Bytes::new(1.0) + Seconds::new(1.0);
```

## Prefix conventions

* `k`, `M`, `G`, `T`, `P` are decimal (1e3 …): `16 GB` = 16·10⁹ bytes,
  `128k` = 128,000.
* `Ki`, `Mi`, `Gi`, `Ti`, `Pi` are binary (2¹⁰ …): `16 GiB` = 17,179,869,184
  bytes, `128Ki` = 131,072.
* `B` is a byte, `b` a bit: `400 Gb/s` = 50 GB/s.

Counts ([`Params`], [`Tokens`]) are exact integers; physical quantities are
`f64`.
*/

use serde::{Serialize, Serializer};
use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul, Sub};

use crate::error::Error;

/// Format `v` with an SI prefix and 4 significant digits, e.g. `26.03 GB`.
pub fn fmt_si(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return format!("{v} {unit}");
    }
    const PREFIXES: [(f64, &str); 9] = [
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
        (1.0, ""),
        (1e-3, "m"),
        (1e-6, "µ"),
    ];
    let a = v.abs();
    if a == 0.0 {
        return format!("0 {unit}");
    }
    if a < 1e-6 {
        return format!("{} n{unit}", sig4(v * 1e9));
    }
    if a >= 1e21 {
        return format!("{v:.4e} {unit}");
    }
    for (scale, p) in PREFIXES {
        if a >= scale * 0.99995 {
            return format!("{} {p}{unit}", sig4(v / scale));
        }
    }
    format!("{} {unit}", sig4(v))
}

/// Four significant digits without trailing zeros.
pub fn sig4(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (v.abs().log10().floor() as i32).clamp(-20, 20);
    let decimals = (3 - digits).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// [`sig4`] for reading: the integer part of a number ≥ 10,000 grouped in
/// thousands ("922,783", "541,839.5" stays "541,840"): report lines only,
/// never derivations, where a comma would read as a list.
pub fn sig4_grouped(v: f64) -> String {
    let s = sig4(v);
    if !v.is_finite() || v.abs() < 1e4 {
        return s;
    }
    let (sign, rest) = s.strip_prefix('-').map_or(("", s.as_str()), |r| ("-", r));
    let (int, frac) = rest.split_once('.').map_or((rest, ""), |(i, f)| (i, f));
    let grouped = group_digits(int);
    match frac {
        "" => format!("{sign}{grouped}"),
        f => format!("{sign}{grouped}.{f}"),
    }
}

/// Format an integer with thousands separators: 13015449600 → "13,015,449,600".
pub fn fmt_int(v: u64) -> String {
    group_digits(&v.to_string())
}

/// A string of digits with a comma every three from the right.
fn group_digits(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

macro_rules! quantity {
    ($(#[$m:meta])* $name:ident, $unit:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
        pub struct $name(f64);

        impl $name {
            /// The unit symbol this quantity is stored and printed in.
            pub const UNIT: &'static str = $unit;
            /// Zero.
            pub const ZERO: Self = Self(0.0);
            /// Construct from a value in the base unit.
            #[inline]
            pub const fn new(v: f64) -> Self {
                Self(v)
            }
            /// The value in the base unit.
            #[inline]
            pub const fn get(self) -> f64 {
                self.0
            }
            /// The larger of two (roofline overlap).
            #[inline]
            pub fn max(self, o: Self) -> Self {
                Self(self.0.max(o.0))
            }
            /// The smaller of two.
            #[inline]
            pub fn min(self, o: Self) -> Self {
                Self(self.0.min(o.0))
            }
        }
        impl Add for $name {
            type Output = Self;
            #[inline]
            fn add(self, o: Self) -> Self {
                Self(self.0 + o.0)
            }
        }
        impl AddAssign for $name {
            #[inline]
            fn add_assign(&mut self, o: Self) {
                self.0 += o.0;
            }
        }
        impl Sub for $name {
            type Output = Self;
            #[inline]
            fn sub(self, o: Self) -> Self {
                Self(self.0 - o.0)
            }
        }
        impl Mul<f64> for $name {
            type Output = Self;
            #[inline]
            fn mul(self, k: f64) -> Self {
                Self(self.0 * k)
            }
        }
        impl Mul<$name> for f64 {
            type Output = $name;
            #[inline]
            fn mul(self, q: $name) -> $name {
                $name(self * q.0)
            }
        }
        impl Div<f64> for $name {
            type Output = Self;
            #[inline]
            fn div(self, k: f64) -> Self {
                Self(self.0 / k)
            }
        }
        /// A ratio of two like quantities is a plain number.
        impl Div for $name {
            type Output = f64;
            #[inline]
            fn div(self, o: Self) -> f64 {
                self.0 / o.0
            }
        }
        impl Sum for $name {
            fn sum<I: Iterator<Item = Self>>(it: I) -> Self {
                Self(it.map(|q| q.0).sum())
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&fmt_si(self.0, $unit))
            }
        }
        /// Serialized as a bare number in the base unit (JSON is SI).
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_f64(self.0)
            }
        }
    };
}

quantity!(
    /// Bytes of memory or data moved (base unit: byte, `B`).
    Bytes,
    "B"
);
quantity!(
    /// Floating-point (or integer) operations, a count of work (`FLOPs`).
    Flops,
    "FLOPs"
);
quantity!(
    /// Time (base unit: second, `s`).
    Seconds,
    "s"
);
quantity!(
    /// Compute throughput (`FLOP/s`); the book's C.
    FlopsPerSec,
    "FLOP/s"
);
quantity!(
    /// Data rate (`B/s`); the book's W. A bare `BytesPerSec` is one-way; links
    /// carry their direction in [`LinkBandwidth`].
    BytesPerSec,
    "B/s"
);
quantity!(
    /// Money in US dollars.
    Usd,
    "USD"
);

impl Bytes {
    /// Value in GiB (2^30 bytes).
    pub fn gib(self) -> f64 {
        self.0 / (1u64 << 30) as f64
    }
    /// Value in GB (1e9 bytes).
    pub fn gb(self) -> f64 {
        self.0 / 1e9
    }
    /// `"26.03 GB (24.24 GiB)"`: both conventions, never confused.
    pub fn both(self) -> String {
        format!("{} ({} GiB)", self, sig4(self.gib()))
    }
}

impl Seconds {
    /// Human duration: picks s, ms, µs, or minutes/hours/days for long times.
    pub fn human(self) -> String {
        let s = self.0;
        if s >= 86400.0 * 2.0 {
            format!("{} days", sig4(s / 86400.0))
        } else if s >= 7200.0 {
            format!("{} h", sig4(s / 3600.0))
        } else {
            fmt_si(s, "s")
        }
    }
}

/// Dimensional algebra between two quantities: `unit_algebra!(A / B = C)`
/// divides, `unit_algebra!(A * B = C)` multiplies, in base units.
macro_rules! unit_algebra {
    ($a:ident / $b:ident = $out:ident) => {
        impl Div<$b> for $a {
            type Output = $out;
            #[inline]
            fn div(self, b: $b) -> $out {
                $out(self.0 / b.0)
            }
        }
    };
    ($a:ident * $b:ident = $out:ident) => {
        impl Mul<$b> for $a {
            type Output = $out;
            #[inline]
            fn mul(self, b: $b) -> $out {
                $out(self.0 * b.0)
            }
        }
    };
}

// time = work / rate; rate = work / time; work = rate · time
unit_algebra!(Flops / FlopsPerSec = Seconds);
unit_algebra!(Bytes / BytesPerSec = Seconds);
unit_algebra!(Flops / Seconds = FlopsPerSec);
unit_algebra!(Bytes / Seconds = BytesPerSec);
unit_algebra!(FlopsPerSec * Seconds = Flops);
unit_algebra!(BytesPerSec * Seconds = Bytes);

/// C / W: the critical arithmetic intensity of a chip, in FLOPs per byte.
impl Div<BytesPerSec> for FlopsPerSec {
    type Output = f64;
    #[inline]
    fn div(self, w: BytesPerSec) -> f64 {
        self.0 / w.0
    }
}

/// Bandwidth of a link with its direction made explicit.
///
/// Stored as the one-way rate (bytes/s in one direction). The Scaling Book's
/// TPU chapters quote the "bidirectional" per-axis figure, which is twice the
/// one-way rate of one link; GPU chapters quote one-way egress. Ask for the one
/// you mean: there is no bare getter.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd, Serialize)]
pub struct LinkBandwidth {
    one_way: BytesPerSec,
}

impl LinkBandwidth {
    /// From a one-way rate.
    pub const fn one_way(w: BytesPerSec) -> Self {
        Self { one_way: w }
    }
    /// From a bidirectional rate (both directions added): one-way = half.
    pub fn from_bidirectional(w: BytesPerSec) -> Self {
        Self {
            one_way: BytesPerSec(w.0 / 2.0),
        }
    }
    /// Bytes/s in one direction.
    pub const fn one_way_rate(self) -> BytesPerSec {
        self.one_way
    }
    /// Bytes/s in both directions together (2 × one-way): the book's W_ici for
    /// a TPU axis with wraparound.
    pub fn bidirectional_rate(self) -> BytesPerSec {
        BytesPerSec(self.one_way.0 * 2.0)
    }
}

/// An exact parameter count (the book's "params").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Params(pub u64);

impl Params {
    /// Bytes these parameters take in `dtype`.
    pub fn bytes(self, dtype: DType) -> Bytes {
        dtype.bytes_for(self.0)
    }
    /// As a float (for FLOP arithmetic).
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
}
impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({})",
            fmt_int(self.0),
            fmt_si(self.0 as f64, "params")
        )
    }
}
impl Add for Params {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self(self.0 + o.0)
    }
}

/// A count of tokens (the book's B when B counts tokens, T, S).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Tokens(pub u64);

impl fmt::Display for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tokens", fmt_int(self.0))
    }
}

/// Numeric storage formats.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    serde::Deserialize,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "lowercase")]
#[strum(ascii_case_insensitive)]
pub enum DType {
    /// 32-bit float.
    #[strum(to_string = "fp32", serialize = "float32", serialize = "f32")]
    Fp32,
    /// bfloat16.
    #[strum(to_string = "bf16", serialize = "bfloat16")]
    Bf16,
    /// IEEE half.
    #[strum(
        to_string = "fp16",
        serialize = "float16",
        serialize = "f16",
        serialize = "half"
    )]
    Fp16,
    /// 8-bit float (e4m3/e5m2).
    #[strum(
        to_string = "fp8",
        serialize = "float8",
        serialize = "f8",
        serialize = "e4m3",
        serialize = "e5m2"
    )]
    Fp8,
    /// 8-bit integer.
    #[strum(to_string = "int8", serialize = "i8", serialize = "s8")]
    Int8,
    /// 4-bit integer (two per byte).
    #[strum(to_string = "int4", serialize = "i4", serialize = "s4")]
    Int4,
    /// 4-bit float (e2m1; NVFP4, MXFP4).
    #[strum(
        to_string = "fp4",
        serialize = "float4",
        serialize = "e2m1",
        serialize = "nvfp4",
        serialize = "mxfp4"
    )]
    Fp4,
}

impl DType {
    /// All dtypes, widest first.
    pub const ALL: [DType; 7] = [
        DType::Fp32,
        DType::Bf16,
        DType::Fp16,
        DType::Fp8,
        DType::Int8,
        DType::Int4,
        DType::Fp4,
    ];
    /// Bits per element.
    pub const fn bits(self) -> u32 {
        match self {
            DType::Fp32 => 32,
            DType::Bf16 | DType::Fp16 => 16,
            DType::Fp8 | DType::Int8 => 8,
            DType::Int4 | DType::Fp4 => 4,
        }
    }
    /// Bytes per element (0.5 for int4).
    pub fn bytes_per_element(self) -> f64 {
        self.bits() as f64 / 8.0
    }
    /// Bytes for `n` elements; exact for every dtype (int4 rounds up to whole bytes).
    pub fn bytes_for(self, n: u64) -> Bytes {
        let bits = n as u128 * self.bits() as u128;
        Bytes(bits.div_ceil(8) as f64)
    }
    /// Canonical lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Fp32 => "fp32",
            DType::Bf16 => "bf16",
            DType::Fp16 => "fp16",
            DType::Fp8 => "fp8",
            DType::Int8 => "int8",
            DType::Int4 => "int4",
            DType::Fp4 => "fp4",
        }
    }
    /// Parse "bf16", "bfloat16", "fp8", "int8", "float32", … (case-insensitive).
    pub fn parse(s: &str) -> Result<DType, Error> {
        crate::names::parse_choice("dtype", s)
    }
}
impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ---------------------------------------------------------------- parsing

/// Split "3.35 TB/s" into (3.35, "TB/s"); accepts "1.97e14", "128k", "16GiB".
fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let bytes = s.as_bytes();
    let mut end = 0;
    let mut seen_e = false;
    while end < bytes.len() {
        let c = bytes[end] as char;
        let ok = c.is_ascii_digit()
            || c == '.'
            || c == '_'
            || c == ','
            || ((c == '+' || c == '-')
                && (end == 0 || matches!(bytes[end - 1] as char, 'e' | 'E')))
            || ((c == 'e' || c == 'E')
                && !seen_e
                && end > 0
                && bytes
                    .get(end + 1)
                    .is_some_and(|n| n.is_ascii_digit() || *n == b'-' || *n == b'+'));
        if !ok {
            break;
        }
        if c == 'e' || c == 'E' {
            seen_e = true;
        }
        end += 1;
    }
    let num: String = s[..end]
        .chars()
        .filter(|c| *c != '_' && *c != ',')
        .collect();
    let v: f64 = num.parse().ok()?;
    Some((v, s[end..].trim()))
}

/// A prefix multiplier at the start of `u`, returning (factor, rest).
/// Binary prefixes (Ki…) are tried first so that "Gi" is not read as "G".
fn prefix(u: &str) -> (f64, &str) {
    const BIN: [(&str, f64); 5] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
    ];
    for (p, f) in BIN {
        if let Some(r) = u.strip_prefix(p) {
            return (f, r);
        }
    }
    const DEC: [(&str, f64); 9] = [
        ("k", 1e3),
        ("K", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("m", 1e-3),
        ("u", 1e-6),
    ];
    for (p, f) in DEC {
        if let Some(r) = u.strip_prefix(p) {
            return (f, r);
        }
    }
    if let Some(r) = u.strip_prefix('µ') {
        return (1e-6, r);
    }
    if let Some(r) = u.strip_prefix('n') {
        return (1e-9, r);
    }
    (1.0, u)
}

fn bad(what: &str, input: &str, expected: &str) -> Error {
    Error::BadValue {
        what: what.into(),
        input: input.into(),
        expected: expected.into(),
    }
}

fn finite_nonneg(what: &str, input: &str, v: f64, expected: &str) -> Result<f64, Error> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(bad(what, input, expected))
    }
}

/// Parse a byte size: "16 GB", "16 GiB", "512 MiB", "1.5e9 B", "80GB", "42 TB".
/// A bare number is bytes. Bits ("Gb") are accepted and divided by 8.
pub fn parse_bytes(s: &str) -> Result<Bytes, Error> {
    const EXP: &str = "a size like \"16 GB\", \"16 GiB\" or \"1.5e9 B\"";
    let (v, unit) = split_number(s).ok_or_else(|| bad("size", s, EXP))?;
    let (f, base) = prefix(unit);
    let base_f = match base.trim() {
        "" if unit.is_empty() => 1.0,
        "B" | "byte" | "bytes" => 1.0,
        "b" | "bit" | "bits" => 0.125,
        _ => return Err(bad("size", s, EXP)),
    };
    let f = if unit.is_empty() { 1.0 } else { f };
    Ok(Bytes(finite_nonneg("size", s, v * f * base_f, EXP)?))
}

/// Parse a data rate: "3.35 TB/s", "450 GB/s", "400 Gb/s", "400 Gbps", "8.2e11 B/s".
pub fn parse_bytes_per_sec(s: &str) -> Result<BytesPerSec, Error> {
    const EXP: &str = "a rate like \"3.35 TB/s\", \"400 Gb/s\" or \"8.2e11 B/s\"";
    let (v, unit) = split_number(s).ok_or_else(|| bad("bandwidth", s, EXP))?;
    let u = unit.trim();
    let (f, base) = prefix(u);
    let base_f = match base.trim() {
        "B/s" | "Bps" | "bytes/s" => 1.0,
        "b/s" | "bps" | "bit/s" | "bits/s" => 0.125,
        _ => return Err(bad("bandwidth", s, EXP)),
    };
    Ok(BytesPerSec(finite_nonneg(
        "bandwidth",
        s,
        v * f * base_f,
        EXP,
    )?))
}

/// Parse a compute rate: "989 TFLOP/s", "1.97e14 FLOP/s", "918 TOPS", "2.25 PFLOPS".
pub fn parse_flops_per_sec(s: &str) -> Result<FlopsPerSec, Error> {
    const EXP: &str = "a rate like \"989 TFLOP/s\" or \"1.97e14 FLOP/s\"";
    let (v, unit) = split_number(s).ok_or_else(|| bad("FLOP/s", s, EXP))?;
    let (f, base) = prefix(unit.trim());
    match base.trim() {
        "FLOP/s" | "FLOPs/s" | "FLOPS" | "flop/s" | "OP/s" | "OPS" | "TOPS" | "ops/s" => {}
        _ => return Err(bad("FLOP/s", s, EXP)),
    }
    Ok(FlopsPerSec(finite_nonneg("FLOP/s", s, v * f, EXP)?))
}

/// Parse a FLOP count: "6.3e24 FLOPs", "62.4 GFLOPs", or a bare number.
pub fn parse_flops(s: &str) -> Result<Flops, Error> {
    const EXP: &str = "a count like \"6.3e24 FLOPs\" or \"62.4 GFLOPs\"";
    let (v, unit) = split_number(s).ok_or_else(|| bad("FLOPs", s, EXP))?;
    if unit.is_empty() {
        return Ok(Flops(finite_nonneg("FLOPs", s, v, EXP)?));
    }
    let (f, base) = prefix(unit.trim());
    match base.trim() {
        "FLOP" | "FLOPs" | "FLOPS" | "flops" | "OPs" => {}
        _ => return Err(bad("FLOPs", s, EXP)),
    }
    Ok(Flops(finite_nonneg("FLOPs", s, v * f, EXP)?))
}

/// Parse a duration: "1.3 ms", "1 us", "1 µs", "0.3 s", "17 days", "2 h", "5 min".
pub fn parse_seconds(s: &str) -> Result<Seconds, Error> {
    const EXP: &str = "a duration like \"1.3 ms\", \"1 us\" or \"17 days\"";
    let (v, unit) = split_number(s).ok_or_else(|| bad("duration", s, EXP))?;
    let f = match unit.trim() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" | "μs" => 1e-6,
        "ns" => 1e-9,
        "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        _ => return Err(bad("duration", s, EXP)),
    };
    Ok(Seconds(finite_nonneg("duration", s, v * f, EXP)?))
}

/// Parse a count: "3M" = 3,000,000, "128k" = 128,000, "128Ki" = 131,072,
/// "16e6", "32768", "1.5B" = 1.5e9 (B = billion for counts), "7T" = 7e12.
/// The result must be a whole non-negative number that fits in u64.
pub fn parse_count(s: &str) -> Result<u64, Error> {
    const EXP: &str =
        "a whole count like \"3M\", \"128k\" (=128,000), \"128Ki\" (=131,072) or \"16e6\"";
    // plain digits are read exactly (through f64, 2^64 − 1 would round up
    // to 2^64 and be refused as if it were not a whole count)
    let digits = s.trim();
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return digits.parse::<u64>().map_err(|_| {
            bad(
                "count",
                s,
                "a count of at most 18446744073709551615 (2^64 − 1)",
            )
        });
    }
    let (v, unit) = split_number(s).ok_or_else(|| bad("count", s, EXP))?;
    let u = unit.trim();
    let f = match u {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" | "m" => 1e6,
        "B" | "G" | "b" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1048576.0,
        "Gi" => 1073741824.0,
        _ => return Err(bad("count", s, EXP)),
    };
    let x = v * f;
    // 2^64 is exactly representable; every f64 below it rounds to a u64.
    if !x.is_finite() || !(0.0..18_446_744_073_709_551_616.0).contains(&x) {
        return Err(bad("count", s, EXP));
    }
    let r = x.round();
    if (x - r).abs() > 1e-6 * x.max(1.0) {
        return Err(bad("count", s, "a whole number"));
    }
    Ok(r as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_dimensions() {
        let t: Seconds = Flops::new(2e15) / FlopsPerSec::new(1e15);
        assert_eq!(t.get(), 2.0);
        let t: Seconds = Bytes::new(8.2e11) / BytesPerSec::new(8.2e11);
        assert_eq!(t.get(), 1.0);
        let c: FlopsPerSec = Flops::new(10.0) / Seconds::new(2.0);
        assert_eq!(c.get(), 5.0);
        let b: Bytes = BytesPerSec::new(3.0) * Seconds::new(2.0);
        assert_eq!(b.get(), 6.0);
        let i: f64 = FlopsPerSec::new(1.97e14) / BytesPerSec::new(8.2e11);
        assert!((i - 240.24).abs() < 0.01);
    }

    #[test]
    fn gb_and_gib_are_distinct() {
        assert_eq!(parse_bytes("16 GB").unwrap().get(), 16e9);
        assert_eq!(parse_bytes("16 GiB").unwrap().get(), 17_179_869_184.0);
        assert_eq!(parse_bytes("16GiB").unwrap().gib(), 16.0);
        assert_eq!(parse_bytes("42 TB").unwrap().get(), 42e12);
        assert_eq!(parse_bytes("1024").unwrap().get(), 1024.0);
        assert_eq!(parse_bytes("8 Gb").unwrap().get(), 1e9);
        assert!(parse_bytes("16 GFLOP").is_err());
        assert!(parse_bytes("-1 GB").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_bytes_per_sec("3.35 TB/s").unwrap().get(), 3.35e12);
        assert_eq!(parse_bytes_per_sec("400 Gb/s").unwrap().get(), 50e9);
        assert_eq!(parse_bytes_per_sec("400 Gbps").unwrap().get(), 50e9);
        assert_eq!(parse_bytes_per_sec("8.2e11 B/s").unwrap().get(), 8.2e11);
        assert_eq!(parse_flops_per_sec("989 TFLOP/s").unwrap().get(), 989e12);
        assert_eq!(
            parse_flops_per_sec("1.97e14 FLOP/s").unwrap().get(),
            1.97e14
        );
        assert_eq!(parse_flops_per_sec("2.25 PFLOP/s").unwrap().get(), 2.25e15);
        assert!(parse_flops_per_sec("989 TB/s").is_err());
        assert!(parse_bytes_per_sec("450 GB").is_err());
    }

    #[test]
    fn counts_decimal_and_binary() {
        assert_eq!(parse_count("3M").unwrap(), 3_000_000);
        assert_eq!(parse_count("128k").unwrap(), 128_000);
        assert_eq!(parse_count("128K").unwrap(), 128_000);
        assert_eq!(parse_count("128Ki").unwrap(), 131_072);
        assert_eq!(parse_count("16e6").unwrap(), 16_000_000);
        assert_eq!(parse_count("32,768").unwrap(), 32_768);
        assert_eq!(parse_count("1.5B").unwrap(), 1_500_000_000);
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("-3").is_err());
        assert!(parse_count("1e30").is_err());
        // The whole u64 range is accepted, 2^64 is not.
        assert_eq!(parse_count("1.8e19").unwrap(), 18_000_000_000_000_000_000);
        assert!(parse_count("18446744073709551616").is_err());
        assert!(parse_count("abc").is_err());
        assert!(parse_count("").is_err());
    }

    #[test]
    fn durations() {
        assert!((parse_seconds("1.3 ms").unwrap().get() - 1.3e-3).abs() < 1e-15);
        assert!((parse_seconds("1 us").unwrap().get() - 1e-6).abs() < 1e-18);
        assert_eq!(parse_seconds("17 days").unwrap().get(), 17.0 * 86400.0);
    }

    #[test]
    fn link_direction_is_explicit() {
        let l = LinkBandwidth::one_way(BytesPerSec::new(4.5e10));
        assert_eq!(l.bidirectional_rate().get(), 9e10);
        let b = LinkBandwidth::from_bidirectional(BytesPerSec::new(9e10));
        assert_eq!(b.one_way_rate().get(), 4.5e10);
    }

    #[test]
    fn dtype_bytes() {
        assert_eq!(DType::Int4.bytes_for(3).get(), 2.0);
        assert_eq!(DType::Bf16.bytes_for(10).get(), 20.0);
        assert_eq!(Params(13).bytes(DType::Fp32).get(), 52.0);
        assert_eq!(DType::parse("bfloat16").unwrap(), DType::Bf16);
        assert!(DType::parse("fp12").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_si(26.03e9, "B"), "26.03 GB");
        assert_eq!(fmt_si(1.3e-3, "s"), "1.3 ms");
        assert_eq!(fmt_int(13015449600), "13,015,449,600");
        assert_eq!(sig4(0.0013), "0.0013");
        assert_eq!(sig4_grouped(922_783.0), "922,783");
        assert_eq!(sig4_grouped(541_839.4), "541,839");
        assert_eq!(sig4_grouped(-12_345.0), "-12,345");
        assert_eq!(sig4_grouped(9_999.0), "9999");
        assert_eq!(sig4_grouped(5945.25), "5945");
        assert_eq!(sig4_grouped(1.5e15), "1,500,000,000,000,000");
        assert_eq!(Bytes::new(16.0 * 1073741824.0).both(), "17.18 GB (16 GiB)");
    }
}
