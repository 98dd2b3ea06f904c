/*!
Accelerator descriptions (the book's C, W_hbm, W_ici, …).

A catalog file (`data/hardware/<name>.toml`) is read into [`ChipFile`] (strings
with units, exactly as written) and converted into a [`Chip`] with typed
quantities. A file may carry a `[book]` table with the values *How To Scale
Your Model* uses where they differ from the vendor's; it is deep-merged over
the file to make the variant `<name>@book`, which the book's exercises use.
*/

pub mod anatomy;
pub mod inventory;
pub mod network;
pub mod report;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::units::{
    parse_bytes, parse_bytes_per_sec, parse_flops_per_sec, parse_seconds, Bytes, BytesPerSec,
    DType, FlopsPerSec, LinkBandwidth, Seconds,
};

/// TPU or GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChipKind {
    /// Google TPU: ICI torus.
    Tpu,
    /// GPU: NVLink domain plus a scale-out network.
    Gpu,
}

/// When a TPU torus axis has wraparound links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Wraparound {
    /// v5e/v6e: an axis wraps iff its size is 16 (the full pod width).
    #[serde(rename = "axis-16")]
    Axis16,
    /// v4p/v5p: axes wrap only in slices built of whole 4x4x4 cubes (every
    /// axis a multiple of 4).
    FullCube,
    /// Every axis wraps.
    Always,
    /// No axis wraps.
    #[default]
    Never,
}

impl Wraparound {
    /// Whether an axis of size `n` in slice `shape` has wraparound.
    pub fn axis_wraps(self, n: u64, shape: &[u64]) -> bool {
        match self {
            Wraparound::Axis16 => n == 16,
            Wraparound::FullCube => shape.len() == 3 && shape.iter().all(|&s| s >= 4 && s % 4 == 0),
            Wraparound::Always => true,
            Wraparound::Never => false,
        }
    }
}

// ------------------------------------------------------------ file schema

/// `[compute]` as written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeFile {
    /// fp32 peak.
    pub fp32: Option<String>,
    /// bf16 peak.
    pub bf16: Option<String>,
    /// fp16 peak (defaults to bf16).
    pub fp16: Option<String>,
    /// fp8 peak.
    pub fp8: Option<String>,
    /// int8 peak.
    pub int8: Option<String>,
    /// int4 peak.
    pub int4: Option<String>,
    /// fp4 peak.
    pub fp4: Option<String>,
}

/// `[memory]` as written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryFile {
    /// HBM per chip.
    pub hbm_capacity: String,
    /// HBM bandwidth per chip.
    pub hbm_bandwidth: String,
}

/// `[ici]` as written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IciFile {
    /// One direction of one link.
    pub link_bandwidth_one_way: String,
    /// Links per chip.
    pub links_per_chip: u64,
    /// Torus dimensionality.
    pub torus_dims: u64,
    /// Wraparound rule.
    pub wraparound: Wraparound,
    /// Largest slice.
    pub max_slice: String,
    /// Offered slice shapes.
    #[serde(default)]
    pub slice_shapes: Vec<String>,
    /// Per-hop latency.
    #[serde(default)]
    pub hop_latency: Option<String>,
    /// Chips per host.
    #[serde(default)]
    pub chips_per_host: Option<u64>,
}

/// `[nvlink]` as written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkFile {
    /// GPU egress, one direction.
    pub bandwidth_per_gpu_one_way: String,
    /// GPUs per NVLink domain.
    pub domain_size: u64,
    /// Small-message latency.
    #[serde(default)]
    pub latency: Option<String>,
    /// Whether the NVLink switches reduce in the network (NVLink SHARP).
    #[serde(default)]
    pub in_network_reduction: bool,
}

/// `[scale_out]` as written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleOutFile {
    /// "dcn", "infiniband", "ethernet".
    pub kind: String,
    /// Per chip, one direction.
    pub bandwidth_per_chip_one_way: String,
    /// Latency.
    #[serde(default)]
    pub latency: Option<String>,
    /// Largest cluster the figures apply to.
    #[serde(default)]
    pub max_chips: Option<u64>,
    /// Whether the switches reduce in the network (InfiniBand SHARP).
    #[serde(default)]
    pub in_network_reduction: bool,
}

/// `[host]` as written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFile {
    /// Host↔chip PCIe, one direction.
    #[serde(default)]
    pub pcie_bandwidth_one_way: Option<String>,
    /// Host DRAM per chip: the node's system memory over its chips (what
    /// offloaded optimizer state, weights and activations may fill).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_per_chip: Option<String>,
    /// Host DRAM bandwidth per chip: the CPU sockets' memory bandwidth over
    /// the chips (bounds the optimizer step an offloaded optimizer runs on
    /// the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth_per_chip: Option<String>,
    /// Where the host figures come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// `[price]` as written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceFile {
    /// USD per chip-hour.
    pub usd_per_chip_hour: f64,
    /// Where the price comes from.
    #[serde(default)]
    pub source: String,
}

/// A hardware catalog file, strings as written.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChipFile {
    /// Catalog key.
    pub name: String,
    /// Display name.
    #[serde(default)]
    pub display_name: String,
    /// Other accepted spellings.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// TPU or GPU.
    pub kind: ChipKind,
    /// Vendor.
    #[serde(default)]
    pub vendor: String,
    /// Spec source.
    pub source: String,
    /// Notes.
    #[serde(default)]
    pub notes: String,
    /// Peak compute.
    pub compute: ComputeFile,
    /// HBM.
    pub memory: MemoryFile,
    /// TPU interconnect.
    #[serde(default)]
    pub ici: Option<IciFile>,
    /// GPU NVLink.
    #[serde(default)]
    pub nvlink: Option<NvlinkFile>,
    /// DCN / InfiniBand.
    #[serde(default)]
    pub scale_out: Option<ScaleOutFile>,
    /// Host.
    #[serde(default)]
    pub host: Option<HostFile>,
    /// Price.
    #[serde(default)]
    pub price: Option<PriceFile>,
    /// Inside the chip (cores, units, clocks, on-chip memories).
    #[serde(default)]
    pub anatomy: Option<anatomy::AnatomyFile>,
    /// A GPU cluster reference design (leaf and spine switches).
    #[serde(default)]
    pub cluster: Option<network::ClusterFile>,
    /// The book's values (merged by the catalog, not read here).
    #[serde(default, skip_serializing)]
    pub book: Option<toml::Value>,
}

// ------------------------------------------------------------ typed chip

/// Peak dense FLOP/s per dtype (no sparsity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PeakFlops {
    /// fp32.
    pub fp32: Option<FlopsPerSec>,
    /// bf16.
    pub bf16: Option<FlopsPerSec>,
    /// fp16.
    pub fp16: Option<FlopsPerSec>,
    /// fp8.
    pub fp8: Option<FlopsPerSec>,
    /// int8.
    pub int8: Option<FlopsPerSec>,
    /// int4.
    pub int4: Option<FlopsPerSec>,
    /// fp4.
    pub fp4: Option<FlopsPerSec>,
}

impl PeakFlops {
    /// Peak for a dtype, if the chip has it.
    pub fn get(&self, d: DType) -> Option<FlopsPerSec> {
        match d {
            DType::Fp32 => self.fp32,
            DType::Bf16 => self.bf16,
            DType::Fp16 => self.fp16.or(self.bf16),
            DType::Fp8 => self.fp8,
            DType::Int8 => self.int8,
            DType::Int4 => self.int4,
            DType::Fp4 => self.fp4,
        }
    }
}

/// TPU inter-chip interconnect.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ici {
    /// One link's bandwidth (direction explicit).
    pub link: LinkBandwidth,
    /// Links per chip.
    pub links_per_chip: u64,
    /// Torus dimensionality.
    pub torus_dims: u64,
    /// Wraparound rule.
    pub wraparound: Wraparound,
    /// Largest slice shape.
    pub max_slice: Vec<u64>,
    /// Offered slice shapes.
    pub slice_shapes: Vec<Vec<u64>>,
    /// Per-hop latency (α).
    pub hop_latency: Seconds,
    /// Chips per host.
    pub chips_per_host: u64,
}

impl Ici {
    /// Chips in the largest slice (the product of `max_slice`; checked not to
    /// overflow when the chip was read).
    pub fn max_slice_chips(&self) -> u64 {
        self.max_slice.iter().product()
    }
}

/// GPU NVLink domain.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Nvlink {
    /// GPU egress (direction explicit).
    pub per_gpu: LinkBandwidth,
    /// GPUs in one domain.
    pub domain_size: u64,
    /// Small-message latency.
    pub latency: Seconds,
    /// The switches reduce in the network (NVLink SHARP).
    pub in_network_reduction: bool,
}

/// Scale-out network (DCN between TPU slices, InfiniBand/Ethernet between GPU nodes).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScaleOut {
    /// "dcn", "infiniband", "ethernet".
    pub kind: String,
    /// Per chip (direction explicit).
    pub per_chip: LinkBandwidth,
    /// Latency.
    pub latency: Seconds,
    /// Largest cluster (None = unbounded).
    pub max_chips: Option<u64>,
    /// The switches reduce in the network (InfiniBand SHARP).
    pub in_network_reduction: bool,
}

/// Which set of numbers a [`Chip`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// The vendor's published figures.
    Vendor,
    /// The figures *How To Scale Your Model* uses (`<name>@book`).
    Book,
}

/// One accelerator with typed quantities.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Chip {
    /// Catalog key (with `@book` for the book variant).
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Other spellings.
    pub aliases: Vec<String>,
    /// TPU or GPU.
    pub kind: ChipKind,
    /// Vendor.
    pub vendor: String,
    /// Spec source.
    pub source: String,
    /// Notes.
    pub notes: String,
    /// Vendor or book numbers.
    pub profile: Profile,
    /// C per dtype.
    pub peak: PeakFlops,
    /// HBM per chip.
    pub hbm_capacity: Bytes,
    /// W_hbm.
    pub hbm_bandwidth: BytesPerSec,
    /// TPU ICI.
    pub ici: Option<Ici>,
    /// GPU NVLink.
    pub nvlink: Option<Nvlink>,
    /// DCN / InfiniBand.
    pub scale_out: Option<ScaleOut>,
    /// PCIe host link.
    pub pcie: Option<LinkBandwidth>,
    /// Host DRAM per chip and its bandwidth share, where the catalog gives
    /// them (offloading needs both).
    pub host_memory: Option<HostMemory>,
    /// USD per chip-hour.
    pub usd_per_chip_hour: Option<f64>,
    /// Where the price comes from.
    pub price_source: Option<String>,
    /// Inside the chip.
    pub anatomy: anatomy::Anatomy,
    /// The GPU cluster design, if described.
    pub cluster: Option<network::Cluster>,
}

/// The host's DRAM as one chip sees it (`[host]`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostMemory {
    /// System memory per chip.
    pub capacity: Bytes,
    /// CPU memory bandwidth per chip.
    pub bandwidth: BytesPerSec,
    /// Where the figures come from.
    pub source: String,
}

/// Parse "16x16x16" / "4x4" / "8 x 16" into axis sizes.
pub fn parse_shape(s: &str) -> Result<Vec<u64>> {
    let parts: Vec<&str> = s.split(['x', 'X', '×']).map(str::trim).collect();
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        match p.parse::<u64>() {
            Ok(v) if v > 0 => out.push(v),
            _ => {
                return Err(Error::BadValue {
                    what: "mesh shape".into(),
                    input: s.into(),
                    expected: "axis sizes joined by 'x', like \"16x16x16\" or \"4x4\"".into(),
                })
            }
        }
    }
    Ok(out)
}

/// The smallest offered slice with at least `needed` chips (by chip count,
/// then fewest axes). `None` if no offered slice is large enough.
pub fn smallest_slice(shapes: &[Vec<u64>], needed: u64) -> Option<Vec<u64>> {
    shapes
        .iter()
        .filter(|s| s.iter().product::<u64>() >= needed)
        .min_by_key(|s| (s.iter().product::<u64>(), s.len()))
        .cloned()
}

/// Format a shape as "16x16x16".
pub fn fmt_shape(s: &[u64]) -> String {
    s.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
}

fn ctx(field: &str, e: Error) -> Error {
    match e {
        Error::BadValue {
            input, expected, ..
        } => Error::BadValue {
            what: field.into(),
            input,
            expected,
        },
        e => e,
    }
}

impl Chip {
    /// The network a run on this chip is on when nothing names one: the
    /// catalog's scale-out kind (`infiniband` for `h100`), `""` without one.
    /// `train` and the validation of published runs both use this default.
    pub fn default_network(&self) -> &str {
        self.scale_out.as_ref().map_or("", |s| s.kind.as_str())
    }

    /// Convert a file into typed quantities, checking units.
    pub fn from_file(f: &ChipFile, profile: Profile) -> Result<Chip> {
        let fl = |field: &str, v: &Option<String>| -> Result<Option<FlopsPerSec>> {
            v.as_deref()
                .map(|s| parse_flops_per_sec(s).map_err(|e| ctx(field, e)))
                .transpose()
        };
        let peak = PeakFlops {
            fp32: fl("compute.fp32", &f.compute.fp32)?,
            bf16: fl("compute.bf16", &f.compute.bf16)?,
            fp16: fl("compute.fp16", &f.compute.fp16)?,
            fp8: fl("compute.fp8", &f.compute.fp8)?,
            int8: fl("compute.int8", &f.compute.int8)?,
            int4: fl("compute.int4", &f.compute.int4)?,
            fp4: fl("compute.fp4", &f.compute.fp4)?,
        };
        if peak.bf16.is_none() && peak.fp16.is_none() {
            return Err(Error::InvalidHardware {
                field: "compute.bf16".into(),
                reason: "every chip needs a bf16 (or, without bf16, an fp16) peak".into(),
            });
        }
        let secs = |field: &str, v: &Option<String>, default: f64| -> Result<Seconds> {
            match v {
                Some(s) => parse_seconds(s).map_err(|e| ctx(field, e)),
                None => Ok(Seconds::new(default)),
            }
        };
        let ici = match &f.ici {
            None => None,
            Some(i) => Some(Ici {
                link: LinkBandwidth::one_way(
                    parse_bytes_per_sec(&i.link_bandwidth_one_way)
                        .map_err(|e| ctx("ici.link_bandwidth_one_way", e))?,
                ),
                links_per_chip: i.links_per_chip,
                torus_dims: i.torus_dims,
                wraparound: i.wraparound,
                max_slice: parse_shape(&i.max_slice).map_err(|e| ctx("ici.max_slice", e))?,
                slice_shapes: i
                    .slice_shapes
                    .iter()
                    .map(|s| parse_shape(s).map_err(|e| ctx("ici.slice_shapes", e)))
                    .collect::<Result<_>>()?,
                hop_latency: secs("ici.hop_latency", &i.hop_latency, 1e-6)?,
                chips_per_host: i.chips_per_host.unwrap_or(4),
            }),
        };
        let nvlink = match &f.nvlink {
            None => None,
            Some(n) => Some(Nvlink {
                per_gpu: LinkBandwidth::one_way(
                    parse_bytes_per_sec(&n.bandwidth_per_gpu_one_way)
                        .map_err(|e| ctx("nvlink.bandwidth_per_gpu_one_way", e))?,
                ),
                domain_size: n.domain_size.max(1),
                latency: secs("nvlink.latency", &n.latency, 2e-6)?,
                in_network_reduction: n.in_network_reduction,
            }),
        };
        let scale_out = match &f.scale_out {
            None => None,
            Some(s) => Some(ScaleOut {
                kind: s.kind.clone(),
                per_chip: LinkBandwidth::one_way(
                    parse_bytes_per_sec(&s.bandwidth_per_chip_one_way)
                        .map_err(|e| ctx("scale_out.bandwidth_per_chip_one_way", e))?,
                ),
                latency: secs("scale_out.latency", &s.latency, 5e-6)?,
                max_chips: s.max_chips,
                in_network_reduction: s.in_network_reduction,
            }),
        };
        let pcie = match f
            .host
            .as_ref()
            .and_then(|h| h.pcie_bandwidth_one_way.as_ref())
        {
            None => None,
            Some(s) => Some(LinkBandwidth::one_way(
                parse_bytes_per_sec(s).map_err(|e| ctx("host.pcie_bandwidth_one_way", e))?,
            )),
        };
        let host_memory = match f.host.as_ref() {
            Some(HostFile {
                memory_per_chip: Some(m),
                memory_bandwidth_per_chip: Some(w),
                source,
                ..
            }) => Some(HostMemory {
                capacity: parse_bytes(m).map_err(|e| ctx("host.memory_per_chip", e))?,
                bandwidth: parse_bytes_per_sec(w)
                    .map_err(|e| ctx("host.memory_bandwidth_per_chip", e))?,
                source: source.clone().unwrap_or_default(),
            }),
            _ => None,
        };
        let chip = Chip {
            name: match profile {
                Profile::Vendor => f.name.clone(),
                Profile::Book => format!("{}@book", f.name),
            },
            display_name: if f.display_name.is_empty() {
                f.name.clone()
            } else {
                f.display_name.clone()
            },
            aliases: f.aliases.clone(),
            kind: f.kind,
            vendor: f.vendor.clone(),
            source: f.source.clone(),
            notes: f.notes.clone(),
            profile,
            peak,
            hbm_capacity: parse_bytes(&f.memory.hbm_capacity)
                .map_err(|e| ctx("memory.hbm_capacity", e))?,
            hbm_bandwidth: parse_bytes_per_sec(&f.memory.hbm_bandwidth)
                .map_err(|e| ctx("memory.hbm_bandwidth", e))?,
            ici,
            nvlink,
            scale_out,
            pcie,
            host_memory,
            usd_per_chip_hour: f.price.as_ref().map(|p| p.usd_per_chip_hour),
            price_source: f.price.as_ref().map(|p| p.source.clone()),
            anatomy: match &f.anatomy {
                Some(a) => anatomy::Anatomy::from_file(a)?,
                None => anatomy::Anatomy::default(),
            },
            cluster: f
                .cluster
                .as_ref()
                .map(network::Cluster::from_file)
                .transpose()?,
        };
        chip.validate()?;
        Ok(chip)
    }

    fn validate(&self) -> Result<()> {
        let bad = |field: &str, reason: &str| {
            Err(Error::InvalidHardware {
                field: field.into(),
                reason: reason.into(),
            })
        };
        if self.hbm_capacity.get() <= 0.0 || self.hbm_bandwidth.get() <= 0.0 {
            return bad("memory", "HBM capacity and bandwidth must be positive");
        }
        if self
            .host_memory
            .as_ref()
            .is_some_and(|h| !(h.capacity.get() > 0.0 && h.capacity.get().is_finite()))
        {
            return bad("host.memory_per_chip", "must be positive");
        }
        for d in DType::ALL {
            if self.peak.get(d).is_some_and(|c| c.get() <= 0.0) {
                return bad(
                    &format!("compute.{d}"),
                    "a peak must be positive (omit dtypes the chip lacks)",
                );
            }
        }
        // Every bandwidth is a divisor of C / W: zero (or so small that the
        // quotient overflows) would print an infinite critical intensity.
        let c = self.flops(DType::Bf16);
        let rates = [
            ("memory.hbm_bandwidth", Some(self.hbm_bandwidth)),
            (
                "ici.link_bandwidth_one_way",
                self.ici.as_ref().map(|i| i.link.one_way_rate()),
            ),
            (
                "nvlink.bandwidth_per_gpu_one_way",
                self.nvlink.as_ref().map(|n| n.per_gpu.one_way_rate()),
            ),
            (
                "scale_out.bandwidth_per_chip_one_way",
                self.scale_out.as_ref().map(|s| s.per_chip.one_way_rate()),
            ),
            (
                "host.pcie_bandwidth_one_way",
                self.pcie.map(|p| p.one_way_rate()),
            ),
            (
                "host.memory_bandwidth_per_chip",
                self.host_memory.as_ref().map(|h| h.bandwidth),
            ),
        ];
        for (field, w) in rates {
            if w.is_some_and(|w| w.get() <= 0.0 || !(c / w).is_finite()) {
                return bad(field, "must be positive");
            }
        }
        if let Some(i) = &self.ici {
            for s in std::iter::once(&i.max_slice).chain(&i.slice_shapes) {
                if s.iter().try_fold(1u64, |a, &x| a.checked_mul(x)).is_none() {
                    return bad(
                        "ici",
                        &format!("slice {} has more chips than fit in 64 bits", fmt_shape(s)),
                    );
                }
            }
        }
        if self
            .usd_per_chip_hour
            .is_some_and(|p| !p.is_finite() || p < 0.0)
        {
            return bad(
                "price.usd_per_chip_hour",
                "must be a finite, non-negative price",
            );
        }
        match self.kind {
            ChipKind::Tpu if self.ici.is_none() => bad("ici", "a TPU needs an [ici] table"),
            ChipKind::Gpu if self.nvlink.is_none() => {
                bad("nvlink", "a GPU needs an [nvlink] table")
            }
            _ => Ok(()),
        }
    }

    /// C for a dtype, or the bf16 peak if the chip lacks that dtype (the
    /// fp16 peak on a chip without bf16, like V100).
    pub fn flops(&self, d: DType) -> FlopsPerSec {
        self.peak
            .get(d)
            .or(self.peak.bf16)
            .or(self.peak.fp16)
            .unwrap_or(FlopsPerSec::ZERO)
    }

    /// Largest number of chips in one pod (TPU) or one cluster (GPU scale-out).
    pub fn max_chips(&self) -> Option<u64> {
        match (&self.ici, &self.scale_out) {
            (Some(i), _) => Some(i.max_slice_chips()),
            (None, Some(s)) => s.max_chips,
            _ => None,
        }
    }

    /// Vector operations per second: the VPU (TPU) or the CUDA cores (GPU,
    /// published FP32 / 2), when the anatomy gives them.
    pub fn vector_peak(&self) -> Option<FlopsPerSec> {
        self.anatomy.vector_peak(self.peak.fp32)
    }

    /// C / W_hbm: the critical token batch for bf16 matmuls (book ch1).
    pub fn hbm_intensity(&self, d: DType) -> f64 {
        self.flops(d) / self.hbm_bandwidth
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(parse_shape("16x16x16").unwrap(), vec![16, 16, 16]);
        assert_eq!(parse_shape("8 x 16").unwrap(), vec![8, 16]);
        assert!(parse_shape("4x0").is_err());
        assert!(parse_shape("4xa").is_err());
        assert_eq!(fmt_shape(&[4, 4]), "4x4");
    }

    #[test]
    fn wraparound_rules() {
        assert!(Wraparound::Axis16.axis_wraps(16, &[8, 16]));
        assert!(!Wraparound::Axis16.axis_wraps(8, &[8, 16]));
        assert!(!Wraparound::Axis16.axis_wraps(4, &[4, 4]));
        assert!(Wraparound::FullCube.axis_wraps(16, &[16, 16, 16]));
        assert!(Wraparound::FullCube.axis_wraps(4, &[4, 4, 4]));
        assert!(!Wraparound::FullCube.axis_wraps(4, &[2, 2, 4]));
    }
}
