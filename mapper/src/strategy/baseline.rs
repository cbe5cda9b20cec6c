//! Baselines: compact, scatter, random (seeded), identity (no binding).

use super::{MapInput, Strategy};
use crate::error::Result;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Thread i on PU i in tree order; with more threads than PUs, consecutive threads share a PU
/// in blocks (4 threads on 2 PUs: t0,t1 | t2,t3), as `OMP_PROC_BIND=close` places them: what
/// a user has without cmlb, and so the guard's fallback. (Dealing them round-robin, t0,t2 |
/// t1,t3, would be `scatter`'s order and splits creation-order neighbours.)
pub struct Compact;

/// The PU position of thread `t` of `n` under [`Compact`] on `p` PUs.
pub(crate) fn compact_pu(t: usize, n: usize, p: usize) -> usize {
    if n <= p {
        t
    } else {
        t * p / n
    }
}
impl Strategy for Compact {
    fn name(&self) -> &'static str {
        "compact"
    }
    fn describe(&self) -> &'static str {
        "thread i on the i-th PU in topology order (fills one NUMA node before the next; more \
         threads than PUs: consecutive threads share a PU, as OMP_PROC_BIND=close)"
    }
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>> {
        let (p, n) = (input.topology.pus.len(), input.comm.n());
        Ok(Some((0..n).map(|t| compact_pu(t, n, p)).collect()))
    }
}

/// Round-robin over NUMA nodes: thread i on node i mod N, filling each node's PUs in order.
pub struct Scatter;
impl Strategy for Scatter {
    fn name(&self) -> &'static str {
        "scatter"
    }
    fn describe(&self) -> &'static str {
        "round-robin over NUMA nodes"
    }
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>> {
        let topo = input.topology;
        let nodes: Vec<&Vec<usize>> = topo
            .numa
            .iter()
            .map(|n| &n.pus)
            .filter(|p| !p.is_empty())
            .collect();
        // Visit PUs as node0[0], node1[0], ..., node0[1], node1[1], ... skipping exhausted nodes.
        let mut order = Vec::with_capacity(topo.pus.len());
        let deepest = nodes.iter().map(|p| p.len()).max().unwrap_or(0);
        for k in 0..deepest {
            for p in &nodes {
                if let Some(&pu) = p.get(k) {
                    order.push(pu);
                }
            }
        }
        Ok(Some(
            (0..input.comm.n())
                .map(|t| order[t % order.len()])
                .collect(),
        ))
    }
}

/// A seeded random permutation of the PUs.
pub struct Random;
impl Strategy for Random {
    fn name(&self) -> &'static str {
        "random"
    }
    fn describe(&self) -> &'static str {
        "seeded random placement (a lower bound for any sensible strategy)"
    }
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>> {
        let p = input.topology.pus.len();
        let mut order: Vec<usize> = (0..p).collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(input.seed);
        order.shuffle(&mut rng);
        Ok(Some((0..input.comm.n()).map(|t| order[t % p]).collect()))
    }
}

/// No binding: the OS scheduler decides.
pub struct Identity;
impl Strategy for Identity {
    fn name(&self) -> &'static str {
        "identity"
    }
    fn describe(&self) -> &'static str {
        "no binding (alias: none); the OS scheduler places threads"
    }
    fn map(&self, _input: &MapInput) -> Result<Option<Vec<usize>>> {
        Ok(None)
    }
}
