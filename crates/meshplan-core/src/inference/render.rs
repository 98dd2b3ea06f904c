//! How an [`InferReport`] reads: memory, the largest batch, the decode and
//! prefill rooflines with what bounds them, throughput and cost, and the
//! book's sharding limits.

use super::InferReport;
use crate::units::fmt_si;
use crate::view::{field, Doc, Render};

impl InferReport {
    /// The scale-up interconnect the TP limits refer to.
    fn link_name(&self) -> &'static str {
        if self.two_d_ws.is_some() || self.mesh.contains('x') {
            "ICI"
        } else {
            "interconnect"
        }
    }

    fn memory_fields(&self) -> Vec<(String, String)> {
        let s = |v: f64| fmt_si(v, "B");
        vec![
            field(
                "weights",
                format!(
                    "{} total, {} per chip ({})",
                    s(self.weights_bytes.get()),
                    s(self.weights_bytes_per_device.get()),
                    self.weights_dtype.name()
                ),
            ),
            field(
                "KV cache",
                format!(
                    "{} per token, {} per {}-token sequence ({})",
                    s(self.kv_cache_bytes_per_token.get()),
                    s(self.kv_cache_bytes_per_sequence.get()),
                    self.context,
                    self.kv_dtype.name()
                ),
            ),
            field("free HBM per chip", s(self.free_hbm_bytes_per_device.get())),
            field(
                "max batch",
                format!(
                    "{} (exact {:.3}; leftover {} per chip){}",
                    self.max_batch,
                    self.max_batch_exact,
                    s(self.leftover_hbm_bytes_per_device.get()),
                    self.max_batch_one_kv_head
                        .map(|b| format!("; with 1 KV head: {b}"))
                        .unwrap_or_default()
                ),
            ),
        ]
    }

    fn time_fields(&self) -> Vec<(String, String)> {
        let t = |v: f64| fmt_si(v, "s");
        vec![
            field("B_crit", format!("{:.0} tokens", self.b_crit_tokens)),
            field(
                "weight load",
                format!(
                    "{} on the most loaded chip ({} if spread evenly)",
                    t(self.weight_load_time_s.get()),
                    t(self.weight_load_time_even_s.get())
                ),
            ),
            field(
                "decode step",
                format!(
                    "{} at batch {}, context {} ({}-bound: KV {}, weights {}, FLOPs {}, comms {})",
                    t(self.decode_step_time_s.get()),
                    self.batch,
                    self.context,
                    self.bound_decode.name(),
                    t(self.decode_kv_load_time_s.get()),
                    t(self.decode_weight_time_s.get()),
                    t(self.decode_compute_time_s.get()),
                    t(self.decode_comms_time_s.get())
                ),
            ),
            field(
                "prefill (TTFT)",
                format!(
                    "{} for {} tokens ({}-bound)",
                    t(self.prefill_time_s.get()),
                    self.prompt_len,
                    self.bound_prefill.name()
                ),
            ),
            field(
                "throughput",
                format!(
                    "{:.1} tokens/s ({:.2} per chip)",
                    self.tokens_per_s, self.tokens_per_s_per_chip
                ),
            ),
        ]
    }

    fn sharding_fields(&self) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        if let Some(c) = self.cost_per_million_tokens_usd {
            rows.push(field("cost", format!("${c:.3} per million output tokens")));
        }
        rows.push(field(
            "TP limits",
            format!(
                "prefill compute-bound below {:.1}-way, generation {}-bound above {:.1}-way",
                self.tp_limit_prefill,
                self.link_name(),
                self.tp_limit_generate
            ),
        ));
        rows.push(field(
            "smallest slice",
            format!(
                "{} ({} chips for weights + batch KV)",
                self.min_slice
                    .clone()
                    .unwrap_or_else(|| "none offered".into()),
                self.min_chips
            ),
        ));
        rows.push(field(
            "disaggregated",
            format!(
                "{:.3} prefill servers per generate server",
                self.disagg_prefill_per_generate
            ),
        ));
        rows
    }
}

impl Render for InferReport {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        // a pipeline shows its stages (P = 1 reads as before)
        let pp = match self.pp {
            1 => String::new(),
            p => format!(
                " × PP {p} (layers {})",
                self.stage_layers
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("+")
            ),
        };
        d.title(format!(
            "{} on {} {} (TP {} × EP {}{pp} × {} replicas, {} sharding)",
            self.model, self.chip, self.mesh, self.tp, self.ep, self.replicas, self.sharding
        ));
        for w in &self.warnings {
            d.note(w.clone());
        }
        if !self.fits {
            d.verdict(
                false,
                "DOES NOT FIT",
                format!(
                    "weights {} per chip and one {}-token sequence of KV ({}) exceed the {} of HBM per chip",
                    fmt_si(self.weights_bytes_per_device.get(), "B"),
                    self.context,
                    fmt_si(self.kv_cache_bytes_per_sequence.get(), "B"),
                    fmt_si(self.hbm_bytes_per_device.get(), "B")
                ),
                Vec::new(),
            );
        }
        d.fields(self.memory_fields());
        d.fields(self.time_fields());
        d.fields(self.sharding_fields());
        d.fields(self.aggregate_fields());
        d.fields(self.serving_fields());
        d
    }
}

fn pct(p: &crate::inference::serving::Percentiles) -> String {
    let t = |v: f64| fmt_si(v, "s");
    format!(
        "mean {}, p50 {}, p90 {}, p99 {}",
        t(p.mean),
        t(p.p50),
        t(p.p90),
        t(p.p99)
    )
}

impl InferReport {
    fn serving_fields(&self) -> Vec<(String, String)> {
        let s = &self.serving;
        let t = |v: f64| fmt_si(v, "s");
        let sb = &s.static_batch;
        let mut rows = vec![
            field(
                "engine",
                format!(
                    "{} (largest batch in its KV cache: {})",
                    s.engine, s.engine_max_batch
                ),
            ),
            field(
                "static batch",
                format!(
                    "TTFT {}, TPOT {} (batch {}, mean context {} = prompt + gen/2), total {}: {:.1} output tokens/s ({:.2} per chip)",
                    t(sb.ttft_s),
                    t(sb.tpot_s),
                    sb.batch,
                    self.prompt_len.saturating_add(self.gen_len / 2),
                    t(sb.total_time_s),
                    sb.output_tokens_per_s,
                    sb.output_tokens_per_s_per_chip
                ),
            ),
        ];
        if let Some(c) = &s.continuous {
            rows.push(field(
                "continuous",
                format!(
                    "{}{}: {:.1} in flight per replica, {:.3} requests/s, {:.1} output tokens/s ({:.2} per chip), prefill {:.0}% of the time{}",
                    c.workload,
                    waves(c),
                    c.concurrency,
                    c.requests_per_s,
                    c.output_tokens_per_s,
                    c.output_tokens_per_s_per_chip,
                    100.0 * c.prefill_utilisation,
                    if c.saturated { " (SATURATED: at capacity)" } else { "" }
                ),
            ));
            rows.push(field("  TTFT", pct(&c.ttft_s)));
            rows.push(field("  TPOT", pct(&c.tpot_s)));
        }
        if let Some(d) = &s.disaggregated {
            rows.push(field(
                "disaggregated",
                format!(
                    "{} prefill + {} decode replicas: {:.3} requests/s, {:.1} output tokens/s ({:.2} per chip), KV hand-off {}{}",
                    d.prefill_replicas,
                    d.decode_replicas,
                    d.requests_per_s,
                    d.output_tokens_per_s,
                    d.output_tokens_per_s_per_chip,
                    t(d.kv_transfer_s),
                    if d.saturated { " (SATURATED: at capacity)" } else { "" }
                ),
            ));
            rows.push(field("  TTFT", pct(&d.ttft_s)));
            rows.push(field("  TPOT", pct(&d.tpot_s)));
        }
        if let Some(x) = &s.speculative {
            rows.push(field(
                "speculative",
                format!(
                    "{}, γ = {}, α = {}: {:.3} tokens per target step; draft {} + verify {} → TPOT {} ({:.2}× the plain step)",
                    x.method,
                    x.gamma,
                    x.acceptance,
                    x.expected_tokens_per_step,
                    t(x.draft_s),
                    t(x.verify_step_s),
                    t(x.tpot_s),
                    x.speedup
                ),
            ));
        }
        if s.prefix_cache_hit > 0.0 {
            rows.push(field(
                "prefix cache",
                format!(
                    "{:.0}% of each prompt cached: prefill runs the other {:.0}%",
                    100.0 * s.prefix_cache_hit,
                    100.0 * (1.0 - s.prefix_cache_hit)
                ),
            ));
        }
        rows
    }
}

impl InferReport {
    fn aggregate_fields(&self) -> Vec<(String, String)> {
        let a = &self.aggregates;
        let mut rows = vec![
            field(
                "whole slice",
                format!(
                    "{} HBM, {} free after the weights",
                    fmt_si(a.slice_hbm_bytes, "B"),
                    fmt_si(a.slice_free_hbm_bytes, "B")
                ),
            ),
            field(
                "batch KV",
                format!(
                    "{} (weights + KV {} = {:.3} chips' HBM)",
                    fmt_si(a.kv_cache_bytes_batch, "B"),
                    fmt_si(a.weights_plus_kv_bytes, "B"),
                    a.min_chips_exact
                ),
            ),
            field(
                "requests/s",
                format!(
                    "{:.4} ({:.4} per chip)",
                    a.requests_per_s, a.requests_per_s_per_chip
                ),
            ),
        ];
        if let Some(f) = a.flops_per_dollar {
            rows.push(field("FLOPs per dollar", fmt_si(f, "FLOPs/$")));
        }
        rows
    }
}

/// How a `lockstep=N` loop runs: in waves, or staggered (the waves do not
/// persist under this engine); nothing for other workloads.
fn waves(c: &crate::inference::serving::Continuous) -> &'static str {
    match (c.lockstep, c.workload.starts_with("lockstep")) {
        (true, _) => " (in lockstep waves)",
        (false, true) => " (waves do not persist: staggered)",
        _ => "",
    }
}
