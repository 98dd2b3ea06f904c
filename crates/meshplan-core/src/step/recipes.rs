//! `train --explain` for the parts of a prediction that DualPipe, the fp8
//! recipes and the MoE grouped-GEMM curves price (`step::calibrated`): each
//! step in the symbols of docs/training.md, with its values.

use super::predict::Predicted;
use crate::trace::{Step, Tracer};

const SRC: &str =
    "docs/training.md (DualPipe, FP8 recipes and MoE grouped GEMMs); the profile's [curves]";

/// Record DualPipe's bubble and hidden all-to-all, the routed experts'
/// grouped-GEMM efficiency and the fp8 recipe's curve and casts, where the
/// prediction has them.
pub fn record<T: Tracer>(p: &Predicted, tr: &mut T) {
    let sc = &p.schedule;
    if let Some(d) = &sc.dualpipe {
        tr.record(|| {
            Step::new(
                "train.predicted.bubble",
                "Pipeline bubble, DualPipe (DeepSeek-V3 Table 2)",
                "T_bubble = (pp/2 − 1)·(F&B + B − 3W), F&B = F + B (the overlapped pair's compute); F = f_fwd·T_mb, B = T_mb − F, W = f_W·T_mb; 1F1B: (pp − 1)·(F + B)",
            )
            .bind("pp", sc.stages as f64, "")
            .bind("F", d.forward_s, "s")
            .bind("B", d.backward_s, "s")
            .bind("W", d.weight_grad_s, "s")
            .bind("F&B", d.overlapped_pair_s, "s")
            .bind("T_bubble,1F1B", d.one_f_one_b_bubble_s, "s")
            .result(d.bubble_s, "s")
            .source("DeepSeek-V3 technical report §3.2.1, Table 2; deepseek-ai/DualPipe")
        });
        if d.ep_hidden_s > 0.0 || p.time_breakdown_s.ep_comm > 0.0 {
            tr.record(|| {
                Step::new(
                    "train.predicted.ep_dualpipe",
                    "Expert-parallel all-to-all under DualPipe: hidden under the paired chunk's compute",
                    "T_EP,exposed = m·L_stage·max(0, t_EP,layer − t_compute,layer)",
                )
                .bind("T_EP,hidden", d.ep_hidden_s, "s")
                .result(p.time_breakdown_s.ep_comm, "s")
                .source("DeepSeek-V3 technical report §3.2.1 (computation-communication overlap)")
            });
        }
    }
    if let Some(e) = &sc.expert_gemm {
        tr.record(|| {
            Step::new(
                "train.predicted.expert_gemm",
                &format!("Routed experts' grouped GEMMs ({} grouped-GEMM curve)", e.curve.dtype),
                "e = share·e_max·(x/⌈x⌉₁₂₈)·x/(x + x½), x = min(M_e, D, 2·F_e/etp) of the gated up GEMM [M_e, D]×[D, 2·F_e/etp], M_e = ep·tokens·k/E rows per local expert",
            )
            .bind("M_e", e.rows_per_expert, "rows")
            .bind("x", e.x, "")
            .bind("e_max", e.curve.efficiency, "")
            .bind("x½", e.curve.half_dim, "")
            .bind("e_dense", e.dense_efficiency, "")
            .result(e.efficiency, "")
            .source(SRC)
        });
    }
    if let Some(f) = &sc.fp8 {
        tr.record(|| {
            let mut st = Step::new(
                "train.predicted.fp8_recipe",
                &format!("FP8 recipe {}: GEMM curve and casts", f.recipe),
                "T_GEMM = FLOPs/(C_fp8·share·e_max·(x/⌈x⌉₁₂₈)·x/(x + x½)); T_cast = b_cast·n_cast/(W_hbm·e_hbm) per layer; weights once per step: P_stage·b_w/(W_hbm·e_hbm) (router and LM head in bf16)",
            );
            if let Some(c) = &f.curve {
                st = st
                    .bind("e_max", c.efficiency, "")
                    .bind("x½", c.half_dim, "");
            }
            st.bind("e(largest GEMM)", f.largest_gemm_efficiency, "")
                .bind("b_cast", f.cast_bytes_per_element, "B/element")
                .bind("cast bytes/layer", f.cast_bytes_per_layer, "B")
                .bind("T_cast,weights/step", f.weight_cast_s, "s")
                .result(f.cast_s_per_layer, "s")
                .source("Transformer Engine recipes (DelayedScaling, Float8CurrentScaling, Float8BlockScaling); DeepSeek-V3 technical report §3.3")
        });
    }
}
