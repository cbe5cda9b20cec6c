//! Plan quality metrics (thesis section 4.3, EagerMap's quality, hop-bytes).
//!
//! All pair sums run over unordered pairs `i < j` (each pair once), like the thesis's
//! RemoteComm. `pus[t]` is thread t's index into [`Topology::pus`].

use crate::matrix::CommMatrix;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};

/// Every plan carries these.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Σ over pairs of threads on different NUMA nodes of `A[i][j]` (Eq. 4-3/4-4), each pair once.
    /// Lower is better.
    pub remote_comm: f64,
    /// Standard deviation of per-NUMA-node load, node load = sum of its threads' loads (Eq. 4-5).
    /// Lower is better.
    pub load_std: f64,
    /// Load per NUMA node, in `Topology::numa` order.
    pub numa_load: Vec<f64>,
    /// EagerMap's quality: Σ_{i<j} `A[i][j]` / distance(pu_i, pu_j), with
    /// [`Topology::distance`] (tree hops, scaled by the NUMA latency ratio when hwloc
    /// distances are known; 1 for two threads on the same PU). Higher is better.
    pub quality: f64,
    /// Σ_{i<j} `A[i][j]` · hops(pu_i, pu_j), hops = edges through the lowest common ancestor
    /// ([`Topology::hops`], 0 on the same PU). Lower is better.
    pub hop_bytes: f64,
    /// MRAM(h) predicted memory cost of the shared accesses (digest 004, MRAM(h)'s `predict`
    /// with the default level latencies, in cycles × samples). Lower is better; only differences
    /// between plans of the same profile mean anything.
    #[serde(default)]
    pub mram_cost: f64,
    /// Time the strategy took, in milliseconds.
    pub mapping_ms: f64,
}

/// All metrics of mapping `pus` (one PU index per thread); `mapping_ms` is left at 0.
/// One pass over the thread pairs with the PU-to-PU hop counts tabulated once, so that
/// n = 4096 threads costs a table lookup per pair instead of a tree walk.
pub fn compute(comm: &CommMatrix, load: &[f64], topo: &Topology, pus: &[usize]) -> Metrics {
    let numa_load = numa_load(load, topo, pus);
    // Distinct PUs in use get dense slots; the table covers slot pairs.
    let mut slot_of = vec![usize::MAX; topo.pus.len()];
    let mut used = Vec::new();
    for &p in pus {
        if slot_of[p] == usize::MAX {
            slot_of[p] = used.len();
            used.push(p);
        }
    }
    let k = used.len();
    let (mut remote, mut quality_sum, mut hop_sum) = (0.0, 0.0, 0.0);
    if k <= 2048 {
        let mut hops = vec![0u16; k * k];
        for a in 0..k {
            for b in (a + 1)..k {
                let h = topo.hops(used[a], used[b]).min(u32::from(u16::MAX)) as u16;
                hops[a * k + b] = h;
                hops[b * k + a] = h;
            }
        }
        let numa_pos: Vec<usize> = used
            .iter()
            .map(|&p| topo.numa_position(topo.pus[p].numa).unwrap_or(0))
            .collect();
        let nn = topo.numa.len();
        let mut factor = vec![1.0; nn * nn];
        for a in 0..nn {
            for b in 0..nn {
                factor[a * nn + b] = topo.numa_factor(topo.numa[a].os_index, topo.numa[b].os_index);
            }
        }
        let slots: Vec<usize> = pus.iter().map(|&p| slot_of[p]).collect();
        for (i, &si) in slots.iter().enumerate() {
            let row = comm.row(i);
            for (j, &sj) in slots.iter().enumerate().skip(i + 1) {
                let a = row[j];
                if a == 0.0 {
                    continue;
                }
                let (ni, nj) = (numa_pos[si], numa_pos[sj]);
                if ni != nj {
                    remote += a;
                }
                let h = f64::from(hops[si * k + sj]);
                hop_sum += a * h;
                // Same as Topology::distance: 1 on the same PU, hops × NUMA factor otherwise.
                let d = if si == sj {
                    1.0
                } else {
                    h * factor[ni * nn + nj]
                };
                quality_sum += a / d;
            }
        }
    } else {
        remote = remote_comm(comm, topo, pus);
        quality_sum = quality(comm, topo, pus);
        hop_sum = hop_bytes(comm, topo, pus);
    }
    Metrics {
        remote_comm: remote,
        load_std: std_dev(&numa_load),
        numa_load,
        quality: quality_sum,
        hop_bytes: hop_sum,
        mram_cost: crate::mram::predict(comm, topo, pus, &crate::mram::LevelCosts::default()),
        mapping_ms: 0.0,
    }
}

/// Σ_{i<j} f(A[i][j], pu_i, pu_j) over pairs that communicate at all.
fn pair_sum(comm: &CommMatrix, pus: &[usize], f: impl Fn(f64, usize, usize) -> f64) -> f64 {
    let mut s = 0.0;
    for (i, &pi) in pus.iter().enumerate() {
        let row = comm.row(i);
        for (j, &pj) in pus.iter().enumerate().skip(i + 1) {
            let a = row[j];
            if a != 0.0 {
                s += f(a, pi, pj);
            }
        }
    }
    s
}

/// RemoteComm: Σ_{i<j, numa(i) ≠ numa(j)} `A[i][j]`.
pub fn remote_comm(comm: &CommMatrix, topo: &Topology, pus: &[usize]) -> f64 {
    pair_sum(comm, pus, |a, pi, pj| {
        if topo.pus[pi].numa != topo.pus[pj].numa {
            a
        } else {
            0.0
        }
    })
}

/// EagerMap's mapping quality (its Eq. 7): Σ_{i<j} `A[i][j]` / distance(pu_i, pu_j).
pub fn quality(comm: &CommMatrix, topo: &Topology, pus: &[usize]) -> f64 {
    pair_sum(comm, pus, |a, pi, pj| a / topo.distance(pi, pj))
}

/// Hop-bytes: Σ_{i<j} `A[i][j]` · hops(pu_i, pu_j).
pub fn hop_bytes(comm: &CommMatrix, topo: &Topology, pus: &[usize]) -> f64 {
    pair_sum(comm, pus, |a, pi, pj| a * f64::from(topo.hops(pi, pj)))
}

/// Per-NUMA-node load (sum of the node's threads' loads), in `topo.numa` order.
pub fn numa_load(load: &[f64], topo: &Topology, pus: &[usize]) -> Vec<f64> {
    let mut v = vec![0.0; topo.numa.len()];
    for (t, &p) in pus.iter().enumerate() {
        if let Some(k) = topo.numa_position(topo.pus[p].numa) {
            v[k] += load.get(t).copied().unwrap_or(0.0);
        }
    }
    v
}

/// Population standard deviation.
pub fn std_dev(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{Level, NodeSpec};

    /// machine -> 2 NUMA nodes -> 2 cores each -> 2 PUs each; PU os = tree order 0..7.
    /// Hops: same core 2, same NUMA 4, across NUMA 6.
    fn topo() -> Topology {
        let mut pu = 0;
        let mut numas = Vec::new();
        for n in 0..2 {
            let mut cores = Vec::new();
            for c in 0..2 {
                let pus = (0..2)
                    .map(|_| {
                        pu += 1;
                        NodeSpec::new(Level::Pu, pu - 1, vec![])
                    })
                    .collect();
                cores.push(NodeSpec::new(Level::Core, n * 2 + c, pus));
            }
            numas.push(NodeSpec::new(Level::Numa, n, cores));
        }
        Topology::build(&NodeSpec::new(Level::Machine, 0, numas), "test").unwrap()
    }

    /// 4 threads: A[0][1] = 10, A[0][2] = 4, A[1][3] = 6, A[2][3] = 8.
    fn comm() -> CommMatrix {
        let mut rows = vec![vec![0.0; 4]; 4];
        for (i, j, v) in [(0, 1, 10.0), (0, 2, 4.0), (1, 3, 6.0), (2, 3, 8.0)] {
            rows[i][j] = v;
            rows[j][i] = v;
        }
        CommMatrix::from_rows("test", rows).unwrap()
    }

    #[test]
    fn hand_computed_values() {
        let t = topo();
        let c = comm();
        let load = [1.0, 2.0, 3.0, 6.0];
        // Threads 0,1 on core 0 (PUs 0,1); thread 2 on core 1 (PU 2); thread 3 on NUMA 1 (PU 4).
        let pus = [0, 1, 2, 4];
        let m = compute(&c, &load, &t, &pus);
        // Remote pairs: (1,3) 6 and (2,3) 8.
        assert_eq!(m.remote_comm, 14.0);
        // NUMA 0 load 1+2+3 = 6, NUMA 1 load 6: balanced.
        assert_eq!(m.numa_load, vec![6.0, 6.0]);
        assert_eq!(m.load_std, 0.0);
        // Hops: (0,1) 2, (0,2) 4, (1,3) 6, (2,3) 6.
        assert_eq!(m.hop_bytes, 10.0 * 2.0 + 4.0 * 4.0 + 6.0 * 6.0 + 8.0 * 6.0);
        assert!((m.quality - (10.0 / 2.0 + 4.0 / 4.0 + 6.0 / 6.0 + 8.0 / 6.0)).abs() < 1e-12);
    }

    #[test]
    fn same_pu_and_numa_distances() {
        let mut t = topo();
        let c = comm();
        // Everything on PU 0: no hops, distance 1 for every pair, no remote traffic.
        let all0 = [0, 0, 0, 0];
        let m = compute(&c, &[1.0; 4], &t, &all0);
        assert_eq!(m.hop_bytes, 0.0);
        assert_eq!(m.quality, 28.0);
        assert_eq!(m.remote_comm, 0.0);
        assert_eq!(m.numa_load, vec![4.0, 0.0]);
        assert_eq!(m.load_std, 2.0);
        // With SLIT distances 10/30, remote pairs cost 3× their hops in the quality.
        t.distances = Some(vec![vec![10.0, 30.0], vec![30.0, 10.0]]);
        let pus = [0, 1, 2, 4];
        let q = quality(&c, &t, &pus);
        assert!((q - (10.0 / 2.0 + 4.0 / 4.0 + 6.0 / 18.0 + 8.0 / 18.0)).abs() < 1e-12);
        // Hop-bytes ignores the NUMA factor.
        assert_eq!(hop_bytes(&c, &t, &pus), 120.0);
    }

    #[test]
    fn one_pass_matches_the_separate_sums() {
        let mut t = topo();
        t.distances = Some(vec![vec![10.0, 21.0], vec![21.0, 10.0]]);
        let n = 12;
        let mut c = CommMatrix::zeros(n);
        for i in 0..n {
            for j in (i + 1)..n {
                c.add_sym(i, j, ((i * 7 + j * 3) % 5) as f64);
            }
        }
        // Oversubscribed: 12 threads on 8 PUs, some sharing a PU.
        let pus: Vec<usize> = (0..n).map(|i| (i * 5) % 8).collect();
        let m = compute(&c, &[1.0; 12], &t, &pus);
        assert_eq!(m.remote_comm, remote_comm(&c, &t, &pus));
        assert_eq!(m.hop_bytes, hop_bytes(&c, &t, &pus));
        assert!((m.quality - quality(&c, &t, &pus)).abs() < 1e-9 * m.quality);
        assert_eq!(m.numa_load.iter().sum::<f64>(), 12.0);
    }

    #[test]
    fn std_dev_is_population() {
        assert_eq!(std_dev(&[]), 0.0);
        assert_eq!(std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 2.0);
    }
}
