//! GPUs and NICs on the 19 saved topologies of real HPC nodes (`tests/data/topologies/`, from
//! LLNL mpibind's `topo-xml/`): every file loads, devices are found once each with their
//! locality, and the facts below, read off `lstopo-no-graphics -i FILE` (hwloc's own tool),
//! hold. The whole rendering of each file is a golden file
//! (`tests/golden/topologies/NAME.txt`); `UPDATE_GOLDEN=1` regenerates them for review.

mod common;

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

/// KNL in flat mode has CPU-less NUMA nodes (MCDRAM): they are listed as memory-only nodes,
/// each near the NUMA node whose PUs it is local to, and only nodes with PUs are mapping
/// targets. In cache mode there is none.
#[test]
fn knl_flat_modes_show_their_mcdram() {
    let t = load("knl-snc4-flat-hwloc1.xml");
    assert!(t.numa.iter().all(|n| !n.pus.is_empty()));
    assert_eq!(
        t.numa.iter().map(|n| n.os_index).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    let m: Vec<(u32, &str, Vec<u32>)> = t
        .memory_only
        .iter()
        .map(|m| (m.os_index, m.kind.as_str(), m.near.clone()))
        .collect();
    assert_eq!(
        m,
        vec![
            (4, "MCDRAM", vec![0]),
            (5, "MCDRAM", vec![1]),
            (6, "MCDRAM", vec![2]),
            (7, "MCDRAM", vec![3])
        ]
    );
    assert!(t.memory_only.iter().all(|m| m.bytes == 4 << 30));
    assert!(t.summary_line().contains("4 memory-only NUMA nodes"));
    let q = load("knl-quad-flat-hwloc1.xml");
    assert_eq!(q.memory_only.len(), 1);
    assert_eq!(
        (q.memory_only[0].bytes, q.memory_only[0].near.clone()),
        (16 << 30, vec![0])
    );
    // A job's cpuset keeps them, with their locality.
    assert_eq!(q.restrict(&[0, 1]).unwrap().memory_only, q.memory_only);
    assert!(load("knl-quad-cache-hwloc1.xml").memory_only.is_empty());
}

/// Every strategy gives a complete plan on every real topology (memory-only NUMA nodes, GPUs,
/// reserved PUs and all), one thread per PU, never on a node without PUs.
#[test]
fn every_strategy_maps_on_every_real_topology() {
    use mapper::{strategy_names as names, MapInput};
    for f in xml_files() {
        let t = load(&f);
        // Half the PUs, at most 48 threads: what the slower strategies map in a debug build
        // in seconds. A ring over a shuffled order, loads uneven.
        let n = (t.pus.len() / 2).clamp(2, 48);
        let mut order: Vec<usize> = (0..n).collect();
        order.reverse();
        order.swap(0, n / 2);
        let mut comm = mapper::CommMatrix::zeros(n);
        for k in 0..n {
            comm.add_sym(order[k], order[(k + 1) % n], 100.0 + k as f64);
        }
        let load: Vec<f64> = (0..n).map(|i| 1.0 + (i % 3) as f64).collect();
        // DagTM maps from a profile's sample log, not a matrix (its own tests give it one).
        for s in names().into_iter().filter(|&s| s != "dagtm") {
            let plan = common::plan_named(
                s,
                &MapInput {
                    comm: &comm,
                    load: &load,
                    topology: &t,
                    seed: 1,
                },
            )
            .unwrap_or_else(|e| panic!("{f}: {s}: {e}"));
            if plan.assignment.is_empty() {
                continue; // a strategy that binds nothing (identity)
            }
            let mut threads: Vec<usize> = plan.assignment.iter().map(|a| a.thread).collect();
            threads.sort_unstable();
            assert_eq!(
                threads,
                (0..n).collect::<Vec<_>>(),
                "{f}: {s}: every thread once"
            );
            let mut pus: Vec<u32> = plan.assignment.iter().map(|a| a.pu).collect();
            pus.sort_unstable();
            pus.dedup();
            assert_eq!(pus.len(), n, "{f}: {s}: one thread per PU");
            for a in &plan.assignment {
                let pos = t
                    .pu_position(a.pu)
                    .unwrap_or_else(|| panic!("{f}: {s}: PU {}", a.pu));
                let node = t.pus[pos].numa;
                assert!(
                    !t.memory_only.iter().any(|m| m.os_index == node),
                    "{f}: {s}: thread {} on memory-only node {node}",
                    a.thread
                );
            }
        }
    }
}

/// A GPU with no OS device of its own (an NVIDIA card without nvidia-drm, seen through sysfs
/// only, the vendor backends being off for live machines) is still a GPU, found from its PCI
/// class and vendor and named by its address: pascal's first P100 with its OS devices taken
/// out of the XML.
#[test]
fn a_gpu_without_os_devices_is_found_by_its_pci_class() {
    let text = std::fs::read_to_string(dir().join("cts1-pascal.xml")).unwrap();
    // Drop the <object type="OSDev" name="X"> ... </object> blocks of GPU 0 (they hold only
    // <info> lines).
    let mut out = Vec::new();
    let mut skipping = false;
    for line in text.lines() {
        let gpu0 = ["\"opencl0d0\"", "\"cuda0\"", "\"nvml0\""]
            .iter()
            .any(|n| line.contains("type=\"OSDev\"") && line.contains(n));
        if gpu0 {
            skipping = true;
            continue;
        }
        if skipping {
            if line.trim() == "</object>" {
                skipping = false;
            }
            continue;
        }
        out.push(line);
    }
    let d = tempfile::tempdir().unwrap();
    let xml = d.path().join("pascal-no-osdev.xml");
    std::fs::write(&xml, out.join("\n")).unwrap();
    let t = Topology::from_xml(&xml).unwrap();
    assert_eq!(
        gpus(&t),
        vec![
            ("cuda1".to_string(), vec![0]),
            ("pci:0000:04:00.0".to_string(), vec![0])
        ]
    );
}
