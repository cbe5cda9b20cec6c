//! One thread per PU: the capacity every cmlb strategy keeps, checked and restored for plans
//! made elsewhere. Scotch's gmap balances vertex *weights* (the loads) across PUs, not vertex
//! counts, so when the threads fill the machine and loads are uneven it stacks light threads on
//! one PU (every known pattern of the evaluation; 16 pairs with a quarter of heavy threads on
//! 4 × 16 PUs). Such a mapping can look good on RemoteComm while not being a plan cmlb could
//! bind, so it is never compared as it is.

use crate::error::{EvalError, Result};
use mapper::{CommMatrix, Topology};

/// Most threads one PU may hold: 1 while the threads fit the machine, otherwise the fewest
/// that still place them all, ceil(threads / PUs).
pub fn pu_capacity(threads: usize, pus: usize) -> usize {
    if pus == 0 {
        return 0;
    }
    threads.div_ceil(pus).max(1)
}

/// How a mapping was brought within the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repair {
    /// Threads moved to another PU (= the excess over the capacity: nothing else moves).
    pub moved: usize,
    /// PUs that held more threads than the capacity.
    pub overfull_pus: usize,
}

/// PUs holding more than [`pu_capacity`] threads, as `(PU index, threads on it)`, in PU order.
/// `pus[t]` is thread t's index into `Topology::pus`; indices ≥ `num_pus` are ignored here
/// ([`check`] rejects them).
pub fn overfull(pus: &[usize], num_pus: usize) -> Vec<(usize, usize)> {
    let cap = pu_capacity(pus.len(), num_pus);
    let mut count = vec![0usize; num_pus];
    for &p in pus.iter().filter(|&&p| p < num_pus) {
        count[p] += 1;
    }
    count
        .into_iter()
        .enumerate()
        .filter(|&(_, c)| c > cap)
        .collect()
}

/// `Ok` when every thread is on an existing PU and no PU holds more than [`pu_capacity`].
pub fn check(pus: &[usize], num_pus: usize) -> Result<()> {
    if let Some((t, &p)) = pus.iter().enumerate().find(|&(_, &p)| p >= num_pus) {
        return Err(EvalError::InvalidPlan(format!(
            "thread {t} is on PU {p}, the machine has {num_pus}"
        )));
    }
    let over = overfull(pus, num_pus);
    if let Some(&(p, c)) = over.first() {
        return Err(EvalError::InvalidPlan(format!(
            "{} PUs hold more than {} threads (PU {p}: {c})",
            over.len(),
            pu_capacity(pus.len(), num_pus)
        )));
    }
    Ok(())
}

/// Bring `pus` (PU index per thread) within [`pu_capacity`], moving as little as possible:
/// only the excess threads of overfull PUs move, each to a PU with room, preferring one on the
/// same NUMA node (NUMA loads and RemoteComm then do not change), else the nearest one
/// ([`Topology::distance`]: tree hops × NUMA latency ratio). Among the overfull PU's threads
/// and the nearest PUs with room, the move that loses least communication is made first:
/// least added hop-bytes, Σ_j A\[t\]\[j\] · (hops(new, pu_j) − hops(old, pu_j)); ties move the
/// lowest thread to the lowest PU, so the result is deterministic. Greedy, one move at a time
/// with every later choice seeing the earlier moves.
///
/// Returns `None` when nothing had to move. Capacity × PUs ≥ threads by construction, so a
/// PU with room always exists; an out-of-range PU index is an error.
pub fn repair(comm: &CommMatrix, topo: &Topology, pus: &mut [usize]) -> Result<Option<Repair>> {
    let m = topo.pus.len();
    if let Some((t, &p)) = pus.iter().enumerate().find(|&(_, &p)| p >= m) {
        return Err(EvalError::InvalidPlan(format!(
            "thread {t} is on PU {p}, the machine has {m}"
        )));
    }
    if comm.n() != pus.len() {
        return Err(EvalError::InvalidPlan(format!(
            "{} threads placed, the matrix has {}",
            pus.len(),
            comm.n()
        )));
    }
    let cap = pu_capacity(pus.len(), m);
    let mut on: Vec<Vec<usize>> = vec![Vec::new(); m];
    for (t, &p) in pus.iter().enumerate() {
        on[p].push(t);
    }
    let over: Vec<usize> = (0..m).filter(|&p| on[p].len() > cap).collect();
    if over.is_empty() {
        return Ok(None);
    }
    // Hop-bytes of thread t if it sat on PU q, everyone else where they are now.
    let cost = |pus: &[usize], t: usize, q: usize| -> f64 {
        comm.row(t)
            .iter()
            .enumerate()
            .filter(|&(j, &a)| j != t && a != 0.0)
            .map(|(j, &a)| a * f64::from(topo.hops(q, pus[j])))
            .sum()
    };
    let mut moved = 0;
    for &p in &over {
        while on[p].len() > cap {
            // Same NUMA node first, then nearest; `false` sorts before `true`.
            let key = |q: usize| (topo.pus[q].numa != topo.pus[p].numa, topo.distance(p, q));
            let nearest = (0..m)
                .filter(|&q| on[q].len() < cap)
                .map(key)
                .min_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
                .ok_or_else(|| {
                    EvalError::InvalidPlan(format!(
                        "no PU has room for the excess of PU {p} ({} threads on {m} PUs)",
                        pus.len()
                    ))
                })?;
            let tier: Vec<usize> = (0..m)
                .filter(|&q| on[q].len() < cap && key(q) == nearest)
                .collect();
            let mut best: Option<(f64, usize, usize)> = None;
            for &t in &on[p] {
                let here = cost(pus, t, p);
                for &q in &tier {
                    let loss = cost(pus, t, q) - here;
                    if best.is_none_or(|(l, _, _)| loss < l) {
                        best = Some((loss, t, q));
                    }
                }
            }
            let (_, t, q) = best.expect("an overfull PU holds threads and the tier is not empty");
            on[p].retain(|&x| x != t);
            on[q].push(t);
            pus[t] = q;
            moved += 1;
        }
    }
    Ok(Some(Repair {
        moved,
        overfull_pus: over.len(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::synthetic_topology;
    use crate::scotch::parse_map;

    fn comm(n: usize, pairs: &[(usize, usize, f64)]) -> CommMatrix {
        let mut c = CommMatrix::zeros(n);
        for &(i, j, v) in pairs {
            c.add_sym(i, j, v);
        }
        c
    }

    #[test]
    fn capacity_is_one_until_threads_outnumber_pus() {
        assert_eq!(pu_capacity(8, 8), 1);
        assert_eq!(pu_capacity(3, 8), 1);
        assert_eq!(pu_capacity(9, 8), 2);
        assert_eq!(pu_capacity(17, 8), 3);
        assert_eq!(pu_capacity(0, 8), 1);
        assert_eq!(pu_capacity(4, 0), 0);
    }

    #[test]
    fn check_rejects_stacked_and_out_of_range_threads() {
        check(&[0, 1, 2, 3], 4).unwrap();
        // 6 threads on 4 PUs: two per PU is allowed, three is not.
        check(&[0, 0, 1, 1, 2, 3], 4).unwrap();
        let e = check(&[0, 0, 0, 1, 2, 3], 4).unwrap_err();
        assert!(e.to_string().contains("PU 0: 3"), "{e}");
        let e = check(&[0, 0, 1], 4).unwrap_err();
        assert!(e.to_string().contains("more than 1"), "{e}");
        let e = check(&[0, 9], 4).unwrap_err();
        assert!(e.to_string().contains("PU 9"), "{e}");
    }

    /// A gmap mapping written by hand (no gmap needed) that stacks three threads on PU 0 of a
    /// 2 NUMA × 2 cores × 2 PUs machine, with PUs 2 and 3 (NUMA 0's second core) free.
    #[test]
    fn overfull_gmap_mapping_is_repaired_inside_its_numa_node() {
        let topo = synthetic_topology(2, 8).unwrap();
        assert_eq!(topo.pus.len(), 8);
        let mut pus = parse_map("8\n0 0\n1 0\n2 0\n3 1\n4 4\n5 5\n6 6\n7 7\n", 8, 8).unwrap();
        // 0–1 and 2–3 talk a lot, 1–2 a little, 4..7 pairwise.
        let c = comm(
            8,
            &[
                (0, 1, 100.0),
                (2, 3, 100.0),
                (1, 2, 1.0),
                (4, 5, 50.0),
                (6, 7, 50.0),
            ],
        );
        let before = pus.clone();
        let load: Vec<f64> = (1..=8).map(f64::from).collect();
        let numa_before = mapper::numa_load(&load, &topo, &pus);
        let r = repair(&c, &topo, &mut pus).unwrap();
        assert_eq!(
            r,
            Some(Repair {
                moved: 2,
                overfull_pus: 1
            })
        );
        check(&pus, 8).unwrap();
        // Only two of PU 0's threads moved; everyone else kept gmap's PU.
        let changed: Vec<usize> = (0..8).filter(|&t| pus[t] != before[t]).collect();
        assert_eq!(changed.len(), 2, "{pus:?}");
        assert!(changed.iter().all(|&t| before[t] == 0), "{pus:?}");
        // Both went to NUMA 0's free PUs, so the NUMA loads (and RemoteComm) are gmap's.
        assert_eq!(mapper::numa_load(&load, &topo, &pus), numa_before);
        // Hops: same core 2, same NUMA 4. Moving thread 2 (partner 3 on PU 1) costs
        // 100·(4−2) + 1·4 = 204, less than splitting 0–1 (400 or 404): thread 2 goes first,
        // to PU 2. Then PU 3 takes thread 1 (398: it gains 2 next to thread 2) rather than
        // thread 0 (400).
        assert_eq!(pus, vec![0, 3, 2, 1, 4, 5, 6, 7]);
    }

    /// A full NUMA node spills to the nearest node with room, and the thread that moves is the
    /// one whose partner already lives there.
    #[test]
    fn excess_goes_to_the_nearest_numa_node_with_room() {
        // 3 NUMA nodes × 1 core × 2 PUs; NUMA 0 → 2 is nearer (20) than NUMA 0 → 1 (30).
        let mut topo = synthetic_topology(3, 6).unwrap();
        assert_eq!(topo.pus.len(), 6);
        topo.distances = Some(vec![
            vec![10.0, 30.0, 20.0],
            vec![30.0, 10.0, 30.0],
            vec![20.0, 30.0, 10.0],
        ]);
        // PU 0 holds 0, 1, 2; PU 1 holds 3 (NUMA 0 full); PU 3 (NUMA 1) and PU 5 (NUMA 2) free.
        let mut pus = parse_map("6\n0 0\n1 0\n2 0\n3 1\n4 2\n5 4\n", 6, 6).unwrap();
        let c = comm(
            6,
            &[(0, 1, 100.0), (2, 5, 100.0), (0, 2, 1.0), (3, 4, 10.0)],
        );
        let r = repair(&c, &topo, &mut pus).unwrap().unwrap();
        assert_eq!(r.moved, 2);
        check(&pus, 6).unwrap();
        // Thread 2 joins its partner 5 on NUMA 2 (the nearer node), then 0 or 1 takes PU 3;
        // with equal losses the lower thread moves.
        assert_eq!(pus, vec![3, 0, 5, 1, 2, 4]);
    }

    #[test]
    fn more_threads_than_pus_allows_ceil_per_pu() {
        // 10 threads on 4 PUs: capacity 3. PU 0 holds 5, PU 1 holds 3, PUs 2 and 3 one each.
        let topo = synthetic_topology(2, 4).unwrap();
        assert_eq!(topo.pus.len(), 4);
        let mut pus = vec![0, 0, 0, 0, 0, 1, 1, 1, 2, 3];
        let c = comm(10, &[(0, 1, 5.0), (1, 2, 5.0), (3, 4, 1.0)]);
        let r = repair(&c, &topo, &mut pus).unwrap().unwrap();
        assert_eq!(r.moved, 2);
        check(&pus, 4).unwrap();
        // PU 1 (same core) was full: the excess went to PU 2 and 3 on the other NUMA node.
        assert_eq!(pus.iter().filter(|&&p| p == 0).count(), 3);
        assert_eq!(&pus[5..], &[1, 1, 1, 2, 3]);
    }

    #[test]
    fn valid_mappings_are_left_alone() {
        let topo = synthetic_topology(2, 8).unwrap();
        let mut pus = vec![7, 6, 5, 4, 3, 2, 1, 0];
        assert_eq!(
            repair(&comm(8, &[(0, 1, 1.0)]), &topo, &mut pus).unwrap(),
            None
        );
        assert_eq!(pus, vec![7, 6, 5, 4, 3, 2, 1, 0]);
        let e = repair(&comm(2, &[]), &topo, &mut [0, 8]).unwrap_err();
        assert!(e.to_string().contains("PU 8"), "{e}");
    }

    /// Any stacking, on machines of several shapes and fill levels: the result is valid, moves
    /// exactly the excess, and leaves every thread of a PU within capacity where gmap put it.
    #[test]
    fn every_overfull_mapping_becomes_valid_moving_only_the_excess() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |k: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % k as u64) as usize
        };
        for (numa, pus_wanted, threads) in [(2, 8, 8), (4, 32, 32), (4, 32, 20), (2, 8, 19)] {
            let topo = synthetic_topology(numa, pus_wanted).unwrap();
            let m = topo.pus.len();
            for _ in 0..20 {
                // Skewed towards the first PUs, like a weight-balancing mapper's stacking.
                let mut pus: Vec<usize> = (0..threads)
                    .map(|_| {
                        let upto = next(m) + 1;
                        next(upto)
                    })
                    .collect();
                let c = comm(
                    threads,
                    &(0..threads)
                        .map(|i| (i, (i + 1) % threads, 1.0 + next(9) as f64))
                        .filter(|&(i, j, _)| i != j)
                        .collect::<Vec<_>>(),
                );
                let cap = pu_capacity(threads, m);
                let excess: usize = overfull(&pus, m).iter().map(|&(_, c)| c - cap).sum();
                let before = pus.clone();
                let r = repair(&c, &topo, &mut pus).unwrap();
                check(&pus, m).unwrap();
                let changed = (0..threads).filter(|&t| pus[t] != before[t]).count();
                assert_eq!(changed, excess, "{before:?} → {pus:?}");
                assert_eq!(r.map_or(0, |r| r.moved), excess);
                // Threads on PUs that were within capacity never move.
                for t in 0..threads {
                    if before.iter().filter(|&&p| p == before[t]).count() <= cap {
                        assert_eq!(pus[t], before[t], "thread {t}: {before:?} → {pus:?}");
                    }
                }
            }
        }
    }
}
