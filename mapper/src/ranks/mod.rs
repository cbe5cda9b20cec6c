//! Mapping the ranks of a multi-node job: ranks → machines (and switches), then ranks → cores
//! inside each machine.
//!
//! Cluster level, after EagerMap's cluster mode (digest 001 §3.6: one greedy group per
//! machine, sized by the machine's share of the job) and the hierarchical mode of the
//! clustering paper (digest 002 §4.5: one single-level mapping per switch level, top down):
//! the machines form a tree (switches from Slurm's `topology.conf` when given, else one
//! level); at every tree vertex the ranks assigned to it are split among its children by
//! multilevel recursive bisection with exact part sizes (`multilevel.rs`; EagerMap's greedy
//! growing is its initial partitioning on the coarsest graph). Group sizes are the slots
//! Slurm gave each machine (ranks per node), so the plan never asks Slurm for another
//! distribution of counts. Inside each machine the ranks' sub-matrix is mapped onto the
//! machine's cores by any strategy (CMLB by default), as threads are.
//!
//! Everything works on the sparse [`RankGraph`], so 16 384 ranks of a 3-D stencil take
//! memory and time in proportion to their edges.

mod balance;
mod graph;
mod multilevel;

pub use graph::{parse_edges, read_edges, write_edges, RankGraph, MAX_RANKS};

use crate::error::{MapError, Result};

/// One machine of the job: its Slurm node name, the ranks Slurm places on it, and its leaf
/// switch (an index into [`Cluster::switches`], or none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The node name (what a `SLURM_HOSTFILE` line holds).
    pub name: String,
    /// Ranks this machine runs.
    pub slots: usize,
}

/// The machines of a job and the switch tree above them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// Machines in the job's node order.
    pub machines: Vec<Machine>,
    /// The switch tree: each switch's children (machines or switches); empty = one level.
    pub switches: Vec<Switch>,
}

/// A switch of `topology.conf`: the machines (indexes) or switches (indexes) below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// The switch's name.
    pub name: String,
    /// Machines directly below (leaf switch).
    pub machines: Vec<usize>,
    /// Switches directly below.
    pub switches: Vec<usize>,
}

impl Cluster {
    /// `m` machines named `node0`, `node1`, ... of `slots` slots each, without switches.
    pub fn uniform(m: usize, slots: usize) -> Cluster {
        Cluster::from_slots(
            &(0..m)
                .map(|k| (format!("node{k}"), slots))
                .collect::<Vec<_>>(),
        )
    }

    /// Machines with these names and slot counts, in the job's node order, without switches.
    /// (Slurm's node text, hostlists and `topology.conf`, is read by `cmlb-slurm`'s `nodes`.)
    pub fn from_slots<S: AsRef<str>>(machines: &[(S, usize)]) -> Cluster {
        Cluster {
            machines: machines
                .iter()
                .map(|(name, slots)| Machine {
                    name: name.as_ref().to_string(),
                    slots: *slots,
                })
                .collect(),
            switches: Vec::new(),
        }
    }

    /// Add a switch tree given as `(switch, machines directly below, switches directly below)`,
    /// machines and switches by name. A named machine that is not in the job is left out (a
    /// site's tree names every node); a machine of the job under no switch, or a switch below
    /// one that is not in the tree, is an error naming `what` (where the tree came from).
    pub fn with_switches(
        mut self,
        tree: &[(String, Vec<String>, Vec<String>)],
        what: &str,
    ) -> Result<Cluster> {
        let mut switches = Vec::new();
        for (name, nodes, subs) in tree {
            let machines = nodes
                .iter()
                .filter_map(|n| self.machines.iter().position(|m| &m.name == n))
                .collect();
            let switches_below = subs
                .iter()
                .map(|s| {
                    tree.iter().position(|x| &x.0 == s).ok_or_else(|| {
                        MapError::input(what, format!("switch {name} names unknown switch {s}"))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            switches.push(Switch {
                name: name.clone(),
                machines,
                switches: switches_below,
            });
        }
        for (k, m) in self.machines.iter().enumerate() {
            if !switches.iter().any(|s| s.machines.contains(&k)) {
                return Err(MapError::input(
                    what,
                    format!("node {} of the job is under no switch", m.name),
                ));
            }
        }
        self.switches = switches;
        Ok(self)
    }

    /// Total slots.
    pub fn slots(&self) -> usize {
        self.machines.iter().map(|m| m.slots).sum()
    }

    /// Each machine's place in the mapping tree: the child taken at every level from the top
    /// down to it (`[m]` without switches; `[switch, machine]` under one level of switches).
    /// Lets another mapper (Scotch) be given the same tree.
    pub fn paths(&self) -> Vec<Vec<usize>> {
        fn walk(t: &TreeNode, path: &mut Vec<usize>, out: &mut [Vec<usize>]) {
            if t.children.is_empty() {
                let m = t.machines[0];
                if out[m].is_empty() {
                    out[m] = path.clone();
                }
                return;
            }
            for (k, ch) in t.children.iter().enumerate() {
                path.push(k);
                walk(ch, path, out);
                path.pop();
            }
        }
        let mut out = vec![Vec::new(); self.machines.len()];
        walk(&tree(self), &mut Vec::new(), &mut out);
        out
    }
}

/// A vertex of the mapping tree: its machines (leaves below it) and children.
struct TreeNode {
    machines: Vec<usize>,
    children: Vec<TreeNode>,
}

fn tree(c: &Cluster) -> TreeNode {
    let leaves = |ms: Vec<usize>| TreeNode {
        children: ms
            .iter()
            .map(|&m| TreeNode {
                machines: vec![m],
                children: Vec::new(),
            })
            .collect(),
        machines: ms,
    };
    if c.switches.is_empty() {
        return leaves((0..c.machines.len()).collect());
    }
    fn build(c: &Cluster, s: usize, depth: usize) -> TreeNode {
        let sw = &c.switches[s];
        let mut children: Vec<TreeNode> = Vec::new();
        if depth < 16 {
            children.extend(sw.switches.iter().map(|&t| build(c, t, depth + 1)));
        }
        children.extend(sw.machines.iter().map(|&m| TreeNode {
            machines: vec![m],
            children: Vec::new(),
        }));
        children.retain(|ch| !ch.machines.is_empty());
        let mut machines: Vec<usize> = children.iter().flat_map(|c| c.machines.clone()).collect();
        machines.sort_unstable();
        machines.dedup();
        TreeNode { machines, children }
    }
    // Roots: switches no other switch names.
    let roots: Vec<usize> = (0..c.switches.len())
        .filter(|&s| !c.switches.iter().any(|x| x.switches.contains(&s)))
        .collect();
    let mut children: Vec<TreeNode> = roots.iter().map(|&r| build(c, r, 0)).collect();
    children.retain(|ch| !ch.machines.is_empty());
    let mut machines: Vec<usize> = children.iter().flat_map(|c| c.machines.clone()).collect();
    machines.sort_unstable();
    machines.dedup();
    if children.len() == 1 {
        return children.pop().expect("one");
    }
    TreeNode { machines, children }
}

/// How many ranks each machine gets: its slots when the job fills them; otherwise shares in
/// proportion to slots, as EagerMap's reference code rounds (floor, the last takes the rest).
pub fn rank_counts(c: &Cluster, n: usize) -> Result<Vec<usize>> {
    let total = c.slots();
    if n > total {
        return Err(MapError::input(
            "ranks",
            format!("{n} ranks but the machines have {total} slots"),
        ));
    }
    if n == total {
        return Ok(c.machines.iter().map(|m| m.slots).collect());
    }
    let (mut left_r, mut left_s) = (n, total);
    let mut out = Vec::with_capacity(c.machines.len());
    for (k, m) in c.machines.iter().enumerate() {
        let take = if k + 1 == c.machines.len() {
            left_r
        } else {
            ((left_r as f64 / left_s as f64) * m.slots as f64).floor() as usize
        };
        out.push(take.min(m.slots));
        left_r -= take.min(m.slots);
        left_s -= m.slots;
    }
    Ok(out)
}

/// How [`map_to_machines_with`] maps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MapOptions {
    /// Each rank's load (bytes, memory load, …): among plans of the same cut, machines get
    /// loads closer to their share (the rule of `balance`, docs/ranks.md "Load").
    pub load: Option<Vec<f64>>,
    /// Seed of the partitioner's random choices (the plan is deterministic for a seed).
    pub seed: u64,
}

/// Ranks → machines (index into `c.machines`) for the graph, hierarchical when `c` has
/// switches. Deterministic.
pub fn map_to_machines(g: &RankGraph, c: &Cluster) -> Result<Vec<usize>> {
    map_to_machines_with(g, c, &MapOptions::default())
}

/// [`map_to_machines`] with rank loads and a seed.
pub fn map_to_machines_with(g: &RankGraph, c: &Cluster, o: &MapOptions) -> Result<Vec<usize>> {
    let counts = rank_counts(c, g.n())?;
    if let Some(load) = &o.load {
        check_load(load, g.n())?;
    }
    let t = tree(c);
    let w = multilevel::Wg::from_rank_graph(g);
    let mut machine = vec![usize::MAX; g.n()];
    let all: Vec<u32> = (0..g.n() as u32).collect();
    let mut map = vec![u32::MAX; g.n()];
    let s = Splitter {
        tries: multilevel::tries_for(w.adj.len()),
        w,
        counts,
        o,
    };
    s.split(&t, &all, &mut machine, &mut map);
    Ok(machine)
}

/// A load vector must name every rank with a finite value >= 0.
fn check_load(load: &[f64], n: usize) -> Result<()> {
    if load.len() != n {
        return Err(MapError::input(
            "rank loads",
            format!("{} values for {n} ranks", load.len()),
        ));
    }
    if let Some(r) = load.iter().position(|v| !v.is_finite() || *v < 0.0) {
        return Err(MapError::input(
            "rank loads",
            format!("rank {r}: {} is not a finite number >= 0", load[r]),
        ));
    }
    Ok(())
}

/// What every level of a hierarchical mapping shares.
struct Splitter<'a> {
    w: multilevel::Wg,
    counts: Vec<usize>,
    o: &'a MapOptions,
    tries: usize,
}

impl Splitter<'_> {
    /// Assign `members` to the machines below `t`, top down.
    fn split(&self, t: &TreeNode, members: &[u32], out: &mut [usize], map: &mut [u32]) {
        if t.children.is_empty() {
            for &r in members {
                out[r as usize] = t.machines[0];
            }
            return;
        }
        let sizes: Vec<usize> = t
            .children
            .iter()
            .map(|ch| ch.machines.iter().map(|&m| self.counts[m]).sum())
            .collect();
        let sub = self.w.induced(members, map);
        let mut part = multilevel::partition(&sub, &sizes, self.o.seed, self.tries);
        if let Some(load) = &self.o.load {
            let sub_load: Vec<f64> = members.iter().map(|&r| load[r as usize]).collect();
            balance::balance(&sub, &mut part, &sizes, &sub_load);
        }
        for (k, ch) in t.children.iter().enumerate() {
            let next: Vec<u32> = members
                .iter()
                .zip(&part)
                .filter(|(_, &p)| p as usize == k)
                .map(|(&r, _)| r)
                .collect();
            self.split(ch, &next, out, map);
        }
    }
}

/// Load of each machine under `place` (rank → machine), for `machines` machines.
pub fn machine_loads(place: &[usize], load: &[f64], machines: usize) -> Vec<f64> {
    let mut l = vec![0.0; machines];
    for (&m, &x) in place.iter().zip(load) {
        l[m] += x;
    }
    l
}

/// Slurm's `block` distribution: ranks in order fill the machines in order.
pub fn block(c: &Cluster, n: usize) -> Result<Vec<usize>> {
    let counts = rank_counts(c, n)?;
    Ok(counts
        .iter()
        .enumerate()
        .flat_map(|(m, &k)| std::iter::repeat_n(m, k))
        .collect())
}

/// Slurm's `cyclic` distribution: rank r on machine r mod M, skipping full machines.
pub fn cyclic(c: &Cluster, n: usize) -> Result<Vec<usize>> {
    let counts = rank_counts(c, n)?;
    let mut left = counts.clone();
    let mut out = Vec::with_capacity(n);
    let mut m = 0;
    for _ in 0..n {
        while left[m] == 0 {
            m = (m + 1) % left.len();
        }
        out.push(m);
        left[m] -= 1;
        m = (m + 1) % left.len();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring of `n` ranks whose order is shuffled by a fixed permutation.
    /// Four machines of 8 slots, two per switch under one top switch.
    fn two_switches_4x8() -> Cluster {
        Cluster::uniform(4, 8).with_switches(&tree(), "t").unwrap()
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    /// s1 over node0-1, s2 over node2-3, top over s1 and s2.
    fn tree() -> Vec<(String, Vec<String>, Vec<String>)> {
        vec![
            ("s1".into(), names(&["node0", "node1"]), vec![]),
            ("s2".into(), names(&["node2", "node3"]), vec![]),
            ("top".into(), vec![], names(&["s1", "s2"])),
        ]
    }

    fn shuffled_ring(n: usize) -> (RankGraph, Vec<usize>) {
        let perm: Vec<usize> = (0..n).map(|i| (i * 7 + 3) % n).collect();
        let edges: Vec<_> = (0..n)
            .map(|i| (perm[i], perm[(i + 1) % n], 100.0, 1.0))
            .collect();
        (RankGraph::from_edges(n, &edges).unwrap(), perm)
    }

    #[test]
    fn a_shuffled_ring_is_cut_only_where_it_must_be() {
        let (g, _) = shuffled_ring(32);
        let c = Cluster::uniform(4, 8);
        let m = map_to_machines(&g, &c).unwrap();
        // Every machine holds 8 ranks; a ring split into 4 arcs is cut 4 times.
        for k in 0..4 {
            assert_eq!(m.iter().filter(|&&x| x == k).count(), 8);
        }
        assert_eq!(g.cut(&m), 400.0);
        // Block placement of the shuffled order cuts nearly every edge.
        assert!(g.cut(&block(&c, 32).unwrap()) > 2000.0);
    }

    #[test]
    fn switches_keep_neighbouring_arcs_under_one_switch() {
        let (g, _) = shuffled_ring(32);
        let c = two_switches_4x8();
        let m = map_to_machines(&g, &c).unwrap();
        assert_eq!(g.cut(&m), 400.0);
        // Between switches only 2 cuts: map machines to their switch.
        let sw: Vec<usize> = m.iter().map(|&x| x / 2).collect();
        assert_eq!(g.cut(&sw), 200.0);
        let e = Cluster::uniform(4, 8)
            .with_switches(&tree()[..1], "t.conf")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t.conf: node node2 of the job is under no switch");
        let bad = vec![("top".to_string(), vec![], names(&["s9"]))];
        let e = Cluster::uniform(1, 8)
            .with_switches(&bad, "t.conf")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t.conf: switch top names unknown switch s9");
    }

    /// A 2-D grid of `x` × `y` ranks, 4 neighbours of 1 byte each, ranks numbered by `perm`.
    fn grid2d(x: usize, y: usize, perm: &dyn Fn(usize) -> usize) -> RankGraph {
        let mut e = Vec::new();
        for j in 0..y {
            for i in 0..x {
                let r = perm(j * x + i);
                if i + 1 < x {
                    e.push((r, perm(j * x + i + 1), 1.0, 1.0));
                }
                if j + 1 < y {
                    e.push((r, perm((j + 1) * x + i), 1.0, 1.0));
                }
            }
        }
        RankGraph::from_edges(x * y, &e).unwrap()
    }

    /// A 3-D grid of `k`³ ranks, 6 neighbours of 1 byte each.
    fn grid3d(k: usize, perm: &dyn Fn(usize) -> usize) -> RankGraph {
        let id = |a: usize, b: usize, c: usize| perm((c * k + b) * k + a);
        let mut e = Vec::new();
        for c in 0..k {
            for b in 0..k {
                for a in 0..k {
                    if a + 1 < k {
                        e.push((id(a, b, c), id(a + 1, b, c), 1.0, 1.0));
                    }
                    if b + 1 < k {
                        e.push((id(a, b, c), id(a, b + 1, c), 1.0, 1.0));
                    }
                    if c + 1 < k {
                        e.push((id(a, b, c), id(a, b, c + 1), 1.0, 1.0));
                    }
                }
            }
        }
        RankGraph::from_edges(k * k * k, &e).unwrap()
    }

    /// A fixed pseudo-random permutation of 0..n (a shuffled rank order).
    fn shuffle(n: usize, seed: u64) -> Vec<usize> {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut p: Vec<usize> = (0..n).collect();
        p.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
        p
    }

    fn counts_of(m: &[usize], machines: usize) -> Vec<usize> {
        let mut c = vec![0; machines];
        for &x in m {
            c[x] += 1;
        }
        c
    }

    #[test]
    fn shuffled_rings_are_cut_once_per_machine_whatever_the_order() {
        for (n, spec, cuts) in [
            (64, "4x16", 4.0),
            (256, "8x32", 8.0),
            (1000, "10x100", 10.0),
        ] {
            let p = shuffle(n, n as u64);
            let e: Vec<_> = (0..n).map(|i| (p[i], p[(i + 1) % n], 3.0, 1.0)).collect();
            let g = RankGraph::from_edges(n, &e).unwrap();
            let (m, per) = spec.split_once('x').unwrap();
            let c = Cluster::uniform(m.parse().unwrap(), per.parse().unwrap());
            let m = map_to_machines(&g, &c).unwrap();
            assert_eq!(g.cut(&m), 3.0 * cuts, "{spec}");
            let per = n / c.machines.len();
            assert_eq!(counts_of(&m, c.machines.len()), vec![per; c.machines.len()]);
        }
    }

    #[test]
    fn two_d_grids_get_the_optimal_strips_or_blocks() {
        // 8 × 8 onto 4 machines of 16: 4 × 4 blocks cut 16 edges (strips would cut 24);
        // onto 2 of 32: one straight cut of 8. 16 × 4 onto 4 of 16: strips of 4 × 4, 12.
        // The same grids with shuffled rank order.
        for (x, y, spec, best) in [
            (8, 8, "4x16", 16.0),
            (8, 8, "2x32", 8.0),
            (16, 4, "4x16", 12.0),
        ] {
            let p = shuffle(x * y, 7);
            for g in [grid2d(x, y, &|i| i), grid2d(x, y, &|i| p[i])] {
                let (m, per) = spec.split_once('x').unwrap();
                let c = Cluster::uniform(m.parse().unwrap(), per.parse().unwrap());
                let m = map_to_machines(&g, &c).unwrap();
                assert_eq!(g.cut(&m), best, "{x}x{y} onto {spec}");
                let k = c.machines.len();
                assert_eq!(counts_of(&m, k), vec![x * y / k; k]);
            }
        }
    }

    #[test]
    fn a_cube_splits_into_octants() {
        // 8³ onto 8 machines of 64: the octants (4³ each) cut 3 planes of 64 edges.
        let p = shuffle(512, 3);
        for g in [grid3d(8, &|i| i), grid3d(8, &|i| p[i])] {
            let m = map_to_machines(&g, &Cluster::uniform(8, 64)).unwrap();
            assert_eq!(g.cut(&m), 192.0);
        }
    }

    #[test]
    fn uneven_and_partial_counts_are_kept_exactly() {
        let g = grid2d(10, 7, &|i| i);
        let c = Cluster::from_slots(&[("a", 3), ("b1", 17), ("b2", 17), ("c", 1), ("d", 32)]);
        let m = map_to_machines(&g, &c).unwrap();
        assert_eq!(counts_of(&m, 5), [3, 17, 17, 1, 32]);
        // Fewer ranks than slots: the counts of rank_counts, exactly.
        let c = Cluster::from_slots(&[("a", 8), ("b", 24), ("c", 40)]);
        let m = map_to_machines(&g, &c).unwrap();
        assert_eq!(counts_of(&m, 3), rank_counts(&c, 70).unwrap());
        // Ranks that exchange nothing still fill their machines exactly.
        let g = RankGraph::from_edges(20, &[(0, 1, 5.0, 1.0)]).unwrap();
        let m = map_to_machines(&g, &Cluster::from_slots(&[("x", 7), ("y", 13)])).unwrap();
        assert_eq!(counts_of(&m, 2), [7, 13]);
        assert_eq!(m[0], m[1]);
    }

    #[test]
    fn loads_are_balanced_where_the_cut_allows_it() {
        // A ring of 8, ranks 0-3 heavy (10) and 4-7 light (1), on 2 machines of 4. Every
        // arc of 4 cuts the ring twice; the arcs {2,3,4,5}/{6,7,0,1} carry 22 each.
        let e: Vec<_> = (0..8).map(|i| (i, (i + 1) % 8, 5.0, 1.0)).collect();
        let g = RankGraph::from_edges(8, &e).unwrap();
        let load = vec![10.0, 10.0, 10.0, 10.0, 1.0, 1.0, 1.0, 1.0];
        let c = Cluster::uniform(2, 4);
        let plain = map_to_machines(&g, &c).unwrap();
        assert_eq!(g.cut(&plain), 10.0);
        let o = MapOptions {
            load: Some(load.clone()),
            seed: 0,
        };
        let m = map_to_machines_with(&g, &c, &o).unwrap();
        assert_eq!(g.cut(&m), 10.0);
        assert_eq!(machine_loads(&m, &load, 2), [22.0, 22.0]);
        // Two 4-cliques joined by one edge, all the load on one: balancing would cost cut,
        // so the cliques stay whole and the loads stay 40 / 4.
        let mut e = Vec::new();
        for base in [0, 4] {
            for i in 0..4 {
                for j in (i + 1)..4 {
                    e.push((base + i, base + j, 5.0, 1.0));
                }
            }
        }
        e.push((3, 4, 1.0, 1.0));
        let g = RankGraph::from_edges(8, &e).unwrap();
        let m = map_to_machines_with(&g, &c, &o).unwrap();
        assert_eq!(g.cut(&m), 1.0);
        let mut l = machine_loads(&m, &load, 2);
        l.sort_by(f64::total_cmp);
        assert_eq!(l, [4.0, 40.0]);
        // Ranks that exchange nothing go where they even the loads out: 0-1 share a
        // machine with one of the heavy isolated ranks 2, 3.
        let g = RankGraph::from_edges(6, &[(0, 1, 1.0, 1.0)]).unwrap();
        let load = vec![1.0, 1.0, 5.0, 5.0, 1.0, 1.0];
        let o = MapOptions {
            load: Some(load.clone()),
            seed: 0,
        };
        let m = map_to_machines_with(&g, &Cluster::uniform(2, 3), &o).unwrap();
        assert_eq!(g.cut(&m), 0.0);
        assert_eq!(machine_loads(&m, &load, 2), [7.0, 7.0]);
        let bad = MapOptions {
            load: Some(vec![1.0; 5]),
            seed: 0,
        };
        let e = map_to_machines_with(&g, &Cluster::uniform(2, 3), &bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("5 values for 6 ranks"), "{e}");
    }

    #[test]
    fn paths_follow_the_switch_tree() {
        let c = two_switches_4x8();
        assert_eq!(c.paths(), [vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1]]);
        assert_eq!(Cluster::uniform(3, 2).paths(), [[0], [1], [2]]);
    }

    #[test]
    fn counts_follow_slots_and_baselines_fill_them() {
        let c = Cluster::from_slots(&[("a", 4), ("b", 4), ("c", 8)]);
        assert_eq!(rank_counts(&c, 16).unwrap(), [4, 4, 8]);
        assert_eq!(rank_counts(&c, 8).unwrap(), [2, 2, 4]);
        assert!(rank_counts(&c, 17).is_err());
        assert_eq!(block(&c, 8).unwrap(), [0, 0, 1, 1, 2, 2, 2, 2]);
        assert_eq!(cyclic(&c, 8).unwrap(), [0, 1, 2, 0, 1, 2, 2, 2]);
    }
}
