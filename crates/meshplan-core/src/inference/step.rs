//! One forward step as an engine runs it: the decode step of B sequences at
//! KV length S and the prefill of b prompts of T tokens, each from the book's
//! roofline terms at the engine profile's efficiencies
//! ([`crate::inference::engine`]), with the tensor-parallel collectives at the
//! engine's small-message latency. Under the `ideal` engine every formula
//! reduces to the book's (ch7, ch8). Every serving number (the report's
//! step times, the static and continuous workloads) comes from here.

use crate::collectives::{self, AxisPlacement, Collective};
use crate::hardware::Chip;
use crate::inference::engine::EngineProfile;
use crate::model::params::ParamCounts;
use crate::model::{kv, ModelSpec};
use crate::trace::{NoTrace, Step, Tracer};
use crate::units::{Bytes, BytesPerSec, DType, FlopsPerSec, Seconds};

use super::kernels::KernelSet;
use super::latency::{self, DecodeStep, StepEfficiency};
use super::pipeline::{Pipeline, Stage};
use super::roofline::{self, Bound, Component};
use super::{axis_placement, ici_bandwidth, sharding, InferQuery, Sharding};

/// The TP and EP collectives of a forward pass over `tokens` tokens.
pub(crate) struct Comms {
    sharding: Sharding,
    tp_axis: AxisPlacement,
    ep_axis: AxisPlacement,
    tp: u64,
    ep: u64,
    /// Effective bandwidth of the TP axis (2D-WS closed form).
    pub(crate) w_eff: BytesPerSec,
    pub(crate) d: f64,
    f: f64,
    pub(crate) l: f64,
    k_top: f64,
    /// Activation bytes per element.
    pub(crate) ab: f64,
    engine: EngineProfile,
    /// The engine's measured kernel curves on this chip (None: the
    /// profile's efficiencies; always None for `ideal` and `@book` chips).
    pub(crate) kernels: Option<KernelSet>,
    /// Dense bf16 peak of the chip, FLOP/s (scales a transferred curve).
    pub(crate) c_bf16: f64,
    /// The engine's 16-bit GEMM curve on this chip.
    pub(crate) gemm16: crate::inference::engine::GemmCurve,
}

impl Comms {
    pub(crate) fn new(
        m: &ModelSpec,
        chip: &Chip,
        q: &InferQuery,
        (tp, ep): (u64, u64),
        engine: &EngineProfile,
    ) -> (Comms, BytesPerSec, u64) {
        let a = &m.arch;
        let (w_ici, m_y, _wraps) = ici_bandwidth(chip, &q.mesh, tp);
        let tp_axis = axis_placement(chip, &q.mesh, 1, tp);
        let w_eff = if tp > 1 {
            collectives::allgather_bandwidth(&tp_axis)
        } else {
            w_ici * m_y as f64
        };
        // activations stay in 16 bits in the collectives of a low-precision engine
        let ab = if engine.is_ideal() {
            q.compute_dtype.bytes_per_element()
        } else {
            q.compute_dtype.bytes_per_element().max(2.0)
        };
        let c = Comms {
            sharding: q.sharding,
            ep_axis: axis_placement(chip, &q.mesh, tp, ep),
            tp_axis,
            tp,
            ep,
            w_eff,
            d: a.d_model as f64,
            f: a.d_ff as f64,
            l: a.n_layers as f64,
            k_top: a.moe.as_ref().map_or(1, |x| x.top_k) as f64,
            ab,
            engine: engine.clone(),
            c_bf16: chip.flops(DType::Bf16).get(),
            gemm16: engine.gemm_curve_on(chip),
            kernels: kernel_priced(m, q, engine)
                .then(|| KernelSet::for_chip(&engine.name, chip))
                .flatten(),
        };
        (c, w_ici, m_y)
    }

    /// One TP all-reduce of `v` bytes: the book's ReduceScatter + AllGather
    /// ring; an engine takes the faster of its small-message kernel
    /// `α + v/W_small` and the NCCL ring `α + (RS + AG)/η_nccl`.
    fn allreduce(&self, v: Bytes) -> (Seconds, bool) {
        let ag = collectives::cost(Collective::AllGather, v, &self.tp_axis, &mut NoTrace);
        let rs = collectives::cost(Collective::ReduceScatter, v, &self.tp_axis, &mut NoTrace);
        let ring = ag.time + rs.time;
        let e = &self.engine;
        if e.comms_overlap {
            return (ring, ag.latency_bound);
        }
        // NCCL's latency model: a base latency plus one hardware latency per
        // ring step, 2(Y − 1) steps for a ring all-reduce
        let steps = 2.0 * (self.tp.max(1) - 1) as f64;
        let alpha = Seconds::new(e.allreduce_latency_s + steps * e.allreduce_step_latency_s);
        let nccl = alpha + ring / e.nccl_efficiency;
        // the one-shot kernel works over NVLink peer memory: one domain only
        // (vLLM's custom all-reduce is disabled when the group spans nodes)
        let one_domain = match &self.tp_axis {
            AxisPlacement::Gpu(g) => g.per_node >= g.size,
            _ => true,
        };
        // the engine's measured custom all-reduce `t0 + v/BW` where fitted
        // (scripts/fit_kernels.py), else the profile's `α + v/W_small`
        let measured = self.kernels.as_ref().and_then(|k| k.allreduce(self.tp));
        let small = match measured {
            Some(c) => Some(c.time(v.get())),
            None if e.allreduce_small_bandwidth > 0.0 => {
                Some(alpha + Seconds::new(v.get() / e.allreduce_small_bandwidth))
            }
            None => None,
        };
        if let Some(small) = small.filter(|_| one_domain && v.get() <= e.allreduce_small_max_bytes)
        {
            if small < nccl {
                return (small, true);
            }
        }
        (nccl, ag.latency_bound)
    }

    /// NCCL's measured all-to-all over the EP group, when it lies in one
    /// NVLink domain and an engine with measured kernels runs it.
    fn measured_alltoall(&self) -> Option<&'static super::kernels::Curve> {
        let one_domain = match &self.ep_axis {
            AxisPlacement::Gpu(g) => g.per_node >= g.size,
            _ => false,
        };
        self.kernels
            .as_ref()
            .filter(|_| one_domain)
            .and_then(|k| k.alltoall(self.ep))
    }

    /// Seconds for `tokens` tokens through every layer, and whether a TP
    /// collective is latency-bound.
    pub(crate) fn time(&self, tokens: f64) -> (Seconds, bool) {
        let (d, f, ab) = (self.d, self.f, self.ab);
        let mut t = Seconds::ZERO;
        let mut lat = false;
        if self.tp > 1 {
            t += match self.sharding {
                // Megatron: one all-reduce (RS + AG) after attention and one after the MLP
                Sharding::OneD => {
                    let (ar, l) = self.allreduce(Bytes::new(tokens * d * ab));
                    lat |= l;
                    ar * 2.0
                }
                // ESTI closed form (book ch7 Q7) at the axis bandwidth
                Sharding::TwoDWs => {
                    let n = self.tp as f64;
                    let x = (n * d / (2.0 * f)).sqrt().clamp(1.0, n);
                    sharding::two_d_ws_comms(tokens, d, f, n, x, self.w_eff) * (ab / 2.0)
                }
            };
        }
        if self.ep > 1 {
            // dispatch + combine AllToAll of the k·B·D routed activations (the
            // global array: every device's buffer)
            let v = Bytes::new(tokens * self.k_top * d * ab * self.ep as f64);
            t += match self.measured_alltoall() {
                // NCCL's measured all-to-all: each rank sends its 1/Z share
                Some(c) => c.time(v.get() / (self.ep * self.ep) as f64) * 2.0,
                None => {
                    collectives::cost(Collective::AllToAll, v, &self.ep_axis, &mut NoTrace).time
                        * 2.0
                }
            };
        }
        (t * self.l, lat)
    }
}

/// Whether the decode step prices from the measured kernel curves: MoE,
/// MLA and weight-only quantised models under a real engine. Dense bf16/fp8
/// models keep the profile's efficiencies, whose step overhead, GEMM M½ and
/// small-message all-reduce were fitted together on dense serving
/// measurements (data/engines/*.toml): swapping one of them alone would
/// break that fit (their GEMM curves agree with η_hbm within 2-4 %,
/// docs/inference.md "Kernels from microbenchmarks").
fn kernel_priced(m: &ModelSpec, q: &InferQuery, engine: &EngineProfile) -> bool {
    let a = &m.arch;
    !engine.is_ideal()
        && (a.moe.is_some() || a.mla.is_some() || q.weights_dtype.bits() < q.compute_dtype.bits())
}

/// The prefill of `b` prompts split into its terms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrefillTime {
    /// FLOPs / (N·C·η) (matmuls at the GEMM efficiency of the chunk's tokens, attention at η_attn).
    pub compute: Seconds,
    /// (chunks·weights + KV written) / (N·W_hbm·η).
    pub memory: Seconds,
    /// TP/EP collectives.
    pub comms: Seconds,
    /// chunks · (L·k·t_kernel + t_step) + sampling the prompts' first tokens.
    pub fixed: Seconds,
    /// Host launch time the GPU waits for when the prefill runs without
    /// CUDA graphs: `max(0, T_host − T_gpu)` (0 with CUDA graphs).
    pub host: Seconds,
    /// The book: max(compute, memory, comms); an engine: max(compute, memory) + T_moe + comms + fixed + host
    /// (T_moe: the routed experts' fused kernel, in `compute` and `memory` too, where the engine has a prefill MoE fit).
    pub total: Seconds,
    /// What dominates.
    pub bound: Bound,
    /// Chunks the prompts are prefilled in.
    pub chunks: u64,
}

/// Everything a forward step needs, for one replica (N = Y·Z chips).
pub(crate) struct StepModel<'a> {
    pub(crate) engine: &'a EngineProfile,
    pub(crate) m: &'a ModelSpec,
    pub(crate) p: &'a ParamCounts,
    pub(crate) q: &'a InferQuery,
    pub(crate) nr: u64,
    pub(crate) hw: roofline::Hw,
    /// Weight bytes the most loaded chip holds.
    pub(crate) w_dev: Bytes,
    /// Of which routed experts.
    pub(crate) routed_dev: Bytes,
    /// Vector ALU ops/s for dequantisation.
    pub(crate) vector_ops: f64,
    pub(crate) comms: &'a Comms,
    /// The draft model's step model (speculative decoding with a draft model).
    pub(crate) draft: Option<&'a StepModel<'a>>,
    /// Pipeline stages (None: one stage of `nr` chips).
    pub(crate) pipeline: Option<&'a Pipeline>,
}

impl StepModel<'_> {
    /// Fraction of the routed experts a step over `tokens` tokens reads:
    /// `1 − (1 − k/E)^B` (each token picks k of E uniformly; the expected
    /// number of distinct experts is `E·(1 − (1 − k/E)^B)`). 1 for dense
    /// models and for the book's roofline.
    pub(crate) fn experts_read(&self, tokens: f64) -> f64 {
        match &self.m.arch.moe {
            Some(x) if self.engine.moe_expected_experts && x.n_experts > 0 => {
                let (e, k) = (x.n_experts as f64, x.top_k as f64);
                1.0 - (1.0 - (k / e).min(1.0)).powf(tokens)
            }
            _ => 1.0,
        }
    }

    /// Weight bytes per chip a step over `tokens` tokens reads.
    pub(crate) fn weights_read(&self, tokens: f64) -> Bytes {
        self.w_dev - self.routed_dev * (1.0 - self.experts_read(tokens))
    }

    /// Dequantisation of `bytes` of weights per chip: elements·ops/ALU rate,
    /// when the weights are narrower than the compute dtype (weight-only
    /// quantisation); 0 for the book.
    fn dequant(&self, bytes: Bytes) -> Seconds {
        let (w, c) = (self.q.weights_dtype, self.q.compute_dtype);
        if self.engine.is_ideal() || w.bits() >= c.bits() || self.vector_ops <= 0.0 {
            return Seconds::ZERO;
        }
        let elems = bytes.get() / w.bytes_per_element();
        Seconds::new(elems * self.engine.dequant_ops_per_weight / self.vector_ops)
    }

    /// Chips of one replica: `Y·Z·P`.
    pub(crate) fn replica_chips(&self) -> u64 {
        self.nr * self.pipeline.map_or(1, |p| p.pp())
    }

    /// The engine's per-step host cost if `s` is the first stage.
    fn step_of(&self, s: &Stage) -> Seconds {
        Seconds::new(if s.first {
            self.engine.step_overhead_s
        } else {
            0.0
        })
    }

    /// Fixed cost of one stage's forward step: `L_s·k·t_kernel`, plus the
    /// engine's step `t_step` on the first stage (the scheduler feeds it).
    fn stage_fixed(&self, s: &Stage) -> Seconds {
        let e = self.engine;
        let step = if s.first { e.step_overhead_s } else { 0.0 };
        Seconds::new(s.layers as f64 * e.small_kernels_per_layer * e.kernel_latency_s + step)
    }

    /// Fixed cost of one forward step: `L·k·t_kernel + t_step`.
    pub(crate) fn fixed(&self) -> Seconds {
        let e = self.engine;
        Seconds::new(
            self.comms.l * e.small_kernels_per_layer * e.kernel_latency_s + e.step_overhead_s,
        )
    }

    /// Sampling `seqs` next tokens: `B·V·s_logit/(W_hbm·η_hbm)`, the
    /// memory-bound passes over each sequence's V logits on one chip (the
    /// logits are gathered to one rank). 0 for the book.
    pub(crate) fn sampling(&self, seqs: f64) -> Seconds {
        let e = self.engine;
        let v = self.m.arch.vocab as f64;
        Seconds::new(
            seqs * v * e.sampling_bytes_per_logit / (self.hw.w_hbm.get() * e.hbm_efficiency),
        )
    }

    /// How many times decode attention reads each KV head: G = N/K when the
    /// engine's kernel runs one thread block per query head, else 1.
    pub(crate) fn kv_read_factor(&self) -> f64 {
        let a = &self.m.arch;
        if self.engine.kv_reads_per_query_head && a.mla.is_none() && a.n_kv_heads > 0 {
            (a.n_heads as f64 / a.n_kv_heads as f64).max(1.0)
        } else {
            1.0
        }
    }

    /// The decode step's weight and KV terms priced from the engine's
    /// measured kernels on this chip ([`super::kernels`]), as the
    /// efficiencies `η_hbm = w/(W_hbm·T_w)` and `η_kv = KV/(N·W_hbm·T_kv)`
    /// the book's step formula takes. Per chip, over the `frac` of the
    /// layers this step covers:
    /// `T_w = T_dense + L_moe·t0_moe + w_routed/BW_moe`, with
    /// `T_dense = L·4·t0_wo + w_dense/BW_wo` for weight-only quantised
    /// weights (the curve includes the dequantisation), else
    /// `w_dense/(W_hbm·η_hbm)`; and for MLA
    /// `T_kv = L·(t0 + B_dev·t_seq + max(KV_l/BW, F_l/F))`. Without curves
    /// (the `ideal` engine, `@book` chips, chips without tables) the
    /// profile's efficiencies, unchanged. `context` 0: the KV term keeps
    /// the profile's η_kv.
    fn kernel_decode<T: Tracer>(
        &self,
        (b, context): (f64, u64),
        (w, routed_dev, kv_all): (Bytes, Bytes, Bytes),
        frac: f64,
        tr: &mut T,
    ) -> KernelDecode {
        let e = self.engine;
        let plain = KernelDecode {
            hbm: e.hbm_efficiency,
            kv: e.kv_hbm_efficiency,
            dequant_measured: false,
            gemm: None,
        };
        let Some(k) = self.comms.kernels.as_ref() else {
            return plain;
        };
        let a = &self.m.arch;
        let (wdt, w_hbm) = (self.q.weights_dtype, self.hw.w_hbm.get());
        let layers = a.n_layers as f64 * frac;
        let moe_layers = a.moe.as_ref().map_or(0.0, |x| {
            a.n_layers.saturating_sub(x.first_dense_layers) as f64
        }) * frac;
        let routed_mean = routed_dev.get() * self.experts_read(b);
        // under EP the step waits for the rank with the most touched experts
        let routed = routed_dev.get() * self.busiest_rank_experts(b, tr);
        let module = self.mla_module_decode((b, context), (kv_all, layers), frac, tr);
        // the module's measured time includes the attention weights: the
        // rest of the dense weights stream at the GEMM/η_hbm rate
        let dense = (w.get() - routed_mean - module.map_or(0.0, |m| m.1)).max(0.0);
        let wo = (wdt.bits() < self.q.compute_dtype.bits())
            .then(|| k.weight_only_gemm(wdt, w_hbm, self.comms.c_bf16))
            .flatten();
        let gemm = self.dense_gemms(k, module.is_some(), (layers, moe_layers));
        let t_dense = match (wo, gemm) {
            (Some(c), _) => layers * GEMMS_PER_LAYER * c.curve.t0_s + dense / c.bandwidth,
            (None, Some((c, calls))) => calls * c.t0_s + dense / c.bandwidth,
            (None, None) => dense / (w_hbm * e.hbm_efficiency),
        };
        let moe = (routed_dev.get() > 0.0)
            .then(|| k.moe(wdt, w_hbm))
            .flatten();
        let t_routed = match moe {
            Some(c) => moe_layers * c.curve.t0_s + routed / c.bandwidth,
            None => routed / (w_hbm * e.hbm_efficiency),
        };
        let t_w = t_dense + t_routed;
        let mla = match (&a.mla, context) {
            (Some(_), 1..) if module.is_none() => k.mla(self.q.kv_dtype),
            _ => None,
        };
        let t_kv = module.map(|m| m.0).or(mla.map(|c| {
            let (n, y) = (self.hw.chips as f64, self.hw.replicated_chips.max(1) as f64);
            let seqs = b / (n / y).max(1.0);
            let heads = a.n_heads as f64 / y;
            let m = a
                .mla
                .as_ref()
                .map_or(0, |x| x.kv_lora_rank + x.qk_rope_head_dim + x.kv_lora_rank);
            let kv_layer = mla_kv_per_gpu(kv_all, (n, y)) / layers.max(1e-9);
            let f_layer = seqs * context as f64 * heads * 2.0 * m as f64;
            c.attention_time(seqs, kv_layer, f_layer) * layers
        }));
        if wo.is_none() && moe.is_none() && t_kv.is_none() {
            return plain;
        }
        let hbm = if t_w > 0.0 && w.get() > 0.0 {
            w.get() / (w_hbm * t_w)
        } else {
            e.hbm_efficiency
        };
        let kv = match t_kv {
            Some(t) if t.get() > 0.0 && kv_all.get() > 0.0 => {
                kv_all.get() / (self.hw.chips as f64 * w_hbm * t.get())
            }
            _ => e.kv_hbm_efficiency,
        };
        record_kernels(
            (wo, gemm, moe, mla),
            (layers, moe_layers),
            (dense, routed),
            (Seconds::new(t_w), t_kv),
            tr,
        );
        KernelDecode {
            hbm,
            kv,
            dequant_measured: wo.is_some(),
            // the weight-only kernel's own compute side `2·B·P/(N·F)` (it
            // dequantises in the main loop) in place of the M½ curve
            gemm: wo
                .filter(|a| a.flops > 0.0)
                .map(|a| a.flops / self.hw.c.get()),
        }
    }

    /// The fraction of a rank's routed experts the busiest of the Z expert-
    /// parallel ranks streams in a step over `tokens` tokens
    /// ([`super::kernels::expert_load`]); the mean [`Self::experts_read`]
    /// without EP (every GPU holds a slice of every expert) or when the
    /// engine reads every expert.
    fn busiest_rank_experts<T: Tracer>(&self, tokens: f64, tr: &mut T) -> f64 {
        use super::kernels::expert_load;
        let z = self.comms.ep;
        match &self.m.arch.moe {
            Some(x) if self.engine.moe_expected_experts && x.n_experts > 0 && z > 1 => {
                expert_load::record((x.n_experts, x.top_k, z), tokens, tr);
                expert_load::busiest_fraction(x.n_experts, x.top_k, z, tokens)
            }
            _ => self.experts_read(tokens),
        }
    }

    /// The engine's GEMM efficiency at `m` tokens per step in the compute
    /// dtype on this chip (its 16-bit curve: [`EngineProfile::gemm_curve_on`]).
    fn gemm_efficiency(&self, m: f64) -> f64 {
        self.engine
            .gemm_efficiency_on(self.q.compute_dtype, m, self.comms.gemm16)
    }

    /// The engine's measured decode GEMM curve for the dense weights of a
    /// MoE model (fp8: block-scaled before per-tensor) and the GEMM calls
    /// of one step over `layers` layers, `moe_layers` of them MoE: per MoE
    /// layer the router and the shared expert's gate/up and down
    /// projections, per dense layer the MLP's two, per layer the fused QKV
    /// and output projections unless the measured MLA module prices them,
    /// and the LM head once. Each call pays the curve's fixed `t0`, which
    /// a bytes-over-bandwidth roofline misses. None for dense models (their
    /// profile's η_hbm was fitted with its step overhead) and for dtypes
    /// without a curve.
    fn dense_gemms(
        &self,
        k: &KernelSet,
        module: bool,
        (layers, moe_layers): (f64, f64),
    ) -> Option<(&'static super::kernels::Curve, f64)> {
        let x = self.m.arch.moe.as_ref()?;
        let keys: &[&str] = match self.q.weights_dtype {
            DType::Bf16 | DType::Fp16 => &["bf16"],
            DType::Fp8 => &["fp8_block", "fp8"],
            _ => &[],
        };
        let c = keys.iter().find_map(|key| k.get("gemm", key))?;
        let shared = if x.n_shared_experts > 0 { 2.0 } else { 0.0 };
        let attn = if module { 0.0 } else { 2.0 };
        let calls = moe_layers * (1.0 + shared) + (layers - moe_layers) * 2.0 + layers * attn + 1.0;
        Some((c, calls))
    }

    /// The measured generation MLA modules of a decode step at `context`
    /// ≥ 1 ([`super::kernels::mla_module`]): their time per GPU over the
    /// `frac` of the layers this step covers, and the attention weight
    /// bytes per chip the roofline counts for those layers (priced inside
    /// the module). None without MLA, a module table or a context.
    fn mla_module_decode<T: Tracer>(
        &self,
        (b, context): (f64, u64),
        (kv_all, layers): (Bytes, f64),
        frac: f64,
        tr: &mut T,
    ) -> Option<(Seconds, f64)> {
        use super::kernels::mla_module;
        let a = &self.m.arch;
        let x = a.mla.as_ref().filter(|_| context > 0)?;
        let k = self.comms.kernels.as_ref()?;
        let m = k.mla_module(self.q.weights_dtype, self.q.kv_dtype)?;
        let (n, y) = (self.hw.chips as f64, self.hw.replicated_chips.max(1) as f64);
        let seqs = b / (n / y).max(1.0);
        let heads = a.n_heads as f64 / y;
        let bw = self.q.weights_dtype.bytes_per_element();
        let w_attn = mla_module::weight_elems(x, a.d_model, heads) * bw;
        // the attention kernel's compute side at the engine's own MLA
        // kernel rate on this chip (none measured: memory only); a borrowed
        // module reads the KV at the engine's own kernel's bandwidth
        let own = k.mla(self.q.kv_dtype);
        let width = (2 * x.kv_lora_rank + x.qk_rope_head_dim) as f64;
        let work = mla_module::LayerWork {
            seqs,
            w_attn,
            kv_layer: mla_kv_per_gpu(kv_all, (n, y)) / layers.max(1e-9),
            flops: seqs * context as f64 * heads * 2.0 * width,
            flops_rate: own.map_or(0.0, |c| c.flops),
            kv_bandwidth: own.filter(|_| m.borrowed).map_or(0.0, |c| c.bandwidth),
        };
        let t = mla_module::step_time(&m, layers, &work);
        mla_module::record(&m, (layers, heads), &work, t, tr);
        // the roofline's attention bytes on this chip: P_attn·bytes_w/Y
        Some((t, self.p.attention as f64 * bw / y * frac))
    }

    /// The decode step of `batch` sequences at KV length `context`.
    pub(crate) fn decode<T: Tracer>(&self, batch: u64, context: u64, tr: &mut T) -> DecodeStep {
        self.decode_tokens(batch, context, 1, tr)
    }

    /// The decode step of `batch` sequences with `per_seq` tokens each (a
    /// speculative verify step: γ + 1): the matmuls, collectives and
    /// sampling see `batch·per_seq` tokens, the KV of each sequence is read
    /// once.
    pub(crate) fn decode_tokens<T: Tracer>(
        &self,
        batch: u64,
        context: u64,
        per_seq: u64,
        tr: &mut T,
    ) -> DecodeStep {
        let g = per_seq.max(1);
        // KV per token-row: what a decode step reads of the sequence's KV
        // (under sparse attention, the top-k rows and the indexer's keys,
        // not the whole cache), shared by its g query rows
        let kvs =
            kv::bytes_read_per_decode_step(&self.m.arch, context, self.q.kv_dtype, &mut NoTrace)
                * (self.kv_read_factor() / g as f64);
        if let Some(pl) = self.pipeline {
            return self.pipeline_decode(pl, (batch, g), kvs, tr);
        }
        let batch = batch.saturating_mul(g);
        let b = batch as f64;
        let w = self.weights_read(b);
        let e = self.engine;
        let kd = self.kernel_decode(
            (b, context),
            (w, self.routed_dev, Bytes::new(b * kvs.get())),
            1.0,
            tr,
        );
        let eff = StepEfficiency {
            hbm: kd.hbm,
            kv: kd.kv,
            gemm: kd.gemm.unwrap_or_else(|| self.gemm_efficiency(b)),
            t_dequant: if kd.dequant_measured {
                Seconds::ZERO
            } else {
                self.dequant(w)
            },
            t_fixed: self.fixed() + self.sampling(b),
            comms_overlap: e.comms_overlap,
        };
        let (t_comms, _) = self.comms.time(b);
        let work = (batch, kvs, self.p.matmul_active as f64, w);
        latency::decode_step_with(work, (self.nr, self.hw.c, self.hw.w_hbm), t_comms, &eff, tr)
    }

    /// One stage's decode step over `rows` token rows (KV per row `kvs`
    /// for the whole model): its layers' share of the KV, matmuls and
    /// collectives, its own weights, its fixed cost, sampling on the last.
    fn stage_decode(&self, s: &Stage, rows: u64, kvs: Bytes) -> DecodeStep {
        let b = rows as f64;
        let e = self.engine;
        let w = s.w_dev - s.routed_dev * (1.0 - self.experts_read(b));
        let sampling = if s.last {
            self.sampling(b)
        } else {
            Seconds::ZERO
        };
        let kd = self.kernel_decode(
            (b, 0),
            (w, s.routed_dev, Bytes::new(b * kvs.get() * s.frac)),
            s.frac,
            &mut NoTrace,
        );
        let eff = StepEfficiency {
            hbm: kd.hbm,
            kv: kd.kv,
            gemm: kd.gemm.unwrap_or_else(|| self.gemm_efficiency(b)),
            t_dequant: if kd.dequant_measured {
                Seconds::ZERO
            } else {
                self.dequant(w)
            },
            // the engine's step (host scheduling) is counted once per
            // micro-batch in `pipeline_decode`
            t_fixed: self.stage_fixed(s) - self.step_of(s) + sampling,
            comms_overlap: e.comms_overlap,
        };
        let t_comms = self.comms.time(b).0 * s.frac;
        let work = (rows, kvs * s.frac, s.matmul, w);
        let hw = (self.nr, self.hw.c, self.hw.w_hbm);
        latency::decode_step_with(work, hw, t_comms, &eff, &mut NoTrace)
    }

    /// The decode step of a pipeline: the `seqs` sequences run as up to P
    /// micro-batches of `b = ⌈seqs/P⌉`; one micro-batch's step traverses
    /// every stage and the P − 1 sends, while the stages work on the other
    /// micro-batches, so each sequence advances one token every
    /// `max(t_step + Σ_s T_s(b) + (P − 1)·T_hop, n_mb·max(t_step, max_s T_s(b)))`
    /// (t_step: the engine's host step, overlapped with the stages).
    fn pipeline_decode<T: Tracer>(
        &self,
        pl: &Pipeline,
        (seqs, g): (u64, u64),
        kvs: Bytes,
        tr: &mut T,
    ) -> DecodeStep {
        let p = pl.pp();
        let seqs = seqs.max(1);
        let mb = seqs.div_ceil(p);
        let n_mb = seqs.div_ceil(mb);
        let rows = mb.saturating_mul(g);
        let steps: Vec<DecodeStep> = pl
            .stages
            .iter()
            .map(|s| self.stage_decode(s, rows, kvs))
            .collect();
        let sum =
            |f: fn(&DecodeStep) -> Seconds| steps.iter().map(f).fold(Seconds::ZERO, |a, x| a + x);
        let hops = pl.hop(rows as f64) * (p - 1) as f64;
        // the host schedules each micro-batch once (t_step) while the GPUs
        // run the others: in the latency once, in the cycle as one more
        // "stage" that every micro-batch passes
        let t_step = Seconds::new(self.engine.step_overhead_s);
        let through = t_step + sum(|d| d.step) + hops;
        let busiest = steps.iter().map(|d| d.step).fold(t_step, Seconds::max);
        let cycle = busiest * n_mb as f64;
        let step = through.max(cycle);
        let (t_kv, t_weights, t_math) = (sum(|d| d.t_kv), sum(|d| d.t_weights), sum(|d| d.t_math));
        let (t_comms, t_fixed) = (sum(|d| d.t_comms) + hops, sum(|d| d.t_fixed) + t_step);
        let bound = Bound::dominant(
            (t_kv, Bound::KvLoad),
            &[
                (t_weights, Bound::WeightLoad),
                (t_math, Bound::Compute),
                (t_comms, Bound::Comms),
                (t_fixed, Bound::Overhead),
            ],
        );
        tr.record(|| {
            Step::new(
                "infer.pipeline_decode_step",
                "Decode step of a pipeline (time per output token)",
                "max(t_step + Σ_s T_s(b) + (P − 1)·T_hop, n_mb·max(t_step, max_s T_s(b))), b = ⌈B/P⌉, n_mb = ⌈B/b⌉",
            )
            .bind("P", p as f64, "stages")
            .bind("B", seqs as f64, "sequences")
            .bind("b", mb as f64, "sequences")
            .bind("n_mb", n_mb as f64, "micro-batches")
            .bind("t_step", t_step.get(), "s")
            .bind("Σ_s T_s", (through - hops - t_step).get(), "s")
            .bind("max_s T_s", busiest.get(), "s")
            .bind("T_hop", pl.hop(rows as f64).get(), "s")
            .result(step.get(), "s")
            .source("vLLM pipeline_parallel_size: stages run in sequence, one micro-batch per stage in flight (docs/inference.md)")
        });
        DecodeStep {
            t_kv,
            t_weights,
            t_math,
            t_comms,
            t_fixed,
            step,
            bound,
        }
    }

    /// Time per output token of `batch` sequences at KV length `context`:
    /// the decode step, or with speculative decoding
    /// `(T_draft + T_verify(γ + 1))/E` and its breakdown.
    pub(crate) fn token_time(
        &self,
        batch: u64,
        context: u64,
    ) -> (Seconds, Option<super::speculative::SpecReport>) {
        use super::speculative::{DraftMethod, SpecReport};
        let plain = self.decode(batch, context, &mut NoTrace).step;
        let Some(sp) = &self.q.speculative else {
            return (plain, None);
        };
        let gamma = sp.gamma as f64;
        let verify = self
            .decode_tokens(batch, context, sp.gamma + 1, &mut NoTrace)
            .step;
        let draft = match (&sp.method, self.draft) {
            (DraftMethod::Ngram, _) => Seconds::ZERO,
            // one extra block per drafted token: a layer's share of the step
            (DraftMethod::Mtp, _) => plain * (gamma / self.comms.l.max(1.0)),
            (DraftMethod::Draft(_), Some(d)) => d.decode(batch, context, &mut NoTrace).step * gamma,
            (DraftMethod::Draft(_), None) => Seconds::ZERO,
        };
        let e = sp.expected_tokens();
        let tpot = (draft + verify) / e;
        let rep = SpecReport {
            method: sp.method.to_string(),
            gamma: sp.gamma,
            acceptance: sp.acceptance,
            expected_tokens_per_step: e,
            verify_step_s: verify.get(),
            draft_s: draft.get(),
            tpot_s: tpot.get(),
            speedup: plain.get() / tpot.get(),
        };
        (tpot, Some(rep))
    }

    /// The prefill of `prompts` prompts of `len` tokens (one batched
    /// forward, in chunks of the engine's `max_prefill_tokens`).
    pub(crate) fn prefill<T: Tracer>(&self, prompts: u64, len: u64, tr: &mut T) -> PrefillTime {
        let comps = self.prefill_components(len, &mut NoTrace);
        self.prefill_from(&comps, prompts, len, tr)
    }

    /// The book's prefill components of one prompt of `len` tokens.
    pub(crate) fn prefill_components<T: Tracer>(&self, len: u64, tr: &mut T) -> Vec<Component> {
        let kvt = kv::bytes_per_token(&self.m.arch, self.q.kv_dtype, &mut NoTrace);
        let a = &self.m.arch;
        let wdt = self.q.weights_dtype;
        let pass = roofline::Pass::prefill(a, len.max(1), kvt);
        roofline::components(a, self.p, &pass, wdt, &self.hw, tr)
    }

    /// [`Self::prefill`] from one prompt's components.
    pub(crate) fn prefill_from<T: Tracer>(
        &self,
        comps: &[Component],
        prompts: u64,
        len: u64,
        tr: &mut T,
    ) -> PrefillTime {
        match self.pipeline {
            None => self.prefill_stage(comps, prompts, len, None, tr),
            Some(pl) => self.pipeline_prefill(pl, comps, prompts, len, tr),
        }
    }

    /// The prefill of a pipeline: the work split into `n_u` units (the
    /// engine's chunks, or up to P micro-batches of prompts) flowing through
    /// the stages: `Σ_s T_s/n_u + (P − 1)·T_hop + (n_u − 1)·max_s T_s/n_u`
    /// (one prompt, one chunk: every stage in sequence plus the sends).
    fn pipeline_prefill<T: Tracer>(
        &self,
        pl: &Pipeline,
        comps: &[Component],
        prompts: u64,
        len: u64,
        tr: &mut T,
    ) -> PrefillTime {
        let per: Vec<PrefillTime> = pl
            .stages
            .iter()
            .map(|s| self.prefill_stage(comps, prompts, len, Some(s), &mut NoTrace))
            .collect();
        let p = pl.pp();
        let chunks = per.first().map_or(1, |x| x.chunks);
        let units = chunks.max(prompts.clamp(1, p)) as f64;
        let h = self.q.prefix_cache_hit.clamp(0.0, 0.999);
        let tokens = (prompts.max(1) as f64 * len.max(1) as f64 * (1.0 - h)).max(1.0);
        let hop = pl.hop(tokens / units);
        let sum =
            |f: fn(&PrefillTime) -> Seconds| per.iter().map(f).fold(Seconds::ZERO, |a, x| a + x);
        let busiest = per
            .iter()
            .map(|x| x.total)
            .fold(Seconds::ZERO, Seconds::max);
        let total =
            sum(|x| x.total) / units + hop * (p - 1) as f64 + busiest * ((units - 1.0) / units);
        let comms = sum(|x| x.comms) + hop * (p - 1) as f64;
        let (compute, memory, fixed) = (sum(|x| x.compute), sum(|x| x.memory), sum(|x| x.fixed));
        let host = sum(|x| x.host);
        let bound = per
            .iter()
            .max_by(|a, b| a.total.get().total_cmp(&b.total.get()))
            .map_or(Bound::Compute, |x| x.bound);
        tr.record(|| {
            Step::new(
                "infer.prefill_time",
                "Prefill time of a pipeline (TTFT)",
                "Σ_s T_s/n_u + (P − 1)·T_hop + (n_u − 1)·max_s T_s/n_u",
            )
            .bind("P", p as f64, "stages")
            .bind("prompts", prompts as f64, "")
            .bind("T", len as f64, "tokens")
            .bind("n_u", units, "units")
            .bind("Σ_s T_s", sum(|x| x.total).get(), "s")
            .bind("max_s T_s", busiest.get(), "s")
            .bind("T_hop", hop.get(), "s")
            .result(total.get(), "s")
            .source("pipeline fill and drain of the prefill units (docs/inference.md); stage times from the engine profile")
        });
        PrefillTime {
            compute,
            memory,
            comms,
            fixed,
            host,
            total,
            bound,
            chunks,
        }
    }

    /// The prefill terms of the whole model (`stage` None) or of one
    /// pipeline stage's share of it.
    fn prefill_stage<T: Tracer>(
        &self,
        comps: &[Component],
        prompts: u64,
        len: u64,
        stage: Option<&Stage>,
        tr: &mut T,
    ) -> PrefillTime {
        let e = self.engine;
        let b = prompts.max(1) as f64;
        // prefix caching: only the (1 − h) uncached tokens are prefilled
        let h = self.q.prefix_cache_hit.clamp(0.0, 0.999);
        let tokens = (b * len.max(1) as f64 * (1.0 - h)).max(1.0);
        let chunks = match e.max_prefill_tokens {
            0 => 1,
            c => (tokens / c as f64).ceil().max(1.0) as u64,
        };
        let ch = chunks as f64;
        let per_chunk = tokens / ch;
        let (mut f_mm, mut f_att, mut w_bytes, mut kv_bytes) = (0.0, 0.0, 0.0, 0.0);
        for c in comps {
            if c.name == "attention" {
                // the new tokens attend over the whole prefix: 1 − h² of the causal scores
                f_att += c.flops.get() * b * (1.0 - h * h);
                kv_bytes += c.bytes.get() * b * (1.0 - h);
            } else {
                f_mm += c.flops.get() * b * (1.0 - h);
                w_bytes += c.bytes.get();
            }
        }
        if let Some(s) = stage {
            // the stage's layers' attention and KV, its matmuls and weights
            let all_w = self.q.weights_dtype.bytes_per_element() * self.p.total as f64;
            f_att *= s.frac;
            kv_bytes *= s.frac;
            f_mm *= s.matmul / (self.p.matmul_active as f64).max(1.0);
            w_bytes *= s.weight_bytes / all_w.max(1.0);
        }
        let (n, cc, w) = (self.nr as f64, self.hw.c.get(), self.hw.w_hbm.get());
        let routed = self.routed_prefill((tokens, chunks), stage);
        if let Some((r, fit)) = &routed {
            f_mm = (f_mm - r.flops).max(0.0);
            w_bytes = (w_bytes - r.weight_bytes).max(0.0);
            super::serving::moe_prefill::record(e, fit, r, tr);
        }
        let routed = routed.map(|(r, _)| r);
        let mfu = self.q.mfu;
        let w_dev_read = Bytes::new(w_bytes / n) * self.experts_read(per_chunk).max(0.0);
        let compute = Seconds::new(
            f_mm / (n * cc * self.gemm_efficiency(per_chunk) * mfu)
                + f_att / (n * cc * e.attention_efficiency * mfu),
        ) + self.dequant(w_dev_read) * ch;
        let memory = Seconds::new(
            (ch * w_bytes / e.hbm_efficiency + kv_bytes / e.kv_hbm_efficiency) / (n * w),
        );
        let comms = self.comms.time(per_chunk).0 * ch * stage.map_or(1.0, |s| s.frac);
        // the routed experts' kernel runs its three terms in sequence, after
        // (not under) the rest of the layer's matmuls and weights
        let moe = routed.map_or(Seconds::ZERO, |r| r.time());
        // every chunk pays the fixed step cost; the b prompts' first tokens
        // are sampled once
        let fixed = match stage {
            None => self.fixed() * ch + self.sampling(b),
            Some(s) if s.last => self.stage_fixed(s) * ch + self.sampling(b),
            Some(s) => self.stage_fixed(s) * ch,
        };
        let gpu = if e.comms_overlap {
            (compute.max(memory) + moe).max(comms)
        } else {
            compute.max(memory) + moe + comms
        };
        // report the routed block's FLOPs with the compute, its bytes with the memory
        let (compute, memory) = match routed {
            Some(r) => (compute + r.math, memory + r.weights + r.activations),
            None => (compute, memory),
        };
        let (host, total) = self.eager_floor(gpu, fixed, stage, chunks, tr);
        let bound = Bound::dominant(
            (compute, Bound::Compute),
            &[
                (memory, Bound::Memory),
                (comms, Bound::Comms),
                (fixed + host, Bound::Overhead),
            ],
        );
        record_prefill(
            e,
            (b, len, chunks),
            (f_mm + f_att, w_bytes, kv_bytes),
            self.nr,
            total,
            tr,
        );
        PrefillTime {
            compute,
            memory,
            comms,
            fixed,
            host,
            total,
            bound,
            chunks,
        }
    }

    /// The routed-expert block of a prefill of `tokens` tokens in `chunks`
    /// chunks ([`super::serving::moe_prefill`]), over the stage's share of the layers.
    fn routed_prefill(
        &self,
        (tokens, chunks): (f64, u64),
        stage: Option<&Stage>,
    ) -> Option<(
        super::serving::moe_prefill::RoutedPrefill,
        &super::engine::MoePrefillFit,
    )> {
        use super::serving::moe_prefill::{routed, Slice};
        let slice = Slice {
            chips: self.nr as f64,
            ep: self.comms.ep as f64,
            c: self.hw.c.get(),
            w_hbm: self.hw.w_hbm.get(),
            frac: stage.map_or(1.0, |s| s.frac),
        };
        // the chip of the engine's measured kernels (none on `@book` chips)
        let chip = self.comms.kernels.as_ref()?.chip();
        let fit = self.engine.moe_prefill_for(chip)?;
        routed(
            self.engine,
            fit,
            (&self.m.arch, self.p),
            (self.q.weights_dtype, self.q.compute_dtype),
            (tokens, chunks),
            slice,
        )
        .map(|r| (r, fit))
    }

    /// The prefill's total with the eager launch floor
    /// ([`super::serving::eager_prefill`]): the chunks' GPU work `gpu +
    /// chunks·L·k·t_kernel` waits for their host launches `T_host` when
    /// those take longer, `total = max(T_gpu, T_host) + chunks·t_step +
    /// T_sample`; returns the host time the GPU waits (`max(0, T_host −
    /// T_gpu)`) and the total. With CUDA graphs: `gpu + fixed`.
    fn eager_floor<T: Tracer>(
        &self,
        gpu: Seconds,
        fixed: Seconds,
        stage: Option<&Stage>,
        chunks: u64,
        tr: &mut T,
    ) -> (Seconds, Seconds) {
        use super::serving::eager_prefill;
        let (e, a) = (self.engine, &self.m.arch);
        let frac = stage.map_or(1.0, |s| s.frac);
        let per_forward =
            eager_prefill::forward_host_time(e, a, self.q.compute_dtype, self.comms.tp, frac);
        if per_forward <= Seconds::ZERO {
            return (Seconds::ZERO, gpu + fixed);
        }
        let ch = chunks as f64;
        let kernels =
            Seconds::new(self.comms.l * frac * e.small_kernels_per_layer * e.kernel_latency_s) * ch;
        let t_gpu = gpu + kernels;
        let t_host = per_forward * ch;
        eager_prefill::record(
            e,
            a,
            (self.q.compute_dtype, self.comms.tp),
            (chunks, t_host, t_gpu),
            tr,
        );
        let waits = (t_host - t_gpu).max(Seconds::ZERO);
        (waits, gpu + fixed + waits)
    }
}

/// The MLA latent KV bytes one GPU reads in a decode step under a serving
/// engine: `R·KV/N` with `R` the copies [`crate::inference::memory::kv_copies`]
/// says each sequence's latent has (one per TP rank of the attention group:
/// the cache the largest batch and the engine's admission count), written
/// `KV/(N/R)`. The one rule for what memory holds and what decode reads.
fn mla_kv_per_gpu(kv_all: Bytes, (n, y): (f64, f64)) -> f64 {
    let r = crate::inference::memory::kv_copies(true, false, y as u64, &mut NoTrace) as f64;
    kv_all.get() / (n / r).max(1.0)
}

/// GEMMs per layer in the decode step: fused QKV, output projection,
/// fused gate/up and down projection.
const GEMMS_PER_LAYER: f64 = 4.0;

/// The decode efficiencies [`StepModel::kernel_decode`] derives.
struct KernelDecode {
    /// η_hbm that gives the kernel-priced weight time.
    hbm: f64,
    /// η_kv that gives the kernel-priced KV time.
    kv: f64,
    /// Whether a weight-only GEMM curve (dequantisation included) priced
    /// the dense weights.
    dequant_measured: bool,
    /// η_gemm of the measured weight-only kernel's compute side (F/C).
    gemm: Option<f64>,
}

type CurveRef = Option<&'static super::kernels::Curve>;
type AppliedRef = Option<super::kernels::Applied>;

/// A curve's source; one measured on another chip says so, with the
/// fractions of peak it is applied at.
fn applied_source(a: &super::kernels::Applied) -> String {
    if !a.transferred {
        return a.curve.source.clone();
    }
    let frac = |x: f64, peak: f64| if peak > 0.0 { x / peak } else { 0.0 };
    // a memory-only curve (the MoE kernel) has no compute side to scale
    let compute = if a.curve.flops > 0.0 {
        format!(
            ", F/C_bf16 = {:.3}",
            frac(a.curve.flops, a.curve.peak_bf16_flops)
        )
    } else {
        String::new()
    };
    format!(
        "{} — measured on another chip: a prediction outside what was measured, at the fractions of peak it reached there (BW/W_hbm = {:.3}{compute})",
        a.curve.source,
        frac(a.curve.bandwidth, a.curve.peak_bandwidth),
    )
}

fn record_kernels<T: Tracer>(
    (wo, gemm, moe, mla): (
        AppliedRef,
        Option<(&'static super::kernels::Curve, f64)>,
        AppliedRef,
        CurveRef,
    ),
    (layers, moe_layers): (f64, f64),
    (dense, routed): (f64, f64),
    (t_w, t_kv): (Seconds, Option<Seconds>),
    tr: &mut T,
) {
    tr.record(|| {
        let mut s = Step::new(
            "infer.decode_kernels",
            "Decode weights and KV from measured kernels",
            "T_w = [L·4·t0_wo + w_dense/BW_wo | n_gemm·t0_gemm + w_dense/BW_gemm | w_dense/(W_hbm·η_hbm)] + L_moe·t0_moe + w_routed/BW_moe; T_kv = L·(t0 + B_dev·t_seq + max(KV_l/BW, F_l/F)) | T_attn (MLA module)",
        )
        .bind("L", layers, "layers")
        .bind("L_moe", moe_layers, "layers")
        .bind("w_dense", dense, "B")
        .bind("w_routed", routed, "B");
        let mut src = Vec::new();
        if let Some(a) = wo {
            s = s
                .bind("t0_wo", a.curve.t0_s, "s")
                .bind("BW_wo", a.bandwidth, "B/s")
                .bind("F_wo", a.flops, "FLOP/s");
            src.push(applied_source(&a));
        }
        if let (None, Some((c, calls))) = (wo, gemm) {
            s = s
                .bind("n_gemm", calls, "calls")
                .bind("t0_gemm", c.t0_s, "s")
                .bind("BW_gemm", c.bandwidth, "B/s");
            src.push(c.source.clone());
        }
        if let Some(a) = moe {
            s = s
                .bind("t0_moe", a.curve.t0_s, "s")
                .bind("BW_moe", a.bandwidth, "B/s");
            src.push(applied_source(&a));
        }
        if let Some(c) = mla {
            s = s.bind("t0_mla", c.t0_s, "s").bind("BW_mla", c.bandwidth, "B/s");
            src.push(c.source.clone());
        }
        if let Some(t) = t_kv {
            s = s.bind("T_kv", t.get(), "s");
        }
        s.result(t_w.get(), "s").source(&src.join("; "))
    });
}

fn record_prefill<T: Tracer>(
    e: &EngineProfile,
    (b, len, chunks): (f64, u64, u64),
    (flops, w_bytes, kv_bytes): (f64, f64, f64),
    n: u64,
    total: Seconds,
    tr: &mut T,
) {
    tr.record(|| {
        let s = if e.is_ideal() {
            Step::new(
                "infer.prefill_time",
                "Prefill time (TTFT)",
                "max(FLOPs/(N·C·MFU), bytes/(N·W_hbm), T_comms)",
            )
            .source("How To Scale Your Model, ch8 (prefill ≈ 2·P·tokens/(N·C·MFU))")
        } else {
            Step::new(
                "infer.prefill_time",
                "Prefill time (engine)",
                "max(F_mm/(N·C·η_gemm(M)) + F_att/(N·C·η_attn), (chunks·W + KV)/(N·W_hbm·η)) + T_moe + T_comms + chunks·T_fixed + max(0, T_host − T_gpu) (F_mm, W without the routed experts where T_moe prices them)",
            )
            .bind("chunks", chunks as f64, "")
            .source("How To Scale Your Model ch8 prefill at the engine profile's efficiencies (data/engines)")
        };
        s.bind("prompts", b, "")
            .bind("T", len as f64, "tokens")
            .bind("FLOPs", flops, "FLOPs")
            .bind("W", w_bytes, "B")
            .bind("KV", kv_bytes, "B")
            .bind("N", n as f64, "chips")
            .result(total.get(), "s")
    });
}

/// Dequantisation ALU rate of a chip: its vector (fp32) peak with an FMA
/// counted as two operations.
pub(crate) fn vector_ops(chip: &Chip) -> f64 {
    chip.peak
        .get(DType::Fp32)
        .map_or(0.0, |c: FlopsPerSec| c.get() / 2.0)
}
