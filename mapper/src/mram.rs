//! The MRAM(h) memory-cost model of Yuan & Zhang (digest 004): RAM(h) per-level access costs
//! plus *horizontal locality* — data shared by several tasks is fetched from memory once and
//! then served from the closest storage level the sharers have in common, so its memory cost is
//! amortised over the sharers (the ½ factors of the paper's Table 2).
//!
//! * [`share_matrix`]: the task–task share matrix `TT = TD·TDᵀ` from a task × data incidence
//!   matrix `TD`, and [`normalised_share`] `TT_ij / (TT_ii + TT_jj)`.
//! * [`cost_from_td`]: the cost of a placement when `TD` is known. For every datum the first
//!   sharer pays the memory cost; every other sharer pays the cost of the closest level it
//!   shares with a task that already holds the datum (a minimum spanning tree over the sharers,
//!   so s sharers on one L2 cost `c_mem + (s−1)·c_L2`).
//! * [`cost_from_tt`]: the same from `TT` alone, `Σ_i TT_ii·c_mem − Σ_{i<j} TT_ij·(c_mem − c_ij)`,
//!   exact when no datum has more than two sharers (TT cannot tell more).
//! * [`predict`]: the `mram_cost` column of plans and `cmlb map --compare`. A profile has no
//!   TD, but its communication matrix counts, per thread pair, accesses to lines both threads
//!   touched: the sampled counterpart of `TT_ij`. Taking `TT_ij = A_ij` and `TT_ii = Σ_j A_ij`
//!   gives `Σ_{i<j} A_ij·(c_mem + c_ij)`. Private data costs the same under every placement
//!   and is left out, so only differences between plans of one profile are meaningful.
//!
//! `c_ij` is the access cost of the closest level PUs i and j share: L1 on one core (or one
//! PU), L2, L3, local memory within a NUMA node, and across NUMA nodes the memory cost times
//! the NUMA latency ratio from hwloc's distance matrix (or [`LevelCosts::remote_factor`] when
//! the topology has none).

use crate::error::{MapError, Result};
use crate::matrix::CommMatrix;
use crate::topology::{Level, Topology};

/// Access costs per level, in any unit (cycles by default).
#[derive(Debug, Clone, PartialEq)]
pub struct LevelCosts {
    pub l1: f64,
    pub l2: f64,
    pub l3: f64,
    pub memory: f64,
    /// Remote/local memory latency ratio used when the topology has no NUMA distances.
    pub remote_factor: f64,
}

impl Default for LevelCosts {
    /// The paper's Nehalem platform (Table 1): L1 4, L2 10, L3 38, memory 87 cycles; remote
    /// memory 2.1× local (the usual ACPI SLIT 21/10) when hwloc reports no distances.
    fn default() -> Self {
        LevelCosts {
            l1: 4.0,
            l2: 10.0,
            l3: 38.0,
            memory: 87.0,
            remote_factor: 2.1,
        }
    }
}

impl LevelCosts {
    /// Parse `l1=4,l2=10,l3=38,mem=87,remote=2.1` (any subset; the rest keep their defaults).
    pub fn parse(text: &str) -> Result<LevelCosts> {
        let mut c = LevelCosts::default();
        let mut seen = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = |msg: &str| MapError::input("MRAM latencies", format!("'{item}': {msg}"));
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| bad("expected key=value"))?;
            let v: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x > 0.0)
                .ok_or_else(|| bad("the value must be a number > 0"))?;
            // As with strategy parameters: a repeated key is a mistake, not "last one wins".
            if seen.contains(&k.trim()) {
                return Err(bad("given twice"));
            }
            seen.push(k.trim());
            match k.trim() {
                "l1" => c.l1 = v,
                "l2" => c.l2 = v,
                "l3" => c.l3 = v,
                "mem" => c.memory = v,
                "remote" => c.remote_factor = v,
                _ => return Err(bad("unknown level; use l1, l2, l3, mem, remote")),
            }
        }
        Ok(c)
    }

    /// Cost for a task on PU `b` to get a datum that the task on PU `a` holds (`a`, `b` index
    /// `topo.pus`), and whether that access goes to memory.
    pub fn shared(&self, topo: &Topology, a: usize, b: usize) -> (f64, bool) {
        let (na, nb) = (topo.pus[a].numa, topo.pus[b].numa);
        if na != nb {
            let f = if topo.distances.is_some() {
                topo.numa_factor(na, nb)
            } else {
                self.remote_factor
            };
            return (self.memory * f, true);
        }
        match lca_level(topo, a, b) {
            Level::Pu | Level::Core => (self.l1, false),
            Level::L2 => (self.l2, false),
            Level::L3 => (self.l3, false),
            _ => (self.memory, true),
        }
    }
}

/// Level of the lowest common ancestor of two PUs.
fn lca_level(topo: &Topology, a: usize, b: usize) -> Level {
    let (mut x, mut y) = (topo.pus[a].node, topo.pus[b].node);
    while x != y {
        let (dx, dy) = (topo.nodes[x].depth, topo.nodes[y].depth);
        if dx >= dy {
            x = topo.nodes[x].parent.unwrap_or(x);
        }
        if dy >= dx {
            y = topo.nodes[y].parent.unwrap_or(y);
        }
    }
    topo.nodes[x].level
}

/// `TT = TD·TDᵀ`: `TT_ij` = data blocks tasks i and j both access, `TT_ii` = blocks task i
/// accesses. Rows of `td` are tasks and must all have the same length.
// The paper's exact model, used by the tests to check `predict` against it.
#[cfg_attr(not(test), allow(dead_code))]
pub fn share_matrix(td: &[Vec<bool>]) -> Result<Vec<Vec<f64>>> {
    let d = td.first().map_or(0, Vec::len);
    if let Some(i) = td.iter().position(|r| r.len() != d) {
        return Err(MapError::input(
            "task-data matrix",
            format!("row {} has {} columns, expected {d}", i + 1, td[i].len()),
        ));
    }
    let n = td.len();
    let mut tt = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in i..n {
            let s = (0..d).filter(|&c| td[i][c] && td[j][c]).count() as f64;
            tt[i][j] = s;
            tt[j][i] = s;
        }
    }
    Ok(tt)
}

/// `TT_ij / (TT_ii + TT_jj)`: the fraction of the blocks the pair fetches that are reused.
// The paper's exact model, used by the tests to check `predict` against it.
#[cfg_attr(not(test), allow(dead_code))]
pub fn normalised_share(tt: &[Vec<f64>], i: usize, j: usize) -> f64 {
    let total = tt[i][i] + tt[j][j];
    if total > 0.0 {
        tt[i][j] / total
    } else {
        0.0
    }
}

/// A predicted memory cost, split into memory-level and cache-level accesses.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
// The paper's exact model, used by the tests to check `predict` against it.
#[cfg_attr(not(test), allow(dead_code))]
pub struct MramCost {
    pub memory: f64,
    pub cache: f64,
}

// The paper's exact model, used by the tests to check `predict` against it.
#[cfg_attr(not(test), allow(dead_code))]
impl MramCost {
    pub fn total(&self) -> f64 {
        self.memory + self.cache
    }
}

/// Exact MRAM(h) cost of running task t on PU `pus[t]` when the task × data matrix is known.
// The paper's exact model, used by the tests to check `predict` against it.
#[cfg_attr(not(test), allow(dead_code))]
pub fn cost_from_td(
    td: &[Vec<bool>],
    topo: &Topology,
    pus: &[usize],
    costs: &LevelCosts,
) -> Result<MramCost> {
    if td.len() != pus.len() {
        return Err(MapError::input(
            "task-data matrix",
            format!("has {} tasks but the plan places {}", td.len(), pus.len()),
        ));
    }
    let d = td.first().map_or(0, Vec::len);
    let mut total = MramCost::default();
    for c in 0..d {
        let sharers: Vec<usize> = (0..td.len())
            .filter(|&t| td[t].get(c) == Some(&true))
            .collect();
        let Some(&first) = sharers.first() else {
            continue;
        };
        total.memory += costs.memory;
        // Prim: each remaining sharer joins through its cheapest link to a holder.
        let mut best: Vec<(f64, bool)> = sharers
            .iter()
            .map(|&t| costs.shared(topo, pus[first], pus[t]))
            .collect();
        let mut done = vec![false; sharers.len()];
        done[0] = true;
        for _ in 1..sharers.len() {
            let k = (0..sharers.len())
                .filter(|&k| !done[k])
                .min_by(|&x, &y| best[x].0.total_cmp(&best[y].0))
                .expect("a sharer is left");
            done[k] = true;
            let (c, mem) = best[k];
            if mem {
                total.memory += c;
            } else {
                total.cache += c;
            }
            for j in 0..sharers.len() {
                if !done[j] {
                    let link = costs.shared(topo, pus[sharers[k]], pus[sharers[j]]);
                    if link.0 < best[j].0 {
                        best[j] = link;
                    }
                }
            }
        }
    }
    Ok(total)
}

/// MRAM(h) cost from the share matrix: `Σ_i TT_ii·c_mem − Σ_{i<j} TT_ij·(c_mem − c_ij)`.
// The paper's exact model, used by the tests to check `predict` against it.
#[cfg_attr(not(test), allow(dead_code))]
pub fn cost_from_tt(tt: &[Vec<f64>], topo: &Topology, pus: &[usize], costs: &LevelCosts) -> f64 {
    let n = tt.len().min(pus.len());
    let mut c = 0.0;
    for i in 0..n {
        c += tt[i][i] * costs.memory;
        for j in (i + 1)..n {
            if tt[i][j] != 0.0 {
                c -= tt[i][j] * (costs.memory - costs.shared(topo, pus[i], pus[j]).0);
            }
        }
    }
    c
}

/// The `mram_cost` metric of a plan: `Σ_{i<j} A_ij · (c_mem + c_ij)` (see the module docs).
/// The level costs are tabulated once per pair of PUs in use, so the pair loop is a lookup.
pub fn predict(comm: &CommMatrix, topo: &Topology, pus: &[usize], costs: &LevelCosts) -> f64 {
    let mut slot = vec![usize::MAX; topo.pus.len()];
    let mut used = Vec::new();
    for &p in pus {
        if slot[p] == usize::MAX {
            slot[p] = used.len();
            used.push(p);
        }
    }
    let k = used.len();
    let table: Option<Vec<f64>> = (k <= 2048).then(|| {
        let mut t = vec![0.0; k * k];
        for a in 0..k {
            for b in a..k {
                let c = costs.memory + costs.shared(topo, used[a], used[b]).0;
                t[a * k + b] = c;
                t[b * k + a] = c;
            }
        }
        t
    });
    let mut c = 0.0;
    for (i, &pi) in pus.iter().enumerate() {
        let row = comm.row(i);
        for (j, &pj) in pus.iter().enumerate().skip(i + 1) {
            if row[j] != 0.0 {
                let pair = match &table {
                    Some(t) => t[slot[pi] * k + slot[pj]],
                    None => costs.memory + costs.shared(topo, pi, pj).0,
                };
                c += row[j] * pair;
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::NodeSpec;

    /// Harpertown-like: one NUMA node, 2 packages, each 2 L2 caches shared by 2 cores.
    fn harpertown() -> Topology {
        let mut pu = 0;
        let pk = (0..2)
            .map(|p| {
                let l2s = (0..2)
                    .map(|l| {
                        let cores = (0..2)
                            .map(|_| {
                                pu += 1;
                                NodeSpec::new(
                                    Level::Core,
                                    pu - 1,
                                    vec![NodeSpec::new(Level::Pu, pu - 1, vec![])],
                                )
                            })
                            .collect();
                        NodeSpec::new(Level::L2, p * 2 + l, cores)
                    })
                    .collect();
                NodeSpec::new(Level::Package, p, l2s)
            })
            .collect();
        Topology::build(&NodeSpec::new(Level::Machine, 0, pk), "harpertown").unwrap()
    }

    /// Digest 004 Fig. 3: the TD of a 2×2 blocked C = A×B (columns A11 A12 A21 A22 B11 B12 B21 B22).
    fn matmul_td() -> Vec<Vec<bool>> {
        [
            [1, 1, 0, 0, 1, 0, 1, 0],
            [1, 1, 0, 0, 0, 1, 0, 1],
            [0, 0, 1, 1, 1, 0, 1, 0],
            [0, 0, 1, 1, 0, 1, 0, 1],
        ]
        .iter()
        .map(|r| r.iter().map(|&x| x == 1).collect())
        .collect()
    }

    /// The worked example of digest 004 (Figs. 3–4).
    #[test]
    fn blocked_matmul_share_matrix() {
        let tt = share_matrix(&matmul_td()).unwrap();
        let want = [
            [4.0, 2.0, 2.0, 0.0],
            [2.0, 4.0, 0.0, 2.0],
            [2.0, 0.0, 4.0, 2.0],
            [0.0, 2.0, 2.0, 4.0],
        ];
        for i in 0..4 {
            assert_eq!(tt[i], want[i].to_vec());
        }
        assert_eq!(normalised_share(&tt, 0, 1), 0.25);
        assert_eq!(normalised_share(&tt, 0, 3), 0.0);
    }

    /// Table 2: when two tasks share their X blocks in L2 (Scheme 2), the memory cost of X is
    /// half of what it is without sharing (Scheme 1); the rest is served from L2.
    #[test]
    fn shared_blocks_halve_the_memory_cost() {
        let t = harpertown();
        let c = LevelCosts::default();
        // Z11 and Z12 read the same two X blocks and two private Y blocks each.
        let x_only: Vec<Vec<bool>> = vec![vec![true, true], vec![true, true]];
        let no_share = cost_from_td(&x_only, &t, &[0, 2], &c).unwrap(); // different L2
        let l2_share = cost_from_td(&x_only, &t, &[0, 1], &c).unwrap(); // one L2
        assert_eq!(no_share.memory, 4.0 * c.memory);
        assert_eq!(l2_share.memory, 0.5 * no_share.memory);
        assert_eq!(l2_share.cache, 2.0 * c.l2);
        // The whole matmul: pairing tasks that share (C11+C12 on one L2) beats pairing C11
        // with C22, which share nothing (the paper's Figs. 8 vs 10).
        let td = matmul_td();
        let share = cost_from_td(&td, &t, &[0, 1, 2, 3], &c).unwrap();
        let none = cost_from_td(&td, &t, &[0, 2, 3, 1], &c).unwrap();
        assert!(share.total() < none.total());
        // With at most two sharers per block, TT carries all the information.
        for pus in [[0, 1, 2, 3], [0, 2, 3, 1], [0, 4, 1, 5]] {
            let tt = share_matrix(&td).unwrap();
            let via_tt = cost_from_tt(&tt, &t, &pus, &c);
            assert!((via_tt - cost_from_td(&td, &t, &pus, &c).unwrap().total()).abs() < 1e-9);
        }
    }

    #[test]
    fn remote_sharing_costs_more_than_local() {
        let t = Topology::from_synthetic("pack:2 numa:1 core:2 pu:1").unwrap();
        let c = LevelCosts::default();
        let mut a = CommMatrix::zeros(2);
        a.add_sym(0, 1, 10.0);
        let local = predict(&a, &t, &[0, 1], &c);
        let remote = predict(&a, &t, &[0, 2], &c);
        assert_eq!(local, 10.0 * (87.0 + 87.0));
        assert!((remote - 10.0 * (87.0 + 87.0 * 2.1)).abs() < 1e-9);
        // Three sharers, two on one PU: one fetch, an L2 hit, an L1 hit.
        let h = harpertown();
        let one = vec![vec![true]; 3];
        let m = cost_from_td(&one, &h, &[0, 1, 1], &c).unwrap();
        assert_eq!((m.memory, m.cache), (87.0, 10.0 + 4.0)); // L2 hit, then L1 on the same PU
    }

    #[test]
    fn latencies_parse_and_errors_name_the_item() {
        let c = LevelCosts::parse("l1=1, mem=100,remote=3").unwrap();
        assert_eq!(
            (c.l1, c.l2, c.memory, c.remote_factor),
            (1.0, 10.0, 100.0, 3.0)
        );
        let e = LevelCosts::parse("l4=3").unwrap_err().to_string();
        assert!(e.contains("'l4=3'") && e.contains("unknown level"), "{e}");
        let e = LevelCosts::parse("mem=-1").unwrap_err().to_string();
        assert!(e.contains("'mem=-1'") && e.contains("> 0"), "{e}");
        let e = LevelCosts::parse("l1=4,l1=5").unwrap_err().to_string();
        assert!(e.contains("'l1=5'") && e.contains("given twice"), "{e}");
        let e = share_matrix(&[vec![true], vec![true, false]])
            .unwrap_err()
            .to_string();
        assert!(e.contains("row 2"), "{e}");
        let e = cost_from_td(
            &[vec![true]],
            &harpertown(),
            &[0, 1],
            &LevelCosts::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("1 tasks") && e.contains("places 2"), "{e}");
    }
}
