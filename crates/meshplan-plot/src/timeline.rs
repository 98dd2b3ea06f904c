//! The timeline of one predicted training step ([`Timeline`]): a track per
//! stream of each pipeline stage, every event a bar from its start to its
//! end, the bubble a grey bar on the idle compute stream.

use meshplan_core::timeline::{Kind, Stream, Timeline};
use plotters::prelude::*;

use crate::{captioned, color, err, render_sized, time_unit, PlotError, Result};

/// Pixels per track, and around the tracks (caption, axis, legend).
const TRACK_PX: u32 = 22;
const FRAME_PX: u32 = 180;
/// Pixels of the legend rows under the plot.
const LEGEND_PX: u32 = 50;
/// Width of the plot (the page shows it at this width, style.css).
pub const WIDTH_PX: u32 = 1000;
const LABEL_PX: u32 = 190;

/// The colour of a kind of event.
fn kind_color(k: Kind) -> ShapeStyle {
    match k {
        Kind::Forward => color(0).filled(),
        Kind::Backward => color(2).filled(),
        Kind::Bubble => RGBColor(215, 215, 215).filled(),
        Kind::Comm => color(3).filled(),
        Kind::Hidden => color(3).mix(0.3).filled(),
        Kind::P2p => color(4).filled(),
        Kind::Optimizer => color(5).filled(),
        Kind::Host => color(7).filled(),
    }
}

/// The tracks drawn, top to bottom: (stage, stream) with events.
fn tracks(t: &Timeline) -> Vec<(u64, Stream)> {
    (0..t.stages)
        .flat_map(|st| {
            Stream::ALL
                .into_iter()
                .filter(move |s| t.events.iter().any(|e| e.stage == st && e.stream == *s))
                .map(move |s| (st, s))
        })
        .collect()
}

/// One predicted step over time: a row per stream of each stage (the
/// critical one marked), events coloured by kind, in s or ms.
pub fn timeline_svg(t: &Timeline) -> Result<String> {
    let rows = tracks(t);
    if rows.is_empty() {
        return Err(PlotError("the timeline has no events".into()));
    }
    let n = rows.len() as f64;
    let (k, unit) = time_unit(t.end_s());
    let end = t.end_s() * k;
    let caption = format!(
        "Predicted step: {} on {} × {}, {} pp {} × {} micro-batches: {:.3} {unit}",
        t.model,
        t.chips,
        t.chip,
        t.schedule,
        t.stages,
        t.microbatches,
        t.step_time_s * k
    );
    let size = (WIDTH_PX, FRAME_PX + TRACK_PX * rows.len() as u32);
    render_sized(size, |root| {
        let (plot, key) = root.split_vertically(size.1 - LEGEND_PX);
        let mut ch = captioned(&plot, &caption, (40, LABEL_PX), 0f64..end, 0f64..n)?;
        crate::mesh_fonts!(ch.configure_mesh())
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(format!("time in the step ({unit})"))
            .draw()
            .map_err(err)?;
        let row_of = |st: u64, s: Stream| rows.iter().position(|r| *r == (st, s)).unwrap_or(0);
        // stage 0 on top
        let y_of = |i: usize| n - 1.0 - i as f64;
        ch.draw_series(t.events.iter().map(|e| {
            let y = y_of(row_of(e.stage, e.stream));
            let (x0, x1) = (e.start_s * k, (e.start_s + e.dur_s) * k);
            Rectangle::new([(x0, y + 0.15), (x1, y + 0.85)], kind_color(e.kind))
        }))
        .map_err(err)?;
        for (i, (st, s)) in rows.iter().enumerate() {
            let mark = if *st == t.critical_stage { " *" } else { "" };
            let (_, py) = ch.backend_coord(&(0.0, y_of(i) + 0.5));
            plot.draw(&Text::new(
                format!("stage {st}{mark} · {}", s.name()),
                (20, py - 6),
                ("sans-serif", crate::KEY_FONT),
            ))
            .map_err(err)?;
        }
        legend_strip(&key, t)
    })
}

/// The kinds present, as coloured boxes in rows, and what `*` marks.
fn legend_strip(
    key: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    t: &Timeline,
) -> Result<()> {
    let present = Kind::ALL
        .into_iter()
        .filter(|k| t.events.iter().any(|e| e.kind == *k))
        .map(|k| (Some(k), k.name()));
    let (mut x, mut y) = (20, 6);
    for (kind, name) in present.chain([(None, "* critical path")]) {
        // ~7 px per character of the 11.3 px sans-serif
        let w = 30 + name.chars().count() as i32 * 7;
        if x + w > WIDTH_PX as i32 - 10 {
            (x, y) = (20, y + 20);
        }
        if let Some(k) = kind {
            key.draw(&Rectangle::new([(x, y), (x + 12, y + 12)], kind_color(k)))
                .map_err(err)?;
        }
        key.draw(&Text::new(
            name,
            (x + 16, y),
            ("sans-serif", crate::KEY_FONT),
        ))
        .map_err(err)?;
        x += w;
    }
    Ok(())
}
