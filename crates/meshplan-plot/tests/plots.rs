//! Each plot is well-formed SVG (parsed as XML) and carries its series and
//! labels. With `MESHPLAN_WRITE_IMG=1` the plots of the README are rewritten
//! under `docs/img/`.

use meshplan_core::catalog::Catalog;
use meshplan_core::inference::{self, scenario::resolve as resolve_infer};
use meshplan_core::planner::{plan_train, PlanTrainRequest, TrainObjective};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::scenario::{resolve, resolve_workload};
use meshplan_plot::{
    memory_svg, pareto_front, pareto_svg, roofline_svg, serving_svg, serving_sweep, step_time_svg,
    timeline_svg, ParetoAxis, MIN_TEXT_PX, SIZE,
};

fn scenario(path: &str) -> Scenario {
    let file = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&file).unwrap();
    Scenario::parse(&src, path).unwrap()
}

/// Parse as XML; every text at least [`MIN_TEXT_PX`] (the page shows a
/// plot at its own width: [`the_page_shows_plots_at_their_own_width`]);
/// return every text node's content joined.
fn check_svg(svg: &str, name: &str) -> String {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{name}: not XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg", "{name}");
    for t in doc.descendants().filter(|n| n.has_tag_name("text")) {
        let px: f64 = t.attribute("font-size").unwrap().parse().unwrap();
        let what = t.text().unwrap_or("");
        assert!(px >= MIN_TEXT_PX, "{name}: '{what}' in {px} px");
    }
    if std::env::var_os("MESHPLAN_WRITE_IMG").is_some() {
        let dir = format!("{}/../../docs/img", env!("CARGO_MANIFEST_DIR"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(format!("{dir}/{name}.svg"), svg).unwrap();
    }
    doc.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n")
}

fn train_report() -> meshplan_core::training::TrainReport {
    let sc = scenario("examples/train/llama-3-8b-h100-3d.toml");
    resolve(&sc, Catalog::builtin())
        .unwrap()
        .analyze(&mut NoTrace)
}

#[test]
fn memory_plot_stacks_terms_against_hbm() {
    let r = train_report();
    let text = check_svg(&memory_svg(&r).unwrap(), "memory");
    for label in [
        "params",
        "grads",
        "optimizer",
        "activations",
        "usable HBM",
        "GB per device",
    ] {
        assert!(text.contains(label), "missing {label} in\n{text}");
    }
    assert!(text.contains(&r.model));
}

#[test]
fn step_time_plot_has_compute_each_collective_and_exposed() {
    let r = train_report();
    let text = check_svg(&step_time_svg(&r).unwrap(), "step-time");
    assert!(text.contains("T_math"));
    assert!(text.contains("no overlap (upper)"));
    assert!(text.contains("overlap (lower bound)"));
    for c in r.comms.iter().filter(|c| c.seconds.get() > 0.0) {
        assert!(text.contains(&c.what), "missing collective {}", c.what);
    }
}

/// The timeline of the 3-D example (TP 8, PP 2 1F1B, ZeRO-1 DP 4 on 64
/// H100s) with 8 micro-batches: a track per stream of both stages, the
/// bubble and the legend; the README's docs/img/timeline.svg.
#[test]
fn timeline_plot_draws_every_stage_and_the_bubble() {
    let path = "examples/train/llama-3-8b-h100-3d.toml";
    let file = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&file)
        .unwrap()
        .replace("microbatches = 128", "microbatches = 8");
    let s = resolve(&Scenario::parse(&src, path).unwrap(), Catalog::builtin()).unwrap();
    let r = s.analyze(&mut NoTrace);
    let t = meshplan_core::timeline::of_setup(&s, &r).unwrap();
    let text = check_svg(&timeline_svg(&t).unwrap(), "timeline");
    for label in [
        "stage 0",
        "stage 1",
        "compute",
        "TP comm",
        "pipeline bubble (idle)",
        "forward",
        "backward",
        "time in the step (s)",
        "* critical path",
    ] {
        assert!(text.contains(label), "missing {label} in\n{text}");
    }
    // the same plot through the kinds the front ends ask for
    let via_kind = meshplan_plot::kinds::train(&s, &r, Some("timeline")).unwrap();
    assert!(via_kind.contains("pipeline bubble (idle)"));
}

fn infer_setup() -> inference::scenario::InferSetup {
    let sc = scenario("examples/infer/ch7-pq1-llama2-13b.toml");
    resolve_infer(&sc, Catalog::builtin()).unwrap()
}

#[test]
fn roofline_plot_marks_every_component() {
    let s = infer_setup();
    let r = inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).unwrap();
    let text = check_svg(&roofline_svg(&r).unwrap(), "roofline");
    assert!(text.contains("roofline min(N·C, I·N·W_hbm)"));
    assert!(text.contains("arithmetic intensity (FLOPs/byte)"));
    for c in &r.decode_components {
        if c.intensity > 0.0 {
            assert!(text.contains(&format!("decode {}", c.name)), "{}", c.name);
        }
    }
}

#[test]
fn serving_sweep_is_the_core_evaluation() {
    let s = infer_setup();
    let pts = serving_sweep(&s).unwrap();
    assert!(pts.len() >= 2);
    assert_eq!(pts[0].batch, 1);
    for p in &pts {
        let mut q = s.query.clone();
        q.batch = p.batch;
        let r = inference::evaluate(&s.model, &s.chip, &q, &mut NoTrace).unwrap();
        assert_eq!(p.tpot_s, r.decode_step_time_s.get());
        assert_eq!(p.tokens_per_s, r.tokens_per_s);
    }
    let text = check_svg(&serving_svg(&s, Some(2.0), Some(0.05)).unwrap(), "serving");
    for label in [
        "TPOT (decode step)",
        "TTFT (prefill)",
        "TPOT SLO",
        "TTFT SLO",
        "throughput",
    ] {
        assert!(text.contains(label), "missing {label}");
    }
}

/// An SLO line no axis can hold (infinite, near f64::MAX) used to hang
/// the serving plot in plotters' tick loop; it is refused at once, and the
/// largest accepted SLO (one day) still draws, promptly.
#[test]
fn serving_plot_refuses_unbounded_slos_promptly() {
    let s = infer_setup();
    let t0 = std::time::Instant::now();
    for bad in [f64::INFINITY, f64::MAX, f64::NAN, 0.0, -1.0] {
        let e = serving_svg(&s, None, Some(bad)).unwrap_err().to_string();
        assert!(e.contains("cannot read tpot_slo"), "{bad}: {e}");
        let e = serving_svg(&s, Some(bad), None).unwrap_err().to_string();
        assert!(e.contains("cannot read ttft_slo"), "{bad}: {e}");
    }
    let max = inference::slo::MAX_SLO_S;
    check_svg(&serving_svg(&s, Some(max), Some(max)).unwrap(), "serving");
    assert!(t0.elapsed().as_secs() < 30, "{:?}", t0.elapsed());
}

#[test]
fn pareto_front_keeps_the_non_dominated() {
    let pts = [(1.0, 5.0), (2.0, 3.0), (3.0, 4.0), (4.0, 1.0), (2.0, 6.0)];
    assert_eq!(pareto_front(&pts), vec![0, 1, 3]);
}

#[test]
fn pareto_plot_of_a_plan_search() {
    // the 64-H100 workload of the train example; the planner ignores its plan
    let sc = scenario("examples/train/llama-3-8b-h100-3d.toml");
    let req = PlanTrainRequest {
        workload: resolve_workload(&sc, Catalog::builtin(), None).unwrap(),
        objective: TrainObjective::parse("time").unwrap(),
        top: 60,
        threads: Some(2),
        explain_rank: None,
        cancel: None,
    };
    let r = plan_train(&req, &|_, _| {}).unwrap();
    assert!(!r.plans.is_empty());
    let text = check_svg(&pareto_svg(&r, ParetoAxis::Memory).unwrap(), "pareto");
    assert!(text.contains("Pareto front"));
    assert!(text.contains("rank 1"));
    assert!(text.contains("memory per device (GB)"));
}

/// The number attribute `a` of node `n`.
fn num(n: roxmltree::Node, a: &str) -> f64 {
    n.attribute(a).map_or(0.0, |v| v.parse().unwrap())
}

/// The key sits below the chart, never over its data: the text of each
/// `label` starts below the chart's [`SIZE`] height, and every bar (a
/// `<rect>` starting in the chart) ends above it.
fn key_below_the_data(svg: &str, labels: &[&str]) {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let chart_h = SIZE.1 as f64;
    for l in labels {
        let t = doc
            .descendants()
            .find(|n| n.has_tag_name("text") && n.text().is_some_and(|s| s.contains(l)))
            .unwrap_or_else(|| panic!("no text '{l}'"));
        assert!(
            num(t, "y") >= chart_h,
            "'{l}' at y = {} inside the chart",
            num(t, "y")
        );
    }
    for r in doc.descendants().filter(|n| n.has_tag_name("rect")) {
        let (y, h) = (num(r, "y"), num(r, "height"));
        // the white background fills the whole drawing
        let background = num(r, "x") == 0.0 && y == 0.0;
        if y < chart_h && !background {
            assert!(
                y + h <= chart_h,
                "a bar from y = {y} to {} crosses the key",
                y + h
            );
        }
    }
}

/// The issue-23 case: the step-time plot's legend covered its bars; every
/// plot's key is now a strip below the chart.
#[test]
fn keys_are_below_the_data() {
    let r = train_report();
    let comms: Vec<&str> = r
        .comms
        .iter()
        .filter(|c| c.seconds.get() > 0.0)
        .map(|c| c.what.as_str())
        .collect();
    let step = step_time_svg(&r).unwrap();
    key_below_the_data(
        &step,
        &[&["T_math", "compute + bubble"][..], &comms].concat(),
    );
    key_below_the_data(&memory_svg(&r).unwrap(), &["params:", "usable HBM"]);
    let s = infer_setup();
    let ir = inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).unwrap();
    let svg = roofline_svg(&ir).unwrap();
    key_below_the_data(&svg, &["roofline min"]);
}

/// The page (meshplan serve) shows each plot at its own width, so SVG
/// pixels are the pixels read on the page ([`MIN_TEXT_PX`]).
#[test]
fn the_page_shows_plots_at_their_own_width() {
    let css = format!(
        "{}/../meshplan-web/static/style.css",
        env!("CARGO_MANIFEST_DIR")
    );
    let css = std::fs::read_to_string(css).unwrap();
    let rule = css
        .lines()
        .find(|l| l.starts_with("#plots img {"))
        .expect("the plots' img rule");
    assert!(rule.contains(&format!("width: {}px", SIZE.0)), "{rule}");
    // the timeline is wider (one row per stream, read across)
    let t = meshplan_plot::TIMELINE_WIDTH_PX;
    assert!(css.contains(&format!(
        "#plots img[data-kind=\"timeline\"] {{ width: {t}px; }}"
    )));
}
