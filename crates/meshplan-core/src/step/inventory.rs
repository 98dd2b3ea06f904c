//! The step inventory: what one optimizer step of a training plan contains,
//! exactly and with no efficiency in it — the GEMMs of a layer (shape and
//! FLOPs per device), the attention call, the element-wise HBM traffic, every
//! collective (kind, bytes, calls, the mesh axes of its group and where the
//! group sits: GPUs per node and nodes spanned), the pipeline schedule, the
//! data-parallel phase and the optimizer's parameters. Built once from the
//! replica (`RunSpec`), its [`Features`] and the chip's placement; the
//! calibrated pricer ([`super::calibrated`]) prices it, and `train --json`
//! shows it (`predicted.inventory`).
//!
//! Counts are per device, for one micro-batch on one layer (an average
//! layer: a MoE model's dense and expert layers weighted by the fraction of
//! layers of each kind), unless a field says per step.

use serde::Serialize;

pub mod book_sends;

use self::book_sends::{tp_forward_passes, tp_mlp_rides_all_to_all};
use super::calibrated::{elementwise_elems, Features, FP8_CAST_BYTES, MOE_LOAD_IMBALANCE};
use crate::collectives::Collective;
use crate::hardware::Chip;
use crate::mesh::GpuSplit;
use crate::model::flops::{head_dims, layer_keys};
use crate::parallelism::pipeline::stage_extremes_with;
use crate::parallelism::{
    CpComm, Degrees, Framework, LogicalAxis, Overlap, Remat, RunSpec, Schedule, SpAllGather,
};
use crate::units::DType;

/// The part of the model a GEMM belongs to (the blocks of `--breakdown`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Block {
    /// Q, K, V and output projections (MLA: its down/up projections).
    AttentionProjections,
    /// The attention core, softmax(QKᵀ)V.
    AttentionCore,
    /// A dense layer's MLP.
    Mlp,
    /// Shared experts of a MoE layer.
    SharedExperts,
    /// The routed experts on the busiest rank.
    RoutedExperts,
    /// The MoE router.
    Router,
    /// Logits (LM head) on the last stage.
    LmHead,
}

/// One `[m, k] × [k, n]` GEMM of a layer's forward pass on one device.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Gemm {
    /// What it computes.
    pub block: Block,
    /// Rows (tokens), inner size, columns — the shape its efficiency reads.
    pub m: f64,
    /// Inner dimension.
    pub k: f64,
    /// Columns.
    pub n: f64,
    /// FLOPs of one call (2·rows·k·n; MoE: all the rows the call covers).
    pub flops: f64,
    /// Calls per average layer: the fraction of layers that hold it, times
    /// the shared experts, or the busiest expert's share of the tokens over
    /// the mean ([`MOE_LOAD_IMBALANCE`]).
    pub weight: f64,
}

/// Most GEMMs one layer has: Q/K/V and O, a dense MLP's two, a shared
/// expert's two, the routed experts' two and the router.
pub const MAX_LAYER_GEMMS: usize = 9;

/// A layer's GEMMs, kept inline: the planner builds an inventory for every
/// plan it predicts, so the list allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerGemms {
    items: [Gemm; MAX_LAYER_GEMMS],
    len: usize,
}

impl LayerGemms {
    const EMPTY: Gemm = Gemm {
        block: Block::Mlp,
        m: 0.0,
        k: 0.0,
        n: 0.0,
        flops: 0.0,
        weight: 0.0,
    };

    fn new() -> Self {
        LayerGemms {
            items: [Self::EMPTY; MAX_LAYER_GEMMS],
            len: 0,
        }
    }

    fn push(&mut self, g: Gemm) {
        // MAX_LAYER_GEMMS covers every kind of layer layer_gemms builds
        debug_assert!(
            self.len < MAX_LAYER_GEMMS,
            "a layer with more GEMMs than kinds"
        );
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = g;
            self.len += 1;
        }
    }

    fn extend(&mut self, gs: impl IntoIterator<Item = Gemm>) {
        for g in gs {
            self.push(g);
        }
    }

    /// The GEMMs, in layer order.
    pub fn as_slice(&self) -> &[Gemm] {
        &self.items[..self.len]
    }
}

impl Serialize for LayerGemms {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

/// The attention core of one layer on one micro-batch, per device.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AttentionCall {
    /// Query tokens (local to the cp rank).
    pub tokens: f64,
    /// Keys each query attends to, averaged over the layers (causal half,
    /// sliding windows; the whole sequence under context parallelism).
    pub keys: f64,
    /// Query heads on the device (N/tp).
    pub heads: f64,
    /// Q·K and V head widths (MLA: its own).
    pub head_dim_qk: f64,
    /// V head width.
    pub head_dim_v: f64,
    /// Causal mask.
    pub causal: bool,
    /// Forward FLOPs.
    pub flops: f64,
    /// Unfused attention (Megatron 2022): the two batched GEMMs and the
    /// score elements that go through HBM; `None` for a fused kernel.
    pub unfused: Option<UnfusedScores>,
}

/// Unfused attention: its batched GEMM and the s×s scores through HBM.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct UnfusedScores {
    /// The QKᵀ / PV batched GEMMs as one shape (FLOPs = the forward's).
    pub gemm: Gemm,
    /// Score elements per micro-batch (mbs · N/tp · s²).
    pub score_elems: f64,
}

/// Where a collective's group sits: its GPUs per node and the nodes (or
/// TPU slices) it spans (the same placement the roofline costs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// GPUs (chips) of the group in one node.
    pub per_node: u64,
    /// Nodes spanned.
    pub nodes: u64,
}

impl Placement {
    /// The group crosses the scale-out network (or DCN).
    pub fn crosses_nodes(&self) -> bool {
        self.nodes > 1
    }
}

/// What a collective of the step moves. Each kind has a fixed unit of
/// calls and a fixed overlap partner, so those are the kind's, not stored
/// per transfer (the planner builds an inventory per predicted plan: a
/// byte each keeps it small).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moves {
    /// TP with sequence parallelism: all-gathers / reduce-scatters.
    TpSp,
    /// Plain TP: all-reduces.
    Tp,
    /// Context parallelism's ring-attention K/V hops.
    CpRing,
    /// Context parallelism's K/V all-gathers (and dK/dV reduce-scatters).
    CpAllGather,
    /// MoE dispatch + combine all-to-alls.
    EpDispatch,
    /// Pipeline sends.
    PpSend,
    /// ZeRO-3/FSDP gathers and reduce-scatters.
    Fsdp,
    /// Data-parallel reduce-scatter of gradients (ZeRO-1/2).
    DpReduceScatter,
    /// ZeRO-1/2's all-gather of the updated parameters.
    DpAllGather,
    /// Data-parallel all-reduce of gradients (ZeRO-0).
    DpAllReduce,
}

/// The unit a transfer's calls are counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Per {
    /// Per layer per micro-batch.
    Layer,
    /// Per micro-batch.
    MicroBatch,
    /// Per step.
    Step,
}

impl Per {
    /// "layer", "micro-batch" or "step".
    pub fn name(self) -> &'static str {
        match self {
            Per::Layer => "layer",
            Per::MicroBatch => "micro-batch",
            Per::Step => "step",
        }
    }
}

impl Moves {
    /// In words ("tp: all-gather / reduce-scatter of activations").
    pub fn describe(self) -> &'static str {
        match self {
            Moves::TpSp => "tp+sp: all-gather / reduce-scatter of activations",
            Moves::Tp => "tp: all-reduce of activations",
            Moves::CpRing => "cp: ring-attention K/V hops",
            Moves::CpAllGather => "cp: all-gather K/V, reduce-scatter dK/dV",
            Moves::EpDispatch => "ep: MoE dispatch + combine",
            Moves::PpSend => "pp: send activations / gradients",
            Moves::Fsdp => "zero-3/fsdp: gather parameters (fwd, bwd) + reduce-scatter gradients",
            Moves::DpReduceScatter => "dp: reduce-scatter gradients",
            Moves::DpAllGather => "dp: all-gather updated parameters",
            Moves::DpAllReduce => "dp: all-reduce gradients",
        }
    }
    /// The unit its calls are counted in.
    pub fn per(self) -> Per {
        match self {
            Moves::TpSp | Moves::Tp | Moves::CpRing | Moves::CpAllGather | Moves::EpDispatch => {
                Per::Layer
            }
            Moves::Fsdp => Per::MicroBatch,
            Moves::PpSend | Moves::DpReduceScatter | Moves::DpAllGather | Moves::DpAllReduce => {
                Per::Step
            }
        }
    }
    /// What the framework overlaps it with.
    pub fn overlaps_with(self) -> &'static str {
        match self {
            Moves::TpSp | Moves::Tp => "the layer's GEMMs",
            Moves::CpRing => "the attention kernels",
            Moves::EpDispatch | Moves::CpAllGather => "nothing",
            Moves::PpSend => "nothing (1F1B)",
            Moves::Fsdp => "the micro-batch's compute (prefetch)",
            Moves::DpReduceScatter | Moves::DpAllGather | Moves::DpAllReduce => {
                "the backward (bucketed)"
            }
        }
    }
}

/// One kind of collective of the step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transfer {
    /// What it moves ([`Moves::describe`]; its unit of calls and overlap
    /// partner are the kind's).
    pub what: Moves,
    /// The collective.
    pub kind: Collective,
    /// Ranks in the group.
    pub ranks: u64,
    /// Where the group sits.
    pub placement: Placement,
    /// Bytes each device moves per call (the bus bytes: (n−1)/n of the
    /// array for an all-gather or reduce-scatter, 2(n−1)/n for an
    /// all-reduce, what leaves the device for an all-to-all or a send).
    pub bytes_per_call: f64,
    /// Calls, per layer and micro-batch ([`Moves::per`]).
    pub calls: f64,
    /// Ring steps of one call (its latency terms).
    pub ring_steps: f64,
}

impl Transfer {
    /// The unit its calls are counted in.
    pub fn per(&self) -> Per {
        self.what.per()
    }
}

/// The JSON of `predicted.inventory`: the kind's words, unit and overlap
/// partner spelled out.
impl Serialize for Transfer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Transfer", 9)?;
        st.serialize_field("what", self.what.describe())?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("ranks", &self.ranks)?;
        st.serialize_field("placement", &self.placement)?;
        st.serialize_field("bytes_per_call", &self.bytes_per_call)?;
        st.serialize_field("calls", &self.calls)?;
        st.serialize_field("per", self.what.per().name())?;
        st.serialize_field("ring_steps", &self.ring_steps)?;
        st.serialize_field("overlaps_with", self.what.overlaps_with())?;
        st.end()
    }
}

/// What one optimizer step of a plan contains (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepInventory {
    /// Pipeline stages, micro-batches per step, virtual stages (interleaved;
    /// 1 otherwise), layers on a plain stage and on the stage with the LM
    /// head ([`stage_extremes_with`]).
    pub stages: u64,
    /// Micro-batches per step per replica.
    pub microbatches: u64,
    /// Virtual stages per device.
    pub virtual_stages: u64,
    /// Layers of the busiest stage without the LM head (0: none).
    pub layers_plain: u64,
    /// Layers of the stage holding the LM head.
    pub layers_with_head: u64,
    /// Tokens of one micro-batch on one device (mbs · T/cp).
    pub tokens_per_microbatch: f64,
    /// Recompute policy.
    pub remat: Remat,
    /// The GEMMs of one average layer's forward pass.
    pub layer_gemms: LayerGemms,
    /// Model FLOPs of one layer's forward matmuls on one micro-batch,
    /// per device: 2·tokens·(attention projections + m·D·F_active)/tp (the
    /// tokens' FLOPs, without the busiest expert's imbalance).
    pub layer_matmul_flops: f64,
    /// The LM head GEMM (forward; the last stage).
    pub head: Gemm,
    /// The attention core.
    pub attention: AttentionCall,
    /// Element-wise HBM bytes of one layer, forward + backward (norms,
    /// residuals, activation functions, RoPE; bf16).
    pub elementwise_bytes: f64,
    /// fp8 cast bytes of one layer (every GEMM input and output gradient);
    /// 0 in bf16.
    pub cast_bytes: f64,
    /// Loss bytes (fp32 logits read and written, forward + backward) on the
    /// last stage per micro-batch.
    pub loss_bytes: f64,
    /// TP/SP collectives of one layer (recomputed forward and redone SP
    /// all-gathers included).
    pub tp: Option<Transfer>,
    /// Ring-attention K/V hops of one layer.
    pub cp: Option<Transfer>,
    /// MoE dispatch + combine all-to-alls of one average layer.
    pub ep: Option<Transfer>,
    /// Pipeline sends of the step on the critical stage.
    pub pp: Option<Transfer>,
    /// ZeRO-3/FSDP gathers and reduce-scatters of one micro-batch.
    pub fsdp: Option<Transfer>,
    /// Data-parallel gradient reduction after the step (ZeRO-1/2: the
    /// reduce-scatter; its parameter all-gather is `dp_gather`).
    pub dp: Option<Transfer>,
    /// ZeRO-1/2's all-gather of the updated parameters.
    pub dp_gather: Option<Transfer>,
    /// ZeRO-2 reduce-scatters every micro-batch but the last.
    pub dp_early_calls: f64,
    /// Parameters a device updates (its optimizer shard) and of its stage.
    pub optimizer_params: (f64, f64),
    /// Nodes of the job (NVLink domains or TPU slices).
    pub nodes: u64,
    /// Pipeline neighbours sit in other nodes.
    pub pp_cross_node: bool,
    /// The GEMMs' dtype (the attention kernels run in bf16).
    pub compute_dtype: DType,
    /// The compute dtype casts its GEMM inputs (fp8/int8/fp4).
    pub low_precision: bool,
    /// The run's overlap settings.
    #[serde(skip)]
    pub overlap: Overlap,
    /// The mesh degrees and their placement.
    #[serde(skip)]
    pub degrees: Degrees,
    /// How the degrees split between a node and the network.
    #[serde(skip)]
    pub split: GpuSplit,
}

/// Gradient bytes per parameter a framework reduces.
pub fn grad_bytes(fw: Framework) -> f64 {
    match fw {
        Framework::Nanotron | Framework::Maxtext | Framework::Torchtitan => 4.0,
        _ => 2.0,
    }
}

/// HBM bytes per parameter the optimizer step touches: fp32 master, two
/// moments and the gradient read and written (~34 B) on the parameters a
/// device updates, plus 4 B per parameter of its stage (bf16 copy written,
/// gradient zeroed).
pub const OPTIMIZER_BYTES: (f64, f64) = (34.0, 4.0);

/// (parameters a device updates, parameters of its stage): the optimizer
/// step's HBM traffic is `34·first + 4·second` bytes ([`OPTIMIZER_BYTES`]).
pub(crate) fn optimizer_params(spec: &RunSpec) -> (f64, f64) {
    let stage = spec.stage_params();
    let (shard, repl) = spec.shard_groups();
    let repl_params = stage / shard as f64;
    let opt = repl_params / if spec.zero >= 1 { repl as f64 } else { 1.0 };
    (opt, stage)
}

/// Where a group over some mesh axes sits (asked only for the groups a
/// plan has: the planner builds an inventory per predicted plan).
struct Placer {
    split: GpuSplit,
    deg: Degrees,
}

impl Placer {
    fn of(&self, group: &[LogicalAxis]) -> Placement {
        let (per_node, nodes) = self.split.group(&self.deg, group);
        Placement { per_node, nodes }
    }
}

/// The shapes every part reads.
struct Shape<'a> {
    spec: &'a RunSpec,
    tpf: f64,
    d: f64,
    nh: f64,
    kh: f64,
    seq: f64,
    tok: f64,
    sp: bool,
}

impl StepInventory {
    /// Tokens one data rank processes per step in whole sequences,
    /// `microbatches · tokens_per_microbatch` (mbs·T/cp each): the split the
    /// calibrated pricer prices. The roofline's sends read the book's
    /// fractional share ([`book_sends::token_share`]); the two are equal
    /// when the batch splits evenly over the data ranks, and a plan where
    /// they differ gets no prediction (`step::predict::prepare`).
    pub fn tokens_per_rank(&self) -> f64 {
        self.microbatches as f64 * self.tokens_per_microbatch
    }

    /// The inventory of `spec` with `features` on `chip` (its NVLink domain
    /// or TPU slice is the placement's node).
    pub(crate) fn build(spec: &RunSpec, chip: &Chip, features: &Features) -> StepInventory {
        Self::build_split(spec, chip, features, Self::split_of(spec, chip, features))
    }

    /// The GPUs (chips) of the placement's node: the NVLink domain, or the
    /// TPU slice (one ICI domain: a multi-slice job's outer axes cross the
    /// DCN between slices).
    fn node_size(spec: &RunSpec, chip: &Chip, features: &Features) -> u64 {
        let slices = features.slices.max(1);
        match (&chip.ici, &chip.nvlink) {
            (Some(_), _) if spec.n_gpus % slices == 0 => (spec.n_gpus / slices).max(1),
            (Some(_), _) => spec.n_gpus.max(1),
            (None, n) => n.as_ref().map_or(8, |n| n.domain_size).max(1),
        }
    }

    /// How the degrees of `spec` split between a node and the network, as
    /// [`StepInventory::build`] places its groups. It depends on the degrees,
    /// the chip and the TPU slices only, so the planner works it out once
    /// per degree tuple and builds each predicted plan's inventory with
    /// [`StepInventory::build_split`].
    pub(crate) fn split_of(spec: &RunSpec, chip: &Chip, features: &Features) -> GpuSplit {
        GpuSplit::new(&spec.degrees(), Self::node_size(spec, chip, features))
    }

    /// [`StepInventory::build`] with `split` =
    /// [`StepInventory::split_of`] of the same degrees, chip and slices.
    pub(crate) fn build_split(
        spec: &RunSpec,
        chip: &Chip,
        features: &Features,
        split: GpuSplit,
    ) -> StepInventory {
        let a = &spec.arch;
        let per_node = Self::node_size(spec, chip, features);
        let nodes = if chip.ici.is_some() {
            spec.n_gpus.max(1) / per_node
        } else {
            crate::fidelity::range::job_nodes(spec, chip)
        };
        let deg = spec.degrees();
        let tp = spec.tp.max(1);
        let seq = (spec.seq_len / spec.cp.max(1)) as f64;
        let s = Shape {
            spec,
            tpf: tp as f64,
            d: a.d_model as f64,
            nh: (a.n_heads * a.d_head) as f64,
            kh: (a.n_kv_heads * a.d_head) as f64,
            seq,
            tok: spec.mbs as f64 * seq,
            sp: spec.sequence_parallel && tp > 1,
        };
        let pp = spec.pp.max(1);
        let (plain, with_head) = stage_extremes_with(a, pp, spec.framework, spec.stage_layers);
        let placed = Placer { split, deg };
        let low_precision = features.compute_dtype.bytes_per_element() < 2.0;
        let pp_cross = split.in_node(LogicalAxis::Pp) < pp;
        let microbatches = spec.grad_acc.max(1);
        let virtual_stages = if spec.schedule == Schedule::Interleaved {
            spec.virtual_stages.max(1)
        } else {
            1
        };
        let sched = (pp, microbatches, virtual_stages, pp_cross);
        let (dp, dp_gather, dp_early_calls) = dp_transfers(spec, &placed, microbatches);
        // built in place (the planner builds one per predicted plan: no
        // copy of the whole inventory)
        StepInventory {
            stages: pp,
            microbatches,
            virtual_stages,
            layers_plain: plain,
            layers_with_head: with_head,
            tokens_per_microbatch: s.tok,
            remat: spec.remat,
            layer_gemms: layer_gemms(&s),
            layer_matmul_flops: layer_matmul_flops(&s),
            head: Gemm {
                block: Block::LmHead,
                m: s.tok,
                k: s.d,
                n: a.vocab as f64 / s.tpf,
                flops: 2.0 * s.tok * s.d * a.vocab as f64 / s.tpf,
                weight: 1.0,
            },
            attention: attention(&s, features.causal),
            elementwise_bytes: elementwise(&s),
            cast_bytes: if low_precision { cast(&s) } else { 0.0 },
            loss_bytes: 6.0 * s.tok * a.vocab as f64 / s.tpf * 4.0,
            tp: tp_transfers(&s, features.overlap, &placed),
            cp: cp_transfers(&s, &placed),
            ep: ep_transfers(&s, &placed),
            pp: pp_transfers(&s, sched),
            fsdp: fsdp_transfers(spec, &placed),
            dp,
            dp_gather,
            dp_early_calls,
            optimizer_params: optimizer_params(spec),
            nodes,
            pp_cross_node: pp_cross,
            compute_dtype: features.compute_dtype,
            low_precision,
            overlap: features.overlap,
            degrees: deg,
            split,
        }
    }
}

/// MLP up (+gate) and down of `rows` token-rows at per-device width
/// `width`, each GEMM `tall` rows high.
fn mlp(s: &Shape, block: Block, rows: f64, tall: f64, width: f64, weight: f64) -> [Gemm; 2] {
    let mats = s.spec.arch.mlp.matrices() as f64;
    let up = (mats - 1.0) * width;
    let down = width;
    [
        Gemm {
            block,
            m: tall,
            k: s.d,
            n: up,
            flops: 2.0 * rows * s.d * up,
            weight,
        },
        Gemm {
            block,
            m: tall,
            k: down,
            n: s.d,
            flops: 2.0 * rows * down * s.d,
            weight,
        },
    ]
}

/// The forward GEMMs of one average layer.
fn layer_gemms(s: &Shape) -> LayerGemms {
    let a = &s.spec.arch;
    let (d, tok, tpf) = (s.d, s.tok, s.tpf);
    let mut g = LayerGemms::new();
    if a.mla.is_some() {
        // MLA: the down/up projections as one GEMM of the layer's attention
        // parameters, D deep
        let params = s.spec.params.attention as f64 / a.n_layers.max(1) as f64;
        let width = params / d / tpf;
        g.push(Gemm {
            block: Block::AttentionProjections,
            m: tok,
            k: d,
            n: width,
            flops: 2.0 * tok * params / tpf,
            weight: 1.0,
        });
    } else {
        let qkv = (s.nh + 2.0 * s.kh) / tpf;
        g.push(Gemm {
            block: Block::AttentionProjections,
            m: tok,
            k: d,
            n: qkv,
            flops: 2.0 * tok * d * qkv,
            weight: 1.0,
        });
        g.push(Gemm {
            block: Block::AttentionProjections,
            m: tok,
            k: s.nh / tpf,
            n: d,
            flops: 2.0 * tok * (s.nh / tpf) * d,
            weight: 1.0,
        });
    }
    let Some(mo) = &a.moe else {
        g.extend(mlp(s, Block::Mlp, tok, tok, a.d_ff as f64 / tpf, 1.0));
        return g;
    };
    // MoE layers: shared experts see every token; the k·tok routed
    // token-rows land on the E/ep local experts, ep·tok·k/E rows each
    // (short GEMMs); the router is a [tok, D] × [D, E] GEMM. Whole experts
    // (etp = 1): each TP rank routes its tok/tp sequence shard and runs
    // full-width experts — the same FLOPs, GEMMs tp× shorter and tp× wider
    let phi = a.moe_fraction();
    g.extend(mlp(s, Block::Mlp, tok, tok, a.d_ff as f64 / tpf, 1.0 - phi));
    let (k, e) = (mo.top_k as f64, mo.n_experts.max(1) as f64);
    let (rows, width) = if s.spec.whole_experts() {
        (tok * k / tpf, a.d_ff_expert() as f64)
    } else {
        (tok * k, a.d_ff_expert() as f64 / tpf)
    };
    let tall = (s.spec.ep.max(1) as f64 * rows / e).max(1.0);
    let shared = mo.n_shared_experts as f64;
    if shared > 0.0 {
        let w = a.d_ff_shared() as f64 / tpf;
        g.extend(mlp(s, Block::SharedExperts, tok, tok, w, phi * shared));
    }
    g.extend(mlp(
        s,
        Block::RoutedExperts,
        rows,
        tall,
        width,
        phi * MOE_LOAD_IMBALANCE,
    ));
    g.push(Gemm {
        block: Block::Router,
        m: tok,
        k: d,
        n: e,
        flops: 2.0 * tok * d * e,
        weight: phi,
    });
    g
}

/// 2·tokens·(attention projections + m·D·F_active)/tp.
fn layer_matmul_flops(s: &Shape) -> f64 {
    let a = &s.spec.arch;
    let mats = a.mlp.matrices() as f64;
    let attn_proj = if a.mla.is_some() {
        s.spec.params.attention as f64 / a.n_layers.max(1) as f64
    } else {
        s.d * (s.nh + 2.0 * s.kh) + s.nh * s.d
    };
    2.0 * s.tok * (attn_proj + mats * s.d * a.ffn_width_active()) / s.tpf
}

/// The attention core of one layer.
fn attention(s: &Shape, causal: bool) -> AttentionCall {
    let a = &s.spec.arch;
    let tpf = s.tpf;
    let heads = a.n_heads as f64 / tpf;
    if crate::memory::unfused_attention(s.spec.framework) {
        // unfused attention core: full s×s scores (no causal skipping), two
        // batched GEMMs with the head dimension as inner size
        let fl = 4.0 * s.tok * s.seq * s.nh / tpf;
        let dh = a.d_head as f64;
        return AttentionCall {
            tokens: s.tok,
            keys: s.seq,
            heads,
            head_dim_qk: dh,
            head_dim_v: dh,
            causal: false,
            flops: fl,
            unfused: Some(UnfusedScores {
                gemm: Gemm {
                    block: Block::AttentionCore,
                    m: s.seq,
                    k: dh,
                    n: s.seq,
                    flops: fl,
                    weight: 1.0,
                },
                score_elems: s.spec.mbs as f64 * heads * s.seq * s.seq,
            }),
        };
    }
    // with context parallelism the local queries attend to the whole
    // (causal, load-balanced) sequence: the K/V length is seq_len, not seq/cp;
    // keys per query averaged over the layers (causal half, sliding windows),
    // per-head widths of MLA (model::flops)
    let keys = layer_keys(a, s.spec.seq_len, causal) / a.n_layers.max(1) as f64;
    let (hqk, hv) = head_dims(a);
    AttentionCall {
        tokens: s.tok,
        keys,
        heads,
        head_dim_qk: hqk as f64,
        head_dim_v: hv as f64,
        causal,
        flops: 2.0 * s.tok * a.n_heads as f64 * (hqk + hv) as f64 * keys / tpf,
        unfused: None,
    }
}

/// Element-wise bytes per layer (fwd+bwd), bf16: norms+residual 20·D
/// (sharded by SP), SwiGLU 8·F and RoPE 8·N·H (sharded by TP).
fn elementwise(s: &Shape) -> f64 {
    let tp1 = s.spec.tp.max(1) == 1;
    let dsh = if s.sp || tp1 { s.d / s.tpf } else { s.d };
    let f = s.spec.arch.ffn_width_active();
    2.0 * s.tok * elementwise_elems(dsh, f, s.nh, s.tpf)
}

/// fp8 casts of every GEMM input (forward: D, N·H, D, F) and output
/// gradient (backward: N·H + 2·K·H, D, (m−1)·F, D), per layer.
fn cast(s: &Shape) -> f64 {
    let mats = s.spec.arch.mlp.matrices() as f64;
    let (d, f) = (s.d, s.spec.arch.ffn_width_active());
    let elems = (2.0 * d + s.nh + f + s.nh + 2.0 * s.kh + 2.0 * d + (mats - 1.0) * f) / s.tpf;
    FP8_CAST_BYTES * s.tok * elems
}

/// TP/SP collectives of one layer on one micro-batch.
fn tp_transfers(s: &Shape, ov: Overlap, at: &Placer) -> Option<Transfer> {
    let spec = s.spec;
    if spec.tp.max(1) <= 1 {
        return None;
    }
    let tpf = s.tpf;
    let act_bytes = s.tok * s.d * 2.0;
    let (what, kind, ops, bytes) = if s.sp {
        // SP: 2 all-gathers + 2 reduce-scatters forward, the same backward
        (
            Moves::TpSp,
            Collective::AllGather,
            8.0,
            (tpf - 1.0) / tpf * act_bytes,
        )
    } else {
        // plain TP: 2 all-reduces forward + 2 backward
        (
            Moves::Tp,
            Collective::AllReduce,
            4.0,
            2.0 * (tpf - 1.0) / tpf * act_bytes,
        )
    };
    // whole experts (etp = 1, Megatron-Core's alltoall dispatcher): a MoE
    // layer's tokens reach the experts through the all-to-all from their
    // sequence shards, so the MLP's half of the layer's TP collectives is
    // gone (kept when shared experts still run tensor-parallel)
    // (the rule the roofline's sends read: `book_sends`)
    let ops = if tp_mlp_rides_all_to_all(&spec.arch, &at.deg) {
        ops * (1.0 - 0.5 * spec.arch.moe_fraction())
    } else {
        ops
    };
    // the recomputed forward repeats its collectives: half of them are the
    // forward's (x·0.5 is exact, so 1.5·ops under full recompute to the bit)
    let half = ops * 0.5;
    let all = half * tp_forward_passes(spec.remat) as f64 + half;
    // keeping only the sequence shard of a column-parallel GEMM's input
    // (QKV, MLP up) means gathering it again for its weight gradient
    // (Korthikanti et al. 2022 §4.2.2)
    let all = if s.sp && ov.sp_allgather == SpAllGather::Redo {
        all + 2.0
    } else {
        all
    };
    Some(Transfer {
        what,
        kind,
        ranks: spec.tp,
        placement: at.of(&[LogicalAxis::Tp]),
        bytes_per_call: bytes,
        calls: all,
        ring_steps: (tpf - 1.0).max(0.0),
    })
}

/// Context parallelism: ring attention passes the K/V chunks around the cp
/// ranks (cp − 1 hops forward; K/V again plus dK/dV backward, 2(cp − 1);
/// a recomputed attention forward passes them once more). All-gather CP
/// moves the same bytes as one collective per pass: each device receives
/// the other cp − 1 chunks (forward gather; backward gather and dK/dV
/// reduce-scatter; a recomputed forward gathers again), cp − 1 ring steps.
fn cp_transfers(s: &Shape, at: &Placer) -> Option<Transfer> {
    let cp = s.spec.cp.max(1);
    if cp <= 1 {
        return None;
    }
    let passes = if s.spec.remat == Remat::None {
        3.0
    } else {
        4.0
    };
    // K and V of the local chunk, bf16
    let chunk = 2.0 * s.tok * s.kh / s.tpf * 2.0;
    let hops = cp as f64 - 1.0;
    Some(match s.spec.cp_comm {
        CpComm::Ring => Transfer {
            what: Moves::CpRing,
            kind: Collective::PointToPoint,
            ranks: cp,
            placement: at.of(&[LogicalAxis::Cp]),
            bytes_per_call: chunk,
            calls: passes * hops,
            ring_steps: 1.0,
        },
        CpComm::AllGather => Transfer {
            what: Moves::CpAllGather,
            kind: Collective::AllGather,
            ranks: cp,
            placement: at.of(&[LogicalAxis::Cp]),
            bytes_per_call: chunk * hops,
            calls: passes,
            ring_steps: hops,
        },
    })
}

/// Expert parallelism: each MoE layer sends its k·tok routed token-rows to
/// the experts' ranks and back (dispatch + combine), forward and backward
/// (and again for a fully recomputed forward); calls are per average layer
/// (the fraction of MoE layers).
fn ep_transfers(s: &Shape, at: &Placer) -> Option<Transfer> {
    let mo = s.spec.arch.moe.as_ref()?;
    let ep = s.spec.ep.max(1);
    if ep <= 1 {
        return None;
    }
    let epf = ep as f64;
    let rows = s.tok * mo.top_k as f64 / if s.sp { s.tpf } else { 1.0 };
    let passes = if s.spec.remat == Remat::Full {
        6.0
    } else {
        4.0
    };
    Some(Transfer {
        what: Moves::EpDispatch,
        kind: Collective::AllToAll,
        ranks: ep,
        placement: at.of(&[LogicalAxis::Ep]),
        bytes_per_call: MOE_LOAD_IMBALANCE * rows * s.d * 2.0 * (epf - 1.0) / epf,
        calls: s.spec.arch.moe_fraction() * passes,
        ring_steps: epf - 1.0,
    })
}

/// Pipeline sends on the critical path: forward and backward per
/// micro-batch plus the fill, per virtual stage (Megatron 2022 and SP send
/// 1/tp of the activation: scatter/gather).
fn pp_transfers(s: &Shape, sched: (u64, u64, u64, bool)) -> Option<Transfer> {
    let (pp, microbatches, virtual_stages, pp_cross_node) = sched;
    if pp <= 1 {
        return None;
    }
    let scatter = s.sp
        || matches!(
            s.spec.framework,
            Framework::Megatron2022 | Framework::Megatron2021
        );
    let v = virtual_stages as f64;
    Some(Transfer {
        what: Moves::PpSend,
        kind: Collective::PointToPoint,
        ranks: 2,
        placement: Placement {
            per_node: if pp_cross_node { 1 } else { 2 },
            nodes: if pp_cross_node { 2 } else { 1 },
        },
        bytes_per_call: s.tok * s.d * 2.0 / if scatter { s.tpf } else { 1.0 },
        calls: 2.0 * (microbatches as f64 + pp as f64 - 1.0) * v,
        ring_steps: 1.0,
    })
}

/// ZeRO-3 / FSDP: every micro-batch gathers the stage's bf16 parameters for
/// the forward and again for the backward and reduce-scatters its
/// gradients over the shard group (prefetched under the micro-batch).
fn fsdp_transfers(spec: &RunSpec, at: &Placer) -> Option<Transfer> {
    let (shard, _) = spec.shard_groups();
    if shard <= 1 {
        return None;
    }
    let shardf = shard as f64;
    let gb = grad_bytes(spec.framework);
    Some(Transfer {
        what: Moves::Fsdp,
        kind: Collective::AllGather,
        ranks: shard,
        placement: at.of(spec.shard_axes().0),
        bytes_per_call: (shardf - 1.0) / shardf * spec.stage_params() * (2.0 + 2.0 + gb),
        calls: 1.0,
        ring_steps: shardf - 1.0,
    })
}

/// Data parallel across the replicas of each shard after gradient
/// accumulation: ZeRO-1/2 reduce-scatter the gradients and all-gather the
/// bf16 parameters (ZeRO-2 reduce-scatters every micro-batch), ZeRO-0
/// all-reduces them.
fn dp_transfers(
    spec: &RunSpec,
    at: &Placer,
    microbatches: u64,
) -> (Option<Transfer>, Option<Transfer>, f64) {
    let (shard, repl) = spec.shard_groups();
    if repl <= 1 {
        return (None, None, 0.0);
    }
    let replf = repl as f64;
    let frac = (replf - 1.0) / replf * (spec.stage_params() / shard as f64);
    let gb = grad_bytes(spec.framework);
    let placement = at.of(spec.shard_axes().1);
    let t = |what, kind, bytes| Transfer {
        what,
        kind,
        ranks: repl,
        placement,
        bytes_per_call: bytes,
        calls: 1.0,
        ring_steps: replf - 1.0,
    };
    if spec.zero == 0 {
        return (
            Some(t(
                Moves::DpAllReduce,
                Collective::AllReduce,
                2.0 * frac * gb,
            )),
            None,
            0.0,
        );
    }
    // ZeRO-2 reduce-scatters every micro-batch but the last early
    let early = if spec.zero == 2 {
        microbatches as f64 - 1.0
    } else {
        0.0
    };
    (
        Some(t(
            Moves::DpReduceScatter,
            Collective::ReduceScatter,
            frac * gb,
        )),
        Some(t(Moves::DpAllGather, Collective::AllGather, frac * 2.0)),
        early,
    )
}
