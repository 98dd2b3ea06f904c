//! The training search space: degree tuples (every ordered factorization of
//! the chip count), TPU axis orders, and the choices inside one tuple.

use serde::{Deserialize, Serialize};

use crate::hardware::Chip;
use crate::parallelism::{
    Choice, Degrees, Framework, Offload, RankOrder, Remat, Schedule, TrainConfig,
};
use crate::units::{fmt_int, parse_count, DType};
use crate::Error;

/// The choices searched besides the degrees.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainSpace {
    /// Remat policies.
    pub remats: Vec<Remat>,
    /// ZeRO stages (only when dp·cp > 1; otherwise the stage changes nothing).
    pub zero_stages: Vec<u8>,
    /// Pipeline schedules (only when pp > 1).
    pub schedules: Vec<Schedule>,
    /// Micro-batch counts are `pp·2^k` for `2^k ≤` this (pp = 1: gradient
    /// accumulation, `2^k` steps), and no more than the sequences per
    /// replica unless m = pp.
    pub max_microbatch_factor: u64,
    /// Most virtual stages tried with the interleaved schedule: every v ≥ 2
    /// dividing the layers per stage L/pp, up to this (Megatron needs a whole
    /// number of layers per virtual stage; nothing else limits v).
    pub max_virtual_stages: u64,
    /// Sequence parallelism settings (only when tp > 1).
    pub sequence_parallel: Vec<bool>,
    /// TPU: also try every distinct ordering of the slice's physical axes
    /// (which axes tp, fsdp, … land on).
    pub permute_torus: bool,
    /// Offload settings tried (`plan train --offload auto`: every
    /// combination); empty: only the workload's own.
    pub offloads: Vec<Offload>,
    /// GPU rank orders: one fixes every plan to it; both (`plan train
    /// --rank-order auto`) try `tp-pp-dp` wherever it places an axis
    /// differently (`planner::rank_orders`). Default: Megatron's order only
    /// (searching both costs up to 2× the candidates).
    pub rank_orders: Vec<RankOrder>,
}

impl Default for TrainSpace {
    fn default() -> Self {
        TrainSpace {
            remats: Remat::ALL.to_vec(),
            zero_stages: vec![0, 1, 2, 3],
            schedules: vec![Schedule::Afab, Schedule::OneFOneB, Schedule::Interleaved],
            max_microbatch_factor: 32,
            max_virtual_stages: 16,
            sequence_parallel: vec![false, true],
            permute_torus: true,
            offloads: Vec::new(),
            rank_orders: vec![RankOrder::PipelineOuter],
        }
    }
}

/// Dimensions `plan train` searches only when asked (issue 25): the global
/// batch up to a limit and the compute dtype. Off by default — the user's
/// batch and dtype are the job: a different batch changes the optimization
/// (plans at one are listed with their batch, ranked by time per token), a
/// different dtype changes the numerics (the table names each plan's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchDims {
    /// `--max-global-batch`: the largest global batch, in tokens ("16Mi")
    /// or sequences ("2048 seqs"); the search tries the batch B and its
    /// doublings 2B, 4B, … up to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_global_batch: Option<String>,
    /// `--dtypes bf16,fp8`: exactly these compute dtypes (GEMM inputs;
    /// weights stay bf16 with the fp32 master and optimizer state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtypes: Option<String>,
    /// `--allow-fp8`: the workload's compute dtype and fp8, where the chip
    /// has an fp8 peak and the framework trains in fp8 (else a note says
    /// why fp8 was not searched).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_fp8: bool,
}

/// Most doublings of the batch `--max-global-batch` may ask for (64·B):
/// each batch is one full search.
pub const MAX_BATCH_DOUBLINGS: u32 = 6;

/// Compute dtypes `plan train` can search: the ones training runs in and
/// the step-time model prices (fp32 compute is not predicted; int8/fp4
/// training has no framework recipe meshplan states).
pub const SEARCHABLE_DTYPES: [DType; 3] = [DType::Bf16, DType::Fp16, DType::Fp8];

/// One point of the [`SearchDims`]: a batch and a compute dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// Global batch, tokens.
    pub batch_tokens: u64,
    /// Compute dtype.
    pub compute_dtype: DType,
}

/// Why `framework` cannot train with fp8 GEMMs, if it cannot. Megatron-Core
/// (Transformer Engine `--fp8-format`), torchtitan (`float8` converter,
/// torchao), MaxText (`quantization: fp8`) and the book's accounting (the
/// roofline at the chip's fp8 peak) can; Megatron-LM 2021/2022 predate
/// Transformer Engine, and nanotron and DeepSpeed document no fp8 training
/// option.
pub fn fp8_unsupported_by(framework: Framework) -> Option<String> {
    match framework {
        Framework::Book | Framework::Megatron | Framework::Torchtitan | Framework::Maxtext => None,
        f => Some(format!("the {f} framework has no fp8 training recipe")),
    }
}

/// Why `chip` under `framework` cannot train in `dtype`, if it cannot.
fn dtype_unsupported(chip: &Chip, framework: Framework, dtype: DType) -> Option<String> {
    if !SEARCHABLE_DTYPES.contains(&dtype) {
        return Some(format!(
            "{dtype} is not a training compute dtype the search prices (one of bf16, fp16, fp8)"
        ));
    }
    if chip.peak.get(dtype).is_none() {
        return Some(format!("{} has no {dtype} peak", chip.name));
    }
    match dtype {
        DType::Fp8 => fp8_unsupported_by(framework),
        _ => None,
    }
}

impl SearchDims {
    /// Nothing asked for: the user's batch and dtype only.
    pub fn is_off(&self) -> bool {
        self.max_global_batch.is_none() && self.dtypes.is_none() && !self.allow_fp8
    }

    /// The limit in tokens: "16Mi" (tokens), "2048 seqs" (× the sequence
    /// length `t`).
    pub fn max_batch_tokens(&self, t: u64) -> crate::Result<Option<u64>> {
        let Some(text) = self.max_global_batch.as_deref() else {
            return Ok(None);
        };
        let bad = |why: String| {
            Error::Invalid(format!(
                "--max-global-batch {text:?}: {why} (tokens like \"16Mi\", or sequences like \"2048 seqs\")"
            ))
        };
        let lower = text.trim().to_ascii_lowercase();
        let seqs = ["sequences", "sequence", "seqs", "seq"]
            .iter()
            .find_map(|u| lower.strip_suffix(u));
        let tokens = ["tokens", "token", "tok"]
            .iter()
            .find_map(|u| lower.strip_suffix(u));
        // the unit words are stripped from the lowercase text; the number
        // keeps its case ("16Mi" vs "16mi" is not the same count)
        let number = |rest: &str| text.trim()[..rest.trim_end().len()].to_string();
        let (count, per) = match (seqs, tokens) {
            (Some(r), _) => (number(r), t),
            (_, Some(r)) => (number(r), 1),
            _ => (text.trim().to_string(), 1),
        };
        let n = parse_count(&count).map_err(|e| bad(e.to_string()))?;
        let v = n
            .checked_mul(per)
            .ok_or_else(|| bad("more tokens than a 64-bit count holds".into()))?;
        if v == 0 {
            return Err(bad("must be at least one sequence".into()));
        }
        Ok(Some(v))
    }

    /// The batches searched: B, then 2B, 4B, … up to the limit (B alone
    /// without one). A limit below B, or beyond 2^[`MAX_BATCH_DOUBLINGS`]·B,
    /// is refused.
    pub fn batches(&self, base: &TrainConfig) -> crate::Result<Vec<u64>> {
        let b = base.batch_tokens;
        let Some(max) = self.max_batch_tokens(base.seq_len)? else {
            return Ok(vec![b]);
        };
        if max < b {
            return Err(Error::Invalid(format!(
                "--max-global-batch {} tokens is below the batch ({} tokens): the search tries the batch and its doublings up to the limit",
                fmt_int(max),
                fmt_int(b)
            )));
        }
        let out: Vec<u64> = (0..64u32)
            .map_while(|k| b.checked_mul(1u64 << k))
            .take_while(|x| *x <= max && b > 0)
            .collect();
        if out.len() as u32 > MAX_BATCH_DOUBLINGS + 1 {
            return Err(Error::Invalid(format!(
                "--max-global-batch {} tokens is {} doublings of the batch ({} tokens); at most {MAX_BATCH_DOUBLINGS} (each batch is a full search)",
                fmt_int(max),
                out.len() - 1,
                fmt_int(b)
            )));
        }
        Ok(if out.is_empty() { vec![b] } else { out })
    }

    /// The compute dtypes searched, the workload's first when it is among
    /// them, and a note when `--allow-fp8` could not add fp8 (the chip or
    /// the framework). An explicit list with a dtype the chip or framework
    /// cannot train in is refused.
    pub fn dtypes(
        &self,
        chip: &Chip,
        base: &TrainConfig,
    ) -> crate::Result<(Vec<DType>, Option<String>)> {
        let own = base.compute_dtype;
        let mut out = Vec::new();
        if let Some(list) = self.dtypes.as_deref() {
            for part in list.split(',').map(str::trim) {
                let d = DType::parse(part)
                    .map_err(|e| Error::Invalid(format!("--dtypes {list:?}: {e}")))?;
                if let Some(why) = dtype_unsupported(chip, base.framework, d) {
                    return Err(Error::Invalid(format!("--dtypes {list:?}: {why}")));
                }
                if !out.contains(&d) {
                    out.push(d);
                }
            }
            if out.is_empty() {
                return Err(Error::Invalid(
                    "--dtypes: name at least one dtype (\"bf16,fp8\")".into(),
                ));
            }
            // the workload's own first (the default wins ties)
            if let Some(i) = out.iter().position(|d| *d == own) {
                out[..=i].rotate_right(1);
            }
        } else {
            out.push(own);
        }
        let mut note = None;
        if self.allow_fp8 && !out.contains(&DType::Fp8) {
            match dtype_unsupported(chip, base.framework, DType::Fp8) {
                None => out.push(DType::Fp8),
                Some(why) => note = Some(format!("--allow-fp8: fp8 not searched: {why}")),
            }
        }
        Ok((out, note))
    }

    /// Every (batch, dtype) to search, the user's batch and dtype first,
    /// then by batch, then by dtype; and the note of [`SearchDims::dtypes`].
    pub fn variants(
        &self,
        chip: &Chip,
        base: &TrainConfig,
    ) -> crate::Result<(Vec<Variant>, Option<String>)> {
        let batches = self.batches(base)?;
        let (dtypes, note) = self.dtypes(chip, base)?;
        let v = batches
            .iter()
            .flat_map(|&b| {
                dtypes.iter().map(move |&d| Variant {
                    batch_tokens: b,
                    compute_dtype: d,
                })
            })
            .collect();
        Ok((v, note))
    }
}

/// All ordered ways to write `n` as dp·fsdp·tp·pp·cp.
pub fn factorizations(n: u64) -> Vec<[u64; 5]> {
    let divs = divisors(n);
    let mut out = Vec::new();
    for &tp in &divs {
        let r1 = n / tp;
        for &pp in divs.iter().filter(|d| r1 % **d == 0) {
            let r2 = r1 / pp;
            for &cp in divs.iter().filter(|d| r2 % **d == 0) {
                let r3 = r2 / cp;
                for &fsdp in divs.iter().filter(|d| r3 % **d == 0) {
                    out.push([r3 / fsdp, fsdp, tp, pp, cp]);
                }
            }
        }
    }
    out
}

/// Divisors of `n`, ascending.
pub fn divisors(n: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut i = 1;
    // `i <= n / i`, not `i * i <= n`: no overflow for n near u64::MAX
    while i <= n / i {
        if n % i == 0 {
            v.push(i);
            if i != n / i {
                v.push(n / i);
            }
        }
        i += 1;
    }
    v.sort_unstable();
    v
}

/// Every distinct ordering of a slice shape (the given one first).
pub fn permutations(shape: &[u64]) -> Vec<Vec<u64>> {
    fn rec(cur: &mut Vec<u64>, rest: &mut Vec<u64>, out: &mut Vec<Vec<u64>>) {
        if rest.is_empty() {
            if !out.contains(cur) {
                out.push(cur.clone());
            }
            return;
        }
        for i in 0..rest.len() {
            let x = rest.remove(i);
            cur.push(x);
            rec(cur, rest, out);
            cur.pop();
            rest.insert(i, x);
        }
    }
    let mut out = vec![shape.to_vec()];
    rec(&mut Vec::new(), &mut shape.to_vec(), &mut out);
    out
}

/// Micro-batch counts for `pp` stages: `pp·2^k` up to the space's factor,
/// no more than the sequences per replica (`spr`) unless m = pp.
fn microbatch_counts(space: &TrainSpace, pp: u64, spr: f64) -> impl Iterator<Item = u64> {
    let max = space.max_microbatch_factor.max(1);
    (0..64u32)
        .map(|k| 1u64 << k)
        .take_while(move |f| *f <= max)
        .map(move |f| pp.saturating_mul(f))
        .take_while(move |&m| m == pp || m as f64 <= spr)
}

/// Virtual stages for the interleaved schedule: every v ≥ 2 that divides the
/// layers per stage `L/pp`, up to the space's limit (none when pp does not
/// divide L: the uneven split has no interleaved form here).
fn interleave_depths(space: &TrainSpace, n_layers: u64, pp: u64) -> impl Iterator<Item = u64> {
    let per_stage = if pp > 0 && n_layers % pp == 0 {
        n_layers / pp
    } else {
        0
    };
    let max = space.max_virtual_stages;
    (2..=per_stage.min(max)).filter(move |v| per_stage % v == 0)
}

/// The choices for one degree tuple, appended to `out` (cleared first). For
/// pp = 1 the micro-batch counts are gradient-accumulation steps, in
/// ascending order for each (ZeRO, remat, SP), so that the search can stop
/// at the first count that fits.
pub fn inner_choices(
    space: &TrainSpace,
    base: &TrainConfig,
    n_layers: u64,
    deg: &Degrees,
    out: &mut Vec<Choice>,
) {
    out.clear();
    // With fsdp > 1 the plan is ZeRO-3 over every data-parallel rank when
    // dp = 1 or zero = 3 (`RunSpec::from_config`, `MemoryQuery::from_config`):
    // dp = 1 lists it once, as zero 3; with dp > 1 only hybrid sharding
    // (zero ≤ 2 across the replicas) is a plan of its own — zero 3 there is
    // the dp = 1, fsdp = dp·fsdp plan again (issue 22: exact ties).
    let hybrid: Vec<u8>;
    let zeros: &[u8] = if deg.fsdp > 1 && deg.dp <= 1 {
        &[3]
    } else if deg.fsdp > 1 {
        hybrid = space
            .zero_stages
            .iter()
            .copied()
            .filter(|&z| z < 3)
            .collect();
        &hybrid
    } else if deg.dp.saturating_mul(deg.cp) > 1 {
        &space.zero_stages
    } else {
        &[0]
    };
    let sps: &[bool] = if deg.tp > 1 {
        &space.sequence_parallel
    } else {
        &[false]
    };
    let spr = base.sequences() / deg.data().max(1) as f64;
    let own = [base.offload];
    let offloads: &[Offload] = if space.offloads.is_empty() {
        &own
    } else {
        &space.offloads
    };
    // offload outermost: each (ZeRO, remat, SP) run of micro-batch counts
    // stays contiguous for the search's early stop
    for &offload in offloads {
        push_choices(space, deg, n_layers, spr, offload, zeros, sps, out);
    }
}

/// The choices of one offload setting (see [`inner_choices`]).
#[allow(clippy::too_many_arguments)]
fn push_choices(
    space: &TrainSpace,
    deg: &Degrees,
    n_layers: u64,
    spr: f64,
    offload: Offload,
    zeros: &[u8],
    sps: &[bool],
    out: &mut Vec<Choice>,
) {
    let pipe: &[Schedule] = if deg.pp > 1 {
        &space.schedules
    } else {
        &[Schedule::OneFOneB]
    };
    for &zero in zeros {
        for &remat in &space.remats {
            for &sp in sps {
                for &schedule in pipe {
                    for m in microbatch_counts(space, deg.pp, spr) {
                        let c = Choice {
                            zero,
                            remat,
                            sp,
                            schedule,
                            microbatches: m,
                            virtual_stages: 1,
                            offload,
                        };
                        if schedule != Schedule::Interleaved {
                            out.push(c);
                            continue;
                        }
                        for v in interleave_depths(space, n_layers, deg.pp) {
                            out.push(Choice {
                                virtual_stages: v,
                                ..c
                            });
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_accumulation_counts_without_a_pipeline() {
        // 64 sequences over dp = 8: 8 per replica → m ∈ {1, 2, 4, 8}
        let base = TrainConfig {
            batch_tokens: 64 * 4096,
            seq_len: 4096,
            ..TrainConfig::default()
        };
        let deg = Degrees {
            dp: 8,
            ..Degrees::default()
        };
        let space = TrainSpace {
            remats: vec![Remat::Full],
            zero_stages: vec![0],
            ..TrainSpace::default()
        };
        let mut out = Vec::new();
        inner_choices(&space, &base, 32, &deg, &mut out);
        let ms: Vec<u64> = out.iter().map(|c| c.microbatches).collect();
        assert_eq!(ms, [1, 2, 4, 8]);
    }

    #[test]
    fn interleaving_tries_every_divisor_of_the_layers_per_stage() {
        // L = 80 on pp = 4: 20 layers per stage, divisors ≥ 2 of 20 are
        // 2, 4, 5, 10, 20; the default cap 16 drops 20. Each interleaved
        // choice is one (m, v) pair, so count the v's of one m.
        let base = TrainConfig {
            batch_tokens: 64 * 4096,
            seq_len: 4096,
            ..TrainConfig::default()
        };
        let deg = Degrees {
            pp: 4,
            dp: 2,
            ..Degrees::default()
        };
        let space = TrainSpace {
            remats: vec![Remat::Full],
            zero_stages: vec![0],
            schedules: vec![Schedule::Interleaved],
            sequence_parallel: vec![false],
            max_microbatch_factor: 1,
            ..TrainSpace::default()
        };
        let mut out = Vec::new();
        inner_choices(&space, &base, 80, &deg, &mut out);
        let vs: Vec<u64> = out.iter().map(|c| c.virtual_stages).collect();
        assert_eq!(vs, [2, 4, 5, 10]);
        // 126 layers on pp = 8 (Llama-3.1-405B's uneven split): no interleave
        inner_choices(&space, &base, 126, &Degrees { pp: 8, ..deg }, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn the_batch_limit_reads_tokens_or_sequences_and_doubles_the_batch() {
        let base = TrainConfig {
            batch_tokens: 4 << 20,
            seq_len: 4096,
            ..TrainConfig::default()
        };
        let dims = |m: &str| SearchDims {
            max_global_batch: Some(m.into()),
            ..SearchDims::default()
        };
        // 2048 sequences of 4,096 tokens = 8,388,608 tokens = 8Mi
        assert_eq!(
            dims("2048 seqs").max_batch_tokens(4096).unwrap(),
            Some(8 << 20)
        );
        assert_eq!(
            dims("16Mi tokens").max_batch_tokens(4096).unwrap(),
            Some(16 << 20)
        );
        // 4Mi, 8Mi, 16Mi: 20Mi is not a doubling, the last one below it is 16Mi
        assert_eq!(
            dims("20Mi").batches(&base).unwrap(),
            [4 << 20, 8 << 20, 16 << 20]
        );
        assert_eq!(dims("4Mi").batches(&base).unwrap(), [4 << 20]);
        assert_eq!(SearchDims::default().batches(&base).unwrap(), [4 << 20]);
        // 2^6 · 4Mi = 256Mi is the most; 512Mi is 7 doublings
        assert_eq!(dims("256Mi").batches(&base).unwrap().len(), 7);
        assert!(dims("512Mi").batches(&base).is_err());
    }

    #[test]
    fn the_workloads_dtype_comes_first_and_fp8_needs_chip_and_framework() {
        let cat = crate::Catalog::builtin();
        let (h100, a100) = (cat.chip("h100").unwrap(), cat.chip("a100-80gb").unwrap());
        let base = TrainConfig {
            framework: Framework::Megatron,
            ..TrainConfig::default()
        };
        let dims = |l: &str, allow| SearchDims {
            dtypes: (!l.is_empty()).then(|| l.into()),
            allow_fp8: allow,
            ..SearchDims::default()
        };
        let (d, note) = dims("fp8,bf16", false).dtypes(h100, &base).unwrap();
        assert_eq!((d, note), (vec![DType::Bf16, DType::Fp8], None));
        let (d, note) = dims("", true).dtypes(a100, &base).unwrap();
        assert_eq!(d, [DType::Bf16]);
        assert!(note.unwrap().contains("no fp8 peak"));
        let old = TrainConfig {
            framework: Framework::Megatron2022,
            ..base
        };
        assert!(dims("fp8", false).dtypes(h100, &old).is_err());
        assert!(dims("fp32", false).dtypes(h100, &base).is_err());
        assert!(dims(" , ", false).dtypes(h100, &base).is_err());
    }

    #[test]
    fn factorizations_multiply_back() {
        for f in factorizations(24) {
            assert_eq!(f.iter().product::<u64>(), 24);
        }
        assert_eq!(divisors(12), [1, 2, 3, 4, 6, 12]);
    }
}
