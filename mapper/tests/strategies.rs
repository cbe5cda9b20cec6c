//! Behaviour of the grouping strategies (`cmlb`, `cmlb-refine`, `eagermap`, `eagermap-lb`):
//! the EagerMap paper's worked example, the NAS matrices, capacities, determinism, metrics.

mod common;

use mapper::{CommMatrix, Topology};
use mapper::{Level, NodeSpec};
use mapper::{MapInput, DEFAULT_STRATEGY as DEFAULT};
use proptest::prelude::*;
use std::collections::BTreeMap;

const GROUPING: [&str; 4] = ["cmlb", "cmlb-refine", "eagermap", "eagermap-lb"];

fn pus_of(topo: &Topology, name: &str, comm: &CommMatrix, load: &[f64]) -> Vec<usize> {
    let input = MapInput {
        comm,
        load,
        topology: topo,
        seed: 7,
    };
    let plan = common::plan_named(name, &input).expect("plan");
    plan.assignment
        .iter()
        .map(|a| topo.pu_position(a.pu).unwrap())
        .collect()
}

/// Threads per NUMA node (in `topo.numa` order).
fn per_numa(topo: &Topology, pus: &[usize]) -> Vec<usize> {
    let mut v = vec![0; topo.numa.len()];
    for &p in pus {
        v[topo.numa_position(topo.pus[p].numa).unwrap()] += 1;
    }
    v
}

/// Digest 001, T1: 16 tasks, 2 machines × 2 L3 × 2 PUs, m[i][j] = 2^(4-|i-j|) for 1 ≤ |i-j| ≤ 4.
#[test]
fn eagermap_paper_example_maps_task_x_to_core_x_div_2() {
    let pu = |i: u32| NodeSpec::new(Level::Core, i, vec![NodeSpec::new(Level::Pu, i, vec![])]);
    let l3 = |i: u32| NodeSpec::new(Level::L3, i, vec![pu(2 * i), pu(2 * i + 1)]);
    let machine = |i: u32| NodeSpec::new(Level::Numa, i, vec![l3(2 * i), l3(2 * i + 1)]);
    let root = NodeSpec::new(Level::Machine, 0, vec![machine(0), machine(1)]);
    let topo = Topology::build(&root, "paper fig. 2").unwrap();
    let mut m = CommMatrix::zeros(16);
    for i in 0..16usize {
        for j in (i + 1)..16 {
            let d = j - i;
            if d <= 4 {
                m.add_sym(i, j, f64::powi(2.0, 4 - d as i32));
            }
        }
    }
    let pus = pus_of(&topo, "eagermap", &m, &[1.0; 16]);
    let cores: Vec<u32> = pus.iter().map(|&p| topo.pus[p].core).collect();
    let expected: Vec<u32> = (0..16).map(|x| x / 2).collect();
    assert_eq!(cores, expected);
}

#[test]
fn eagermap_oversubscribes_evenly() {
    // 10 tasks on 4 PUs: every PU gets 2 or 3 (T5).
    let topo = common::uniform(2, 1, 2, 1);
    let m = common::clustered(10, 2, 3);
    let pus = pus_of(&topo, "eagermap", &m, &[1.0; 10]);
    let mut per_pu = vec![0; 4];
    for p in pus {
        per_pu[p] += 1;
    }
    assert!(per_pu.iter().all(|&c| c == 2 || c == 3), "{per_pu:?}");
}

#[test]
fn eagermap_keeps_communicating_pairs_on_a_core() {
    // Pairs (0,5), (1,4), (2,7), (3,6) talk: each pair must share a core (2 PUs per core).
    let topo = common::uniform(2, 1, 2, 2);
    let mut m = CommMatrix::zeros(8);
    for (a, b) in [(0, 5), (1, 4), (2, 7), (3, 6)] {
        m.add_sym(a, b, 100.0);
    }
    for name in ["eagermap", "cmlb", DEFAULT] {
        let pus = pus_of(&topo, name, &m, &[1.0; 8]);
        for (a, b) in [(0, 5), (1, 4), (2, 7), (3, 6)] {
            assert_eq!(
                topo.pus[pus[a]].core, topo.pus[pus[b]].core,
                "{name}: {a},{b}"
            );
        }
    }
}

#[test]
fn nas_matrices_map_validly_with_every_strategy() {
    for (name, m) in common::nas_matrices() {
        let n = m.n();
        assert!(n == 32 || n == 64, "{name}: {n}");
        let topo = common::uniform(4, 1, n as u32 / 4, 1);
        let load = common::quarter_heavy(n);
        for s in GROUPING.iter().chain(&["compact", "scatter", "random"]) {
            let input = MapInput {
                comm: &m,
                load: &load,
                topology: &topo,
                seed: 1,
            };
            let plan = common::plan_named(s, &input).unwrap();
            let mut pus: Vec<u32> = plan.assignment.iter().map(|a| a.pu).collect();
            pus.sort();
            pus.dedup();
            assert_eq!(pus.len(), n, "{name} {s}: one thread per PU");
        }
    }
}

#[test]
fn nas_cg_keeps_its_communicating_blocks_local() {
    // CG's 32 tasks communicate in blocks; EagerMap's grouping must beat a random placement
    // by far, and cmlb-refine must stay close to it.
    let (_, m) = common::nas_matrices()
        .into_iter()
        .find(|(n, _)| n == "cg_W")
        .unwrap();
    let topo = common::uniform(4, 1, 8, 1);
    let load = vec![1.0; 32];
    let rc = |s: &str| {
        let input = MapInput {
            comm: &m,
            load: &load,
            topology: &topo,
            seed: 1,
        };
        common::plan_named(s, &input).unwrap().metrics.remote_comm
    };
    assert!(rc("eagermap") < 0.5 * rc("random"));
    assert!(rc(DEFAULT) <= rc("eagermap") * 1.15);
}

#[test]
fn metrics_match_hand_computed_values() {
    // 4 threads on 2 NUMA nodes × 2 PUs; pairs (0,1) and (2,3) talk 10, (0,2) talks 3,
    // (1,3) talks 1. Loads 4,1,1,4: cmlb must pair by load balance: group 0 = {0, ?}.
    let topo = common::uniform(2, 1, 2, 1);
    let mut m = CommMatrix::zeros(4);
    m.add_sym(0, 1, 10.0);
    m.add_sym(2, 3, 10.0);
    m.add_sym(0, 2, 3.0);
    m.add_sym(1, 3, 1.0);
    let load = [4.0, 1.0, 1.0, 4.0];
    let input = MapInput {
        comm: &m,
        load: &load,
        topology: &topo,
        seed: 0,
    };
    let plan = common::plan_named("eagermap", &input).unwrap();
    // EagerMap: {0,1} on node 0, {2,3} on node 1. Remote = (0,2) + (1,3) = 4.
    // Node loads 5 and 5 -> std 0.
    let numa: Vec<u32> = plan.assignment.iter().map(|a| a.numa).collect();
    assert_eq!(numa, vec![0, 0, 1, 1]);
    assert_eq!(plan.metrics.remote_comm, 4.0);
    assert_eq!(plan.metrics.numa_load, vec![5.0, 5.0]);
    assert_eq!(plan.metrics.load_std, 0.0);
    // compact with loads 4,4,1,1: threads 0,1 on node 0, 2,3 on node 1: loads 8 and 2, std 3.
    let load2 = [4.0, 4.0, 1.0, 1.0];
    let input2 = MapInput {
        load: &load2,
        ..input
    };
    let plan = common::plan_named("compact", &input2).unwrap();
    assert_eq!(plan.metrics.numa_load, vec![8.0, 2.0]);
    assert_eq!(plan.metrics.load_std, 3.0);
    assert_eq!(plan.metrics.remote_comm, 4.0);
    // cmlb: seed 0 (load 4, target 5); the last slot goes to the thread that brings the group
    // closest to its target, a light one, not the top-ranked heavy partner 1: 5 and 5.
    let plan = common::plan_named("cmlb", &input2).unwrap();
    assert_eq!(plan.metrics.numa_load, vec![5.0, 5.0]);
    // The default puts balance first: one heavy thread per node ({1,3} / {0,2}), which cuts
    // the two 10-pairs: RemoteComm 20.
    let plan = common::plan_named(DEFAULT, &input2).unwrap();
    assert_eq!(plan.metrics.numa_load, vec![5.0, 5.0]);
    assert_eq!(plan.metrics.load_std, 0.0);
    assert_eq!(plan.metrics.remote_comm, 20.0);
}

#[test]
fn uneven_numa_nodes_get_threads_in_proportion_to_capacity() {
    let topo = common::uneven(&[6, 2], 1);
    let m = common::clustered(20, 4, 5);
    let load = common::lognormal_loads(20, 5);
    for s in ["cmlb", DEFAULT] {
        // Fewer threads than PUs: 5 on 8 PUs -> 3.75 / 1.25 -> 4 + 1.
        let m5 = common::clustered(5, 2, 1);
        assert_eq!(
            per_numa(&topo, &pus_of(&topo, s, &m5, &[1.0; 5])),
            vec![4, 1],
            "{s}"
        );
        // More threads than PUs: 20 on 8 -> 15 + 5 (2.5x each).
        assert_eq!(
            per_numa(&topo, &pus_of(&topo, s, &m, &load)),
            vec![15, 5],
            "{s}"
        );
    }
}

#[test]
fn restricted_cpuset_is_respected() {
    let topo = common::restricted();
    assert_eq!(topo.num_pus(), 16);
    let m = common::clustered(16, 4, 9);
    let load = common::quarter_heavy(16);
    for s in GROUPING {
        let pus = pus_of(&topo, s, &m, &load);
        let mut sorted = pus.clone();
        sorted.sort();
        sorted.dedup();
        if s != "eagermap-lb" {
            assert_eq!(sorted.len(), 16, "{s}: one thread per PU");
        }
        if s.starts_with("cmlb") {
            assert_eq!(per_numa(&topo, &pus), vec![12, 4], "{s}");
        }
    }
}

fn arb_topology() -> impl Strategy<Value = Topology> {
    prop_oneof![
        (1u32..4, 1u32..3, 1u32..4, 1u32..3).prop_map(|(n, l, c, p)| common::uniform(n, l, c, p)),
        proptest::collection::vec(1u32..5, 1..4).prop_map(|v| common::uneven(&v, 1)),
        any::<u16>()
            .prop_map(|mask| common::filtered(2, 2, 2, 2, |os| mask & (1 << os) != 0 || os == 0)),
    ]
}

fn arb_input() -> impl Strategy<Value = (Topology, CommMatrix, Vec<f64>)> {
    (arb_topology(), 1usize..40, any::<u64>(), 0u8..3).prop_map(|(t, n, seed, kind)| {
        let m = common::clustered(n, 1 + (seed % 5) as usize, seed);
        let load = match kind {
            0 => vec![1.0; n],
            1 => common::quarter_heavy(n),
            _ => common::lognormal_loads(n, seed),
        };
        (t, m, load)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_thread_mapped_once_to_a_valid_pu_deterministically((topo, m, load) in arb_input()) {
        let n = m.n();
        let p = topo.num_pus();
        for s in GROUPING {
            let a = pus_of(&topo, s, &m, &load);
            prop_assert_eq!(a.len(), n);
            prop_assert!(a.iter().all(|&x| x < p));
            prop_assert_eq!(&a, &pus_of(&topo, s, &m, &load), "{} not deterministic", s);
            let mut per_pu = BTreeMap::new();
            for &x in &a {
                *per_pu.entry(x).or_insert(0usize) += 1;
            }
            let most = per_pu.values().copied().max().unwrap();
            if s != "eagermap-lb" {
                // No PU gets more than its fair share: one thread if they fit, else ⌈n/P⌉.
                prop_assert!(most <= n.div_ceil(p), "{} puts {} threads on one PU", s, most);
            }
            let cores: Vec<usize> = (0..topo.numa.len()).map(|k| topo.numa_cores(k)).collect();
            let caps: Vec<usize> = topo.numa.iter().map(|x| x.capacity()).collect();
            if s == DEFAULT && n < p {
                // Spare PUs: node sizes may follow the loads, but never more threads than the
                // node's cores when there are spare cores, nor than its PUs.
                let bound = if n < cores.iter().sum::<usize>() { &cores } else { &caps };
                let got = per_numa(&topo, &a);
                prop_assert!(got.iter().zip(bound).all(|(g, b)| g <= b), "{:?} {:?}", got, bound);
            } else if s.starts_with("cmlb") {
                // Proportional to capacity: a node's cores when every thread fits on a core of
                // its own, else its PUs; within one thread of n·c/C.
                let cap = if n <= cores.iter().sum::<usize>() { &cores } else { &caps };
                let total: usize = cap.iter().sum();
                let got = per_numa(&topo, &a);
                for ((g, c), pus) in got.iter().zip(cap).zip(&caps) {
                    let exact = n as f64 * *c as f64 / total as f64;
                    prop_assert!((*g as f64 - exact).abs() < 1.0, "{} {:?} {:?}", s, got, cap);
                    if n <= p {
                        prop_assert!(g <= pus);
                    }
                }
            }
        }
    }

    #[test]
    fn annealing_never_raises_remote_comm((topo, m, load) in arb_input(), seed in 0u64..4) {
        let input = MapInput { comm: &m, load: &load, topology: &topo, seed };
        let annealed = common::plan_named(DEFAULT, &input).unwrap().metrics.remote_comm;
        let kl_only = common::plan_named("cmlb-refine:anneal=0", &input).unwrap().metrics.remote_comm;
        prop_assert!(annealed <= kl_only * (1.0 + 1e-9) + 1e-9, "{} > {}", annealed, kl_only);
    }

    #[test]
    fn default_is_never_much_less_balanced_than_cmlb((topo, m, load) in arb_input()) {
        let input = MapInput { comm: &m, load: &load, topology: &topo, seed: 0 };
        let base = common::plan_named("cmlb", &input).unwrap();
        let refined = common::plan_named(DEFAULT, &input).unwrap();
        // Every group stays within max(its deviation from its target after cmlb, 0.5 % of the
        // mean target), so imbalance(default)² ≤ imbalance(cmlb)² + tolerance², where
        // imbalance = RMS deviation of the NUMA loads from their capacity-proportional targets.
        // The targets follow cmlb's node sizes (capacity-proportional), also when the default
        // sizes the nodes by load on a machine with spare cores.
        let mut count = vec![0usize; base.metrics.numa_load.len()];
        for a in &base.assignment {
            count[topo.numa_position(a.numa).unwrap()] += 1;
        }
        let imbalance = |p: &mapper::Plan| {
            let n = p.assignment.len() as f64;
            let total: f64 = load.iter().sum();
            let devs: Vec<f64> = count.iter().zip(&p.metrics.numa_load)
                .filter(|(c, _)| **c > 0)
                .map(|(c, l)| (l - total * *c as f64 / n).powi(2))
                .collect();
            (devs.iter().sum::<f64>() / devs.len() as f64).sqrt()
        };
        let (b, r) = (imbalance(&base), imbalance(&refined));
        let total: f64 = load.iter().sum();
        let live = base.metrics.numa_load.iter().filter(|&&l| l > 0.0).count().max(1);
        let tol = mapper::LOAD_TOLERANCE * total / live as f64;
        let bound = (b.powi(2) + tol.powi(2)).sqrt();
        prop_assert!(r <= bound * (1.0 + 1e-9) + 1e-12, "imbalance {} -> {} (bound {})", b, r, bound);
    }
}
