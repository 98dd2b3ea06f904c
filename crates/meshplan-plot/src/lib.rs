/*!
# meshplan-plot

SVG plots of meshplan's reports, drawn with `plotters` through its SVG
backend only: text is written as SVG `<text>` elements, so nothing here needs
a font system library (no fontconfig, no freetype).

Every function takes a report of `meshplan-core` and returns the SVG
document as a `String`; the numbers come from the report (or, for the batch
sweep, from the core's own inference evaluation), never from formulas here.

| function | report | shows |
|---|---|---|
| [`memory_svg`] | [`TrainReport`] | memory per device stacked by term, against usable HBM |
| [`step_time_svg`] | [`TrainReport`] | T_math, bubble, each collective (overlappable or not), exposed comms |
| [`roofline_svg`] | [`InferReport`] | attainable FLOP/s vs intensity, with each decode/prefill op marked |
| [`serving_svg`] | [`InferSetup`] | TPOT, TTFT and tokens/s vs batch, with the SLOs |
| [`pareto_svg`] | [`PlanTrainReport`] | step time vs memory per device (or cost) of every plan, Pareto front |
| [`infer_pareto_svg`] | `PlanInferReport` | output tokens/s per chip vs per user of the serving plans, aggregated and disaggregated, with the TPOT SLO |
| [`timeline_svg`] | [`Timeline`] | one predicted step: each stage's streams over time, the bubble idle |
*/

mod infer_pareto;
pub mod kinds;
mod timeline;

pub use infer_pareto::infer_pareto_svg;
pub use timeline::{timeline_svg, WIDTH_PX as TIMELINE_WIDTH_PX};

use meshplan_core::inference::{self, scenario::InferSetup, InferReport};
use meshplan_core::planner::PlanTrainReport;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::TrainReport;
use plotters::coord::ranged1d::AsRangedCoord;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Width and height of every plot's chart, pixels; the key (legend) is a
/// strip below it, so it never covers the data, and the SVG is that much
/// taller. The page shows a plot at its own width (style.css).
pub const SIZE: (u32, u32) = (900, 520);

/// The smallest text of every plot, in SVG pixels: at the page's size
/// (1:1) and in the README, as legible as the page's own 12–14 px text.
pub const MIN_TEXT_PX: f64 = 11.0;

/// Font sizes as plotters takes them: it writes a font of size `s` as
/// `s / 1.24` px in SVG, so 14 is 11.3 px ([`MIN_TEXT_PX`]).
pub(crate) const TICK_FONT: u32 = 14;
/// Axis titles (12.1 px).
pub(crate) const DESC_FONT: u32 = 15;
/// Key entries (11.3 px).
pub(crate) const KEY_FONT: u32 = 14;
/// Height of one row of the key, pixels.
const KEY_ROW_PX: i32 = 22;

/// A plotting error (plotters' drawing errors, an empty report, or the core's
/// evaluation failing during a sweep), as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotError(pub String);

impl std::fmt::Display for PlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlotError {}

/// Result of a plot function.
pub type Result<T> = std::result::Result<T, PlotError>;

fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Render into a fresh SVG string of `size` pixels.
fn render_sized<F>(size: (u32, u32), draw: F) -> Result<String>
where
    F: FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<()>,
{
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// A chart on an SVG drawing with x and y axes of ranges `X` and `Y`.
type Chart<'b, X, Y> = ChartContext<
    'b,
    SVGBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// A chart captioned `caption` over the whole of `root`, with room `labels`
/// (x, y) for the axis labels: the frame every single-chart plot shares.
pub(crate) fn captioned<'b, X: AsRangedCoord, Y: AsRangedCoord>(
    root: &DrawingArea<SVGBackend<'b>, Shift>,
    caption: &str,
    labels: (u32, u32),
    x: X,
    y: Y,
) -> Result<Chart<'b, X, Y>> {
    ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(labels.0)
        .y_label_area_size(labels.1)
        .build_cartesian_2d(x, y)
        .map_err(err)
}

/// How a key entry is drawn: a filled box (a bar or stacked term), a line
/// (a series), or a marker of radius `r` (points).
#[derive(Clone, Copy)]
enum Swatch {
    Bar(ShapeStyle),
    Line(ShapeStyle),
    Dot(ShapeStyle, i32),
}

/// A plot's key: its entries in order.
type Key = Vec<(Swatch, String)>;

/// Width of one key entry: swatch, gap, ~7 px per character of the
/// 11.3 px sans-serif.
fn entry_px(label: &str) -> i32 {
    30 + 7 * label.chars().count() as i32
}

/// Where each entry goes: left to right, a new row when the next would
/// pass `width`.
fn key_positions(key: &Key, width: i32) -> Vec<(i32, i32)> {
    let (mut x, mut y) = (15, 8);
    key.iter()
        .map(|(_, label)| {
            let w = entry_px(label);
            if x > 15 && x + w > width - 10 {
                (x, y) = (15, y + KEY_ROW_PX);
            }
            let at = (x, y);
            x += w + 10;
            at
        })
        .collect()
}

/// Draw the key in its strip.
fn draw_key(strip: &DrawingArea<SVGBackend<'_>, Shift>, key: &Key) -> Result<()> {
    let width = strip.dim_in_pixel().0 as i32;
    for ((swatch, label), (x, y)) in key.iter().zip(key_positions(key, width)) {
        let mid = y + 7;
        match *swatch {
            Swatch::Bar(st) => strip.draw(&Rectangle::new([(x, y + 1), (x + 14, y + 13)], st)),
            Swatch::Line(st) => strip.draw(&PathElement::new([(x, mid), (x + 16, mid)], st)),
            Swatch::Dot(st, r) => strip.draw(&Circle::new((x + 7, mid), r, st)),
        }
        .map_err(err)?;
        strip
            .draw(&Text::new(
                label.clone(),
                (x + 22, y),
                ("sans-serif", KEY_FONT),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// Render a chart of [`SIZE`] whose `draw` returns its key, with the key
/// in a strip below the chart (as tall as its rows need): drawn once to
/// learn the key, then again over the taller canvas.
fn render_keyed<F>(draw: F) -> Result<String>
where
    F: Fn(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<Key>,
{
    let mut key = Key::new();
    render_sized(SIZE, |root| {
        key = draw(root)?;
        Ok(())
    })?;
    let rows = key_positions(&key, SIZE.0 as i32)
        .last()
        .map_or(0, |&(_, y)| (y - 8) / KEY_ROW_PX + 1);
    let strip = (rows * KEY_ROW_PX + 12) as u32;
    render_sized((SIZE.0, SIZE.1 + strip), |root| {
        let (chart, below) = root.split_vertically(SIZE.1);
        let key = draw(&chart)?;
        draw_key(&below, &key)
    })
}

/// The axis fonts every chart uses (ticks 11.3 px, titles 12.1 px).
macro_rules! mesh_fonts {
    ($mesh:expr) => {
        $mesh
            .label_style(("sans-serif", $crate::TICK_FONT))
            .axis_desc_style(("sans-serif", $crate::DESC_FONT))
    };
}
pub(crate) use mesh_fonts;

/// 1.23 GB / 45.6 MB … (decimal prefixes, like the CLI).
fn gb(x: f64) -> f64 {
    x / 1e9
}

/// Seconds in the unit that reads best for `max` (value scale, unit name).
fn time_unit(max: f64) -> (f64, &'static str) {
    if max >= 1.0 {
        (1.0, "s")
    } else if max >= 1e-3 {
        (1e3, "ms")
    } else {
        (1e6, "µs")
    }
}

/// Memory per device of a training plan, stacked by term, against the usable
/// HBM per device (a red line).
pub fn memory_svg(r: &TrainReport) -> Result<String> {
    let m = &r.memory_per_device;
    let terms = [
        ("params", m.params_bytes.get()),
        ("grads", m.grads_bytes.get()),
        ("optimizer", m.optimizer_bytes.get()),
        ("activations", m.activations_bytes.get()),
        ("logits", m.logits_bytes.get()),
        ("reserve", m.reserve_bytes.get()),
    ];
    let hbm = gb(r.hbm_bytes.get());
    let total = gb(m.total_bytes.get());
    let top = hbm.max(total) * 1.15;
    let caption = format!(
        "Memory per device: {} on {} × {} ({})",
        r.model,
        r.chips,
        r.chip,
        if r.fits { "fits" } else { "DOES NOT FIT" }
    );
    render_keyed(|root| {
        let mut key = Key::new();
        let mut ch = captioned(root, &caption, (35, 70), 0f64..3f64, 0f64..top)?;
        mesh_fonts!(ch.configure_mesh())
            .disable_x_mesh()
            .disable_x_axis()
            .y_desc("GB per device")
            .draw()
            .map_err(err)?;
        let mut base = 0.0;
        for (i, (name, bytes)) in terms.iter().enumerate() {
            let v = gb(*bytes);
            if v <= 0.0 {
                continue;
            }
            let c = color(i);
            ch.draw_series(std::iter::once(Rectangle::new(
                [(0.8, base), (2.2, base + v)],
                c.filled(),
            )))
            .map_err(err)?;
            key.push((Swatch::Bar(c.filled()), format!("{name}: {v:.2} GB")));
            base += v;
        }
        ch.draw_series(LineSeries::new(
            [(0.0, hbm), (3.0, hbm)],
            RED.stroke_width(2),
        ))
        .map_err(err)?;
        key.push((
            Swatch::Line(RED.stroke_width(2)),
            format!("usable HBM: {hbm:.2} GB"),
        ));
        ch.draw_series(std::iter::once(Text::new(
            format!("total {total:.2} GB"),
            (0.85, total + top * 0.02),
            ("sans-serif", 15),
        )))
        .map_err(err)?;
        Ok(key)
    })
}

/// Step time of a training plan as two stacked bars: without overlap (T_math,
/// bubble, then every collective; hatched-light when it can overlap with
/// compute) and the roofline lower bound max(T_math + T_bubble, T_comms)
/// split into compute + bubble and the exposed communication.
pub fn step_time_svg(r: &TrainReport) -> Result<String> {
    let t_math = r.t_math_s.get();
    let t_bubble = r.t_bubble_s.get();
    let upper = r.step_time_upper_s.get();
    let lower = r.step_time_lower_s.get();
    let (k, unit) = time_unit(upper.max(lower));
    let top = upper.max(lower) * k * 1.1;
    let caption = format!("Step time: {} on {} × {}", r.model, r.chips, r.chip);
    render_keyed(|root| {
        let mut key = Key::new();
        let mut ch = captioned(root, &caption, (45, 20), 0f64..top, 0f64..2f64)?;
        mesh_fonts!(ch.configure_mesh())
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(format!("time per step ({unit})"))
            .draw()
            .map_err(err)?;
        // bar rows: 1.5 = no overlap, 0.5 = lower bound
        let bar = |y: f64, x0: f64, x1: f64| [(x0, y - 0.3), (x1, y + 0.3)];
        let mut seg = |x0: f64, w: f64, y: f64, c: ShapeStyle, name: String| -> Result<()> {
            ch.draw_series(std::iter::once(Rectangle::new(bar(y, x0, x0 + w), c)))
                .map_err(err)?;
            key.push((Swatch::Bar(c), name));
            Ok(())
        };
        // the no-overlap row: compute, the bubble, then every collective, end to end
        let mut row = vec![(
            t_math * k,
            color(0).filled(),
            format!("T_math {:.3} {unit}", t_math * k),
        )];
        if t_bubble > 0.0 {
            row.push((
                t_bubble * k,
                color(7).filled(),
                format!("bubble {:.3} {unit}", t_bubble * k),
            ));
        }
        for (i, c) in r.comms.iter().enumerate() {
            let w = c.seconds.get() * k;
            if w <= 0.0 {
                continue;
            }
            let base = color(i + 1);
            let (style, how) = if c.overlappable {
                (base.mix(0.55).filled(), "overlappable")
            } else {
                (base.filled(), "exposed")
            };
            row.push((w, style, format!("{} ({how}) {w:.3} {unit}", c.what)));
        }
        let mut x = 0.0;
        for (w, style, name) in row {
            seg(x, w, 1.5, style, name)?;
            x += w;
        }
        let busy = (t_math + t_bubble) * k;
        seg(
            0.0,
            busy,
            0.5,
            color(0).mix(0.8).filled(),
            "compute + bubble".into(),
        )?;
        let exposed = (lower * k - busy).max(0.0);
        if exposed > 0.0 {
            seg(
                busy,
                exposed,
                0.5,
                RED.filled(),
                format!("exposed comms {exposed:.3} {unit}"),
            )?;
        }
        for (y, name, v) in [
            (1.5, "no overlap (upper)", upper),
            (0.5, "overlap (lower bound)", lower),
        ] {
            ch.draw_series(std::iter::once(Text::new(
                format!("{name}: {:.3} {unit}", v * k),
                (0.0, y + 0.38),
                ("sans-serif", 14),
            )))
            .map_err(err)?;
        }
        Ok(key)
    })
}

/// Roofline of a serving configuration: attainable FLOP/s of the slice
/// min(N·C, I·N·W_hbm) against arithmetic intensity I (FLOPs/byte), log-log,
/// with every decode and prefill component of the report marked at its
/// intensity. N·C and N·W_hbm are read back from the components' own times
/// (FLOPs/T_math, bytes/T_mem).
pub fn roofline_svg(r: &InferReport) -> Result<String> {
    let comps: Vec<(&str, &inference::roofline::Component)> = r
        .decode_components
        .iter()
        .map(|c| ("decode", c))
        .chain(r.prefill_components.iter().map(|c| ("prefill", c)))
        .filter(|(_, c)| c.t_math.get() > 0.0 && c.t_mem.get() > 0.0 && c.intensity > 0.0)
        .collect();
    let Some((_, c0)) = comps.first() else {
        return Err(PlotError("no roofline components in the report".into()));
    };
    let peak = c0.flops.get() / c0.t_math.get();
    let bw = c0.bytes.get() / c0.t_mem.get();
    let ridge = peak / bw;
    let xs = comps.iter().map(|(_, c)| c.intensity).chain([ridge]);
    let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (x0, x1) = (lo / 4.0, hi * 4.0);
    let att = |i: f64| peak.min(i * bw);
    let (y0, y1) = (att(x0) / 2.0, peak * 2.0);
    let caption = format!(
        "Roofline: {} on {} × {} (B = {}, ridge {:.0} FLOPs/byte)",
        r.model, r.chips_per_replica, r.chip, r.batch, ridge
    );
    render_keyed(|root| {
        let mut key = Key::new();
        let mut ch = captioned(
            root,
            &caption,
            (50, 90),
            (x0..x1).log_scale(),
            (y0..y1).log_scale(),
        )?;
        mesh_fonts!(ch.configure_mesh())
            .x_desc("arithmetic intensity (FLOPs/byte)")
            .y_desc("attainable FLOP/s (replica)")
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .x_label_formatter(&|v| format!("{v:.3}"))
            .draw()
            .map_err(err)?;
        let n = 200;
        let line = (0..=n).map(|i| {
            let x = x0 * (x1 / x0).powf(i as f64 / n as f64);
            (x, att(x))
        });
        ch.draw_series(LineSeries::new(line, BLACK.stroke_width(2)))
            .map_err(err)?;
        key.push((
            Swatch::Line(BLACK.stroke_width(2)),
            "roofline min(N·C, I·N·W_hbm)".into(),
        ));
        for (i, (phase, c)) in comps.iter().enumerate() {
            let col = color(i + 1);
            let p = (c.intensity, att(c.intensity));
            let shape = if *phase == "decode" {
                Circle::new(p, 7, col.filled()).into_dyn()
            } else {
                TriangleMarker::new(p, 9, col.filled()).into_dyn()
            };
            ch.draw_series(std::iter::once(shape)).map_err(err)?;
            key.push((
                Swatch::Dot(col.filled(), 5),
                format!(
                    "{phase} {}: I = {:.3}, {:?}-bound",
                    c.name, c.intensity, c.bound
                ),
            ));
        }
        Ok(key)
    })
}

/// One point of a serving batch sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    /// B.
    pub batch: u64,
    /// Decode step time (TPOT), seconds.
    pub tpot_s: f64,
    /// Time to first token, seconds.
    pub ttft_s: f64,
    /// Output tokens/s of the slice.
    pub tokens_per_s: f64,
    /// Whether weights and B sequences fit.
    pub fits: bool,
}

/// Evaluate the setup at B = 1, 2, 4, … up to the largest batch that fits
/// (at least the setup's own batch), through the core's
/// [`inference::evaluate`].
pub fn serving_sweep(setup: &InferSetup) -> Result<Vec<SweepPoint>> {
    let base =
        inference::evaluate(&setup.model, &setup.chip, &setup.query, &mut NoTrace).map_err(err)?;
    let last = base.max_batch.max(setup.query.batch).max(1);
    let mut batches: Vec<u64> = std::iter::successors(Some(1u64), |b| b.checked_mul(2))
        .take_while(|&b| b <= last)
        .collect();
    for b in [last, setup.query.batch] {
        if !batches.contains(&b) {
            batches.push(b);
        }
    }
    batches.sort_unstable();
    batches
        .into_iter()
        .map(|b| {
            let mut q = setup.query.clone();
            q.batch = b;
            let r =
                inference::evaluate(&setup.model, &setup.chip, &q, &mut NoTrace).map_err(err)?;
            Ok(SweepPoint {
                batch: b,
                tpot_s: r.decode_step_time_s.get(),
                ttft_s: r.ttft_s.get(),
                tokens_per_s: r.tokens_per_s,
                fits: r.batch_fits,
            })
        })
        .collect()
}

/// Serving latency and throughput against batch (log₂ B): TPOT and TTFT on
/// the left, tokens/s of the slice on the right, with the SLOs as dashed
/// lines when given.
pub fn serving_svg(
    setup: &InferSetup,
    ttft_slo_s: Option<f64>,
    tpot_slo_s: Option<f64>,
) -> Result<String> {
    // an SLO line sets the latency axis: an infinite or near-f64::MAX one
    // made that axis infinite and plotters' tick search looped forever, so
    // the core's one SLO check runs here too (the front ends run it first)
    let check = |name: &str, s: Option<f64>| {
        s.map(|s| inference::slo::check_slo_seconds(name, s))
            .transpose()
            .map_err(err)
    };
    let (ttft_slo_s, tpot_slo_s) = (
        check("ttft_slo", ttft_slo_s)?,
        check("tpot_slo", tpot_slo_s)?,
    );
    let pts = serving_sweep(setup)?;
    let bmax = pts.last().map_or(1, |p| p.batch) as f64;
    let lat_max = pts
        .iter()
        .flat_map(|p| [p.tpot_s, p.ttft_s])
        .chain(ttft_slo_s)
        .chain(tpot_slo_s)
        .fold(0.0, f64::max);
    let (k, unit) = time_unit(lat_max);
    let tps_max = pts.iter().map(|p| p.tokens_per_s).fold(0.0, f64::max);
    // plotters' tick search (compute_f64_key_points) never ends on an
    // infinite axis: refuse one, whatever made it
    if !(lat_max * 1.15 * k).is_finite() || !(tps_max * 1.15).is_finite() {
        return Err(err(format!(
            "serving plot: an axis up to {lat_max:e} s or {tps_max:e} tokens/s cannot be drawn"
        )));
    }
    let caption = format!(
        "Serving: {} on {} (S = {}, prompt {}, {} generated)",
        setup.model.name,
        setup.chip.name,
        setup.query.context,
        setup.query.prompt_len,
        setup.query.gen_len
    );
    render_keyed(|root| {
        let mut key = Key::new();
        let root = root
            .titled(&caption, ("sans-serif", 20))
            .map_err(err)?
            .margin(5, 5, 10, 10);
        let (left, right) = root.split_horizontally(SIZE.0 / 2);
        let xr = (1f64..bmax.max(2.0)).log_scale();
        let mut a = ChartBuilder::on(&left)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(xr.clone(), 0f64..lat_max * k * 1.15)
            .map_err(err)?;
        mesh_fonts!(a.configure_mesh())
            .x_desc("batch B (sequences)")
            .y_desc(format!("latency ({unit})"))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(err)?;
        for (i, (name, f)) in [
            (
                "TPOT (decode step)",
                (|p: &SweepPoint| p.tpot_s) as fn(&SweepPoint) -> f64,
            ),
            ("TTFT (prefill)", |p: &SweepPoint| p.ttft_s),
        ]
        .into_iter()
        .enumerate()
        {
            let c = color(i);
            let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.batch as f64, f(p) * k)).collect();
            a.draw_series(LineSeries::new(xy.clone(), c.stroke_width(2)))
                .map_err(err)?;
            key.push((Swatch::Line(c.stroke_width(2)), name.into()));
            a.draw_series(xy.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .map_err(err)?;
        }
        for (i, (name, slo)) in [("TPOT SLO", tpot_slo_s), ("TTFT SLO", ttft_slo_s)]
            .into_iter()
            .enumerate()
        {
            let Some(s) = slo else { continue };
            let c = color(i);
            let y = s * k;
            a.draw_series(DashedLineSeries::new(
                [(1.0, y), (bmax.max(2.0), y)],
                6,
                4,
                c.stroke_width(2),
            ))
            .map_err(err)?;
            key.push((
                Swatch::Line(c.into()),
                format!("{name} (dashed) {y:.3} {unit}"),
            ));
        }
        let mut b = ChartBuilder::on(&right)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(xr, 0f64..tps_max * 1.15)
            .map_err(err)?;
        mesh_fonts!(b.configure_mesh())
            .x_desc("batch B (sequences)")
            .y_desc("output tokens/s (slice)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(err)?;
        let c = color(2);
        let xy: Vec<(f64, f64)> = pts
            .iter()
            .map(|p| (p.batch as f64, p.tokens_per_s))
            .collect();
        b.draw_series(LineSeries::new(xy.clone(), c.stroke_width(2)))
            .map_err(err)?;
        key.push((Swatch::Line(c.stroke_width(2)), "throughput".into()));
        b.draw_series(pts.iter().map(|p| {
            let st = if p.fits { c.filled() } else { RED.filled() };
            Circle::new((p.batch as f64, p.tokens_per_s), 3, st)
        }))
        .map_err(err)?;
        key.push((
            Swatch::Dot(RED.filled(), 3),
            "batch that does not fit".into(),
        ));
        Ok(key)
    })
}

/// The x axis of a Pareto plot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParetoAxis {
    /// Memory per device (GB).
    Memory,
    /// USD to train on `train_tokens` (plans without a cost are left out).
    Cost,
}

/// Indices of the points not dominated in (x, y), both lower-is-better.
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..points.len()).collect();
    idx.sort_by(|&a, &b| {
        points[a]
            .0
            .total_cmp(&points[b].0)
            .then(points[a].1.total_cmp(&points[b].1))
    });
    let mut best = f64::INFINITY;
    let mut front = Vec::new();
    for i in idx {
        if points[i].1 < best {
            best = points[i].1;
            front.push(i);
        }
    }
    front
}

/// The planner's trade-off: every ranked plan's step time (predicted when the
/// plan has a prediction, else the roofline lower bound) against memory per
/// device or cost, the Pareto front joined by a line and the winner marked.
pub fn pareto_svg(r: &PlanTrainReport, axis: ParetoAxis) -> Result<String> {
    let pts: Vec<(f64, f64, usize)> = r
        .plans
        .iter()
        .filter_map(|p| {
            let t = p
                .predicted_step_time_s
                .unwrap_or(p.report.step_time_lower_s.get());
            let x = match axis {
                ParetoAxis::Memory => Some(gb(p.report.memory_per_device.total_bytes.get())),
                ParetoAxis::Cost => p.report.cost_usd,
            }?;
            Some((x, t, p.rank))
        })
        .collect();
    if pts.is_empty() {
        return Err(PlotError("no plans to plot".into()));
    }
    let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
    let front = pareto_front(&xy);
    let (xmin, xmax) = xy
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let tmax = xy.iter().map(|p| p.1).fold(0.0, f64::max);
    let tmin = xy.iter().map(|p| p.1).fold(f64::MAX, f64::min);
    let (k, unit) = time_unit(tmax);
    let pad = ((xmax - xmin) * 0.08).max(xmax.abs() * 0.02).max(1e-9);
    let tpad = ((tmax - tmin) * 0.1).max(tmax * 0.02);
    let xdesc = match axis {
        ParetoAxis::Memory => "memory per device (GB)".to_string(),
        ParetoAxis::Cost => "cost to train (USD)".to_string(),
    };
    let caption = format!(
        "Planner: {} plans for {} on {} × {} (Pareto front)",
        pts.len(),
        r.model,
        r.chips,
        r.chip
    );
    render_keyed(|root| {
        let mut key = Key::new();
        let x = (xmin - pad)..(xmax + pad);
        let y = ((tmin - tpad).max(0.0) * k)..((tmax + tpad) * k);
        let mut ch = captioned(root, &caption, (50, 75), x, y)?;
        mesh_fonts!(ch.configure_mesh())
            .x_desc(xdesc.clone())
            .y_desc(format!("step time ({unit})"))
            .draw()
            .map_err(err)?;
        let c = color(0);
        ch.draw_series(
            xy.iter()
                .map(|&(x, t)| Circle::new((x, t * k), 3, c.mix(0.5).filled())),
        )
        .map_err(err)?;
        key.push((Swatch::Dot(c.mix(0.5).filled(), 3), "plan".into()));
        let line: Vec<(f64, f64)> = front.iter().map(|&i| (xy[i].0, xy[i].1 * k)).collect();
        let f = color(1);
        ch.draw_series(LineSeries::new(line.clone(), f.stroke_width(2)))
            .map_err(err)?;
        key.push((
            Swatch::Line(f.stroke_width(2)),
            format!("Pareto front ({} plans)", front.len()),
        ));
        ch.draw_series(line.into_iter().map(|p| Circle::new(p, 5, f.filled())))
            .map_err(err)?;
        if let Some(w) = pts.iter().find(|p| p.2 == 1) {
            let best = r.plans.iter().find(|p| p.rank == 1);
            let label = best.map_or(String::new(), |b| {
                let d = &b.report.degrees;
                let v: Vec<String> = [
                    ("dp", d.dp),
                    ("fsdp", d.fsdp),
                    ("tp", d.tp),
                    ("pp", d.pp),
                    ("cp", d.cp),
                    ("ep", d.ep),
                ]
                .iter()
                .filter(|(_, x)| *x > 1)
                .map(|(n, x)| format!("{n} {x}"))
                .collect();
                format!("{}, zero {}", v.join(" × "), b.zero)
            });
            ch.draw_series(std::iter::once(Circle::new(
                (w.0, w.1 * k),
                8,
                RED.stroke_width(2),
            )))
            .map_err(err)?;
            key.push((
                Swatch::Dot(RED.stroke_width(2), 6),
                format!("rank 1: {label}"),
            ));
        }
        Ok(key)
    })
}
