//! From a plan to what pins threads, for [`crate::pipeline`]: the per-thread PU list, the
//! tasks' CPU shares, Slurm's core numbering, the profile key. What then crosses the process
//! boundary (environment, encodings, `pin`) is the `contract` crate's.
//!
//! Thread k of the plan is the k-th thread the process creates (main thread = 0). OpenMP
//! runtimes create their team in that order, and the preload library counts `pthread_create`
//! calls in that order, so both routes put thread k on `pus[k]`.

use crate::error::{MapError, Result};
use crate::plan::Plan;
use crate::topology::{Level, Topology};

pub use contract::BindMode;

/// PU OS index of every thread, in thread order. `None` for a plan that binds nothing.
pub fn thread_pus(plan: &Plan) -> Option<Vec<u32>> {
    if plan.assignment.is_empty() {
        return None;
    }
    let mut a = plan.assignment.clone();
    a.sort_by_key(|x| x.thread);
    Some(a.iter().map(|x| x.pu).collect())
}

/// Split the topology's PUs into `ntasks` disjoint shares of whole cores, in tree order (so a
/// share stays inside as few NUMA nodes as possible). Shares differ by at most one core; with
/// fewer cores than tasks, cores are split into PUs; with fewer PUs than tasks, PUs are shared
/// round-robin. Returns PU OS indexes per task.
pub fn task_shares(topo: &Topology, ntasks: usize) -> Vec<Vec<u32>> {
    if ntasks == 0 {
        return Vec::new();
    }
    // Group PUs by core, keeping tree order.
    let mut cores: Vec<Vec<u32>> = Vec::new();
    let mut last_core = None;
    for p in &topo.pus {
        if last_core == Some((p.numa, p.core)) {
            cores.last_mut().expect("pushed before").push(p.os_index);
        } else {
            cores.push(vec![p.os_index]);
            last_core = Some((p.numa, p.core));
        }
    }
    let units: Vec<Vec<u32>> = if cores.len() >= ntasks {
        cores
    } else {
        topo.pus.iter().map(|p| vec![p.os_index]).collect()
    };
    if units.len() < ntasks {
        return (0..ntasks)
            .map(|t| units[t % units.len()].clone())
            .collect();
    }
    let base = units.len() / ntasks;
    let extra = units.len() % ntasks;
    let mut out = Vec::with_capacity(ntasks);
    let mut it = units.into_iter();
    for t in 0..ntasks {
        let take = base + usize::from(t < extra);
        out.push(it.by_ref().take(take).flatten().collect());
    }
    out
}

/// The scratch key of a command: a readable executable name plus a stable hash (FNV-1a, so it
/// is the same across builds) of the executable, arguments, thread count and the node's
/// allocated cores.
pub fn profile_key(argv: &[String], threads: usize, cores: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= x as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // Field separator so ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    for a in argv {
        eat(a.as_bytes());
    }
    eat(threads.to_string().as_bytes());
    eat(cores.as_bytes());
    let base = argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_default();
    let base: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let base = base.trim_start_matches('.');
    format!(
        "{}-t{threads}-{h:016x}",
        if base.is_empty() { "cmd" } else { base }
    )
}

/// PU OS indexes of the cores with the given *logical* indexes (Slurm's `S_STEP_ALLOC_CORES`
/// numbers cores 0..N in socket order, which is hwloc's logical core order).
pub fn pus_of_logical_cores(topo: &Topology, cores: &[u32]) -> Result<Vec<u32>> {
    let core_nodes: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].level == Level::Core)
        .collect();
    let mut out = Vec::new();
    if core_nodes.is_empty() {
        // No core level: every PU is its own core.
        for &c in cores {
            let p = topo.pus.get(c as usize).ok_or_else(|| {
                MapError::Topology(format!("core {c} is not in the topology ({})", topo.source))
            })?;
            out.push(p.os_index);
        }
        return Ok(out);
    }
    for &c in cores {
        let node = core_nodes.get(c as usize).ok_or_else(|| {
            MapError::Topology(format!(
                "core {c} is not in the topology ({}, {} cores)",
                topo.source,
                core_nodes.len()
            ))
        })?;
        out.extend(topo.nodes[*node].pus.iter().map(|&p| topo.pus[p].os_index));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::plan::Assignment;

    /// One package of `numa` nodes × `cores` × `pus`, OS indexes in order.
    fn topo(numa: u32, cores: u32, pus: u32) -> Topology {
        crate::strategy::qap::tests::topo(1, numa, cores, pus)
    }

    #[test]
    fn plan_to_pus_in_thread_order() {
        let plan = Plan {
            strategy: "x".into(),
            topology: String::new(),
            assignment: vec![
                Assignment {
                    thread: 1,
                    pu: 5,
                    core: 5,
                    numa: 1,
                },
                Assignment {
                    thread: 0,
                    pu: 3,
                    core: 3,
                    numa: 0,
                },
            ],
            metrics: Metrics::default(),
        };
        assert_eq!(thread_pus(&plan), Some(vec![3, 5]));
        let none = Plan {
            assignment: vec![],
            ..plan
        };
        assert_eq!(thread_pus(&none), None);
    }

    #[test]
    fn shares_are_disjoint_whole_cores() {
        let t = topo(2, 2, 2); // PUs 0..8, cores of 2 PUs
        assert_eq!(task_shares(&t, 2), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(
            task_shares(&t, 3),
            vec![vec![0, 1, 2, 3], vec![4, 5], vec![6, 7]]
        );
        assert_eq!(task_shares(&t, 8).len(), 8);
        assert_eq!(task_shares(&t, 8)[7], vec![7]);
        let s = task_shares(&t, 10);
        assert_eq!(s[8], vec![0]);
        assert_eq!(task_shares(&t, 1), vec![(0..8).collect::<Vec<u32>>()]);
    }

    #[test]
    fn logical_cores() {
        let t = topo(2, 2, 2);
        assert_eq!(pus_of_logical_cores(&t, &[1, 2]).unwrap(), vec![2, 3, 4, 5]);
        let e = pus_of_logical_cores(&t, &[4]).unwrap_err().to_string();
        assert!(e.contains("core 4") && e.contains("4 cores"), "{e}");
    }

    #[test]
    fn key_is_stable_and_distinguishes_inputs() {
        let a = vec!["/bin/app".to_string(), "x".to_string()];
        let k = profile_key(&a, 4, "0-3");
        assert!(k.starts_with("app-t4-"), "{k}");
        assert_eq!(k, profile_key(&a, 4, "0-3"));
        assert_ne!(k, profile_key(&a, 2, "0-3"));
        assert_ne!(k, profile_key(&a, 4, "0-1"));
        let b = vec!["/bin/app".to_string(), "y".to_string()];
        assert_ne!(k, profile_key(&b, 4, "0-3"));
        let c = vec!["/bin/ap".to_string(), "px".to_string()];
        assert_ne!(profile_key(&a, 4, ""), profile_key(&c, 4, ""));
        assert!(profile_key(&["../.x y".to_string()], 1, "").starts_with("x_y-"));
    }
}
