//! `cmlb`: the thesis's grouping (Algorithms 4-1 … 4-4, seed 000 chapter 4) with the defects of
//! the printed pseudocode fixed, followed by cache-aware placement inside each NUMA node.
//!
//! Faithful parts:
//! * one group per NUMA node, built one after the other in NUMA-node order (Alg. 4-1);
//! * a group starts from the first thread of the remaining list, i.e. the lowest-indexed
//!   ungrouped thread (Alg. 4-2 line 4, `group = last_threads[0]`);
//! * candidates are ranked by their summed communication with the group (Eq. 4-1, Alg. 4-3) and
//!   taken in rank order; the first one that passes the balance test (Alg. 4-4) joins; if every
//!   candidate fails, the top-ranked one joins (Alg. 4-3 line 18);
//! * the balance test: with `last = target − load(group ∪ {t})` and `k` slots left after `t`,
//!   `t` is rejected when `last` lies outside [sum of the `k` smallest remaining loads, sum of
//!   the `k` largest] (Alg. 4-4 lines 10-16).
//!
//! Fixed defects (design.md, "The method" step 3):
//! * group sizes follow the capacity of each NUMA node of the restricted topology
//!   ([`apportion`]: uneven and non-divisible counts, fewer threads than PUs, and proportional
//!   oversubscription with more threads than PUs) — the seed counts toward the size, so a group
//!   no longer gets one thread too many and no remainder is dropped;
//! * each group's load target is proportional to its size (`Σload · size / n`) instead of
//!   `Σload / nodes`;
//! * the group's last slot goes to the thread that brings the group closest to its target. The
//!   printed rule (Alg. 4-4, section 4.1 step 4) only refuses threads on an over-load list of
//!   earlier rejects (a list the pseudocode never fills), so when the target cannot be met
//!   exactly a thread far from it could take the slot while one that fits had been refused by a
//!   hair (found in the multi-NUMA guest, `tests/numa`). The over-load list has no other use
//!   and is gone.
//!
//! Choices the pseudocode leaves open: equal communication sums rank the lower thread index
//! first (Python's `sorted(..., reverse=True)` on `[sum, tid]` pairs would rank the higher one
//! first; lowest-first matches EagerMap and keeps plans stable when threads are appended).
//! Comparisons of loads use a relative tolerance of 1e-9 so float rounding cannot flip them.
//!
//! Cost: the communication sums of all remaining threads to the growing group are updated
//! incrementally (O(n) per added thread), candidates come from a heap built in O(n) and popped
//! only while they are rejected, and the remaining loads are kept sorted with prefix sums so each
//! balance test is O(1); removing a grouped thread from that order is O(n). O(n²) overall.

use super::common::{apportion, place_numa_groups};
use super::{MapInput, Strategy};
use crate::error::Result;
use crate::matrix::CommMatrix;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The faithful thesis grouping plus intra-NUMA placement.
pub struct Cmlb;

impl Strategy for Cmlb {
    fn name(&self) -> &'static str {
        "cmlb"
    }
    fn describe(&self) -> &'static str {
        "thesis CMLB grouping (Alg. 4-1..4-4, defects fixed): communication-greedy NUMA groups \
         under a memory-load balance test, then cache-aware placement inside each node"
    }
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>> {
        let groups = numa_groups(input);
        Ok(Some(place_numa_groups(input.topology, input.comm, &groups)))
    }
}

/// How many threads each NUMA node (in `topology.numa` order) can hold without two sharing
/// what they should not: its cores when every thread fits on a core of its own, else its PUs.
/// PUs alone would give a node whose cores have two PUs each (a cgroup may allow both hardware
/// threads on one node and one on another) threads that share a core while the other node's
/// cores stay idle: 5 threads on 4 cores of 8 PUs beside 2 on 4 cores of 4 PUs (proptest
/// `every_thread_mapped_once_to_a_valid_pu_deterministically`). On nodes with the same PUs per
/// core both give the same shares.
pub(crate) fn node_capacities(input: &MapInput) -> Vec<usize> {
    let topo = input.topology;
    let cores: Vec<usize> = (0..topo.numa.len()).map(|k| topo.numa_cores(k)).collect();
    if input.comm.n() <= cores.iter().sum::<usize>() {
        cores
    } else {
        topo.numa.iter().map(|x| x.capacity()).collect()
    }
}

/// Group sizes per NUMA node (in `topology.numa` order) for `n` threads: proportional to
/// [`node_capacities`].
pub(crate) fn numa_sizes(input: &MapInput) -> Vec<usize> {
    apportion(input.comm.n(), &node_capacities(input))
}

/// The CMLB NUMA groups: `groups[k]` are the threads for `topology.numa[k]`.
pub(crate) fn numa_groups(input: &MapInput) -> Vec<Vec<usize>> {
    cmlb_groups(input.comm, input.load, &numa_sizes(input))
}

/// Per-group load targets: proportional to group size.
pub(crate) fn targets(load: &[f64], sizes: &[usize]) -> Vec<f64> {
    let n: usize = sizes.iter().sum();
    let total: f64 = load.iter().sum();
    sizes
        .iter()
        .map(|&s| {
            if n == 0 {
                0.0
            } else {
                total * s as f64 / n as f64
            }
        })
        .collect()
}

/// Candidate in the rank list: larger communication first, then lower thread index.
#[derive(PartialEq)]
struct Ranked {
    sum: f64,
    tid: usize,
}
impl Eq for Ranked {}
impl Ord for Ranked {
    fn cmp(&self, o: &Self) -> Ordering {
        self.sum
            .total_cmp(&o.sum)
            .then_with(|| o.tid.cmp(&self.tid))
    }
}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The remaining (ungrouped) threads ordered by load, with prefix sums, so that the sums of the
/// k smallest / k largest loads excluding one candidate are O(1).
struct LoadOrder<'a> {
    load: &'a [f64],
    /// Remaining threads by ascending (load, tid).
    order: Vec<usize>,
    /// `pos[t]` = position of thread t in `order` (stale for removed threads).
    pos: Vec<usize>,
    /// `prefix[i]` = Σ load of `order[..i]`.
    prefix: Vec<f64>,
}

impl<'a> LoadOrder<'a> {
    fn new(load: &'a [f64]) -> Self {
        let mut order: Vec<usize> = (0..load.len()).collect();
        order.sort_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)));
        let mut s = LoadOrder {
            load,
            order,
            pos: vec![0; load.len()],
            prefix: Vec::new(),
        };
        s.reindex();
        s
    }

    fn reindex(&mut self) {
        self.prefix.clear();
        self.prefix.push(0.0);
        self.reindex_from(0);
    }

    /// Positions and prefix sums from position `p` on (those before it did not change).
    fn reindex_from(&mut self, p: usize) {
        self.prefix.truncate(p + 1);
        let mut acc = self.prefix[p];
        for i in p..self.order.len() {
            let t = self.order[i];
            self.pos[t] = i;
            acc += self.load[t];
            self.prefix.push(acc);
        }
    }

    fn remove(&mut self, t: usize) {
        let p = self.pos[t];
        self.order.remove(p);
        self.reindex_from(p);
    }

    /// (sum of the k smallest, sum of the k largest) loads among the remaining threads other
    /// than `t`. Requires k < number of remaining threads.
    fn min_max_without(&self, t: usize, k: usize) -> (f64, f64) {
        let m = self.order.len();
        let p = self.pos[t];
        let lt = self.load[t];
        let min = if p < k {
            self.prefix[k + 1] - lt
        } else {
            self.prefix[k]
        };
        let total = self.prefix[m];
        let max = if p >= m - k {
            total - self.prefix[m - k - 1] - lt
        } else {
            total - self.prefix[m - k]
        };
        (min, max)
    }
}

/// Algorithms 4-1 … 4-4 with the fixes described in the module docs.
pub(crate) fn cmlb_groups(comm: &CommMatrix, load: &[f64], sizes: &[usize]) -> Vec<Vec<usize>> {
    let n = comm.n();
    let targets = targets(load, sizes);
    let eps = 1e-9 * (load.iter().sum::<f64>() + 1.0);
    let mut grouped = vec![false; n];
    let mut remaining: Vec<usize> = (0..n).collect(); // ascending: the thesis's last_threads
    let mut by_load = LoadOrder::new(load);
    let mut sums = vec![0.0f64; n];
    let mut groups = Vec::with_capacity(sizes.len());

    for (g, &size) in sizes.iter().enumerate() {
        let mut group = Vec::with_capacity(size);
        if size == 0 {
            groups.push(group);
            continue;
        }
        let mut group_load = 0.0;
        let mut add = |t: usize,
                       group: &mut Vec<usize>,
                       remaining: &mut Vec<usize>,
                       by_load: &mut LoadOrder,
                       sums: &mut [f64],
                       group_load: &mut f64| {
            group.push(t);
            grouped[t] = true;
            *group_load += load[t];
            let p = remaining.binary_search(&t).expect("thread is remaining");
            remaining.remove(p);
            by_load.remove(t);
            let row = comm.row(t);
            for &r in remaining.iter() {
                sums[r] += row[r];
            }
        };
        // Seed: the first thread of the remaining list.
        let seed = remaining[0];
        add(
            seed,
            &mut group,
            &mut remaining,
            &mut by_load,
            &mut sums,
            &mut group_load,
        );
        while group.len() < size {
            // Slots still free after the candidate joins.
            let k = size - group.len() - 1;
            // The balance test.
            let rejects = |tid: usize| {
                let last = targets[g] - (group_load + load[tid]);
                let (min, max) = by_load.min_max_without(tid, k);
                last < min - eps || last > max + eps
            };
            if k == 0 {
                // The last slot: the thread that brings the group closest to its target (ties:
                // the higher-ranked). The printed rule only refuses threads on the over-load
                // list, which can fill the slot with a thread far from the target while one
                // that fits was rejected by a hair earlier (loads 1.06 4 1 1 1 4 1 1.01 on two
                // nodes gave 4.06 / 10.01 instead of 7.06 / 7.01).
                let t = remaining
                    .iter()
                    .copied()
                    .min_by(|&a, &b| {
                        let da = (targets[g] - group_load - load[a]).abs();
                        let db = (targets[g] - group_load - load[b]).abs();
                        if (da - db).abs() <= eps {
                            sums[b].total_cmp(&sums[a]).then(a.cmp(&b))
                        } else {
                            da.total_cmp(&db)
                        }
                    })
                    .expect("enough threads remain");
                add(
                    t,
                    &mut group,
                    &mut remaining,
                    &mut by_load,
                    &mut sums,
                    &mut group_load,
                );
                continue;
            }
            // Usually the top-ranked thread passes: find it with one scan, and build the rank
            // heap (O(n)) only when it is rejected.
            let top = remaining
                .iter()
                .copied()
                .max_by(|&a, &b| sums[a].total_cmp(&sums[b]).then(b.cmp(&a)))
                .expect("enough threads remain");
            let mut chosen = None;
            if !rejects(top) {
                chosen = Some(top);
            } else {
                let mut heap: BinaryHeap<Ranked> = remaining
                    .iter()
                    .filter(|&&t| t != top)
                    .map(|&t| Ranked {
                        sum: sums[t],
                        tid: t,
                    })
                    .collect();
                while let Some(Ranked { tid, .. }) = heap.pop() {
                    if !rejects(tid) {
                        chosen = Some(tid);
                        break;
                    }
                }
            }
            let t = chosen.unwrap_or(top);
            add(
                t,
                &mut group,
                &mut remaining,
                &mut by_load,
                &mut sums,
                &mut group_load,
            );
        }
        for &r in &remaining {
            sums[r] = 0.0;
        }
        groups.push(group);
    }
    debug_assert!(grouped.iter().all(|&g| g));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_min_max(load: &[f64], rem: &[usize], t: usize, k: usize) -> (f64, f64) {
        let mut v: Vec<f64> = rem.iter().filter(|&&x| x != t).map(|&x| load[x]).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let min = v[..k].iter().sum();
        let max = v[v.len() - k..].iter().sum();
        (min, max)
    }

    #[test]
    fn load_order_matches_brute_force() {
        let load = [5.0, 1.0, 3.0, 3.0, 9.0, 0.5, 7.0, 2.0];
        let mut lo = LoadOrder::new(&load);
        let mut rem: Vec<usize> = (0..load.len()).collect();
        for removed in [4usize, 1, 6] {
            for &t in &rem {
                for k in 1..rem.len() {
                    assert_eq!(
                        lo.min_max_without(t, k),
                        brute_min_max(&load, &rem, t, k),
                        "t={t} k={k}"
                    );
                }
            }
            lo.remove(removed);
            rem.retain(|&x| x != removed);
        }
    }

    #[test]
    fn balance_test_rejects_and_the_last_slot_goes_closest_to_the_target() {
        // Thread 0 talks most with thread 1, but 0 and 1 are both heavy.
        let m = CommMatrix::from_rows(
            "m",
            vec![
                vec![0.0, 9.0, 5.0, 1.0],
                vec![9.0, 0.0, 1.0, 5.0],
                vec![5.0, 1.0, 0.0, 9.0],
                vec![1.0, 5.0, 9.0, 0.0],
            ],
        )
        .unwrap();
        let load = [5.0, 5.0, 1.0, 1.0];
        // Two groups of 2, target 6 each: the last slot of group 0 takes the thread that meets
        // the target (2 or 3; 2 communicates more with 0), not the heavy top-ranked 1.
        assert_eq!(
            cmlb_groups(&m, &load, &[2, 2]),
            vec![vec![0, 2], vec![1, 3]]
        );
        // With three slots the balance test runs for the second member: 1 is rejected
        // (last = 9 - 10 < 0 < min) and 2 (rank 2) fits. Last slot (group load 6, target 9):
        // 1 and 3 miss by 2 each and tie on communication (10): the lower index joins.
        let g = cmlb_groups(&m, &load, &[3, 1]);
        assert_eq!(g, vec![vec![0, 2, 1], vec![3]]);
    }

    #[test]
    fn unmeetable_targets_still_balance() {
        // The multi-NUMA guest's case: no split meets 7.035 exactly; the best is 7.06 / 7.01.
        let m = CommMatrix::zeros(8);
        let load = [1.06, 4.0, 1.0, 1.0, 1.0, 4.0, 1.0, 1.01];
        let g = cmlb_groups(&m, &load, &[4, 4]);
        let sum = |v: &Vec<usize>| v.iter().map(|&t| load[t]).sum::<f64>();
        assert!((sum(&g[0]) - sum(&g[1])).abs() < 0.06, "{g:?}");
    }
}
