//! Training sizing (book ch5, ch6, ch12): how many chips the job needs for
//! memory alone, how far data parallelism can go (one sequence per replica
//! at most, unless context parallelism splits sequences) and what one
//! `[B, D]` activation checkpoint per layer costs, so that a "keep k
//! checkpoints per layer" policy costs k times it (ch6: `2·L·B·D·k` in
//! bf16).

use serde::Serialize;

use crate::hardware::{fmt_shape, Chip};
use crate::model::Arch;
use crate::parallelism::TrainConfig;
use crate::trace::{Step, Tracer};

/// The sizing keys of `meshplan train` (`sizing.*`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sizing {
    /// Sequences in the batch: B/T.
    pub sequences: u64,
    /// The most data-parallel ways (dp·fsdp) the batch allows: one sequence
    /// per replica, times cp when context parallelism splits sequences.
    pub max_data_parallel: u64,
    /// Whether the plan's dp·fsdp is within `max_data_parallel`.
    pub data_parallel_within_limit: bool,
    /// Params, grads, optimizer state and activations of the whole job, bytes.
    pub memory_bytes: f64,
    /// memory_bytes / HBM per chip, before rounding up.
    pub min_chips_memory_exact: f64,
    /// ⌈memory_bytes / HBM⌉: the fewest chips that hold the job (perfect sharding).
    pub min_chips_memory: u64,
    /// The smallest offered TPU slice with that many chips (GPUs: the count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_slice: Option<String>,
    /// One [B, D] activation checkpoint in every layer for the whole batch:
    /// bytes_a·B·D·L. Keeping k checkpoints per layer costs k times this.
    pub checkpoint_bytes_per_bd: f64,
}

/// Size the job: `memory` is its unsharded total (params + grads + optimizer
/// + activations under the plan's remat policy).
pub fn sizing<T: Tracer>(
    a: &Arch,
    chip: &Chip,
    cfg: &TrainConfig,
    memory: f64,
    tr: &mut T,
) -> Sizing {
    let seqs = cfg.batch_tokens / cfg.seq_len.max(1);
    let d = cfg.degrees;
    let max_dp = seqs.saturating_mul(d.cp.max(1));
    let hbm = chip.hbm_capacity.get();
    let exact = memory / hbm;
    let min = exact.ceil().max(1.0) as u64;
    let min_slice = match &chip.ici {
        Some(i) if !i.slice_shapes.is_empty() => {
            crate::hardware::smallest_slice(&i.slice_shapes, min).map(|s| fmt_shape(&s))
        }
        // a GPU cluster has no slices: the chip count says it all
        Some(_) => Some(min.to_string()),
        None => None,
    };
    let ck = cfg.activation_dtype.bytes_per_element()
        * cfg.batch_tokens as f64
        * a.d_model as f64
        * a.n_layers as f64;
    tr.record(|| {
        Step::new(
            "train.sizing.min_chips_memory",
            "Fewest chips that hold the job (memory only)",
            "⌈(params + grads + optimizer + activations) / HBM⌉",
        )
        .bind("bytes", memory, "B")
        .bind("HBM", hbm, "B")
        .result(min as f64, "chips")
        .source("How To Scale Your Model ch6, ch12 Q2")
    });
    tr.record(|| {
        Step::new(
            "train.sizing.checkpoint_bytes",
            "One [B, D] checkpoint per layer, whole batch",
            "bytes_a·B·D·L",
        )
        .bind("B", cfg.batch_tokens as f64, "tokens")
        .bind("D", a.d_model as f64, "")
        .bind("L", a.n_layers as f64, "")
        .result(ck, "B")
        .source("How To Scale Your Model ch6 (2·L·B·D·k for k checkpoints)")
    });
    Sizing {
        sequences: seqs,
        max_data_parallel: max_dp,
        data_parallel_within_limit: d.dp.saturating_mul(d.fsdp) <= max_dp.max(1),
        memory_bytes: memory,
        min_chips_memory_exact: exact,
        min_chips_memory: min,
        min_slice,
        checkpoint_bytes_per_bd: ck,
    }
}

impl crate::view::Render for Sizing {
    fn doc(&self) -> crate::view::Doc {
        use crate::units::{fmt_si, sig4};
        use crate::view::field;
        let mut d = crate::view::Doc::new();
        d.line("Sizing:").fields(vec![
            field(
                "memory only",
                format!(
                    "{} in all → {} chips ({} exactly){}",
                    fmt_si(self.memory_bytes, "B"),
                    self.min_chips_memory,
                    // one decimal from 1,000 up: sig4 would round 17,408.6
                    // to the 17,409 printed before it
                    if self.min_chips_memory_exact >= 1000.0 {
                        format!("{:.1}", self.min_chips_memory_exact)
                    } else {
                        sig4(self.min_chips_memory_exact)
                    },
                    self.min_slice
                        .as_ref()
                        .map_or(String::new(), |s| format!(", slice {s}"))
                ),
            ),
            field(
                "data parallelism",
                format!(
                    "at most {}-way ({} sequences){}",
                    self.max_data_parallel,
                    self.sequences,
                    if self.data_parallel_within_limit {
                        ""
                    } else {
                        ": this plan splits sequences between replicas (sequence sharding)"
                    }
                ),
            ),
            field(
                "one [B, D] checkpoint per layer",
                format!(
                    "{} (k checkpoints: k×)",
                    fmt_si(self.checkpoint_bytes_per_bd, "B")
                ),
            ),
        ]);
        d
    }
}
