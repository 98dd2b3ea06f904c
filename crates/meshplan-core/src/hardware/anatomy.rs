/*!
Inside a chip (book ch2, ch12): TensorCores, MXUs and the VPU of a TPU;
SMs, Tensor Cores and CUDA cores of a GPU; clocks; on-chip memories (VMEM,
SMEM, registers, TMEM, L2). Read from the optional `[anatomy]` table of a
hardware file; every figure there names its source in the file's notes.

Derived figures:

* TPU VPU: `cores × sublanes × lanes × ALUs per lane × clock` operations/s
  (v5p: 2 × 8·128·4 × 1.75 GHz ≈ 1.4e13 per chip, 7e12 per core; ch2);
* GPU CUDA cores: the published FP32 peak / 2 (vendors count a fused
  multiply-add as 2), else `SMs × cores per SM × clock` (H100 ≈ 33.5e12; ch12);
* FLOPs per cycle of one MXU or Tensor Core: `C / (units × clock)`
  (v5e ≈ 2·128·128; H100 ≈ 1024 per Tensor Core at 1.76 GHz, ch12).
*/

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::units::{parse_bytes, Bytes, FlopsPerSec};

/// `[anatomy]` as written (every key optional).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnatomyFile {
    /// TPU: TensorCores per chip (v5p 2, v5e 1).
    pub tensorcores_per_chip: Option<u64>,
    /// TPU: MXUs per TensorCore.
    pub mxus_per_core: Option<u64>,
    /// TPU: MXU side (128 → a 128x128 systolic array).
    pub mxu_size: Option<u64>,
    /// TPU: VPU shape "SUBLANESxLANES" ("8x128").
    pub vpu_shape: Option<String>,
    /// TPU: ALUs per VPU lane.
    pub vpu_alus_per_lane: Option<u64>,
    /// TPU: vector memory per core ("128 MiB").
    pub vmem: Option<String>,
    /// TPU: vector registers per core.
    pub vregs_per_core: Option<u64>,
    /// GPU: streaming multiprocessors.
    pub sms: Option<u64>,
    /// GPU: SM subpartitions (warp schedulers) per SM.
    pub subpartitions_per_sm: Option<u64>,
    /// GPU: FP32 CUDA cores per SM.
    pub cuda_cores_per_sm: Option<u64>,
    /// GPU: Tensor Cores per SM.
    pub tensor_cores_per_sm: Option<u64>,
    /// GPU: shared memory / L1 per SM.
    pub smem_per_sm: Option<String>,
    /// GPU: register file per SM.
    pub registers_per_sm: Option<String>,
    /// GPU: tensor memory per SM (Blackwell).
    pub tmem_per_sm: Option<String>,
    /// GPU: L2 cache per chip.
    pub l2: Option<String>,
    /// The clock the peaks are quoted at ("1.98 GHz").
    pub clock: Option<String>,
    /// Base clock.
    pub clock_base: Option<String>,
}

/// A chip's anatomy with units.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Anatomy {
    /// TPU: TensorCores per chip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensorcores_per_chip: Option<u64>,
    /// TPU: MXUs per TensorCore.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mxus_per_core: Option<u64>,
    /// TPU: MXU side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mxu_size: Option<u64>,
    /// TPU: VPU sublanes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vpu_sublanes: Option<u64>,
    /// TPU: VPU lanes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vpu_lanes: Option<u64>,
    /// TPU: ALUs per VPU lane.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vpu_alus_per_lane: Option<u64>,
    /// TPU: VMEM per core.
    #[serde(rename = "vmem_bytes", skip_serializing_if = "Option::is_none")]
    pub vmem: Option<Bytes>,
    /// TPU: vector registers per core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vregs_per_core: Option<u64>,
    /// GPU: SMs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sms: Option<u64>,
    /// GPU: subpartitions per SM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subpartitions_per_sm: Option<u64>,
    /// GPU: FP32 CUDA cores per SM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_cores_per_sm: Option<u64>,
    /// GPU: Tensor Cores per SM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_cores_per_sm: Option<u64>,
    /// GPU: SMEM per SM.
    #[serde(rename = "smem_per_sm_bytes", skip_serializing_if = "Option::is_none")]
    pub smem_per_sm: Option<Bytes>,
    /// GPU: registers per SM.
    #[serde(
        rename = "registers_per_sm_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub registers_per_sm: Option<Bytes>,
    /// GPU: TMEM per SM.
    #[serde(rename = "tmem_per_sm_bytes", skip_serializing_if = "Option::is_none")]
    pub tmem_per_sm: Option<Bytes>,
    /// GPU: L2 per chip.
    #[serde(rename = "l2_bytes", skip_serializing_if = "Option::is_none")]
    pub l2: Option<Bytes>,
    /// Peak clock, Hz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_hz: Option<f64>,
    /// Base clock, Hz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_base_hz: Option<f64>,
}

fn hertz(field: &str, s: &Option<String>) -> Result<Option<f64>> {
    let Some(s) = s else { return Ok(None) };
    let t = s.trim();
    let (num, f) = if let Some(n) = t.strip_suffix("GHz") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("MHz") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("Hz") {
        (n, 1.0)
    } else {
        (t, f64::NAN)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && f.is_finite() => Ok(Some(v * f)),
        _ => Err(Error::BadValue {
            what: field.into(),
            input: s.clone(),
            expected: "a clock like \"1.75 GHz\" or \"1410 MHz\"".into(),
        }),
    }
}

fn bytes(field: &str, s: &Option<String>) -> Result<Option<Bytes>> {
    s.as_deref()
        .map(|x| {
            parse_bytes(x).map_err(|_| Error::BadValue {
                what: field.into(),
                input: x.into(),
                expected: "a size like \"128 MiB\" or \"256 kB\"".into(),
            })
        })
        .transpose()
}

impl Anatomy {
    /// Convert the file's strings.
    pub fn from_file(f: &AnatomyFile) -> Result<Anatomy> {
        let (sub, lanes) = match &f.vpu_shape {
            None => (None, None),
            Some(s) => match crate::hardware::parse_shape(s)?.as_slice() {
                [a, b] => (Some(*a), Some(*b)),
                _ => {
                    return Err(Error::BadValue {
                        what: "anatomy.vpu_shape".into(),
                        input: s.clone(),
                        expected: "SUBLANESxLANES like \"8x128\"".into(),
                    })
                }
            },
        };
        Ok(Anatomy {
            tensorcores_per_chip: f.tensorcores_per_chip,
            mxus_per_core: f.mxus_per_core,
            mxu_size: f.mxu_size,
            vpu_sublanes: sub,
            vpu_lanes: lanes,
            vpu_alus_per_lane: f.vpu_alus_per_lane,
            vmem: bytes("anatomy.vmem", &f.vmem)?,
            vregs_per_core: f.vregs_per_core,
            sms: f.sms,
            subpartitions_per_sm: f.subpartitions_per_sm,
            cuda_cores_per_sm: f.cuda_cores_per_sm,
            tensor_cores_per_sm: f.tensor_cores_per_sm,
            smem_per_sm: bytes("anatomy.smem_per_sm", &f.smem_per_sm)?,
            registers_per_sm: bytes("anatomy.registers_per_sm", &f.registers_per_sm)?,
            tmem_per_sm: bytes("anatomy.tmem_per_sm", &f.tmem_per_sm)?,
            l2: bytes("anatomy.l2", &f.l2)?,
            clock_hz: hertz("anatomy.clock", &f.clock)?,
            clock_base_hz: hertz("anatomy.clock_base", &f.clock_base)?,
        })
    }

    /// Matrix units per chip: MXUs (TPU) or Tensor Cores (GPU).
    pub fn matrix_units(&self) -> Option<u64> {
        match (
            self.tensorcores_per_chip,
            self.mxus_per_core,
            self.sms,
            self.tensor_cores_per_sm,
        ) {
            (Some(c), Some(m), _, _) => c.checked_mul(m),
            (_, _, Some(s), Some(t)) => s.checked_mul(t),
            _ => None,
        }
    }

    /// Vector ALUs per chip: VPU ALUs (TPU) or FP32 CUDA cores (GPU).
    pub fn vector_alus(&self) -> Option<u64> {
        match (
            self.tensorcores_per_chip,
            self.vpu_sublanes,
            self.vpu_lanes,
            self.vpu_alus_per_lane,
            self.sms,
            self.cuda_cores_per_sm,
        ) {
            (Some(c), Some(s), Some(l), Some(a), _, _) => [c, s, l, a]
                .iter()
                .try_fold(1u64, |acc, &x| acc.checked_mul(x)),
            (_, _, _, _, Some(s), Some(c)) => s.checked_mul(c),
            _ => None,
        }
    }

    /// Vector operations per second (one per ALU per cycle): the VPU or the
    /// CUDA cores. `fp32_peak` (FMA counted as 2, as vendors quote) wins on
    /// GPUs when published.
    pub fn vector_peak(&self, fp32_peak: Option<FlopsPerSec>) -> Option<FlopsPerSec> {
        if self.sms.is_some() {
            if let Some(p) = fp32_peak {
                return Some(FlopsPerSec::new(p.get() / 2.0));
            }
        }
        match (self.vector_alus(), self.clock_hz) {
            (Some(a), Some(c)) => Some(FlopsPerSec::new(a as f64 * c)),
            _ => None,
        }
    }

    /// FLOPs per cycle of one matrix unit at peak `c`.
    pub fn flops_per_cycle_per_unit(&self, c: FlopsPerSec) -> Option<f64> {
        match (self.matrix_units(), self.clock_hz) {
            (Some(u), Some(h)) if u > 0 => Some(c.get() / (u as f64 * h)),
            _ => None,
        }
    }
}

/// The anatomy as `hw show` reports it, with the derived figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AnatomyReport {
    /// The figures as read.
    #[serde(flatten)]
    pub figures: Anatomy,
    /// MXUs (TPU) or Tensor Cores (GPU) per chip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrix_units: Option<u64>,
    /// bf16 FLOPs per cycle of one matrix unit: C / (units × clock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_per_cycle_per_matrix_unit: Option<f64>,
    /// VPU ALUs (TPU) or FP32 CUDA cores (GPU) per chip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_alus: Option<u64>,
    /// Vector operations per second (one per ALU per cycle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_peak_flops_per_s: Option<f64>,
}

impl AnatomyReport {
    /// Derive the report for a chip.
    pub fn of(ch: &crate::hardware::Chip) -> AnatomyReport {
        let a = &ch.anatomy;
        AnatomyReport {
            figures: a.clone(),
            matrix_units: a.matrix_units(),
            flops_per_cycle_per_matrix_unit: a
                .flops_per_cycle_per_unit(ch.flops(crate::units::DType::Bf16)),
            vector_alus: a.vector_alus(),
            vector_peak_flops_per_s: ch.vector_peak().map(|v| v.get()),
        }
    }

    /// Label/value rows (empty when nothing is known).
    pub fn fields(&self) -> Vec<(String, String)> {
        use crate::units::{fmt_int, fmt_si, sig4};
        use crate::view::field;
        let a = &self.figures;
        let mut rows = Vec::new();
        let mut opt = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                rows.push(field(k, v));
            }
        };
        let b = |x: Option<Bytes>| x.map(|v| fmt_si(v.get(), "B"));
        opt(
            "TensorCores per chip",
            a.tensorcores_per_chip.map(|x| x.to_string()),
        );
        opt("MXUs per core", a.mxus_per_core.map(|x| x.to_string()));
        opt("MXU", a.mxu_size.map(|x| format!("{x}x{x} systolic array")));
        opt(
            "VPU",
            a.vpu_sublanes.zip(a.vpu_lanes).map(|(s, l)| {
                format!(
                    "({s} sublanes, {l} lanes){}",
                    a.vpu_alus_per_lane
                        .map_or(String::new(), |x| format!(" × {x} ALUs"))
                )
            }),
        );
        opt("VMEM", b(a.vmem));
        opt("VREGs per core", a.vregs_per_core.map(|x| x.to_string()));
        opt("SMs", a.sms.map(fmt_int));
        opt(
            "subpartitions per SM",
            a.subpartitions_per_sm.map(|x| x.to_string()),
        );
        opt(
            "FP32 CUDA cores per SM",
            a.cuda_cores_per_sm.map(|x| x.to_string()),
        );
        opt(
            "Tensor Cores per SM",
            a.tensor_cores_per_sm.map(|x| x.to_string()),
        );
        opt("SMEM per SM", b(a.smem_per_sm));
        opt("registers per SM", b(a.registers_per_sm));
        opt("TMEM per SM", b(a.tmem_per_sm));
        opt("L2", b(a.l2));
        opt("clock", a.clock_hz.map(|h| fmt_si(h, "Hz")));
        opt("base clock", a.clock_base_hz.map(|h| fmt_si(h, "Hz")));
        opt("matrix units per chip", self.matrix_units.map(fmt_int));
        opt(
            "FLOPs per cycle per matrix unit",
            self.flops_per_cycle_per_matrix_unit.map(sig4),
        );
        opt("vector ALUs per chip", self.vector_alus.map(fmt_int));
        opt(
            "vector peak (1 op per ALU per cycle)",
            self.vector_peak_flops_per_s.map(|v| fmt_si(v, "FLOP/s")),
        );
        rows
    }
}
