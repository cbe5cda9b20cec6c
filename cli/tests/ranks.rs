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
