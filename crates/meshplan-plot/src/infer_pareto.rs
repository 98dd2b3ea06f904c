//! `plan infer --plot`: the serving trade-off the engines' own configurators
//! draw — output tokens/s per chip against output tokens/s per user
//! (`1/TPOT`) — for the Pareto front of every fitting plan, aggregated and
//! disaggregated plans marked apart, the TPOT SLO as the fewest tokens/s a
//! user may get, and the ranked plans.

use meshplan_core::planner::infer::InferPoint;
use meshplan_core::planner::PlanInferReport;
use plotters::prelude::*;

use crate::{captioned, color, err, mesh_fonts, render_keyed, PlotError, Result, Swatch};

fn xy(p: &InferPoint) -> (f64, f64) {
    (p.tokens_per_s_per_user, p.tokens_per_s_per_chip)
}

/// The plot (an error when the search found no fitting plan).
pub fn infer_pareto_svg(r: &PlanInferReport) -> Result<String> {
    if r.pareto.is_empty() {
        return Err(PlotError("no fitting plans to plot".into()));
    }
    let all: Vec<(f64, f64)> = r.pareto.iter().chain(&r.points).map(xy).collect();
    let xmax = all.iter().map(|p| p.0).fold(0.0, f64::max) * 1.08;
    let ymax = all.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1;
    let caption = format!(
        "Serving plans: {} on {} ({}), prompt {} + {} tokens",
        r.model, r.chip, r.budget, r.prompt_len, r.gen_len
    );
    render_keyed(|root| {
        let mut key = Vec::new();
        let mut ch = captioned(
            root,
            &caption,
            (50, 75),
            0.0..xmax.max(1e-9),
            0.0..ymax.max(1e-9),
        )?;
        mesh_fonts!(ch.configure_mesh())
            .x_desc("output tokens/s per user (1/TPOT)")
            .y_desc("output tokens/s per chip")
            .draw()
            .map_err(err)?;
        let line: Vec<(f64, f64)> = r.pareto.iter().map(xy).collect();
        let f = color(7);
        ch.draw_series(LineSeries::new(line, f.stroke_width(1)))
            .map_err(err)?;
        key.push((Swatch::Line(f.stroke_width(1)), "Pareto front".to_string()));
        for (i, (label, disagg)) in [("aggregated", false), ("disaggregated (P/D pools)", true)]
            .into_iter()
            .enumerate()
        {
            let c = color(i);
            let pts: Vec<(f64, f64)> = r
                .pareto
                .iter()
                .filter(|p| p.disagg.is_some() == disagg)
                .map(xy)
                .collect();
            if pts.is_empty() {
                continue;
            }
            ch.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(err)?;
            key.push((
                Swatch::Dot(c.filled(), 4),
                format!("{label} ({})", pts.len()),
            ));
        }
        if let Some(slo) = r.tpot_slo_s {
            let x = 1.0 / slo;
            if x < xmax {
                let s = color(3).stroke_width(2);
                ch.draw_series(LineSeries::new([(x, 0.0), (x, ymax)], s))
                    .map_err(err)?;
                key.push((Swatch::Line(s), format!("TPOT SLO {:.0} ms", slo * 1e3)));
            }
        }
        let ranked: Vec<(f64, f64)> = r.points.iter().map(xy).collect();
        let g = color(2);
        ch.draw_series(ranked.iter().map(|&p| Circle::new(p, 7, g.stroke_width(2))))
            .map_err(err)?;
        if let Some(best) = r.points.first() {
            key.push((
                Swatch::Dot(g.stroke_width(2), 6),
                format!(
                    "ranked plans ({}); 1: {}, {}, batch {}",
                    ranked.len(),
                    best.serving(),
                    best.engine,
                    best.batch
                ),
            ));
        }
        Ok(key)
    })
}
