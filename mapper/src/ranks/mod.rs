//! Mapping the ranks of a multi-node job: ranks → machines (and switches), then ranks → cores
//! inside each machine.
//!
//! Cluster level, after EagerMap's cluster mode (digest 001 §3.6: one greedy group per
//! machine, sized by the machine's share of the job) and the hierarchical mode of the
//! clustering paper (digest 002 §4.5: one single-level mapping per switch level, top down):
//! the machines form a tree (switches from Slurm's `topology.conf` when given, else one
//! level); at every tree vertex the ranks assigned to it are split among its children by
//! greedy graph growing — the next rank taken is the unassigned one that exchanges most bytes
//! with the group — followed by boundary swaps that lower the cut. Group sizes are the slots
//! Slurm gave each machine (ranks per node), so the plan never asks Slurm for another
//! distribution of counts. Inside each machine the ranks' sub-matrix is mapped onto the
//! machine's cores by any strategy (CMLB by default), as threads are.
//!
//! Everything works on the sparse [`RankGraph`], so 16 384 ranks of a 3-D stencil take
//! memory and time in proportion to their edges.

pub mod graph;

pub use graph::{parse_edges, read_edges, write_edges, RankGraph};

use crate::error::{MapError, Result};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

/// The most hosts a hostlist may name: the ranges' sum is bounded before it is allocated.
pub const MAX_HOSTS: usize = 1 << 20;

/// Expand one Slurm hostlist (`node[01-04,7],big1`) into names, keeping zero padding.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    let mut items = Vec::new();
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    for item in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let bad = || MapError::input("hostlist", format!("'{item}' is not NAME or NAME[a-b,c]"));
        match item.split_once('[') {
            None if out.len() >= MAX_HOSTS => {
                return Err(MapError::input(
                    "hostlist",
                    format!("'{item}' takes the list past {MAX_HOSTS} hosts"),
                ))
            }
            None => out.push(item.to_string()),
            Some((pre, rest)) => {
                let (ranges, post) = rest.split_once(']').ok_or_else(bad)?;
                for r in ranges.split(',') {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    let width = a.len();
                    let (x, y): (u64, u64) =
                        (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                    if x > y || y - x >= MAX_HOSTS.saturating_sub(out.len()) as u64 {
                        return Err(if x > y {
                            bad()
                        } else {
                            MapError::input(
                                "hostlist",
                                format!("'{item}' takes the list past {MAX_HOSTS} hosts"),
                            )
                        });
                    }
                    for k in x..=y {
                        out.push(format!("{pre}{k:0width$}{post}"));
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(MapError::input("hostlist", "empty"));
    }
    Ok(out)
}

impl Cluster {
    /// `NAMES:SLOTS[,NAMES:SLOTS...]` with Slurm hostlists (`node[1-4]:16,big1:32`), or
    /// `MxS` for M machines `node0..` of S slots.
    pub fn parse(spec: &str) -> Result<Cluster> {
        let bad = |m: String| MapError::input(format!("--nodes '{spec}'"), m);
        let mut machines = Vec::new();
        if let Some((m, s)) = spec
            .split_once('x')
            .filter(|(m, _)| m.parse::<usize>().is_ok())
        {
            let (m, s): (usize, usize) = (
                m.parse().map_err(|_| bad("bad machine count".into()))?,
                s.parse()
                    .map_err(|_| bad(format!("'{s}' is not a slot count")))?,
            );
            if m == 0 || s == 0 || m > 1 << 16 {
                return Err(bad("expected 1..65536 machines of >= 1 slot".into()));
            }
            for k in 0..m {
                machines.push(Machine {
                    name: format!("node{k}"),
                    slots: s,
                });
            }
        } else {
            // Split on the commas outside brackets, then NAME:SLOTS.
            let mut depth = 0;
            let mut parts = vec![String::new()];
            for c in spec.chars() {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    ',' if depth == 0 => {
                        parts.push(String::new());
                        continue;
                    }
                    _ => {}
                }
                parts.last_mut().expect("non-empty").push(c);
            }
            for p in parts.iter().filter(|p| !p.trim().is_empty()) {
                let (names, slots) = p
                    .rsplit_once(':')
                    .ok_or_else(|| bad(format!("'{p}' has no :SLOTS")))?;
                let slots: usize = slots
                    .trim()
                    .parse()
                    .ok()
                    .filter(|&s| s > 0)
                    .ok_or_else(|| bad(format!("'{slots}' is not a slot count >= 1")))?;
                for name in expand_hostlist(names).map_err(|e| bad(e.to_string()))? {
                    machines.push(Machine { name, slots });
                }
            }
        }
        if machines.is_empty() {
            return Err(bad("no machines".into()));
        }
        Ok(Cluster {
            machines,
            switches: Vec::new(),
        })
    }

    /// Add the switch tree of a Slurm `topology.conf` (`SwitchName=s1 Nodes=node[1-4]`,
    /// `SwitchName=top Switches=s[1-2]`). Nodes of the job that no switch names are an error.
    pub fn with_topology_conf(mut self, text: &str, what: &str) -> Result<Cluster> {
        let mut sw: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut name = None;
            let (mut nodes, mut subs) = (Vec::new(), Vec::new());
            for kv in line.split_whitespace() {
                let (k, v) = kv.split_once('=').ok_or_else(|| {
                    MapError::input(
                        format!("{what}:{}", i + 1),
                        format!("'{kv}' is not Key=Value"),
                    )
                })?;
                match k.to_ascii_lowercase().as_str() {
                    "switchname" => name = Some(v.to_string()),
                    "nodes" => nodes = expand_hostlist(v)?,
                    "switches" => subs = expand_hostlist(v)?,
                    _ => {} // LinkSpeed and the like do not change the tree.
                }
            }
            let name = name.ok_or_else(|| {
                MapError::input(format!("{what}:{}", i + 1), "line has no SwitchName=")
            })?;
            sw.push((name, nodes, subs));
        }
        let mut switches = Vec::new();
        for (name, nodes, subs) in &sw {
            let machines = nodes
                .iter()
                .filter_map(|n| self.machines.iter().position(|m| &m.name == n))
                .collect();
            let switches_below = subs
                .iter()
                .map(|s| {
                    sw.iter().position(|x| &x.0 == s).ok_or_else(|| {
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

/// Ranks → machines (index into `c.machines`) for the graph, hierarchical when `c` has
/// switches. Deterministic.
pub fn map_to_machines(g: &RankGraph, c: &Cluster) -> Result<Vec<usize>> {
    let counts = rank_counts(c, g.n())?;
    let t = tree(c);
    let mut machine = vec![usize::MAX; g.n()];
    let all: Vec<usize> = (0..g.n()).collect();
    split(g, &t, &all, &counts, &mut machine);
    Ok(machine)
}

fn split(g: &RankGraph, t: &TreeNode, members: &[usize], counts: &[usize], out: &mut [usize]) {
    if t.children.is_empty() {
        for &r in members {
            out[r] = t.machines[0];
        }
        return;
    }
    let sizes: Vec<usize> = t
        .children
        .iter()
        .map(|ch| ch.machines.iter().map(|&m| counts[m]).sum())
        .collect();
    let part = partition(g, members, &sizes);
    for (k, ch) in t.children.iter().enumerate() {
        let sub: Vec<usize> = members
            .iter()
            .zip(&part)
            .filter(|(_, &p)| p == k)
            .map(|(&r, _)| r)
            .collect();
        split(g, ch, &sub, counts, out);
    }
}

const UNSET: u32 = u32::MAX;

/// Split `members` into parts of exactly `sizes` (summing to `members.len()`): greedy graph
/// growing per part, then boundary swaps. Returns the part of each member, in member order.
pub fn partition(g: &RankGraph, members: &[usize], sizes: &[usize]) -> Vec<usize> {
    let n = g.n();
    // part[r]: UNSET for members not yet placed, UNSET - 1 for ranks outside this split.
    let outside = UNSET - 1;
    let mut part = vec![outside; n];
    for &r in members {
        part[r] = UNSET;
    }
    let mut conn = vec![0.0f64; n];
    let mut touched: Vec<usize> = Vec::new();
    // ext[r]: bytes an unplaced member exchanges with everything placed so far. A new part
    // starts next to the parts before it (largest ext), so the parts tile the graph instead
    // of leaving scattered fragments for the last ones (graph growing as in METIS' GGGP).
    let mut ext = vec![0.0f64; n];
    let mut seeds: BinaryHeap<(u64, Reverse<usize>)> = BinaryHeap::new();
    let mut next_seed = 0usize;
    let mut first = Some(first_seed(g, members, &part, outside));
    for (p, &size) in sizes.iter().enumerate() {
        let mut heap: BinaryHeap<(u64, Reverse<usize>)> = BinaryHeap::new();
        for &r in &touched {
            conn[r] = 0.0;
        }
        touched.clear();
        let mut taken = 0;
        while taken < size {
            // The unplaced member exchanging most with the part; else a seed next to the
            // placed ones; else the next member in order.
            let mut pick = None;
            while let Some((key, Reverse(r))) = heap.pop() {
                if part[r] == UNSET && conn[r].to_bits() == key {
                    pick = Some(r);
                    break;
                }
            }
            if pick.is_none() {
                while let Some((key, Reverse(r))) = seeds.pop() {
                    if part[r] == UNSET && ext[r].to_bits() == key {
                        pick = Some(r);
                        break;
                    }
                }
            }
            let r = match pick.or_else(|| first.take()) {
                Some(r) => r,
                None => {
                    while part[members[next_seed]] != UNSET {
                        next_seed += 1;
                    }
                    members[next_seed]
                }
            };
            part[r] = p as u32;
            taken += 1;
            for (s, w, _) in g.neighbours(r) {
                if part[s] == UNSET {
                    if conn[s] == 0.0 {
                        touched.push(s);
                    }
                    conn[s] += w;
                    heap.push((conn[s].to_bits(), Reverse(s)));
                    ext[s] += w;
                    seeds.push((ext[s].to_bits(), Reverse(s)));
                }
            }
        }
    }
    refine(g, members, &mut part, sizes.len());
    members.iter().map(|&r| part[r] as usize).collect()
}

/// Where the first part starts: at the edge of the set, so the parts peel it from one side.
/// The member exchanging most with ranks outside the set (placed by a level above, so the
/// first part sits next to them), else the member a breadth-first search from the first
/// member reaches last (a pseudo-peripheral rank, as in METIS' graph growing).
fn first_seed(g: &RankGraph, members: &[usize], part: &[u32], outside: u32) -> usize {
    let mut best = (0.0, members[0]);
    for &r in members {
        let c: f64 = g
            .neighbours(r)
            .filter(|&(s, _, _)| part[s] == outside)
            .map(|(_, w, _)| w)
            .sum();
        if c > best.0 {
            best = (c, r);
        }
    }
    if best.0 > 0.0 {
        return best.1;
    }
    let mut seen = std::collections::HashSet::with_capacity(members.len());
    let mut queue = std::collections::VecDeque::from([members[0]]);
    seen.insert(members[0]);
    let mut last = members[0];
    while let Some(r) = queue.pop_front() {
        last = r;
        for (s, _, _) in g.neighbours(r) {
            if part[s] == UNSET && seen.insert(s) {
                queue.push_back(s);
            }
        }
    }
    last
}

/// Bytes `r` exchanges with part `p`.
fn conn_to(g: &RankGraph, part: &[u32], r: usize, p: u32) -> f64 {
    g.neighbours(r)
        .filter(|&(s, _, _)| part[s] == p)
        .map(|(_, w, _)| w)
        .sum()
}

/// Kernighan–Lin style boundary swaps: a rank whose neighbours pull it to another part is
/// swapped with a rank of that part (among its neighbours' neighbours) when the swap lowers
/// the cut. Sizes never change. A few passes; each applies only strictly improving swaps.
fn refine(g: &RankGraph, members: &[usize], part: &mut [u32], parts: usize) {
    if parts < 2 {
        return;
    }
    let mut stamp = vec![0u32; g.n()];
    let mut pass_id = 0u32;
    for _ in 0..4 {
        let mut improved = 0.0;
        for &r in members {
            let a = part[r];
            let inside = conn_to(g, part, r, a);
            // The part r is pulled to most.
            let mut best: Option<(u32, f64)> = None;
            for (s, _, _) in g.neighbours(r) {
                let b = part[s];
                if b == a || b >= parts as u32 || best.is_some_and(|(x, _)| x == b) {
                    continue;
                }
                let c = conn_to(g, part, r, b);
                if c > inside && best.is_none_or(|(_, bc)| c > bc) {
                    best = Some((b, c));
                }
            }
            let Some((b, cb)) = best else { continue };
            let gain_r = cb - inside;
            // Partner: a rank of b, two hops from r, that gains most by moving to a.
            pass_id = pass_id.wrapping_add(1);
            let mut partner: Option<(usize, f64)> = None;
            for (t, _, _) in g.neighbours(r) {
                for (s, _, _) in g.neighbours(t) {
                    if s == r || part[s] != b || stamp[s] == pass_id {
                        continue;
                    }
                    stamp[s] = pass_id;
                    let w_rs: f64 = g
                        .neighbours(r)
                        .find(|&(x, _, _)| x == s)
                        .map_or(0.0, |(_, w, _)| w);
                    let gain =
                        gain_r + conn_to(g, part, s, a) - conn_to(g, part, s, b) - 2.0 * w_rs;
                    if gain > 1e-12 && partner.is_none_or(|(_, pg)| gain > pg) {
                        partner = Some((s, gain));
                    }
                }
            }
            if let Some((s, gain)) = partner {
                part[r] = b;
                part[s] = a;
                improved += gain;
            }
        }
        if improved <= 0.0 {
            break;
        }
    }
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
    fn shuffled_ring(n: usize) -> (RankGraph, Vec<usize>) {
        let perm: Vec<usize> = (0..n).map(|i| (i * 7 + 3) % n).collect();
        let edges: Vec<_> = (0..n)
            .map(|i| (perm[i], perm[(i + 1) % n], 100.0, 1.0))
            .collect();
        (RankGraph::from_edges(n, &edges).unwrap(), perm)
    }

    #[test]
    fn ranges_adding_up_past_the_limit_are_refused_before_allocating() {
        // Found writing the slurm_layout fuzz target: each range was bounded, their sum not.
        let list = ["n[0-1048575]"; 2].join(",");
        let e = expand_hostlist(&list).unwrap_err().to_string();
        assert_eq!(
            e,
            "hostlist: 'n[0-1048575]' takes the list past 1048576 hosts"
        );
        assert_eq!(expand_hostlist("n[1-1048576]").unwrap().len(), MAX_HOSTS);
        let e = expand_hostlist("n[1-1048576],big").unwrap_err().to_string();
        assert_eq!(e, "hostlist: 'big' takes the list past 1048576 hosts");
    }

    #[test]
    fn hostlists_expand_with_padding() {
        assert_eq!(
            expand_hostlist("n[08-10,3],big").unwrap(),
            ["n08", "n09", "n10", "n3", "big"]
        );
        let c = Cluster::parse("node[1-2]:4,fat:8").unwrap();
        assert_eq!(c.slots(), 16);
        assert_eq!(c.machines[1].name, "node2");
        assert_eq!(Cluster::parse("3x2").unwrap().machines[2].name, "node2");
        assert!(Cluster::parse("node1")
            .unwrap_err()
            .to_string()
            .contains("no :SLOTS"));
        assert!(expand_hostlist("n[3-1]").is_err());
    }

    #[test]
    fn a_shuffled_ring_is_cut_only_where_it_must_be() {
        let (g, _) = shuffled_ring(32);
        let c = Cluster::parse("4x8").unwrap();
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
        let conf = "SwitchName=s1 Nodes=node[0-1]\nSwitchName=s2 Nodes=node[2-3]\n\
                    SwitchName=top Switches=s[1-2]\n";
        let c = Cluster::parse("4x8")
            .unwrap()
            .with_topology_conf(conf, "t")
            .unwrap();
        let m = map_to_machines(&g, &c).unwrap();
        assert_eq!(g.cut(&m), 400.0);
        // Between switches only 2 cuts: map machines to their switch.
        let sw: Vec<usize> = m.iter().map(|&x| x / 2).collect();
        assert_eq!(g.cut(&sw), 200.0);
        let e = Cluster::parse("4x8")
            .unwrap()
            .with_topology_conf("SwitchName=s1 Nodes=node[0-1]\n", "t.conf")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("node node2 of the job is under no switch"),
            "{e}"
        );
    }

    #[test]
    fn counts_follow_slots_and_baselines_fill_them() {
        let c = Cluster::parse("a:4,b:4,c:8").unwrap();
        assert_eq!(rank_counts(&c, 16).unwrap(), [4, 4, 8]);
        assert_eq!(rank_counts(&c, 8).unwrap(), [2, 2, 4]);
        assert!(rank_counts(&c, 17).is_err());
        assert_eq!(block(&c, 8).unwrap(), [0, 0, 1, 1, 2, 2, 2, 2]);
        assert_eq!(cyclic(&c, 8).unwrap(), [0, 1, 2, 0, 1, 2, 2, 2]);
    }
}
