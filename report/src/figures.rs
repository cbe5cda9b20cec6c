//! The figures, each drawn once per backend (PNG via the bitmap backend, SVG via the SVG backend)
//! from the same code.

use crate::error::{ReportError, Result};
use crate::layout::PlanView;
use mapper::{CommMatrix, Topology};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use profile::Profile;
use std::path::Path;

const FONT: &str = "sans-serif";

/// Something drawable on any plotters backend.
pub trait Figure {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Draw `fig` into `dir/stem.png` and `dir/stem.svg`.
pub fn render<F: Figure>(dir: &Path, stem: &str, size: (u32, u32), fig: &F) -> Result<()> {
    let fail = |msg: String| ReportError::Draw {
        figure: stem.to_string(),
        msg,
    };
    let png = dir.join(format!("{stem}.png"));
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        fig.draw(&root).map_err(fail)?;
        root.present().map_err(|e| fail(err(e)))?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        fig.draw(&root).map_err(fail)?;
        root.present().map_err(|e| fail(err(e)))?;
    }
    let path = dir.join(format!("{stem}.svg"));
    std::fs::write(&path, svg).map_err(|e| ReportError::io(&path, e))
}

/// Colour of the i-th NUMA node (position in `Topology::numa`): distinct hues, cycling after 10.
pub fn numa_colour(k: usize) -> RGBColor {
    const P: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = P[k % P.len()];
    RGBColor(r, g, b)
}

/// Sequential scale for the heat map: white (no communication) through yellow and orange to
/// dark red, so empty cells stay white and blocks stand out.
fn heat_colour(x: f64) -> RGBColor {
    const STOPS: [(f64, (f64, f64, f64)); 5] = [
        (0.0, (255.0, 255.0, 255.0)),
        (0.25, (254.0, 224.0, 139.0)),
        (0.5, (253.0, 141.0, 60.0)),
        (0.75, (215.0, 48.0, 31.0)),
        (1.0, (103.0, 0.0, 13.0)),
    ];
    let x = x.clamp(0.0, 1.0);
    for w in STOPS.windows(2) {
        let ((a, ca), (b, cb)) = (w[0], w[1]);
        if x <= b {
            let f = if b > a { (x - a) / (b - a) } else { 0.0 };
            let mix = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
            return RGBColor(mix(ca.0, cb.0), mix(ca.1, cb.1), mix(ca.2, cb.2));
        }
    }
    RGBColor(103, 0, 13)
}

/// Compact number for axis ticks and labels: 0, 12, 3.5k, 1.2M, 4.0e9.
pub fn short_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{v:.1e}")
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.1e}")
    }
}

/// Every `step`-th index gets a tick label so labels never overlap.
fn label_step(n: usize, pixels: f64, min_gap: f64) -> usize {
    let per = pixels / n.max(1) as f64;
    let mut step = 1;
    while (step as f64) * per < min_gap {
        step = match step {
            1 => 2,
            2 => 5,
            s if s % 10 == 0 || s == 5 => s * 2,
            s => s * 5 / 2,
        };
    }
    step
}

/// Heat maps keep one size: cells shrink as threads grow, labels thin out (see `label_step`).
pub const HEATMAP_SIZE: (u32, u32) = (860, 760);

/// Most cells drawn along one side of a heat map.
const MAX_CELLS: usize = 128;

/// The communication matrix as coloured cells in the given thread order.
pub struct Heatmap<'a> {
    pub comm: &'a CommMatrix,
    /// `order[k]` = thread shown at row/column k.
    pub order: &'a [usize],
    /// With a plan: NUMA colour strips along the axes and block boundaries.
    pub view: Option<&'a PlanView>,
    pub title: &'a str,
}

impl Figure for Heatmap<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let (w, h) = root.dim_in_pixel();
        let n = self.order.len();
        let title = TextStyle::from((FONT, 18).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(self.title.to_string(), (w as i32 / 2, 8), title))
            .map_err(err)?;
        // Matrix square: left margin for row labels, strip, right part for the colour bar.
        let strip = if self.view.is_some() { 10 } else { 0 };
        let (x0, y0) = (58 + strip, 58 + strip);
        let side = ((w as i32 - x0 - 150).min(h as i32 - y0 - 40)).max(50);
        let cell = side as f64 / n as f64;
        // Above MAX_CELLS threads a side, cells are blocks of `bin` threads (mean value), so
        // the SVG stays small and the PNG legible.
        let bin = n.div_ceil(MAX_CELLS);
        let m = n.div_ceil(bin);
        let mut sum = vec![0.0f64; m * m];
        for (r, &i) in self.order.iter().enumerate() {
            let row = self.comm.row(i);
            for (c, &j) in self.order.iter().enumerate() {
                sum[(r / bin) * m + c / bin] += row[j];
            }
        }
        let size = |b: usize| (((b + 1) * bin).min(n) - b * bin) as f64;
        let cells: Vec<f64> = (0..m * m)
            .map(|k| sum[k] / (size(k / m) * size(k % m)))
            .collect();
        let max = cells.iter().copied().fold(0.0f64, f64::max);
        let scale = |v: f64| {
            if max <= 0.0 {
                0.0
            } else {
                (1.0 + v).ln() / (1.0 + max).ln()
            }
        };
        let px = |k: usize| x0 + (k.min(n) as f64 * cell).round() as i32;
        let py = |k: usize| y0 + (k.min(n) as f64 * cell).round() as i32;
        for br in 0..m {
            for bc in 0..m {
                let v = cells[br * m + bc];
                if v <= 0.0 {
                    continue;
                }
                root.draw(&Rectangle::new(
                    [
                        (px(bc * bin), py(br * bin)),
                        (px((bc + 1) * bin), py((br + 1) * bin)),
                    ],
                    heat_colour(scale(v)).filled(),
                ))
                .map_err(err)?;
            }
        }
        if bin > 1 {
            root.draw(&Text::new(
                format!("cells = blocks of {bin}×{bin} threads (mean)"),
                (w as i32 / 2, 30),
                TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(err)?;
        }
        root.draw(&Rectangle::new(
            [(x0, y0), (px(n), py(n))],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
        // Axis labels: thread creation indexes at the cells they name.
        let small = TextStyle::from((FONT, 11).into_font());
        let step = label_step(n, side as f64, 26.0);
        for k in (0..n).step_by(step) {
            let centre = (k as f64 + 0.5) * cell;
            let label = self.order[k].to_string();
            root.draw(&Text::new(
                label.clone(),
                (x0 + centre as i32, y0 - strip - 4),
                small.pos(Pos::new(HPos::Center, VPos::Bottom)),
            ))
            .map_err(err)?;
            root.draw(&Text::new(
                label,
                (x0 - strip - 4, y0 + centre as i32),
                small.pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(err)?;
        }
        let axis = TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(
            "thread (creation index)".to_string(),
            (x0 + side / 2, py(n) + 6),
            axis,
        ))
        .map_err(err)?;
        if let Some(view) = self.view.filter(|v| v.pu.is_some()) {
            for (k, &t) in self.order.iter().enumerate() {
                let col = numa_colour(view.numa[t]).filled();
                root.draw(&Rectangle::new(
                    [(px(k), y0 - strip), (px(k + 1), y0 - 2)],
                    col,
                ))
                .map_err(err)?;
                root.draw(&Rectangle::new(
                    [(x0 - strip, py(k)), (x0 - 2, py(k + 1))],
                    col,
                ))
                .map_err(err)?;
            }
            if self
                .order
                .windows(2)
                .all(|p| view.numa[p[0]] <= view.numa[p[1]])
            {
                // Reordered by the plan: outline each NUMA group's diagonal block.
                let mut start = 0;
                for (_, size) in view.groups() {
                    let end = start + size;
                    root.draw(&Rectangle::new(
                        [(px(start), py(start)), (px(end), py(end))],
                        RGBColor(20, 40, 120).stroke_width(2),
                    ))
                    .map_err(err)?;
                    start = end;
                }
            }
        }
        // Colour bar (log scale, labelled with the real values).
        let (bx, by, bw, bh) = (px(n) + 30, y0, 22, side);
        let steps = 100;
        for s in 0..steps {
            let f = 1.0 - s as f64 / steps as f64;
            let ya = by + (bh as f64 * s as f64 / steps as f64) as i32;
            let yb = by + (bh as f64 * (s + 1) as f64 / steps as f64) as i32;
            root.draw(&Rectangle::new(
                [(bx, ya), (bx + bw, yb.max(ya + 1))],
                heat_colour(f).filled(),
            ))
            .map_err(err)?;
        }
        root.draw(&Rectangle::new(
            [(bx, by), (bx + bw, by + bh)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
        for q in 0..=4 {
            let f = q as f64 / 4.0;
            let v = ((1.0 + max).ln() * f).exp() - 1.0;
            let y = by + ((1.0 - f) * bh as f64) as i32;
            root.draw(&PathElement::new(
                vec![(bx + bw, y), (bx + bw + 4, y)],
                BLACK.stroke_width(1),
            ))
            .map_err(err)?;
            root.draw(&Text::new(
                short_num(v),
                (bx + bw + 7, y),
                small.pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
        }
        root.draw(&Text::new(
            "communication (log scale)".to_string(),
            (bx - 6, by + bh + 8),
            small.pos(Pos::new(HPos::Left, VPos::Top)),
        ))
        .map_err(err)?;
        Ok(())
    }
}

/// Samples per timeslice over the run, the smoothed curve, and the detected phases.
pub struct Timeline<'a> {
    pub profile: &'a Profile,
}

/// At most `max` points: bucket maxima (keeps the peaks visible) of `(x, y)`.
fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max {
        return points.to_vec();
    }
    let per = points.len().div_ceil(max);
    points
        .chunks(per)
        .map(|c| {
            let y = c.iter().map(|p| p.1).fold(f64::MIN, f64::max);
            (c[0].0, y)
        })
        .collect()
}

/// Phase spans: the profile's phase list, or (older profiles) runs of equal phase index.
pub fn phase_spans(profile: &Profile) -> Vec<(f64, f64, f64)> {
    if !profile.meta.phases.is_empty() {
        return profile
            .meta
            .phases
            .iter()
            .map(|p| (p.start_ms, p.end_ms, p.weight))
            .collect();
    }
    let mut spans: Vec<(i64, f64, f64, f64, usize)> = Vec::new();
    for r in &profile.timeline {
        if r.phase < 0 {
            continue;
        }
        match spans.last_mut() {
            Some(s) if s.0 == r.phase => {
                s.2 = r.t_ms;
                s.3 += r.smoothed;
                s.4 += 1;
            }
            _ => spans.push((r.phase, r.t_ms, r.t_ms, r.smoothed, 1)),
        }
    }
    spans
        .into_iter()
        .map(|(_, a, b, sum, k)| (a, b, sum / k as f64))
        .collect()
}

impl Figure for Timeline<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let tl = &self.profile.timeline;
        let raw: Vec<(f64, f64)> = tl.iter().map(|r| (r.t_ms, r.samples)).collect();
        let smooth: Vec<(f64, f64)> = tl.iter().map(|r| (r.t_ms, r.smoothed)).collect();
        let t_end = tl.last().map_or(1.0, |r| r.t_ms).max(1.0);
        let t_start = tl.first().map_or(0.0, |r| r.t_ms).min(t_end - 1.0);
        let y_max = raw
            .iter()
            .chain(smooth.iter())
            .map(|p| p.1)
            .fold(1.0f64, f64::max)
            * 1.18;
        let mut chart = ChartBuilder::on(root)
            .caption(
                "Memory-access samples per timeslice, with detected phases",
                (FONT, 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(t_start..t_end, 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            // Only the labelled grid lines: the fine ones hide the phase shading.
            .light_line_style(TRANSPARENT)
            .x_desc("time (ms)")
            .y_desc("samples per timeslice")
            .x_label_formatter(&|v| short_num(*v))
            .y_label_formatter(&|v| short_num(*v))
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        let spans = phase_spans(self.profile);
        for (i, &(a, b, w)) in spans.iter().enumerate() {
            let colour = numa_colour(i);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(a, 0.0), (b, y_max)],
                    colour.mix(0.15).filled(),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("P{i} w={}", short_num(w)),
                    (a, y_max * 0.99),
                    TextStyle::from((FONT, 12).into_font()).color(&colour),
                )))
                .map_err(err)?;
            // The phase weight (mean samples per slice) as a horizontal line over the phase.
            chart
                .draw_series(LineSeries::new(
                    vec![(a, w), (b, w)],
                    colour.stroke_width(2),
                ))
                .map_err(err)?;
        }
        chart
            .draw_series(LineSeries::new(
                downsample(&raw, 2000),
                RGBColor(170, 170, 170).stroke_width(1),
            ))
            .map_err(err)?
            .label("samples")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RGBColor(170, 170, 170)));
        chart
            .draw_series(LineSeries::new(
                downsample(&smooth, 2000),
                RGBColor(20, 40, 120).stroke_width(2),
            ))
            .map_err(err)?
            .label("smoothed")
            .legend(|(x, y)| {
                PathElement::new(
                    vec![(x, y), (x + 18, y)],
                    RGBColor(20, 40, 120).stroke_width(2),
                )
            });
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
            .map_err(err)?
            .label("phase weight (mean per slice)")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], numa_colour(0).stroke_width(2))
            });
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        Ok(())
    }
}

/// The load vector as bars, one per thread, coloured by the NUMA node the plan gives it.
pub struct LoadBars<'a> {
    pub load: &'a [f64],
    pub view: &'a PlanView,
    pub topology: &'a Topology,
}

impl Figure for LoadBars<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let n = self.load.len();
        let y_max = self.load.iter().copied().fold(0.0f64, f64::max).max(1e-9) * 1.1;
        // The legend gets its own column so it never hides bars, however many nodes there are.
        let (w, _) = root.dim_in_pixel();
        let (plot, legend) = root.split_horizontally(w as i32 - 230);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!(
                    "Memory load per thread, coloured by NUMA node (plan: {})",
                    self.view.strategy
                ),
                (FONT, 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)
            .map_err(err)?;
        let step = label_step(n, (w as f64 - 300.0).max(100.0), 24.0);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.div_ceil(step).clamp(2, 40))
            .x_label_formatter(&|v| {
                let r = v.round();
                if (v - r).abs() < 1e-6 && r >= 0.0 && (r as usize) < n {
                    format!("{}", r as usize)
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| short_num(*v))
            .x_desc("thread (creation index)")
            .y_desc("load (weighted samples)")
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        let bar = |t: usize| [(t as f64 - 0.4, 0.0), (t as f64 + 0.4, self.load[t])];
        let mut entries: Vec<(RGBColor, String)> = Vec::new();
        if self.view.pu.is_none() {
            let grey = RGBColor(150, 150, 150);
            chart
                .draw_series((0..n).map(|t| Rectangle::new(bar(t), grey.filled())))
                .map_err(err)?;
            entries.push((grey, "not bound by the plan".into()));
        } else {
            for (k, node) in self.topology.numa.iter().enumerate() {
                let threads: Vec<usize> = (0..n).filter(|&t| self.view.numa[t] == k).collect();
                if threads.is_empty() {
                    continue;
                }
                let total: f64 = threads.iter().map(|&t| self.load[t]).sum();
                let colour = numa_colour(k);
                chart
                    .draw_series(
                        threads
                            .iter()
                            .map(|&t| Rectangle::new(bar(t), colour.filled())),
                    )
                    .map_err(err)?;
                entries.push((
                    colour,
                    format!(
                        "NUMA {}: {} threads, load {}",
                        node.os_index,
                        threads.len(),
                        short_num(total)
                    ),
                ));
            }
        }
        let style = TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, (colour, label)) in entries.into_iter().enumerate() {
            let y = 50 + 20 * i as i32;
            legend
                .draw(&Rectangle::new([(4, y - 6), (16, y + 6)], colour.filled()))
                .map_err(err)?;
            legend
                .draw(&Text::new(label, (22, y), style.clone()))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// Geometry of the topology drawing (all in pixels).
const PU_W: i32 = 58;
const PU_H: i32 = 40;
const PAD: i32 = 5;
const CORE_HEAD: i32 = 15;
const NUMA_HEAD: i32 = 24;
const MAX_WIDTH: i32 = 1400;

/// The plan drawn on the topology: NUMA nodes → cores → PUs, each PU naming its threads.
pub struct TopologyFigure<'a> {
    topology: &'a Topology,
    view: &'a PlanView,
    load: &'a [f64],
    /// Per NUMA position: its cores, each as the PU indexes it holds.
    cores: Vec<Vec<Vec<usize>>>,
    core_cols: usize,
    core_w: i32,
    core_h: i32,
    numa_w: i32,
    numa_h: i32,
    numa_cols: usize,
}

impl<'a> TopologyFigure<'a> {
    pub fn new(topology: &'a Topology, view: &'a PlanView, load: &'a [f64]) -> Self {
        let cores: Vec<Vec<Vec<usize>>> = topology
            .numa
            .iter()
            .map(|node| {
                let mut cores: Vec<Vec<usize>> = Vec::new();
                for &p in &node.pus {
                    match cores.last_mut() {
                        Some(c) if topology.pus[c[0]].core == topology.pus[p].core => c.push(p),
                        _ => cores.push(vec![p]),
                    }
                }
                cores
            })
            .collect();
        let max_pus = cores.iter().flatten().map(Vec::len).max().unwrap_or(1) as i32;
        let max_cores = cores.iter().map(Vec::len).max().unwrap_or(1);
        let core_w = max_pus * PU_W + (max_pus + 1) * PAD;
        let core_h = CORE_HEAD + PU_H + PAD;
        let core_cols = max_cores.clamp(1, 4);
        let core_rows = max_cores.div_ceil(core_cols) as i32;
        let numa_w = (core_cols as i32 * (core_w + PAD) + PAD).max(260);
        let numa_h = NUMA_HEAD + core_rows * (core_h + PAD) + PAD;
        let numa_cols =
            ((MAX_WIDTH / (numa_w + 2 * PAD)) as usize).clamp(1, topology.numa.len().max(1));
        TopologyFigure {
            topology,
            view,
            load,
            cores,
            core_cols,
            core_w,
            core_h,
            numa_w,
            numa_h,
            numa_cols,
        }
    }

    pub fn size(&self) -> (u32, u32) {
        let rows = self.topology.numa.len().div_ceil(self.numa_cols) as i32;
        let w = self.numa_cols as i32 * (self.numa_w + 2 * PAD) + 2 * PAD;
        let h = 40 + rows * (self.numa_h + 2 * PAD) + PAD;
        (w.max(480) as u32, h as u32)
    }

    /// Threads the plan puts on PU index `p`.
    fn threads_on(&self, p: usize) -> Vec<usize> {
        match &self.view.pu {
            None => Vec::new(),
            Some(pu) => (0..pu.len()).filter(|&t| pu[t] == p).collect(),
        }
    }
}

impl Figure for TopologyFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let title = if self.view.pu.is_some() {
            format!("Plan '{}' on the topology", self.view.strategy)
        } else {
            format!(
                "Topology (plan '{}' does not bind threads)",
                self.view.strategy
            )
        };
        root.draw(&Text::new(
            title,
            (PAD * 2, 10),
            TextStyle::from((FONT, 18).into_font()),
        ))
        .map_err(err)?;
        let small = TextStyle::from((FONT, 11).into_font());
        let centred = Pos::new(HPos::Center, VPos::Center);
        for (k, node) in self.topology.numa.iter().enumerate() {
            let (col, row) = ((k % self.numa_cols) as i32, (k / self.numa_cols) as i32);
            let nx = 2 * PAD + col * (self.numa_w + 2 * PAD);
            let ny = 40 + row * (self.numa_h + 2 * PAD);
            let colour = numa_colour(k);
            root.draw(&Rectangle::new(
                [(nx, ny), (nx + self.numa_w, ny + self.numa_h)],
                colour.mix(0.08).filled(),
            ))
            .map_err(err)?;
            root.draw(&Rectangle::new(
                [(nx, ny), (nx + self.numa_w, ny + self.numa_h)],
                colour.stroke_width(2),
            ))
            .map_err(err)?;
            let threads: Vec<usize> = match &self.view.pu {
                Some(_) => (0..self.view.n)
                    .filter(|&t| self.view.numa[t] == k)
                    .collect(),
                None => Vec::new(),
            };
            let load: f64 = threads.iter().map(|&t| self.load[t]).sum();
            let head = if self.view.pu.is_some() {
                format!(
                    "NUMA {} · {} PUs · {} threads · load {}",
                    node.os_index,
                    node.pus.len(),
                    threads.len(),
                    short_num(load)
                )
            } else {
                format!("NUMA {} · {} PUs", node.os_index, node.pus.len())
            };
            // The node's GPUs and NICs, as `cmlb topology` names them.
            let mut head = head;
            for (kind, names) in self.topology.device_names_on_numa(node.os_index) {
                head.push_str(&format!(" · {} {}", kind.name(), names.join(" ")));
            }
            root.draw(&Text::new(
                head,
                (nx + PAD, ny + 5),
                TextStyle::from((FONT, 13).into_font().style(FontStyle::Bold)).color(&colour),
            ))
            .map_err(err)?;
            for (c, pus) in self.cores[k].iter().enumerate() {
                let (cc, cr) = ((c % self.core_cols) as i32, (c / self.core_cols) as i32);
                let cx = nx + PAD + cc * (self.core_w + PAD);
                let cy = ny + NUMA_HEAD + cr * (self.core_h + PAD);
                root.draw(&Rectangle::new(
                    [(cx, cy), (cx + self.core_w, cy + self.core_h)],
                    RGBColor(250, 250, 250).filled(),
                ))
                .map_err(err)?;
                root.draw(&Rectangle::new(
                    [(cx, cy), (cx + self.core_w, cy + self.core_h)],
                    RGBColor(120, 120, 120).stroke_width(1),
                ))
                .map_err(err)?;
                root.draw(&Text::new(
                    format!("core {}", self.topology.pus[pus[0]].core),
                    (cx + PAD, cy + 2),
                    small.color(&RGBColor(80, 80, 80)),
                ))
                .map_err(err)?;
                for (i, &p) in pus.iter().enumerate() {
                    let x = cx + PAD + i as i32 * (PU_W + PAD);
                    let y = cy + CORE_HEAD;
                    let on = self.threads_on(p);
                    let fill = if on.is_empty() {
                        WHITE.filled()
                    } else {
                        colour.mix(0.35).filled()
                    };
                    root.draw(&Rectangle::new([(x, y), (x + PU_W, y + PU_H)], fill))
                        .map_err(err)?;
                    root.draw(&Rectangle::new(
                        [(x, y), (x + PU_W, y + PU_H)],
                        BLACK.stroke_width(1),
                    ))
                    .map_err(err)?;
                    root.draw(&Text::new(
                        format!("PU {}", self.topology.pus[p].os_index),
                        (x + PU_W / 2, y + 9),
                        small.pos(centred),
                    ))
                    .map_err(err)?;
                    let label = match on.as_slice() {
                        [] => "idle".to_string(),
                        [t] => format!("T{t}"),
                        [t, rest @ ..] => format!("T{t}+{}", rest.len()),
                    };
                    let style = if on.is_empty() {
                        small.color(&RGBColor(150, 150, 150))
                    } else {
                        TextStyle::from((FONT, 14).into_font().style(FontStyle::Bold))
                    };
                    root.draw(&Text::new(
                        label,
                        (x + PU_W / 2, y + 27),
                        style.pos(centred),
                    ))
                    .map_err(err)?;
                }
            }
        }
        Ok(())
    }
}
