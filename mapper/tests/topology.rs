//! Golden tests of topology loading on XML files exported by hwloc 2.9's `lstopo-no-graphics
//! --of xml` (from synthetic descriptions, and from this VM) and `hwloc-annotate` (distances).
//! See `tests/data/README.md` for how each file was made.

use mapper::MapError;
use mapper::{parse_cpu_list, Level, Topology};
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn load(name: &str) -> Topology {
    Topology::from_xml(data(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Levels from the root down to PU `os` (by OS index).
fn path(t: &Topology, os: u32) -> Vec<Level> {
    let mut v = Vec::new();
    let mut n = Some(t.pus[t.pu_position(os).unwrap()].node);
    while let Some(id) = n {
        v.push(t.nodes[id].level);
        n = t.nodes[id].parent;
    }
    v.reverse();
    v
}

fn capacities(t: &Topology) -> Vec<(u32, usize)> {
    t.numa.iter().map(|n| (n.os_index, n.capacity())).collect()
}

/// Every PU is in exactly one NUMA node, and NUMA pu lists agree with the PUs' numa field.
fn check_consistent(t: &Topology) {
    let mut seen = vec![0; t.pus.len()];
    for n in &t.numa {
        for &p in &n.pus {
            seen[p] += 1;
            assert_eq!(t.pus[p].numa, n.os_index);
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
    assert_eq!(t.nodes[t.root()].pus.len(), t.pus.len());
}

use Level::*;

#[test]
fn intel_like_two_sockets_numa_per_l3() {
    // pack:2 numa:2 l3:1 core:12 pu:2 — hwloc attaches each NUMA node to an L3.
    let t = load("intel-2s-4numa.xml");
    check_consistent(&t);
    assert_eq!(t.num_pus(), 96);
    assert_eq!(t.count(Package), 2);
    assert_eq!(t.count(L3), 4);
    assert_eq!(t.count(Core), 48);
    assert_eq!(capacities(&t), vec![(0, 24), (1, 24), (2, 24), (3, 24)]);
    assert_eq!(path(&t, 0), vec![Machine, Package, Numa, L3, Core, Pu]);
    let pu = |os| t.pus[t.pu_position(os).unwrap()].clone();
    assert_eq!((pu(30).core, pu(30).numa), (15, 1));
    assert_eq!((pu(95).core, pu(95).numa), (47, 3));
    // PU OS indexes in tree order.
    let os: Vec<u32> = t.pus.iter().map(|p| p.os_index).collect();
    assert_eq!(os, (0..96).collect::<Vec<_>>());
    // Tree distances: same core 2, same L3 4, same package 8, across packages 10.
    assert_eq!(t.hops(0, 0), 0);
    assert_eq!(t.hops(0, 1), 2);
    assert_eq!(t.hops(0, 2), 4);
    assert_eq!(t.hops(0, 24), 8);
    assert_eq!(t.hops(0, 48), 10);
    assert!(t.distances.is_none());
    assert_eq!(
        t.summary_line(),
        format!(
            "{}: 2 packages, 4 NUMA nodes (24+24+24+24 PUs), 48 cores, 96 PUs",
            data("intel-2s-4numa.xml").display()
        )
    );
}

#[test]
fn amd_like_numa_groups_inside_packages() {
    // pack:2 numa:4 l3:2 core:4 pu:2 — NUMA nodes hang off Group objects, which are dropped.
    let t = load("amd-2s-8numa.xml");
    check_consistent(&t);
    assert_eq!(t.num_pus(), 128);
    assert_eq!(t.numa.len(), 8);
    assert!(capacities(&t).iter().all(|&(_, c)| c == 16));
    assert_eq!(t.count(L3), 16);
    assert_eq!(path(&t, 127), vec![Machine, Package, Numa, L3, Core, Pu]);
    assert_eq!(t.pus[t.pu_position(127).unwrap()].numa, 7);
}

#[test]
fn annotated_numa_distances_are_loaded_and_used() {
    let t = load("amd-2s-8numa-dist.xml");
    let d = t.distances.as_ref().expect("distances from hwloc-annotate");
    assert_eq!(d.len(), 8);
    assert_eq!(d[0], vec![10.0, 12.0, 12.0, 12.0, 32.0, 32.0, 32.0, 32.0]);
    assert_eq!(d[5][6], 12.0);
    assert_eq!(d[7][7], 10.0);
    // PU 0 (NUMA 0) and PU 16 (NUMA 1) meet at the package: 8 hops × 12/10.
    assert_eq!(t.hops(0, 16), 8);
    assert!((t.distance(0, 16) - 9.6).abs() < 1e-12);
    // Across packages: 10 hops × 32/10.
    assert!((t.distance(0, 64) - 32.0).abs() < 1e-12);
    // Inside one NUMA node the factor is 1; the same PU counts as 1.
    assert_eq!(t.distance(0, 1), 2.0);
    assert_eq!(t.distance(3, 3), 1.0);
    assert!(t.summary().contains("NUMA distances"));
    assert!(t.summary_line().ends_with(", NUMA distances"));
}

#[test]
fn this_vm_exported_by_lstopo() {
    // The development VM: 1 package, NUMA node attached to the package, L3, L2 per core.
    let t = load("vm-live.xml");
    check_consistent(&t);
    assert_eq!(capacities(&t), vec![(0, 2)]);
    assert_eq!(path(&t, 1), vec![Machine, Package, Numa, L3, L2, Core, Pu]);
    let s = t.summary();
    assert!(s.contains("numa P#0: capacity 2 PUs (0-1)"), "{s}");
    assert!(s.contains("core P#1: PU 1"), "{s}");
}

#[test]
fn sub_numa_clustering_puts_numa_below_l3() {
    // pack:2 l3:1 numa:2 l2:4 core:1 pu:2: two NUMA nodes share each package's L3.
    let t = load("snc-2s.xml");
    check_consistent(&t);
    assert_eq!(capacities(&t), vec![(0, 8), (1, 8), (2, 8), (3, 8)]);
    assert_eq!(path(&t, 9), vec![Machine, Package, L3, Numa, L2, Core, Pu]);
    // PUs of two NUMA nodes of one package still share the L3: 4 + 4 hops.
    assert_eq!(t.hops(0, 8), 8);
    assert_eq!(t.hops(0, 16), 12);
}

#[test]
fn one_numa_node_spanning_two_packages_with_dies() {
    // numa:1 pack:2 die:2 l3:1 core:2 pu:1: the NUMA node sits above the packages; dies go.
    let t = load("one-numa-2pack.xml");
    check_consistent(&t);
    assert_eq!(capacities(&t), vec![(0, 8)]);
    assert_eq!(path(&t, 5), vec![Machine, Numa, Package, L3, Core, Pu]);
    assert_eq!(t.count(Package), 2);
}

#[test]
fn synthetic_and_load_dispatch() {
    let t = Topology::from_synthetic("pack:2 numa:2 core:16 pu:2").unwrap();
    check_consistent(&t);
    assert_eq!(t.num_pus(), 128);
    assert_eq!(capacities(&t), vec![(0, 32), (1, 32), (2, 32), (3, 32)]);
    assert_eq!(path(&t, 0), vec![Machine, Package, Numa, Core, Pu]);
    assert_eq!(t.source, "pack:2 numa:2 core:16 pu:2");

    // load(): synthetic, XML path, live.
    let s = Topology::load("numa:2 core:2 pu:1").unwrap();
    assert_eq!(capacities(&s), vec![(0, 2), (1, 2)]);
    let x = Topology::load(data("snc-2s.xml").to_str().unwrap()).unwrap();
    assert_eq!(x, load("snc-2s.xml"));
    let live = Topology::load("live").unwrap();
    check_consistent(&live);
    assert!(live.num_pus() >= 1);
    assert_eq!(live.source, "live");
}

#[test]
fn exported_xml_reads_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    for spec in [
        "live".to_string(),
        "pack:2 numa:2 l3:1 core:3 pu:2".to_string(),
        data("amd-2s-8numa-dist.xml").display().to_string(),
    ] {
        let xml = mapper::hwloc_xml(&spec).unwrap();
        let f = dir.path().join("t.xml");
        std::fs::write(&f, xml).unwrap();
        let mut back = Topology::from_xml(&f).unwrap();
        back.source = spec.clone();
        assert_eq!(back, Topology::load(&spec).unwrap(), "{spec}");
    }
    assert!(mapper::hwloc_xml("nonsense:1").is_err());
}

#[test]
fn bad_topologies_are_clear_errors() {
    let e = Topology::load("pack:2 bogus:3 pu:2").unwrap_err();
    assert!(matches!(e, MapError::Topology(_)));
    assert!(
        e.to_string()
            .contains("hwloc rejected the synthetic description \"pack:2 bogus:3 pu:2\""),
        "{e}"
    );
    let e = Topology::load("").unwrap_err();
    assert!(e.to_string().contains("synthetic description \"\""), "{e}");
    // A typo in a count is refused before hwloc tries to build billions of objects.
    let e = Topology::load("numa:2 core:99999999 pu:99").unwrap_err();
    assert!(
        e.to_string()
            .contains("describes 19799999802 PUs; cmlb handles at most 16384"),
        "{e}"
    );
    let e = Topology::load("numa:2 core:8193 pu:1").unwrap_err();
    assert!(e.to_string().contains("describes 16386 PUs"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.xml");
    std::fs::write(&bad, "<topology><object type=\"Machine\">").unwrap();
    let e = Topology::load(bad.to_str().unwrap()).unwrap_err();
    assert!(matches!(e, MapError::Topology(_)));
    assert!(
        e.to_string().contains("not a valid hwloc XML topology"),
        "{e}"
    );
    assert!(e.to_string().contains("broken.xml"), "{e}");

    // A name ending in .xml is a file, even when it does not exist.
    let missing = dir.path().join("missing.xml");
    let e = Topology::load(missing.to_str().unwrap()).unwrap_err();
    assert!(matches!(e, MapError::Io { .. }), "{e}");
    assert!(e.to_string().contains("missing.xml"), "{e}");
    // So is anything path-like (synthetic strings have no '/'), and a directory says so.
    let e = Topology::load(dir.path().to_str().unwrap()).unwrap_err();
    assert!(matches!(e, MapError::Io { .. }), "{e}");
    let e = Topology::load("topos/node7").unwrap_err();
    assert!(matches!(e, MapError::Io { .. }), "{e}");
    assert!(e.to_string().contains("topos/node7"), "{e}");
}

#[test]
fn restrict_to_an_uneven_cpuset() {
    let t = load("intel-2s-4numa.xml");
    let r = t
        .restrict(&parse_cpu_list("0-3,24-25,30").unwrap())
        .unwrap();
    check_consistent(&r);
    assert_eq!(capacities(&r), vec![(0, 4), (1, 3)]);
    assert_eq!(r.count(Package), 1);
    assert_eq!(r.count(Core), 4);
    assert_eq!(r.restricted_to.as_deref(), Some("0-3,24-25,30"));
    let os: Vec<u32> = r.pus.iter().map(|p| p.os_index).collect();
    assert_eq!(os, vec![0, 1, 2, 3, 24, 25, 30]);
    // Core 15 keeps only PU 30; its sibling 31 is gone.
    assert!(r.summary().contains("core P#15: PU 30"), "{}", r.summary());
    // Cores per NUMA node count what the cpuset left: PUs 0-3 are 2 cores, 24-25 and 30 too.
    assert_eq!(
        (r.numa_cores(0), r.numa_cores(1)),
        (2, 2),
        "{}",
        r.summary()
    );
    assert!(r.summary_line().contains("restricted to 0-3,24-25,30"));
    assert!(r
        .summary_line()
        .contains("1 package, 2 NUMA nodes (4+3 PUs), 4 cores, 7 PUs"));
}

#[test]
fn restrict_cuts_distances_down() {
    let t = load("amd-2s-8numa-dist.xml");
    // PUs 16-17 are in NUMA 1, 70 in NUMA 4.
    let r = t.restrict(&[16, 17, 70]).unwrap();
    assert_eq!(capacities(&r), vec![(1, 2), (4, 1)]);
    assert_eq!(r.distances, Some(vec![vec![10.0, 32.0], vec![32.0, 10.0]]));
    assert!((r.distance(0, 2) - t.distance(16, 70)).abs() < 1e-12);
}

#[test]
fn restrict_outside_the_topology_names_the_pus() {
    let t = Topology::from_synthetic("numa:2 core:4 pu:1").unwrap();
    let e = t.restrict(&[0, 1, 9, 10, 11]).unwrap_err();
    assert!(matches!(e, MapError::Topology(_)));
    assert_eq!(
        e.to_string(),
        "topology: cpuset names PUs 9-11 outside the topology (it has PUs 0-7)"
    );
    let e = t.restrict(&[]).unwrap_err();
    assert!(e.to_string().contains("empty cpuset"));
}

mod restrict_props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any non-empty subset of PUs: exactly those PUs remain, NUMA capacities count the
        /// subset's PUs per node (nodes without any disappear), and the tree distance between
        /// surviving PUs does not change.
        #[test]
        fn restriction_keeps_exactly_the_cpuset(mask in proptest::collection::vec(any::<bool>(), 32)) {
            let t = Topology::from_synthetic("pack:2 numa:2 l3:1 core:4 pu:2").unwrap();
            let cpus: Vec<u32> = (0..32u32).filter(|&c| mask[c as usize]).collect();
            prop_assume!(!cpus.is_empty());
            let r = t.restrict(&cpus).unwrap();
            check_consistent(&r);
            let os: Vec<u32> = r.pus.iter().map(|p| p.os_index).collect();
            prop_assert_eq!(&os, &cpus);
            for n in &r.numa {
                let orig = &t.numa[t.numa_position(n.os_index).unwrap()];
                let want = orig.pus.iter().filter(|&&p| cpus.contains(&t.pus[p].os_index)).count();
                prop_assert_eq!(n.capacity(), want);
                prop_assert!(want > 0);
            }
            let total: usize = r.numa.iter().map(|n| n.capacity()).sum();
            prop_assert_eq!(total, cpus.len());
            for a in 0..r.num_pus() {
                for b in 0..r.num_pus() {
                    let (oa, ob) = (t.pu_position(os[a]).unwrap(), t.pu_position(os[b]).unwrap());
                    prop_assert_eq!(r.hops(a, b), t.hops(oa, ob));
                    prop_assert_eq!(r.pus[a].core, t.pus[oa].core);
                }
            }
        }
    }
}
