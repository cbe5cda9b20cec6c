//! The evaluation: every strategy (and Scotch's `gmap` as an external baseline) on the same
//! inputs and synthetic machines of several NUMA sizes, as a Markdown table and plots.
//!
//! Inputs are communication matrices with a load vector: synthetic known patterns
//! ([`patterns`]), EagerMap's published matrices ([`read_eagermap_dir`]) and profile
//! directories. Metrics of every plan — Scotch's included — come from
//! [`mapper::metrics::compute`], so all rows are measured the same way.

use crate::error::{ReportError, Result};
use crate::figures::{numa_colour, render, Figure};
use mapper::compare::num;
use mapper::metrics::{self, Metrics};
use mapper::profile::samples::{read_samples_csv, SampleLog, SAMPLES_FILE};
use mapper::strategy::MapInput;
use mapper::{CommMatrix, Topology};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One matrix + load vector to map.
#[derive(Debug, Clone)]
pub struct EvalInput {
    pub name: String,
    /// Where it came from (pattern description or file).
    pub source: String,
    pub comm: CommMatrix,
    pub load: Vec<f64>,
    /// The raw-sample log of a profile (`samples.csv`), for strategies that use it (dagtm).
    pub samples: Option<std::sync::Arc<SampleLog>>,
}

fn pattern(name: &str, source: &str, n: usize, f: impl Fn(usize, usize) -> f64) -> EvalInput {
    let mut comm = CommMatrix::zeros(n);
    for i in 0..n {
        for j in (i + 1)..n {
            let v = f(i, j);
            if v > 0.0 {
                comm.add_sym(i, j, v);
            }
        }
    }
    // Uneven but deterministic per-thread loads, so Load_std separates strategies.
    let load = (0..n).map(|t| 1.0 + ((t * 7) % 5) as f64).collect();
    EvalInput {
        name: name.to_string(),
        source: source.to_string(),
        comm,
        load,
        samples: None,
    }
}

/// Synthetic matrices with a known best grouping, `n` threads each (n ≥ 8, multiple of 8).
pub fn patterns(n: usize) -> Vec<EvalInput> {
    let side = (1..=n)
        .rev()
        .find(|w| n % w == 0 && w * w <= n)
        .unwrap_or(1);
    let (cols, rows) = (n / side, side);
    let mut v = vec![
        pattern("pairs", "thread 2k talks to 2k+1 only", n, |i, j| {
            if i / 2 == j / 2 {
                100.0
            } else {
                0.0
            }
        }),
        pattern(
            "cliques-interleaved",
            "4 cliques: t talks to every t' with t ≡ t' (mod 4), weak noise elsewhere",
            n,
            |i, j| if i % 4 == j % 4 { 100.0 } else { 1.0 },
        ),
        pattern(
            "ring",
            "1-D nearest neighbour with wrap-around",
            n,
            |i, j| {
                if j - i == 1 || (i == 0 && j == n - 1) {
                    100.0
                } else {
                    0.0
                }
            },
        ),
        pattern(
            "stencil-2d",
            &format!("{cols}×{rows} grid, 4 neighbours"),
            n,
            |i, j| {
                let (xi, yi, xj, yj) = (i % cols, i / cols, j % cols, j / cols);
                if (yi == yj && xi.abs_diff(xj) == 1) || (xi == xj && yi.abs_diff(yj) == 1) {
                    100.0
                } else {
                    0.0
                }
            },
        ),
        pattern(
            "all-to-all",
            "uniform: every placement is equally good",
            n,
            |_, _| 10.0,
        ),
        pattern(
            "master-worker",
            "thread 0 talks to everyone, workers to nobody",
            n,
            |i, _| if i == 0 { 100.0 } else { 0.0 },
        ),
    ];
    // Communication says "keep each clique together", load says "spread clique 0": the case
    // where communication-only grouping loses memory balance (the thesis's motivation).
    let mut heavy = pattern(
        "cliques-heavy-load",
        "2 interleaved cliques (t mod 2); clique 0 has 4× the memory load",
        n,
        |i, j| if i % 2 == j % 2 { 100.0 } else { 1.0 },
    );
    heavy.load = (0..n).map(|t| if t % 2 == 0 { 4.0 } else { 1.0 }).collect();
    v.push(heavy);
    v
}

/// Every `*.csv` under `dir` (recursively, sorted), read in EagerMap's order (rows in reverse
/// task order); loads are all ones (EagerMap's matrices carry none).
pub fn read_eagermap_dir(dir: &Path) -> Result<Vec<EvalInput>> {
    let mut files = Vec::new();
    collect_csv(dir, &mut files)?;
    files.sort();
    if files.is_empty() {
        return Err(ReportError::Input(format!(
            "{}: no .csv matrices found",
            dir.display()
        )));
    }
    files
        .into_iter()
        .map(|f| {
            let comm = mapper::profile::read_comm_csv(&f, true).map_err(map_err)?;
            let name = f
                .file_stem()
                .map(|s| s.to_string_lossy().replace(".nb_messages", ""))
                .unwrap_or_default();
            Ok(EvalInput {
                name,
                source: f.display().to_string(),
                load: vec![1.0; comm.n()],
                comm,
                samples: None,
            })
        })
        .collect()
}

fn collect_csv(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| ReportError::io(dir, e))? {
        let p = e.map_err(|e| ReportError::io(dir, e))?.path();
        if p.is_dir() {
            collect_csv(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "csv") {
            out.push(p);
        }
    }
    Ok(())
}

/// A profile directory as an input (its comm.csv and load.csv).
pub fn read_profile(dir: &Path) -> Result<EvalInput> {
    let p = mapper::profile::Profile::read_dir(dir).map_err(map_err)?;
    let name = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let log = dir.join(SAMPLES_FILE);
    let samples = if log.exists() {
        Some(std::sync::Arc::new(
            read_samples_csv(&log).map_err(map_err)?,
        ))
    } else {
        None
    };
    Ok(EvalInput {
        name,
        samples,
        source: format!(
            "`cmlb profile` ({} backend, {} samples) of `{}`",
            p.meta.backend,
            p.meta.samples,
            p.meta
                .command
                .iter()
                .map(|a| a.rsplit('/').next().unwrap_or(a))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        comm: p.comm,
        load: p.load,
    })
}

fn map_err(e: mapper::MapError) -> ReportError {
    ReportError::Input(e.to_string())
}

/// A synthetic machine with `numa` NUMA nodes and at least `n` PUs (2 PUs per core).
pub fn synthetic_topology(numa: usize, n: usize) -> Result<Topology> {
    let cores = n.div_ceil(numa * 2).max(1);
    let spec = format!("numa:{numa} core:{cores} pu:2");
    Topology::load(&spec).map_err(map_err)
}

/// One cell group of the result table.
#[derive(Debug, Clone)]
pub struct EvalRow {
    pub input: String,
    pub threads: usize,
    pub numa: usize,
    pub topology: String,
    pub strategy: String,
    /// `Err` when the strategy cannot run on this input; `Ok(None)` when it does not bind.
    pub metrics: std::result::Result<Option<Metrics>, String>,
}

/// Scotch as an external mapper: converts inputs to its formats and reads its mapping back.
pub mod scotch {
    use super::*;

    /// The `gmap` program: `scotch_gmap` on Debian, `gmap` elsewhere.
    pub fn find() -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        for name in ["scotch_gmap", "gmap"] {
            for dir in std::env::split_paths(&path) {
                let p = dir.join(name);
                if p.is_file() {
                    return Some(p);
                }
            }
        }
        None
    }

    /// Scotch source graph (`.grf`): header `0`, `vertices arcs`, `baseval flags` with flags
    /// `011` (no labels, edge weights, vertex weights); then per vertex its weight, degree and
    /// `(edge weight, neighbour)` pairs. Weights must be positive integers: loads and
    /// communication are scaled to at most 10^6 (kept exact when already integers in range);
    /// edges that scale to 0 are dropped, vertices weigh at least 1.
    pub fn write_grf(comm: &CommMatrix, load: &[f64]) -> String {
        let n = comm.n();
        let max_c = (0..n)
            .flat_map(|i| comm.row(i).iter().copied())
            .fold(0.0f64, f64::max);
        let c_exact = max_c <= 1e6 && (0..n).all(|i| comm.row(i).iter().all(|x| x.fract() == 0.0));
        let c_scale = if c_exact || max_c == 0.0 {
            1.0
        } else {
            1e6 / max_c
        };
        let max_l = load.iter().copied().fold(0.0f64, f64::max);
        let l_exact = max_l <= 1e6 && load.iter().all(|x| x.fract() == 0.0);
        let l_scale = if l_exact || max_l == 0.0 {
            1.0
        } else {
            1e6 / max_l
        };
        let mut adj: Vec<Vec<(u64, usize)>> = vec![Vec::new(); n];
        for (i, a) in adj.iter_mut().enumerate() {
            for j in 0..n {
                if i != j {
                    let w = (comm.get(i, j) * c_scale).round() as u64;
                    if w > 0 {
                        a.push((w, j));
                    }
                }
            }
        }
        let arcs: usize = adj.iter().map(Vec::len).sum();
        let mut s = format!("0\n{n} {arcs}\n0 011\n");
        for (i, a) in adj.iter().enumerate() {
            let vw = ((load[i] * l_scale).round() as u64).max(1);
            s.push_str(&format!("{vw} {}", a.len()));
            for (w, j) in a {
                s.push_str(&format!(" {w} {j}"));
            }
            s.push('\n');
        }
        s
    }

    /// Target architecture as a tree leaf (`tleaf`): NUMA nodes → cores → PUs, each level's
    /// link cost = the hop count cmlb's metrics use between two PUs whose common ancestor is
    /// that level. Leaf k is `topo.pus[k]`. Needs a uniform tree (same cores per NUMA node
    /// and PUs per core), which the synthetic machines are.
    pub fn write_tgt(topo: &Topology) -> Result<String> {
        let numa = topo.numa.len();
        let per_numa = topo.numa[0].pus.len();
        let per_core = topo
            .pus
            .iter()
            .filter(|p| p.core == topo.pus[0].core)
            .count();
        let uniform = topo.numa.iter().all(|n| n.pus.len() == per_numa)
            && per_numa % per_core == 0
            && topo.pus.iter().enumerate().all(|(k, p)| {
                topo.numa_position(p.numa) == Some(k / per_numa)
                    && topo.pus[(k / per_core) * per_core].core == p.core
            });
        if !uniform {
            return Err(ReportError::Input(format!(
                "topology {}: Scotch's tleaf target needs the same number of PUs per NUMA node and per core",
                topo.source
            )));
        }
        let cores = per_numa / per_core;
        let mut levels: Vec<(usize, u32)> = Vec::new();
        if numa > 1 {
            levels.push((numa, topo.hops(0, per_numa)));
        }
        if cores > 1 {
            levels.push((cores, topo.hops(0, per_core)));
        }
        if per_core > 1 {
            levels.push((per_core, topo.hops(0, 1)));
        }
        if levels.is_empty() {
            levels.push((1, 1));
        }
        let mut s = format!("tleaf {}", levels.len());
        for (size, cost) in levels {
            s.push_str(&format!(" {size} {}", cost.max(1)));
        }
        s.push('\n');
        Ok(s)
    }

    /// Parse gmap's mapping: a count line, then `vertex terminal` per line.
    pub fn parse_map(text: &str, n: usize, terminals: usize) -> Result<Vec<usize>> {
        let bad = |m: String| ReportError::Input(format!("Scotch mapping: {m}"));
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let count: usize = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| bad("missing the vertex count line".into()))?;
        if count != n {
            return Err(bad(format!("maps {count} vertices, expected {n}")));
        }
        let mut pus = vec![usize::MAX; n];
        for (k, l) in lines.enumerate() {
            let mut f = l.split_whitespace().map(str::parse::<usize>);
            match (f.next(), f.next()) {
                (Some(Ok(v)), Some(Ok(t))) if v < n && t < terminals => pus[v] = t,
                _ => {
                    return Err(bad(format!(
                        "line {}: '{l}' is not 'vertex terminal'",
                        k + 2
                    )))
                }
            }
        }
        if let Some(v) = pus.iter().position(|&p| p == usize::MAX) {
            return Err(bad(format!("vertex {v} is not mapped")));
        }
        Ok(pus)
    }

    /// Map `input` onto `topo` with gmap; returns the metrics of its mapping, with
    /// `mapping_ms` = Scotch's own reported mapping time (I/O excluded, like cmlb's).
    pub fn map(gmap: &Path, input: &EvalInput, topo: &Topology, work: &Path) -> Result<Metrics> {
        let grf = work.join("graph.grf");
        let tgt = work.join("target.tgt");
        let out = work.join("mapping.map");
        let log = work.join("gmap.log");
        std::fs::write(&grf, write_grf(&input.comm, &input.load))
            .map_err(|e| ReportError::io(&grf, e))?;
        std::fs::write(&tgt, write_tgt(topo)?).map_err(|e| ReportError::io(&tgt, e))?;
        let o = Command::new(gmap)
            .arg("-vt")
            .args([&grf, &tgt, &out, &log])
            .output()
            .map_err(|e| ReportError::io(gmap, e))?;
        if !o.status.success() {
            return Err(ReportError::Input(format!(
                "{} failed: {}",
                gmap.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        let text = std::fs::read_to_string(&out).map_err(|e| ReportError::io(&out, e))?;
        let pus = parse_map(&text, input.comm.n(), topo.pus.len())?;
        let log_text = std::fs::read_to_string(&log).map_err(|e| ReportError::io(&log, e))?;
        let secs = log_text
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                (f.next() == Some("T") && f.next() == Some("Mapping"))
                    .then(|| f.next().and_then(|v| v.parse::<f64>().ok()))
                    .flatten()
            })
            .ok_or_else(|| ReportError::Input("gmap -vt printed no mapping time".into()))?;
        let mut m = metrics::compute(&input.comm, &input.load, topo, &pus);
        m.mapping_ms = secs * 1e3;
        Ok(m)
    }
}

/// Run every strategy (and Scotch, if `gmap` is given) on every input × NUMA size.
pub fn run(
    inputs: &[EvalInput],
    numa_sizes: &[usize],
    gmap: Option<&Path>,
    seed: u64,
) -> Result<Vec<EvalRow>> {
    let work = tempfile::tempdir().map_err(|e| ReportError::io(std::env::temp_dir(), e))?;
    let mut rows = Vec::new();
    for &numa in numa_sizes {
        for input in inputs {
            let topo = synthetic_topology(numa, input.comm.n())?;
            let mi = MapInput {
                comm: &input.comm,
                load: &input.load,
                topology: &topo,
                seed,
            };
            let row = |strategy: String, metrics| EvalRow {
                input: input.name.clone(),
                threads: input.comm.n(),
                numa,
                topology: topo.source.clone(),
                strategy,
                metrics,
            };
            for (name, plan) in mapper::compare::compare(&mi, input.samples.as_ref(), None) {
                // A strategy that maps from raw samples has nothing to say about a bare matrix.
                let needs_samples = mapper::strategy::by_name(&name)
                    .map(|s| s.needs_samples())
                    .unwrap_or(false);
                if needs_samples && input.samples.is_none() {
                    continue;
                }
                let m = plan.map(|p| (!p.assignment.is_empty()).then_some(p.metrics));
                rows.push(row(name, m));
            }
            if let Some(g) = gmap {
                let m = scotch::map(g, input, &topo, work.path()).map_err(|e| e.to_string());
                rows.push(row("scotch".into(), m.map(Some)));
            }
        }
    }
    Ok(rows)
}

/// Strategies in first-seen order, keeping only those with at least one result.
fn strategies(rows: &[EvalRow]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rows {
        if matches!(r.metrics, Ok(Some(_))) && !v.contains(&r.strategy) {
            v.push(r.strategy.clone());
        }
    }
    v
}

/// Per strategy and NUMA size: geometric mean over inputs of RemoteComm ÷ random's, and of
/// Load_std ÷ random's (both +1 so perfect zeros stay finite), count of inputs where it has the
/// lowest RemoteComm, how many inputs it ran on, and median mapping time.
pub fn summary(rows: &[EvalRow]) -> Vec<(usize, String, f64, f64, usize, usize, f64)> {
    let mut out = Vec::new();
    let mut numas: Vec<usize> = rows.iter().map(|r| r.numa).collect();
    numas.dedup();
    numas.sort_unstable();
    numas.dedup();
    let metric = |input: &str, numa: usize, s: &str| -> Option<Metrics> {
        rows.iter()
            .find(|r| r.input == input && r.numa == numa && r.strategy == s)
            .and_then(|r| r.metrics.clone().ok().flatten())
    };
    let mut inputs: Vec<String> = Vec::new();
    for r in rows {
        if !inputs.contains(&r.input) {
            inputs.push(r.input.clone());
        }
    }
    for &numa in &numas {
        for s in strategies(rows) {
            let (mut lr, mut ll, mut k, mut wins, mut times) = (0.0, 0.0, 0, 0, Vec::new());
            for i in &inputs {
                let (Some(m), Some(base)) = (metric(i, numa, &s), metric(i, numa, "random")) else {
                    continue;
                };
                lr += ((m.remote_comm + 1.0) / (base.remote_comm + 1.0)).ln();
                ll += ((m.load_std + 1.0) / (base.load_std + 1.0)).ln();
                k += 1;
                times.push(m.mapping_ms);
                let best = strategies(rows)
                    .iter()
                    .filter_map(|o| metric(i, numa, o))
                    .map(|o| o.remote_comm)
                    .fold(f64::INFINITY, f64::min);
                if m.remote_comm <= best * (1.0 + 1e-12) {
                    wins += 1;
                }
            }
            if k == 0 {
                continue;
            }
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            out.push((
                numa,
                s,
                (lr / k as f64).exp(),
                (ll / k as f64).exp(),
                wins,
                k,
                median,
            ));
        }
    }
    out
}

/// The short table the README shows.
pub fn summary_markdown(rows: &[EvalRow]) -> String {
    let mut s = String::from(
        "| NUMA nodes | strategy | RemoteComm vs random | Load_std vs random | lowest RemoteComm on | median mapping ms |\n\
|---:|---|---:|---:|---:|---:|\n",
    );
    // "of k": strategies that need a sample log (dagtm) run on the profiled inputs only.
    for (numa, strat, rc, ls, wins, inputs, ms) in summary(rows) {
        s.push_str(&format!(
            "| {numa} | {strat} | {rc:.3} | {ls:.3} | {wins}/{inputs} | {ms:.3} |\n"
        ));
    }
    s
}

/// The whole document: how it was made, the summary, then one full table per NUMA size.
/// `plots`: the plot directory as the document should link it (relative to its own directory).
pub fn markdown(rows: &[EvalRow], inputs: &[EvalInput], notes: &str, plots: &str) -> String {
    let mut s = String::from("# Evaluation: cmlb strategies and Scotch on the same inputs\n\n");
    s.push_str(notes);
    s.push_str("\n## Inputs\n\n| input | threads | source |\n|---|---:|---|\n");
    for i in inputs {
        s.push_str(&format!("| {} | {} | {} |\n", i.name, i.comm.n(), i.source));
    }
    s.push_str(
        "\n## Summary\n\nGeometric means over the inputs of each metric divided by the seeded \
`random` strategy's (+1 on both sides so zeros stay finite): below 1 is better than random. \
\"lowest RemoteComm on\" counts the inputs where the strategy ties for the best RemoteComm.\n\n",
    );
    s.push_str(&summary_markdown(rows));
    let mut numas: Vec<usize> = rows.iter().map(|r| r.numa).collect();
    numas.sort_unstable();
    numas.dedup();
    for numa in numas {
        let topo = rows
            .iter()
            .find(|r| r.numa == numa)
            .map(|r| r.topology.clone())
            .unwrap_or_default();
        s.push_str(&format!(
            "\n## {numa} NUMA nodes\n\nSynthetic machine `{topo}` (or larger, to fit the thread count). \
![RemoteComm, {numa} NUMA nodes]({plots}/remote-{numa}numa.svg)\n\n\
| input | strategy | RemoteComm | Load_std | quality | hop-bytes | mapping ms |\n\
|---|---|---:|---:|---:|---:|---:|\n"
        ));
        for r in rows.iter().filter(|r| r.numa == numa) {
            match &r.metrics {
                Ok(Some(m)) => s.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} | {:.3} |\n",
                    r.input,
                    r.strategy,
                    num(m.remote_comm),
                    num(m.load_std),
                    num(m.quality),
                    num(m.hop_bytes),
                    m.mapping_ms
                )),
                Ok(None) => {}
                Err(e) => s.push_str(&format!(
                    "| {} | {} | error: {} | | | | |\n",
                    r.input,
                    r.strategy,
                    e.replace('|', "/")
                )),
            }
        }
    }
    s
}

/// Grouped bars: per input, each strategy's RemoteComm relative to random's (log scale).
struct RemoteBars<'a> {
    rows: &'a [EvalRow],
    numa: usize,
}

impl Figure for RemoteBars<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("{e:?}");
        root.fill(&WHITE).map_err(e)?;
        // Legend in its own column so it never hides bars.
        let (w, _) = root.dim_in_pixel();
        let (root, legend) = root.split_horizontally(w as i32 - 150);
        let rows: Vec<&EvalRow> = self.rows.iter().filter(|r| r.numa == self.numa).collect();
        let strategies = strategies(self.rows);
        let mut inputs: Vec<&str> = Vec::new();
        for r in &rows {
            if !inputs.contains(&r.input.as_str()) {
                inputs.push(&r.input);
            }
        }
        let rel = |input: &str, s: &str| -> Option<f64> {
            let get = |name: &str| {
                rows.iter()
                    .find(|r| r.input == input && r.strategy == name)
                    .and_then(|r| r.metrics.clone().ok().flatten())
            };
            Some((get(s)?.remote_comm + 1.0) / (get("random")?.remote_comm + 1.0))
        };
        let vals: Vec<f64> = inputs
            .iter()
            .flat_map(|i| strategies.iter().filter_map(move |s| rel(i, s)))
            .collect();
        let lo = vals.iter().copied().fold(1.0f64, f64::min).max(1e-4) * 0.8;
        let hi = vals.iter().copied().fold(1.0f64, f64::max) * 1.25;
        let k = strategies.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "RemoteComm ÷ random's, {} NUMA nodes (lower is better)",
                    self.numa
                ),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(110)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..inputs.len() as f64, (lo..hi).log_scale())
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
        for (ii, name) in inputs.iter().enumerate() {
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
        for (si, s) in strategies.iter().enumerate() {
            let colour = numa_colour(si);
            let bars: Vec<Rectangle<(f64, f64)>> = inputs
                .iter()
                .enumerate()
                .filter_map(|(ii, i)| {
                    let v = rel(i, s)?;
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

/// Write `remote-<N>numa.{png,svg}` for every NUMA size into `dir`.
pub fn plots(rows: &[EvalRow], dir: &Path) -> Result<Vec<PathBuf>> {
    crate::fonts::ensure()?;
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let mut numas: Vec<usize> = rows.iter().map(|r| r.numa).collect();
    numas.sort_unstable();
    numas.dedup();
    let mut out = Vec::new();
    for numa in numas {
        let stem = format!("remote-{numa}numa");
        render(dir, &stem, (1250, 540), &RemoteBars { rows, numa })?;
        out.push(dir.join(format!("{stem}.png")));
        out.push(dir.join(format!("{stem}.svg")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grf_lists_each_edge_both_ways_with_integer_weights() {
        let mut c = CommMatrix::zeros(3);
        c.add_sym(0, 1, 5.0);
        c.add_sym(1, 2, 2.0);
        let g = scotch::write_grf(&c, &[1.0, 2.0, 3.0]);
        assert_eq!(g, "0\n3 4\n0 011\n1 1 5 1\n2 2 5 0 2 2\n3 1 2 1\n");
        // Fractional values are scaled so the largest becomes 10^6.
        let mut c = CommMatrix::zeros(2);
        c.add_sym(0, 1, 0.5);
        let g = scotch::write_grf(&c, &[0.25, 0.5]);
        assert_eq!(
            g,
            "0\n2 2\n0 011\n500000 1 1000000 1\n1000000 1 1000000 0\n"
        );
    }

    #[test]
    fn tgt_levels_follow_the_topology_with_hop_costs() {
        let t = synthetic_topology(4, 16).unwrap();
        let tgt = scotch::write_tgt(&t).unwrap();
        // 4 NUMA nodes × 2 cores × 2 PUs; costs = cmlb's hop counts for each common ancestor.
        let want = format!(
            "tleaf 3 4 {} 2 {} 2 {}\n",
            t.hops(0, 4),
            t.hops(0, 2),
            t.hops(0, 1)
        );
        assert_eq!(tgt, want);
        assert!(t.hops(0, 4) > t.hops(0, 2) && t.hops(0, 2) > t.hops(0, 1));
    }

    #[test]
    fn map_parser_checks_every_vertex() {
        assert_eq!(
            scotch::parse_map("3\n0 5\n2 1\n1 0\n", 3, 8).unwrap(),
            vec![5, 0, 1]
        );
        let e = scotch::parse_map("3\n0 5\n2 1\n", 3, 8).unwrap_err();
        assert!(e.to_string().contains("vertex 1 is not mapped"), "{e}");
        let e = scotch::parse_map("2\n0 9\n1 0\n", 2, 8).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = scotch::parse_map("", 2, 8).unwrap_err();
        assert!(e.to_string().contains("count"), "{e}");
    }

    #[test]
    fn patterns_are_symmetric_and_sized() {
        for p in patterns(32) {
            assert_eq!(p.comm.n(), 32, "{}", p.name);
            assert_eq!(p.load.len(), 32);
            let total: f64 = (0..32).map(|i| p.comm.row(i).iter().sum::<f64>()).sum();
            assert!(total > 0.0, "{} is empty", p.name);
        }
    }
}
