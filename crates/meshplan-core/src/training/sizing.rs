//! Training sizing (book ch5, ch6, ch12): how many chips the job needs for
//! memory alone — three ways, named: everything (params, grads, optimizer,
//! activations), the book's ch6 "three primary uses of HBM" (params,
//! optimizer state, activation checkpoints: no gradients) and parameters
//! with optimizer state alone (ch5: "HBM per device / 10" with Adam) — how
//! far data parallelism can go (one sequence per replica at most, unless
//! context parallelism splits sequences) and what one `[B, D]` activation
//! checkpoint per layer costs, so that a "keep k checkpoints per layer"
//! policy (`checkpoints_per_layer = k`) costs k times it (ch6: `2·L·B·D·k`
//! in bf16).

use serde::Serialize;

use crate::hardware::{fmt_shape, Chip};
use crate::model::Arch;
use crate::parallelism::TrainConfig;
use crate::trace::{Step, Tracer};

/// The whole job's memory, as [`sizing`] splits it.
#[derive(Clone, Copy, Debug)]
pub struct JobMemory {
    /// P: parameters.
    pub params: f64,
    /// Bytes per parameter of [params, grads, optimizer state (moments +
    /// master copy)] under the plan's dtypes and framework.
    pub state_bytes_per_param: [f64; 3],
    /// Params, grads, optimizer state and activations, unsharded, bytes.
    pub total_bytes: f64,
}

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
    /// k: the plan's `checkpoints_per_layer`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints_per_layer: Option<u64>,
    /// Saved activations of the whole batch under the plan's policy
    /// (k·bytes_a·B·D·L with `checkpoints_per_layer`), bytes.
    pub activation_bytes: f64,
    /// P·(bytes_p + bytes_opt): parameters and optimizer state, bytes.
    pub params_optimizer_bytes: f64,
    /// params_optimizer_bytes / HBM, before rounding up.
    pub min_chips_params_optimizer_exact: f64,
    /// ⌈params_optimizer_bytes / HBM⌉: the fewest chips that hold the
    /// parameters and optimizer state alone (no gradients, no activations).
    pub min_chips_params_optimizer: u64,
    /// HBM / (bytes_p + bytes_opt): the most parameters one chip holds with
    /// their optimizer state (ch5: "num_params = HBM per device / 10" with
    /// Adam, ≈ 9B on a v5p) — pure data parallelism's largest model.
    pub max_params_per_chip_params_optimizer: f64,
    /// Params + optimizer state + activations (no gradients): the book's ch6
    /// "three primary uses of HBM", bytes.
    pub params_optimizer_activations_bytes: f64,
    /// params_optimizer_activations_bytes / HBM, before rounding up.
    pub min_chips_params_optimizer_activations_exact: f64,
    /// ⌈params_optimizer_activations_bytes / HBM⌉ (ch6: 225 v5p for LLaMA 3-70B).
    pub min_chips_params_optimizer_activations: u64,
    /// params_optimizer_activations_bytes spread over the plan's chips, bytes.
    pub params_optimizer_activations_bytes_per_chip: f64,
}

/// Size the job: `job.total_bytes` is its unsharded total (params + grads
/// + optimizer + activations under the plan's remat policy).
pub fn sizing<T: Tracer>(
    a: &Arch,
    chip: &Chip,
    cfg: &TrainConfig,
    job: JobMemory,
    tr: &mut T,
) -> Sizing {
    let memory = job.total_bytes;
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
    let state = job.params * job.state_bytes_per_param.iter().sum::<f64>();
    let [bp, _, bo] = job.state_bytes_per_param;
    let po = job.params * (bp + bo);
    let act = (memory - state).max(0.0);
    let poa = po + act;
    let chips = d.at_least_one().product() as f64;
    let max_params = hbm / (bp + bo).max(f64::MIN_POSITIVE);
    tr.record(|| {
        Step::new(
            "train.sizing.max_params_per_chip_params_optimizer",
            "Most parameters one chip holds with their optimizer state",
            "HBM / (bytes_p + bytes_opt)",
        )
        .bind("HBM", hbm, "B")
        .bind("bytes_p", bp, "B")
        .bind("bytes_opt", bo, "B")
        .result(max_params, "params")
        .source("How To Scale Your Model ch5 (num_params = HBM per device / 10)")
    });
    tr.record(|| {
        Step::new(
            "train.sizing.min_chips_params_optimizer",
            "Fewest chips that hold the parameters and optimizer state alone",
            "⌈P·(bytes_p + bytes_opt) / HBM⌉",
        )
        .bind("P", job.params, "params")
        .bind("bytes_p", bp, "B")
        .bind("bytes_opt", bo, "B")
        .bind("HBM", hbm, "B")
        .result((po / hbm).ceil().max(1.0), "chips")
        .source("How To Scale Your Model ch5 (num_params = HBM per device / 10 with Adam), ch5 Q3")
    });
    tr.record(|| {
        Step::new(
            "train.sizing.min_chips_params_optimizer_activations",
            "Fewest chips that hold params, optimizer state and activations (no gradients)",
            "⌈(P·(bytes_p + bytes_opt) + A) / HBM⌉",
        )
        .bind("P·(bytes_p + bytes_opt)", po, "B")
        .bind("A", act, "B")
        .bind("HBM", hbm, "B")
        .result((poa / hbm).ceil().max(1.0), "chips")
        .source("How To Scale Your Model ch6 (\"three primary uses of HBM\": 21.6e12 / 96e9 = 225)")
    });
    if let Some(k) = cfg.checkpoints_per_layer {
        tr.record(|| {
            Step::new(
                "train.sizing.activation_bytes",
                "k checkpoints of [B, D] per layer, whole batch",
                "k·bytes_a·B·D·L",
            )
            .bind("k", k as f64, "")
            .bind("B", cfg.batch_tokens as f64, "tokens")
            .bind("D", a.d_model as f64, "")
            .bind("L", a.n_layers as f64, "")
            .result(act, "B")
            .source("How To Scale Your Model ch6 (2·8192·4e6·k·80), ch5 Q2")
        });
    }
    Sizing {
        checkpoints_per_layer: cfg.checkpoints_per_layer,
        activation_bytes: act,
        params_optimizer_bytes: po,
        min_chips_params_optimizer_exact: po / hbm,
        min_chips_params_optimizer: (po / hbm).ceil().max(1.0) as u64,
        max_params_per_chip_params_optimizer: max_params,
        params_optimizer_activations_bytes: poa,
        min_chips_params_optimizer_activations_exact: poa / hbm,
        min_chips_params_optimizer_activations: (poa / hbm).ceil().max(1.0) as u64,
        params_optimizer_activations_bytes_per_chip: poa / chips,
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
                "params + optimizer",
                format!(
                    "{} → {} chips ({} exactly); with activations, no gradients: {} → {} chips",
                    fmt_si(self.params_optimizer_bytes, "B"),
                    self.min_chips_params_optimizer,
                    sig4(self.min_chips_params_optimizer_exact),
                    fmt_si(self.params_optimizer_activations_bytes, "B"),
                    self.min_chips_params_optimizer_activations,
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
                match self.checkpoints_per_layer {
                    Some(k) => format!(
                        "{}; k = {k} per layer: {}",
                        fmt_si(self.checkpoint_bytes_per_bd, "B"),
                        fmt_si(self.activation_bytes, "B")
                    ),
                    None => format!(
                        "{} (k checkpoints: k×)",
                        fmt_si(self.checkpoint_bytes_per_bd, "B")
                    ),
                },
            ),
        ]);
        d
    }
}
