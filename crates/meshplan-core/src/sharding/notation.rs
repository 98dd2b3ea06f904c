//! The book's sharding notation, parsed: an array `A[I_X, J_Y]` (optionally
//! with a dtype, `bf16[E_X, F]`, literal sizes, `bf16[2048_X, 8192]`, and
//! unreduced axes, `C[I, K]{U_X}`), an einsum of such arrays
//! (`A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]`) and dimension sizes
//! (`I=1024,J=4096`). Every error names the text at fault and what would
//! have been accepted.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::units::DType;

/// One dimension of an array: its name (or literal size) and the mesh axes
/// it is split over (`I_XY` → name `I`, axes `[X, Y]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DimSpec {
    /// The dimension's letter (`I`, `D`), or the literal size as written.
    pub name: String,
    /// The size when written literally (`2048_X`).
    pub size: Option<u64>,
    /// Mesh axes the dimension is sharded over, outermost first.
    pub axes: Vec<String>,
}

/// An array in the book's notation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArraySpec {
    /// Its name (`A`), if written.
    pub name: Option<String>,
    /// Its dtype (`bf16[…]`), if written.
    pub dtype: Option<DType>,
    /// Its dimensions, in order.
    pub dims: Vec<DimSpec>,
    /// Axes over which it holds unreduced partial sums (`{U_X}`).
    pub unreduced: Vec<String>,
}

impl ArraySpec {
    /// Every mesh axis the array uses (dimension shardings, then unreduced).
    pub fn axes(&self) -> impl Iterator<Item = &String> {
        self.dims
            .iter()
            .flat_map(|d| d.axes.iter())
            .chain(self.unreduced.iter())
    }
    /// The dimension named `n`, if any.
    pub fn dim(&self, n: &str) -> Option<&DimSpec> {
        self.dims.iter().find(|d| d.name == n)
    }
    /// Written back in the book's notation: `bf16[I_X, J]{U_Y}`.
    pub fn notation(&self) -> String {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|d| {
                if d.axes.is_empty() {
                    d.name.clone()
                } else {
                    format!("{}_{}", d.name, d.axes.concat())
                }
            })
            .collect();
        let head = match (&self.name, self.dtype) {
            (Some(n), _) => n.clone(),
            (None, Some(d)) => d.name().to_string(),
            (None, None) => String::new(),
        };
        let u = if self.unreduced.is_empty() {
            String::new()
        } else {
            format!("{{U_{}}}", self.unreduced.concat())
        };
        format!("{head}[{}]{u}", dims.join(", "))
    }
    /// An axis used twice in one array is meaningless (book ch3).
    fn check_axes_once(&self, text: &str) -> Result<()> {
        let mut seen: Vec<&String> = Vec::new();
        for a in self.axes() {
            if seen.contains(&a) {
                return Err(bad(
                    text,
                    &format!("each mesh axis at most once per array, but {a} appears twice"),
                ));
            }
            seen.push(a);
        }
        Ok(())
    }
}

/// How the inputs of an expression combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Combine {
    /// Multiply and sum over the dimensions not in the output (an einsum;
    /// without such dimensions, an element-wise product).
    Product,
    /// Element-wise sum (`+`).
    Sum,
}

/// `IN1 op IN2 -> OUT` (or a single input), as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Expr {
    /// The inputs, in order (one or two).
    pub inputs: Vec<ArraySpec>,
    /// How they combine.
    pub combine: Combine,
    /// The output, if written after `->`.
    pub output: Option<ArraySpec>,
}

fn bad(text: &str, expected: &str) -> Error {
    Error::BadValue {
        what: "array notation".into(),
        input: text.into(),
        expected: expected.into(),
    }
}

const ARRAY_FORM: &str =
    "an array like \"A[I_X, J_Y]\", \"bf16[E_X, F]\" or \"bf16[2048_X, 8192]{U_Y}\"";

fn ident_ok(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic()) && c.all(|x| x.is_ascii_alphanumeric())
}

/// Split `I_XY` into (`I`, [X, Y]); each letter after `_` is one mesh axis
/// (`I_{X,Y}` spells multi-letter axis names).
fn parse_dim(tok: &str, text: &str) -> Result<DimSpec> {
    let tok = tok.trim();
    let (name, axes) = match tok.split_once('_') {
        None => (tok, Vec::new()),
        Some((n, a)) => {
            let a = a.trim();
            let axes: Vec<String> =
                if let Some(inner) = a.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
                    inner.split(',').map(|x| x.trim().to_string()).collect()
                } else {
                    a.chars().map(|c| c.to_string()).collect()
                };
            if axes.is_empty() || axes.iter().any(|x| !ident_ok(x)) {
                return Err(bad(
                    text,
                    &format!("mesh axes after '_' in '{tok}', like I_X, I_XY or I_{{X,Y}}"),
                ));
            }
            (n.trim(), axes)
        }
    };
    if name.is_empty() {
        return Err(bad(
            text,
            &format!("a dimension name before '_' in '{tok}'"),
        ));
    }
    let size = if name.chars().all(|c| c.is_ascii_digit()) {
        match name.parse::<u64>() {
            Ok(0) | Err(_) => {
                return Err(bad(
                    text,
                    &format!("a dimension size from 1 to 2^64 - 1, not '{name}'"),
                ))
            }
            Ok(v) => Some(v),
        }
    } else if ident_ok(name) {
        None
    } else {
        return Err(bad(
            text,
            &format!("a dimension letter (I, D, …) or a size (2048), not '{name}'"),
        ));
    };
    Ok(DimSpec {
        name: name.to_string(),
        size,
        axes,
    })
}

/// Parse one array: `A[I_X, J_Y]`, `bf16[E_X, F]`, `A[I, K]{U_X}`, `bf16[]`.
pub fn parse_array(text: &str) -> Result<ArraySpec> {
    let t = text.trim();
    let (head, rest) = t.split_once('[').ok_or_else(|| bad(text, ARRAY_FORM))?;
    let (body, tail) = rest.split_once(']').ok_or_else(|| bad(text, ARRAY_FORM))?;
    let head = head.trim().trim_end_matches(':').trim();
    let (name, dtype) = if head.is_empty() {
        (None, None)
    } else if let Ok(d) = DType::parse(head) {
        (None, Some(d))
    } else if let Some((n, d)) = head.split_once([':', ' ']) {
        (Some(n.trim().to_string()), Some(DType::parse(d)?))
    } else if ident_ok(head) {
        (Some(head.to_string()), None)
    } else {
        return Err(bad(text, ARRAY_FORM));
    };
    let dims = if body.trim().is_empty() {
        Vec::new()
    } else {
        split_top(body, &[','])
            .iter()
            .map(|(d, _)| parse_dim(d, text))
            .collect::<Result<Vec<_>>>()?
    };
    let tail = tail.trim();
    let unreduced = if tail.is_empty() {
        Vec::new()
    } else {
        let inner = tail
            .strip_prefix('{')
            .and_then(|x| x.strip_suffix('}'))
            .and_then(|x| x.trim().strip_prefix("U_"))
            .ok_or_else(|| {
                bad(
                    text,
                    "nothing after ']' but unreduced axes like {U_X} or {U_XY}",
                )
            })?;
        parse_dim(&format!("U_{inner}"), text)?.axes
    };
    let a = ArraySpec {
        name,
        dtype,
        dims,
        unreduced,
    };
    a.check_axes_once(text)?;
    Ok(a)
}

/// Split at the top level (outside brackets and braces) on any of `seps`.
fn split_top(s: &str, seps: &[char]) -> Vec<(String, Option<char>)> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in s.chars() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            _ => {}
        }
        if depth == 0 && seps.contains(&c) {
            out.push((std::mem::take(&mut cur), Some(c)));
        } else {
            cur.push(c);
        }
    }
    out.push((cur, None));
    out
}

/// Parse `A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]`: one or two inputs joined by
/// `*`, `·`, `@`, `×` or `,` (multiply; an einsum) or `+` (element-wise sum),
/// optionally `-> OUTPUT`. A single array is an expression too.
pub fn parse_expr(text: &str) -> Result<Expr> {
    let (lhs, out) = match text.split_once("->") {
        Some((l, o)) => (l, Some(parse_array(o)?)),
        None => (text, None),
    };
    let parts = split_top(lhs, &['*', '·', '@', '×', ',', '+']);
    if parts.len() > 2 {
        return Err(bad(
            text,
            "one or two arrays joined by '*' (or '·', '@', ',') or '+', then optionally '-> OUTPUT'",
        ));
    }
    let combine = match parts[0].1 {
        Some('+') => Combine::Sum,
        _ => Combine::Product,
    };
    let inputs = parts
        .iter()
        .map(|(p, _)| parse_array(p))
        .collect::<Result<Vec<_>>>()?;
    Ok(Expr {
        inputs,
        combine,
        output: out,
    })
}

/// Dimension sizes: `I=1024,J=4096` (counts accept `8k`, `32Ki`, `16e6`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DimSizes(pub Vec<(String, u64)>);

impl DimSizes {
    /// Parse `I=1024, J=4Ki`; an empty string is no sizes.
    pub fn parse(text: &str) -> Result<DimSizes> {
        let mut v: Vec<(String, u64)> = Vec::new();
        for part in text.split([',', ' ']).filter(|p| !p.trim().is_empty()) {
            let (k, x) = part.split_once('=').ok_or_else(|| Error::BadValue {
                what: "dimension sizes".into(),
                input: text.into(),
                expected: "NAME=SIZE pairs like \"I=1024,J=4096\"".into(),
            })?;
            let size = crate::units::parse_count(x)?;
            if size == 0 {
                return Err(Error::Invalid(format!(
                    "dimension {} has size 0; sizes must be at least 1",
                    k.trim()
                )));
            }
            if v.iter().any(|(n, _)| n == k.trim()) {
                return Err(Error::Invalid(format!(
                    "dimension {} is given twice in \"{text}\"",
                    k.trim()
                )));
            }
            v.push((k.trim().to_string(), size));
        }
        Ok(DimSizes(v))
    }
    /// The size of `d`: written in the array, else given here.
    pub fn size_of(&self, d: &DimSpec) -> Result<u64> {
        if let Some(s) = d.size {
            return Ok(s);
        }
        self.0
            .iter()
            .find(|(n, _)| *n == d.name)
            .map(|(_, s)| *s)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "no size for dimension {}: give it with --dims {}=SIZE (or write the size in the array, e.g. [2048_X])",
                    d.name, d.name
                ))
            })
    }
    /// The global shape of `a`.
    pub fn shape(&self, a: &ArraySpec) -> Result<Vec<u64>> {
        a.dims.iter().map(|d| self.size_of(d)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays() {
        let a = parse_array("A[I_X, J_Y]").unwrap();
        assert_eq!(a.name.as_deref(), Some("A"));
        assert_eq!(a.dims[0].axes, vec!["X"]);
        assert_eq!(a.dims[1].axes, vec!["Y"]);
        let b = parse_array("bf16[2048_XY, F]{U_Z}").unwrap();
        assert_eq!(b.dtype, Some(DType::Bf16));
        assert_eq!(b.dims[0].size, Some(2048));
        assert_eq!(b.dims[0].axes, vec!["X", "Y"]);
        assert_eq!(b.unreduced, vec!["Z"]);
        assert_eq!(b.notation(), "bf16[2048_XY, F]{U_Z}");
        let c = parse_array("A[I_{X,Y}, J]").unwrap();
        assert_eq!(c.dims[0].axes, vec!["X", "Y"]);
        assert!(parse_array("A[I_X, J_X]").is_err());
        assert!(parse_array("A[I_X]{U_X}").is_err());
        assert!(parse_array("A[0_X]").is_err());
        assert!(parse_array("A I_X").is_err());
        assert!(parse_array("A[I_]").is_err());
    }

    #[test]
    fn expressions() {
        let e = parse_expr("A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]").unwrap();
        assert_eq!(e.inputs.len(), 2);
        assert_eq!(e.combine, Combine::Product);
        assert_eq!(e.output.unwrap().dims.len(), 2);
        let s = parse_expr("fp32[N] + fp32[N] -> fp32[N]").unwrap();
        assert_eq!(s.combine, Combine::Sum);
        assert!(parse_expr("A[I] * B[I] * C[I]").is_err());
    }

    #[test]
    fn sizes() {
        let d = DimSizes::parse("I=1024, J=4Ki").unwrap();
        assert_eq!(d.0[1], ("J".to_string(), 4096));
        assert!(DimSizes::parse("I=0").is_err());
        assert!(DimSizes::parse("I").is_err());
        assert!(DimSizes::parse("I=1,I=2").is_err());
    }
}
