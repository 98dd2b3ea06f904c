//! The efficiency profile of a TPU: MaxText (JAX/XLA) on one ICI slice.
//! Nothing here was fitted on TPU runs (there are none in
//! ../shared/validation): every parameter is a published
//! microbenchmark-level figure or a named transfer of the H100 Megatron-Core
//! one, with its source beside it. The chip's own peak FLOP/s, HBM bandwidth
//! and ICI link bandwidth come from its catalog entry; the fidelity model
//! costs a collective as a bidirectional ring along a wrapped torus axis
//! (`step::calibrated`, book ch3), so groups spanning several axes are
//! costed conservatively (one axis' bandwidth).

use crate::fidelity::profile::Param;
use crate::fidelity::EfficiencyProfile;
use crate::hardware::Chip;

/// The network name TPU profiles carry (selects the MaxText framework).
pub const ICI: &str = "ici";

/// Megatron-Core's fitted GEMM efficiency on H100 (data/profiles/h100.toml,
/// `[networks.infiniband.params]`) over the fraction of peak an H100
/// reaches on large GEMMs (book ch1 footnote: 80–85 %): the share of the
/// achievable rate the training stack keeps, 0.70/0.825.
const STACK_SHARE: f64 = 0.70 / 0.825;

/// Fraction of peak a TPU reaches on large matmuls (book ch1 footnote:
/// "TPUs ≈ 95 %").
const TPU_ACHIEVABLE: f64 = 0.95;

/// (parameter, value, source) of the TPU profile.
fn params() -> [(Param, f64, &'static str); 10] {
    [
        (
            Param::MatmulEfficiency,
            TPU_ACHIEVABLE * STACK_SHARE,
            "book ch1 footnote: TPUs reach ~95 % of peak on large matmuls (H100 80-85 %); times the share of the achievable rate Megatron-Core keeps on H100 (0.70 fitted on the mcore24 runs / 0.825): 0.806; not fitted on TPU",
        ),
        (
            Param::AttentionEfficiency,
            0.200007 * TPU_ACHIEVABLE / 0.825,
            "the H100 Megatron-Core attention efficiency (0.20) scaled by the TPU/H100 achievable-matmul ratio (0.95/0.825): splash attention runs on the MXU like the GEMMs; no TPU attention microbenchmark published; not fitted",
        ),
        (
            Param::IntraNodeEfficiency,
            0.95,
            "book ch3 (measured): a TPU v5e all-gather reaches ~95 % of the 4.5e10 B/s ICI link bandwidth at ~10 MB",
        ),
        (
            Param::CollectiveLatencyS,
            1e-6,
            "book ch2/ch3: ~1 us per ICI hop (a ring step)",
        ),
        (
            Param::LayerOverheadS,
            0.0,
            "JAX jit compiles the whole step into one XLA program: no per-kernel host launch (MaxText)",
        ),
        (
            Param::UsableHbmFraction,
            1.0,
            "XLA plans TPU buffers statically at compile time (no caching allocator, no NCCL); the runtime's own reservation is not published: not modelled",
        ),
        (
            Param::RuntimeReserveGb,
            0.0,
            "no CUDA context / NCCL buffers on TPU; see usable_hbm_fraction",
        ),
        (
            Param::InterNodeEfficiency,
            1.0,
            "multi-slice jobs: the catalog's DCN figure is the achieved per-chip egress the book uses for DCN collectives (ch3/ch5: W_dcn = 6.25e9 B/s per v5p chip), taken as is; no DCN collective microbenchmark is published",
        ),
        (
            Param::InterNodeCongestion,
            0.0,
            "no measurement of DCN bandwidth against the number of slices: none assumed",
        ),
        (
            Param::DpOverlap,
            0.9,
            "XLA's async collectives run the gradient reduce-scatter under the backward (MaxText's default latency-hiding scheduler); the Megatron-Core value (0.9, --overlap-grad-reduce) kept; not fitted on TPU",
        ),
    ]
}

/// How [`tpu_profile`]'s profile is described (`predicted.profile_origin`).
pub const ORIGIN: &str = "TPU profile (ici network, MaxText)";

/// The built-in profile of a TPU chip, or `None` for chips without ICI.
pub fn tpu_profile(chip: &Chip) -> Option<EfficiencyProfile> {
    chip.ici.as_ref()?;
    let base = EfficiencyProfile::builtin("h100")?.for_network("infiniband");
    let mut profile = base.clone();
    profile.networks.clear();
    // the H100 cluster's measured bus-bandwidth curves are InfiniBand's, not DCN's
    profile.measured_bw_nodes.clear();
    profile.measured_allreduce_gbs.clear();
    profile.measured_allgather_gbs.clear();
    for (p, v, src) in params() {
        profile.set_param(p, v);
        profile.sources.insert(p.to_string(), src.to_string());
    }
    profile.chip = chip.name.clone();
    profile.network = ICI.to_string();
    profile.source = format!(
        "not fitted on {}: MaxText/JAX on one ICI slice, parameters from the book's and vendors' microbenchmark figures (sources per parameter); the other parameters are the h100 Megatron-Core ones | {}",
        chip.name, base.source
    );
    Some(profile)
}
