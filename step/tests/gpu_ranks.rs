//! Do no harm on GPU nodes: under apply, the rank matrix may choose which of the node's shares
//! each rank gets, and on a node with GPUs no rank may end on a NUMA node farther from its GPU
//! than the share Slurm gave it (where `--gpu-bind=closest` chose that GPU). Checked on every
//! real GPU topology of `mapper/tests/data/topologies/`, for several task counts, whole and partial
//! nodes, with rank matrices whose partners are not rank-order neighbours; and the same
//! matrices on the same machines without their GPUs do move ranks across NUMA nodes, so the
//! rule is what keeps them.

use contract::ranks::{JobRanks, RankRow, Sent};
use mapper::{DeviceKind, Topology};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use step::{ProfileSource, Step};

fn load(name: &str) -> Topology {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../mapper/tests/data/topologies")
        .join(name);
    Topology::from_xml(p).unwrap()
}

/// A job rank matrix of `n` ranks where each of `pairs` exchanges `bytes` each way.
fn write_pairs(dir: &Path, n: usize, pairs: &[(u32, u32)], bytes: u64) {
    let rows = (0..n as u32)
        .map(|r| RankRow {
            rank: r,
            host: "n1".into(),
            seconds: 1.0,
            to: pairs
                .iter()
                .filter_map(|&(a, b)| match (a == r, b == r) {
                    (true, _) => Some(b),
                    (_, true) => Some(a),
                    _ => None,
                })
                .map(|d| {
                    (
                        d,
                        Sent {
                            p2p_bytes: bytes,
                            p2p_msgs: 1,
                            ..Sent::default()
                        },
                    )
                })
                .collect(),
        })
        .collect();
    JobRanks {
        n,
        rows,
        mpi: "test".into(),
        command: vec!["app".into()],
    }
    .write_dir(&dir.join(contract::ranks::RANKS_DIR))
    .unwrap();
}

/// A job rank matrix of `n` ranks: a ring over a seeded shuffle of the ranks, so partners are
/// rarely rank-order neighbours.
fn write_ranks(dir: &Path, n: usize, seed: u64) {
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let pairs: Vec<(u32, u32)> = (0..n).map(|k| (order[k], order[(k + 1) % n])).collect();
    write_pairs(dir, n, &pairs, 1 << 20);
}

/// NUMA distance between two NUMA nodes (OS indexes): the topology's matrix, or 10/20.
fn numa_distance(t: &Topology, a: u32, b: u32) -> f64 {
    match (&t.distances, t.numa_position(a), t.numa_position(b)) {
        (Some(d), Some(i), Some(j)) => d[i][j],
        _ if a == b => 10.0,
        _ => 20.0,
    }
}

fn numa_of(t: &Topology, pu: u32) -> u32 {
    t.pus[t.pu_position(pu).unwrap()].numa
}

/// The GPU `--gpu-bind=closest` would give the task on `share`: the nearest GPU by NUMA
/// distance, ties by the task's index among the GPUs at that distance (Slurm hands out
/// equally close GPUs in turn).
fn closest_gpu(t: &Topology, share: &[u32], task: usize) -> u32 {
    let home = numa_of(t, share[0]);
    let gpus: Vec<u32> = t
        .devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu)
        .map(|d| d.numa[0])
        .collect();
    let best = gpus
        .iter()
        .map(|&g| numa_distance(t, home, g))
        .fold(f64::INFINITY, f64::min);
    let near: Vec<u32> = gpus
        .into_iter()
        .filter(|&g| numa_distance(t, home, g) == best)
        .collect();
    near[task % near.len()]
}

/// Ranks of the step whose NUMA node changed from rank order's, and the worst increase of a
/// rank's distance to its GPU.
fn run(machine: &Topology, cpus: &[u32], n: usize, seed: u64, job: &Path) -> (usize, f64, String) {
    write_ranks(job, n, seed);
    let global: Vec<usize> = (0..n).collect();
    let step = || {
        Step::new(machine, cpus)
            .unwrap()
            .layout(&global, n, 1)
            .command(&["app".to_string()])
            .profile(ProfileSource::Given(job.to_path_buf()))
    };
    let planned = step().compute().unwrap();
    // Rank order: the same step with a matrix that rank order already serves (no sharing).
    let shares = step::binding::task_shares_dist(
        &machine.restrict(cpus).unwrap(),
        n,
        step::binding::SocketDist::default(),
    );
    let mut moved = 0;
    let mut worst = 0.0f64;
    for (t, task) in planned.tasks.iter().enumerate() {
        let before = numa_of(machine, shares[t][0]);
        let after = numa_of(machine, task.share[0]);
        moved += usize::from(before != after);
        if machine.devices.iter().any(|d| d.kind == DeviceKind::Gpu) {
            let g = closest_gpu(machine, &shares[t], t);
            worst = worst.max(numa_distance(machine, after, g) - numa_distance(machine, before, g));
        }
    }
    (moved, worst, planned.summary.unwrap_or_default())
}

#[test]
fn no_rank_moves_away_from_its_gpu_on_real_gpu_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        "coral-lassen.xml",
        "coral-butte-hwloc1.xml",
        "coral-ea-hwloc1.xml",
        "coral-rzansel-hwloc1.xml",
        "cts1-pascal.xml",
        "eas-tioga.xml",
        "epyc-corona.xml",
        "epyc-corona-p2.xml",
        "g4dnmetal.xml",
        "arm64-ulna-hwloc1.xml",
    ];
    let mut cases = 0;
    let mut moved_without_gpus = 0;
    for f in files {
        let machine = load(f);
        let ngpu = machine
            .devices
            .iter()
            .filter(|d| d.kind == DeviceKind::Gpu)
            .count();
        assert!(ngpu > 0, "{f} has GPUs");
        let all: Vec<u32> = machine.pus.iter().map(|p| p.os_index).collect();
        // Whole node, and a partial allocation: the first half of its PUs in tree order.
        let half = all[..all.len() / 2].to_vec();
        for cpus in [&all, &half] {
            let nnuma = machine.restrict(cpus).unwrap().numa.len();
            for n in [ngpu, 2 * ngpu, nnuma.max(2), 4] {
                if n > cpus.len() {
                    continue;
                }
                for seed in 0..3u64 {
                    let job = dir.path().join(format!("{f}-{}-{n}-{seed}", cpus.len()));
                    let (moved, worst, summary) = run(&machine, cpus, n, seed, &job);
                    cases += 1;
                    assert_eq!(
                        (moved, worst),
                        (0, 0.0),
                        "{f}, {} PUs, {n} ranks, seed {seed}: {summary}",
                        cpus.len()
                    );
                    // The same machine without its GPUs: ranks are free to cross NUMA nodes.
                    let mut bare = machine.clone();
                    bare.devices.clear();
                    let job = dir
                        .path()
                        .join(format!("bare-{f}-{}-{n}-{seed}", cpus.len()));
                    moved_without_gpus += usize::from(run(&bare, cpus, n, seed, &job).0 > 0);
                }
            }
        }
    }
    assert!(cases >= 100, "{cases} cases");
    // Without the rule these matrices move ranks across NUMA nodes in many cases.
    assert!(
        moved_without_gpus * 4 >= cases,
        "{moved_without_gpus} of {cases}"
    );
}

/// The launcher's word is enough on a node whose topology shows no GPU (hwloc built without
/// the vendor's library, a container without /sys/class/drm), and the line says why.
#[test]
fn a_gpu_step_says_so_and_keeps_numa_nodes_on_a_node_without_visible_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let machine = Topology::load("pack:1 numa:2 l2:2 core:2 pu:1").unwrap();
    let cpus: Vec<u32> = (0..8).collect();
    // Ranks 0-2, 1-3, 4-6, 5-7 exchange: rank order (0,1 | 2,3 on L2s of NUMA 0; 4,5 | 6,7 on
    // NUMA 1) separates every pair within its NUMA node, never across.
    let job = dir.path().join("job");
    let write = |pairs: &[(u32, u32)]| write_pairs(&job, 8, pairs, 1000);
    write(&[(0, 2), (1, 3), (4, 6), (5, 7)]);
    let plan = |gpus: Option<String>| {
        Step::new(&machine, &cpus)
            .unwrap()
            .layout(&(0..8).collect::<Vec<_>>(), 8, 1)
            .profile(ProfileSource::Given(job.clone()))
            .gpus(gpus)
            .compute()
            .unwrap()
    };
    let p = plan(Some("SLURM_STEP_GPUS=0,1".into()));
    let numa = |pu: u32| pu / 4;
    for (t, task) in p.tasks.iter().enumerate() {
        assert_eq!(
            numa(task.share[0]),
            numa(t as u32),
            "rank {t}: {:?}",
            p.tasks
        );
    }
    // Within a NUMA node the pairs now share an L2.
    let l2 = |pu: u32| pu / 2;
    assert_eq!(
        l2(p.tasks[0].share[0]),
        l2(p.tasks[2].share[0]),
        "{:?}",
        p.tasks
    );
    let s = p.summary.unwrap();
    assert!(
        s.contains("cores by the rank matrix")
            && s.contains("GPU step (SLURM_STEP_GPUS=0,1): ranks keep their NUMA nodes"),
        "{s}"
    );
    // Pairs across NUMA nodes: without GPUs the matrix brings them together, with GPUs the
    // ranks stay.
    write(&[(0, 4), (1, 5), (2, 6), (3, 7)]);
    let free = plan(None);
    assert!(
        free.tasks
            .iter()
            .enumerate()
            .any(|(t, task)| numa(task.share[0]) != numa(t as u32)),
        "{:?}",
        free.tasks
    );
    let kept = plan(Some("CUDA_VISIBLE_DEVICES=0".into()));
    for (t, task) in kept.tasks.iter().enumerate() {
        assert_eq!(numa(task.share[0]), numa(t as u32), "rank {t}");
    }
    assert!(kept.summary.unwrap().contains("rank order kept"));
}
