//! A mesh of named axes as the book writes it (`X=4,Y=2`; `Mesh(devices,
//! ('X', 'Y'))`), laid on a chip: on a TPU each named axis is one physical
//! torus axis (wraparound by the chip's rule unless forced with `:wrap` /
//! `:nowrap`), an axis marked `:dcn` joins slices over the data-centre
//! network; on GPUs the last axis is innermost and fills the NVLink domain
//! first. A shape (`4x4`, `2*16x16x16`, GPU `NODESxGPUS`) names its axes X,
//! Y, Z (and S for the slices).

use serde::Serialize;

use crate::catalog::suggestions;
use crate::collectives::AxisPlacement;
use crate::error::{Error, Result};
use crate::hardware::{parse_shape, Chip, ChipKind};

/// How an axis is linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AxisLink {
    /// By the chip's rules (TPU wraparound rule; GPU NVLink then scale-out).
    Auto,
    /// TPU: force a wraparound link.
    Wrap,
    /// TPU: force no wraparound link.
    NoWrap,
    /// TPU slices joined over DCN.
    Dcn,
}

/// One named mesh axis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NamedAxis {
    /// Its name (`X`).
    pub name: String,
    /// Devices along it.
    pub size: u64,
    /// How it is linked.
    pub link: AxisLink,
}

/// A mesh of named axes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NamedMesh {
    /// The axes, outermost first.
    pub axes: Vec<NamedAxis>,
}

const MESH_FORM: &str = "named axes like \"X=4,Y=2\" (\"X=4:nowrap\", \"S=2:dcn\"), or a shape like \"4x4\", \"2*16x16x16\" (GPUs: NODESxGPUS, or a GPU count)";
const NAMES: [&str; 6] = ["X", "Y", "Z", "W", "V", "U"];

fn bad(text: &str) -> Error {
    Error::BadValue {
        what: "mesh".into(),
        input: text.into(),
        expected: MESH_FORM.into(),
    }
}

impl NamedMesh {
    /// Parse a mesh for `chip` (see the module docs).
    pub fn parse(text: &str, chip: &Chip) -> Result<NamedMesh> {
        let t = text.trim();
        let axes = if t.contains('=') {
            Self::parse_named(t)?
        } else {
            let (slices, rest) = match t.split_once('*') {
                Some((s, r)) => (
                    Some(crate::units::parse_count(s).map_err(|_| bad(text))?),
                    r,
                ),
                None => (None, t),
            };
            let shape = parse_shape(rest).map_err(|_| bad(text))?;
            if shape.len() > NAMES.len() {
                return Err(bad(text));
            }
            let mut v: Vec<NamedAxis> = slices
                .map(|s| NamedAxis {
                    name: "S".into(),
                    size: s,
                    link: AxisLink::Dcn,
                })
                .into_iter()
                .collect();
            v.extend(shape.iter().zip(NAMES).map(|(&s, n)| NamedAxis {
                name: n.into(),
                size: s,
                link: AxisLink::Auto,
            }));
            v
        };
        let m = NamedMesh { axes };
        m.validate(text, chip)?;
        Ok(m)
    }

    fn parse_named(t: &str) -> Result<Vec<NamedAxis>> {
        let mut v: Vec<NamedAxis> = Vec::new();
        for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, rest) = part.split_once('=').ok_or_else(|| bad(t))?;
            let (size, link) = match rest.split_once(':') {
                None => (rest, AxisLink::Auto),
                Some((s, l)) => (
                    s,
                    match l.trim().to_ascii_lowercase().as_str() {
                        "wrap" => AxisLink::Wrap,
                        "nowrap" | "no-wrap" => AxisLink::NoWrap,
                        "dcn" => AxisLink::Dcn,
                        _ => return Err(bad(t)),
                    },
                ),
            };
            let name = name.trim();
            let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric());
            if !ok {
                return Err(bad(t));
            }
            if v.iter().any(|a| a.name == name) {
                return Err(Error::Invalid(format!(
                    "mesh axis {name} is named twice in \"{t}\""
                )));
            }
            v.push(NamedAxis {
                name: name.into(),
                size: crate::units::parse_count(size)?,
                link,
            });
        }
        if v.is_empty() {
            return Err(bad(t));
        }
        Ok(v)
    }

    fn validate(&self, text: &str, chip: &Chip) -> Result<()> {
        if let Some(a) = self.axes.iter().find(|a| a.size == 0) {
            return Err(Error::Invalid(format!(
                "mesh axis {} has size 0; every axis needs at least 1 device",
                a.name
            )));
        }
        let total = self.checked_devices().ok_or_else(|| {
            Error::Invalid(format!(
                "the mesh \"{text}\" has more than 2^64 - 1 devices"
            ))
        })?;
        match (&chip.ici, chip.kind) {
            (Some(ici), ChipKind::Tpu) => {
                let ici_axes = self.axes.iter().filter(|a| a.link != AxisLink::Dcn).count();
                if ici_axes as u64 > ici.torus_dims {
                    return Err(Error::Invalid(format!(
                        "{} has a {}D torus, but the mesh \"{text}\" has {ici_axes} ICI axes; name at most {} (split a dimension over several with A[I_XY])",
                        chip.name, ici.torus_dims, ici.torus_dims
                    )));
                }
                if self.axes.iter().filter(|a| a.link == AxisLink::Dcn).count() > 1 {
                    return Err(Error::Invalid("at most one :dcn axis".into()));
                }
                let slice = self.slice_chips();
                if slice > ici.max_slice_chips() {
                    return Err(Error::Invalid(format!(
                        "the ICI axes of \"{text}\" need a slice of {slice} chips, more than the {} of a {} pod; join slices over DCN with S=N:dcn",
                        ici.max_slice_chips(),
                        chip.name
                    )));
                }
            }
            _ => {
                if let Some(a) = self.axes.iter().find(|a| a.link != AxisLink::Auto) {
                    return Err(Error::Invalid(format!(
                        "axis {}: wrap/nowrap/dcn apply to TPU slices, not to {}",
                        a.name, chip.name
                    )));
                }
                let dom = chip.nvlink.as_ref().map_or(1, |n| n.domain_size);
                if total > dom && chip.scale_out.is_none() {
                    return Err(Error::Invalid(format!(
                        "{} has no scale-out network in the catalog; at most {dom} GPUs",
                        chip.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// Devices in the mesh, `None` on overflow.
    pub fn checked_devices(&self) -> Option<u64> {
        self.axes
            .iter()
            .try_fold(1u64, |acc, a| acc.checked_mul(a.size))
    }

    /// Devices in the mesh (checked when parsed).
    pub fn devices(&self) -> u64 {
        self.checked_devices().unwrap_or(u64::MAX)
    }

    /// Chips of one slice (the product of the non-DCN axes).
    pub fn slice_chips(&self) -> u64 {
        self.axes
            .iter()
            .filter(|a| a.link != AxisLink::Dcn)
            .map(|a| a.size)
            .product()
    }

    /// The axis called `name`; an error names the mesh's axes and the closest.
    pub fn axis(&self, name: &str) -> Result<&NamedAxis> {
        self.axes.iter().find(|a| a.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.axes.iter().map(|a| a.name.as_str()).collect();
            let sug = suggestions(name, names.iter().copied());
            Error::Invalid(format!(
                "axis {name} is not in the mesh {} (axes: {}){}",
                self.describe(),
                names.join(", "),
                if sug.is_empty() {
                    String::new()
                } else {
                    format!("; did you mean {}?", sug.join(", "))
                }
            ))
        })
    }

    /// The product of the sizes of `names` (each must be in the mesh).
    pub fn size_of(&self, names: &[String]) -> Result<u64> {
        names
            .iter()
            .try_fold(1u64, |acc, n| Ok(acc.saturating_mul(self.axis(n)?.size)))
    }

    /// `X=4, Y=2 (nowrap)`.
    pub fn describe(&self) -> String {
        self.axes
            .iter()
            .map(|a| {
                let l = match a.link {
                    AxisLink::Auto => "",
                    AxisLink::Wrap => ":wrap",
                    AxisLink::NoWrap => ":nowrap",
                    AxisLink::Dcn => ":dcn",
                };
                format!("{}={}{l}", a.name, a.size)
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// GPUs of each axis inside one NVLink domain: the last axis fills the
    /// domain first.
    fn per_node(&self, domain: u64) -> Vec<u64> {
        let mut cap = domain.max(1);
        let mut out = vec![1; self.axes.len()];
        for (i, a) in self.axes.iter().enumerate().rev() {
            let g = gcd(a.size, cap);
            out[i] = g;
            cap /= g;
        }
        out
    }

    /// Where a collective over `names` runs on `chip`.
    pub fn placement(&self, chip: &Chip, names: &[String]) -> Result<AxisPlacement> {
        let idx: Vec<usize> = names
            .iter()
            .map(|n| {
                let a = self.axis(n)?;
                Ok(self.axes.iter().position(|x| x.name == a.name).unwrap_or(0))
            })
            .collect::<Result<_>>()?;
        let ici = match (&chip.ici, chip.kind) {
            (Some(i), ChipKind::Tpu) => i,
            _ => {
                let dom = chip.nvlink.as_ref().map_or(1, |n| n.domain_size);
                let pn = self.per_node(dom);
                let size = idx.iter().map(|&i| self.axes[i].size).product();
                let per = idx.iter().map(|&i| pn[i]).product();
                return Ok(AxisPlacement::gpu(chip, size, per));
            }
        };
        let dcn: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| self.axes[i].link == AxisLink::Dcn)
            .collect();
        if !dcn.is_empty() {
            if idx.len() > 1 {
                return Err(Error::Invalid(
                    "a collective over a DCN axis and ICI axes at once: cost them as two collectives (ICI inside each slice, then DCN)".into(),
                ));
            }
            return Ok(AxisPlacement::dcn(
                chip,
                self.axes[dcn[0]].size,
                self.slice_chips(),
            ));
        }
        let shape: Vec<u64> = self
            .axes
            .iter()
            .filter(|a| a.link != AxisLink::Dcn)
            .map(|a| a.size)
            .collect();
        let (link, hop, rule) = (ici.link, ici.hop_latency, ici.wraparound);
        let parts: Vec<(u64, bool)> = idx
            .iter()
            .map(|&i| {
                let a = &self.axes[i];
                let wraps = match a.link {
                    AxisLink::Wrap => true,
                    AxisLink::NoWrap => false,
                    _ => rule.axis_wraps(a.size, &shape),
                };
                (a.size, wraps)
            })
            .collect();
        Ok(AxisPlacement::torus(link, hop, &parts))
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    #[test]
    fn shapes_and_names() {
        let c = Catalog::builtin();
        let v5e = c.chip("tpu-v5e@book").unwrap();
        let m = NamedMesh::parse("4x4", v5e).unwrap();
        assert_eq!(m.describe(), "X=4,Y=4");
        let m = NamedMesh::parse("X=16,Y=4:wrap", v5e).unwrap();
        assert_eq!(m.devices(), 64);
        assert!(NamedMesh::parse("X=4,Y=4,Z=4", v5e).is_err());
        assert!(NamedMesh::parse("X=0", v5e).is_err());
        assert!(NamedMesh::parse("X=32,Y=32", v5e).is_err());
        assert!(m.axis("Q").is_err());
        let h100 = c.chip("h100@book").unwrap();
        let g = NamedMesh::parse("X=4,Y=8", h100).unwrap();
        match g.placement(h100, &["X".into()]).unwrap() {
            AxisPlacement::Gpu(g) => assert_eq!((g.size, g.per_node), (4, 1)),
            p => panic!("{p:?}"),
        }
        assert!(NamedMesh::parse("X=4:wrap", h100).is_err());
    }
}
