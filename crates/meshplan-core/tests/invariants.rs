//! Issue 12's invariants on arbitrary plans (proptest, fixed case count):
//! a predicted step time is never below the roofline lower bound, and the
//! human output prints the JSON's numbers (the step times, and each input
//! outside the profile's fitted ranges as a row of its own). The plans are
//! well-formed (every degree divides the mesh), so almost all of them are
//! predicted (37 of 40 cases when written).

use meshplan_core::scenario::Scenario;
use meshplan_core::units::Seconds;
use meshplan_core::view::{render_text, Render};
use proptest::prelude::*;

/// `train` of a scenario: its JSON and its text.
fn train(body: &str) -> (serde_json::Value, String) {
    let sc = Scenario::parse(body, "p.toml").expect("scenario");
    let r = meshplan_core::fuzzing::train_report(&sc).expect("resolves");
    let json = serde_json::from_str(&serde_json::to_string(&r).expect("serializes"));
    (json.expect("JSON parses"), render_text(&r.doc()))
}

/// The text of the `label` row (label, then two or more spaces, then value).
fn row<'t>(text: &'t str, label: &str) -> Option<&'t str> {
    text.lines()
        .find_map(|l| l.strip_prefix(label).filter(|r| r.starts_with("  ")))
        .map(str::trim)
}

fn secs(v: &serde_json::Value, k: &str) -> String {
    Seconds::new(v[k].as_f64().unwrap_or_else(|| panic!("no {k}"))).to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn predictions_respect_the_lower_bound_and_text_prints_the_json(
        model in prop::sample::select(vec!["llama-3.1-8b", "llama-2-13b", "mixtral-8x7b", "gpt-2"]),
        chip in prop::sample::select(vec!["h100", "a100-80gb", "h200"]),
        log_nodes in 0u32..6,
        log_tp in 0u32..4,
        log_pp in 0u32..3,
        log_cp in 0u32..2,
        zero in 0u8..4,
        seq in prop::sample::select(vec![2048u64, 4096, 8192]),
    ) {
        // every degree divides the mesh: the plan is well-formed
        let (tp, pp, cp, dp) = (1u64 << log_tp, 1u64 << log_pp, 1u64 << log_cp, 1u64 << log_nodes);
        let chips = dp * tp * pp * cp;
        let body = format!(
            "[model]\nname = \"{model}\"\n[hardware]\nchip = \"{chip}\"\nchips = {chips}\n\
             [training]\nbatch_tokens = {}\nseq_len = {seq}\nremat = \"full\"\n\
             [parallelism]\ntp = {tp}\npp = {pp}\ncp = {cp}\ndp = {dp}\nzero = {zero}\n",
            seq * 256
        );
        let (v, text) = train(&body);
        let (t_math, lower) = (secs(&v, "t_math_s"), secs(&v, "step_time_lower_s"));
        prop_assert_eq!(row(&text, "T_math"), Some(t_math.as_str()), "{}", body);
        prop_assert_eq!(row(&text, "roofline step time, comms overlapped"), Some(lower.as_str()));
        let p = &v["predicted"];
        if p.is_object() {
            let step = p["step_time_s"].as_f64().expect("predicted step");
            let lower = v["step_time_lower_s"].as_f64().expect("lower bound");
            prop_assert!(step >= lower * (1.0 - 1e-12), "{step} < {lower} in {body}");
            let shown = row(&text, "step time predicted").unwrap_or_default();
            prop_assert!(shown.starts_with(&secs(p, "step_time_s")), "{shown} in {body}");
            for o in p["outside_fitted_range"].as_array().expect("ranges recorded") {
                let input = o["input"].as_str().expect("input");
                let r = row(&text, &format!("  {input}"));
                prop_assert!(r.is_some_and(|r| r.contains("(fitted: ")), "{input} not shown:\n{text}");
            }
        }
    }
}
