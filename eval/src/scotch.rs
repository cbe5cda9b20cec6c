//! Scotch as an external mapper: converts inputs to its formats, runs `gmap` and reads its
//! mapping back (repaired to one thread per PU when gmap stacks threads, see [`map`]).

use crate::capacity::{self, Repair};
use crate::error::{EvalError, Result};
use crate::inputs::EvalInput;
use mapper::ranks::{Cluster, RankGraph};
use mapper::Metrics;
use mapper::{CommMatrix, Topology};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

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
        && per_numa.is_multiple_of(per_core)
        && topo.pus.iter().enumerate().all(|(k, p)| {
            topo.numa_position(p.numa) == Some(k / per_numa)
                && topo.pus[(k / per_core) * per_core].core == p.core
        });
    if !uniform {
        return Err(EvalError::NonUniformTarget(topo.source.clone()));
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
    let bad = EvalError::MappingFile;
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

/// What gmap returned: one PU index (into `Topology::pus`) per thread, as gmap placed them
/// (possibly several on one PU), and the mapping time gmap reports, in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct GmapMapping {
    pub pus: Vec<usize>,
    pub secs: f64,
}

/// Run gmap on `comm` (edge weights) and `load` (vertex weights) for `topo`, in `work`.
pub fn run_gmap(
    gmap: &Path,
    comm: &CommMatrix,
    load: &[f64],
    topo: &Topology,
    work: &Path,
) -> Result<GmapMapping> {
    let files = GmapFiles::new(work, "threads");
    run_gmap_files(
        gmap,
        &files,
        &write_grf(comm, load),
        &write_tgt(topo)?,
        comm.n(),
        topo.pus.len(),
    )
}

/// The four files of one gmap run in `work`: graph, target, mapping out, log.
struct GmapFiles {
    grf: PathBuf,
    tgt: PathBuf,
    out: PathBuf,
    log: PathBuf,
}

impl GmapFiles {
    /// `STEM.grf`, `STEM.tgt`, `STEM.map`, `STEM.log` in `work`.
    fn new(work: &Path, stem: &str) -> GmapFiles {
        let file = |ext: &str| work.join(format!("{stem}.{ext}"));
        GmapFiles {
            grf: file("grf"),
            tgt: file("tgt"),
            out: file("map"),
            log: file("log"),
        }
    }
}

/// Write the graph and target texts, run `gmap -vt` on them, and read the terminal of each of
/// the `vertices` (below `terminals`) and gmap's own mapping time.
fn run_gmap_files(
    gmap: &Path,
    f: &GmapFiles,
    graph: &str,
    target: &str,
    vertices: usize,
    terminals: usize,
) -> Result<GmapMapping> {
    std::fs::write(&f.grf, graph).map_err(|e| EvalError::io(&f.grf, e))?;
    std::fs::write(&f.tgt, target).map_err(|e| EvalError::io(&f.tgt, e))?;
    let o = Command::new(gmap)
        .arg("-vt")
        .args([&f.grf, &f.tgt, &f.out, &f.log])
        .output()
        .map_err(|e| EvalError::io(gmap, e))?;
    if !o.status.success() {
        return Err(EvalError::Gmap {
            program: gmap.to_path_buf(),
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        });
    }
    let text = std::fs::read_to_string(&f.out).map_err(|e| EvalError::io(&f.out, e))?;
    let pus = parse_map(&text, vertices, terminals)?;
    let log_text = std::fs::read_to_string(&f.log).map_err(|e| EvalError::io(&f.log, e))?;
    let secs = mapping_secs(&log_text)?;
    Ok(GmapMapping { pus, secs })
}

/// Scotch's plan as the evaluation compares it.
#[derive(Debug, Clone)]
pub struct ScotchPlan {
    /// PU index per thread, within the per-PU capacity ([`capacity::pu_capacity`]).
    pub pus: Vec<usize>,
    /// Metrics of `pus`; `mapping_ms` = gmap's own mapping time plus the repair's.
    pub metrics: Metrics,
    /// How gmap's mapping was changed to fit the capacity, if it had to be.
    pub repair: Option<Repair>,
    /// The `Mapping` time gmap itself reported for this plan, in seconds (part of `mapping_ms`).
    pub gmap_secs: f64,
}

/// Map `input` onto `topo` with gmap. gmap balances vertex weights, not vertex counts, so with
/// uneven loads it may stack threads on one PU; such a mapping is repaired
/// ([`capacity::repair`]) and checked before its metrics are computed, because every cmlb
/// strategy gives each thread its own PU and an overfull mapping is not a plan to compare.
/// `mapping_ms` = the `Mapping` time gmap reports (I/O excluded, like cmlb's) plus the repair's.
pub fn map(gmap: &Path, input: &EvalInput, topo: &Topology, work: &Path) -> Result<ScotchPlan> {
    let GmapMapping { mut pus, secs } = run_gmap(gmap, &input.comm, &input.load, topo, work)?;
    let t = Instant::now();
    let repair = capacity::repair(&input.comm, topo, &mut pus)?;
    let repair_ms = t.elapsed().as_secs_f64() * 1e3;
    capacity::check(&pus, topo.pus.len())?;
    let mut metrics = mapper::metrics_of(&input.comm, &input.load, topo, &pus);
    metrics.mapping_ms = secs * 1e3 + repair_ms;
    Ok(ScotchPlan {
        pus,
        metrics,
        repair,
        gmap_secs: secs,
    })
}

// ---- Ranks of a multi-node job -------------------------------------------------------------

/// Scotch source graph of a rank graph: edge weights only (flags `010`): every rank takes one
/// slot of the target, so vertex weights stay at 1 and loads are not given to Scotch. Bytes
/// are kept exact when they are integers small enough, otherwise scaled so the largest edge is
/// at most 10^6 and all arcs sum to at most 2^27 (Scotch sums them in native integers, 32-bit
/// in Debian's build); a positive edge never scales to 0.
pub fn write_rank_grf(g: &RankGraph) -> String {
    let n = g.n();
    let (mut max, mut sum, mut integer) = (0.0f64, 0.0f64, true);
    for r in 0..n {
        for (_, w, _) in g.neighbours(r) {
            max = max.max(w);
            sum += w;
            integer &= w.fract() == 0.0;
        }
    }
    const SUM_MAX: f64 = (1u64 << 27) as f64;
    let scale = if (integer && max <= 1e6 && sum <= SUM_MAX) || max == 0.0 {
        1.0
    } else {
        (1e6 / max).min(SUM_MAX / sum)
    };
    let arcs: usize = (0..n).map(|r| g.neighbours(r).count()).sum();
    let mut s = String::with_capacity(arcs * 12 + 32);
    s.push_str(&format!("0\n{n} {arcs}\n0 010\n"));
    for r in 0..n {
        s.push_str(&g.neighbours(r).count().to_string());
        for (t, w, _) in g.neighbours(r) {
            let w = ((w * scale).round() as u64).max(1);
            s.push_str(&format!(" {w} {t}"));
        }
        s.push('\n');
    }
    s
}

/// Scotch target for ranks → machines: one terminal per rank a machine takes, under the same
/// tree cmlb maps over (switches of topology.conf, then machines), as a `tleaf` whose link
/// costs grow tenfold per level up (slots 1, machines 10, leaf switches 100, …). Machines
/// with different numbers of ranks, or switches of different widths, are a `sub`-architecture
/// of the `tleaf` that has room for the widest. `terminal_machine[t]` is the machine of
/// terminal `t` as gmap numbers them.
#[derive(Debug, Clone, PartialEq)]
pub struct RankTarget {
    pub text: String,
    pub terminal_machine: Vec<usize>,
    /// Set when the tree could not be given to Scotch as it is.
    pub note: Option<String>,
}

/// See [`RankTarget`]; `counts` = ranks per machine ([`mapper::ranks::rank_counts`]).
pub fn write_rank_tgt(c: &Cluster, counts: &[usize]) -> RankTarget {
    let active: Vec<usize> = (0..c.machines.len()).filter(|&m| counts[m] > 0).collect();
    let all_paths = c.paths();
    let depth = all_paths[active[0]].len();
    let mut note = None;
    let paths: Vec<Vec<usize>> = if active.iter().all(|&m| all_paths[m].len() == depth) {
        active.iter().map(|&m| all_paths[m].clone()).collect()
    } else {
        note = Some(
            "Scotch was given the machines without the switch tree: its machines are not all \
             at the same depth, which a tleaf target cannot describe"
                .to_string(),
        );
        (0..active.len()).map(|k| vec![k]).collect()
    };
    let depth = paths[0].len();
    let fanout: Vec<usize> = (0..depth)
        .map(|i| paths.iter().map(|p| p[i] + 1).max().unwrap_or(1))
        .collect();
    let slots = active.iter().map(|&m| counts[m]).max().unwrap_or(1);
    let mut terms: Vec<(usize, usize)> = Vec::new();
    for (k, &m) in active.iter().enumerate() {
        let mut base = 0;
        for (i, &f) in fanout.iter().enumerate() {
            base = base * f + paths[k][i];
        }
        for j in 0..counts[m] {
            terms.push((base * slots + j, m));
        }
    }
    terms.sort_unstable();
    let mut levels = format!("tleaf {}", depth + 1);
    for (i, f) in fanout.iter().enumerate() {
        levels.push_str(&format!(" {f} {}", 10u64.pow((depth - i) as u32)));
    }
    levels.push_str(&format!(" {slots} 1"));
    let full = fanout.iter().product::<usize>() * slots;
    let text = if terms.len() == full {
        format!("{levels}\n")
    } else {
        let list: Vec<String> = terms.iter().map(|t| t.0.to_string()).collect();
        format!("sub {} {} {levels}\n", terms.len(), list.join(" "))
    };
    RankTarget {
        text,
        terminal_machine: terms.into_iter().map(|t| t.1).collect(),
        note,
    }
}

/// How Scotch's ranks → machines mapping was brought to the exact rank counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CountRepair {
    /// Ranks moved to another machine (= the excess over the counts: nothing else moves).
    pub moved: usize,
    /// Machines that held more ranks than Slurm gives them.
    pub overfull_machines: usize,
    /// Inter-node bytes of gmap's mapping as it was (not a plan Slurm can run).
    pub raw_inter_node: f64,
}

/// Bring `machine` (rank → machine) to exactly `counts`: only the excess ranks of overfull
/// machines move, each to a machine with room; the move that adds least inter-node bytes
/// (bytes to its machine − bytes to the new one) is made first, ties to the lowest rank and
/// machine, every later choice seeing the earlier moves. `None` when nothing had to move.
pub fn repair_counts(
    g: &RankGraph,
    machine: &mut [usize],
    counts: &[usize],
) -> Option<CountRepair> {
    let k = counts.len();
    let mut have = vec![0usize; k];
    for &m in machine.iter() {
        have[m] += 1;
    }
    let overfull = (0..k).filter(|&m| have[m] > counts[m]).count();
    if overfull == 0 {
        return None;
    }
    let raw = g.cut(machine);
    let mut moved = 0;
    let mut to = vec![0.0f64; k];
    let mut touched: Vec<usize> = Vec::new();
    loop {
        let room: Vec<usize> = (0..k).filter(|&m| have[m] < counts[m]).collect();
        let mut best: Option<(f64, usize, usize)> = None;
        for r in 0..g.n() {
            let a = machine[r];
            if have[a] <= counts[a] {
                continue;
            }
            for (s, w, _) in g.neighbours(r) {
                if to[machine[s]] == 0.0 {
                    touched.push(machine[s]);
                }
                to[machine[s]] += w;
            }
            let own = to[a];
            // The machine with room r exchanges most with (the first with room when none).
            let mut pick = (f64::NEG_INFINITY, usize::MAX);
            for &m in touched.iter().filter(|&&m| have[m] < counts[m]) {
                if to[m] > pick.0 || (to[m] == pick.0 && m < pick.1) {
                    pick = (to[m], m);
                }
            }
            if pick.1 == usize::MAX || (pick.0 <= 0.0 && room[0] < pick.1) {
                pick = (0.0, room[0]);
            }
            let loss = own - pick.0;
            if best.is_none_or(|(bl, _, _)| loss < bl) {
                best = Some((loss, r, pick.1));
            }
            for &m in &touched {
                to[m] = 0.0;
            }
            touched.clear();
        }
        let Some((_, r, m)) = best else { break };
        have[machine[r]] -= 1;
        have[m] += 1;
        machine[r] = m;
        moved += 1;
        if (0..k).all(|m| have[m] <= counts[m]) {
            break;
        }
    }
    Some(CountRepair {
        moved,
        overfull_machines: overfull,
        raw_inter_node: raw,
    })
}

/// Scotch's ranks → machines plan, as `cmlb ranks` compares it.
#[derive(Debug, Clone)]
pub struct ScotchRankPlan {
    /// Machine of each rank, with exactly the machines' rank counts.
    pub machine: Vec<usize>,
    /// The `Mapping` time gmap reports (its I/O excluded, like cmlb's), plus the repair's.
    pub mapping_ms: f64,
    /// How gmap's mapping was changed to the exact counts, if it had to be.
    pub repair: Option<CountRepair>,
    /// Set when the target is not quite cmlb's (see [`RankTarget::note`]).
    pub note: Option<String>,
}

/// Map the ranks of `g` onto the machines of `c` (with its switches) with gmap, in `work`,
/// and bring the result to the exact rank counts ([`repair_counts`]).
pub fn map_ranks(gmap: &Path, g: &RankGraph, c: &Cluster, work: &Path) -> Result<ScotchRankPlan> {
    let counts = mapper::ranks::rank_counts(c, g.n())?;
    let active: Vec<usize> = (0..counts.len()).filter(|&m| counts[m] > 0).collect();
    if active.len() == 1 {
        return Ok(ScotchRankPlan {
            machine: vec![active[0]; g.n()],
            mapping_ms: 0.0,
            repair: None,
            note: Some("one machine holds every rank: gmap not run".into()),
        });
    }
    let target = write_rank_tgt(c, &counts);
    let files = GmapFiles::new(work, "ranks");
    let mapped = run_gmap_files(
        gmap,
        &files,
        &write_rank_grf(g),
        &target.text,
        g.n(),
        target.terminal_machine.len(),
    )?;
    let (terms, secs) = (mapped.pus, mapped.secs);
    let mut machine: Vec<usize> = terms.iter().map(|&t| target.terminal_machine[t]).collect();
    let t = Instant::now();
    let repair = repair_counts(g, &mut machine, &counts);
    let repair_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(ScotchRankPlan {
        machine,
        mapping_ms: secs * 1e3 + repair_ms,
        repair,
        note: target.note,
    })
}

/// The `T Mapping` time of a `gmap -vt` log, in seconds.
fn mapping_secs(log: &str) -> Result<f64> {
    log.lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some("T") && f.next() == Some("Mapping"))
                .then(|| f.next().and_then(|v| v.parse::<f64>().ok()))
                .flatten()
        })
        .ok_or(EvalError::NoMappingTime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::synthetic_topology;

    #[test]
    fn grf_lists_each_edge_both_ways_with_integer_weights() {
        let mut c = CommMatrix::zeros(3);
        c.add_sym(0, 1, 5.0);
        c.add_sym(1, 2, 2.0);
        let g = write_grf(&c, &[1.0, 2.0, 3.0]);
        assert_eq!(g, "0\n3 4\n0 011\n1 1 5 1\n2 2 5 0 2 2\n3 1 2 1\n");
        // Fractional values are scaled so the largest becomes 10^6.
        let mut c = CommMatrix::zeros(2);
        c.add_sym(0, 1, 0.5);
        let g = write_grf(&c, &[0.25, 0.5]);
        assert_eq!(
            g,
            "0\n2 2\n0 011\n500000 1 1000000 1\n1000000 1 1000000 0\n"
        );
    }

    #[test]
    fn tgt_levels_follow_the_topology_with_hop_costs() {
        let t = synthetic_topology(4, 16).unwrap();
        let tgt = write_tgt(&t).unwrap();
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
            parse_map("3\n0 5\n2 1\n1 0\n", 3, 8).unwrap(),
            vec![5, 0, 1]
        );
        let e = parse_map("3\n0 5\n2 1\n", 3, 8).unwrap_err();
        assert!(e.to_string().contains("vertex 1 is not mapped"), "{e}");
        let e = parse_map("2\n0 9\n1 0\n", 2, 8).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = parse_map("", 2, 8).unwrap_err();
        assert!(e.to_string().contains("count"), "{e}");
    }

    fn ring(n: usize) -> RankGraph {
        let e: Vec<_> = (0..n).map(|i| (i, (i + 1) % n, 10.0, 1.0)).collect();
        RankGraph::from_edges(n, &e).unwrap()
    }

    #[test]
    fn rank_grf_keeps_integer_bytes_and_scales_the_rest() {
        let g = RankGraph::from_edges(3, &[(0, 1, 5.0, 1.0), (1, 2, 2.0, 1.0)]).unwrap();
        assert_eq!(
            write_rank_grf(&g),
            "0\n3 4\n0 010\n1 5 1\n2 5 0 2 2\n1 2 1\n"
        );
        // Bytes too large for Scotch's integers: the largest edge becomes 10^6, a tiny one 1.
        let g = RankGraph::from_edges(3, &[(0, 1, 4e12, 1.0), (1, 2, 1.0, 1.0)]).unwrap();
        assert_eq!(
            write_rank_grf(&g),
            "0\n3 4\n0 010\n1 1000000 1\n2 1000000 0 1 2\n1 1 1\n"
        );
    }

    #[test]
    fn rank_targets_follow_counts_and_switches() {
        // Equal machines, no switches: a plain two-level tleaf.
        let c = Cluster::uniform(3, 4);
        let t = write_rank_tgt(&c, &[4, 4, 4]);
        assert_eq!(t.text, "tleaf 2 3 10 4 1\n");
        assert_eq!(t.terminal_machine, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(t.note, None);
        // Uneven counts (and a machine given no rank): the slots that exist, of the widest.
        let t = write_rank_tgt(
            &Cluster::from_slots(&[("a", 2), ("b", 3), ("c", 1)]),
            &[2, 0, 1],
        );
        assert_eq!(t.text, "sub 3 0 1 4 tleaf 2 3 10 2 1\n");
        assert_eq!(t.terminal_machine, [0, 0, 2]);
        // Switches: one level more, ten times dearer.
        let conf = "SwitchName=s1 Nodes=n[0-1]\nSwitchName=s2 Nodes=n[2-3]\n\
                    SwitchName=top Switches=s[1-2]\n";
        let c = cmlb_slurm::nodes::with_topology_conf(
            cmlb_slurm::nodes::parse_nodes("n[0-3]:2").unwrap(),
            conf,
            "t",
        )
        .unwrap();
        let t = write_rank_tgt(&c, &[2, 2, 2, 2]);
        assert_eq!(t.text, "tleaf 3 2 100 2 10 2 1\n");
        assert_eq!(t.terminal_machine, [0, 0, 1, 1, 2, 2, 3, 3]);
        // Machines at different depths: flat, and said so.
        let conf = "SwitchName=s1 Nodes=n[0-1]\nSwitchName=top Switches=s1 Nodes=n2\n";
        let c = cmlb_slurm::nodes::with_topology_conf(
            cmlb_slurm::nodes::parse_nodes("n[0-2]:2").unwrap(),
            conf,
            "t",
        )
        .unwrap();
        let t = write_rank_tgt(&c, &[2, 2, 2]);
        assert_eq!(t.text, "tleaf 2 3 10 2 1\n");
        assert!(t.note.unwrap().contains("not all at the same depth"));
    }

    #[test]
    fn count_repair_moves_only_the_excess_where_it_costs_least() {
        // A ring of 8 on 2 machines of 4, given as 5 + 3: one rank moves, one at an end of
        // machine 0's arc (loss 0: it exchanges as much with machine 1), the lower one.
        let g = ring(8);
        let mut m = vec![0, 0, 0, 0, 0, 1, 1, 1];
        let r = repair_counts(&g, &mut m, &[4, 4]).unwrap();
        assert_eq!(
            (r.moved, r.overfull_machines, r.raw_inter_node),
            (1, 1, 20.0)
        );
        assert_eq!(m, [1, 0, 0, 0, 0, 1, 1, 1]);
        assert_eq!(g.cut(&m), 20.0);
        assert_eq!(repair_counts(&g, &mut m, &[4, 4]), None);
        // Everything on one machine: the excess spreads to the machines with room.
        let mut m = vec![0; 8];
        let r = repair_counts(&g, &mut m, &[2, 3, 3]).unwrap();
        assert_eq!(r.moved, 6);
        let mut have = [0; 3];
        for &x in &m {
            have[x] += 1;
        }
        assert_eq!(have, [2, 3, 3]);
    }
}
