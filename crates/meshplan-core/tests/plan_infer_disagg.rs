//! `plan infer --disagg` (issue 26, part 5): aggregated against
//! disaggregated plans under SLOs, each plan listed once, and every number
//! the one `infer` would give for the same deployment.

use std::collections::HashSet;

use meshplan_core::inference::serving::disagg;
use meshplan_core::inference::{self, scenario::resolve};
use meshplan_core::planner::{plan_infer, PlanInferReport, PlanInferRequest};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::Catalog;

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        ((got - want) / want).abs() <= rel,
        "{what}: got {got}, want {want} (rel {rel})"
    );
}

const SCENARIO: &str = r#"
model = { name = "llama-3.1-70b" }
hardware = { chip = "h200" }
inference = { prompt_len = 4096, gen_len = 1024 }
"#;

fn search(mode: &str, tpot_slo: &str) -> PlanInferReport {
    let req: PlanInferRequest = serde_json::from_value(serde_json::json!({
        "scenario": Scenario::parse(SCENARIO, "t.toml").unwrap(),
        "max_chips": 32,
        "ttft_slo": "2s",
        "tpot_slo": tpot_slo,
        "disagg": mode,
        "top": 10,
        "threads": 1,
    }))
    .unwrap();
    plan_infer(&req, Catalog::builtin()).unwrap()
}

/// A disaggregated plan's numbers are what `infer --prefill … --decode …`
/// reports for the same pools (one formula, [`disagg::compose`]).
#[test]
fn disaggregated_plans_are_what_infer_reports() {
    let r = search("on", "40ms");
    let d = r
        .points
        .iter()
        .find(|p| p.disagg.is_some())
        .expect("a disaggregated plan meets a 40 ms TPOT");
    let plan = d.disagg.as_ref().unwrap();
    let pool = |p: &disagg::PoolLayout| {
        let mut s = format!("tp={},ep={},pp={},workers={}", p.tp, p.ep, p.pp, p.workers);
        if let Some(b) = p.batch {
            s += &format!(",batch={b}");
        }
        s
    };
    let sc = SCENARIO.replace(
        "gen_len = 1024 }",
        &format!(
            "gen_len = 1024, engine = \"{}\", prefill = \"{}\", decode = \"{}\" }}",
            d.engine,
            pool(&plan.prefill),
            pool(&plan.decode)
        ),
    );
    let s = resolve(&Scenario::parse(&sc, "t.toml").unwrap(), Catalog::builtin()).unwrap();
    let x = disagg::evaluate(
        &s.model,
        &s.chip,
        &s.query,
        &s.disagg.unwrap(),
        &mut NoTrace,
    )
    .unwrap();
    close(
        d.tokens_per_s_per_chip,
        x.point.output_tokens_per_s_per_chip,
        1e-9,
        "tok/s/chip",
    );
    close(d.tpot_s, x.point.tpot_s, 1e-9, "TPOT");
    close(d.ttft_s, x.point.ttft_s.mean, 1e-9, "TTFT");
    assert_eq!(d.chips, x.point.chips);
    close(d.tokens_per_s_per_user, 1.0 / d.tpot_s, 1e-12, "tok/s/user");
}

/// An aggregated plan compared with disaggregated ones prefills on its own
/// chips: with s_1 and t_d from plain `infer` of the replica,
/// R = 1/(s_1 + (T_out − 1)·t_d/B) per replica, TPOT = t_d/(1 − R·s_1).
#[test]
fn aggregated_plans_pay_their_prefill() {
    let r = search("on", "200ms");
    let a = r
        .points
        .iter()
        .chain(&r.pareto)
        .find(|p| p.disagg.is_none())
        .expect("an aggregated plan");
    let sc = SCENARIO.replace(
        "gen_len = 1024 }",
        &format!(
            "gen_len = 1024, engine = \"{}\", batch = {} }}\nparallelism = {{ tp = {}, pp = {} }}",
            a.engine, a.batch, a.tp, a.pp
        ),
    );
    let sc = sc.replace(
        "chip = \"h200\" }",
        &format!("chip = \"h200\", chips = {} }}", a.tp * a.pp),
    );
    let s = resolve(&Scenario::parse(&sc, "t.toml").unwrap(), Catalog::builtin()).unwrap();
    let one = inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).unwrap();
    let (s_1, t_d) = (one.ttft_s.get(), one.decode_step_time_s.get());
    let rate = 1.0 / (s_1 + 1023.0 * t_d / a.batch as f64);
    close(a.tpot_s, t_d / (1.0 - rate * s_1), 1e-9, "TPOT");
    close(
        a.tokens_per_s_per_chip,
        rate * 1024.0 / (a.tp * a.pp) as f64,
        1e-9,
        "tok/s/chip",
    );
}

/// Each plan is listed once (replica counts and dtypes fold into it), the
/// modes keep to their kind, and an unknown mode names the option.
#[test]
fn plans_are_distinct_and_modes_keep_to_their_kind() {
    let r = search("on", "40ms");
    let keys: HashSet<String> = r
        .points
        .iter()
        .map(|p| {
            format!(
                "{} {} {} {} {} {}",
                p.serving(),
                p.tp,
                p.ep,
                p.pp,
                p.engine,
                p.batch
            )
        })
        .collect();
    assert_eq!(keys.len(), r.points.len());
    assert!(r
        .points
        .iter()
        .all(|p| p.tpot_s <= 0.040 && p.ttft_s <= 2.0));
    let only = search("only", "40ms");
    assert!(only.pareto.iter().all(|p| p.disagg.is_some()));
    let off = search("off", "40ms");
    assert!(off
        .pareto
        .iter()
        .chain(&off.points)
        .all(|p| p.disagg.is_none()));
    let req: PlanInferRequest = serde_json::from_value(serde_json::json!({
        "scenario": Scenario::parse(SCENARIO, "t.toml").unwrap(),
        "max_chips": 8,
        "disagg": "sometimes",
    }))
    .unwrap();
    let e = plan_infer(&req, Catalog::builtin())
        .unwrap_err()
        .to_string();
    assert!(e.contains("disagg") && e.contains("sometimes"), "{e}");
}
