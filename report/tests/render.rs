//! Renders a report for a profile with a known pattern and checks what lands on disk.

use mapper::compare;
use mapper::MapInput;
use mapper::NodeSpec;
use mapper::StrategySpec;
use mapper::{CommMatrix, Level, Topology};
use profile::{Phase, Profile, ProfileMeta, ThreadInfo, TimelineRow};
use report::{write_report, ReportInput};

/// `numa` nodes × `cores` cores × 2 PUs, OS indexes in tree order.
fn topology(numa: u32, cores: u32) -> Topology {
    let mut pu = 0;
    let nodes = (0..numa)
        .map(|n| {
            let cs = (0..cores)
                .map(|c| {
                    let kids = (0..2)
                        .map(|_| {
                            pu += 1;
                            NodeSpec::new(Level::Pu, pu - 1, vec![])
                        })
                        .collect();
                    NodeSpec::new(Level::Core, n * cores + c, kids)
                })
                .collect();
            NodeSpec::new(Level::Numa, n, cs)
        })
        .collect();
    Topology::build(
        &NodeSpec::new(Level::Machine, 0, nodes),
        "test: numa:2 core:4 pu:2",
    )
    .unwrap()
}

/// 16 threads in 4 interleaved cliques (thread t talks to t±4, t±8, ...): in creation order the
/// matrix looks scattered; a good plan groups each clique on one node.
fn profile() -> Profile {
    let n = 16;
    let mut comm = CommMatrix::zeros(n);
    for i in 0..n {
        for j in (i + 1)..n {
            if i % 4 == j % 4 {
                comm.add_sym(i, j, 1000.0 + (i * j) as f64);
            } else {
                comm.add_sym(i, j, 3.0);
            }
        }
    }
    let load: Vec<f64> = (0..n).map(|t| 100.0 + 50.0 * (t % 3) as f64).collect();
    let timeline: Vec<TimelineRow> = (0..600)
        .map(|k| {
            let phase = if k < 250 {
                0
            } else if k > 300 {
                1
            } else {
                -1
            };
            let base = match phase {
                0 => 40.0,
                1 => 90.0,
                _ => 5.0,
            };
            let s = base + ((k * 7) % 11) as f64;
            TimelineRow {
                t_ms: k as f64,
                samples: s,
                smoothed: base + 5.0,
                phase,
            }
        })
        .collect();
    Profile {
        meta: ProfileMeta {
            host: "testhost".into(),
            topology: "test".into(),
            sample_period: 2000,
            duration_s: 0.6,
            samples: 12345,
            threads: (0..n)
                .map(|i| ThreadInfo {
                    index: i,
                    tid: 1000 + i as i64,
                    name: format!("worker<{i}>"),
                    samples: 10,
                    load_samples: 5,
                })
                .collect(),
            phases: vec![
                Phase {
                    start_ms: 0.0,
                    end_ms: 249.0,
                    weight: 45.0,
                },
                Phase {
                    start_ms: 301.0,
                    end_ms: 599.0,
                    weight: 95.0,
                },
            ],
            ..ProfileMeta::new(
                &["./cliques", "--n", "16"],
                "synthetic",
                n,
                ThreadInfo::new(1000, "", 10, 5),
            )
        },
        comm,
        load,
        timeline,
        halves: None,
        lines: None,
        cpu: None,
    }
}

#[test]
fn writes_page_and_every_figure_in_png_and_svg() {
    let mut topo = topology(2, 4);
    // A GPU local to NUMA node 1: the topology figure names it in that node's heading.
    topo.devices = vec![mapper::Device {
        kind: mapper::DeviceKind::Gpu,
        names: vec!["cuda0".into(), "nvml0".into()],
        local_pus: (8..16).collect(),
        numa: vec![1],
    }];
    let mut prof = profile();
    // The evidence line and the per-thread table are on the page.
    prof.update_evidence(1);
    let input = MapInput {
        comm: &prof.comm,
        load: &prof.load,
        topology: &topo,
        seed: 1,
    };
    let plan = mapper::plan(&StrategySpec::parse("scatter").unwrap(), &input, None).unwrap();
    let rows = compare(&input, None, None);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rep");
    let written = write_report(
        &ReportInput {
            profile: &prof,
            profile_dir: std::path::Path::new("prof"),
            topology: &topo,
            plan: &plan,
            plan_source: "computed with strategy scatter",
            compare: &rows,
        },
        &out,
    )
    .unwrap();
    for name in report::FIGURES {
        for ext in ["png", "svg"] {
            let p = out.join(format!("{name}.{ext}"));
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(
                bytes.len() > 1000,
                "{} is only {} bytes",
                p.display(),
                bytes.len()
            );
            assert!(written.contains(&p));
        }
        assert!(std::fs::read(out.join(format!("{name}.png")))
            .unwrap()
            .starts_with(b"\x89PNG"));
    }
    let svg = std::fs::read_to_string(out.join("topology.svg")).unwrap();
    assert!(
        svg.contains("NUMA 1 · 8 PUs · 8 threads"),
        "heading of node 1"
    );
    assert!(
        svg.contains("· GPU cuda0"),
        "the GPU beside NUMA node 1's heading"
    );
    assert_eq!(svg.matches("GPU cuda0").count(), 1, "only on its own node");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("worker&lt;3&gt;"), "thread names are escaped");
    let line = prof.meta.evidence.as_ref().unwrap().summary_line();
    assert!(html.contains(&line), "evidence line {line}");
    assert!(html.contains("Evidence per thread"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "page must work offline"
    );
    for (name, _) in &rows {
        assert!(html.contains(&format!("data-strategy=\"{name}\"")));
    }
    // Nothing but the finished directory is left next to it.
    let siblings: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(siblings.len(), 1);
    if let Ok(keep) = std::env::var("CMLB_KEEP_REPORT") {
        let _ = std::fs::remove_dir_all(&keep);
        std::fs::rename(&out, keep).unwrap();
    }
}

#[test]
fn large_matrices_are_drawn_in_blocks_so_files_stay_small() {
    let n = 300;
    let topo = topology(2, 75);
    let mut prof = profile();
    let mut comm = CommMatrix::zeros(n);
    for i in 0..n {
        for j in (i + 1)..n {
            comm.add_sym(i, j, if i % 3 == j % 3 { 50.0 } else { 1.0 });
        }
    }
    prof.comm = comm;
    prof.load = vec![1.0; n];
    prof.meta.threads = (0..n)
        .map(|i| ThreadInfo {
            index: i,
            tid: i as i64,
            name: String::new(),
            samples: 1,
            load_samples: 1,
        })
        .collect();
    let input = MapInput {
        comm: &prof.comm,
        load: &prof.load,
        topology: &topo,
        seed: 1,
    };
    let plan = mapper::plan(&StrategySpec::parse("compact").unwrap(), &input, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rep");
    write_report(
        &ReportInput {
            profile: &prof,
            profile_dir: std::path::Path::new("big"),
            topology: &topo,
            plan: &plan,
            plan_source: "compact",
            compare: &[],
        },
        &out,
    )
    .unwrap();
    let svg = std::fs::read_to_string(out.join("heatmap.svg")).unwrap();
    // 300 threads → blocks of 3: at most 100×100 cells (+ strips, colour bar, frame).
    let rects = svg.matches("<rect").count();
    assert!(rects <= 100 * 100 + 2 * n + 200, "{rects} rectangles");
    assert!(rects > 100 * 100 / 2, "{rects} rectangles: cells missing");
    assert!(svg.contains("blocks of 3×3 threads"));
}
