//! One test per recognised slip kind: the hint names it.

use meshplan_core::check::{check, diagnose, parse_claims, SlipKind, Verdict};
use meshplan_core::Catalog;
use serde_json::json;

fn kind(q: &str, claimed: f64, digits: &str, actual: f64, report: serde_json::Value) -> SlipKind {
    diagnose(q, claimed, digits, actual, 1e-6, &report)
        .expect("a hint")
        .kind
}

#[test]
fn unit_prefix() {
    let h = diagnose("weight_load_time_s", 1.4, "14", 1.4e-3, 1e-3, &json!({})).unwrap();
    assert_eq!(h.kind, SlipKind::UnitPrefix);
    assert!(h.message.contains("unit prefix"));
    assert_eq!(
        kind(
            "kv_cache_bytes_per_token",
            262.144,
            "262144",
            262144.0,
            json!({})
        ),
        SlipKind::UnitPrefix
    );
}

#[test]
fn decimal_vs_binary() {
    let h = diagnose(
        "hbm_capacity_bytes",
        17_179_869_184.0,
        "17179869184",
        16e9,
        1e-6,
        &json!({}),
    )
    .unwrap();
    assert_eq!(h.kind, SlipKind::DecimalVsBinary);
    assert!(h.message.contains("1024"));
    assert_eq!(
        kind("max_batch", 1.048576 * 7.0, "7340032", 7.0, json!({})),
        SlipKind::DecimalVsBinary
    );
}

#[test]
fn factor_two_and_three() {
    let h = diagnose(
        "memory_per_device.params_bytes",
        52e9,
        "52",
        26e9,
        0.01,
        &json!({}),
    )
    .unwrap();
    assert_eq!(h.kind, SlipKind::Factor);
    assert!(h.message.contains("factor of 2"));
    let h = diagnose("step_time_at_mfu_s", 0.1, "1", 0.3, 0.01, &json!({})).unwrap();
    assert!(h.message.contains("factor of 1/3"), "{}", h.message);
}

#[test]
fn dense_vs_moe() {
    let r = json!({"params_total": 211662929920u64, "params_active": 31274303488u64});
    let h = diagnose("params_active", 211.7e9, "2117", 31274303488.0, 0.01, &r).unwrap();
    assert_eq!(h.kind, SlipKind::DenseVsMoe);
    assert!(h.message.contains("dense vs MoE"));
    assert_eq!(
        kind(
            "params_total",
            31274303488.0,
            "31274303488",
            211662929920.0,
            r
        ),
        SlipKind::DenseVsMoe
    );
}

#[test]
fn forward_vs_training() {
    let h = diagnose(
        "flops_per_token_forward",
        6.0 * 13e9,
        "78",
        2.0 * 13e9,
        0.01,
        &json!({}),
    )
    .unwrap();
    assert_eq!(h.kind, SlipKind::ForwardVsTraining);
    assert!(h.message.contains("forward vs training"));
    assert_eq!(
        kind("flops_per_step", 2e18, "2", 6e18, json!({})),
        SlipKind::ForwardVsTraining
    );
}

#[test]
fn digit_typo_one_digit_and_swap() {
    let h = diagnose(
        "params_total",
        18385207246.0,
        "18385207246",
        18385207296.0,
        1e-12,
        &json!({}),
    )
    .unwrap();
    assert_eq!(h.kind, SlipKind::DigitTypo);
    assert!(h.message.contains("digit typo"));
    let h = diagnose("chips", 4906.0, "4906", 4096.0, 1e-4, &json!({})).unwrap();
    assert_eq!(h.kind, SlipKind::DigitTypo);
    assert!(h.message.contains("swapped"), "{}", h.message);
}

#[test]
fn rounded_inputs() {
    // 13e9 instead of 13.0154e9 in a 6·N·B FLOPs count printed to 4 digits.
    let h = diagnose(
        "flops_per_step",
        6.0 * 13e9 * 3e6,
        "23",
        6.0 * 13.2e9 * 3e6,
        0.002,
        &json!({}),
    )
    .unwrap();
    assert_eq!(h.kind, SlipKind::RoundedInputs);
    assert!(h.message.contains("rounded inputs"));
}

#[test]
fn other_quantity() {
    let r = json!({"kv_cache_bytes_per_token": 819200.0, "kv_cache_bytes_per_sequence": 6.7e9});
    let h = diagnose("kv_cache_bytes_per_token", 6.7e9, "67", 819200.0, 0.01, &r).unwrap();
    assert_eq!(h.kind, SlipKind::OtherQuantity);
    assert!(h.message.contains("kv_cache_bytes_per_sequence"));
}

/// End to end: a claims file whose FAIL carries the hint.
#[test]
fn hint_reaches_the_report() {
    let src = r#"
[scenarios.moe]
model = { name = "book-ch7-18b-moe" }
[[claim]]
id = "active"
scenario = "moe"
quantity = "params_active"
claimed = "211.66 billion"
"#;
    let f = parse_claims(src, "t.toml", &mut |_| Err("none".into())).unwrap();
    let r = check(&f, Catalog::builtin(), false).unwrap();
    assert_eq!(r.claims[0].verdict, Verdict::Fail);
    assert_eq!(
        r.claims[0].hint.as_ref().unwrap().kind,
        SlipKind::DenseVsMoe
    );
}
