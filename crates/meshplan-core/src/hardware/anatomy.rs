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
use crate::hardware::Chip;
use crate::trace::{Step, Tracer};
use crate::units::{parse_bytes, Bytes, DType, FlopsPerSec};

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
    /// TPU: VMEM↔MXU bandwidth as a multiple of the HBM bandwidth (the book's
    /// "around 22x", ch2; no vendor figure).
    pub vmem_bandwidth_vs_hbm: Option<f64>,
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
    /// TPU: VMEM bandwidth / HBM bandwidth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmem_bandwidth_vs_hbm: Option<f64>,
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
            vmem_bandwidth_vs_hbm: match f.vmem_bandwidth_vs_hbm {
                Some(r) if !(r.is_finite() && r > 0.0) => {
                    return Err(Error::BadValue {
                        what: "anatomy.vmem_bandwidth_vs_hbm".into(),
                        input: r.to_string(),
                        expected: "a positive ratio like 22".into(),
                    })
                }
                r => r,
            },
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

    /// FLOPs per cycle of one matrix unit: a TPU MXU of side `m` does one
    /// multiply-add (2 FLOPs) per cell per cycle, `2·m²` exactly (book ch2
    /// App. B); a GPU Tensor Core, whose shape NVIDIA does not publish, is
    /// measured from the peak `c`: `C / (units × clock)` (ch12).
    pub fn flops_per_cycle_per_unit(&self, c: FlopsPerSec) -> Option<f64> {
        if let Some(m) = self.mxu_size {
            return Some(2.0 * (m as f64) * (m as f64));
        }
        match (self.matrix_units(), self.clock_hz) {
            (Some(u), Some(h)) if u > 0 => Some(c.get() / (u as f64 * h)),
            _ => None,
        }
    }

    /// Cores per chip: TensorCores (TPU) or SMs (GPU), the book's unit of
    /// "per core" (ch12's 1:1 table: SM ↔ TensorCore).
    pub fn cores(&self) -> Option<u64> {
        self.tensorcores_per_chip.or(self.sms).filter(|&c| c > 0)
    }

    /// `per_core × cores` for a per-SM memory (chip totals of SMEM,
    /// registers, TMEM; ch12 Quiz 1 Q5).
    fn per_sm_total(&self, per_sm: Option<Bytes>) -> Option<f64> {
        Some(per_sm?.get() * self.sms? as f64)
    }
}

/// The anatomy as `hw show` reports it, with the derived figures (each
/// recorded as a derivation step `hw.anatomy.<key>`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct AnatomyReport {
    /// The figures as read.
    #[serde(flatten)]
    pub figures: Anatomy,
    /// MXUs (TPU) or Tensor Cores (GPU) per chip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrix_units: Option<u64>,
    /// bf16 FLOPs per cycle of one matrix unit: 2·m² for a TPU MXU of side
    /// m, C / (units × clock) for a GPU Tensor Core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_per_cycle_per_matrix_unit: Option<f64>,
    /// TensorCores (TPU) or SMs (GPU) per chip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores_per_chip: Option<u64>,
    /// bf16 matmul FLOP/s of one core: C / cores (ch12: H100 7.5e12 per SM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrix_per_core_flops_per_s: Option<f64>,
    /// bf16 matmul FLOP/s of one matrix unit: C / units (ch2: v5e ≈ 5e13
    /// per MXU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrix_per_unit_flops_per_s: Option<f64>,
    /// VPU ALUs (TPU) or FP32 CUDA cores (GPU) per chip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_alus: Option<u64>,
    /// Vector ALUs per core (TensorCore or SM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_alus_per_core: Option<u64>,
    /// Vector operations per second (one per ALU per cycle; GPUs: the
    /// published FP32 / 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_peak_flops_per_s: Option<f64>,
    /// Vector peak of one core: vector peak / cores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_per_core_flops_per_s: Option<f64>,
    /// ALUs × base clock (ch12 Q2: H100 26.9e12).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_peak_base_flops_per_s: Option<f64>,
    /// ALUs × boost (peak) clock (ch12 Q2: H100 33.5e12).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_peak_boost_flops_per_s: Option<f64>,
    /// The clock implied by the published FP32 peak: C_fp32 / (2 · ALUs),
    /// an FMA counted as 2 FLOPs (ch12 Q6: B200 ≈ 2.1 GHz).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_from_fp32_hz: Option<f64>,
    /// GPU: SMs × SMEM per SM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smem_total_bytes: Option<f64>,
    /// GPU: SMs × registers per SM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registers_total_bytes: Option<f64>,
    /// GPU: SMs × TMEM per SM (Blackwell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmem_total_bytes: Option<f64>,
    /// GPU: SMEM + registers + TMEM of the whole chip (ch12 Q5: H100 ≈ 66 MB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_chip_memory_total_bytes: Option<f64>,
    /// TPU: VMEM bandwidth = ratio × W_hbm (ch2: ≈ 22 × W_hbm).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmem_bandwidth_bytes_per_s: Option<f64>,
    /// TPU: C / W_vmem, the intensity a matmul fed from VMEM needs (ch2:
    /// "only 10-20").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_vmem: Option<f64>,
}

/// One derived figure: its report key, label, formula in the book's
/// symbols, bound values, unit and source.
struct Derived<'a> {
    key: &'a str,
    label: &'a str,
    formula: &'a str,
    binds: &'a [(&'a str, f64, &'a str)],
    unit: &'a str,
    src: &'a str,
}

/// Record `v` (when known) as step `hw.anatomy.<key>`.
fn note<T: Tracer>(tr: &mut T, d: Derived, v: Option<f64>) -> Option<f64> {
    if let Some(x) = v {
        tr.record(|| {
            let mut s = Step::new(&format!("hw.anatomy.{}", d.key), d.label, d.formula);
            for (sym, val, u) in d.binds {
                s = s.bind(sym, *val, u);
            }
            s.result(x, d.unit).source(d.src)
        });
    }
    v
}

/// SMEM, registers, TMEM and their sum over the chip's SMs, recorded.
fn on_chip_totals<T: Tracer>(a: &Anatomy, tr: &mut T) -> [Option<f64>; 4] {
    let sms = a.sms.unwrap_or(0) as f64;
    let mut one = |key: &str, label: &str, sym: &str, per: Option<Bytes>| {
        let formula = format!("N_SM · {sym}");
        note(
            tr,
            Derived {
                key,
                label,
                formula: &formula,
                binds: &[("N_SM", sms, ""), (sym, per.map_or(0.0, |b| b.get()), "B")],
                unit: "B",
                src: "How To Scale Your Model, ch12 Quiz 1 Q5 (132 · 256 kB ≈ 33 MB each)",
            },
            a.per_sm_total(per),
        )
    };
    let smem = one(
        "smem_total_bytes",
        "SMEM of the whole chip",
        "SMEM_SM",
        a.smem_per_sm,
    );
    let regs = one(
        "registers_total_bytes",
        "Register files of the whole chip",
        "REG_SM",
        a.registers_per_sm,
    );
    let tmem = one(
        "tmem_total_bytes",
        "TMEM of the whole chip",
        "TMEM_SM",
        a.tmem_per_sm,
    );
    let sum = smem.map(|s| s + regs.unwrap_or(0.0) + tmem.unwrap_or(0.0));
    let all = note(
        tr,
        Derived {
            key: "on_chip_memory_total_bytes",
            label: "On-chip memory of the whole chip (SMEM + registers + TMEM)",
            formula: "SMEM + REG + TMEM",
            binds: &[
                ("SMEM", smem.unwrap_or(0.0), "B"),
                ("REG", regs.unwrap_or(0.0), "B"),
                ("TMEM", tmem.unwrap_or(0.0), "B"),
            ],
            unit: "B",
            src: "How To Scale Your Model, ch12 Quiz 1 Q5 (\"a total of about 66MB\")",
        },
        sum,
    );
    [smem, regs, tmem, all]
}

const CH2_VPU: &str = "How To Scale Your Model, ch2 App. A (VPU (8, 128) × 4 ALUs per core)";
const CH12_Q1: &str = "How To Scale Your Model, ch12 Quiz 1 Q1-Q2 (132 SMs · 4 · 32 CUDA cores)";

/// The book's names for cores and matrix units: SMs and Tensor Cores on a
/// GPU, TensorCores and MXUs on a TPU.
fn symbols(gpu: bool) -> (&'static str, &'static str, &'static str) {
    if gpu {
        ("N_SM", "N_TC", "N_cuda")
    } else {
        ("N_core", "N_MXU", "N_ALU")
    }
}

/// FLOPs per cycle of one matrix unit and the matmul FLOP/s per core and
/// per unit, recorded.
fn matrix_figures<T: Tracer>(ch: &Chip, tr: &mut T) -> [Option<f64>; 3] {
    let a = &ch.anatomy;
    let c = ch.flops(DType::Bf16);
    let (core_sym, unit_sym, _) = symbols(a.sms.is_some());
    let (units, cores) = (a.matrix_units(), a.cores());
    let fpc = a.flops_per_cycle_per_unit(c);
    let fpc = match a.mxu_size {
        Some(m) => note(
            tr,
            Derived {
                key: "flops_per_cycle_per_matrix_unit",
                label: "FLOPs per cycle of one MXU (one multiply-add per cell)",
                formula: "2·m²",
                binds: &[("m", m as f64, "")],
                unit: "FLOPs",
                src: "How To Scale Your Model, ch2 App. B (an m×m systolic array)",
            },
            fpc,
        ),
        None => note(
            tr,
            Derived {
                key: "flops_per_cycle_per_matrix_unit",
                label: "FLOPs per cycle of one Tensor Core",
                formula: "C / (N_TC · f)",
                binds: &[
                    ("C", c.get(), "FLOP/s"),
                    (unit_sym, units.unwrap_or(0) as f64, ""),
                    ("f", a.clock_hz.unwrap_or(0.0), "Hz"),
                ],
                unit: "FLOPs",
                src: "How To Scale Your Model, ch12 (H100 ≈ 1024, B200 ≈ 2048 per TC per cycle)",
            },
            fpc,
        ),
    };
    let per = |n: Option<u64>| n.map(|n| c.get() / n as f64);
    let f_core = format!("C / {core_sym}");
    let per_core = note(
        tr,
        Derived {
            key: "matrix_per_core_flops_per_s",
            label: "bf16 matmul FLOP/s of one core",
            formula: &f_core,
            binds: &[
                ("C", c.get(), "FLOP/s"),
                (core_sym, cores.unwrap_or(0) as f64, ""),
            ],
            unit: "FLOP/s",
            src: "How To Scale Your Model, ch12 (990e12 / 132 SMs ≈ 7.5e12)",
        },
        per(cores),
    );
    let f_unit = format!("C / {unit_sym}");
    let per_unit = note(
        tr,
        Derived {
            key: "matrix_per_unit_flops_per_s",
            label: "bf16 matmul FLOP/s of one matrix unit",
            formula: &f_unit,
            binds: &[
                ("C", c.get(), "FLOP/s"),
                (unit_sym, units.unwrap_or(0) as f64, ""),
            ],
            unit: "FLOP/s",
            src: "How To Scale Your Model, ch2 (\"about 5e13 bf16 FLOPs/s per MXU\" on v5e)",
        },
        per(units),
    );
    [fpc, per_core, per_unit]
}

/// The vector units: per core, at the base and boost clocks, and the clock
/// the published FP32 peak implies, recorded.
fn vector_figures<T: Tracer>(ch: &Chip, tr: &mut T) -> [Option<f64>; 4] {
    let a = &ch.anatomy;
    let gpu = a.sms.is_some();
    let (core_sym, _, alu_sym) = symbols(gpu);
    let (cores, alus) = (a.cores(), a.vector_alus());
    let vector = ch.vector_peak().map(|v| v.get());
    let f_core = format!("C_vector / {core_sym}");
    let per_core = note(
        tr,
        Derived {
            key: "vector_per_core_flops_per_s",
            label: "Vector ops per second of one core (its VPU / its CUDA cores)",
            formula: &f_core,
            binds: &[
                ("C_vector", vector.unwrap_or(0.0), "FLOP/s"),
                (core_sym, cores.unwrap_or(0) as f64, ""),
            ],
            unit: "FLOP/s",
            src: if gpu { CH12_Q1 } else { CH2_VPU },
        },
        vector.zip(cores).map(|(v, k)| v / k as f64),
    );
    let n = alus.unwrap_or(0) as f64;
    let at = |clock: Option<f64>| alus.zip(clock).map(|(n, f)| n as f64 * f);
    let f_base = format!("{alu_sym} · f_base");
    let base = note(
        tr,
        Derived {
            key: "vector_peak_base_flops_per_s",
            label: "Vector ops per second at the base clock (one op per ALU per cycle)",
            formula: &f_base,
            binds: &[
                (alu_sym, n, ""),
                ("f_base", a.clock_base_hz.unwrap_or(0.0), "Hz"),
            ],
            unit: "FLOP/s",
            src: "How To Scale Your Model, ch12 Quiz 1 Q2 (132·4·32·1.59e9 = 26.9e12)",
        },
        at(a.clock_base_hz),
    );
    let f_boost = format!("{alu_sym} · f_boost");
    let boost = note(
        tr,
        Derived {
            key: "vector_peak_boost_flops_per_s",
            label: "Vector ops per second at the boost clock (one op per ALU per cycle)",
            formula: &f_boost,
            binds: &[
                (alu_sym, n, ""),
                ("f_boost", a.clock_hz.unwrap_or(0.0), "Hz"),
            ],
            unit: "FLOP/s",
            src: "How To Scale Your Model, ch12 Quiz 1 Q2 (\"With boost its 33.5 TFLOPs/s\")",
        },
        // a TPU has one clock (the vector peak); base and boost are a GPU's
        at(a.clock_hz.filter(|_| gpu)),
    );
    let fp32 = ch.peak.fp32.map(|x| x.get()).filter(|_| gpu);
    let clock = note(
        tr,
        Derived {
            key: "clock_from_fp32_hz",
            label:
                "Clock implied by the published FP32 peak (an FMA: 2 FLOPs per CUDA core per cycle)",
            formula: "C_fp32 / (2 · N_cuda)",
            binds: &[("C_fp32", fp32.unwrap_or(0.0), "FLOP/s"), ("N_cuda", n, "")],
            unit: "Hz",
            src: "How To Scale Your Model, ch12 Quiz 1 Q6 (B200: 80e12 / 37888 ≈ 2.1 GHz)",
        },
        fp32.zip(alus).map(|(p, n)| p / (2.0 * n as f64)),
    );
    [per_core, base, boost, clock]
}

/// TPU VMEM bandwidth and the intensity a matmul fed from VMEM needs,
/// recorded.
fn vmem_figures<T: Tracer>(ch: &Chip, tr: &mut T) -> [Option<f64>; 2] {
    let r = ch.anatomy.vmem_bandwidth_vs_hbm;
    let w_hbm = ch.hbm_bandwidth.get();
    let w = note(
        tr,
        Derived {
            key: "vmem_bandwidth_bytes_per_s",
            label: "VMEM bandwidth (VMEM ↔ MXU)",
            formula: "r_vmem · W_hbm",
            binds: &[("r_vmem", r.unwrap_or(0.0), ""), ("W_hbm", w_hbm, "B/s")],
            unit: "B/s",
            src: "How To Scale Your Model, ch2 (\"VMEM bandwidth is around 22x higher than HBM bandwidth\"; Q4: 8.1e11 → 1.78e13)",
        },
        r.map(|r| r * w_hbm),
    );
    let c = ch.flops(DType::Bf16).get();
    let ci = note(
        tr,
        Derived {
            key: "critical_intensity_vmem",
            label: "Critical intensity of a matmul fed from VMEM",
            formula: "C / W_vmem",
            binds: &[("C", c, "FLOP/s"), ("W_vmem", w.unwrap_or(0.0), "B/s")],
            unit: "FLOPs/B",
            src: "How To Scale Your Model, ch2 (\"an arithmetic intensity of only 10-20\")",
        },
        w.map(|w| c / w),
    );
    [w, ci]
}

impl AnatomyReport {
    /// Derive the report for a chip, recording each derived figure.
    pub fn of<T: Tracer>(ch: &Chip, tr: &mut T) -> AnatomyReport {
        let a = &ch.anatomy;
        let [fpc, m_core, m_unit] = matrix_figures(ch, tr);
        let [v_core, v_base, v_boost, clock_fp32] = vector_figures(ch, tr);
        let [smem, regs, tmem, on_chip] = on_chip_totals(a, tr);
        let [w_vmem, ci_vmem] = vmem_figures(ch, tr);
        let (alus, cores) = (a.vector_alus(), a.cores());
        AnatomyReport {
            figures: a.clone(),
            matrix_units: a.matrix_units(),
            flops_per_cycle_per_matrix_unit: fpc,
            cores_per_chip: cores,
            matrix_per_core_flops_per_s: m_core,
            matrix_per_unit_flops_per_s: m_unit,
            vector_alus: alus,
            vector_alus_per_core: alus.zip(cores).map(|(x, k)| x / k),
            vector_peak_flops_per_s: ch.vector_peak().map(|v| v.get()),
            vector_per_core_flops_per_s: v_core,
            vector_peak_base_flops_per_s: v_base,
            vector_peak_boost_flops_per_s: v_boost,
            clock_from_fp32_hz: clock_fp32,
            smem_total_bytes: smem,
            registers_total_bytes: regs,
            tmem_total_bytes: tmem,
            on_chip_memory_total_bytes: on_chip,
            vmem_bandwidth_bytes_per_s: w_vmem,
            critical_intensity_vmem: ci_vmem,
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
        let fl = |v: Option<f64>| v.map(|v| fmt_si(v, "FLOP/s"));
        opt(
            "matmul per core (C / cores)",
            fl(self.matrix_per_core_flops_per_s),
        );
        opt(
            "matmul per matrix unit",
            fl(self.matrix_per_unit_flops_per_s),
        );
        opt("vector ALUs per chip", self.vector_alus.map(fmt_int));
        opt(
            "vector ALUs per core",
            self.vector_alus_per_core.map(fmt_int),
        );
        opt(
            "vector peak (1 op per ALU per cycle)",
            fl(self.vector_peak_flops_per_s),
        );
        opt("vector peak per core", fl(self.vector_per_core_flops_per_s));
        opt(
            "vector peak at base clock",
            fl(self.vector_peak_base_flops_per_s),
        );
        opt(
            "vector peak at boost clock",
            fl(self.vector_peak_boost_flops_per_s),
        );
        opt(
            "clock implied by FP32 peak (FMA = 2)",
            self.clock_from_fp32_hz.map(|h| fmt_si(h, "Hz")),
        );
        let tb = |x: Option<f64>| x.map(|v| fmt_si(v, "B"));
        opt("SMEM, whole chip", tb(self.smem_total_bytes));
        opt("registers, whole chip", tb(self.registers_total_bytes));
        opt("TMEM, whole chip", tb(self.tmem_total_bytes));
        opt(
            "on-chip memory (SMEM + registers + TMEM)",
            tb(self.on_chip_memory_total_bytes),
        );
        opt(
            "VMEM bandwidth (W_vmem)",
            self.vmem_bandwidth_bytes_per_s.map(|v| fmt_si(v, "B/s")),
        );
        opt(
            "C/W_vmem",
            self.critical_intensity_vmem
                .map(|v| format!("{} FLOPs/B", sig4(v))),
        );
        rows
    }
}
