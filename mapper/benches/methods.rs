//! Benchmarks of the source papers' other mapping methods (issue 5): `spectral` (target: n = 1024
//! threads in under 1 s), `pair-exchange`, and `dagtm` on a sample log of 2000 samples per
//! thread.
//!
//! `cargo bench -p cmlb-mapper --bench methods`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use mapper::MapInput;
use mapper::SampleLog;
use mapper::StrategySpec;
use mapper::{CommMatrix, Topology};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// A stencil-like pattern with noise: neighbours in a ring of blocks talk heavily, everything
/// else a little, in a shuffled thread order so that `compact` is far from optimal.
fn pattern(n: usize, seed: u64) -> CommMatrix {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut perm: Vec<usize> = (0..n).collect();
    rand::seq::SliceRandom::shuffle(perm.as_mut_slice(), &mut rng);
    let mut c = CommMatrix::zeros(n);
    for i in 0..n {
        for d in 1..=4 {
            let j = (i + d) % n;
            c.add_sym(perm[i], perm[j], rng.gen_range(500.0..1000.0) / d as f64);
        }
        for _ in 0..8 {
            let j = rng.gen_range(0..n);
            if j != i {
                c.add_sym(perm[i], perm[j], rng.gen_range(0.0..10.0));
            }
        }
    }
    c
}

fn topology(n: usize) -> Topology {
    // 8 NUMA nodes (2 per package), 2 PUs per core, exactly n PUs.
    let cores = n / 16;
    Topology::from_synthetic(&format!("pack:4 numa:2 core:{cores} pu:2"))
        .expect("synthetic topology")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("methods");
    g.sample_size(10);
    for n in [256usize, 1024] {
        let comm = pattern(n, 1);
        let load = vec![1.0; n];
        let topo = topology(n);
        let input = MapInput {
            comm: &comm,
            load: &load,
            topology: &topo,
            seed: 1,
        };
        for s in ["spectral", "pair-exchange", "pair-exchange:iters=50000"] {
            g.bench_with_input(BenchmarkId::new(s, n), &input, |b, i| {
                let spec = StrategySpec::parse(s).expect("strategy");
                b.iter(|| mapper::plan(&spec, i, None).expect("plan"))
            });
        }
    }
    for n in [256usize, 1024] {
        // Groups of 8 threads share a 64-line working set, each thread also has private lines.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let threads: Vec<Vec<u64>> = (0..n as u64)
            .map(|t| {
                (0..2000)
                    .map(|_| {
                        if rng.gen_bool(0.5) {
                            (t / 8) * 4096 + rng.gen_range(0..64) * 64
                        } else {
                            (1 << 32) + t * 65536 + rng.gen_range(0..256) * 64
                        }
                    })
                    .collect()
            })
            .collect();
        let log = Arc::new(SampleLog { threads });
        let spec = StrategySpec::parse("dagtm").unwrap();
        let comm = CommMatrix::zeros(n);
        let load = vec![1.0; n];
        let topo = topology(n);
        let input = MapInput {
            comm: &comm,
            load: &load,
            topology: &topo,
            seed: 1,
        };
        g.bench_with_input(BenchmarkId::new("dagtm", n), &input, |b, i| {
            b.iter(|| mapper::plan(&spec, i, Some(&log)).expect("plan"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
