//! Golden tests: the counting exercises of "How To Scale Your Model",
//! chapters 4, 5 and 7, as listed in
//! `../shared/reference/book_exercises_ch5_ch7.json`.
//!
//! Each test quotes the book's answer, asserts meshplan's value within the
//! JSON's `rel_tol` (written out in the code), and asserts the exact integer
//! where one is known. The book's own models come from the built-in catalog:
//! `book-ch5-llama-2-13b`, `book-ch7-18b`, `book-ch7-18b-moe` (norms ignored,
//! as the book counts).

use meshplan_core::memory::{state_bytes_per_param, MemoryCalibration, MemoryQuery};
use meshplan_core::model::{flops, kv, params, Arch};
use meshplan_core::parallelism::TrainConfig;
use meshplan_core::trace::NoTrace;
use meshplan_core::units::{DType, Params};
use meshplan_core::Catalog;

fn arch(name: &str) -> Arch {
    Catalog::builtin()
        .model(name)
        .unwrap_or_else(|e| panic!("{e}"))
        .arch
        .clone()
}

fn count(a: &Arch) -> params::ParamCounts {
    a.validate().unwrap();
    params::count(a, &mut NoTrace)
}

/// |got/want − 1| ≤ rel_tol, with a readable failure.
#[track_caller]
fn close(what: &str, got: f64, want: f64, rel_tol: f64) {
    let rel = (got / want - 1.0).abs();
    assert!(
        rel <= rel_tol,
        "{what}: meshplan {got} vs book {want}: off by {rel:.4} > {rel_tol}"
    );
}

// ------------------------------------------------------------- chapter 5

#[test]
fn ch5_q1_llama2_13b_params() {
    let c = count(&arch("book-ch5-llama-2-13b"));
    // Book (ch5 Q1): "FFW 3LDF ≈ 8.5e9, attention 4DNHL ≈ 4.2e9, vocab 2VD ≈ 0.33e9;
    // total ≈ 13.0e9". rel_tol 0.02 for each (JSON).
    close("params_total", c.total as f64, 13.0e9, 0.02);
    close("params_ffw", c.mlp_dense as f64, 8.5e9, 0.02);
    close("params_attention", c.attention as f64, 4.2e9, 0.02);
    close("params_vocab", c.embedding as f64, 0.33e9, 0.02);
    // Exact (seed 000): (3·5120·13824 + 4·5120²)·40 + 2·5120·32000 = 13,015,449,600.
    assert_eq!(c.total, 13_015_449_600);
    assert_eq!(c.mlp_dense, 3 * 40 * 5120 * 13824);
    assert_eq!(c.attention, 4 * 5120 * 40 * 128 * 40);
    assert_eq!(c.embedding, 2 * 32000 * 5120);
    assert_eq!(c.norms, 0, "the book ignores norms");
    assert_eq!(c.active, c.total);
}

#[test]
fn ch5_q2_llama2_13b_param_and_optimizer_bytes() {
    let a = arch("book-ch5-llama-2-13b");
    let p = count(&a).total as f64;
    // Book (ch5 Q2): "(2+4+4)·13e9 ≈ 130 GB for params+Adam moments" (bf16
    // weights, two fp32 moments, no fp32 master copy); rel_tol 0.02.
    let q = MemoryQuery::from_config(&TrainConfig::default());
    let [w, _, opt] = state_bytes_per_param(&q, &a, &MemoryCalibration::BOOK);
    assert_eq!(w + opt, 2.0 + 4.0 + 4.0);
    close("params_plus_optimizer_bytes", (w + opt) * p, 130e9, 0.02);
    // The book's activations 2·L·B·(D+2F) ≈ 42 TB belong to the training
    // analysis: training_book.rs::ch5_q2_memory.
}

// ------------------------------------------------------------- chapter 7

#[test]
fn ch7_ex1_llama2_13b_kv_of_one_8k_sequence() {
    let a = arch("book-ch5-llama-2-13b");
    let s = kv::bytes_per_sequence(&a, 8192, DType::Bf16, &mut NoTrace).get();
    // Book (ch7 worked example): "2·bytes·H·K·L·T = 2·2·128·40·40·8192 ≈ 6.7 GB"; rel_tol 0.01.
    close("kv_cache_bytes", s, 6.7e9, 0.01);
    assert_eq!(s, (2 * 2 * 128 * 40 * 40 * 8192u64) as f64);
    assert_eq!(s, 6_710_886_400.0);
    // "four such caches exceed the 26 GB of bf16 params"
    assert!(4.0 * s > Params(count(&a).total).bytes(DType::Bf16).get());
}

#[test]
fn ch7_ex3_gqa_kv_is_five_times_smaller() {
    // Book (ch7 worked example 3): K = 8 instead of 40 → "1.34 GB per 8k sequence"; rel_tol 0.01.
    let mut a = arch("book-ch5-llama-2-13b");
    a.n_kv_heads = 8;
    let s = kv::bytes_per_sequence(&a, 8192, DType::Bf16, &mut NoTrace).get();
    close("kv_bytes_per_seq", s, 1.34e9, 0.01);
    assert_eq!(s, 6_710_886_400.0 / 5.0);
}

#[test]
fn ch7_q1a_params() {
    let c = count(&arch("book-ch7-18b"));
    // Book (ch7 Q1): "L·D·(3F + 2H(N+K)) + D·V = 64·4096·(3·16384 + 2·256·40) + 4096·32128 ≈ 18.4e9"; rel_tol 0.01.
    close("params", c.total as f64, 18.4e9, 0.01);
    assert_eq!(
        c.total,
        64 * 4096 * (3 * 16384 + 2 * 256 * 40) + 4096 * 32128
    );
    assert_eq!(c.total, 18_385_207_296);
}

#[test]
fn ch7_q1a_seed_slip_is_not_reproduced() {
    // Book slip: the handwritten solution (../shared/seeds/002, Exercise 1) prints
    // "18 385 207 246"; the formula it writes evaluates to 18,385,207,296 (…296,
    // not …246). meshplan reports the formula's value.
    let c = count(&arch("book-ch7-18b"));
    assert_ne!(c.total, 18_385_207_246);
    assert_eq!(c.total - 18_385_207_246, 50);
}

#[test]
fn ch7_q1b_kv_per_token_int8() {
    let b = kv::bytes_per_token(&arch("book-ch7-18b"), DType::Int8, &mut NoTrace).get();
    // Book (ch7 Q1): "2·L·K·H = 2·64·8·256 = 262,144 B ≈ 262 kB per token"; rel_tol 0.01.
    close("kv_bytes_per_token", b, 262e3, 0.01);
    assert_eq!(b, 262_144.0);
}

/// Largest batch of `seq_len`-token sequences that fits next to the int8
/// weights in `hbm` bytes (KV fully sharded): the ch7 Q2 arithmetic.
fn max_batch(a: &Arch, seq_len: u64, hbm: f64) -> u64 {
    let weights = Params(count(a).total).bytes(DType::Int8).get();
    let kv = kv::bytes_per_sequence(a, seq_len, DType::Int8, &mut NoTrace).get();
    ((hbm - weights) / kv).floor() as u64
}

#[test]
fn ch7_q2_max_batch_at_128k() {
    // TPU v5e 4x4: 16 chips × 16e9 B (given in the JSON); 128k = 128,000 tokens.
    let hbm = 16.0 * 16e9;
    let a = arch("book-ch7-18b");
    // Book (ch7 Q2): "KV per sequence = 262e3·128e3 ≈ 33.5 GB; (16·16e9 − 18.4e9)/33.5e9 ≈ 7.09 → batch 7" (rel_tol 0: exact).
    let s = kv::bytes_per_sequence(&a, 128_000, DType::Int8, &mut NoTrace).get();
    assert_eq!(s, 262_144.0 * 128_000.0);
    close("kv per sequence", s, 33.5e9, 0.01);
    assert_eq!(max_batch(&a, 128_000, hbm), 7);
    // Book (ch7 Q2, K = 1): "KV shrinks 8x, so about 8 × 7 = 56 sequences" (exact).
    let mut k1 = a.clone();
    k1.n_kv_heads = 1;
    assert_eq!(
        kv::bytes_per_token(&k1, DType::Int8, &mut NoTrace).get(),
        32_768.0
    );
    assert_eq!(max_batch(&k1, 128_000, hbm), 56);
}

#[test]
fn ch7_q5a_moe_total_and_active() {
    let c = count(&arch("book-ch7-18b-moe"));
    // Book (ch7 Q5): "Total L·D·(3EF + 2H(N+K)) + DV ≈ 212e9; activated uses k instead
    // of E: ≈31.2e9"; rel_tol 0.01 each.
    close("params_total", c.total as f64, 212e9, 0.01);
    close("params_activated", c.active as f64, 31.2e9, 0.01);
    // Exact: the book's formula gives 211,658,735,616 / 31,270,109,184; meshplan
    // also counts the router (E·D per layer = 16·4096·64 = 4,194,304), which the
    // book ignores.
    let router = 16 * 4096 * 64u64;
    assert_eq!(c.router, router);
    assert_eq!(c.total, 211_658_735_616 + router);
    assert_eq!(c.active, 31_270_109_184 + router);
    assert_eq!(c.total, 211_662_929_920);
    assert_eq!(c.active, 31_274_303_488);
}

#[test]
fn ch7_q5c_moe_kv_per_token_unchanged() {
    // Book (ch7 Q5): "Unchanged by MoE: 2·L·K·H = 262 kB/token in int8"; rel_tol 0.01.
    let moe = kv::bytes_per_token(&arch("book-ch7-18b-moe"), DType::Int8, &mut NoTrace).get();
    close("kv_bytes_per_token", moe, 262e3, 0.01);
    assert_eq!(moe, 262_144.0);
    assert_eq!(
        moe,
        kv::bytes_per_token(&arch("book-ch7-18b"), DType::Int8, &mut NoTrace).get()
    );
}

#[test]
fn ch7_q5d_moe_forward_flops_per_token() {
    // Book (ch7 Q5): "2 · activated params · T = 2 · 31.2e9 · T"; rel_tol 0.01.
    //
    // Convention: the book's figure is the matmul term only (2 FLOPs per
    // activated parameter; attention scores are ignored). meshplan reports it
    // as `forward_matmul` = 2·P_matmul, where P_matmul counts attention
    // projections, the k active experts, the router and the V·D output
    // projection (the input lookup costs no FLOPs). For this tied, norm-free
    // model P_matmul is exactly the activated count, so forward_matmul =
    // 2·active. `forward` adds the T-dependent attention FLOPs on top.
    let a = arch("book-ch7-18b-moe");
    let c = count(&a);
    let f = flops::per_token(&a, &c, 8192, true, &mut NoTrace);
    close(
        "forward_flops_per_token",
        f.forward_matmul.get(),
        2.0 * 31.2e9,
        0.01,
    );
    assert_eq!(c.matmul_active, c.active);
    assert_eq!(f.forward_matmul.get(), 2.0 * c.active as f64);
    assert!(f.forward.get() > f.forward_matmul.get());
}

// ------------------------------------------------------------- chapter 4

/// Chapter 4: forward matmul FLOPs per token = 2 × the parameters a token
/// multiplies through = 2·(params − input embedding V·D − norms) untied,
/// 2·(params − norms) tied (the shared matrix is used once, as the unembedding).
#[test]
fn ch4_forward_matmul_is_two_per_parameter() {
    let cat = Catalog::builtin();
    for name in [
        "book-ch5-llama-2-13b",
        "book-ch7-18b",
        "book-ch7-18b-moe",
        "llama-2-7b",
        "llama-2-13b",
        "llama-3.1-8b",
        "mistral-7b",
        "mixtral-8x7b",
    ] {
        let a = &cat.model(name).unwrap().arch;
        let c = count(a);
        let input = if a.tied_embeddings {
            0
        } else {
            a.vocab * a.d_model
        };
        let want = 2 * (c.active - input - c.norms);
        let f = flops::per_token(a, &c, 4096, true, &mut NoTrace);
        assert_eq!(f.forward_matmul.get(), want as f64, "{name}");
    }
}

#[test]
fn ch4_attention_flops() {
    // Book ch4: dot-product attention forward 4BT²NH (MHA, H_qk = H_v = H),
    // i.e. 4·N·H·L·T per token at length T without a mask; causal halves it.
    let a = arch("book-ch5-llama-2-13b");
    let c = count(&a);
    let (n, h, l) = (a.n_heads as f64, a.d_head as f64, a.n_layers as f64);
    for t in [1u64, 128, 4096, 32_768] {
        let full = flops::per_token(&a, &c, t, false, &mut NoTrace);
        let causal = flops::per_token(&a, &c, t, true, &mut NoTrace);
        assert_eq!(
            full.forward_attention.get(),
            4.0 * n * h * l * t as f64,
            "T={t}"
        );
        assert_eq!(
            causal.forward_attention.get(),
            full.forward_attention.get() / 2.0,
            "T={t}"
        );
        // Training = 3 × forward (backward = 2 × forward), matmuls and attention alike.
        for f in [full, causal] {
            assert_eq!(
                f.forward.get(),
                f.forward_matmul.get() + f.forward_attention.get()
            );
            assert_eq!(f.training.get(), 3.0 * f.forward.get());
        }
    }
    // Book ch4: attention FLOPs equal the QKVO projection FLOPs at T = 2D
    // (non-causal, MHA): 4·N·H·L·T = 2 · 4·D·N·H·L ⇔ T = 2D.
    let full = flops::per_token(&a, &c, 2 * a.d_model, false, &mut NoTrace);
    assert_eq!(full.forward_attention.get(), 2.0 * c.attention as f64);
}

#[test]
fn ch4_training_is_six_flops_per_parameter() {
    // Book ch4: training ≈ 6 × params × tokens (ignoring attention): for the ch5
    // model 6·(13.0e9 − V·D) per token, i.e. ≈ 7.8e10 FLOPs/token.
    let a = arch("book-ch5-llama-2-13b");
    let c = count(&a);
    let f = flops::per_token(&a, &c, 4096, true, &mut NoTrace);
    let matmul_training = 3.0 * f.forward_matmul.get();
    assert_eq!(
        matmul_training,
        6.0 * (c.total - a.vocab * a.d_model) as f64
    );
    close("6·N per token", matmul_training, 6.0 * 13e9, 0.02);
}
