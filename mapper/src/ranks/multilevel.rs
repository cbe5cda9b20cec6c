//! Multilevel partitioning of a rank graph into parts of exact sizes.
//!
//! The scheme of METIS and Scotch, written for one constraint they treat loosely: Slurm gives
//! every machine an exact number of ranks, so every part here has exactly its size (a plan
//! that moves one rank to another machine is not a plan Slurm can run).
//!
//! - **Recursive bisection**: the parts are split into two halves (their sizes summed) and the
//!   graph is bisected to those two weights, then each side again, down to single parts.
//! - **Each bisection is multilevel**: the graph is coarsened by heavy-edge matching (pairs of
//!   ranks joined by their heaviest edge become one vertex weighing both) until ~100 vertices
//!   are left; the coarsest graph is bisected by greedy graph growing from several random
//!   seeds, each refined, the best kept; then the bisection is projected back level by level
//!   and refined at each by Fiduccia–Mattheyses (FM) passes. Coarse levels may miss the exact
//!   weights by their heaviest vertex; the finest level has unit weights and must hit them
//!   exactly, so its FM pass first restores the exact sizes (best-gain moves from the heavy
//!   side) and only keeps prefixes of moves that end exactly balanced.
//! - **k-way refinement**: bisection never revisits a boundary drawn earlier, so after it every
//!   pair of parts that exchange bytes is refined again by an exact-size FM on the ranks of
//!   those two parts (moving a rank between two parts changes no edge to a third), pairs with
//!   most bytes between them first, until a sweep gains almost nothing.
//!
//! Deterministic: the random choices come from a fixed seed.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Vertices at which coarsening stops.
const COARSEST: usize = 100;
/// Greedy-growing tries on the coarsest graph.
const INITIAL_TRIES: usize = 8;
/// FM passes per level (each stops early when it gains nothing).
const FM_PASSES: usize = 8;
/// Multilevel bisections tried per split, the least cut kept: as many as fit in a budget of
/// ~2^20 arcs × tries for the whole graph, between 2 and 8. Tries are what bring a bisection
/// out of a poor local minimum: on a 3-D stencil of 16 384 ranks one try leaves the cut ~3 %
/// above the cube tiling and two reach it or come within 0.7 %; on a 64 × 64 grid with
/// diagonals 8 tries reach the square tiling every time, 2 stay ~2 % above.
const TRY_BUDGET: usize = 1 << 20;
const MIN_TRIES: usize = 2;
const MAX_TRIES: usize = 8;
/// Vertices from which the halves of a bisection are split in parallel.
const PARALLEL_MIN: usize = 4096;
/// k-way refinement sweeps over the pairs of parts.
const PAIR_SWEEPS: usize = 2;

/// A weighted graph in compressed rows: vertex `v`'s edges are `xadj[v]..xadj[v + 1]`, to
/// `adj[e]` weighing `ew[e]` (each edge stored in both rows); `vw[v]` ranks merged into `v`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wg {
    pub xadj: Vec<usize>,
    pub adj: Vec<u32>,
    pub ew: Vec<f64>,
    pub vw: Vec<u32>,
}

impl Wg {
    /// The rank graph with its bytes as edge weights, one rank per vertex.
    pub fn from_rank_graph(g: &super::RankGraph) -> Wg {
        let (start, to, bytes) = g.csr();
        Wg {
            xadj: start.to_vec(),
            adj: to.to_vec(),
            ew: bytes.to_vec(),
            vw: vec![1; g.n()],
        }
    }

    pub fn n(&self) -> usize {
        self.vw.len()
    }

    fn edges(&self, v: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        (self.xadj[v]..self.xadj[v + 1]).map(move |e| (self.adj[e] as usize, self.ew[e]))
    }

    fn total_vw(&self) -> i64 {
        self.vw.iter().map(|&w| w as i64).sum()
    }

    /// The subgraph induced by `verts` (its vertex k is `verts[k]`). `map` must hold
    /// `u32::MAX` for every vertex on entry and does again on return.
    pub fn induced(&self, verts: &[u32], map: &mut [u32]) -> Wg {
        for (k, &v) in verts.iter().enumerate() {
            map[v as usize] = k as u32;
        }
        let mut s = Wg {
            xadj: Vec::with_capacity(verts.len() + 1),
            adj: Vec::new(),
            ew: Vec::new(),
            vw: Vec::with_capacity(verts.len()),
        };
        s.xadj.push(0);
        for &v in verts {
            for (u, w) in self.edges(v as usize) {
                let k = map[u];
                if k != u32::MAX {
                    s.adj.push(k);
                    s.ew.push(w);
                }
            }
            s.xadj.push(s.adj.len());
            s.vw.push(self.vw[v as usize]);
        }
        for &v in verts {
            map[v as usize] = u32::MAX;
        }
        s
    }

    /// One level of heavy-edge matching: vertices visited in random order, each unmatched one
    /// joined with the unmatched neighbour it shares the heaviest edge with (ties: the lighter
    /// neighbour, so coarse vertices stay alike), the pair weighing at most `max_vw`. Returns
    /// the coarse graph and each vertex's coarse vertex, or `None` when matching shrinks the
    /// graph by less than 10 % (nothing left to gain by coarsening further).
    fn coarsen(&self, rng: &mut ChaCha8Rng, max_vw: u32) -> Option<(Wg, Vec<u32>)> {
        let n = self.n();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.shuffle(rng);
        const NONE: u32 = u32::MAX;
        let mut mate = vec![NONE; n];
        for &v in &order {
            let v = v as usize;
            if mate[v] != NONE {
                continue;
            }
            let mut best: Option<(usize, f64)> = None;
            for (u, w) in self.edges(v) {
                if mate[u] != NONE || u == v || self.vw[u] + self.vw[v] > max_vw {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some((b, bw)) => w > bw || (w == bw && self.vw[u] < self.vw[b]),
                };
                if better {
                    best = Some((u, w));
                }
            }
            match best {
                Some((u, _)) => {
                    mate[v] = u as u32;
                    mate[u] = v as u32;
                }
                None => mate[v] = v as u32,
            }
        }
        let mut cmap = vec![NONE; n];
        let mut cn = 0u32;
        for v in 0..n {
            if cmap[v] == NONE {
                cmap[v] = cn;
                cmap[mate[v] as usize] = cn;
                cn += 1;
            }
        }
        if cn as usize * 10 > n * 9 {
            return None;
        }
        let cn = cn as usize;
        let mut c = Wg {
            xadj: Vec::with_capacity(cn + 1),
            adj: Vec::with_capacity(self.adj.len() / 2),
            ew: Vec::with_capacity(self.adj.len() / 2),
            vw: vec![0; cn],
        };
        c.xadj.push(0);
        // pos[cu]: where coarse neighbour cu sits in the row being built (NONE = not yet).
        let mut pos = vec![usize::MAX; cn];
        let mut done = vec![false; cn];
        for v in 0..n {
            let cv = cmap[v] as usize;
            if done[cv] {
                continue;
            }
            done[cv] = true;
            let row = c.adj.len();
            let m = mate[v] as usize;
            c.vw[cv] = self.vw[v] + if m != v { self.vw[m] } else { 0 };
            let pair = [v, m];
            for &x in &pair[..if m != v { 2 } else { 1 }] {
                for (u, w) in self.edges(x) {
                    let cu = cmap[u] as usize;
                    if cu == cv {
                        continue;
                    }
                    if pos[cu] == usize::MAX {
                        pos[cu] = c.adj.len();
                        c.adj.push(cu as u32);
                        c.ew.push(w);
                    } else {
                        c.ew[pos[cu]] += w;
                    }
                }
            }
            for &cu in &c.adj[row..] {
                pos[cu as usize] = usize::MAX;
            }
            c.xadj.push(c.adj.len());
        }
        // Rows were built in order of their first fine vertex, which is coarse numbering
        // order (cmap numbers coarse vertices by first fine vertex too).
        Some((c, cmap))
    }
}

/// A gain as a heap key: larger first, then the later insertion (LIFO among equal gains keeps
/// a pass's moves next to each other).
#[derive(PartialEq)]
struct Key(f64, u64, u32);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

/// Two-way FM state: side of every vertex, bytes to its own side (`id`) and to the other
/// (`ed`), and the weight of side 0.
struct Bisection<'a> {
    g: &'a Wg,
    side: Vec<u8>,
    id: Vec<f64>,
    ed: Vec<f64>,
    w0: i64,
    cut: f64,
}

impl<'a> Bisection<'a> {
    fn new(g: &'a Wg, side: Vec<u8>) -> Self {
        let n = g.n();
        let (mut id, mut ed) = (vec![0.0; n], vec![0.0; n]);
        let mut w0 = 0;
        let mut cut = 0.0;
        for v in 0..n {
            if side[v] == 0 {
                w0 += g.vw[v] as i64;
            }
            for (u, w) in g.edges(v) {
                if side[u] == side[v] {
                    id[v] += w;
                } else {
                    ed[v] += w;
                    cut += w;
                }
            }
        }
        Bisection {
            g,
            side,
            id,
            ed,
            w0,
            cut: cut / 2.0,
        }
    }

    fn gain(&self, v: usize) -> f64 {
        self.ed[v] - self.id[v]
    }

    /// Move `v` to the other side, keeping `id`/`ed`/`w0`/`cut` exact.
    fn flip(&mut self, v: usize) {
        let g = self.g;
        self.cut -= self.gain(v);
        let to = self.side[v] ^ 1;
        self.side[v] = to;
        self.w0 += if to == 0 { 1 } else { -1 } * g.vw[v] as i64;
        std::mem::swap(&mut self.id[v], &mut self.ed[v]);
        for (u, w) in g.edges(v) {
            if self.side[u] == to {
                self.id[u] += w;
                self.ed[u] -= w;
            } else {
                self.id[u] -= w;
                self.ed[u] += w;
            }
        }
    }

    /// FM passes towards side-0 weight `target0`: a state is feasible when it is within `tol`
    /// of it. Moves may stray `slack` further while a pass explores; each pass keeps its best
    /// prefix (feasible first, then least cut, then least deviation) and undoes the rest.
    fn refine(&mut self, target0: i64, tol: i64, slack: i64, passes: usize) {
        let g = self.g;
        let n = g.n();
        if n < 2 {
            return;
        }
        let limit = (n / 10).clamp(25, 1000);
        let eps = 1e-9 * self.cut.abs().max(1.0);
        let mut locked = vec![0u32; n];
        for pass in 1..=passes as u32 {
            let start_dev = self.w0 - target0;
            let mut heaps = [BinaryHeap::new(), BinaryHeap::new()];
            let mut seq = 0u64;
            for v in 0..n {
                if self.ed[v] > 0.0 || g.xadj[v] == g.xadj[v + 1] {
                    heaps[self.side[v] as usize].push(Key(self.gain(v), seq, v as u32));
                    seq += 1;
                }
            }
            let mut moves: Vec<u32> = Vec::new();
            let better = |feas: bool, cut: f64, dev: i64, b: &(bool, f64, i64)| -> bool {
                match (feas, b.0) {
                    (true, false) => true,
                    (false, true) => false,
                    (true, true) => cut < b.1 - eps || (cut <= b.1 + eps && dev < b.2),
                    (false, false) => dev < b.2 || (dev == b.2 && cut < b.1 - eps),
                }
            };
            let mut best = (start_dev.abs() <= tol, self.cut, start_dev.abs());
            let mut best_len = 0;
            let mut interior_pushed = [false; 2];
            loop {
                let dev = self.w0 - target0;
                // Valid top of each side's heap (stale entries dropped).
                let mut tops: [Option<(f64, usize)>; 2] = [None, None];
                for s in 0..2 {
                    while let Some(Key(gk, _, v)) = heaps[s].peek() {
                        let v = *v as usize;
                        if locked[v] == pass || self.side[v] as usize != s || *gk != self.gain(v) {
                            heaps[s].pop();
                            continue;
                        }
                        tops[s] = Some((*gk, v));
                        break;
                    }
                }
                // A component with no boundary on the heavy side can still be moved.
                let heavy = if dev > 0 { 0 } else { 1 };
                if dev.abs() > tol && tops[heavy].is_none() && !interior_pushed[heavy] {
                    interior_pushed[heavy] = true;
                    for (v, &l) in locked.iter().enumerate() {
                        if self.side[v] as usize == heavy && l != pass {
                            heaps[heavy].push(Key(self.gain(v), seq, v as u32));
                            seq += 1;
                        }
                    }
                    continue;
                }
                let mut pick: Option<(f64, usize)> = None;
                for (s, top) in tops.iter().enumerate() {
                    let Some((gk, v)) = *top else { continue };
                    let w = g.vw[v] as i64;
                    let after = if s == 0 { dev - w } else { dev + w };
                    let admissible = after.abs() <= tol + slack || after.abs() < dev.abs();
                    if !admissible {
                        continue;
                    }
                    // Out of balance: the heavy side moves first, whatever the gains.
                    let balancing = dev.abs() > tol && s == heavy;
                    let take = match pick {
                        None => true,
                        Some((pg, pv)) => {
                            let p_bal = dev.abs() > tol && self.side[pv] as usize == heavy;
                            (balancing && !p_bal) || (balancing == p_bal && gk > pg)
                        }
                    };
                    if take {
                        pick = Some((gk, v));
                    }
                }
                let Some((_, v)) = pick else { break };
                heaps[self.side[v] as usize].pop();
                locked[v] = pass;
                self.flip(v);
                moves.push(v as u32);
                for (u, _) in g.edges(v) {
                    if locked[u] != pass {
                        heaps[self.side[u] as usize].push(Key(self.gain(u), seq, u as u32));
                        seq += 1;
                    }
                }
                let dev = self.w0 - target0;
                if better(dev.abs() <= tol, self.cut, dev.abs(), &best) {
                    best = (dev.abs() <= tol, self.cut, dev.abs());
                    best_len = moves.len();
                } else if moves.len() - best_len > limit {
                    break;
                }
            }
            for &v in moves[best_len..].iter().rev() {
                self.flip(v as usize);
            }
            if best_len == 0 {
                break;
            }
        }
    }
}

/// Greedy graph growing: side 0 grows from `seed`, always by the vertex whose move lowers
/// the cut most (a random vertex when nothing borders it), until it weighs `target0`.
fn grow(g: &Wg, target0: i64, seed: usize, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n = g.n();
    let mut side = vec![1u8; n];
    let mut to0 = vec![0.0f64; n];
    let deg: Vec<f64> = (0..n).map(|v| g.edges(v).map(|(_, w)| w).sum()).collect();
    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    let mut w0 = 0i64;
    let mut next = Some(seed);
    while w0 < target0 {
        let v = match next.take() {
            Some(v) => v,
            None => {
                let mut found = None;
                while let Some(Key(k, _, v)) = heap.pop() {
                    let v = v as usize;
                    if side[v] == 1 && k == 2.0 * to0[v] - deg[v] {
                        found = Some(v);
                        break;
                    }
                }
                match found {
                    Some(v) => v,
                    None => {
                        let rest: Vec<usize> = (0..n).filter(|&v| side[v] == 1).collect();
                        rest[rng.gen_range(0..rest.len())]
                    }
                }
            }
        };
        let w = g.vw[v] as i64;
        // Stop before a coarse vertex that overshoots more than stopping undershoots.
        if w0 > 0 && w0 + w - target0 > target0 - w0 {
            break;
        }
        side[v] = 0;
        w0 += w;
        for (u, ew) in g.edges(v) {
            if side[u] == 1 {
                to0[u] += ew;
                heap.push(Key(2.0 * to0[u] - deg[u], seq, u as u32));
                seq += 1;
            }
        }
    }
    side
}

/// Bisect `g` so that side 0 weighs exactly `target0` (multilevel; see the module doc).
fn bisect(g: &Wg, target0: i64, rng: &mut ChaCha8Rng) -> (Vec<u8>, f64) {
    let total = g.total_vw();
    if target0 <= 0 {
        return (vec![1; g.n()], 0.0);
    }
    if target0 >= total {
        return (vec![0; g.n()], 0.0);
    }
    // Coarse vertices stay light enough for the coarse levels to balance well.
    let max_vw = ((3 * total) / (2 * COARSEST as i64)).max(2) as u32;
    let mut levels: Vec<(Wg, Vec<u32>)> = Vec::new();
    loop {
        let cur = levels.last().map_or(g, |l| &l.0);
        if cur.n() <= COARSEST {
            break;
        }
        match cur.coarsen(rng, max_vw) {
            Some(next) => levels.push(next),
            None => break,
        }
    }
    let coarsest = levels.last().map_or(g, |l| &l.0);
    let tol_of = |h: &Wg| -> i64 {
        if std::ptr::eq(h, g) {
            0
        } else {
            h.vw.iter().copied().max().unwrap_or(1) as i64
        }
    };
    let slack_of = |h: &Wg| -> i64 { (h.vw.iter().copied().max().unwrap_or(1) as i64).max(2) };
    let mut best: Option<(bool, f64, Vec<u8>)> = None;
    let tries = INITIAL_TRIES.min(coarsest.n());
    let tol = tol_of(coarsest);
    for _ in 0..tries {
        let seed = rng.gen_range(0..coarsest.n());
        let side = grow(coarsest, target0, seed, rng);
        let mut b = Bisection::new(coarsest, side);
        b.refine(target0, tol, slack_of(coarsest), FM_PASSES);
        let feas = (b.w0 - target0).abs() <= tol;
        let better = match &best {
            None => true,
            Some((bf, bc, _)) => (feas && !bf) || (feas == *bf && b.cut < *bc),
        };
        if better {
            best = Some((feas, b.cut, b.side));
        }
    }
    let (_, mut cut, mut side) = best.expect("at least one try");
    // Project back through the levels, refining at each.
    for k in (0..levels.len()).rev() {
        let cmap = &levels[k].1;
        let fine = if k == 0 { g } else { &levels[k - 1].0 };
        let projected: Vec<u8> = cmap.iter().map(|&c| side[c as usize]).collect();
        let mut b = Bisection::new(fine, projected);
        b.refine(target0, tol_of(fine), slack_of(fine), FM_PASSES);
        side = b.side;
        cut = b.cut;
    }
    (side, cut)
}

/// Parts of exact `sizes` (summing to the total vertex weight of `g`, unit weights) by
/// recursive multilevel bisection; `part[v]` indexes `sizes`. Each bisection draws from its
/// own generator, seeded by `seed` and the parts it splits, so the result does not depend on
/// which thread ran what: the two halves of a large graph are split in parallel (`threads`
/// more threads allowed below this call).
fn recursive_bisection(
    g: &Wg,
    sizes: &[usize],
    seed: u64,
    first: usize,
    tries: usize,
    threads: usize,
) -> Vec<u32> {
    let n = g.n();
    if sizes.len() <= 1 {
        return vec![0; n];
    }
    let mut rng = ChaCha8Rng::seed_from_u64(
        seed ^ ((first as u64) << 32 | sizes.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    let half = sizes.len() / 2;
    let target0: usize = sizes[..half].iter().sum();
    let (mut side, mut best) = bisect(g, target0 as i64, &mut rng);
    for _ in 1..tries {
        let (s2, c) = bisect(g, target0 as i64, &mut rng);
        if c < best {
            best = c;
            side = s2;
        }
    }
    let halves: Vec<(Vec<u32>, Wg)> = (0..2u8)
        .map(|s| {
            let verts: Vec<u32> = (0..n as u32).filter(|&v| side[v as usize] == s).collect();
            let mut map = vec![u32::MAX; n];
            let sub = g.induced(&verts, &mut map);
            (verts, sub)
        })
        .collect();
    let (lo, hi) = (&sizes[..half], &sizes[half..]);
    let (p0, p1) = if threads > 0 && n >= PARALLEL_MIN {
        std::thread::scope(|sc| {
            let h = sc.spawn(|| {
                recursive_bisection(
                    &halves[1].1,
                    hi,
                    seed,
                    first + half,
                    tries,
                    (threads - 1) / 2,
                )
            });
            let p0 = recursive_bisection(&halves[0].1, lo, seed, first, tries, (threads - 1) / 2);
            (p0, h.join().expect("a bisection thread panicked"))
        })
    } else {
        (
            recursive_bisection(&halves[0].1, lo, seed, first, tries, 0),
            recursive_bisection(&halves[1].1, hi, seed, first + half, tries, 0),
        )
    };
    let mut part = vec![0u32; n];
    for (k, &v) in halves[0].0.iter().enumerate() {
        part[v as usize] = p0[k];
    }
    for (k, &v) in halves[1].0.iter().enumerate() {
        part[v as usize] = half as u32 + p1[k];
    }
    part
}

/// Exact-size FM between every two parts that exchange bytes (see the module doc).
fn refine_pairs(g: &Wg, part: &mut [u32], parts: usize, map: &mut [u32]) {
    if parts < 2 {
        return;
    }
    let n = g.n();
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); parts];
    for v in 0..n {
        members[part[v] as usize].push(v as u32);
    }
    let total_cut = |part: &[u32]| -> f64 {
        let mut c = 0.0;
        for v in 0..n {
            for (u, w) in g.edges(v) {
                if part[u] != part[v] {
                    c += w;
                }
            }
        }
        c / 2.0
    };
    let mut cut = total_cut(part);
    for _ in 0..PAIR_SWEEPS {
        let before = cut;
        // Bytes between each pair of parts, heaviest pairs first.
        let mut between: std::collections::HashMap<(u32, u32), f64> = Default::default();
        for v in 0..n {
            for (u, w) in g.edges(v) {
                let (a, b) = (part[v], part[u]);
                if a < b {
                    *between.entry((a, b)).or_insert(0.0) += w;
                }
            }
        }
        let mut pairs: Vec<((u32, u32), f64)> = between.into_iter().collect();
        pairs.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
        for ((a, b), _) in pairs {
            let (a, b) = (a as usize, b as usize);
            let verts: Vec<u32> = members[a].iter().chain(&members[b]).copied().collect();
            let sub = g.induced(&verts, map);
            let side: Vec<u8> = verts
                .iter()
                .map(|&v| (part[v as usize] as usize == b) as u8)
                .collect();
            let mut bis = Bisection::new(&sub, side);
            let old = bis.cut;
            bis.refine(members[a].len() as i64, 0, 2, FM_PASSES);
            if bis.cut < old {
                cut -= old - bis.cut;
                members[a].clear();
                members[b].clear();
                for (k, &v) in verts.iter().enumerate() {
                    let p = if bis.side[k] == 0 { a } else { b };
                    part[v as usize] = p as u32;
                    members[p].push(v);
                }
            }
        }
        if before - cut <= 1e-3 * before {
            break;
        }
    }
}

/// Bisection tries for a mapping whose whole graph has `arcs` arcs (see [`TRY_BUDGET`]). A
/// hierarchical mapping partitions again below every switch: the budget is the whole graph's,
/// not each call's, or the small graphs under each switch would take the most tries of all.
pub(crate) fn tries_for(arcs: usize) -> usize {
    (TRY_BUDGET / arcs.max(1)).clamp(MIN_TRIES, MAX_TRIES)
}

/// Split the vertices of `g` (unit weights) into parts of exactly `sizes`, with `tries`
/// multilevel bisections per split ([`tries_for`]); deterministic for a given `seed`.
pub(crate) fn partition(g: &Wg, sizes: &[usize], seed: u64, tries: usize) -> Vec<u32> {
    debug_assert_eq!(sizes.iter().sum::<usize>() as i64, g.total_vw());
    let mut map = vec![u32::MAX; g.n()];
    // Breadth-first numbering keeps neighbours near each other in memory, whatever order
    // the ranks came in (a shuffled rank order otherwise costs a third more time).
    let order = bfs_order(g);
    let h = g.induced(&order, &mut map);
    let g = &h;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let mut part = recursive_bisection(g, sizes, seed, 0, tries, threads);
    refine_pairs(g, &mut part, sizes.len(), &mut map);
    let mut out = vec![0u32; g.n()];
    for (k, &v) in order.iter().enumerate() {
        out[v as usize] = part[k];
    }
    out
}

/// Vertices in breadth-first order from vertex 0, each further component from its lowest
/// vertex.
fn bfs_order(g: &Wg) -> Vec<u32> {
    let n = g.n();
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for s in 0..n {
        if seen[s] {
            continue;
        }
        seen[s] = true;
        let mut head = order.len();
        order.push(s as u32);
        while head < order.len() {
            let v = order[head] as usize;
            head += 1;
            for (u, _) in g.edges(v) {
                if !seen[u] {
                    seen[u] = true;
                    order.push(u as u32);
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph of unit vertices from its rows of `(neighbour, weight)` (given both ways).
    fn from_rows(rows: &[Vec<(u32, f64)>]) -> Wg {
        let mut g = Wg {
            xadj: vec![0],
            ..Wg::default()
        };
        for r in rows {
            for &(u, w) in r {
                g.adj.push(u);
                g.ew.push(w);
            }
            g.xadj.push(g.adj.len());
            g.vw.push(1);
        }
        g
    }

    /// A path of `n` unit vertices, edge i–(i+1) weighing `w(i)`.
    fn path(n: usize, w: impl Fn(usize) -> f64) -> Wg {
        let rows: Vec<Vec<(u32, f64)>> = (0..n)
            .map(|v| {
                let mut r = Vec::new();
                if v > 0 {
                    r.push((v as u32 - 1, w(v - 1)));
                }
                if v + 1 < n {
                    r.push((v as u32 + 1, w(v)));
                }
                r
            })
            .collect();
        from_rows(&rows)
    }

    /// Grids of `x` × `y` unit edges, side by side without an edge between them.
    fn grids(shapes: &[(usize, usize)]) -> Wg {
        let mut rows: Vec<Vec<(u32, f64)>> = Vec::new();
        for &(x, y) in shapes {
            let base = rows.len();
            for j in 0..y {
                for i in 0..x {
                    let id = |a: usize, b: usize| (base + b * x + a) as u32;
                    let mut r = Vec::new();
                    if i > 0 {
                        r.push((id(i - 1, j), 1.0));
                    }
                    if i + 1 < x {
                        r.push((id(i + 1, j), 1.0));
                    }
                    if j > 0 {
                        r.push((id(i, j - 1), 1.0));
                    }
                    if j + 1 < y {
                        r.push((id(i, j + 1), 1.0));
                    }
                    rows.push(r);
                }
            }
        }
        from_rows(&rows)
    }

    fn total_edges(g: &Wg) -> f64 {
        g.ew.iter().sum::<f64>() / 2.0
    }

    #[test]
    fn coarsening_keeps_weights_and_drops_only_matched_edges() {
        let g = path(1000, |i| 1.0 + (i % 7) as f64);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (c, cmap) = g.coarsen(&mut rng, 2).unwrap();
        assert_eq!(c.total_vw(), 1000);
        assert!(c.vw.iter().all(|&w| w <= 2));
        assert!(c.n() < 900);
        // Edges inside a coarse vertex vanish; all others survive, summed.
        let inside: f64 = (0..999)
            .filter(|&i| cmap[i] == cmap[i + 1])
            .map(|i| 1.0 + (i % 7) as f64)
            .sum();
        assert_eq!(total_edges(&c), total_edges(&g) - inside);
        // Rows list each coarse neighbour once and are symmetric.
        for v in 0..c.n() {
            let mut ns: Vec<u32> = c.edges(v).map(|(u, _)| u as u32).collect();
            let before = ns.len();
            ns.sort_unstable();
            ns.dedup();
            assert_eq!(ns.len(), before);
            for (u, w) in c.edges(v) {
                assert!(c.edges(u).any(|(x, y)| x == v && y == w));
            }
        }
    }

    #[test]
    fn bisection_hits_the_exact_weight_with_a_straight_cut() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        // A 20 × 50 grid halved: one straight cut across its width.
        let g = grids(&[(20, 50)]);
        let (side, cut) = bisect(&g, 500, &mut rng);
        assert_eq!(side.iter().filter(|&&s| s == 0).count(), 500);
        assert_eq!(cut, 20.0);
        // Grids of 300 and 700 split 500 / 500: the small one whole, the large one cut
        // straight across its width of 10.
        let g = grids(&[(10, 30), (10, 70)]);
        let (side, cut) = bisect(&g, 500, &mut rng);
        assert_eq!(side.iter().filter(|&&s| s == 0).count(), 500);
        assert_eq!(cut, 10.0);
    }

    #[test]
    fn fm_repairs_a_scrambled_ring() {
        // A ring of 64 split odd/even (every edge cut): FM brings it to the 2 cuts of two arcs.
        let n = 64u32;
        let rows: Vec<Vec<(u32, f64)>> = (0..n)
            .map(|v| vec![((v + n - 1) % n, 1.0), ((v + 1) % n, 1.0)])
            .collect();
        let g = from_rows(&rows);
        let side: Vec<u8> = (0..n).map(|v| (v % 2) as u8).collect();
        let mut b = Bisection::new(&g, side);
        assert_eq!(b.cut, 64.0);
        b.refine(32, 0, 2, FM_PASSES);
        assert_eq!(b.w0, 32);
        assert_eq!(b.cut, 2.0);
    }

    #[test]
    fn partition_is_deterministic_per_seed_and_exact() {
        let g = path(300, |i| 1.0 + (i % 3) as f64);
        let sizes = [50, 100, 70, 80];
        let a = partition(&g, &sizes, 9, 2);
        assert_eq!(a, partition(&g, &sizes, 9, 2));
        for (p, &s) in sizes.iter().enumerate() {
            assert_eq!(a.iter().filter(|&&x| x as usize == p).count(), s);
        }
        // A path cut into 4 arcs: 3 cuts.
        assert_eq!((0..299).filter(|&i| a[i] != a[i + 1]).count(), 3);
    }
}
