//! The SVG plots of the curves, drawn with `plotters`.

use std::path::Path;

use plotters::prelude::*;

use super::Curve;

/// Line colours, one per series.
const SERIES_COLOURS: [RGBColor; 3] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40), BLACK];

/// Draws `curve` as one SVG at `path`: a panel per figure, side by side.
pub(super) fn plot(curve: &Curve, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let width = 560 * curve.panels.len() as u32;
    let root = SVGBackend::new(path, (width, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&curve.title, ("sans-serif", 18))?;
    let areas = root.split_evenly((1, curve.panels.len()));
    let mut series_names: Vec<&str> = Vec::new();
    for point in &curve.points {
        if !series_names.contains(&point.series.as_str()) {
            series_names.push(&point.series);
        }
    }
    let xs: Vec<f64> = curve.points.iter().map(|p| p.x).collect();
    let x_min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x_max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for (area, panel) in areas.iter().zip(&curve.panels) {
        let lines: Vec<(&str, Vec<(f64, f64)>)> = series_names
            .iter()
            .map(|&name| {
                let line = curve
                    .points
                    .iter()
                    .filter(|p| p.series == name)
                    .filter_map(|p| Some((p.x, p.value(panel.value)?)))
                    .collect();
                (name, line)
            })
            .collect();
        let y_max = lines
            .iter()
            .flat_map(|(_, line)| line.iter().map(|p| p.1))
            .fold(0.0, f64::max)
            * 1.15;
        let y_max = if y_max > 0.0 { y_max } else { 1.0 };
        let mut builder = ChartBuilder::on(area);
        builder
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
        if curve.x_log {
            let chart =
                builder.build_cartesian_2d((x_min * 0.8..x_max * 1.25).log_scale(), 0.0..y_max)?;
            draw_lines(chart, curve.x_label, panel.y_label, &lines)?;
        } else {
            let chart = builder.build_cartesian_2d(0.0..x_max * 1.05, 0.0..y_max)?;
            draw_lines(chart, curve.x_label, panel.y_label, &lines)?;
        }
    }
    root.present()?;
    Ok(())
}

/// An axis tick: whole numbers without decimals, thousands and millions shortened.
fn axis_label(value: f64) -> String {
    if value.abs() >= 1e6 {
        format!("{}M", value / 1e6)
    } else if value.abs() >= 1e3 {
        format!("{}k", value / 1e3)
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

/// Draws the mesh, one line with point markers per series, and a legend when there are several.
fn draw_lines<'chart, 'backend: 'chart, X>(
    mut chart: ChartContext<
        'chart,
        SVGBackend<'backend>,
        Cartesian2d<X, plotters::coord::types::RangedCoordf64>,
    >,
    x_label: &str,
    y_label: &str,
    lines: &[(&str, Vec<(f64, f64)>)],
) -> Result<(), Box<dyn std::error::Error>>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>
        + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .y_label_formatter(&|y| axis_label(*y))
        .x_label_formatter(&|x| axis_label(*x))
        .draw()?;
    for (i, (name, line)) in lines.iter().enumerate() {
        let colour = SERIES_COLOURS[i % SERIES_COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                line.iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        chart.draw_series(
            line.iter()
                .map(|&point| Circle::new(point, 4, colour.filled())),
        )?;
    }
    if lines.len() > 1 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
    }
    Ok(())
}
