//! What one training step sends as the book's roofline counts it (ch5,
//! ch12): every collective of the step — what it moves, on which logical
//! axis, the collective, the array `V` of one call and the calls per step —
//! from the exact fractional token share of a data rank,
//! `B·T/(dp·fsdp·cp)`. No cost in it: `training::comms` prices these sends
//! at peak on the placed mesh (the roofline), and the planner runs the same
//! derivation with nothing kept but the per-axis totals.
//!
//! The calibrated inventory ([`super::StepInventory`]) describes the same
//! step as a framework runs it (whole sequences per micro-batch, bf16 wire
//! format, per-micro-batch calls); the rules both read are here once:
//! [`tp_mlp_rides_all_to_all`] (which TP collectives a whole-expert MoE
//! layer drops) and [`tp_forward_passes`] (a recomputed forward repeats its
//! TP collectives). Where the two conventions still count differently, on
//! purpose (the book's figures are held bit-identical; the calibrated ones
//! are fitted): the book gathers and reduces weights per layer in the
//! configured dtypes where a framework gathers a stage's bf16 parameters per
//! micro-batch and reduces its own gradient bytes; its pipeline sends no
//! fill hops (`2·m·v` against `2·(m + p − 1)·v`); recompute repeats only the
//! TP forward (a framework also repeats the ep and cp passes, and SP redoes
//! its all-gathers for the weight gradient); a shared-expert-free MoE drops
//! `⌈L_moe/pp⌉` pairs on the busiest stage where the inventory's average
//! layer drops the MoE fraction of them; and the book's token share is
//! fractional where the inventory's is whole sequences.

use crate::collectives::Collective;
use crate::model::Arch;
use crate::parallelism::{Choice, Degrees, LogicalAxis, Remat, TrainConfig};
use crate::training::{MeshCtx, TrainCtx, Transfer};

/// One collective of the step as the roofline counts it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BookSend {
    /// What it moves.
    pub what: Transfer,
    /// The logical axis its group spans.
    pub axis: LogicalAxis,
    /// The collective.
    pub kind: Collective,
    /// V: bytes of one call's array (an AllToAll: all the group's buffers).
    pub bytes: f64,
    /// Calls per step.
    pub calls: u64,
    /// The framework can overlap it with compute.
    pub overlap: bool,
}

/// A MoE layer's MLP half of the TP collectives is gone when its experts
/// are whole (etp = 1, tp > 1): its tokens reach the experts by the ep
/// all-to-all from the sequence-parallel shards — unless shared experts
/// still run tensor-parallel there. Read by the roofline's sends and the
/// calibrated inventory alike.
pub fn tp_mlp_rides_all_to_all(arch: &Arch, deg: &Degrees) -> bool {
    arch.moe.as_ref().is_some_and(|m| m.n_shared_experts == 0) && deg.tp > 1 && deg.expert_tp() == 1
}

/// Forward passes a layer's TP collectives run per step: 2 under full
/// recompute (the recomputed forward repeats them), 1 otherwise.
pub fn tp_forward_passes(remat: Remat) -> u64 {
    if remat == Remat::Full {
        2
    } else {
        1
    }
}

/// The book's fractional token share of one data rank per step,
/// `B·T/(dp·fsdp·cp)` (the inventory's whole sequences per rank are
/// `microbatches · tokens_per_microbatch`; they agree when the batch splits
/// evenly).
pub fn token_share(cfg: &TrainConfig, deg: &Degrees) -> f64 {
    share(cfg.batch_tokens, &deg.at_least_one())
}

/// [`token_share`] of degrees already at least one (the placed mesh's).
#[inline]
fn share(batch_tokens: u64, d: &Degrees) -> f64 {
    batch_tokens as f64 / (d.dp * d.fsdp * d.cp) as f64
}

/// What the sends read: one plan on one placed mesh, reduced to sizes.
pub struct BookStep<'a> {
    arch: &'a Arch,
    deg: Degrees,
    dp_axis: LogicalAxis,
    has_dcn: bool,
    c: Choice,
    /// Layers on one stage, ceil(L/pp).
    l_dev: u64,
    /// Micro-batches (gradient-accumulation steps) per step.
    m: u64,
    /// One layer's parameters on one model-parallel shard, times the copies
    /// of the model a rank holds (2 under DualPipe: its two pipeline
    /// directions' stages, `parameter_copies`), so gathers and gradient
    /// reductions move both.
    layer_params: f64,
    /// Parameter, gradient, activation bytes per element.
    pb: f64,
    gb: f64,
    ab: f64,
    /// Tokens one device processes per step ([`token_share`]).
    tokens_dev: f64,
    /// B·T, tokens per step.
    batch_tokens: u64,
}

impl<'a> BookStep<'a> {
    /// Plan `c` of `ctx` on `mesh`.
    pub fn new(ctx: &TrainCtx<'a>, mesh: &MeshCtx, c: &Choice) -> Self {
        let (a, pc, d) = (&ctx.spec.arch, &ctx.pc, &mesh.deg);
        let l = a.n_layers.max(1) as f64;
        let p_exp = pc.experts_routed as f64;
        let layer_mp = (pc.total as f64 - pc.embedding as f64) / l;
        let dense = (layer_mp - p_exp / l) / d.tp as f64;
        let experts = p_exp / l / (d.expert_tp() as f64 * d.ep as f64);
        let cfg = &ctx.base;
        BookStep {
            arch: a,
            deg: *d,
            dp_axis: mesh.dp_axis,
            has_dcn: mesh.has_dcn,
            c: *c,
            l_dev: a.n_layers.div_ceil(d.pp),
            m: c.microbatches.max(1),
            layer_params: (dense + experts)
                * crate::parallelism::pipeline::parameter_copies(c.schedule, d.pp) as f64,
            pb: cfg.param_dtype.bytes_per_element(),
            gb: cfg.grad_dtype.bytes_per_element(),
            ab: cfg.activation_dtype.bytes_per_element(),
            tokens_dev: share(cfg.batch_tokens, d),
            batch_tokens: cfg.batch_tokens,
        }
    }

    /// Every send of the step, in the report's order: weights (fsdp, dp,
    /// DCN), cp, tp, ep, pp.
    #[inline]
    pub fn sends(&self, out: &mut impl SendSink) {
        self.weights(out);
        self.cp(out);
        self.tp(out);
        self.ep(out);
        self.pp(out);
    }

    /// FSDP and data parallelism by ZeRO stage. Weights sharded at stage 3
    /// (and the fsdp axis, always ZeRO-3) are gathered for every
    /// micro-batch's forward and backward and their gradients
    /// reduce-scattered per micro-batch; ZeRO-2 reduce-scatters gradients
    /// per micro-batch (they are sharded); ZeRO-0/1 reduce once per step
    /// after accumulation.
    fn weights(&self, out: &mut impl SendSink) {
        use Collective::{AllGather as Ag, AllReduce as Ar, ReduceScatter as Rs};
        let d = self.deg;
        // saturating: a hostile micro-batch count must not overflow the call count
        let (lw, per_mb) = (self.layer_params, self.l_dev.saturating_mul(self.m));
        if d.fsdp > 1 {
            let ax = LogicalAxis::Fsdp;
            out.send(ax, Ag, Transfer::FsdpGatherFwd, lw * self.pb, per_mb, true);
            out.send(ax, Ag, Transfer::FsdpGatherBwd, lw * self.pb, per_mb, true);
            out.send(
                ax,
                Rs,
                Transfer::FsdpReduceGrads,
                lw * self.gb,
                per_mb,
                true,
            );
        }
        if d.dp <= 1 {
            return;
        }
        let ax = self.dp_axis;
        let f = d.fsdp as f64;
        let (g, w) = (lw * self.gb / f, lw * self.pb / f);
        match self.c.zero {
            0 => out.send(ax, Ar, Transfer::DpAllReduce, g, self.l_dev, true),
            1 | 2 => {
                let rs_calls = if self.c.zero == 2 { per_mb } else { self.l_dev };
                out.send(ax, Rs, Transfer::ZeroReduceGrads, g, rs_calls, true);
                out.send(ax, Ag, Transfer::ZeroGatherWeights, w, self.l_dev, true);
            }
            _ => {
                out.send(ax, Ag, Transfer::Zero3GatherFwd, w, per_mb, true);
                out.send(ax, Ag, Transfer::Zero3GatherBwd, w, per_mb, true);
                out.send(ax, Rs, Transfer::Zero3ReduceGrads, g, per_mb, true);
            }
        }
        // multislice: the DCN part of dp
        if ax == LogicalAxis::Dp && self.has_dcn {
            let all = lw * self.gb * self.l_dev as f64;
            out.send(LogicalAxis::DpDcn, Ar, Transfer::DcnAllReduce, all, 1, true);
        }
    }

    /// Context parallelism: gradients reduced over cp, and ring attention's
    /// K/V of the whole sequence passing every device, forward and backward
    /// (+dK/dV).
    fn cp(&self, out: &mut impl SendSink) {
        use Collective::{AllGather as Ag, AllReduce as Ar, ReduceScatter as Rs};
        let d = self.deg;
        if d.cp <= 1 {
            return;
        }
        let (a, ax, l) = (self.arch, LogicalAxis::Cp, self.l_dev);
        let g = self.layer_params * self.gb / d.fsdp as f64;
        out.send(ax, Ar, Transfer::CpAllReduce, g, l, true);
        let kv_tok = (2 * a.n_kv_heads * a.d_head) as f64 / d.tp as f64 * self.ab;
        // tokens of one cp group, B·T/(dp·fsdp)
        let v = self.batch_tokens as f64 / (d.dp * d.fsdp) as f64 * kv_tok;
        out.send(ax, Ag, Transfer::CpKvFwd, v, l, true);
        out.send(ax, Ag, Transfer::CpKvBwd, v, l, true);
        out.send(ax, Rs, Transfer::CpDkv, v, l, true);
    }

    /// Tensor parallelism: per layer 2 × (AG + RS) of `[B_local, D]`
    /// forward (attention and MLP), the same backward; full remat repeats
    /// the forward's ([`tp_forward_passes`]); whole experts drop a MoE
    /// layer's MLP pair ([`tp_mlp_rides_all_to_all`]).
    fn tp(&self, out: &mut impl SendSink) {
        use Collective::{AllGather as Ag, ReduceScatter as Rs};
        if self.deg.tp <= 1 {
            return;
        }
        let a = self.arch;
        let act = self.tokens_dev * a.d_model as f64 * self.ab;
        let moe_pairs = if tp_mlp_rides_all_to_all(a, &self.deg) {
            a.moe_layers().div_ceil(self.deg.pp).min(self.l_dev)
        } else {
            0
        };
        let pairs = 2 * self.l_dev - moe_pairs;
        let fwd = pairs * tp_forward_passes(self.c.remat);
        let ax = LogicalAxis::Tp;
        out.send(ax, Ag, Transfer::TpGatherFwd, act, fwd, false);
        out.send(ax, Rs, Transfer::TpReduceFwd, act, fwd, false);
        out.send(ax, Ag, Transfer::TpGatherBwd, act, pairs, false);
        out.send(ax, Rs, Transfer::TpReduceBwd, act, pairs, false);
    }

    /// Expert parallelism: dispatch + combine all-to-all, forward and
    /// backward, per MoE layer. Each device's buffer is its `k·B_local·D/tp`
    /// routed token-rows; the send is the whole array, ep buffers
    /// (`collectives::cost` takes the global V of an AllToAll).
    fn ep(&self, out: &mut impl SendSink) {
        let (d, a) = (self.deg, self.arch);
        let Some(m) = a.moe.as_ref().filter(|_| d.ep > 1) else {
            return;
        };
        let moe_l = a.moe_layers().div_ceil(d.pp);
        let per_device =
            self.tokens_dev * m.top_k as f64 * a.d_model as f64 * self.ab / d.tp as f64;
        let v = per_device * d.ep as f64;
        let (ax, kind) = (LogicalAxis::Ep, Collective::AllToAll);
        out.send(ax, kind, Transfer::EpFwd, v, 2 * moe_l, false);
        out.send(ax, kind, Transfer::EpBwd, v, 2 * moe_l, false);
    }

    /// Pipeline: activations to the next stage and gradients back, per
    /// micro-batch (and per chunk when interleaved).
    fn pp(&self, out: &mut impl SendSink) {
        let d = self.deg;
        if d.pp <= 1 {
            return;
        }
        let mb = self.tokens_dev / self.m as f64;
        let sp = if self.c.sp { d.tp as f64 } else { 1.0 };
        let v = mb * self.arch.d_model as f64 * self.ab / sp;
        let hops = self.m.saturating_mul(self.c.chunks());
        let (ax, kind) = (LogicalAxis::Pp, Collective::PointToPoint);
        out.send(ax, kind, Transfer::PpFwd, v, hops, true);
        out.send(ax, kind, Transfer::PpBwd, v, hops, true);
    }
}

/// Where a step's sends go: the roofline's pricer (`training::comms`, which
/// costs each as it comes: nothing is built on the planner's hot path) or
/// a list (`Vec<BookSend>`).
pub trait SendSink {
    /// One send: what it moves, on which axis, the collective, V bytes per
    /// call, calls per step, whether it overlaps with compute.
    fn send(
        &mut self,
        axis: LogicalAxis,
        kind: Collective,
        what: Transfer,
        bytes: f64,
        calls: u64,
        overlap: bool,
    );
}

/// Keep every send.
impl SendSink for Vec<BookSend> {
    fn send(
        &mut self,
        axis: LogicalAxis,
        kind: Collective,
        what: Transfer,
        bytes: f64,
        calls: u64,
        overlap: bool,
    ) {
        self.push(BookSend {
            what,
            axis,
            kind,
            bytes,
            calls,
            overlap,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::mesh::Topology;

    /// The sends of `model` under `cfg` on `chips` H100s (8 per node).
    fn sends(model: &str, cfg: &TrainConfig, chips: u64) -> Vec<BookSend> {
        let cat = Catalog::builtin();
        let (spec, chip) = (cat.model(model).unwrap(), cat.chip("h100").unwrap());
        let ctx = TrainCtx::quiet(spec, chip, cfg, None);
        let (_, mesh) = MeshCtx::place(chip, &Topology::gpus(chips, 8), cfg.degrees);
        let mut v = Vec::new();
        BookStep::new(&ctx, &mesh, &cfg.choice()).sends(&mut v);
        v
    }

    fn find(v: &[BookSend], what: Transfer) -> BookSend {
        *v.iter()
            .find(|s| s.what == what)
            .unwrap_or_else(|| panic!("{what:?}: {v:?}"))
    }

    /// 4M tokens of 4,096, dp 2 × fsdp 2, tp 4, pp 2, ZeRO-1, sequence
    /// parallelism, 8 micro-batches (the two tests below).
    fn dp2_fsdp2_tp4_pp2() -> TrainConfig {
        TrainConfig {
            batch_tokens: 4 << 20,
            seq_len: 4096,
            degrees: Degrees {
                dp: 2,
                fsdp: 2,
                tp: 4,
                pp: 2,
                ..Default::default()
            },
            zero: 1,
            sequence_parallel: true,
            microbatches: 8,
            ..Default::default()
        }
    }

    /// Llama-3-8B (L = 32, D = 4096), B = 4Mi tokens of T = 4096 over
    /// dp 2 × fsdp 2 (4 data ranks), tp 4 with SP, pp 2, 8 micro-batches,
    /// full recompute, bf16 activations. By hand: a data rank's share is
    /// 4,194,304 / 4 = 1,048,576 tokens; a TP call moves [1,048,576, 4096]
    /// bf16 = 8,589,934,592 B; a stage holds 16 layers, 2 pairs each = 32
    /// pairs backward and 64 forward (the recomputed forward repeats them).
    /// A pipeline hop carries one micro-batch (131,072 tokens) of D bf16
    /// scattered over tp 4: 268,435,456 B, 8 per direction.
    #[test]
    fn a_dense_step_sends_what_the_book_counts() {
        let cfg = TrainConfig {
            remat: Remat::Full,
            ..dp2_fsdp2_tp4_pp2()
        };
        assert_eq!(token_share(&cfg, &cfg.degrees), 1_048_576.0);
        let v = sends("llama-3-8b", &cfg, 32);
        for (what, calls) in [
            (Transfer::TpGatherFwd, 64),
            (Transfer::TpReduceFwd, 64),
            (Transfer::TpGatherBwd, 32),
            (Transfer::TpReduceBwd, 32),
        ] {
            let s = find(&v, what);
            assert_eq!((s.calls, s.bytes), (calls, 8_589_934_592.0), "{what:?}");
            assert_eq!(s.axis, LogicalAxis::Tp);
            assert!(!s.overlap);
        }
        for what in [Transfer::PpFwd, Transfer::PpBwd] {
            let s = find(&v, what);
            assert_eq!((s.calls, s.bytes), (8, 268_435_456.0), "{what:?}");
        }
        // fsdp gathers per layer per micro-batch (16 · 8 = 128); ZeRO-1
        // over dp reduces and gathers once per layer (16), 1/fsdp of a layer
        let fsdp = find(&v, Transfer::FsdpGatherFwd);
        let zero = find(&v, Transfer::ZeroGatherWeights);
        assert_eq!((fsdp.calls, zero.calls), (128, 16));
        assert_eq!(zero.bytes * 2.0, fsdp.bytes);
        assert!(v
            .iter()
            .all(|s| s.axis != LogicalAxis::Ep && s.axis != LogicalAxis::Cp));
    }

    /// DualPipe keeps two copies of the model per rank (DeepSeek-V3 report
    /// §3.2.1), so every weight gather and gradient reduction moves twice
    /// the bytes of the same plan under 1F1B; activations (TP) do not change.
    /// Llama-3-8B, dp 2 × fsdp 2, tp 4, pp 2, 8 micro-batches, ZeRO-1.
    #[test]
    fn dualpipe_moves_two_copies_of_the_weights() {
        let one = dp2_fsdp2_tp4_pp2();
        let dual = TrainConfig {
            schedule: crate::parallelism::Schedule::DualPipe,
            ..one
        };
        let (a, b) = (
            sends("llama-3-8b", &one, 32),
            sends("llama-3-8b", &dual, 32),
        );
        for what in [
            Transfer::FsdpGatherFwd,
            Transfer::FsdpReduceGrads,
            Transfer::ZeroReduceGrads,
            Transfer::ZeroGatherWeights,
        ] {
            assert_eq!(find(&b, what).bytes, 2.0 * find(&a, what).bytes, "{what:?}");
            assert_eq!(find(&b, what).calls, find(&a, what).calls, "{what:?}");
        }
        assert_eq!(
            find(&b, Transfer::TpGatherFwd).bytes,
            find(&a, Transfer::TpGatherFwd).bytes
        );
    }

    /// Whole experts (etp = 1) drop a MoE layer's MLP pair of TP
    /// collectives unless a shared expert still runs tensor-parallel: the
    /// rule the roofline and the calibrated inventory both read. tp 2, ep 8,
    /// pp 2, no recompute. Mixtral-8x7B: 32 MoE layers, 16 a stage, no
    /// shared expert → 2·16 − 16 = 16 pairs. DeepSeek-V3: 61 layers (31 on
    /// the busiest stage), a shared expert → 2·31 = 62 pairs. With etp = tp
    /// (experts split like the dense MLP) Mixtral keeps its 32.
    #[test]
    fn whole_experts_drop_the_mlp_pair_unless_shared_experts_run_tp() {
        for (model, etp, want) in [
            ("mixtral-8x7b", 1, 16),
            ("deepseek-v3", 1, 62),
            ("mixtral-8x7b", 0, 32),
        ] {
            let degrees = Degrees {
                dp: 4,
                tp: 2,
                pp: 2,
                ep: 8,
                etp,
                ..Default::default()
            };
            let cfg = TrainConfig {
                batch_tokens: 16 * 4096,
                seq_len: 4096,
                degrees,
                remat: Remat::None,
                sequence_parallel: true,
                microbatches: 4,
                ..Default::default()
            };
            let cat = Catalog::builtin();
            let arch = &cat.model(model).unwrap().arch;
            assert_eq!(
                tp_mlp_rides_all_to_all(arch, &degrees),
                want == 16,
                "{model}"
            );
            let v = sends(model, &cfg, 16);
            let tp = find(&v, Transfer::TpGatherFwd);
            assert_eq!(tp.calls, want, "{model} etp {etp}");
            assert_eq!(
                find(&v, Transfer::TpReduceBwd).calls,
                want,
                "{model} etp {etp}"
            );
        }
        assert_eq!(tp_forward_passes(Remat::Full), 2);
        assert_eq!(tp_forward_passes(Remat::Selective), 1);
    }

    /// The roofline and the prediction describe the same split of the
    /// batch. Llama-3-8B on 32 H100 (Megatron, its H100 profile), B = 64
    /// sequences of T = 4096 over dp 4 × cp 2 (tp 4): by hand a data rank
    /// holds 64/4 = 16 sequences, and with cp 2 each device 2048 tokens of
    /// each: 16·2048 = 32,768 tokens = 262,144/(4·1·2), the book's share.
    /// With 8 micro-batches of 2 sequences, a micro-batch is 2·2048 = 4096
    /// tokens on a device.
    #[test]
    fn the_inventory_and_the_roofline_split_the_batch_alike() {
        let cat = Catalog::builtin();
        let (spec, chip) = (cat.model("llama-3-8b").unwrap(), cat.chip("h100").unwrap());
        let cfg = TrainConfig {
            batch_tokens: 64 * 4096,
            seq_len: 4096,
            degrees: Degrees {
                dp: 4,
                tp: 4,
                cp: 2,
                ..Default::default()
            },
            framework: crate::parallelism::Framework::Megatron,
            sequence_parallel: true,
            microbatches: 8,
            ..Default::default()
        };
        let prof = crate::step::predict::active_profile(chip, None)
            .unwrap()
            .unwrap();
        let topo = Topology::gpus(32, 8);
        let r = crate::training::analyze_with(
            spec,
            chip,
            &topo,
            &cfg,
            Some(&prof),
            &mut crate::trace::NoTrace,
        );
        let p = r
            .predicted
            .as_ref()
            .unwrap_or_else(|| panic!("{:?} {:?}", r.prediction_note, r.reasons));
        assert_eq!(p.inventory.tokens_per_microbatch, 4096.0);
        assert_eq!(p.inventory.tokens_per_rank(), 32_768.0);
        assert_eq!(
            token_share(&cfg, &cfg.degrees),
            p.inventory.tokens_per_rank()
        );
    }

    /// Where their rules agree (one stage, the SP all-gather kept, the batch
    /// split evenly, bf16 activations), the roofline's sends and the
    /// calibrated inventory move the same TP bytes per device per step. By
    /// hand, per layer: 2 (AG, RS) pairs forward and backward of a
    /// `[B_local, D]` activation, (tp−1)/tp of it each, = 8·(tp−1)/tp·V
    /// (plain TP: 4 all-reduces of 2·(tp−1)/tp·V, the same); full recompute
    /// repeats the forward's half (×1.5); whole experts drop a MoE layer's
    /// MLP half unless a shared expert runs tensor-parallel. The book counts
    /// per step with V of the whole share (B·T/dp tokens), the inventory per
    /// micro-batch and layer: the totals agree.
    #[test]
    fn both_conventions_move_the_same_tp_bytes_where_their_rules_agree() {
        let cat = Catalog::builtin();
        let chip = cat.chip("h100").unwrap();
        let prof = crate::step::predict::active_profile(chip, None)
            .unwrap()
            .unwrap();
        for (model, ep, etp) in [
            ("llama-3-8b", 1, 0),
            ("mixtral-8x7b", 8, 1),
            ("mixtral-8x7b", 4, 0),
            ("deepseek-v3", 8, 1),
        ] {
            let spec = cat.model(model).unwrap();
            for (remat, sp) in [
                (Remat::None, true),
                (Remat::Full, true),
                (Remat::None, false),
            ] {
                let cfg = TrainConfig {
                    batch_tokens: 8 * 4096,
                    seq_len: 4096,
                    degrees: Degrees {
                        dp: 4,
                        tp: 2,
                        ep,
                        etp,
                        ..Default::default()
                    },
                    framework: crate::parallelism::Framework::Megatron,
                    remat,
                    sequence_parallel: sp,
                    microbatches: 2,
                    ..Default::default()
                };
                let topo = Topology::gpus(8, 8);
                let r = crate::training::analyze_with(
                    spec,
                    chip,
                    &topo,
                    &cfg,
                    Some(&prof),
                    &mut crate::trace::NoTrace,
                );
                let book: f64 = r
                    .comms
                    .iter()
                    .filter(|c| c.axis == LogicalAxis::Tp)
                    .map(|c| c.bytes_sent_per_device.get() * c.count as f64)
                    .sum();
                let what = format!("{model} ep {ep} etp {etp} {remat:?} sp {sp}");
                let p = r
                    .predicted
                    .as_ref()
                    .unwrap_or_else(|| panic!("{what}: {:?}", r.prediction_note));
                let inv = &p.inventory;
                let tp = inv.tp.unwrap_or_else(|| panic!("{what}: no tp"));
                let layers = spec.arch.n_layers as f64;
                let calibrated = tp.bytes_per_call * tp.calls * layers * inv.microbatches as f64;
                // by hand: the dense layer's 8·(tp−1)/tp·V with V = 8,192
                // tokens (32,768 / dp 4) · D · 2 B, per layer
                let v = 8192.0 * spec.arch.d_model as f64 * 2.0;
                assert!(book > 0.0 && book.is_finite(), "{what}: {book}");
                assert!(
                    (book - calibrated).abs() <= 1e-12 * book,
                    "{what}: book {book} calibrated {calibrated}"
                );
                if model == "llama-3-8b" {
                    let per_layer = if remat == Remat::Full { 6.0 } else { 4.0 };
                    let want = per_layer * v * layers;
                    assert!(
                        (book - want).abs() <= 1e-12 * want,
                        "{what}: {book} vs {want}"
                    );
                }
            }
        }
    }
}
