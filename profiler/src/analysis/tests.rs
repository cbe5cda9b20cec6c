use super::*;
use crate::sample::AccessKind;

const MS: u64 = 1_000_000;

fn s(tid: i32, time_ns: u64, addr: u64) -> Sample {
    Sample {
        tid,
        time_ns,
        addr,
        kind: AccessKind::Load,
        dram: None,
    }
}

fn threads(n: i32) -> Vec<ThreadSpec> {
    (0..n)
        .map(|i| ThreadSpec::new(100 + i, format!("t{i}")))
        .collect()
}

/// Ring: thread i shares buffer i with i+1 (mod n). Each thread alternately touches its own
/// left and right buffers, 1 sample per 10 µs per thread, for `ms` milliseconds.
fn ring(n: usize, ms: u64) -> Vec<Sample> {
    let mut out = Vec::new();
    let step = 10_000u64;
    for (k, t) in (0..ms * MS).step_by(step as usize).enumerate() {
        let k = k as u64;
        for i in 0..n {
            let buf = if k.is_multiple_of(2) {
                i
            } else {
                (i + n - 1) % n
            };
            let line = (k / 2 * 7) % 32;
            out.push(s(
                100 + i as i32,
                t + i as u64,
                0x10_0000 * (buf as u64 + 1) + line * 64,
            ));
        }
    }
    out
}

#[test]
fn ring_strongest_partners_are_neighbours() {
    let n = 8;
    // Neighbours touch a line 10 µs apart, more than one sample interval of the toucher (the
    // default expiration), so use a fixed 100 µs window here.
    let params = AnalysisParams {
        expiration: Expiration::Fixed { ns: 100_000 },
        ..AnalysisParams::default()
    };
    let p = analyze(ring(n, 50), &threads(n as i32), &params).unwrap();
    assert_eq!(p.comm.n(), n);
    for i in 0..n {
        let row = p.comm.row(i);
        let best = (0..n)
            .filter(|&j| j != i)
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap();
        assert!(
            best == (i + 1) % n || best == (i + n - 1) % n,
            "thread {i}: strongest partner {best}, row {row:?}"
        );
        // Non-neighbours never share a line in this pattern.
        for (j, &v) in row.iter().enumerate() {
            if j != i && j != (i + 1) % n && j != (i + n - 1) % n {
                assert_eq!(v, 0.0, "thread {i} and {j}");
            }
        }
        assert_eq!(p.comm.get(i, (i + 1) % n), p.comm.get((i + 1) % n, i));
    }
}

#[test]
fn no_sharing_gives_an_empty_matrix() {
    let samples: Vec<Sample> = (0..10_000u64)
        .map(|k| {
            s(
                100 + (k % 4) as i32,
                k * 1000,
                0x100_0000 * (k % 4 + 1) + (k % 50) * 64,
            )
        })
        .collect();
    let p = analyze(samples, &threads(4), &AnalysisParams::default()).unwrap();
    assert!(p.comm.rows().flatten().all(|&v| v == 0.0));
    assert_eq!(p.meta.samples, 10_000);
}

#[test]
fn skewed_load_ranks_the_heavy_threads_on_top() {
    // 8 threads over 300 ms; threads 0 and 5 issue 4x as many samples.
    let mut samples = Vec::new();
    for t in (0..300 * MS).step_by(100_000) {
        for i in 0..8i32 {
            let reps = if i == 0 || i == 5 { 4 } else { 1 };
            for r in 0..reps {
                samples.push(s(100 + i, t + (i as u64) * 10 + r, (i as u64) << 32));
            }
        }
    }
    let p = analyze(samples, &threads(8), &AnalysisParams::default()).unwrap();
    let mut order: Vec<usize> = (0..8).collect();
    order.sort_by(|&a, &b| p.load[b].total_cmp(&p.load[a]));
    let top: std::collections::BTreeSet<usize> = order[..2].iter().copied().collect();
    assert_eq!(top, [0, 5].into_iter().collect());
    assert!(p.load[0] > 3.0 * p.load[1]);
    assert!(!p.meta.load_dram_only);
    assert_eq!(
        p.meta.threads[0].load_samples,
        4 * p.meta.threads[1].load_samples
    );
}

#[test]
fn dram_flags_restrict_the_load_vector_and_are_reported() {
    let mut samples = Vec::new();
    for k in 0..1000u64 {
        // Thread 0: many cache hits, few DRAM; thread 1: all DRAM.
        let mut a = s(100, k * 1000, 0x1000);
        a.dram = Some(k % 10 == 0);
        let mut b = s(101, k * 1000 + 1, 0x9000);
        b.dram = Some(true);
        samples.push(a);
        samples.push(b);
    }
    let p = analyze(&samples, &threads(2), &AnalysisParams::default()).unwrap();
    assert!(p.meta.load_dram_only);
    assert_eq!(p.meta.threads[0].samples, 1000);
    assert_eq!(p.meta.threads[0].load_samples, 100);
    assert_eq!(p.meta.threads[1].load_samples, 1000);
    assert!(p.load[1] > p.load[0]);
    assert!(p.meta.params["load.filter"].starts_with("DRAM-only"));

    let all = AnalysisParams {
        load_filter: LoadFilter::All,
        ..AnalysisParams::default()
    };
    let p = analyze(&samples, &threads(2), &all).unwrap();
    assert!(!p.meta.load_dram_only);
    assert_eq!(p.meta.threads[0].load_samples, 1000);
}

#[test]
fn without_dram_information_all_samples_count_and_that_is_said() {
    let samples: Vec<Sample> = (0..100).map(|k| s(100, k * MS, 0x40)).collect();
    let p = analyze(samples, &threads(1), &AnalysisParams::default()).unwrap();
    assert!(!p.meta.load_dram_only);
    assert!(p.meta.params["load.filter"].starts_with("all samples"));
    assert_eq!(p.meta.threads[0].load_samples, 100);
}

#[test]
fn single_thread_profile_is_consistent() {
    let samples: Vec<Sample> = (0..5000).map(|k| s(7, k * 100_000, k * 8)).collect();
    let p = analyze(
        samples,
        &[ThreadSpec::new(7, "solo")],
        &AnalysisParams::default(),
    )
    .unwrap();
    assert_eq!(p.comm.n(), 1);
    assert_eq!(p.comm.get(0, 0), 0.0);
    assert_eq!(p.load.len(), 1);
    assert!(p.load[0] > 0.0);
    assert_eq!(p.timeline.len(), 500);
    assert!((p.meta.duration_s - 0.4999).abs() < 1e-9);
    // Constant rate: no outliers, low value = rate, every slice is a low point, so no phase of
    // width 100 closes and the whole run is one phase of weight 10 samples/slice.
    assert_eq!(p.meta.phases.len(), 1);
    assert!((p.meta.phases[0].weight - 10.0).abs() < 1e-9);
    assert!((p.load[0] - 10.0 * 5000.0).abs() < 1e-6);
}

#[test]
fn phase_weights_favour_samples_in_busy_phases() {
    // Two phases separated by idle slices: a busy one (20 samples/ms, thread 0 only) and a
    // quiet one (5 samples/ms, thread 1 only), equal total samples per thread.
    let mut samples = Vec::new();
    let mut t = 0u64;
    let push_phase = |tid: i32, per_ms: u64, ms: u64, samples: &mut Vec<Sample>, t: &mut u64| {
        for _ in 0..ms {
            for k in 0..per_ms {
                samples.push(s(tid, *t + k * (MS / per_ms), 0x40));
            }
            *t += MS;
        }
    };
    push_phase(100, 1, 10, &mut samples, &mut t); // low start
    push_phase(100, 20, 150, &mut samples, &mut t);
    push_phase(100, 1, 10, &mut samples, &mut t); // low gap
    push_phase(101, 5, 600, &mut samples, &mut t);
    push_phase(101, 1, 10, &mut samples, &mut t); // low end
    let p = analyze(samples, &threads(2), &AnalysisParams::default()).unwrap();
    assert_eq!(p.meta.threads[0].samples, 3020);
    assert_eq!(p.meta.threads[1].samples, 3010);
    assert_eq!(p.meta.phases.len(), 2, "{:?}", p.meta.phases);
    assert!(p.meta.phases[0].weight > 3.0 * p.meta.phases[1].weight);
    assert!(p.load[0] > 3.0 * p.load[1], "{:?}", p.load);
    // Timeline rows carry the phase index; idle slices between are -1 or a boundary.
    assert_eq!(p.timeline[50].phase, 0);
    assert_eq!(p.timeline[500].phase, 1);
}

#[test]
fn unknown_tids_are_appended_in_order_of_appearance_or_ignored() {
    let samples = vec![s(100, 0, 0x40), s(555, 1, 0x40), s(444, 2, 0x40)];
    let p = analyze(&samples, &threads(1), &AnalysisParams::default()).unwrap();
    let tids: Vec<i64> = p.meta.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids, vec![100, 555, 444]);
    assert_eq!(p.comm.get(0, 1), 1.0);
    assert_eq!(p.comm.get(2, 1), 1.0);
    assert_eq!(p.meta.params["threads_from_samples"], "2");

    let ignore = AnalysisParams {
        unknown_threads: UnknownThreads::Ignore,
        ..AnalysisParams::default()
    };
    let p = analyze(&samples, &threads(1), &ignore).unwrap();
    assert_eq!(p.meta.threads.len(), 1);
    assert_eq!(p.meta.samples, 1);
    assert_eq!(p.meta.params["samples_unknown_tid"], "2");
}

#[test]
fn threads_added_during_the_run_keep_creation_order() {
    let mut a = Analyzer::new(&threads(1), AnalysisParams::default()).unwrap();
    a.push(&s(100, 0, 0x40)).unwrap();
    assert_eq!(a.add_thread(300, "late"), 1);
    assert_eq!(a.add_thread(300, "late"), 1);
    a.push(&s(300, 10, 0x40)).unwrap();
    let p = a.finish();
    assert_eq!(p.meta.threads[1].name, "late");
    assert_eq!(p.comm.get(0, 1), 1.0);
}

#[test]
fn duplicate_tids_are_rejected() {
    let t = vec![ThreadSpec::new(5, "a"), ThreadSpec::new(5, "b")];
    let e = analyze(Vec::<Sample>::new(), &t, &AnalysisParams::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "thread list: tid 5 is listed twice (threads 0 and 1)"
    );
}

#[test]
fn bad_parameters_are_rejected_with_their_name() {
    let bad = AnalysisParams {
        line_size: 48,
        ..AnalysisParams::default()
    };
    let e = analyze(Vec::<Sample>::new(), &threads(1), &bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid analysis parameter line_size: 48 is not a power of two"
    );
    let bad = AnalysisParams {
        outlier_fraction: 1.5,
        ..AnalysisParams::default()
    };
    let e = analyze(Vec::<Sample>::new(), &threads(1), &bad).unwrap_err();
    assert!(e
        .to_string()
        .contains("outlier_fraction: 1.5 is not in [0, 1)"));
    let bad = AnalysisParams {
        expiration: Expiration::Fixed { ns: 0 },
        ..AnalysisParams::default()
    };
    assert!(analyze(Vec::<Sample>::new(), &threads(1), &bad).is_err());
}

#[test]
fn absurd_timestamps_are_an_error_not_an_allocation() {
    let samples = vec![s(100, 0, 0x40), s(100, u64::MAX / 2, 0x40)];
    let e = analyze(samples, &threads(1), &AnalysisParams::default()).unwrap_err();
    assert!(
        matches!(e, ProfileError::TimeSpan { .. }),
        "unexpected error {e}"
    );
    assert!(e.to_string().contains("corrupt timestamp"));
}

#[test]
fn samples_before_the_origin_land_in_the_first_slice() {
    let params = AnalysisParams {
        origin_ns: Some(10 * MS),
        ..AnalysisParams::default()
    };
    let samples = vec![s(100, 5 * MS, 0x40), s(100, 12 * MS, 0x80)];
    let p = analyze(samples, &threads(1), &params).unwrap();
    assert_eq!(p.timeline[0].samples, 1.0);
    assert_eq!(p.timeline[2].samples, 1.0);
    assert_eq!(p.meta.params["samples_before_origin"], "1");
}

#[test]
fn empty_stream_gives_zero_vectors() {
    let p = analyze(
        Vec::<Sample>::new(),
        &threads(3),
        &AnalysisParams::default(),
    )
    .unwrap();
    assert_eq!(p.load, vec![0.0; 3]);
    assert_eq!(p.comm.n(), 3);
    assert!(p.timeline.is_empty());
    assert!(p.meta.phases.is_empty());
    assert_eq!(p.meta.duration_s, 0.0);
}

#[test]
fn profile_round_trips_through_the_profile_directory() {
    let mut p = analyze(ring(4, 200), &threads(4), &AnalysisParams::default()).unwrap();
    p.meta.backend = "test".into();
    p.meta.command = vec!["ring".into(), "4".into()];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("profile");
    p.write_dir(&out).unwrap();
    let back = profile::Profile::read_dir(&out).unwrap();
    assert_eq!(back.comm, p.comm);
    assert_eq!(back.load, p.load);
    assert_eq!(back.meta, p.meta);
    assert_eq!(back.timeline.len(), p.timeline.len());
}

#[test]
fn sample_log_keeps_the_first_samples_with_thread_indices() {
    let params = AnalysisParams {
        sample_log_limit: 3,
        ..AnalysisParams::default()
    };
    let mut a = Analyzer::new(&threads(2), params).unwrap();
    for k in 0..5u64 {
        a.push(&s(100 + (k % 2) as i32, k * 10, 0x1000 + k))
            .unwrap();
    }
    let (p, log) = a.finish_with_log();
    assert_eq!(log.len(), 3);
    assert_eq!(
        (log[1].thread, log[1].time_ns, log[1].addr),
        (1, 10, 0x1001)
    );
    assert_eq!(p.meta.params["sample_log.dropped"], "2");
    // The log round-trips through the shared samples.csv writer/reader.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(mapper::SAMPLES_FILE);
    mapper::write_samples_csv(&path, &log).unwrap();
    let back = mapper::read_samples_csv(&path).unwrap();
    assert_eq!(back.threads, vec![vec![0x1000, 0x1002], vec![0x1001]]);
    // Off by default: no log, no params entry.
    let p = analyze([s(100, 0, 1)], &threads(1), &AnalysisParams::default()).unwrap();
    assert!(!p.meta.params.contains_key("sample_log.limit"));
}
