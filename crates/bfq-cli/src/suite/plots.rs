//! The report's charts, drawn with `plotters` into inline SVG (text is left to the browser, so no
//! font library is needed and the page stays one offline file).
//!
//! Two kinds: a claim chart (one row per published claim: the band of values that pass, shaded;
//! the paper's number, a grey cross; ours, a dot coloured by verdict with its value written beside
//! it; the verdict in words at the row's end) on a logarithmic axis, because the suite's ratios span
//! 0.01 to 100; and line charts (throughput over time, start-up CDFs, service against the ideal share)
//! with a legend beside the plot, never over it, and a palette of 16 colours plus dashes.

use std::ops::Range;

use plotters::coord::combinators::BindKeyPoints;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::claims::{ClaimResult, Verdict};

/// Width of every chart, pixels.
pub const WIDTH: u32 = 960;
/// Height of one claim row, pixels.
const ROW: u32 = 24;
/// Room above a claim chart's rows (caption and legend) and below (axis and its label).
const CLAIM_TOP: u32 = 58;
const CLAIM_BOTTOM: u32 = 48;
/// Room for the row labels (claim ids) and for the verdict words.
const LABEL_W: u32 = 330;
const VERDICT_W: u32 = 112;
/// Line charts: plot height and legend width.
const LINES_H: u32 = 330;
const LEGEND_W: u32 = 230;

/// 16 colours that stay apart (Tableau 10 and six darker ones).
const PALETTE: [RGBColor; 16] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x39, 0x3b, 0x79),
    RGBColor(0x63, 0x79, 0x39),
    RGBColor(0x8c, 0x6d, 0x31),
    RGBColor(0x84, 0x3c, 0x39),
    RGBColor(0x7b, 0x41, 0x73),
    RGBColor(0x31, 0x82, 0xbd),
];

const PASS_GREEN: RGBColor = RGBColor(0x1a, 0x98, 0x50);
const FAIL_RED: RGBColor = RGBColor(0xd7, 0x30, 0x27);
const UNSURE_ORANGE: RGBColor = RGBColor(0xe0, 0x8a, 0x00);
const NOT_RUN_GREY: RGBColor = RGBColor(0x99, 0x99, 0x99);
const BAND_FILL: RGBColor = RGBColor(0xcd, 0xeb, 0xc5);
const BAND_EDGE: RGBColor = RGBColor(0x4d, 0xa0, 0x4d);
const STRIPE: RGBColor = RGBColor(0xf4, 0xf4, 0xf4);
const PAPER_GREY: RGBColor = RGBColor(0x44, 0x44, 0x44);

/// The word and colour of a verdict.
pub fn verdict_word(v: &Verdict) -> (&'static str, RGBColor) {
    match v {
        Verdict::Pass => ("PASS", PASS_GREEN),
        Verdict::Fail => ("FAIL", FAIL_RED),
        Verdict::Inconclusive => ("UNSURE", UNSURE_ORANGE),
        Verdict::NotRun { .. } => ("NOT RUN", NOT_RUN_GREY),
    }
}

/// The word and colour of a claim's row: its verdict's, or grey `NOT COUNTED`.
pub fn claim_word(c: &ClaimResult) -> (&'static str, RGBColor) {
    if c.counted {
        verdict_word(&c.verdict)
    } else {
        (c.word(), NOT_RUN_GREY)
    }
}

/// Rows (in units of [`ROW`]) a claim takes: one, or for an ordering one per scheduler it orders
/// (each scheduler's value on a line of its own, so their labels never overlap).
fn row_units(c: &ClaimResult, ordering: bool) -> f64 {
    if ordering {
        (c.order_values.len() as f64 * 0.8).max(1.0)
    } else {
        1.0
    }
}

/// Height of the claim chart of `claims`.
pub fn claim_chart_height(claims: &[&ClaimResult], ordering: bool) -> u32 {
    let units: f64 = claims.iter().map(|c| row_units(c, ordering)).sum::<f64>().max(1.0);
    CLAIM_TOP + CLAIM_BOTTOM + (f64::from(ROW) * units).round() as u32
}

/// A tick label on a logarithmic axis: only 1, 2 and 5 of each decade are written, the others are
/// grid lines only, so labels never collide.
fn log_tick(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let decade = 10f64.powf(v.log10().floor());
    let mantissa = v / decade;
    if [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 0.02) {
        short(v)
    } else {
        String::new()
    }
}

/// A number as people write it on an axis: 0.01, 0.5, 3, 20, 1000.
fn short(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (-(v.abs().log10().floor()) as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A value written beside its dot.
fn value_label(v: f64, lower_bound: bool) -> String {
    let ge = if lower_bound { ">=" } else { "" };
    if v.is_infinite() {
        return format!("{ge}inf");
    }
    // Three significant digits from 1 up (1.16, 26.2, 117), two below (0.92, 0.013).
    let text = if v.abs() >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        let digits = (1.0 - v.abs().log10().floor()) as usize;
        format!("{v:.digits$}")
    };
    format!("{ge}{text}")
}

/// The log axis range that holds every finite positive value given, with a margin, its ends on the
/// 1-2-5 sequence (0.5..10, not 0.1..10, for values from 0.8 to 4.4).
fn log_range(values: impl Iterator<Item = f64>) -> Range<f64> {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if hi == 0.0 {
        return 0.5..2.5;
    }
    let steps = |decade: f64| [decade, 2.0 * decade, 5.0 * decade];
    let below = |v: f64| {
        let d = 10f64.powf(v.log10().floor());
        steps(d).into_iter().filter(|s| *s <= v * 1.0001).fold(d, f64::max)
    };
    let above = |v: f64| {
        let d = 10f64.powf(v.log10().floor());
        steps(d).into_iter().chain([10.0 * d]).find(|s| *s >= v * 0.9999).unwrap_or(10.0 * d)
    };
    let (lo, hi) = (below(lo / 1.25), above(hi * 1.25));
    lo..hi.max(lo * 5.0)
}

/// A drawn chart with what its axes say (the page writes them beside it for tests and readers).
#[derive(Clone, Debug)]
pub struct Chart {
    /// The SVG element.
    pub svg: String,
    /// Its height in pixels.
    pub height: u32,
    /// The horizontal axis' description.
    pub x_desc: String,
    /// The vertical axis' description.
    pub y_desc: String,
}

/// Grid lines of a log axis: 1..9 times each power of ten inside `range` (plotters' own log ticks skip
/// the part of the axis below its first power of ten).
fn log_key_points(range: &Range<f64>) -> Vec<f64> {
    let first = range.start.log10().floor() as i32;
    let last = range.end.log10().ceil() as i32;
    (first..=last)
        // Divided for negative powers, so that 6 x 10^-1 is 0.6, not 0.6000000000000001.
        .flat_map(|e| {
            (1..10).map(
                move |m| if e < 0 { f64::from(m) / 10f64.powi(-e) } else { f64::from(m) * 10f64.powi(e) },
            )
        })
        .filter(|v| *v >= range.start * 0.9999 && *v <= range.end * 1.0001)
        .collect()
}

type Drawn = Result<Chart, String>;

/// The claim charts' vertical axis.
const CLAIM_Y_DESC: &str = "claim (* headline)";

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing a chart: {e:?}")
}

/// One claim chart: `title` above, a row per claim. Ratio claims and ordering claims go in charts
/// of their own (`ordering` true), because an ordering's values are in the metric's unit.
pub fn claim_chart(title: &str, claims: &[&ClaimResult], ordering: bool) -> Drawn {
    let height = claim_chart_height(claims, ordering);
    let units: Vec<f64> = claims.iter().map(|c| row_units(c, ordering)).collect();
    let total: f64 = units.iter().sum::<f64>().max(1.0);
    let x_desc = if ordering {
        "measured value, log scale (the row's metric in brackets; the claim lists them highest first)"
    } else {
        "ratio, log scale (green: the values that pass the claim)"
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let body = root.titled(title, ("sans-serif", 20)).map_err(err)?;
        legend(&body, ordering)?;
        let values = claims.iter().flat_map(|c| {
            let band = c.band.iter().flat_map(|b| [b.lo, b.hi]).flatten();
            let order = c.order_values.iter().map(|o| o.value);
            band.chain(c.ours).chain(c.paper).chain(order).collect::<Vec<_>>()
        });
        let x_range = log_range(values);
        let (x_lo, x_hi) = (x_range.start, x_range.end);
        let mut chart = ChartBuilder::on(&body)
            .margin_top(CLAIM_TOP - 30)
            .margin_right(VERDICT_W)
            .margin_left(6)
            .x_label_area_size(CLAIM_BOTTOM - 8)
            .y_label_area_size(LABEL_W)
            .build_cartesian_2d(
                x_range.clone().log_scale().with_key_points(log_key_points(&x_range)),
                0.0..total,
            )
            .map_err(err)?;
        let clamp = |v: f64| v.clamp(x_lo, x_hi);
        let mut top = total;
        let mut rows = Vec::new();
        // Backgrounds first, so that the grid is drawn over them.
        for (r, c) in claims.iter().enumerate() {
            let bottom = top - units[r];
            if r % 2 == 1 {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x_lo, bottom), (x_hi, top)],
                        STRIPE.filled(),
                    )))
                    .map_err(err)?;
            }
            if let Some(band) = &c.band {
                let (lo, hi) = (clamp(band.lo.unwrap_or(x_lo)), clamp(band.hi.unwrap_or(x_hi)));
                let inset = 0.12;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(lo, bottom + inset), (hi, top - inset)],
                        BAND_FILL.filled(),
                    )))
                    .map_err(err)?;
                for edge in [band.lo, band.hi].into_iter().flatten().filter(|e| e.is_finite()) {
                    chart
                        .draw_series(LineSeries::new(
                            [(clamp(edge), bottom + inset), (clamp(edge), top - inset)],
                            BAND_EDGE.stroke_width(2),
                        ))
                        .map_err(err)?;
                }
            }
            rows.push((top, bottom));
            top = bottom;
        }
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(CLAIM_Y_DESC)
            .x_labels(100)
            .x_label_formatter(&|v| log_tick(*v))
            .y_labels(0)
            .disable_y_mesh()
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(TRANSPARENT)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(err)?;
        for (c, (top, bottom)) in claims.iter().zip(rows) {
            let mid = (top + bottom) / 2.0;
            let (word, colour) = claim_word(c);
            if let Some(p) = c.paper.filter(|p| p.is_finite() && *p > 0.0) {
                chart
                    .draw_series(std::iter::once(Cross::new((clamp(p), mid), 6, PAPER_GREY.stroke_width(2))))
                    .map_err(err)?;
            }
            let label_style = TextStyle::from(("sans-serif", 14).into_font())
                .color(&colour)
                .pos(Pos::new(HPos::Left, VPos::Center));
            let mut mark = |v: f64, y: f64, lb: bool, name: Option<&str>| -> Result<(), String> {
                let at = (clamp(v.max(x_lo)), y);
                chart.draw_series(std::iter::once(Circle::new(at, 6, colour.filled()))).map_err(err)?;
                let (px, py) = chart.backend_coord(&at);
                let text = match name {
                    Some(n) => format!("{} {n}", value_label(v, lb)),
                    None => value_label(v, lb),
                };
                // Right of the dot, unless that runs past the plot (into the verdict): then left.
                let (plot_right, _) = chart.backend_coord(&(x_hi, y));
                let width = 8 * text.chars().count() as i32;
                if px + 9 + width > plot_right {
                    let style = label_style.pos(Pos::new(HPos::Right, VPos::Center));
                    root.draw(&Text::new(text, (px - 9, py), style)).map_err(err)
                } else {
                    root.draw(&Text::new(text, (px + 9, py), label_style.clone())).map_err(err)
                }
            };
            if ordering {
                let n = c.order_values.len().max(1) as f64;
                let step = (top - bottom) / n;
                for (i, o) in c.order_values.iter().enumerate() {
                    mark(o.value, top - step * (i as f64 + 0.5), o.lower_bound, Some(&o.scheduler))?;
                }
            } else if let Some(v) = c.ours.filter(|v| !v.is_nan()) {
                mark(v, mid, false, None)?;
            }
            let (left, y) = chart.backend_coord(&(x_lo, mid));
            let (right, _) = chart.backend_coord(&(x_hi, mid));
            let name = match (&c.order_metric, ordering) {
                (Some(m), true) => format!("{}{} [{m}]", if c.headline { "* " } else { "" }, c.id),
                _ => format!("{}{}", if c.headline { "* " } else { "" }, c.id),
            };
            let row_style =
                TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(name, (left - 6, y), row_style)).map_err(err)?;
            let verdict_style = TextStyle::from(("sans-serif", 15).into_font().style(FontStyle::Bold))
                .color(&colour)
                .pos(Pos::new(HPos::Left, VPos::Center));
            root.draw(&Text::new(word, (right + 8, y), verdict_style)).map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(Chart { svg, height, x_desc: x_desc.into(), y_desc: CLAIM_Y_DESC.into() })
}

/// The claim chart's key, under its caption.
fn legend(area: &DrawingArea<SVGBackend, plotters::coord::Shift>, ordering: bool) -> Result<(), String> {
    let y = 4;
    let mut x = LABEL_W as i32 + 10;
    let text = |s: &str, x: i32| Text::new(s.to_string(), (x, y), ("sans-serif", 14).into_font());
    if !ordering {
        area.draw(&Rectangle::new([(x, y - 1), (x + 22, y + 11)], BAND_FILL.filled())).map_err(err)?;
        area.draw(&text("passes", x + 27)).map_err(err)?;
        x += 80;
    }
    for (word, colour) in [
        ("ours: pass", PASS_GREEN),
        ("fail", FAIL_RED),
        ("unsure", UNSURE_ORANGE),
        ("not counted", NOT_RUN_GREY),
    ] {
        area.draw(&Circle::new((x + 6, y + 6), 6, colour.filled())).map_err(err)?;
        area.draw(&text(word, x + 16)).map_err(err)?;
        x += 32 + 8 * word.len() as i32;
    }
    if !ordering {
        area.draw(&Cross::new((x + 6, y + 6), 6, PAPER_GREY.stroke_width(2))).map_err(err)?;
        area.draw(&text("paper's number", x + 16)).map_err(err)?;
    }
    Ok(())
}

/// One line of a line chart.
#[derive(Clone, Debug)]
pub struct Line {
    /// Its name in the legend.
    pub name: String,
    /// Its points.
    pub points: Vec<(f64, f64)>,
    /// Dashed (an idle-device or ideal reference beside a measured line of the same colour).
    pub dashed: bool,
    /// Index into the palette; lines of one scheduler share it.
    pub colour: usize,
}

/// An axis: its description (with unit) and whether it is logarithmic.
#[derive(Clone, Copy, Debug)]
pub struct Axis<'a> {
    /// What it shows, with the unit.
    pub desc: &'a str,
    /// Logarithmic.
    pub log: bool,
}

/// A line chart with its legend on the right.
pub fn line_chart(title: &str, lines: &[Line], x: Axis, y: Axis) -> Drawn {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, LINES_H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(title, ("sans-serif", 20)).map_err(err)?;
        let (plot, key) = root.split_horizontally(WIDTH - LEGEND_W);
        let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
        let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let linear = |vals: Vec<f64>| {
            let hi = vals.iter().copied().filter(|v| v.is_finite()).fold(0.0f64, f64::max);
            let lo = vals.iter().copied().filter(|v| v.is_finite()).fold(0.0f64, f64::min);
            lo..if hi > lo { hi * 1.05 } else { lo + 1.0 }
        };
        let y_range = linear(ys.collect());
        match (x.log, y.log) {
            (true, _) => {
                let range = log_range(xs);
                let points = log_key_points(&range);
                draw_lines(&plot, range.log_scale().with_key_points(points), y_range, lines, x, y)?
            }
            (false, _) => draw_lines(&plot, linear(xs.collect()), y_range, lines, x, y)?,
        }
        for (i, l) in lines.iter().enumerate() {
            let ly = 24 + 17 * i as i32;
            let style = PALETTE[l.colour % PALETTE.len()].stroke_width(2);
            if l.dashed {
                key.draw(&PathElement::new(vec![(4, ly), (10, ly)], style)).map_err(err)?;
                key.draw(&PathElement::new(vec![(16, ly), (22, ly)], style)).map_err(err)?;
            } else {
                key.draw(&PathElement::new(vec![(4, ly), (22, ly)], style)).map_err(err)?;
            }
            key.draw(&Text::new(l.name.clone(), (28, ly - 7), ("sans-serif", 14).into_font()))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(Chart { svg, height: LINES_H, x_desc: x.desc.into(), y_desc: y.desc.into() })
}

fn draw_lines<X>(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    x_range: X,
    y_range: Range<f64>,
    lines: &[Line],
    x: Axis,
    y: Axis,
) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range, y_range)
        .map_err(err)?;
    let tick = |v: &f64| if x.log { log_tick(*v) } else { short(*v) };
    chart
        .configure_mesh()
        .x_desc(x.desc)
        .y_desc(y.desc)
        .x_labels(if x.log { 100 } else { 10 })
        .x_label_formatter(&tick)
        .y_label_formatter(&|v| short(*v))
        .light_line_style(if x.log { TRANSPARENT } else { BLACK.mix(0.05) })
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    for l in lines {
        let style = PALETTE[l.colour % PALETTE.len()].stroke_width(2);
        let pts = l.points.iter().copied().filter(|(a, b)| a.is_finite() && b.is_finite());
        if l.dashed {
            chart.draw_series(DashedLineSeries::new(pts, 6, 4, style)).map_err(err)?;
        } else {
            chart.draw_series(LineSeries::new(pts, style)).map_err(err)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_with_two_or_three_significant_digits() {
        assert_eq!(value_label(1.163, false), "1.16");
        assert_eq!(value_label(26.24, false), "26.2");
        assert_eq!(value_label(117.4, true), ">=117");
        assert_eq!(value_label(0.923, false), "0.92");
        assert_eq!(value_label(0.01334, false), "0.013");
        assert_eq!(value_label(f64::INFINITY, false), "inf");
    }

    #[test]
    fn log_grid_lines_cover_the_axis_from_its_start() {
        assert_eq!(log_key_points(&(0.5..2.5)), vec![0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 2.0]);
    }

    #[test]
    fn log_ticks_label_only_one_two_and_five_of_each_decade() {
        assert_eq!(log_tick(1.0), "1");
        assert_eq!(log_tick(0.2), "0.2");
        assert_eq!(log_tick(50.0), "50");
        assert_eq!(log_tick(3.0), "");
        assert_eq!(log_tick(0.07), "");
    }

    #[test]
    fn the_log_range_holds_every_value_between_one_two_five_steps() {
        assert_eq!(log_range([0.9, 63.0].into_iter()), 0.5..100.0);
        assert_eq!(log_range([0.83, 4.43].into_iter()), 0.5..10.0);
        assert_eq!(log_range([1.0].into_iter()), 0.5..2.5);
        assert_eq!(log_range(std::iter::empty()), 0.5..2.5);
    }
}
