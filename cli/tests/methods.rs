//! `cmlb map` with the source papers' other methods (spectral, pair-exchange, dagtm) and the
//! MRAM(h) column, through the real binary.

use serde_json::Value;
use std::process::{Command, Output};

/// NAS SP (OpenMP, 64 threads) from EagerMap's repository, bundled with the mapper tests.
const SP_OMP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../mapper/tests/data/eagermap-examples/SP-OMP.csv"
);

fn cmlb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(args)
        .output()
        .expect("run cmlb")
}

fn ok(args: &[&str]) -> String {
    let o = cmlb(args);
    assert!(
        o.status.success(),
        "cmlb {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit 1, nothing on stdout, one `cmlb: error:` line containing every needle.
fn fails(args: &[&str], needles: &[&str]) {
    let o = cmlb(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "cmlb {args:?}: {err}");
    assert!(o.stdout.is_empty());
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("cmlb: error: "), "{err}");
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in {err}");
    }
}

fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    serde_json::from_str(&ok(&a)).expect("JSON")
}

/// Every topology shape the mapper's CLI tests use, plus a one-node machine like this VM.
const TOPOLOGIES: &[&str] = &[
    "pack:2 numa:2 core:16 pu:2",
    "pack:2 numa:2 core:8 pu:2",
    "numa:2 core:4 pu:1",
    "numa:2 core:2 pu:1",
    "core:2 pu:1",
];

#[test]
fn spectral_and_pair_exchange_plan_sp_on_every_topology() {
    for topo in TOPOLOGIES {
        for strat in [
            "spectral",
            "pair-exchange:iters=20000",
            "spectral:k=8,scheme=first-fit",
        ] {
            let numa_nodes = if topo.contains("numa:2") { 2 } else { 1 };
            let strat = if strat.contains("k=8") && numa_nodes * 4 > 8 {
                "spectral"
            } else {
                strat
            };
            let v = json(&[
                "map",
                "--comm",
                SP_OMP,
                "--comm-format",
                "eagermap",
                "--topology",
                topo,
                "--strategy",
                strat,
            ]);
            let asg = v["assignment"].as_array().unwrap();
            assert_eq!(asg.len(), 64, "{topo} {strat}");
            let m = &v["metrics"];
            assert!(
                m["mram_cost"].as_f64().unwrap() > 0.0,
                "{topo} {strat}: {m}"
            );
            assert!(m["hop_bytes"].as_f64().unwrap() > 0.0);
        }
    }
}

/// SP's threads talk to their neighbours in thread order, so compact is already good there:
/// pair-exchange (starting from compact) can only improve on it, and spectral, which ignores
/// thread order, must stay close to it and far from scatter.
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
    fails(
        &base("spectral:foo=1"),
        &["no parameter 'foo'", "k, scheme"],
    );
    fails(
        &base("pair-exchange:iters=many"),
        &["iters=many", "integer"],
    );
    fails(&base("compact:k=2"), &["takes no parameters"]);
}
