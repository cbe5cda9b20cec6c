//! Scotch as an external mapper: converts inputs to its formats, runs `gmap` and reads its
//! mapping back (repaired to one thread per PU when gmap stacks threads, see [`map`]).

use crate::capacity::{self, Repair};
use crate::error::{EvalError, Result};
use crate::inputs::EvalInput;
use mapper::metrics::{self, Metrics};
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
        && per_numa % per_core == 0
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
    let grf = work.join("graph.grf");
    let tgt = work.join("target.tgt");
    let out = work.join("mapping.map");
    let log = work.join("gmap.log");
    std::fs::write(&grf, write_grf(comm, load)).map_err(|e| EvalError::io(&grf, e))?;
    std::fs::write(&tgt, write_tgt(topo)?).map_err(|e| EvalError::io(&tgt, e))?;
    let o = Command::new(gmap)
        .arg("-vt")
        .args([&grf, &tgt, &out, &log])
        .output()
        .map_err(|e| EvalError::io(gmap, e))?;
    if !o.status.success() {
        return Err(EvalError::Gmap {
            program: gmap.to_path_buf(),
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        });
    }
    let text = std::fs::read_to_string(&out).map_err(|e| EvalError::io(&out, e))?;
    let pus = parse_map(&text, comm.n(), topo.pus.len())?;
    let log_text = std::fs::read_to_string(&log).map_err(|e| EvalError::io(&log, e))?;
    let secs = log_text
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some("T") && f.next() == Some("Mapping"))
                .then(|| f.next().and_then(|v| v.parse::<f64>().ok()))
                .flatten()
        })
        .ok_or(EvalError::NoMappingTime)?;
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
    let mut metrics = metrics::compute(&input.comm, &input.load, topo, &pus);
    metrics.mapping_ms = secs * 1e3 + repair_ms;
    Ok(ScotchPlan {
        pus,
        metrics,
        repair,
    })
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
}
