//! Property tests over random valid architectures (issue 2 "Must show").
//!
//! Case counts are modest so that CI on two cores stays fast.

use meshplan_core::model::report::{model_report, ModelQuery};
use meshplan_core::model::{
    flops, kv, params, Arch, Mla, MlpKind, ModelSpec, Moe, NormKind, SlidingWindow,
};
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Error;
use proptest::prelude::*;

fn cfg(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // Integration tests have no lib.rs next to them: don't try to persist.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Random small valid architectures: GQA with N % K == 0, optional MoE with
/// k ≤ E, optional MLA, optional sliding window.
fn arch() -> impl Strategy<Value = Arch> {
    let dims = (
        1u64..=8,    // L
        1u64..=128,  // D
        1u64..=256,  // F
        1u64..=4,    // K
        1u64..=4,    // G = N / K
        1u64..=32,   // H
        1u64..=1000, // V
    );
    let flags = (
        any::<bool>(),                      // tied
        any::<bool>(),                      // gated
        any::<bool>(),                      // layernorm
        0u64..=4,                           // norms per layer
        any::<bool>(),                      // final norm
        any::<bool>(),                      // qk norm
        any::<bool>(),                      // qkv bias
        any::<bool>(),                      // out bias
        any::<bool>(),                      // mlp bias
        prop_oneof![Just(0u64), 1u64..=64], // learned positions
        any::<bool>(),                      // lm head bias
    );
    let moe = proptest::option::of((
        1u64..=8,     // E
        any::<u64>(), // k (reduced mod E)
        0u64..=64,    // expert width (0 = F)
        0u64..=2,     // shared
        0u64..=64,    // shared width
        any::<u64>(), // dense layers (reduced mod L+1)
        any::<bool>(),
    ));
    let mla = proptest::option::of((0u64..=32, 1u64..=32, 0u64..=16, 0u64..=16, 1u64..=16));
    let sw = proptest::option::of((1u64..=64, 0u64..=4));
    (dims, flags, moe, mla, sw).prop_map(|(d, f, moe, mla, sw)| {
        let (l, dm, ff, k, g, h, v) = d;
        Arch {
            n_layers: l,
            d_model: dm,
            d_ff: ff,
            n_heads: k * g,
            n_kv_heads: k,
            d_head: h,
            vocab: v,
            tied_embeddings: f.0,
            mlp: if f.1 { MlpKind::Gated } else { MlpKind::Plain },
            norm: if f.2 { NormKind::Layer } else { NormKind::Rms },
            norms_per_layer: f.3,
            final_norm: f.4,
            qk_norm: f.5,
            qkv_bias: f.6,
            attn_out_bias: f.7,
            mlp_bias: f.8,
            learned_pos_emb: f.9,
            lm_head_bias: f.10,
            moe: moe.map(|(e, k, fe, s, fs, dense, rb)| Moe {
                n_experts: e,
                top_k: 1 + k % e,
                d_ff_expert: fe,
                n_shared_experts: s,
                d_ff_shared: fs,
                first_dense_layers: dense % (l + 1),
                router_bias: rb,
            }),
            mla: mla.map(|(q, kv, nope, rope, hv)| Mla {
                q_lora_rank: q,
                kv_lora_rank: kv,
                qk_nope_head_dim: nope,
                qk_rope_head_dim: if nope + rope == 0 { 1 } else { rope },
                v_head_dim: hv,
            }),
            sliding_window: sw.map(|(w, ge)| SlidingWindow {
                window: w,
                global_every: ge,
            }),
            attn_output_gate: false,
            linear_attention: None,
            sparse_attention: None,
            params_given: None,
        }
    })
}

fn dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

proptest! {
    #![proptest_config(cfg(256))]

    #[test]
    fn generated_archs_are_valid(a in arch()) {
        prop_assert!(a.validate().is_ok(), "{:?}", a.validate());
        exercise(&a);
    }

    #[test]
    fn params_independent_of_kv_dtype_and_seq_len(a in arch(), d1 in dtype(), d2 in dtype(),
                                                  t1 in 1u64..100_000, t2 in 1u64..100_000, causal in any::<bool>()) {
        let m = ModelSpec::custom("p", a);
        let r1 = model_report(&m, &ModelQuery { seq_len: t1, kv_dtype: d1, causal }, &mut NoTrace);
        let r2 = model_report(&m, &ModelQuery { seq_len: t2, kv_dtype: d2, causal: !causal }, &mut NoTrace);
        prop_assert_eq!(r1.params_total, r2.params_total);
        prop_assert_eq!(r1.params_active, r2.params_active);
        prop_assert_eq!(r1.params_embedding, r2.params_embedding);
        prop_assert_eq!(r1.flops_per_token_forward_matmul, r2.flops_per_token_forward_matmul);
        prop_assert_eq!(r1.params_total, params::count(&m.arch, &mut NoTrace).total);
    }

    #[test]
    fn active_at_most_total(a in arch()) {
        let c = params::count(&a, &mut NoTrace);
        prop_assert!(c.active <= c.total);
        if a.moe.is_none() {
            prop_assert_eq!(c.active, c.total);
            prop_assert_eq!(c.experts_routed + c.experts_shared + c.router, 0);
        } else if a.moe_layers() > 0 && a.moe.as_ref().unwrap().top_k < a.moe.as_ref().unwrap().n_experts {
            prop_assert!(c.active < c.total);
        }
    }

    #[test]
    fn total_is_sum_of_parts(a in arch()) {
        let c = params::count(&a, &mut NoTrace);
        prop_assert_eq!(
            c.total,
            c.embedding + c.attention + c.mlp_dense + c.experts_routed + c.experts_shared + c.router + c.norms
        );
        // Per-layer view: embeddings + final norm + Σ layers.
        let final_norm = if a.final_norm { a.norm.params(a.d_model) } else { 0 };
        prop_assert_eq!(
            c.total,
            c.embedding + final_norm + c.per_dense_layer * a.dense_layers() + c.per_moe_layer * a.moe_layers()
        );
    }

    #[test]
    fn kv_bytes_scale_with_dtype(a in arch(), t in 1u64..50_000) {
        let per_tok = |d| kv::bytes_per_token(&a, d, &mut NoTrace).get();
        let per_seq = |d| kv::bytes_per_sequence(&a, t, d, &mut NoTrace).get();
        prop_assert_eq!(per_tok(DType::Int8) * 2.0, per_tok(DType::Bf16));
        prop_assert_eq!(per_tok(DType::Fp8), per_tok(DType::Int8));
        prop_assert_eq!(per_tok(DType::Fp16), per_tok(DType::Bf16));
        prop_assert_eq!(per_tok(DType::Fp32), 2.0 * per_tok(DType::Bf16));
        // int4 packs two per byte (rounded up to a whole byte).
        prop_assert_eq!(per_tok(DType::Int4), (per_tok(DType::Int8) / 2.0).ceil());
        prop_assert_eq!(per_seq(DType::Int8) * 2.0, per_seq(DType::Bf16));
        prop_assert_eq!(per_seq(DType::Fp32), 2.0 * per_seq(DType::Bf16));
        prop_assert!(per_tok(DType::Int8) > 0.0);
    }

    #[test]
    fn kv_per_sequence_monotone_and_bounded(a in arch(), d in dtype(), t in 0u64..20_000, dt in 0u64..5_000) {
        let per_tok = kv::bytes_per_token(&a, d, &mut NoTrace).get();
        let s1 = kv::bytes_per_sequence(&a, t, d, &mut NoTrace).get();
        let s2 = kv::bytes_per_sequence(&a, t + dt, d, &mut NoTrace).get();
        prop_assert!(s1 <= s2, "{} > {}", s1, s2);
        prop_assert!(s1 <= t as f64 * per_tok * (1.0 + 1e-12), "{} > {}·{}", s1, t, per_tok);
        if a.sliding_window.is_none() && d.bits() >= 8 {
            prop_assert_eq!(s1, t as f64 * per_tok);
        }
    }

    #[test]
    fn training_is_three_forward_and_attention_monotone(a in arch(), t in 1u64..100_000, dt in 0u64..10_000,
                                                         causal in any::<bool>()) {
        let c = params::count(&a, &mut NoTrace);
        let f1 = flops::per_token(&a, &c, t, causal, &mut NoTrace);
        let f2 = flops::per_token(&a, &c, t + dt, causal, &mut NoTrace);
        let rel = |x: f64, y: f64| (x - y).abs() <= 1e-12 * y.abs().max(1.0);
        prop_assert!(rel(f1.training.get(), 3.0 * f1.forward.get()));
        prop_assert!(rel(f1.forward.get(), f1.forward_matmul.get() + f1.forward_attention.get()));
        prop_assert!(f1.forward_attention.get() <= f2.forward_attention.get());
        prop_assert_eq!(f1.forward_matmul, f2.forward_matmul);
        // Causal never costs more than full attention.
        let full = flops::per_token(&a, &c, t, false, &mut NoTrace);
        let cz = flops::per_token(&a, &c, t, true, &mut NoTrace);
        prop_assert!(cz.forward_attention.get() <= full.forward_attention.get());
        // Matmul FLOPs are 2 per active matrix weight: at most 2·(active + V·D).
        prop_assert!(f1.forward_matmul.get() <= 2.0 * (c.active + a.vocab * a.d_model) as f64);
    }
}

proptest! {
    #![proptest_config(cfg(128))]

    #[test]
    fn validate_rejects_indivisible_heads(a in arch(), extra in 1u64..4) {
        let mut a = a;
        // K' = K + extra does not divide N = K·G unless it happens to; pick one that doesn't.
        let k = a.n_kv_heads + extra;
        prop_assume!(a.n_heads % k != 0);
        a.n_kv_heads = k;
        match a.validate() {
            Err(Error::InvalidModel { field, .. }) => prop_assert!(field.contains("n_kv_heads"), "{}", field),
            other => prop_assert!(false, "{:?}", other),
        }
    }

    #[test]
    fn validate_rejects_zero_dims(a in arch(), which in 0usize..6) {
        let mut a = a;
        match which {
            0 => a.n_layers = 0,
            1 => a.d_model = 0,
            2 => a.n_heads = 0,
            3 => a.n_kv_heads = 0,
            4 => a.d_head = 0,
            _ => a.vocab = 0,
        }
        let rejected = matches!(a.validate(), Err(Error::InvalidModel { .. }));
        prop_assert!(rejected, "{:?}", a);
    }
}

/// Any u64, biased towards edge values.
fn wild() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..4,
        1u64..100_000,
        (1u64 << 20)..(1u64 << 36),
        Just(u64::MAX),
        Just(u64::MAX / 2 + 1),
        any::<u64>(),
    ]
}

fn wild_arch(with_mla: bool) -> impl Strategy<Value = Arch> {
    let dims = (
        wild(),
        wild(),
        wild(),
        wild(),
        wild(),
        wild(),
        wild(),
        wild(),
        wild(),
    );
    let moe = proptest::option::of((wild(), wild(), wild(), wild(), wild(), wild()));
    let mla = (wild(), wild(), wild(), wild(), wild());
    (
        arch(),
        dims,
        moe,
        mla,
        proptest::option::of((wild(), wild())),
    )
        .prop_map(move |(base, d, moe, mla, sw)| Arch {
            n_layers: d.0,
            d_model: d.1,
            d_ff: d.2,
            n_heads: d.3,
            n_kv_heads: d.4,
            d_head: d.5,
            vocab: d.6,
            norms_per_layer: d.7,
            learned_pos_emb: d.8,
            moe: moe.map(|m| Moe {
                n_experts: m.0,
                top_k: m.1,
                d_ff_expert: m.2,
                n_shared_experts: m.3,
                d_ff_shared: m.4,
                first_dense_layers: m.5,
                router_bias: true,
            }),
            mla: if with_mla {
                Some(Mla {
                    q_lora_rank: mla.0,
                    kv_lora_rank: mla.1,
                    qk_nope_head_dim: mla.2,
                    qk_rope_head_dim: mla.3,
                    v_head_dim: mla.4,
                })
            } else {
                None
            },
            sliding_window: sw.map(|(w, g)| SlidingWindow {
                window: w,
                global_every: g,
            }),
            ..base
        })
}

/// Everything downstream of a passing validate() must run without panicking
/// (validate rejects overflow).
fn exercise(a: &Arch) {
    if a.validate().is_ok() {
        let c = params::count(a, &mut NoTrace);
        assert!(c.active <= c.total);
        for t in [0, 1, 4096, u64::MAX] {
            for causal in [false, true] {
                let _ = flops::per_token(a, &c, t, causal, &mut NoTrace);
            }
            for d in DType::ALL {
                let _ = kv::bytes_per_sequence(a, t, d, &mut NoTrace);
            }
        }
        for d in DType::ALL {
            let _ = kv::bytes_per_token(a, d, &mut NoTrace);
        }
        let _ = model_report(
            &ModelSpec::custom("w", a.clone()),
            &ModelQuery::default(),
            &mut NoTrace,
        );
    }
}

proptest! {
    #![proptest_config(cfg(256))]

    #[test]
    fn never_panics_on_any_u64(a in wild_arch(false)) {
        exercise(&a);
    }

    // Regression: Arch::validate once summed the MLA head dims in u64 and
    // panicked (debug) for huge values before its overflow check.
    #[test]
    fn never_panics_on_any_u64_mla(a in wild_arch(true)) {
        exercise(&a);
    }
}
