//! Test inputs shared by the integration tests and the benchmarks: hand-built topologies
//! (uniform trees, uneven and restricted ones), seeded synthetic matrices and loads, and the
//! bundled EagerMap example matrices.
#![allow(dead_code)]

use mapper::MapInput;
use mapper::{CommMatrix, Plan, StrategySpec};
use mapper::{Level, NodeSpec, Topology};
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

/// machine → `numa` NUMA nodes → `l3` L3 each → `cores` cores each → `pus` PUs each,
/// with OS indexes numbered in tree order (like an hwloc synthetic topology).
pub fn uniform(numa: u32, l3: u32, cores: u32, pus: u32) -> Topology {
    filtered(numa, l3, cores, pus, |_| true)
}

/// Like [`uniform`] but keeping only the PUs whose OS index satisfies `keep` (a cpuset
/// restriction); cores, caches and NUMA nodes left without PUs disappear.
pub fn filtered(numa: u32, l3: u32, cores: u32, pus: u32, keep: impl Fn(u32) -> bool) -> Topology {
    let (mut pu_os, mut core_os) = (0u32, 0u32);
    let mut numas = Vec::new();
    for n in 0..numa {
        let mut caches = Vec::new();
        for c in 0..l3 {
            let mut cs = Vec::new();
            for _ in 0..cores {
                let mut ps = Vec::new();
                for _ in 0..pus {
                    if keep(pu_os) {
                        ps.push(NodeSpec::new(Level::Pu, pu_os, vec![]));
                    }
                    pu_os += 1;
                }
                if !ps.is_empty() {
                    cs.push(NodeSpec::new(Level::Core, core_os, ps));
                }
                core_os += 1;
            }
            if !cs.is_empty() {
                caches.push(NodeSpec::new(Level::L3, n * l3 + c, cs));
            }
        }
        if !caches.is_empty() {
            numas.push(NodeSpec::new(Level::Numa, n, caches));
        }
    }
    let src = format!("numa:{numa} l3:{l3} core:{cores} pu:{pus}");
    Topology::build(&NodeSpec::new(Level::Machine, 0, numas), src).expect("valid test topology")
}

/// NUMA nodes with different core counts (one L3 each, `pus` PUs per core).
pub fn uneven(cores_per_numa: &[u32], pus: u32) -> Topology {
    let (mut pu_os, mut core_os) = (0u32, 0u32);
    let mut numas = Vec::new();
    for (n, &cores) in cores_per_numa.iter().enumerate() {
        let mut cs = Vec::new();
        for _ in 0..cores {
            let ps = (0..pus)
                .map(|_| {
                    pu_os += 1;
                    NodeSpec::new(Level::Pu, pu_os - 1, vec![])
                })
                .collect();
            cs.push(NodeSpec::new(Level::Core, core_os, ps));
            core_os += 1;
        }
        numas.push(NodeSpec::new(
            Level::Numa,
            n as u32,
            vec![NodeSpec::new(Level::L3, n as u32, cs)],
        ));
    }
    Topology::build(
        &NodeSpec::new(Level::Machine, 0, numas),
        format!("uneven {cores_per_numa:?}x{pus}"),
    )
    .expect("valid test topology")
}

/// The restricted, uneven cpuset used by golden tests: 2 NUMA × 2 L3 × 4 cores × 2 PUs with
/// PUs 0-11 and 16-19 allowed (node 0 keeps 12 PUs, node 1 keeps 4; one L3 of node 1 is gone).
pub fn restricted() -> Topology {
    filtered(2, 2, 4, 2, |os| os < 12 || (16..20).contains(&os))
}

/// Seeded clustered matrix: clusters of `cluster` consecutive threads talk a lot (with a
/// neighbour bias), everything else carries light noise. Symmetric, zero diagonal.
pub fn clustered(n: usize, cluster: usize, seed: u64) -> CommMatrix {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut m = CommMatrix::zeros(n);
    for i in 0..n {
        for j in (i + 1)..n {
            let mut v = rng.gen_range(0.0..10.0);
            if i / cluster == j / cluster {
                v += 1000.0 + rng.gen_range(0.0..500.0);
            }
            if j == i + 1 {
                v += 300.0;
            }
            m.add_sym(i, j, v);
        }
    }
    m
}

/// Seeded log-normal loads (σ = 1), mean around e^0.5.
pub fn lognormal_loads(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            // Box-Muller: a standard normal from two uniforms.
            let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
            let u2: f64 = rng.gen_range(0.0..1.0);
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            (z * 1.0).exp()
        })
        .collect()
}

/// The quality load vector: the first quarter of the threads carry 4× the load.
pub fn quarter_heavy(n: usize) -> Vec<f64> {
    (0..n).map(|i| if i < n / 4 { 4.0 } else { 1.0 }).collect()
}

/// `mapper/tests/data/eagermap-examples`, bundled with the repository.
pub fn examples_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/eagermap-examples");
    assert!(
        d.join("SP-OMP.csv").is_file(),
        "test data missing: {} (the EagerMap example matrices ship with the repository)",
        d.display()
    );
    d
}

/// The ten EagerMap example matrices (nine NAS-MPI 32-task, SP-OMP 64-thread), by name.
pub fn nas_matrices() -> Vec<(String, CommMatrix)> {
    let dir = examples_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("nas-mpi-32t"))
        .expect("read nas-mpi-32t")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .collect();
    files.sort();
    files.push(dir.join("SP-OMP.csv"));
    files
        .into_iter()
        .map(|p| {
            let name = p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .split('.')
                .next()
                .unwrap()
                .to_string();
            let m = mapper::read_comm_csv(&p, true).expect("example matrix parses");
            (name, m)
        })
        .collect()
}

/// The plan of strategy `spec` (`name[:key=value,...]`) through the one public route,
/// [`mapper::plan`], without a sample log.
pub fn plan_named(spec: &str, input: &MapInput) -> mapper::Result<Plan> {
    mapper::plan(&StrategySpec::parse(spec)?, input, None)
}
