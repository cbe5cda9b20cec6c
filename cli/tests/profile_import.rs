//! `cmlb profile --import`: traces recorded elsewhere become profile directories; bad input is
//! one clear error, a non-zero exit and nothing written.

use std::path::Path;
use std::process::{Command, Output};

fn cmlb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(args)
        .output()
        .expect("run cmlb")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A 4-thread ring as `perf script -F comm,pid,tid,time,event,addr,data_src
/// --show-task-events` prints it: thread i and i+1 take turns on buffer i; every load of
/// thread 3 is a local DRAM hit, the others' loads hit L1 (hex data sources built from the
/// perf_event.h fields).
fn ring_trace() -> String {
    let dram: u64 = 0x2 | ((0x80 | 0x2) << 5) | (0x0d << 33);
    let l1: u64 = 0x2 | ((0x08 | 0x2) << 5) | (0x01 << 33);
    let mut s = String::new();
    s.push_str("            ring  700/700  1.000000: PERF_RECORD_COMM exec: ring:700/700\n");
    for (k, tid) in [703, 701, 702].iter().enumerate() {
        s.push_str(&format!(
            "            ring  700/700  1.00000{k}: PERF_RECORD_FORK(700:{tid}):(700:700)\n"
        ));
    }
    // Thread indices by fork order: 700 -> 0, 703 -> 1, 701 -> 2, 702 -> 3.
    let ring = [700, 703, 701, 702];
    let mut t_us = 10u64;
    for round in 0..400u64 {
        for (i, &tid) in ring.iter().enumerate() {
            let buf = if round % 2 == 0 { i } else { (i + 3) % 4 };
            let addr = 0x10_0000 * (buf as u64 + 1) + (round / 2 % 16) * 64;
            let src = if i == 3 { dram } else { l1 };
            s.push_str(&format!(
                "            ring  700/{tid}  {}.{:06}: cpu/mem-loads,ldlat=30/P:  {addr:16x}  {src:16x} |OP LOAD|LVL ...|\n",
                1 + t_us / 1_000_000,
                t_us % 1_000_000
            ));
            t_us += 1;
        }
    }
    s
}

#[test]
fn perf_script_trace_becomes_a_profile() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("ring.trace");
    std::fs::write(&trace, ring_trace()).unwrap();
    let out = d.path().join("prof");
    let o = cmlb(&[
        "profile",
        "--import",
        "perf-script",
        trace.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("import:perf-script, 4 threads numbered by fork records"),
        "{err}"
    );
    assert!(err.contains("1600 samples"), "{err}");
    let p = profile::Profile::read_dir(&out).unwrap();
    let tids: Vec<i64> = p.meta.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids, vec![700, 703, 701, 702]);
    assert!(p.meta.load_dram_only);
    // Only the last thread's loads went to DRAM.
    assert_eq!(p.load.iter().filter(|&&v| v > 0.0).count(), 1);
    assert!(p.load[3] > 0.0);
    // Ring neighbours communicate, opposite threads never do.
    for i in 0..4 {
        assert!(p.comm.get(i, (i + 1) % 4) > 0.0, "{i}");
        assert_eq!(p.comm.get(i, (i + 2) % 4), 0.0, "{i}");
    }
    // The map step accepts it.
    let o = cmlb(&[
        "map",
        "--profile",
        out.to_str().unwrap(),
        "--topology",
        "pack:2 core:2 pu:1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn csv_trace_becomes_a_profile() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.csv");
    std::fs::write(
        &trace,
        "tid,time_ns,addr,kind,dram\n11,0,0x1000,load,true\n12,100,0x1008,store,\n",
    )
    .unwrap();
    let out = d.path().join("prof");
    let o = cmlb(&[
        "profile",
        "--import",
        "csv",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let p = profile::Profile::read_dir(&out).unwrap();
    assert_eq!(p.meta.backend, "import:csv");
    assert_eq!(p.comm.get(0, 1), 1.0);
}

fn fails(args: &[&str], out: &Path, needle: &str) {
    let o = cmlb(args);
    assert!(!o.status.success(), "should fail: {args:?}");
    let err = stderr(&o);
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!out.exists(), "nothing may be written on error");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn import_errors_are_one_clear_message_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let o = out.to_str().unwrap();
    let bad = d.path().join("bad.trace");
    std::fs::write(
        &bad,
        " 7 1.000001: mem-loads: 1000\n 7 1.000002: mem-loads: xyz\n",
    )
    .unwrap();
    let b = bad.to_str().unwrap();
    fails(
        &["profile", "--import", "perf-script", b, "--out", o],
        &out,
        &format!("{b}:2: 'xyz' after the event is not a hex data address"),
    );
    fails(
        &["profile", "--import", "pebs", b, "--out", o],
        &out,
        "unknown import format 'pebs' (expected perf-script or csv)",
    );
    let missing = d.path().join("missing.trace");
    fails(
        &[
            "profile",
            "--import",
            "csv",
            missing.to_str().unwrap(),
            "--out",
            o,
        ],
        &out,
        "missing.trace: No such file or directory",
    );
    let empty = d.path().join("empty.trace");
    std::fs::write(&empty, "# nothing\n").unwrap();
    fails(
        &[
            "profile",
            "--import",
            "perf-script",
            empty.to_str().unwrap(),
            "--out",
            o,
        ],
        &out,
        "no samples found",
    );
    fails(
        &["profile", "--import", "csv", b, "--out", o, "--", "true"],
        &out,
        "cannot be used with",
    );
}
