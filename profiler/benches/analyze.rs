//! Analysis throughput: 10 M samples of 16 threads (neighbour sharing plus private streams,
//! a third of them marked DRAM) over 10 s of simulated run time. Target: a few seconds.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use profiler::{analyze, AccessKind, AnalysisParams, Sample, ThreadSpec};

const N: usize = 10_000_000;
const THREADS: u64 = 16;

fn samples() -> Vec<Sample> {
    // xorshift: deterministic, no extra dependency.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..N as u64)
        .map(|k| {
            let t = k % THREADS;
            let r = next();
            // Half the accesses go to a 256 KiB buffer shared with the right neighbour,
            // half to a private 64 MiB region.
            let addr = if r & 1 == 0 {
                0x1000_0000 + ((t + (r >> 1) % 2) % THREADS) * 0x4_0000 + (r >> 8) % 0x4_0000
            } else {
                0x10_0000_0000 + t * 0x400_0000 + (r >> 8) % 0x400_0000
            };
            Sample {
                tid: 1000 + t as i32,
                time_ns: k * 1000, // 1 µs apart: 10 s in all
                addr,
                kind: if r & 2 == 0 {
                    AccessKind::Load
                } else {
                    AccessKind::Store
                },
                dram: Some(r % 3 == 0),
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let data = samples();
    let threads: Vec<ThreadSpec> = (0..THREADS)
        .map(|t| ThreadSpec::new(1000 + t as i32, format!("t{t}")))
        .collect();
    let params = AnalysisParams::default();
    let mut g = c.benchmark_group("analyze");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("10M_samples_16_threads", |b| {
        b.iter(|| analyze(&data, &threads, &params).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
