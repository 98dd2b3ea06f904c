//! What a Megatron-Core process holds on the device besides the model state
//! and activations, and how much of the device it may fill: named terms, each
//! with its source. nanotron keeps the terms its efficiency profile fitted on
//! the Playbook's own peak-memory measurements (`MemoryCalibration`), whose
//! units the profile's usable fraction matches.

use crate::hardware::Chip;
use crate::parallelism::Framework;

/// Bytes in a vendor "GB" of HBM: HBM stacks come in powers of two (an
/// H100 SXM carries five 16 GiB HBM3 stacks = 80 GiB), and the capacity
/// CUDA reports is binary (nvidia-smi: 81,559 MiB on an "80 GB" H100 SXM,
/// 81,920 MiB on an "80 GB" A100).
pub const HBM_GB_BYTES: f64 = 1_073_741_824.0;

/// Fraction of the binary capacity the driver keeps for itself (page
/// tables, ECC): 1 − 81,559/81,920 MiB on the H100 SXM (nvidia-smi).
pub const DRIVER_RESERVED_FRACTION: f64 = 1.0 - 81_559.0 / 81_920.0;

/// The CUDA context of a PyTorch process (kernel images of PyTorch, cuBLAS,
/// cuDNN and Transformer Engine with CUDA lazy module loading), outside the
/// caching allocator: ~0.5 GiB (PyTorch "CUDA semantics" notes; nvidia-smi
/// shows 0.4–0.6 GiB per process before the first allocation).
pub const CUDA_CONTEXT_BYTES: f64 = 0.5 * HBM_GB_BYTES;

/// NCCL's channel buffers for the ring/tree collectives of a rank's
/// communicators: 1.06 GB measured on 8×H100 before any all-to-all
/// (NVIDIA/nccl#1685); grows with channels and communicators, not with the
/// job beyond 2 nodes (NVIDIA/nccl#986, maintainer's answer).
pub const NCCL_BUFFERS_BYTES: f64 = 1.06e9;

/// The extra NCCL buffers an all-to-all connects (every peer pair gets its
/// channels): 4.34 − 1.06 GB on 8×H100 (NVIDIA/nccl#1685); counted with
/// expert parallelism.
pub const NCCL_ALL_TO_ALL_BYTES: f64 = 3.28e9;

/// Caching-allocator slack at the peak (reserved − allocated): an
/// assumption, not a measurement — NeMo launches with
/// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, which maps freed
/// segments back instead of fragmenting them; 1 GiB covers the transient
/// buffers (gradient-reduce bucket, TE/cuBLAS workspaces, 32 MiB each). The
/// verdict's band ([`super::verdict`]) carries the uncertainty.
pub const ALLOCATOR_SLACK_BYTES: f64 = HBM_GB_BYTES;

/// The device memory a process of `framework` may fill, bytes: for the
/// PyTorch frameworks whose terms are named here (Megatron, torchtitan,
/// DeepSpeed) the binary capacity less the driver's share and the
/// CUDA context (both outside the allocator's peak); otherwise `fraction` of
/// the catalog capacity (the book: all of it; nanotron: the profile's fitted
/// fraction, in the Playbook's measured units).
pub fn usable_bytes(chip: &Chip, framework: Framework, fraction: f64) -> f64 {
    let label = chip.hbm_capacity.get();
    match framework {
        Framework::Megatron
        | Framework::Megatron2022
        | Framework::Megatron2021
        | Framework::Torchtitan
        | Framework::Deepspeed => {
            label / 1e9 * HBM_GB_BYTES * (1.0 - DRIVER_RESERVED_FRACTION) - CUDA_CONTEXT_BYTES
        }
        _ => label * fraction,
    }
}

/// Megatron-Core's runtime reserve counted in the peak: NCCL buffers (plus
/// the all-to-all ones with expert parallelism) and the allocator slack.
pub fn megatron_reserve_bytes(ep: u64) -> f64 {
    NCCL_BUFFERS_BYTES + ALLOCATOR_SLACK_BYTES + if ep > 1 { NCCL_ALL_TO_ALL_BYTES } else { 0.0 }
}

/// torchtitan's runtime reserve counted in the peak: the NCCL buffers and the
/// allocator slack (torchtitan's launcher sets
/// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, as NeMo does); FSDP2's
/// unsharded blocks are counted with the weights
/// ([`super::gathered_bytes_per_layer_param`]).
pub fn torchtitan_reserve_bytes() -> f64 {
    NCCL_BUFFERS_BYTES + ALLOCATOR_SLACK_BYTES
}

/// DeepSpeed's gradient bucket with ZeRO stages 1–3: `reduce_bucket_size`
/// = 5·10⁸ elements (`deepspeed/runtime/zero/config.py` default) of 16-bit
/// gradients, the contiguous buffer the backward's reductions fill
/// (`contiguous_gradients`).
pub const DEEPSPEED_REDUCE_BUCKET_BYTES: f64 = 5e8 * 2.0;

/// DeepSpeed's runtime reserve counted in the peak: NCCL buffers, allocator
/// slack, and with ZeRO ≥ 1 the reduce bucket.
pub fn deepspeed_reserve_bytes(zero: u8) -> f64 {
    let bucket = if zero >= 1 {
        DEEPSPEED_REDUCE_BUCKET_BYTES
    } else {
        0.0
    };
    NCCL_BUFFERS_BYTES + ALLOCATOR_SLACK_BYTES + bucket
}
