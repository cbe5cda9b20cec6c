//! Plan quality metrics (thesis section 4.3, EagerMap's quality, hop-bytes).

use serde::{Deserialize, Serialize};

/// Every plan carries these.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Σ over pairs of threads on different NUMA nodes of A[i][j] (Eq. 4-3/4-4), each pair once.
    pub remote_comm: f64,
    /// Standard deviation of per-NUMA-node load, node load = sum of its threads' loads (Eq. 4-5).
    pub load_std: f64,
    /// Load per NUMA node, in `Topology::numa` order.
    pub numa_load: Vec<f64>,
    /// EagerMap's quality: Σ A[i][j] / distance(pu_i, pu_j).
    pub quality: f64,
    /// Σ A[i][j] · hops(pu_i, pu_j).
    pub hop_bytes: f64,
    /// Time the strategy took, in milliseconds.
    pub mapping_ms: f64,
}

use crate::matrix::CommMatrix;
use crate::topology::Topology;

/// RemoteComm: Σ_{i<j, numa(i) ≠ numa(j)} A[i][j]. `pus[t]` = index into `topo.pus`.
pub fn remote_comm(comm: &CommMatrix, topo: &Topology, pus: &[usize]) -> f64 {
    let n = comm.n();
    let mut s = 0.0;
    for i in 0..n {
        let ni = topo.pus[pus[i]].numa;
        for j in (i + 1)..n {
            if topo.pus[pus[j]].numa != ni {
                s += comm.get(i, j);
            }
        }
    }
    s
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
