//! Building blocks shared by the grouping strategies: proportional apportionment of threads to
//! capacities, EagerMap-style greedy group growth with incremental sums, and the recursive
//! placement of a group of threads inside a subtree of the topology.

use crate::matrix::CommMatrix;
use crate::topology::{Level, Topology};

/// Split `n` items over bins of capacity `caps`, proportionally to capacity
/// (Hamilton / largest remainder; equal remainders go to the lower bin index).
///
/// When `n <= Σcaps` no bin gets more than its capacity; when `n > Σcaps` every bin is
/// oversubscribed in proportion to its capacity. Bins of capacity 0 get nothing.
pub(crate) fn apportion(n: usize, caps: &[usize]) -> Vec<usize> {
    let total: usize = caps.iter().sum();
    if total == 0 {
        return vec![0; caps.len()];
    }
    // u128 so that n * cap cannot overflow for any realistic input.
    let mut sizes: Vec<usize> = caps
        .iter()
        .map(|&c| (n as u128 * c as u128 / total as u128) as usize)
        .collect();
    let given: usize = sizes.iter().sum();
    let mut rems: Vec<(u128, usize)> = caps
        .iter()
        .enumerate()
        .map(|(i, &c)| (n as u128 * c as u128 % total as u128, i))
        .collect();
    // Largest remainder first, lower index on ties.
    rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rems.iter().take(n - given) {
        sizes[i] += 1;
    }
    sizes
}

/// Position in `remaining` (ascending element indices) of the element with the largest
/// `sums` value; strict `>`, so the lowest index wins ties (EagerMap's tie-breaking).
pub(crate) fn strongest(remaining: &[usize], sums: &[f64]) -> usize {
    let (mut best, mut wmax) = (0, f64::NEG_INFINITY);
    for (p, &e) in remaining.iter().enumerate() {
        if sums[e] > wmax {
            wmax = sums[e];
            best = p;
        }
    }
    best
}

/// Greedy group growth of EagerMap's `GenerateGroup` (digest 001, Algorithm 3) over a set of
/// elements, with the per-candidate sums kept incrementally (O(E) per added element instead of
/// re-summing over the group).
///
/// `get(a, b)` is the communication between elements `a` and `b` (indices into `0..elems`).
/// Groups are grown one after the other with the given sizes; each starts from the
/// lowest-indexed element not yet chosen and then adds the element with the largest summed
/// communication to the group, strict `>` so the lowest index wins ties.
pub(crate) fn greedy_groups(
    elems: usize,
    sizes: &[usize],
    mut row_add: impl FnMut(usize, &[usize], &mut [f64]),
) -> Vec<Vec<usize>> {
    debug_assert_eq!(sizes.iter().sum::<usize>(), elems);
    // Remaining elements in ascending order, so scanning them in order gives lowest-index ties.
    let mut remaining: Vec<usize> = (0..elems).collect();
    let mut sums = vec![0.0f64; elems];
    let mut groups = Vec::with_capacity(sizes.len());
    for &size in sizes {
        let mut group = Vec::with_capacity(size);
        for step in 0..size {
            let pos = if step == 0 {
                0 // every score is 0: the lowest remaining index wins
            } else {
                strongest(&remaining, &sums)
            };
            let winner = remaining.remove(pos);
            group.push(winner);
            if step + 1 < size {
                row_add(winner, &remaining, &mut sums);
            }
        }
        for &e in &remaining {
            sums[e] = 0.0;
        }
        groups.push(group);
    }
    groups
}

/// `row_add` for [`greedy_groups`] over a subset of threads of a [`CommMatrix`]:
/// element `e` is thread `threads[e]`.
pub(crate) fn comm_row_adder<'a>(
    comm: &'a CommMatrix,
    threads: &'a [usize],
) -> impl FnMut(usize, &[usize], &mut [f64]) + 'a {
    move |winner, remaining, sums| {
        let row = comm.row(threads[winner]);
        for &e in remaining {
            sums[e] += row[threads[e]];
        }
    }
}

/// Children of a tree node that still contain PUs (a restriction may leave empty subtrees).
pub(crate) fn live_children(topo: &Topology, node: usize) -> Vec<usize> {
    topo.nodes[node]
        .children
        .iter()
        .copied()
        .filter(|&c| !topo.nodes[c].pus.is_empty())
        .collect()
}

/// Index in `topo.nodes` of the subtree of NUMA node `k` (position in `topo.numa`).
/// A topology without a NUMA level has a single implicit NUMA node: the root.
pub(crate) fn numa_tree_node(topo: &Topology, k: usize) -> usize {
    let os = topo.numa[k].os_index;
    topo.nodes
        .iter()
        .position(|n| n.level == Level::Numa && n.os_index == os)
        .unwrap_or_else(|| topo.root())
}

/// Place `threads` (thread ids, ascending) below tree node `node`, writing PU indices into
/// `out[thread]`. At every node with several children the threads are split into one group per
/// child, sized in proportion to the child's PU count, and each group is grown greedily
/// (heavily communicating threads together); then the recursion continues inside each child.
/// So the threads sharing a core, an L2 or an L3 are the ones that communicate most.
pub(crate) fn place_in_subtree(
    topo: &Topology,
    comm: &CommMatrix,
    node: usize,
    threads: &[usize],
    out: &mut [usize],
) {
    if threads.is_empty() {
        return;
    }
    let mut node = node;
    let children = loop {
        let ch = live_children(topo, node);
        if ch.len() == 1 {
            node = ch[0];
        } else {
            break ch;
        }
    };
    if children.is_empty() {
        // A PU (or a node whose only PU is itself): everything goes there.
        let pu = topo.nodes[node].pus[0];
        for &t in threads {
            out[t] = pu;
        }
        return;
    }
    let caps: Vec<usize> = children.iter().map(|&c| topo.nodes[c].pus.len()).collect();
    let sizes = apportion(threads.len(), &caps);
    let groups = greedy_groups(threads.len(), &sizes, comm_row_adder(comm, threads));
    for (child, group) in children.iter().zip(groups) {
        let mut members: Vec<usize> = group.iter().map(|&e| threads[e]).collect();
        members.sort_unstable();
        place_in_subtree(topo, comm, *child, &members, out);
    }
}

/// Place each NUMA group inside its NUMA node (group k -> `topo.numa[k]`).
pub(crate) fn place_numa_groups(
    topo: &Topology,
    comm: &CommMatrix,
    groups: &[Vec<usize>],
) -> Vec<usize> {
    let mut out = vec![0usize; comm.n()];
    for (k, g) in groups.iter().enumerate() {
        let mut members = g.clone();
        members.sort_unstable();
        place_in_subtree(topo, comm, numa_tree_node(topo, k), &members, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apportion_follows_capacity() {
        assert_eq!(apportion(8, &[4, 4]), vec![4, 4]);
        assert_eq!(apportion(7, &[4, 4]), vec![4, 3]);
        assert_eq!(apportion(5, &[6, 2]), vec![4, 1]); // 3.75 / 1.25
        assert_eq!(apportion(3, &[3, 3, 2]), vec![1, 1, 1]); // 1.125,1.125,0.75
        assert_eq!(apportion(20, &[6, 2]), vec![15, 5]); // oversubscribed 2.5x
        assert_eq!(apportion(9, &[3, 0, 3]), vec![5, 0, 4]);
        assert_eq!(apportion(0, &[3, 3]), vec![0, 0]);
    }

    #[test]
    fn apportion_never_exceeds_capacity_when_it_fits() {
        for total in 1..12usize {
            for a in 0..=total {
                let caps = [a, total - a, 1];
                let p: usize = caps.iter().sum();
                for n in 0..=p {
                    let s = apportion(n, &caps);
                    assert_eq!(s.iter().sum::<usize>(), n);
                    assert!(
                        s.iter().zip(&caps).all(|(s, c)| s <= c),
                        "{n} {caps:?} {s:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn greedy_groups_picks_strongest_partner_lowest_index_first() {
        // 0-3 strongly tied, 1-2 strongly tied; ties broken by the lowest index.
        let m = CommMatrix::from_rows(
            "m",
            vec![
                vec![0.0, 1.0, 1.0, 9.0],
                vec![1.0, 0.0, 9.0, 1.0],
                vec![1.0, 9.0, 0.0, 1.0],
                vec![9.0, 1.0, 1.0, 0.0],
            ],
        )
        .unwrap();
        let threads = [0, 1, 2, 3];
        let g = greedy_groups(4, &[2, 2], comm_row_adder(&m, &threads));
        assert_eq!(g, vec![vec![0, 3], vec![1, 2]]);
        let zero = CommMatrix::zeros(4);
        let g = greedy_groups(4, &[3, 1], comm_row_adder(&zero, &threads));
        assert_eq!(g, vec![vec![0, 1, 2], vec![3]]);
    }
}
