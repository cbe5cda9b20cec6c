//! `cmlb bench`'s picture: every run's wall time as a dot, one column per placement, the
//! median as a bar across it. Dots, not boxes: with 5 to 20 runs a reader should see each one
//! (an outlier, two clusters) rather than a summary of them.

use crate::error::{ReportError, Result};
use crate::figures::{numa_colour, render, Figure};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// One timed run.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRun {
    pub placement: String,
    /// 1-based round: the dots of one round sit at the same offset in every column.
    pub round: u32,
    pub wall_s: f64,
}

struct Dots<'a> {
    runs: &'a [BenchRun],
    placements: &'a [String],
    title: &'a str,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl Figure for Dots<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("{e:?}");
        root.fill(&WHITE).map_err(e)?;
        let walls: Vec<f64> = self.runs.iter().map(|r| r.wall_s).collect();
        let lo = walls.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = walls.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        // Room above and below the dots; from 0 when the spread is a large part of the time,
        // so that a 2 % difference is not drawn as a 2x one without the reader seeing it.
        let pad = ((hi - lo) * 0.15).max(hi * 0.01);
        let (y0, y1) = if lo.is_finite() {
            ((lo - pad).max(0.0), hi + pad)
        } else {
            (0.0, 1.0)
        };
        let k = self.placements.len().max(1);
        let rounds = self.runs.iter().map(|r| r.round).max().unwrap_or(1).max(1);
        let mut chart = ChartBuilder::on(root)
            .caption(self.title, ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..k as f64, y0..y1)
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("wall time per run (s)")
            .y_label_formatter(&|v| format!("{v:.3}"))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(e)?;
        for (i, name) in self.placements.iter().enumerate() {
            let colour = numa_colour(i);
            let mine: Vec<&BenchRun> = self.runs.iter().filter(|r| &r.placement == name).collect();
            // Rounds spread across the middle 60 % of the column.
            let x = |round: u32| i as f64 + 0.2 + 0.6 * (round as f64 - 0.5) / rounds as f64;
            chart
                .draw_series(
                    mine.iter()
                        .map(|r| Circle::new((x(r.round), r.wall_s), 4, colour.filled())),
                )
                .map_err(e)?;
            if let Some(m) = median(mine.iter().map(|r| r.wall_s).collect()) {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(i as f64 + 0.12, m), (i as f64 + 0.88, m)],
                        BLACK.stroke_width(2),
                    )))
                    .map_err(e)?;
            }
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, y0));
            let label = format!("{name} ({})", mine.len());
            root.draw(&Text::new(
                label.clone(),
                (px - 4 * label.len() as i32, py + 10),
                ("sans-serif", 14).into_font(),
            ))
            .map_err(e)?;
        }
        Ok(())
    }
}

/// Write `bench.png` and `bench.svg` into `dir`: `runs` in the columns `placements` names, in
/// that order (a placement without runs keeps its empty column).
pub fn bench_plot(
    runs: &[BenchRun],
    placements: &[String],
    title: &str,
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    crate::fonts::ensure()?;
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let width = (220 * placements.len() as u32 + 160).max(640);
    render(
        dir,
        "bench",
        (width, 480),
        &Dots {
            runs,
            placements,
            title,
        },
    )?;
    Ok(vec![dir.join("bench.png"), dir.join("bench.svg")])
}

/// A bench's page: `out/index.html` with `summary` (the table and verdict `cmlb bench`
/// printed) and the dots figure, written atomically like [`crate::write_report`].
pub fn write_bench_report(
    runs: &[BenchRun],
    placements: &[String],
    title: &str,
    summary: &str,
    inputs: &[&Path],
    out: &Path,
) -> Result<Vec<PathBuf>> {
    mapper::check_output_dir(out, "index.html", inputs)?;
    let tmp = crate::staging_dir(out)?;
    bench_plot(runs, placements, title, tmp.path())?;
    let esc = crate::html::escape;
    let page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>cmlb bench: {t}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}pre{{background:#f6f6f6;padding:1em}}\
         </style></head><body>\n<h1>cmlb bench: {t}</h1>\n<pre>{s}</pre>\n\
         <p><img src=\"bench.svg\" alt=\"wall time per run, per placement\"></p>\n\
         <p>Each dot is one run, the bar the median; runs of one round sit at the same offset \
         in every column. The ratios and intervals above are the Hodges-Lehmann estimate and \
         the exact Mann-Whitney interval (docs/benchmarks.md).</p>\n</body></html>\n",
        t = esc(title),
        s = esc(summary)
    );
    let index = tmp.path().join("index.html");
    std::fs::write(&index, page).map_err(|e| ReportError::io(&index, e))?;
    mapper::replace_dir(tmp.keep(), out)?;
    Ok(vec![
        out.join("index.html"),
        out.join("bench.png"),
        out.join("bench.svg"),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_column_per_placement_one_dot_per_run() {
        let d = tempfile::tempdir().unwrap();
        let names: Vec<String> = ["unpinned", "compact", "cmlb"].map(String::from).into();
        let runs: Vec<BenchRun> = (1..=5)
            .flat_map(|r| {
                names.iter().enumerate().map(move |(i, n)| BenchRun {
                    placement: n.clone(),
                    round: r,
                    wall_s: 1.0 + 0.1 * i as f64 + 0.01 * r as f64,
                })
            })
            .collect();
        let files = bench_plot(&runs, &names, "ring 4", d.path()).unwrap();
        assert_eq!(files.len(), 2);
        let svg = std::fs::read_to_string(d.path().join("bench.svg")).unwrap();
        // 15 runs, 15 dots; every column labelled with its run count.
        assert_eq!(svg.matches("<circle").count(), 15, "{svg}");
        for n in &names {
            assert!(svg.contains(&format!("{n} (5)")), "{n}");
        }
        assert!(std::fs::metadata(d.path().join("bench.png")).unwrap().len() > 1000);
    }
}
