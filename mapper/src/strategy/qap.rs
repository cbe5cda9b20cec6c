//! The QAP view of a mapping (digest 002, §1.1): thread i sits on slot π(i) and the cost is
//! `Σ_{i<j} a_ij · b(π(i), π(j))` (each pair once; the matrix is symmetric).
//!
//! Slots are the PUs listed NUMA node by NUMA node, each node's PUs in tree order, the
//! "cores ordered linearly, node by node" model of the paper. With fewer threads than PUs the
//! spare slots stay empty and moving a thread onto an empty slot is an ordinary exchange. With
//! more threads than PUs every PU appears ⌈n/P⌉ times (oversubscription, as `compact` wraps).
//!
//! The distance `b` is the hop count between two PUs in the topology tree (edges up to their
//! lowest common ancestor and down again): 0 on the same PU, 2 for two PUs of one core, larger
//! across caches, NUMA nodes and packages. Only its order matters to the strategies here.

use crate::matrix::CommMatrix;
use crate::topology::Topology;
use rand::Rng;
use std::ops::Range;

/// The linear slot model over a restricted topology.
#[derive(Debug, Clone)]
pub struct Slots {
    /// Slot -> index into `Topology::pus`.
    pub pu: Vec<usize>,
    /// Slot -> position in `Topology::numa`.
    pub node: Vec<usize>,
    /// NUMA position -> its slots (contiguous).
    pub nodes: Vec<Range<usize>>,
}

impl Slots {
    /// Slots for `n` threads: every PU once, or ⌈n/P⌉ times when `n` exceeds the PU count.
    pub fn new(topo: &Topology, n: usize) -> Slots {
        let p = topo.pus.len().max(1);
        let reps = n.div_ceil(p).max(1);
        let mut s = Slots {
            pu: Vec::new(),
            node: Vec::new(),
            nodes: Vec::new(),
        };
        for (k, node) in topo.numa.iter().enumerate() {
            let start = s.pu.len();
            for r in 0..reps * node.pus.len() {
                s.pu.push(node.pus[r % node.pus.len()]);
                s.node.push(k);
            }
            s.nodes.push(start..s.pu.len());
        }
        s
    }

    pub fn len(&self) -> usize {
        self.pu.len()
    }
}

/// Hop counts between every pair of PUs of a topology (P×P, row-major).
#[derive(Debug, Clone)]
pub struct PuDistance {
    p: usize,
    d: Vec<f64>,
}

impl PuDistance {
    /// Tree hop counts ([`Topology::hops`], the same as the `hop_bytes` metric uses), so the
    /// QAP cost of a mapping equals its `hop_bytes`.
    pub fn hops(topo: &Topology) -> PuDistance {
        let p = topo.pus.len();
        let mut d = vec![0.0; p * p];
        for a in 0..p {
            for b in (a + 1)..p {
                let h = f64::from(topo.hops(a, b));
                d[a * p + b] = h;
                d[b * p + a] = h;
            }
        }
        PuDistance { p, d }
    }

    #[inline]
    pub fn get(&self, a: usize, b: usize) -> f64 {
        self.d[a * self.p + b]
    }

    #[inline]
    fn row(&self, a: usize) -> &[f64] {
        &self.d[a * self.p..(a + 1) * self.p]
    }
}

/// A mapping of threads onto slots, kept in both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    /// Thread -> slot.
    pub pos: Vec<usize>,
    /// Slot -> thread (None = empty slot).
    pub occ: Vec<Option<usize>>,
}

impl Mapping {
    /// From thread -> slot positions (distinct, each < `slots`).
    pub fn from_pos(pos: Vec<usize>, slots: usize) -> Mapping {
        let mut occ = vec![None; slots];
        for (t, &s) in pos.iter().enumerate() {
            debug_assert!(occ[s].is_none(), "slot {s} used twice");
            occ[s] = Some(t);
        }
        Mapping { pos, occ }
    }

    /// Exchange the contents of slots `s` and `t` (either may be empty).
    pub fn swap(&mut self, s: usize, t: usize) {
        self.occ.swap(s, t);
        if let Some(x) = self.occ[s] {
            self.pos[x] = s;
        }
        if let Some(y) = self.occ[t] {
            self.pos[y] = t;
        }
    }

    /// Thread -> index into `Topology::pus`.
    pub fn pus(&self, slots: &Slots) -> Vec<usize> {
        self.pos.iter().map(|&s| slots.pu[s]).collect()
    }
}

/// A QAP instance: communication, slots and distances.
pub struct Qap<'a> {
    pub comm: &'a CommMatrix,
    pub slots: &'a Slots,
    pub dist: &'a PuDistance,
    /// Per thread, the threads it communicates with and how much: exchanges only need
    /// these, which makes them O(degree) instead of O(n) on sparse patterns.
    nbrs: Vec<Vec<(usize, f64)>>,
}

impl<'a> Qap<'a> {
    pub fn new(comm: &'a CommMatrix, slots: &'a Slots, dist: &'a PuDistance) -> Self {
        let nbrs = (0..comm.n())
            .map(|i| {
                comm.row(i)
                    .iter()
                    .enumerate()
                    .filter(|&(j, &w)| j != i && w != 0.0)
                    .map(|(j, &w)| (j, w))
                    .collect()
            })
            .collect();
        Qap {
            comm,
            slots,
            dist,
            nbrs,
        }
    }

    /// Distance between two slots.
    #[inline]
    pub fn b(&self, s: usize, t: usize) -> f64 {
        self.dist.get(self.slots.pu[s], self.slots.pu[t])
    }

    /// Eq. (1): Σ_{i<j} a_ij · b(π(i), π(j)).
    pub fn cost(&self, pos: &[usize]) -> f64 {
        let n = pos.len();
        let mut c = 0.0;
        for i in 0..n {
            let row = self.comm.row(i);
            let di = self.dist.row(self.slots.pu[pos[i]]);
            for j in (i + 1)..n {
                if row[j] != 0.0 {
                    c += row[j] * di[self.slots.pu[pos[j]]];
                }
            }
        }
        c
    }

    /// Cost change of exchanging the contents of slots `s` and `t`, in O(degree).
    pub fn delta(&self, m: &Mapping, s: usize, t: usize) -> f64 {
        let (x, y) = (m.occ[s], m.occ[t]);
        let ds = self.dist.row(self.slots.pu[s]);
        let dt = self.dist.row(self.slots.pu[t]);
        let mut d = 0.0;
        // x moves s -> t, y moves t -> s; the x–y pair keeps its distance.
        if let Some(x) = x {
            for &(k, w) in &self.nbrs[x] {
                if Some(k) != y {
                    let q = self.slots.pu[m.pos[k]];
                    d += w * (dt[q] - ds[q]);
                }
            }
        }
        if let Some(y) = y {
            for &(k, w) in &self.nbrs[y] {
                if Some(k) != x {
                    let q = self.slots.pu[m.pos[k]];
                    d -= w * (dt[q] - ds[q]);
                }
            }
        }
        d
    }
}

/// Relative tolerance below which a cost change counts as no change (float noise must not
/// make the search accept a swap that does not really help).
pub fn tolerance(cost: f64) -> f64 {
    1e-12 * (1.0 + cost.abs())
}

/// What a pair-exchange run did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeStats {
    pub initial: f64,
    pub cost: f64,
    pub evaluated: usize,
    pub accepted: usize,
}

/// Pair-Exchange (digest 002 §4.3, after Brandfass et al.): `iters` times pick a random slot
/// pair inside one of `groups` (slot ranges; a pair never crosses groups) and exchange their
/// contents when that strictly lowers the cost. Returns the statistics; `m` is updated in place.
pub fn pair_exchange<R: Rng>(
    q: &Qap,
    m: &mut Mapping,
    groups: &[Range<usize>],
    iters: usize,
    rng: &mut R,
) -> PeStats {
    let mut cost = q.cost(&m.pos);
    let mut st = PeStats {
        initial: cost,
        cost,
        evaluated: 0,
        accepted: 0,
    };
    // Only groups with an occupied slot and room to exchange; pick the first slot among the
    // threads so that sparse mappings (few threads, many PUs) do not waste iterations.
    let group_of: Vec<Option<usize>> = {
        let mut g = vec![None; m.occ.len()];
        for (gi, r) in groups.iter().enumerate() {
            for s in r.clone() {
                g[s] = Some(gi);
            }
        }
        g
    };
    let movable: Vec<usize> = (0..m.pos.len())
        .filter(|&t| group_of[m.pos[t]].is_some_and(|g| groups[g].len() > 1))
        .collect();
    if movable.is_empty() {
        return st;
    }
    for _ in 0..iters {
        let x = movable[rng.gen_range(0..movable.len())];
        let s = m.pos[x];
        let r = &groups[group_of[s].expect("movable threads lie in a group")];
        let t = rng.gen_range(r.start..r.end - 1);
        let t = if t >= s { t + 1 } else { t };
        st.evaluated += 1;
        let d = q.delta(m, s, t);
        if d < -tolerance(cost) {
            m.swap(s, t);
            cost += d;
            st.accepted += 1;
        }
    }
    st.cost = cost;
    st
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::topology::{Level, NodeSpec};
    use proptest::prelude::*;
    use rand::Rng;
    use rand::SeedableRng;

    /// `packages` × `numa` per package × `cores` per node × `pus` per core, OS indexes in order.
    pub(crate) fn topo(packages: u32, numa: u32, cores: u32, pus: u32) -> Topology {
        let mut pu = 0;
        let mut core = 0;
        let mut node = 0;
        let pk = (0..packages)
            .map(|p| {
                let nodes = (0..numa)
                    .map(|_| {
                        let cs = (0..cores)
                            .map(|_| {
                                let ps = (0..pus)
                                    .map(|_| {
                                        pu += 1;
                                        NodeSpec::new(Level::Pu, pu - 1, vec![])
                                    })
                                    .collect();
                                core += 1;
                                NodeSpec::new(Level::Core, core - 1, ps)
                            })
                            .collect();
                        node += 1;
                        NodeSpec::new(Level::Numa, node - 1, cs)
                    })
                    .collect();
                NodeSpec::new(Level::Package, p, nodes)
            })
            .collect();
        Topology::build(&NodeSpec::new(Level::Machine, 0, pk), "test").unwrap()
    }

    #[test]
    fn hops_follow_the_tree() {
        let t = topo(2, 1, 2, 2);
        let d = PuDistance::hops(&t);
        assert_eq!(d.get(0, 0), 0.0);
        assert_eq!(d.get(0, 1), 2.0); // same core
        assert_eq!(d.get(0, 2), 4.0); // same NUMA node
        assert_eq!(d.get(0, 4), 8.0); // other package
    }

    #[test]
    fn slots_oversubscribe_node_by_node() {
        let t = topo(1, 2, 1, 2);
        let s = Slots::new(&t, 6);
        assert_eq!(s.len(), 8);
        assert_eq!(s.nodes, vec![0..4, 4..8]);
        assert_eq!(s.pu, vec![0, 1, 0, 1, 2, 3, 2, 3]);
        assert_eq!(Slots::new(&t, 3).len(), 4);
    }

    pub(crate) fn random_comm(n: usize, seed: u64, density: f64) -> CommMatrix {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut c = CommMatrix::zeros(n);
        for i in 0..n {
            for j in (i + 1)..n {
                if rng.gen_bool(density) {
                    c.add_sym(i, j, rng.gen_range(1..100) as f64);
                }
            }
        }
        c
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The O(n) delta equals the recomputed cost difference, for occupied and empty slots.
        #[test]
        fn delta_matches_recomputed_cost(n in 2usize..14, seed in 0u64..1000, s in 0usize..16, t in 0usize..16) {
            let topo = topo(2, 1, 2, 2);
            let comm = random_comm(n, seed, 0.6);
            let slots = Slots::new(&topo, n);
            let dist = PuDistance::hops(&topo);
            let q = Qap::new(&comm, &slots, &dist);
            let (s, t) = (s % slots.len(), t % slots.len());
            let mut m = Mapping::from_pos((0..n).collect(), slots.len());
            let before = q.cost(&m.pos);
            let d = q.delta(&m, s, t);
            m.swap(s, t);
            let after = q.cost(&m.pos);
            prop_assert!((after - before - d).abs() < 1e-9 * (1.0 + before));
        }

        /// Pair-exchange never makes the mapping worse, whatever the start and the budget.
        #[test]
        fn pair_exchange_never_increases_cost(n in 1usize..20, seed in 0u64..1000, iters in 0usize..400) {
            let topo = topo(2, 2, 2, 2);
            let comm = random_comm(n, seed, 0.4);
            let slots = Slots::new(&topo, n);
            let dist = PuDistance::hops(&topo);
            let q = Qap::new(&comm, &slots, &dist);
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut pos: Vec<usize> = (0..slots.len()).collect();
            rand::seq::SliceRandom::shuffle(pos.as_mut_slice(), &mut rng);
            pos.truncate(n);
            let mut m = Mapping::from_pos(pos, slots.len());
            let start = q.cost(&m.pos);
            let st = pair_exchange(&q, &mut m, std::slice::from_ref(&(0..slots.len())), iters, &mut rng);
            let end = q.cost(&m.pos);
            prop_assert!(end <= start + 1e-9 * (1.0 + start));
            prop_assert!((st.cost - end).abs() < 1e-6 * (1.0 + end));
            prop_assert!(st.evaluated <= iters);
        }
    }
}
