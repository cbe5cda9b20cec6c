//! `cmlb-refine` (the project's default): the CMLB grouping followed by a Kernighan–Lin-style
//! pair-exchange refinement between NUMA groups that lowers RemoteComm while keeping the memory
//! load balanced, then the same cache-aware placement inside each NUMA node as `cmlb`.
//!
//! Why: CMLB's greedy growth balances load well but pays for it in communication — the balance
//! test pushes strongly communicating threads into other groups, and the last groups get
//! whatever is left (≈1.3× EagerMap's RemoteComm on the NAS matrices). Swapping a pair of
//! threads between two groups keeps every group's size (so capacities stay respected) and moves
//! load only by the difference of the two loads, so equal-load swaps are free for the balance
//! and unequal ones can be bounded.
//!
//! The rule: a swap of `i ∈ g` with `j ∈ h` is taken when it lowers RemoteComm, i.e. its gain
//! `D_i + D_j − 2·A[i][j] > 0` with `D_i = A(i, h) − A(i, g)` (KL), and afterwards each of the
//! two groups is no further from its load target than before the swap or than
//! `tolerance = 0.5 % of the mean group target`, whichever is larger. So no group's deviation
//! ever grows beyond `max(its deviation after CMLB, tolerance)`. Per group pair the best swap is
//! found with both candidate lists sorted by `D` and the search cut off as soon as `D_i + D_j`
//! cannot beat the best gain found; swaps repeat until a sweep over all pairs finds none.
//!
//! Two starts are always refined this way: (A) the CMLB groups, and (B) EagerMap's NUMA-level
//! groups (communication-optimal, usually unbalanced) after a repair that moves load from the most
//! over- to the most under-loaded group with the swap costing the least communication per unit
//! of imbalance removed. The result is chosen balance first: among the starts whose imbalance
//! (RMS deviation of group loads from their targets; = Load_std for equal groups) is within
//! `best imbalance + tolerance`, the one with the lower RemoteComm.
//!
//! With spare cores (the threads do not fill the machine) a third start (C) is refined: NUMA
//! groups sized by load instead of by count ([`load_sized_groups`], bounded per node by
//! [`slack_bounds`]), where the refinement and the repair may also move single threads to a
//! group with room. The balance rule is the same, and so is the choice between the starts.
//!
//! The chosen start then gets a short seeded simulated annealing over pair swaps that may pass
//! through unbalanced partitions but ends in the best one within the same balance bound
//! ([`Partition::anneal`], effort `anneal=`), which escapes KL's local optimum on several NAS
//! matrices, and a last round of KL swaps (docs/strategies.md has the measurements).
//!
//! Limit, measured (threads filling the machine): on the NAS SP-OMP matrix (64 threads, first
//! 16 carrying 4× load, 4 NUMA nodes) the exactly balanced optimum found by simulated annealing
//! is RemoteComm 3.40e7 (1.24× EagerMap's 2.74e7); this refinement reaches 3.40e7, so a lower
//! RemoteComm there needs a looser balance, not a better search.

use super::cmlb::{node_capacities, numa_groups, numa_sizes, targets};
use super::common::place_numa_groups;
use super::eagermap::eagermap;
use super::{MapInput, Params, Strategy};
use crate::error::Result;
use crate::matrix::CommMatrix;
use rand::{Rng, RngCore, SeedableRng};

/// Allowed deviation of a group's load from its target, relative to the mean group target.
pub const LOAD_TOLERANCE: f64 = 0.005;

/// Annealing effort after the refinement (`cmlb-refine:anneal=E`): up to E thousand elementary
/// steps (a proposal 1, a taken swap n/8), at most 30·E per thread (small jobs converge
/// sooner), and none when that cannot pay for 4n taken swaps: with 300, about 4 ms for jobs
/// up to ~770 threads, and nothing above.
pub const ANNEAL_EFFORT: usize = 300;
/// Upper bound of `anneal=` (100 M steps, about a second or two).
pub const MAX_ANNEAL_EFFORT: usize = 100_000;

/// CMLB + pair-exchange refinement. Parameters (`cmlb-refine:tolerance=1,spare=count`):
/// `tolerance` = allowed deviation from the load targets in % of the mean target (default 0.5),
/// `spare` = `load` (default: with spare cores node sizes may follow the loads) or `count`
/// (node sizes always proportional to capacity).
#[derive(Debug, Clone, Copy)]
pub struct CmlbRefine {
    tolerance: f64,
    load_sized: bool,
    /// Annealing effort, see [`ANNEAL_EFFORT`] (0 = none).
    anneal: usize,
}

impl Default for CmlbRefine {
    fn default() -> Self {
        CmlbRefine {
            tolerance: LOAD_TOLERANCE,
            load_sized: true,
            anneal: ANNEAL_EFFORT,
        }
    }
}

const KEYS: &[&str] = &["tolerance", "spare", "anneal"];

impl Strategy for CmlbRefine {
    fn name(&self) -> &'static str {
        "cmlb-refine"
    }
    fn describe(&self) -> &'static str {
        "default: cmlb grouping, then KL-style pair swaps between NUMA groups that lower \
         RemoteComm while every group stays within 0.5% of its load target (or no worse), \
         then a short seeded annealing within the same bound; with spare cores node sizes may \
         follow the loads (params: tolerance=0.5 (%), spare=load|count, anneal=300 (effort, \
         0 = off))"
    }
    fn param_keys(&self) -> &'static [&'static str] {
        KEYS
    }
    fn configure(&self, p: &mut Params) -> Result<Box<dyn Strategy>> {
        let mut s = *self;
        if let Some(pct) = p.take_f64_up_to(
            "tolerance",
            100.0,
            "a percentage of the mean node load target",
        )? {
            s.tolerance = pct / 100.0;
        }
        if let Some(spare) = p.take_choice("spare", &["load", "count"])? {
            s.load_sized = spare == "load";
        }
        if let Some(e) = p.take_usize_in("anneal", 0, MAX_ANNEAL_EFFORT)? {
            s.anneal = e;
        }
        p.finish(KEYS)?;
        Ok(Box::new(s))
    }
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>> {
        let groups = refined_groups(input, self);
        Ok(Some(place_numa_groups(input.topology, input.comm, &groups)))
    }
}

/// The NUMA groups of `cmlb-refine`: the best of the refined starts (module docs).
pub(crate) fn refined_groups(input: &MapInput, settings: &CmlbRefine) -> Vec<Vec<usize>> {
    let CmlbRefine {
        tolerance,
        load_sized,
        anneal,
    } = *settings;
    let sizes = numa_sizes(input);
    let t = targets(input.load, &sizes);
    let live = sizes.iter().filter(|&&s| s > 0).count().max(1);
    let delta = tolerance * t.iter().sum::<f64>() / live as f64;

    let mut starts = Vec::new();
    let mut a = Partition::new(input.comm, input.load, &t, numa_groups(input));
    // What no group may lose against cmlb: its deviation from its target there, or the
    // tolerance. KL and the annealing keep each group within this from the cmlb start; another
    // start must already be within it to be chosen (below), so the default is never less
    // balanced than cmlb by more than the tolerance in any group.
    let allow: Vec<f64> = (0..a.ng)
        .map(|g| (a.gload[g] - t[g]).abs().max(delta))
        .collect();
    a.kl(delta);
    starts.push(a);

    // EagerMap's NUMA-level partition, when its group sizes match the capacities.
    let em = eagermap(input.topology, input.comm, None);
    let mut em_groups = vec![Vec::new(); sizes.len()];
    for (thread, &pu) in em.iter().enumerate() {
        let numa = input.topology.pus[pu].numa;
        if let Some(k) = input.topology.numa_position(numa) {
            em_groups[k].push(thread);
        }
    }
    if em_groups.iter().map(Vec::len).eq(sizes.iter().copied()) {
        let mut b = Partition::new(input.comm, input.load, &t, em_groups);
        b.repair(delta);
        b.kl(delta);
        starts.push(b);
    }

    // With spare cores, groups sized by load instead of by count.
    if let Some(bounds) = slack_bounds(input).filter(|_| load_sized) {
        let groups = load_sized_groups(input.comm, input.load, &t, &bounds);
        let mut c = Partition::new(input.comm, input.load, &t, groups);
        c.bounds = Some(bounds);
        c.repair(delta);
        c.kl(delta);
        starts.push(c);
    }

    // Only starts with every group within its allowance against cmlb: the EagerMap start once
    // won on 0.07 % less RemoteComm with one group 0.255 off its target where cmlb's was 0.241
    // off (proptest `default_is_never_much_less_balanced_than_cmlb`). The cmlb start always is.
    let slack = 1e-9 * (t.iter().sum::<f64>() + 1.0);
    let eligible: Vec<usize> = (0..starts.len())
        .filter(|&k| {
            let p = &starts[k];
            (0..p.ng).all(|g| (p.gload[g] - t[g]).abs() <= allow[g] + slack)
        })
        .collect();
    // Balance first (within the tolerance of the best-balanced one), then communication;
    // ties go to the earlier start.
    let scores: Vec<(f64, f64)> = starts.iter().map(|p| (p.imbalance(), p.remote())).collect();
    let best_balance = eligible
        .iter()
        .map(|&k| scores[k].0)
        .fold(f64::INFINITY, f64::min);
    // `+ delta`, not `max(best, delta)`: when exact balance is impossible (a heavy main thread),
    // a start within the tolerance of the best one may keep communicating pairs together.
    let bound = (best_balance + delta) * (1.0 + 1e-9);
    // min_by keeps the first of equal minima: ties go to the earlier start.
    let pick = eligible
        .into_iter()
        .filter(|&k| scores[k].0 <= bound)
        .min_by(|&a, &b| scores[a].1.total_cmp(&scores[b].1))
        .unwrap_or(0);
    let mut chosen = starts.swap_remove(pick);
    let n = input.comm.n();
    let work = anneal
        .saturating_mul(1000)
        .min(anneal.saturating_mul(30).saturating_mul(n));
    chosen.anneal(delta, input.seed, work);
    chosen.kl(delta);
    chosen.groups
}

/// Per-NUMA-node thread bounds when the job leaves cores free, else `None`. A node may then take
/// more or fewer threads than its capacity share so that the *loads* balance: a memory-heavy
/// thread gets a node mostly to itself, light ones fill up another. Bound = the node's
/// capacity ([`node_capacities`]: its cores when every thread fits on its own core, so no two
/// threads share a core, else its PUs).
pub(crate) fn slack_bounds(input: &MapInput) -> Option<Vec<usize>> {
    let bounds = node_capacities(input);
    (bounds.iter().sum::<usize>() > input.comm.n()).then_some(bounds)
}

/// Greedy NUMA groups closed by load: each group (in node order) starts from the lowest-indexed
/// free thread, grows by the free thread that communicates most with it, and closes when the
/// next thread would take its load further from its share of the remaining load than stopping
/// does, or at its bound. It always takes enough threads that the later groups can hold the
/// rest; the last group takes the rest.
pub(crate) fn load_sized_groups(
    comm: &CommMatrix,
    load: &[f64],
    targets: &[f64],
    bounds: &[usize],
) -> Vec<Vec<usize>> {
    let n = comm.n();
    let ng = bounds.len();
    let mut free = vec![true; n];
    let mut left = n;
    let mut left_load: f64 = load.iter().sum();
    let mut groups = vec![Vec::new(); ng];
    let mut conn = vec![0.0f64; n];
    for k in 0..ng {
        if left == 0 || bounds[k] == 0 {
            continue;
        }
        let later_cap: usize = bounds[k + 1..].iter().sum();
        let must = left.saturating_sub(later_cap);
        let cap = bounds[k].min(left);
        let later_target: f64 = targets[k..]
            .iter()
            .zip(&bounds[k..])
            .filter(|(_, &b)| b > 0)
            .map(|(t, _)| t)
            .sum();
        let target = if later_target > 0.0 {
            left_load * targets[k] / later_target
        } else {
            left_load
        };
        conn.iter_mut().for_each(|c| *c = 0.0);
        let mut gl = 0.0;
        while groups[k].len() < cap {
            let t = if groups[k].is_empty() {
                free.iter().position(|&f| f)
            } else {
                // Most communication with the group; ties to the lowest index.
                (0..n)
                    .filter(|&t| free[t])
                    .max_by(|&a, &b| conn[a].total_cmp(&conn[b]).then(b.cmp(&a)))
            };
            let Some(t) = t else { break };
            let closer = (gl + load[t] - target).abs() < (gl - target).abs();
            if groups[k].len() >= must.max(1) && !closer {
                break;
            }
            free[t] = false;
            left -= 1;
            left_load -= load[t];
            gl += load[t];
            groups[k].push(t);
            for (c, &v) in conn.iter_mut().zip(comm.row(t)) {
                *c += v;
            }
        }
    }
    // Whatever is left (only when the last groups closed early) goes where there is room.
    for t in (0..n).filter(|&t| free[t]) {
        if let Some(k) = (0..ng).rev().find(|&k| groups[k].len() < bounds[k]) {
            groups[k].push(t);
        }
    }
    groups
}

/// One refinement step: swap `i ∈ g` with `j ∈ h`, or move a thread from one group to another.
enum Step {
    Swap(usize, usize),
    Move(usize, usize, usize),
}

/// NUMA groups with the bookkeeping for O(1) swap gains: each thread's communication with every
/// group, and each group's load.
struct Partition<'a> {
    comm: &'a CommMatrix,
    load: &'a [f64],
    targets: &'a [f64],
    groups: Vec<Vec<usize>>,
    ng: usize,
    /// conn[t * ng + g] = Σ_{k ∈ g, k ≠ t} A[t][k]
    conn: Vec<f64>,
    gload: Vec<f64>,
    total_comm: f64,
    /// Per-group thread bounds when sizes may change (single-thread moves allowed); `None`
    /// keeps every group's size (pair swaps only).
    bounds: Option<Vec<usize>>,
}

impl<'a> Partition<'a> {
    fn new(
        comm: &'a CommMatrix,
        load: &'a [f64],
        targets: &'a [f64],
        groups: Vec<Vec<usize>>,
    ) -> Self {
        let n = comm.n();
        let ng = groups.len();
        // conn[t][g] = Σ_{k∈g} A[k][t] by symmetry: sum each group's rows (vectorisable) and
        // scatter the column; self terms are taken out afterwards.
        let mut conn = vec![0.0f64; n * ng];
        let mut acc = vec![0.0f64; n];
        for (g, members) in groups.iter().enumerate() {
            acc.iter_mut().for_each(|x| *x = 0.0);
            for &k in members {
                for (x, &v) in acc.iter_mut().zip(comm.row(k)) {
                    *x += v;
                }
            }
            for (t, &v) in acc.iter().enumerate() {
                conn[t * ng + g] = v;
            }
        }
        let mut total_comm = 0.0;
        for t in 0..n {
            total_comm += conn[t * ng..(t + 1) * ng].iter().sum::<f64>() - comm.get(t, t);
        }
        for (g, members) in groups.iter().enumerate() {
            for &t in members {
                conn[t * ng + g] -= comm.get(t, t);
            }
        }
        let gload = groups
            .iter()
            .map(|m| m.iter().map(|&t| load[t]).sum())
            .collect();
        Partition {
            comm,
            load,
            targets,
            groups,
            ng,
            conn,
            gload,
            total_comm,
            bounds: None,
        }
    }

    /// RemoteComm of the partition (each pair once).
    fn remote(&self) -> f64 {
        let mut inside = 0.0;
        for (g, m) in self.groups.iter().enumerate() {
            for &t in m {
                inside += self.conn[t * self.ng + g];
            }
        }
        (self.total_comm - inside) / 2.0
    }

    /// Root-mean-square deviation of the group loads from their targets: Load_std when the
    /// groups have equal sizes, and what the targets ask for when capacities differ. Nodes
    /// with a target count even when a load-sized partition left them empty.
    fn imbalance(&self) -> f64 {
        let devs: Vec<f64> = (0..self.ng)
            .filter(|&g| !self.groups[g].is_empty() || self.targets[g] > 0.0)
            .map(|g| (self.gload[g] - self.targets[g]).powi(2))
            .collect();
        (devs.iter().sum::<f64>() / devs.len().max(1) as f64).sqrt()
    }

    /// Load differences below this are float noise (relative to the total load).
    fn load_eps(&self) -> f64 {
        1e-12 * (self.targets.iter().sum::<f64>() + 1.0)
    }

    /// RemoteComm gains below this are float noise (relative to the total communication).
    fn comm_eps(&self) -> f64 {
        1e-12 * (self.total_comm + 1.0)
    }

    fn d(&self, t: usize, from: usize, to: usize) -> f64 {
        self.conn[t * self.ng + to] - self.conn[t * self.ng + from]
    }

    /// How much swapping `i ∈ g` with `j ∈ h` lowers RemoteComm (KL's gain).
    fn swap_gain(&self, i: usize, g: usize, j: usize, h: usize) -> f64 {
        self.d(i, g, h) + self.d(j, h, g) - 2.0 * self.comm.get(i, j)
    }

    /// Swap `i ∈ g` with `j ∈ h`.
    fn swap(&mut self, g: usize, h: usize, i: usize, j: usize) {
        let ng = self.ng;
        let pi = self.groups[g].iter().position(|&x| x == i).expect("i in g");
        self.groups[g][pi] = j;
        let pj = self.groups[h].iter().position(|&x| x == j).expect("j in h");
        self.groups[h][pj] = i;
        let shift = self.load[i] - self.load[j];
        self.gload[g] -= shift;
        self.gload[h] += shift;
        let (ri, rj) = (self.comm.row(i), self.comm.row(j));
        for (t, (a, b)) in ri.iter().zip(rj).enumerate() {
            let d = b - a;
            self.conn[t * ng + g] += d;
            self.conn[t * ng + h] -= d;
        }
        // The update above treated A[i][i] and A[j][j] as group members; undo.
        self.conn[i * ng + g] += ri[i];
        self.conn[i * ng + h] -= ri[i];
        self.conn[j * ng + h] += rj[j];
        self.conn[j * ng + g] -= rj[j];
    }

    /// Whether group `g` may take one more thread (only with bounds).
    fn has_room(&self, g: usize) -> bool {
        self.bounds
            .as_ref()
            .is_some_and(|b| self.groups[g].len() < b[g])
    }

    /// Move `i` from `g` to `h`.
    fn move_to(&mut self, g: usize, h: usize, i: usize) {
        let ng = self.ng;
        let pi = self.groups[g].iter().position(|&x| x == i).expect("i in g");
        self.groups[g].remove(pi);
        self.groups[h].push(i);
        self.gload[g] -= self.load[i];
        self.gload[h] += self.load[i];
        let ri = self.comm.row(i);
        for (t, &a) in ri.iter().enumerate() {
            self.conn[t * ng + g] -= a;
            self.conn[t * ng + h] += a;
        }
        // i is no member of its own connection sums.
        self.conn[i * ng + g] += ri[i];
        self.conn[i * ng + h] -= ri[i];
    }

    fn sorted_d(&self, from: usize, to: usize, out: &mut Vec<(f64, usize)>) {
        out.clear();
        out.extend(self.groups[from].iter().map(|&t| (self.d(t, from, to), t)));
        out.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
    }

    /// KL pair swaps that lower RemoteComm while no group moves further from its target than
    /// `max(its current deviation, delta)`.
    fn kl(&mut self, delta: f64) {
        let n = self.comm.n();
        let tiny = self.load_eps();
        let min_gain = self.comm_eps();
        // Each accepted swap lowers RemoteComm by more than `min_gain`; the cap only guards
        // against float noise.
        let mut budget = 8 * n + 64;
        let (mut da, mut db) = (Vec::new(), Vec::new());
        loop {
            let mut improved = false;
            for g in 0..self.ng {
                for h in (g + 1)..self.ng {
                    loop {
                        if budget == 0 {
                            return;
                        }
                        self.sorted_d(g, h, &mut da);
                        self.sorted_d(h, g, &mut db);
                        let (tg, th) = (self.targets[g], self.targets[h]);
                        let (lg, lh) = (self.gload[g], self.gload[h]);
                        let allow_g = (lg - tg).abs().max(delta) + tiny;
                        let allow_h = (lh - th).abs().max(delta) + tiny;
                        // `shift` = load leaving g for h.
                        let fits = |shift: f64| {
                            (lg - shift - tg).abs() <= allow_g && (lh + shift - th).abs() <= allow_h
                        };
                        let mut best = min_gain;
                        let mut pick = None;
                        // Single moves, where a group has room (load-sized partitions only).
                        // (from, to, candidates by gain, sign of the load shift from g to h)
                        for (from, to, cands, sign) in [(g, h, &da, 1.0), (h, g, &db, -1.0)] {
                            if !self.has_room(to) {
                                continue;
                            }
                            let first_fit = cands
                                .iter()
                                .take_while(|&&(d, _)| d > best)
                                .find(|&&(_, i)| fits(sign * self.load[i]));
                            if let Some(&(d, i)) = first_fit {
                                best = d;
                                pick = Some(Step::Move(from, to, i));
                            }
                        }
                        let top_b = db.first().map_or(f64::NEG_INFINITY, |x| x.0);
                        for &(a, i) in &da {
                            if a + top_b <= best {
                                break;
                            }
                            let row_i = self.comm.row(i);
                            for &(b, j) in &db {
                                if a + b <= best {
                                    break;
                                }
                                if !fits(self.load[i] - self.load[j]) {
                                    continue;
                                }
                                let gain = a + b - 2.0 * row_i[j];
                                if gain > best {
                                    best = gain;
                                    pick = Some(Step::Swap(i, j));
                                }
                            }
                        }
                        let Some(step) = pick else { break };
                        budget -= 1;
                        improved = true;
                        match step {
                            Step::Swap(i, j) => self.swap(g, h, i, j),
                            Step::Move(from, to, i) => self.move_to(from, to, i),
                        }
                    }
                }
            }
            if !improved {
                return;
            }
        }
    }

    /// Simulated annealing over pair swaps, ending in the best partition seen among those that
    /// keep every group within its allowance `max(its deviation at the start, delta)` — the same
    /// bound [`Self::kl`] keeps — so it never raises RemoteComm nor loosens the balance. Why:
    /// KL stops at the first local optimum. Between two allowed partitions the walk may pass
    /// through unbalanced ones, paying `λ` per unit of load beyond an allowance: with
    /// continuous loads almost no single swap keeps the balance, so balanced partitions are
    /// connected only through unbalanced ones. The effort is a fixed amount of `work` (a
    /// proposal counts 1, a taken swap n/8, its bookkeeping), so its time does not grow with n.
    /// Seeded, so deterministic.
    fn anneal(&mut self, delta: f64, seed: u64, work: usize) {
        let n = self.comm.n();
        // A budget that cannot pay for 4n taken swaps only shuffles the start (measured:
        // nothing gained at n = 1024 on the benchmark's matrices), so it is not spent.
        if self.ng < 2 || n < 3 || work < 4 * n * (n / 8).max(1) {
            return;
        }
        let tiny = self.load_eps();
        let mut group_of = vec![0usize; n];
        for (g, m) in self.groups.iter().enumerate() {
            for &t in m {
                group_of[t] = g;
            }
        }
        let allow: Vec<f64> = (0..self.ng)
            .map(|g| (self.gload[g] - self.targets[g]).abs().max(delta) + tiny)
            .collect();
        // Load of group g beyond its allowance after `shift` more load arrives.
        let excess = |p: &Self, g: usize, shift: f64| {
            ((p.gload[g] + shift - p.targets[g]).abs() - allow[g]).max(0.0)
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        // One draw for both threads (multiply-shift of each 32-bit half, no rejection loop):
        // this is the hot path.
        let mut pair = || {
            let r = rng.next_u64();
            let i = ((r & 0xffff_ffff) * n as u64) >> 32;
            let j = ((r >> 32) * n as u64) >> 32;
            (i as usize, j as usize)
        };
        // Temperature from the median size of a swap's gain: start at 0.3× (1× wandered too
        // long, 0.1× froze in the KL optimum), cool linearly in the work. λ = 0.03× the median
        // gain per tolerance of load (0.03-0.3 measured alike).
        let mut sizes: Vec<f64> = (0..64 * n)
            .filter_map(|_| {
                let (i, j) = pair();
                let (g, h) = (group_of[i], group_of[j]);
                (g != h).then(|| self.swap_gain(i, g, j, h).abs())
            })
            .filter(|&x| x > 0.0)
            .take(256)
            .collect();
        if sizes.is_empty() {
            return;
        }
        sizes.sort_by(f64::total_cmp);
        let median = sizes[sizes.len() / 2];
        let t0 = 0.3 * median;
        let lambda = 0.03 * median / delta.max(tiny);
        let min_gain = self.comm_eps();
        let mut cur = self.remote();
        let mut best = cur;
        let mut best_groups = self.groups.clone();
        let mut at_best = true;
        let mut spent = 0usize;
        let mut accept = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
        while spent < work {
            spent += 1;
            let (i, j) = pair();
            let (g, h) = (group_of[i], group_of[j]);
            if g == h {
                continue;
            }
            let shift = self.load[i] - self.load[j];
            let penalty = excess(self, g, -shift) + excess(self, h, shift)
                - excess(self, g, 0.0)
                - excess(self, h, 0.0);
            let gain = self.swap_gain(i, g, j, h);
            let cost = lambda * penalty - gain;
            let temp = t0 * (1.0 - spent as f64 / work as f64);
            if cost > 0.0 && (cost > 30.0 * temp || accept.gen::<f64>() >= (-cost / temp).exp()) {
                continue;
            }
            self.swap(g, h, i, j);
            group_of.swap(i, j);
            spent += n / 8;
            cur -= gain;
            let allowed = (0..self.ng).all(|k| excess(self, k, 0.0) <= 0.0);
            at_best = allowed && cur < best - min_gain;
            if at_best {
                best = cur;
                best_groups.clone_from(&self.groups);
            }
        }
        if !at_best {
            // Rebuilt rather than unwound: the bookkeeping is exact again after float drift.
            let fresh = Partition::new(self.comm, self.load, self.targets, best_groups);
            let bounds = self.bounds.take();
            *self = fresh;
            self.bounds = bounds;
        }
    }

    /// Move load from the most over-loaded to the most under-loaded group with the swap that
    /// costs the least communication per unit of imbalance removed, until every group is within
    /// `delta` of its target or no swap reduces the imbalance.
    fn repair(&mut self, delta: f64) {
        let n = self.comm.n();
        let tiny = self.load_eps();
        for _ in 0..(2 * n + 8) {
            let dev = |g: usize| self.gload[g] - self.targets[g];
            let live =
                (0..self.ng).filter(|&g| !self.groups[g].is_empty() || self.targets[g] > 0.0);
            let g = live
                .clone()
                .max_by(|&a, &b| dev(a).total_cmp(&dev(b)).then(b.cmp(&a)));
            let h = live.min_by(|&a, &b| dev(a).total_cmp(&dev(b)).then(a.cmp(&b)));
            let (Some(g), Some(h)) = (g, h) else { return };
            let (dg, dh) = (dev(g), dev(h));
            if g == h || (dg.abs() <= delta && dh.abs() <= delta) {
                return;
            }
            let before = dg.abs() + dh.abs();
            // (score, reduction, i, j); j = None moves i from g to h.
            let mut best: Option<(f64, f64, usize, Option<usize>)> = None;
            let room = self.has_room(h);
            for &i in &self.groups[g] {
                let di = self.d(i, g, h);
                let row_i = self.comm.row(i);
                // Partners: nobody (a move, when h has room), or any j of h (a swap).
                let partners = room.then_some(None);
                for j in partners
                    .into_iter()
                    .chain(self.groups[h].iter().map(|&j| Some(j)))
                {
                    let shift = self.load[i] - j.map_or(0.0, |j| self.load[j]);
                    let reduction = before - (dg - shift).abs() - (dh + shift).abs();
                    if reduction <= tiny {
                        continue;
                    }
                    let gain = di + j.map_or(0.0, |j| self.d(j, h, g) - 2.0 * row_i[j]);
                    let score = gain / reduction;
                    if best.is_none_or(|(s, r, _, _)| score > s || (score == s && reduction > r)) {
                        best = Some((score, reduction, i, j));
                    }
                }
            }
            match best {
                Some((_, _, i, Some(j))) => self.swap(g, h, i, j),
                Some((_, _, i, None)) => self.move_to(g, h, i),
                None => return,
            }
        }
    }
}

/// Pair-exchange refinement of `groups` in place (see the module docs).
#[cfg(test)]
pub(crate) fn refine(
    comm: &CommMatrix,
    load: &[f64],
    groups: &mut Vec<Vec<usize>>,
    targets: &[f64],
    tolerance: f64,
) {
    let live = groups.iter().filter(|g| !g.is_empty()).count().max(1);
    let delta = tolerance * targets.iter().sum::<f64>() / live as f64;
    let mut p = Partition::new(comm, load, targets, std::mem::take(groups));
    p.kl(delta);
    *groups = p.groups;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topology;

    fn cut(comm: &CommMatrix, groups: &[Vec<usize>]) -> f64 {
        let mut g_of = vec![0; comm.n()];
        for (g, m) in groups.iter().enumerate() {
            for &t in m {
                g_of[t] = g;
            }
        }
        let mut s = 0.0;
        for i in 0..comm.n() {
            for j in (i + 1)..comm.n() {
                if g_of[i] != g_of[j] {
                    s += comm.get(i, j);
                }
            }
        }
        s
    }

    #[test]
    fn swaps_pairs_back_together_when_loads_allow() {
        // Pairs (0,1) and (2,3) talk; the start splits both. Equal loads: one swap fixes it.
        let mut m = CommMatrix::zeros(4);
        m.add_sym(0, 1, 10.0);
        m.add_sym(2, 3, 10.0);
        m.add_sym(0, 0, 7.0); // a diagonal must not disturb the bookkeeping
        let load = [1.0; 4];
        let mut groups = vec![vec![0, 2], vec![1, 3]];
        refine(&m, &load, &mut groups, &[2.0, 2.0], LOAD_TOLERANCE);
        assert_eq!(cut(&m, &groups), 0.0);
        assert_eq!(groups, vec![vec![3, 2], vec![1, 0]]); // 0<->3 is the first best swap
    }

    fn input<'a>(comm: &'a CommMatrix, load: &'a [f64], topology: &'a Topology) -> MapInput<'a> {
        MapInput {
            comm,
            load,
            topology,
            seed: 0,
        }
    }

    /// A chain 0-1-2-…-(n-1) with unit weights.
    fn chain(n: usize) -> CommMatrix {
        let mut m = CommMatrix::zeros(n);
        for i in 1..n {
            m.add_sym(i - 1, i, 1.0);
        }
        m
    }

    #[test]
    fn spare_cores_let_group_sizes_follow_the_loads() {
        // Two heavy threads carry as much as the eight light ones. On 2 nodes × 10 cores the
        // load-sized groups {0,1} and {2..9} cut the chain once with exact balance; with
        // fixed sizes (5 + 5) every balanced split cuts it at least twice.
        let m = chain(10);
        let load = [4.0, 4.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let groups = load_sized_groups(&m, &load, &[8.0, 8.0], &[10, 10]);
        assert_eq!(groups, vec![vec![0, 1], (2..10).collect::<Vec<_>>()]);

        let spare = crate::strategy::qap::tests::topo(1, 2, 10, 1);
        let input = input(&m, &load, &spare);
        assert_eq!(slack_bounds(&input), Some(vec![10, 10]));
        let g = refined_groups(&input, &CmlbRefine::default());
        assert_eq!(cut(&m, &g), 1.0, "{g:?}");
        let loads: Vec<f64> = g.iter().map(|m| m.iter().map(|&t| load[t]).sum()).collect();
        assert_eq!(loads, vec![8.0, 8.0]);

        // The threads fill the machine: sizes stay 5 + 5, balance still exact, two cuts.
        let full = crate::strategy::qap::tests::topo(1, 2, 5, 1);
        let input = MapInput {
            topology: &full,
            ..input
        };
        assert_eq!(slack_bounds(&input), None);
        let g = refined_groups(&input, &CmlbRefine::default());
        assert_eq!(g.iter().map(Vec::len).collect::<Vec<_>>(), vec![5, 5]);
        assert_eq!(cut(&m, &g), 2.0, "{g:?}");
    }

    #[test]
    fn parameters_select_tolerance_and_spare_sizing() {
        let s = crate::strategy::by_name("cmlb-refine:tolerance=2,spare=count,anneal=0").unwrap();
        let m = chain(10);
        let load = [4.0, 4.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let spare = crate::strategy::qap::tests::topo(1, 2, 10, 1);
        let input = input(&m, &load, &spare);
        let pus = s.map(&input).unwrap().unwrap();
        let on0 = pus
            .iter()
            .filter(|&&p| spare.pus[p].numa == spare.numa[0].os_index);
        assert_eq!(on0.count(), 5, "spare=count: capacity-proportional sizes");
        for (bad, names) in [
            ("cmlb-refine:tolerance=101", "tolerance=101"),
            ("cmlb-refine:tolerance=-1", "tolerance=-1"),
            ("cmlb-refine:spare=some", "load, count"),
            ("cmlb-refine:tol=1", "'tol'"),
            ("cmlb-refine:anneal=100001", "0..=100000"),
            ("cmlb-refine:anneal=-1", "anneal=-1"),
        ] {
            let e = crate::strategy::by_name(bad).err().expect(bad).to_string();
            assert!(e.contains("cmlb-refine") && e.contains(names), "{bad}: {e}");
        }
    }

    #[test]
    fn load_sized_groups_respect_bounds_and_leave_room_for_the_rest() {
        // Group 0 would like only thread 0 (load 9 of 12), but group 1 holds 2 threads, so
        // group 0 must take 2 of the 4.
        let m = chain(4);
        let load = [9.0, 1.0, 1.0, 1.0];
        let g = load_sized_groups(&m, &load, &[6.0, 6.0], &[3, 2]);
        assert_eq!(g, vec![vec![0, 1], vec![2, 3]]);
        // Bounds are never exceeded, every thread is placed once.
        let g = load_sized_groups(&m, &[1.0; 4], &[2.0, 2.0], &[1, 3]);
        assert_eq!(g, vec![vec![0], vec![1, 2, 3]]);
    }

    #[test]
    fn moves_need_room_and_keep_the_balance() {
        // Thread 2 (load 0) talks only to thread 0; with room in group 0 it moves there, which
        // beats the swap 0 <-> 1 and leaves the loads as they were.
        let mut m = CommMatrix::zeros(4);
        m.add_sym(0, 2, 5.0);
        m.add_sym(1, 3, 1.0);
        let load = [1.0, 1.0, 0.0, 1.0];
        let t = [1.5, 1.5];
        let mut p = Partition::new(&m, &load, &t, vec![vec![0], vec![1, 2, 3]]);
        p.kl(0.0);
        // Without bounds only the equal-load swap 0 <-> 1 is possible: sizes stay 1 + 3.
        assert_eq!(p.groups, vec![vec![1], vec![0, 2, 3]]);
        assert_eq!(p.remote(), 1.0);
        let mut p = Partition::new(&m, &load, &t, vec![vec![0], vec![1, 2, 3]]);
        p.bounds = Some(vec![3, 3]);
        p.kl(0.0);
        assert_eq!(p.groups, vec![vec![0, 2], vec![1, 3]]);
        assert_eq!(p.remote(), 0.0);
        assert_eq!(p.gload, vec![1.0, 2.0]);
    }

    #[test]
    fn keeps_pairs_together_when_exact_balance_is_impossible_anyway() {
        // Loads of a live `pairs` profile: the main thread (0) first-touches more. No split
        // reaches the target (1514.5): the best, {0,2,3,6} = 1555, splits two pairs to gain
        // 3 units (0.2 % of it) over the pair-preserving {0..3} = 1558. Within the tolerance
        // of the best balance, communication decides.
        let mut m = CommMatrix::zeros(8);
        for p in 0..4 {
            m.add_sym(2 * p, 2 * p + 1, 1000.0);
        }
        let load = [460.0, 368.0, 365.0, 365.0, 376.0, 365.0, 365.0, 365.0];
        let topo = crate::strategy::qap::tests::topo(1, 2, 4, 1);
        let input = input(&m, &load, &topo);
        let g = refined_groups(&input, &CmlbRefine::default());
        assert_eq!(cut(&m, &g), 0.0, "{g:?}");
    }

    #[test]
    fn never_trades_balance_for_communication() {
        // Reuniting the pairs would put both heavy threads (0 and 1) together.
        let mut m = CommMatrix::zeros(4);
        m.add_sym(0, 1, 10.0);
        m.add_sym(2, 3, 10.0);
        let load = [5.0, 5.0, 1.0, 1.0];
        let mut groups = vec![vec![0, 2], vec![1, 3]];
        refine(&m, &load, &mut groups, &[6.0, 6.0], LOAD_TOLERANCE);
        assert_eq!(groups, vec![vec![0, 2], vec![1, 3]]);
    }
}
