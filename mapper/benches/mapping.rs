//! Mapping speed of `cmlb`, the default (`cmlb-refine`) and `eagermap` for n = 64 … 4096 threads
//! on synthetic topologies with 2–16 NUMA nodes and exactly n PUs, and of the default with half
//! of the cores free (where it also tries NUMA groups sized by load). Inputs: a seeded clustered
//! matrix (clusters of 8 threads + neighbour bias + noise) and seeded log-normal loads.
//! Targets (2-vCPU VM): n = 1024 on 8 NUMA × 128 PUs ≤ 10 ms; n = 4096 ≤ 200 ms.
//!
//! `cargo bench -p cmlb-mapper --bench mapping` (add `-- --quick` style criterion flags as needed)

#[path = "../tests/common/mod.rs"]
mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use mapper::StrategySpec;
use mapper::Topology;
use mapper::{MapInput, DEFAULT_STRATEGY as DEFAULT};
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("mapping");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (n, topo, strategies) in [
        (
            64usize,
            "numa:2 core:32 pu:1",
            &[DEFAULT, "cmlb", "eagermap"][..],
        ),
        (256, "numa:4 core:32 pu:2", &[DEFAULT, "cmlb", "eagermap"]),
        (1024, "numa:8 core:128 pu:1", &[DEFAULT, "cmlb", "eagermap"]),
        (
            4096,
            "numa:16 core:128 pu:2",
            &[DEFAULT, "cmlb", "eagermap"],
        ),
        (1024, "numa:8 core:256 pu:1", &[DEFAULT]),
        (4096, "numa:16 core:512 pu:1", &[DEFAULT]),
    ] {
        let topology = Topology::from_synthetic(topo).expect("synthetic topology");
        assert!(topology.num_pus() >= n);
        let comm = common::clustered(n, 8, 11);
        let load = common::lognormal_loads(n, 11);
        let input = MapInput {
            comm: &comm,
            load: &load,
            topology: &topology,
            seed: 1,
        };
        for &name in strategies {
            let spec = StrategySpec::parse(name).expect("strategy");
            g.bench_with_input(
                BenchmarkId::new(name, format!("{n}/{topo}")),
                &input,
                |b, i| b.iter(|| mapper::plan(&spec, i, None).expect("maps")),
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
