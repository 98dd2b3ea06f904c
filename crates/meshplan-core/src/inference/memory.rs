//! Serving memory: weights per device, KV cache, the largest batch that fits.
//!
//! Book ch7: weights `P·bytes_w`, KV cache `2·K·H·L·bytes_kv` per token and
//! `S` times that per sequence; fully sharded over `N` chips the largest batch
//! is `⌊(N·HBM − weight bytes)/KV per sequence⌋` (ch7 Q2, ch8).

use serde::Serialize;

use crate::model::params::ParamCounts;
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, DType};

/// How the weights are laid out over the slice: `Y`-way tensor parallelism,
/// `Z`-way expert parallelism, and `replicas` copies (data-parallel serving).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// Chips in the slice.
    pub chips: u64,
    /// Y: tensor-parallel degree (attention heads, F, vocabulary).
    pub tp: u64,
    /// Z: expert-parallel degree (routed experts only).
    pub ep: u64,
    /// Model copies: chips / (Y·Z).
    pub replicas: u64,
}

/// Total weight bytes: `P·bytes_w`.
pub fn weight_bytes<T: Tracer>(p: &ParamCounts, dtype: DType, tr: &mut T) -> Bytes {
    let b = dtype.bytes_for(p.total);
    tr.record(|| {
        Step::new("infer.weights_bytes", "Weight bytes", "P·bytes_w")
            .bind("P", p.total as f64, "params")
            .bind("bytes_w", dtype.bytes_per_element(), "B")
            .result(b.get(), "B")
            .source("How To Scale Your Model, ch7")
    });
    b
}

/// Weight bytes one chip holds: everything but the routed experts is split
/// `Y` ways (replicated over `Z`); routed experts are split `Y·Z` ways
/// (`W[E_Z, D, F_Y]`, ch7 Q6). With `Y·Z = N` and a dense model this is `P·bytes_w/N`.
pub fn weight_bytes_per_device<T: Tracer>(
    p: &ParamCounts,
    dtype: DType,
    pl: &Placement,
    tr: &mut T,
) -> Bytes {
    let dense = p.total - p.experts_routed;
    let routed = p.experts_routed;
    let e = dense as f64 / pl.tp as f64 + routed as f64 / (pl.tp * pl.ep) as f64;
    let b = Bytes::new(e * dtype.bytes_per_element());
    tr.record(|| {
        Step::new(
            "infer.weights_bytes_per_device",
            "Weight bytes per chip",
            "(P_dense/Y + P_experts/(Y·Z))·bytes_w",
        )
        .bind("P_dense", dense as f64, "params")
        .bind("P_experts", routed as f64, "params")
        .bind("Y", pl.tp as f64, "")
        .bind("Z", pl.ep as f64, "")
        .bind("bytes_w", dtype.bytes_per_element(), "B")
        .result(b.get(), "B")
        .source("How To Scale Your Model, ch7 Q6 (expert sharding W[E_Z, D, F_Y])")
    });
    b
}

/// The largest batch at one context length, and what is left over.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MaxBatch {
    /// ⌊(N·HBM − N·weights per chip)/KV per sequence⌋ (0 if nothing fits).
    pub max_batch: u64,
    /// The same quotient before the floor.
    pub max_batch_exact: f64,
    /// HBM per chip minus weights per chip (negative: the weights alone do not fit).
    pub free_hbm_bytes_per_device: Bytes,
    /// HBM per chip left after weights and the KV of `max_batch` sequences.
    pub leftover_hbm_bytes_per_device: Bytes,
}

/// Whether weights plus `batch` sequences of KV fit: `N·w + B·KV ≤ N·HBM`
/// (KV fully sharded over the slice: batch, KV heads, sequence).
pub fn fits(
    chips: u64,
    hbm: Bytes,
    weights_per_device: Bytes,
    kv_per_seq: Bytes,
    batch: u64,
) -> bool {
    let n = chips as f64;
    n * weights_per_device.get() + batch as f64 * kv_per_seq.get() <= n * hbm.get()
}

/// `⌊(N·HBM − weight bytes)/KV per sequence⌋` (book ch7 Q2, ch8), checked
/// against [`fits`] so that `max_batch` fits and `max_batch + 1` does not.
pub fn max_batch<T: Tracer>(
    chips: u64,
    hbm: Bytes,
    weights_per_device: Bytes,
    kv_per_seq: Bytes,
    tr: &mut T,
) -> MaxBatch {
    let n = chips as f64;
    let free = hbm - weights_per_device;
    let exact = if kv_per_seq.get() > 0.0 {
        (n * free.get() / kv_per_seq.get()).max(0.0)
    } else {
        f64::INFINITY
    };
    let mut b = if exact.is_finite() {
        exact.floor().min(u64::MAX as f64 / 4.0) as u64
    } else {
        u64::MAX / 4
    };
    if exact.is_finite() {
        while b > 0 && !fits(chips, hbm, weights_per_device, kv_per_seq, b) {
            b -= 1;
        }
        while fits(chips, hbm, weights_per_device, kv_per_seq, b + 1) {
            b += 1;
        }
    }
    if free.get() < 0.0 {
        b = 0;
    }
    let leftover = Bytes::new(free.get() - b as f64 * kv_per_seq.get() / n);
    tr.record(|| {
        Step::new(
            "infer.max_batch",
            "Largest batch that fits",
            "⌊(N·HBM − N·w)/KV_seq⌋",
        )
        .bind("N", n, "chips")
        .bind("HBM", hbm.get(), "B")
        .bind("w", weights_per_device.get(), "B")
        .bind("KV_seq", kv_per_seq.get(), "B")
        .result(b as f64, "sequences")
        .source("How To Scale Your Model, ch7 Q2 and ch8")
    });
    MaxBatch {
        max_batch: b,
        max_batch_exact: exact,
        free_hbm_bytes_per_device: free,
        leftover_hbm_bytes_per_device: leftover,
    }
}

/// Copies of each sequence's KV cache over the `tp` tensor-parallel ranks of
/// a replica: a serving engine keeps an MLA model's latent cache whole on
/// every TP rank (SGLang v0.4 release notes, lmsys.org/blog/2024-12-04: "MLA
/// … TP would cause KV cache duplication", the reason for its DP attention;
/// vLLM's and TensorRT-LLM's MLA backends keep the full latent per rank too),
/// so it holds and reads `R = Y` copies; the book's layout (and the ideal
/// engine) shards every cache, `R = 1`. One rule for the largest batch, the
/// KV per chip, the engine's admission and the decode step's KV read.
pub fn kv_copies<T: Tracer>(mla: bool, ideal_engine: bool, tp: u64, tr: &mut T) -> u64 {
    let r = if mla && !ideal_engine { tp.max(1) } else { 1 };
    if r > 1 {
        tr.record(|| {
            Step::new(
                "infer.kv_copies",
                "Copies of each sequence's latent KV cache (one per TP rank)",
                "R = Y",
            )
            .bind("Y", tp as f64, "chips")
            .result(r as f64, "copies")
            .source("SGLang v0.4 release notes (lmsys.org/blog/2024-12-04): MLA under TP duplicates the latent cache")
        });
    }
    r
}

/// KV bytes per chip for `batch` sequences fully sharded over `chips`
/// (`KV[2, B_X, S, K_Y, H]`, sequence-split where B·K < N).
pub fn kv_bytes_per_device<T: Tracer>(
    batch: u64,
    kv_per_seq: Bytes,
    chips: u64,
    tr: &mut T,
) -> Bytes {
    let b = Bytes::new(batch as f64 * kv_per_seq.get() / chips as f64);
    tr.record(|| {
        Step::new(
            "infer.kv_bytes_per_device",
            "KV cache per chip",
            "B·KV_seq/N",
        )
        .bind("B", batch as f64, "sequences")
        .bind("KV_seq", kv_per_seq.get(), "B")
        .bind("N", chips as f64, "chips")
        .result(b.get(), "B")
        .source("How To Scale Your Model, ch7: KV[2, B_Z, S, K_Y, H]")
    });
    b
}

/// How the KV cache of `batch` sequences splits over `chips`: KV heads over
/// `gcd(K, N)` chips, batch over as many of the rest as the batch allows,
/// sequence over what remains. Returns (heads way, batch way, sequence way).
pub fn kv_layout(k: u64, batch: u64, chips: u64) -> (u64, u64, u64) {
    let heads = gcd(k.max(1), chips);
    let rest = chips / heads;
    let bw = gcd(batch.max(1), rest);
    (heads, bw, rest / bw)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
