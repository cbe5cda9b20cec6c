//! GPUs and NICs on the 19 saved topologies of real HPC nodes (`tests/data/topologies/`, from
//! LLNL mpibind's `topo-xml/`): every file loads, devices are found once each with their
//! locality, and the facts below, read off `lstopo-no-graphics -i FILE` (hwloc's own tool),
//! hold. The whole rendering of each file is a golden file
//! (`tests/golden/topologies/NAME.txt`); `UPDATE_GOLDEN=1` regenerates them for review.

use mapper::{DeviceKind, Topology};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/topologies")
}

fn load(name: &str) -> Topology {
    Topology::from_xml(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (GPU names, NUMA node) for every GPU of a topology, in hwloc's order.
fn gpus(t: &Topology) -> Vec<(String, Vec<u32>)> {
    t.devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu)
        .map(|d| (d.name().to_string(), d.numa.clone()))
        .collect()
}

fn xml_files() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".xml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_real_topology_loads_and_matches_its_golden_file() {
    let files = xml_files();
    assert_eq!(files.len(), 19, "{files:?}");
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/topologies");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let mut mismatches = Vec::new();
    for f in &files {
        let t = load(f);
        // The source is the absolute path: name the file only, so the text is machine-free.
        let got = t.summary().replace(&dir().join(f).display().to_string(), f);
        let path = golden.join(f.replace(".xml", ".txt"));
        if update {
            std::fs::create_dir_all(&golden).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
        if want != got {
            mismatches.push(format!(
                "{}:\n--- want\n{want}\n--- got\n{got}",
                path.display()
            ));
        }
        // Every device is located on the machine: local PUs that the topology has.
        for d in &t.devices {
            assert!(
                !d.local_pus.is_empty(),
                "{f}: {} has no local PUs",
                d.name()
            );
            assert!(!d.numa.is_empty(), "{f}: {} is on no NUMA node", d.name());
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// LLNL lassen (IBM POWER9): two V100s per socket, each one device with its CUDA and NVML
/// names; NUMA nodes are P#0 and P#8.
#[test]
fn lassen_has_two_gpus_per_socket() {
    let t = load("coral-lassen.xml");
    assert_eq!(
        gpus(&t),
        vec![
            ("cuda0".to_string(), vec![0]),
            ("cuda1".to_string(), vec![0]),
            ("cuda2".to_string(), vec![8]),
            ("cuda3".to_string(), vec![8]),
        ]
    );
    let nic = t
        .devices
        .iter()
        .find(|d| d.names.contains(&"mlx5_2".to_string()))
        .expect("mlx5_2");
    assert_eq!(nic.kind, DeviceKind::Nic);
    assert_eq!(nic.names, vec!["mlx5_2", "hsi2"]);
    assert_eq!(nic.numa, vec![8]);
}

/// El Capitan early access (tioga): GPU index order is not NUMA order.
#[test]
fn tioga_gpu_numbers_are_not_numa_order() {
    let t = load("eas-tioga.xml");
    let on = |n: u32| -> Vec<String> {
        t.devices_on_numa(DeviceKind::Gpu, n)
            .iter()
            .map(|d| d.name().to_string())
            .collect()
    };
    assert_eq!(on(0), vec!["rsmi4", "rsmi5"]);
    assert_eq!(on(1), vec!["rsmi2", "rsmi3"]);
    assert_eq!(on(2), vec!["rsmi6", "rsmi7"]);
    assert_eq!(on(3), vec!["rsmi0", "rsmi1"]);
    // One Slingshot NIC (hsiN) per NUMA node.
    for n in 0..4 {
        assert!(
            t.devices_on_numa(DeviceKind::Nic, n)
                .iter()
                .any(|d| d.names.iter().any(|x| x.starts_with("hsi"))),
            "NUMA {n}"
        );
    }
}

/// Corona (AMD EPYC Rome, 8 NUMA nodes): four MI50s on NUMA nodes 1, 2, 5 and 7 only, the
/// InfiniBand NIC on node 3.
#[test]
fn corona_gpus_sit_on_four_of_eight_numa_nodes() {
    let t = load("epyc-corona.xml");
    assert_eq!(t.numa.len(), 8);
    let g = gpus(&t);
    assert_eq!(g.len(), 4);
    let nodes: Vec<u32> = g.iter().flat_map(|(_, n)| n.clone()).collect();
    assert_eq!(nodes, vec![1, 2, 5, 7]);
    let ib = t
        .devices
        .iter()
        .find(|d| d.names.contains(&"mlx5_0".to_string()))
        .expect("mlx5_0");
    assert_eq!(ib.numa, vec![3]);
}

/// Pascal: both P100s on the first socket; g4dn.metal: eight T4s, four per socket; quartz:
/// none. A restriction (a job's cpuset) keeps every device and its locality.
#[test]
fn gpu_counts_and_restrictions() {
    let p = load("cts1-pascal.xml");
    assert_eq!(
        gpus(&p),
        vec![("cuda0".into(), vec![0]), ("cuda1".into(), vec![0])]
    );
    assert_eq!(p.devices[0].names, vec!["cuda0", "nvml0", "opencl0d0"]);
    let g = load("g4dnmetal.xml");
    let g4 = gpus(&g);
    assert_eq!(g4.len(), 8);
    assert_eq!(g4.iter().filter(|(_, n)| n == &vec![0]).count(), 4);
    assert!(gpus(&load("cts1-quartz-smt1.xml")).is_empty());
    let last = p.pus.last().unwrap().os_index;
    let r = p.restrict(&[last]).unwrap();
    assert_eq!(r.devices, p.devices);
    assert!(
        r.summary_line().ends_with("2 GPUs, 3 NICs"),
        "{}",
        r.summary_line()
    );
}

/// KNL in flat mode has CPU-less NUMA nodes (MCDRAM): loading must not break, and only the
/// nodes with PUs are mapping targets.
#[test]
fn knl_flat_modes_load() {
    for f in ["knl-quad-flat-hwloc1.xml", "knl-snc4-flat-hwloc1.xml"] {
        let t = load(f);
        assert!(t.numa.iter().all(|n| !n.pus.is_empty()), "{f}");
        assert!(t.pus.len() >= 64, "{f}: {} PUs", t.pus.len());
    }
}
