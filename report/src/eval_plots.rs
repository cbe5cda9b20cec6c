//! The evaluation's pictures: per NUMA size, grouped bars of each strategy's RemoteComm
//! relative to random's. The numbers come from `eval` ([`eval::tables::remote_vs_random`]);
//! this module only draws them.

use crate::error::{ReportError, Result};
use crate::figures::{numa_colour, render, Figure};
use eval::tables::{numa_sizes, remote_vs_random, RemoteVsRandom};
use eval::EvalRow;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Grouped bars: per input, each strategy's RemoteComm relative to random's (log scale).
struct RemoteBars<'a>(&'a RemoteVsRandom);

impl Figure for RemoteBars<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("{e:?}");
        let data = self.0;
        root.fill(&WHITE).map_err(e)?;
        // Legend in its own column so it never hides bars.
        let (w, _) = root.dim_in_pixel();
        let (root, legend) = root.split_horizontally(w as i32 - 150);
        let vals: Vec<f64> = data.values.iter().flatten().filter_map(|v| *v).collect();
        let lo = vals.iter().copied().fold(1.0f64, f64::min).max(1e-4) * 0.8;
        let hi = vals.iter().copied().fold(1.0f64, f64::max) * 1.25;
        let k = data.strategies.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "RemoteComm ÷ random's, {} NUMA nodes (lower is better)",
                    data.numa
                ),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(110)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..data.inputs.len() as f64, (lo..hi).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_label_formatter(&|v| {
                if *v >= 0.095 {
                    format!("{v:.2}")
                } else {
                    format!("{v:.0e}")
                }
            })
            .y_desc("RemoteComm ÷ random's")
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(e)?;
        // Input names, rotated to read top-down under each group of bars.
        for (ii, name) in data.inputs.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(ii as f64 + 0.5, lo));
            root.draw(&Text::new(
                name.to_string(),
                (px - 6, py + 8),
                ("sans-serif", 12)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            ))
            .map_err(e)?;
        }
        for (si, s) in data.strategies.iter().enumerate() {
            let colour = numa_colour(si);
            let bars: Vec<Rectangle<(f64, f64)>> = data
                .values
                .iter()
                .enumerate()
                .filter_map(|(ii, row)| {
                    let v = row[si]?;
                    let x0 = ii as f64 + 0.1 + 0.8 * si as f64 / k;
                    Some(Rectangle::new(
                        [(x0, lo), (x0 + 0.8 / k * 0.9, v)],
                        colour.filled(),
                    ))
                })
                .collect();
            chart.draw_series(bars).map_err(e)?;
            let y = 50 + 20 * si as i32;
            legend
                .draw(&Rectangle::new([(8, y - 6), (20, y + 6)], colour.filled()))
                .map_err(e)?;
            legend
                .draw(&Text::new(
                    s.clone(),
                    (26, y - 7),
                    ("sans-serif", 13).into_font(),
                ))
                .map_err(e)?;
        }
        Ok(())
    }
}

/// Write `remote-<N>numa.{png,svg}` for every NUMA size of `rows` into `dir`.
pub fn eval_plots(rows: &[EvalRow], dir: &Path) -> Result<Vec<PathBuf>> {
    crate::fonts::ensure()?;
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let mut out = Vec::new();
    for numa in numa_sizes(rows) {
        let stem = format!("remote-{numa}numa");
        render(
            dir,
            &stem,
            (1250, 540),
            &RemoteBars(&remote_vs_random(rows, numa)),
        )?;
        out.push(dir.join(format!("{stem}.png")));
        out.push(dir.join(format!("{stem}.svg")));
    }
    Ok(out)
}
