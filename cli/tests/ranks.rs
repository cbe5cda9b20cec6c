//! `cmlb ranks`: a shuffled ring of 16 ranks on 4 machines of 4: the plan cuts the ring only
//! where it must (4 times), block placement of the shuffled order cuts far more, and the
//! hostfile gives each machine exactly its slots, in rank order.

mod common;
use common::{fails, ok};

fn ring_edges(n: usize) -> String {
    let perm: Vec<usize> = (0..n).map(|i| (i * 5 + 3) % n).collect();
    (0..n)
        .map(|i| format!("{} {} 100 1\n", perm[i], perm[(i + 1) % n]))
        .collect()
}

#[test]
fn shuffled_ring_plan_beats_block_and_writes_the_hostfile() {
    let d = tempfile::tempdir().unwrap();
    let e = d.path().join("ring.edges");
    std::fs::write(&e, ring_edges(16)).unwrap();
    let hosts = d.path().join("hosts");
    let out = ok(&[
        "ranks",
        "--comm",
        e.to_str().unwrap(),
        "--nodes",
        "n[1-4]:4",
        "--node-topology",
        "numa:2 core:2 pu:1",
        "--hostfile",
        hosts.to_str().unwrap(),
    ]);
    let row = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in {out}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(row("cmlb")[1], "400", "{out}");
    let block: f64 = row("block")[1].parse().unwrap();
    assert!(block >= 1000.0, "{out}");
    // Each machine holds one arc of 4: inside it, 2 NUMA nodes of 2 cores cut it once.
    assert_eq!(row("cmlb")[3], "400", "{out}");
    let h = std::fs::read_to_string(&hosts).unwrap();
    let lines: Vec<&str> = h.lines().collect();
    assert_eq!(lines.len(), 16);
    for n in ["n1", "n2", "n3", "n4"] {
        assert_eq!(lines.iter().filter(|l| **l == n).count(), 4, "{h}");
    }
}

#[test]
fn bad_inputs_name_the_file_line_or_option() {
    let d = tempfile::tempdir().unwrap();
    let e = d.path().join("bad.edges");
    std::fs::write(&e, "0 1 5\n1 x 2\n").unwrap();
    let p = e.to_str().unwrap();
    fails(
        &["ranks", "--comm", p, "--nodes", "2x2"],
        &["bad.edges:2: 'x' is not a rank number"],
    );
    std::fs::write(&e, "0 9 5\n").unwrap();
    fails(
        &["ranks", "--comm", p, "--nodes", "2x2"],
        &["10 ranks but --nodes gives 4 slots"],
    );
    fails(
        &["ranks", "--comm", p, "--nodes", "node1"],
        &["has no :SLOTS"],
    );
}

/// Run `cmlb ARGS` with PATH holding no gmap (the other programs cmlb runs are not needed).
fn cmlb_without_gmap(args: &[&str]) -> std::process::Output {
    let empty = tempfile::tempdir().unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(args)
        .env("PATH", empty.path())
        .output()
        .unwrap()
}

#[test]
fn a_missing_gmap_is_one_line_unless_scotch_is_asked_for() {
    let d = tempfile::tempdir().unwrap();
    let e = d.path().join("ring.edges");
    std::fs::write(&e, ring_edges(16)).unwrap();
    let p = e.to_str().unwrap();
    let o = cmlb_without_gmap(&["ranks", "--comm", p, "--nodes", "4x4"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let notes: Vec<&str> = out.lines().filter(|l| l.contains("scotch")).collect();
    assert_eq!(
        notes,
        ["scotch: not run: gmap not installed (apt-get install scotch)"],
        "{out}"
    );
    let o = cmlb_without_gmap(&["ranks", "--comm", p, "--nodes", "4x4", "--scotch", "always"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--scotch always: Scotch's gmap is not installed"),
        "{err}"
    );
    let o = cmlb_without_gmap(&["ranks", "--comm", p, "--nodes", "4x4", "--scotch", "never"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("scotch"));
    // Scotch's hostfile asked for by name: gmap must run, and no file is left behind.
    let h = d.path().join("scotch.hosts");
    let hs = h.to_str().unwrap();
    let o = cmlb_without_gmap(&[
        "ranks",
        "--comm",
        p,
        "--nodes",
        "4x4",
        "--scotch-hostfile",
        hs,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--scotch-hostfile: Scotch's gmap is not installed"),
        "{err}"
    );
    assert!(!h.exists());
    fails(
        &[
            "ranks",
            "--comm",
            p,
            "--nodes",
            "4x4",
            "--scotch",
            "never",
            "--scotch-hostfile",
            hs,
        ],
        &["cannot go with --scotch never"],
    );
    assert!(!h.exists());
}

/// The JSON placements of `cmlb ARGS`, by name.
fn placements(args: &[&str]) -> std::collections::BTreeMap<String, serde_json::Value> {
    let out = ok(args);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["placement"].as_str().unwrap().to_string(), p.clone()))
        .collect()
}

#[test]
fn every_plan_is_reported_side_by_side_with_scotch_held_to_the_exact_counts() {
    // Without gmap this fails (as eval/tests/scotch_gmap.rs does) rather than pass unrun.
    assert!(
        eval::scotch::find().is_some(),
        "Scotch's gmap is needed: run slurm-conf/install-deps (Debian package scotch)"
    );
    // A shuffled ring of 32 on 4 machines of 8 under 2 switches, every rank weighing 1: the
    // per-node loads are then the rank counts, which must be 8 everywhere, for every plan.
    let d = tempfile::tempdir().unwrap();
    let e = d.path().join("ring.edges");
    std::fs::write(&e, ring_edges(32)).unwrap();
    let load = d.path().join("load.csv");
    std::fs::write(&load, "1\n".repeat(32)).unwrap();
    let tc = d.path().join("topology.conf");
    std::fs::write(
        &tc,
        "SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n[3-4]\nSwitchName=top Switches=s[1-2]\n",
    )
    .unwrap();
    let sh = d.path().join("scotch.hosts");
    let p = placements(&[
        "ranks",
        "--comm",
        e.to_str().unwrap(),
        "--nodes",
        "n[1-4]:8",
        "--topology-conf",
        tc.to_str().unwrap(),
        "--load",
        load.to_str().unwrap(),
        "--node-topology",
        "numa:2 core:4 pu:1",
        "--scotch",
        "always",
        "--scotch-hostfile",
        sh.to_str().unwrap(),
        "--format",
        "json",
    ]);
    // Scotch's hostfile is the plan of its row: 8 ranks per machine, and its cut is the row's.
    let hosts: Vec<String> = std::fs::read_to_string(&sh)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(hosts.len(), 32);
    for n in ["n1", "n2", "n3", "n4"] {
        assert_eq!(hosts.iter().filter(|h| *h == n).count(), 8, "{hosts:?}");
    }
    let cut: f64 = ring_edges(32)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| hosts[f[0].parse::<usize>().unwrap()] != hosts[f[1].parse::<usize>().unwrap()])
        .map(|f| f[2].parse::<f64>().unwrap())
        .sum();
    assert_eq!(p["scotch"]["inter_node_bytes"], cut);
    assert_eq!(
        p.keys().collect::<Vec<_>>(),
        ["block", "cmlb", "cyclic", "scotch"]
    );
    for (name, c) in &p {
        assert_eq!(c["max_node_load"], 8.0, "{name}: {c}");
        assert_eq!(c["min_node_load"], 8.0, "{name}: {c}");
        // Any split of a ring into 4 arcs cuts it at least 4 times, 2 of them between switches.
        assert!(
            c["inter_node_bytes"].as_f64().unwrap() >= 400.0,
            "{name}: {c}"
        );
        assert!(
            c["inter_switch_bytes"].as_f64().unwrap() >= 200.0,
            "{name}: {c}"
        );
        assert!(c["inter_numa_bytes"].is_number(), "{name}: {c}");
    }
    assert_eq!(p["cmlb"]["inter_node_bytes"], 400.0);
    assert_eq!(p["cmlb"]["inter_switch_bytes"], 200.0);
}

#[test]
fn loads_are_read_per_rank_and_reported_per_node() {
    // A ring of 8 in order, ranks 0-3 heavy: block puts 40 on one node and 4 on the other;
    // cmlb cuts the ring as often (twice) with 22 on each.
    let d = tempfile::tempdir().unwrap();
    let e = d.path().join("ring.edges");
    let text: String = (0..8).map(|i| format!("{i} {} 5\n", (i + 1) % 8)).collect();
    std::fs::write(&e, text).unwrap();
    let load = d.path().join("load.csv");
    std::fs::write(&load, "10\n10\n10\n10\n1\n1\n1\n1\n").unwrap();
    let args = [
        "ranks",
        "--comm",
        e.to_str().unwrap(),
        "--nodes",
        "a:4,b:4",
        "--load",
        load.to_str().unwrap(),
        "--scotch",
        "never",
        "--format",
        "json",
    ];
    let p = placements(&args);
    assert_eq!(p["cmlb"]["inter_node_bytes"], 10.0);
    assert_eq!(p["cmlb"]["node_loads"], serde_json::json!([22.0, 22.0]));
    assert_eq!(p["block"]["node_loads"], serde_json::json!([40.0, 4.0]));
    std::fs::write(&load, "1\n2\n3\n").unwrap();
    fails(&args, &["load.csv: 3 load values but", "has 8 ranks"]);
    std::fs::write(&load, "1\n-2\n").unwrap();
    fails(&args, &["load.csv"]);
}
