//! From a plan to what pins threads, for the pipeline ([`crate::Step`]): the per-thread PU list, the
//! tasks' CPU shares (dealt across sockets by a [`SocketDist`] rule; reading it from Slurm's
//! `SLURM_DISTRIBUTION`, and Slurm's core numbering, are `cmlb-slurm`'s `cores`), the profile key. What then crosses the process
//! boundary (environment, encodings, `pin`) is the `contract` crate's.
//!
//! Thread k of the plan is the k-th thread the process creates (main thread = 0). OpenMP
//! runtimes create their team in that order, and the preload library counts `pthread_create`
//! calls in that order, so both routes put thread k on `pus[k]`.

use mapper::Plan;
use mapper::{Level, Topology};

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

/// How Slurm's task/affinity deals a node's cores to its tasks across the sockets (packages):
/// the second level of `srun -m node:socket`. Slurm's default is `cyclic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SocketDist {
    /// Tasks fill the first socket, then the next (`-m *:block`).
    Block,
    /// Task t takes its cores from the next socket in turn (`-m *:cyclic`, and `fcyclic`,
    /// which differs only for tasks of several CPUs).
    #[default]
    Cyclic,
}

/// Split the topology's PUs into `ntasks` disjoint shares of whole cores, in tree order (so a
/// share stays inside as few NUMA nodes as possible), the tasks filling the machine in order.
/// See [`task_shares_dist`].
pub fn task_shares(topo: &Topology, ntasks: usize) -> Vec<Vec<u32>> {
    task_shares_dist(topo, ntasks, SocketDist::Block)
}

/// Split the topology's PUs into `ntasks` disjoint shares of whole cores, as Slurm's
/// task/affinity deals them: shares differ by at most one core, each taken in tree order from
/// one socket (package) where it fits, the sockets visited per `dist`; with fewer cores than
/// tasks, cores are split into PUs; with fewer PUs than tasks, PUs are shared round-robin.
/// Returns PU OS indexes per task.
pub fn task_shares_dist(topo: &Topology, ntasks: usize, dist: SocketDist) -> Vec<Vec<u32>> {
    if ntasks == 0 {
        return Vec::new();
    }
    // Group PUs by core, keeping tree order; remember each core's package.
    let package_of = |p: &mapper::Pu| {
        let mut n = Some(p.node);
        while let Some(i) = n {
            if topo.nodes[i].level == Level::Package {
                return i;
            }
            n = topo.nodes[i].parent;
        }
        0
    };
    let mut cores: Vec<(usize, Vec<u32>)> = Vec::new();
    let mut last_core = None;
    for p in &topo.pus {
        if last_core == Some((p.numa, p.core)) {
            cores.last_mut().expect("pushed before").1.push(p.os_index);
        } else {
            cores.push((package_of(p), vec![p.os_index]));
            last_core = Some((p.numa, p.core));
        }
    }
    let units: Vec<(usize, Vec<u32>)> = if cores.len() >= ntasks {
        cores
    } else {
        topo.pus
            .iter()
            .map(|p| (package_of(p), vec![p.os_index]))
            .collect()
    };
    if units.len() < ntasks {
        return (0..ntasks)
            .map(|t| units[t % units.len()].1.clone())
            .collect();
    }
    let base = units.len() / ntasks;
    let extra = units.len() % ntasks;
    let size = |t: usize| base + usize::from(t < extra);
    // Sockets in tree order, each a queue of its units.
    let mut sockets: Vec<(usize, std::collections::VecDeque<Vec<u32>>)> = Vec::new();
    for (pkg, u) in units {
        match sockets.iter_mut().find(|(p, _)| *p == pkg) {
            Some((_, q)) => q.push_back(u),
            None => sockets.push((pkg, std::collections::VecDeque::from([u]))),
        }
    }
    let mut out = Vec::with_capacity(ntasks);
    let mut next = 0;
    for t in 0..ntasks {
        let mut share = Vec::new();
        // Block: the first socket with cores left; cyclic: the next one in turn.
        let mut s = match dist {
            SocketDist::Block => 0,
            SocketDist::Cyclic => next,
        };
        let mut need = size(t);
        let mut tried = 0;
        while need > 0 && tried <= sockets.len() {
            if let Some(u) = sockets[s].1.pop_front() {
                share.extend(u);
                need -= 1;
                continue;
            }
            s = (s + 1) % sockets.len();
            tried += 1;
        }
        next = (s + 1) % sockets.len();
        out.push(share);
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

#[cfg(test)]
mod tests {
    use super::*;
    use mapper::Assignment;
    use mapper::Metrics;

    /// One package of `numa` nodes × `cores` × `pus`, OS indexes in order.
    fn topo(numa: u32, cores: u32, pus: u32) -> Topology {
        Topology::load(&format!(
            "pack:{} numa:{} core:{} pu:{}",
            1, numa, cores, pus
        ))
        .unwrap()
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
    fn shares_follow_slurms_socket_distribution() {
        // 2 sockets x 2 cores x 1 PU: PUs 0-1 on socket 0, 2-3 on socket 1.
        let t = Topology::load(&format!("pack:{} numa:{} core:{} pu:{}", 2, 1, 2, 1)).unwrap();
        let c = |n| task_shares_dist(&t, n, SocketDist::Cyclic);
        // Slurm's default: rank 0 on CPU 0, 1 on 2, 2 on 1, 3 on 3.
        assert_eq!(c(4), vec![vec![0], vec![2], vec![1], vec![3]]);
        assert_eq!(c(2), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(
            task_shares_dist(&t, 4, SocketDist::Block),
            vec![vec![0], vec![1], vec![2], vec![3]]
        );
        // 3 tasks on 4 cores: 2 + 1 + 1, each from one socket where it fits.
        assert_eq!(c(3), vec![vec![0, 1], vec![2], vec![3]]);
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
