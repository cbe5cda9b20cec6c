//! Golden plans: the grouping strategies on fixed inputs and topologies of 1, 2, 4 and 8 NUMA
//! nodes, a restricted, uneven cpuset, and saved hwloc XML topologies (two-socket Intel with
//! 4 NUMA nodes, whole and restricted to a job's cores; AMD with 8 NUMA nodes and a distance
//! matrix; sub-NUMA clustering with two NUMA nodes under one L3). A change in any plan is a visible diff in
//! `mapper/tests/golden/*.txt`. After an intended change, regenerate them with
//! `UPDATE_GOLDEN=1 cargo test -p cmlb-mapper --test golden` and review the diff.

mod common;

use mapper::MapInput;
use mapper::Topology;
use std::fmt::Write;
use std::path::PathBuf;

fn topologies() -> Vec<(&'static str, Topology)> {
    let xml = |f: &str| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(f);
        Topology::from_xml(&path).expect("saved topology")
    };
    // A job given 1¼ of the 4 NUMA nodes (24 + 6 PUs), as Slurm hands out cores.
    let job: Vec<u32> = (0..30).collect();
    vec![
        ("numa1", common::uniform(1, 1, 8, 2)),
        ("numa2", common::uniform(2, 1, 8, 1)),
        ("numa4", common::uniform(4, 2, 2, 1)),
        ("numa8", common::uniform(8, 1, 2, 2)),
        ("restricted", common::restricted()),
        // Saved hwloc XML topologies (tests/data/README.md): the shapes sites run on.
        ("intel-2s-4numa", xml("intel-2s-4numa.xml")),
        (
            "intel-2s-4numa-job",
            xml("intel-2s-4numa.xml").restrict(&job).expect("cpuset"),
        ),
        ("amd-2s-8numa-dist", xml("amd-2s-8numa-dist.xml")),
        ("snc-2s", xml("snc-2s.xml")),
    ]
}

/// The topology's source without the checkout's directory (goldens must not depend on it).
fn source_name(source: &str) -> &str {
    match source.find("tests/data/") {
        Some(i) => &source[i..],
        None => source,
    }
}

fn render(topo: &Topology, strategy: &str) -> String {
    let n = topo.num_pus();
    let comm = common::clustered(n, 4, 2024);
    let load = common::quarter_heavy(n);
    let input = MapInput {
        comm: &comm,
        load: &load,
        topology: topo,
        seed: 1,
    };
    let plan = common::plan_named(strategy, &input).expect("plan");
    let mut s = format!(
        "strategy {strategy}\ntopology {}\nremote_comm {:.3}\nload_std {:.6}\nnuma_load {:?}\nthread pu core numa\n",
        source_name(&topo.source), plan.metrics.remote_comm, plan.metrics.load_std, plan.metrics.numa_load
    );
    for a in &plan.assignment {
        writeln!(s, "{} {} {} {}", a.thread, a.pu, a.core, a.numa).unwrap();
    }
    s
}

#[test]
fn plans_match_golden_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let mut mismatches = Vec::new();
    for (name, topo) in topologies() {
        for strategy in ["cmlb", "cmlb-refine", "eagermap", "eagermap-lb"] {
            let got = render(&topo, strategy);
            let path = dir.join(format!("{name}-{strategy}.txt"));
            if update {
                std::fs::write(&path, &got).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
                    path.display()
                )
            });
            if want != got {
                mismatches.push(format!(
                    "{}:\n--- want\n{want}\n--- got\n{got}",
                    path.display()
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "plans differ from the golden files (UPDATE_GOLDEN=1 regenerates them):\n{}",
        mismatches.join("\n")
    );
}
