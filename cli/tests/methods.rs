//! `cmlb map` with the source papers' other methods (spectral, pair-exchange, dagtm) and the
//! MRAM(h) column, through the real binary.

mod common;

use common::{fails, ok, usage_error};

use serde_json::Value;

/// NAS SP (OpenMP, 64 threads) from EagerMap's repository, bundled with the mapper tests.
const SP_OMP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../mapper/tests/data/eagermap-examples/SP-OMP.csv"
);

fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    serde_json::from_str(&ok(&a)).expect("JSON")
}

/// Every topology the mapper's tests use: synthetic shapes (odd core counts, L3 level), the
/// hwloc XML exports under mapper/tests/data, the live machine, and a restricted cpuset that
/// leaves NUMA nodes of unequal capacity.
const TOPOLOGIES: &[&str] = &[
    "pack:2 numa:2 core:16 pu:2",
    "pack:2 numa:2 core:8 pu:2",
    "pack:2 numa:2 l3:1 core:3 pu:2",
    "numa:2 core:4 pu:1",
    "numa:2 core:2 pu:1",
    "core:2 pu:1",
    "live",
    "intel-2s-4numa.xml",
    "amd-2s-8numa.xml",
    "amd-2s-8numa-dist.xml",
    "snc-2s.xml",
    "one-numa-2pack.xml",
    "vm-live.xml",
];

/// `--topology` (and `--cpuset`) arguments for one entry of [`TOPOLOGIES`].
fn topo_args(t: &str) -> Vec<String> {
    let spec = if t.ends_with(".xml") {
        format!("{}/../mapper/tests/data/{t}", env!("CARGO_MANIFEST_DIR"))
    } else {
        t.to_string()
    };
    vec!["--topology".into(), spec]
}

fn run_on(topo: &str, extra: &[&str]) -> Value {
    let mut a: Vec<String> = ["map", "--comm", SP_OMP, "--comm-format", "eagermap"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(topo_args(topo));
    a.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    json(&refs)
}

#[test]
fn spectral_and_pair_exchange_plan_sp_on_every_topology() {
    for topo in TOPOLOGIES {
        for strat in ["spectral", "pair-exchange:iters=20000"] {
            let v = run_on(topo, &["--strategy", strat]);
            let asg = v["assignment"].as_array().unwrap();
            assert_eq!(asg.len(), 64, "{topo} {strat}");
            let m = &v["metrics"];
            assert!(
                m["mram_cost"].as_f64().unwrap() > 0.0,
                "{topo} {strat}: {m}"
            );
        }
    }
    // Uneven NUMA capacities after a restriction (3 + 1 PUs), and a fixed scheme.
    let v = run_on(
        "numa:2 core:4 pu:1",
        &[
            "--cpuset",
            "0-2,4",
            "--strategy",
            "spectral:k=3,scheme=first-fit",
        ],
    );
    assert_eq!(v["assignment"].as_array().unwrap().len(), 64);
}

/// dagtm on the same topologies: 64 threads where threads 2i and 2i+1 share their lines.
#[test]
fn dagtm_plans_64_threads_on_every_topology() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("tid_index,time_ns,addr\n");
    for r in 0..4u64 {
        for t in 0..64u64 {
            for l in 0..6u64 {
                csv.push_str(&format!(
                    "{t},{},{}\n",
                    r * 1000 + l,
                    (t / 2) * 4096 + l * 64
                ));
            }
        }
    }
    let path = dir.path().join("samples.csv");
    std::fs::write(&path, csv).unwrap();
    for topo in TOPOLOGIES {
        let v = run_on(
            topo,
            &["--samples", path.to_str().unwrap(), "--strategy", "dagtm"],
        );
        let asg = v["assignment"].as_array().unwrap();
        assert_eq!(asg.len(), 64, "{topo}");
        if topo.ends_with("pu:2") {
            // Partners share a core (one group per core, N_p = 2).
            for i in 0..32 {
                assert_eq!(asg[2 * i]["core"], asg[2 * i + 1]["core"], "{topo}: {v}");
            }
        }
    }
}

#[test]
fn methods_on_sp_compared_with_baselines() {
    let args = |s: &'static str| {
        vec![
            "map",
            "--comm",
            SP_OMP,
            "--comm-format",
            "eagermap",
            "--topology",
            "pack:2 numa:2 core:16 pu:2",
            "--strategy",
            s,
        ]
    };
    let hb = |s: &'static str| json(&args(s))["metrics"]["hop_bytes"].as_f64().unwrap();
    let (compact, scatter) = (hb("compact"), hb("scatter"));
    let (spectral, pe) = (hb("spectral"), hb("pair-exchange:iters=50000"));
    assert!(pe <= compact, "pair-exchange {pe} vs compact {compact}");
    assert!(
        spectral < 1.1 * compact,
        "spectral {spectral} vs compact {compact}"
    );
    assert!(
        spectral < scatter,
        "spectral {spectral} vs scatter {scatter}"
    );
}

#[test]
fn compare_table_has_the_mram_column() {
    let out = ok(&[
        "map",
        "--comm",
        SP_OMP,
        "--comm-format",
        "eagermap",
        "--topology",
        "pack:2 numa:2 core:16 pu:2",
        "--compare",
    ]);
    let head = out.lines().find(|l| l.starts_with("strategy")).unwrap();
    assert!(head.contains("mram_cost"), "{out}");
    for s in ["spectral", "pair-exchange"] {
        assert!(out.lines().any(|l| l.starts_with(s)), "{s} missing: {out}");
    }
}

#[test]
fn bad_method_parameters_are_one_clear_line() {
    let base = |s: &'static str| {
        vec![
            "map",
            "--comm",
            SP_OMP,
            "--comm-format",
            "eagermap",
            "--topology",
            "pack:2 numa:2 core:16 pu:2",
            "--strategy",
            s,
        ]
    };
    fails(&base("spectral:k=3"), &["k=3", "4 NUMA nodes"]);
    // Caught where typed (clap's value parser): a usage error, as for any bad option value.
    usage_error(
        &base("spectral:foo=1"),
        &["no parameter 'foo'", "k, scheme"],
    );
    usage_error(
        &base("pair-exchange:iters=many"),
        &["iters=many", "integer"],
    );
    // Search efforts are bounded, like the default's anneal=, so a typo cannot run for hours.
    usage_error(
        &base("pair-exchange:iters=18446744073709551615"),
        &["iters=18446744073709551615", "0..=50000000"],
    );
    usage_error(
        &base("spectral:refine=1000000000"),
        &["refine=1000000000", "0..=10000"],
    );
    usage_error(&base("compact:k=2"), &["takes no parameters"]);
}

/// 4 threads: 0 and 3 sweep the same 8 lines three times, 1 and 2 another 8 lines.
fn samples_csv() -> String {
    let mut s = String::from("tid_index,time_ns,addr\n");
    let mut time = 0;
    for _ in 0..3 {
        for line in 0..8u64 {
            for t in 0..4usize {
                let base: u64 = if t == 0 || t == 3 { 0x1000 } else { 0x9000 };
                time += 1;
                s.push_str(&format!("{t},{time},{:#x}\n", base + line * 64));
            }
        }
    }
    s
}

const COMM4: &str = "0,5,1,0\n5,0,0,1\n1,0,0,5\n0,1,5,0\n";

#[test]
fn dagtm_from_a_sample_log_and_from_a_profile_dir() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("comm.csv"), COMM4).unwrap();
    std::fs::write(d.join("s.csv"), samples_csv()).unwrap();
    let comm = d.join("comm.csv");
    let samples = d.join("s.csv");
    let v = json(&[
        "map",
        "--comm",
        comm.to_str().unwrap(),
        "--samples",
        samples.to_str().unwrap(),
        "--topology",
        "core:2 pu:2",
        "--strategy",
        "dagtm",
    ]);
    let core: Vec<u64> = v["assignment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["core"].as_u64().unwrap())
        .collect();
    assert_eq!(core[0], core[3], "{v}");
    assert_eq!(core[1], core[2], "{v}");
    assert_ne!(core[0], core[1], "{v}");
    // A profile directory's samples.csv is picked up by itself.
    let prof = d.join("prof");
    std::fs::create_dir(&prof).unwrap();
    std::fs::write(prof.join("comm.csv"), COMM4).unwrap();
    std::fs::write(prof.join("load.csv"), "1\n1\n1\n1\n").unwrap();
    std::fs::write(
        prof.join("profile.yaml"),
        "schema: 1\ncommand: [app]\nbackend: test\nthreads:\n- {index: 0, tid: 10}\n- {index: 1, tid: 11}\n- {index: 2, tid: 12}\n- {index: 3, tid: 13}\n",
    )
    .unwrap();
    std::fs::write(prof.join("samples.csv"), samples_csv()).unwrap();
    let p = prof.to_str().unwrap();
    let v2 = json(&[
        "map",
        "--profile",
        p,
        "--topology",
        "core:2 pu:2",
        "--strategy",
        "dagtm",
        "--no-guard",
    ]);
    assert_eq!(v2["assignment"], v["assignment"]);
    let table = ok(&[
        "map",
        "--profile",
        p,
        "--topology",
        "core:2 pu:2",
        "--compare",
    ]);
    let row = table.lines().find(|l| l.starts_with("dagtm")).unwrap();
    assert!(!row.contains("error"), "{table}");
}

#[test]
fn dagtm_without_or_with_a_bad_sample_log() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("comm.csv"), COMM4).unwrap();
    let comm = d.join("comm.csv");
    let c = comm.to_str().unwrap();
    fails(
        &[
            "map",
            "--comm",
            c,
            "--topology",
            "core:2 pu:2",
            "--strategy",
            "dagtm",
        ],
        &["dagtm", "sample log", "--samples FILE"],
    );
    std::fs::write(d.join("bad.csv"), "tid_index,time_ns,addr\n0,1,2\n0,1\n").unwrap();
    let bad = d.join("bad.csv");
    fails(
        &[
            "map",
            "--comm",
            c,
            "--samples",
            bad.to_str().unwrap(),
            "--topology",
            "core:2 pu:2",
            "--strategy",
            "dagtm",
        ],
        &["bad.csv", "line 3", "expected 3 fields"],
    );
    std::fs::write(d.join("wide.csv"), "tid_index,time_ns,addr\n7,1,2\n").unwrap();
    let wide = d.join("wide.csv");
    fails(
        &[
            "map",
            "--comm",
            c,
            "--samples",
            wide.to_str().unwrap(),
            "--topology",
            "core:2 pu:2",
            "--strategy",
            "dagtm",
        ],
        &["wide.csv", "thread 7", "4 threads"],
    );
    // Without a log, compare still runs and shows dagtm's reason in its row.
    let table = ok(&["map", "--comm", c, "--topology", "core:2 pu:2", "--compare"]);
    let row = table.lines().find(|l| l.starts_with("dagtm")).unwrap();
    assert!(row.contains("needs the profile's sample log"), "{table}");
}

#[test]
fn mram_latencies_change_the_column_and_bad_ones_are_named() {
    let base = [
        "map",
        "--comm",
        SP_OMP,
        "--comm-format",
        "eagermap",
        "--topology",
        "pack:2 numa:2 core:16 pu:2",
    ];
    let cost = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        json(&a)["metrics"]["mram_cost"].as_f64().unwrap()
    };
    let default = cost(&[]);
    let same = cost(&["--mram-latencies", "l1=4,l2=10,l3=38,mem=87,remote=2.1"]);
    assert_eq!(default, same);
    // Twice every latency, twice the cost (remote is a ratio, unchanged).
    let double = cost(&["--mram-latencies", "l1=8,l2=20,l3=76,mem=174"]);
    assert!(
        (double - 2.0 * default).abs() < 1e-6 * default,
        "{double} vs {default}"
    );
    let mut bad = base.to_vec();
    bad.extend(["--mram-latencies", "l1=4,l9=3"]);
    fails(&bad, &["MRAM latencies", "'l9=3'", "unknown level"]);
}

/// The whole path for traces recorded elsewhere: `cmlb profile --import csv` makes the
/// profile, `cmlb map --samples TRACE --samples-format csv` gives dagtm the same trace with the
/// same thread numbering (first appearance of tids 100..103).
#[test]
fn dagtm_from_an_imported_trace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut csv = String::from("tid,time_ns,addr,kind\n");
    let mut time = 0;
    for _ in 0..3 {
        for line in 0..8u64 {
            for t in 0..4u64 {
                let base: u64 = if t == 0 || t == 3 { 0x10000 } else { 0x90000 };
                time += 1000;
                csv.push_str(&format!(
                    "{},{time},{:#x},load\n",
                    100 + t,
                    base + line * 64
                ));
            }
        }
    }
    let trace = d.join("trace.csv");
    std::fs::write(&trace, csv).unwrap();
    let prof = d.join("prof");
    let t = trace.to_str().unwrap();
    let p = prof.to_str().unwrap();
    ok(&["profile", "--import", "csv", t, "--out", p]);
    let v = json(&[
        "map",
        "--profile",
        p,
        "--samples",
        t,
        "--samples-format",
        "csv",
        "--topology",
        "core:2 pu:2",
        "--strategy",
        "dagtm",
    ]);
    let core: Vec<u64> = v["assignment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["core"].as_u64().unwrap())
        .collect();
    assert_eq!(core.len(), 4, "{v}");
    assert_eq!(core[0], core[3], "{v}");
    assert_eq!(core[1], core[2], "{v}");
    assert_ne!(core[0], core[1], "{v}");
    fails(
        &[
            "map",
            "--profile",
            p,
            "--samples",
            t,
            "--samples-format",
            "pcap",
            "--topology",
            "core:2 pu:2",
            "--strategy",
            "dagtm",
        ],
        &["--samples-format 'pcap'", "samples, perf-script, csv"],
    );
}
