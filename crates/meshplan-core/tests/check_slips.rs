//! One case per recognised slip kind: the hint names it.

use meshplan_core::check::{check, diagnose, parse_claims, SlipKind, Verdict};
use meshplan_core::Catalog;
use serde_json::json;

/// One diagnosed slip: what was claimed against meshplan's value, and the
/// hint expected for it.
struct Case {
    name: &'static str,
    quantity: &'static str,
    claimed: f64,
    digits: &'static str,
    actual: f64,
    tolerance: f64,
    report: serde_json::Value,
    kind: SlipKind,
    /// A phrase of the hint's message ("" where only the kind is checked).
    says: &'static str,
}

#[test]
fn each_slip_kind_is_named() {
    let moe = json!({"params_total": 211662929920u64, "params_active": 31274303488u64});
    #[rustfmt::skip]
    let cases = [
        Case { name: "unit prefix", quantity: "weight_load_time_s", claimed: 1.4, digits: "14", actual: 1.4e-3, tolerance: 1e-3, report: json!({}), kind: SlipKind::UnitPrefix, says: "unit prefix" },
        Case { name: "unit prefix on bytes", quantity: "kv_cache_bytes_per_token", claimed: 262.144, digits: "262144", actual: 262144.0, tolerance: 1e-6, report: json!({}), kind: SlipKind::UnitPrefix, says: "" },
        Case { name: "GiB for GB", quantity: "hbm_capacity_bytes", claimed: 17_179_869_184.0, digits: "17179869184", actual: 16e9, tolerance: 1e-6, report: json!({}), kind: SlipKind::DecimalVsBinary, says: "1024" },
        Case { name: "Mi for M", quantity: "max_batch", claimed: 1.048576 * 7.0, digits: "7340032", actual: 7.0, tolerance: 1e-6, report: json!({}), kind: SlipKind::DecimalVsBinary, says: "" },
        Case { name: "factor of 2", quantity: "memory_per_device.params_bytes", claimed: 52e9, digits: "52", actual: 26e9, tolerance: 0.01, report: json!({}), kind: SlipKind::Factor, says: "factor of 2" },
        Case { name: "factor of 1/3", quantity: "step_time_at_mfu_s", claimed: 0.1, digits: "1", actual: 0.3, tolerance: 0.01, report: json!({}), kind: SlipKind::Factor, says: "factor of 1/3" },
        Case { name: "total claimed as active", quantity: "params_active", claimed: 211.7e9, digits: "2117", actual: 31274303488.0, tolerance: 0.01, report: moe.clone(), kind: SlipKind::DenseVsMoe, says: "dense vs MoE" },
        Case { name: "active claimed as total", quantity: "params_total", claimed: 31274303488.0, digits: "31274303488", actual: 211662929920.0, tolerance: 1e-6, report: moe, kind: SlipKind::DenseVsMoe, says: "" },
        Case { name: "6·P for 2·P", quantity: "flops_per_token_forward", claimed: 6.0 * 13e9, digits: "78", actual: 2.0 * 13e9, tolerance: 0.01, report: json!({}), kind: SlipKind::ForwardVsTraining, says: "forward vs training" },
        Case { name: "2·P for 6·P", quantity: "flops_per_step", claimed: 2e18, digits: "2", actual: 6e18, tolerance: 1e-6, report: json!({}), kind: SlipKind::ForwardVsTraining, says: "" },
        Case { name: "one digit wrong", quantity: "params_total", claimed: 18385207246.0, digits: "18385207246", actual: 18385207296.0, tolerance: 1e-12, report: json!({}), kind: SlipKind::DigitTypo, says: "digit typo" },
        Case { name: "two digits swapped", quantity: "chips", claimed: 4906.0, digits: "4906", actual: 4096.0, tolerance: 1e-4, report: json!({}), kind: SlipKind::DigitTypo, says: "swapped" },
        // 13e9 instead of 13.0154e9 in a 6·N·B FLOPs count printed to 4 digits.
        Case { name: "rounded inputs", quantity: "flops_per_step", claimed: 6.0 * 13e9 * 3e6, digits: "23", actual: 6.0 * 13.2e9 * 3e6, tolerance: 0.002, report: json!({}), kind: SlipKind::RoundedInputs, says: "rounded inputs" },
        Case { name: "other quantity", quantity: "kv_cache_bytes_per_token", claimed: 6.7e9, digits: "67", actual: 819200.0, tolerance: 0.01, report: json!({"kv_cache_bytes_per_token": 819200.0, "kv_cache_bytes_per_sequence": 6.7e9}), kind: SlipKind::OtherQuantity, says: "kv_cache_bytes_per_sequence" },
    ];
    for c in cases {
        let h = diagnose(
            c.quantity,
            c.claimed,
            c.digits,
            c.actual,
            c.tolerance,
            &c.report,
        )
        .unwrap_or_else(|| panic!("{}: no hint", c.name));
        assert_eq!(h.kind, c.kind, "{}: {}", c.name, h.message);
        assert!(h.message.contains(c.says), "{}: {}", c.name, h.message);
    }
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
