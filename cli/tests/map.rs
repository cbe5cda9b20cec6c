//! `cmlb map` and `cmlb topology` through the real binary: the JSON interface other tools
//! rely on, the output files, and one clear error line (non-zero exit, no output file) for
//! every kind of bad input.

mod common;

use common::{fails, ok, stdout, usage_error};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// NAS SP (OpenMP, 64 threads) from EagerMap's repository, bundled with the mapper tests.
const SP_OMP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../mapper/tests/data/eagermap-examples/SP-OMP.csv"
);

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// 4 threads, pairs (0,1) and (2,3) talk a lot, (1,2) a little.
const COMM4: &str = "0,10,0,0\n10,0,1,0\n0,1,0,10\n0,0,10,0\n";

/// SP-OMP, EagerMap's reversed rows: returns A with row i = thread i.
fn sp_omp() -> Vec<Vec<f64>> {
    let text = std::fs::read_to_string(SP_OMP).unwrap();
    let mut rows: Vec<Vec<f64>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim()
                .trim_end_matches(',')
                .split(',')
                .map(|c| c.trim().parse().unwrap())
                .collect()
        })
        .collect();
    rows.reverse();
    rows
}

#[test]
fn json_plan_for_the_sp_omp_matrix() {
    let out = ok(&[
        "map",
        "--comm",
        SP_OMP,
        "--comm-format",
        "eagermap",
        "--topology",
        "pack:2 numa:2 core:16 pu:2",
        "--strategy",
        "scatter",
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(v["strategy"], "scatter");
    let asg = v["assignment"].as_array().unwrap();
    assert_eq!(asg.len(), 64);
    let mut pus = std::collections::BTreeSet::new();
    let mut numa_of = vec![0u64; 64];
    for (t, a) in asg.iter().enumerate() {
        assert_eq!(a["thread"].as_u64(), Some(t as u64));
        let pu = a["pu"].as_u64().unwrap();
        // This synthetic machine numbers PUs in order: 32 per NUMA node, 2 per core.
        assert_eq!(a["numa"].as_u64(), Some(pu / 32), "{a}");
        assert_eq!(a["core"].as_u64(), Some(pu / 2), "{a}");
        assert!(pus.insert(pu), "PU {pu} used twice");
        numa_of[t] = pu / 32;
    }
    // scatter: round-robin over the 4 NUMA nodes.
    assert_eq!(&numa_of[..5], &[0, 1, 2, 3, 0]);
    // remote_comm recomputed here from the file and the printed assignment.
    let a = sp_omp();
    let mut remote = 0.0;
    for i in 0..64 {
        for j in (i + 1)..64 {
            if numa_of[i] != numa_of[j] {
                remote += a[i][j];
            }
        }
    }
    let m = &v["metrics"];
    assert_eq!(m["remote_comm"].as_f64(), Some(remote));
    assert_eq!(m["load_std"].as_f64(), Some(0.0));
    assert_eq!(m["numa_load"], serde_json::json!([16.0, 16.0, 16.0, 16.0]));
    assert!(m["quality"].as_f64().unwrap() > 0.0);
    assert!(m["hop_bytes"].as_f64().unwrap() > 0.0);
}

#[test]
fn spare_cores_let_the_default_size_nodes_by_load() {
    // SP-OMP (a chain of 64 threads), the first 16 carrying 4x the memory load, on 4 NUMA nodes
    // of 32 cores: the default balances the *loads* (28 per node) with unequal thread counts,
    // one thread per core, and communicates less than EagerMap, which leaves one node at 64.
    let dir = tempfile::tempdir().unwrap();
    let load: String = (0..64)
        .map(|t| if t < 16 { "4\n" } else { "1\n" })
        .collect();
    let load = write(dir.path(), "load.csv", &load);
    let plan = |strategy: &str| -> Value {
        let out = ok(&[
            "map",
            "--comm",
            SP_OMP,
            "--comm-format",
            "eagermap",
            "--load",
            s(&load),
            "--topology",
            "numa:4 core:32 pu:1",
            "--strategy",
            strategy,
            "--format",
            "json",
        ]);
        serde_json::from_str(&out).expect("one JSON object")
    };
    let d = plan(mapper::DEFAULT_STRATEGY);
    let e = plan("eagermap");
    assert_eq!(
        d["metrics"]["numa_load"],
        serde_json::json!([28.0, 28.0, 28.0, 28.0])
    );
    assert_eq!(
        e["metrics"]["numa_load"],
        serde_json::json!([64.0, 16.0, 16.0, 16.0])
    );
    let mut per_node = [0usize; 4];
    let mut cores = std::collections::BTreeSet::new();
    for a in d["assignment"].as_array().unwrap() {
        per_node[a["numa"].as_u64().unwrap() as usize] += 1;
        assert!(
            cores.insert(a["core"].as_u64().unwrap()),
            "core shared: {a}"
        );
    }
    assert_ne!(per_node, [16; 4], "sizes follow the loads");
    assert!(per_node.iter().all(|&c| c <= 32), "{per_node:?}");
    let rc = |v: &Value| v["metrics"]["remote_comm"].as_f64().unwrap();
    assert!(rc(&d) < rc(&e), "{} vs eagermap {}", rc(&d), rc(&e));

    // spare=count keeps capacity-proportional sizes (16 per node), still balanced.
    let c = plan("cmlb-refine:spare=count");
    let mut per_node = [0usize; 4];
    for a in c["assignment"].as_array().unwrap() {
        per_node[a["numa"].as_u64().unwrap() as usize] += 1;
    }
    assert_eq!(per_node, [16; 4]);
    assert_eq!(c["metrics"]["load_std"].as_f64(), Some(0.0));
    assert!(rc(&c) > rc(&d), "load-sized nodes communicate less here");
}

#[test]
fn default_strategy_table_output() {
    let out = ok(&[
        "map",
        "--comm",
        SP_OMP,
        "--comm-format",
        "eagermap",
        "--topology",
        "pack:2 numa:2 core:16 pu:2",
    ]);
    assert!(
        out.contains(&format!("strategy: {}", mapper::DEFAULT_STRATEGY)),
        "{out}"
    );
    assert!(out.contains("numa P#0: "), "{out}");
    assert!(out.contains("\nmetrics:\n"), "{out}");
    assert!(out.contains("  remote_comm "), "{out}");
}

#[test]
fn restricted_cpuset_table_and_output_files() {
    let dir = tempfile::tempdir().unwrap();
    let comm = write(dir.path(), "comm.csv", COMM4);
    let load = write(dir.path(), "load.csv", "1\n2\n3\n4\n");
    let yaml = dir.path().join("plan.yaml");
    let base = [
        "map",
        "--comm",
        s(&comm),
        "--load",
        s(&load),
        "--topology",
        "numa:2 core:4 pu:1",
        "--cpuset",
        "0-2,4",
        "--strategy",
        "compact",
    ];
    let mut args = base.to_vec();
    args.extend(["--out", s(&yaml)]);
    let out = ok(&args);
    // NUMA 0 keeps PUs 0-2, NUMA 1 only PU 4: compact fills 0,1,2 then 4.
    assert!(out.contains("restricted to 0-2,4"), "{out}");
    assert!(
        out.contains("numa P#0: 3 threads on 3 PUs, load 6"),
        "{out}"
    );
    assert!(
        out.contains("numa P#1: 1 threads on 1 PUs, load 4"),
        "{out}"
    );
    assert!(out.contains("core P#4    PU 4: t3"), "{out}");
    let plan = mapper::Plan::read_yaml(&yaml).unwrap();
    let pus: Vec<u32> = plan.assignment.iter().map(|a| a.pu).collect();
    assert_eq!(pus, vec![0, 1, 2, 4]);
    // Remote pairs: (2,3) only.
    assert_eq!(plan.metrics.remote_comm, 10.0);
    assert_eq!(plan.metrics.numa_load, vec![6.0, 4.0]);
    assert_eq!(plan.metrics.load_std, 1.0);

    let json = dir.path().join("plan.json");
    let mut args = base.to_vec();
    args.extend(["--out", s(&json), "--format", "yaml"]);
    let out = ok(&args);
    assert!(out.contains("strategy: compact"), "{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["assignment"][3]["pu"], 4);
    assert_eq!(v["assignment"][3]["numa"], 1);
}

#[test]
fn profile_directory_input() {
    let dir = tempfile::tempdir().unwrap();
    let prof = dir.path().join("prof");
    std::fs::create_dir(&prof).unwrap();
    write(&prof, "comm.csv", COMM4);
    write(&prof, "load.csv", "4\n1\n1\n4\n");
    let threads: String = (0..4)
        .map(|i| format!("  - index: {i}\n    tid: {}\n", 100 + i))
        .collect();
    write(
        &prof,
        "profile.yaml",
        &format!("schema: 1\ncommand: [app]\nbackend: test\nthreads:\n{threads}"),
    );
    let out = ok(&[
        "map",
        "--profile",
        s(&prof),
        "--topology",
        "numa:2 core:2 pu:1",
        "--strategy",
        "compact",
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    // The profile's load is used: NUMA 0 gets threads 0,1 (4+1), NUMA 1 threads 2,3 (1+4).
    assert_eq!(v["metrics"]["numa_load"], serde_json::json!([5.0, 5.0]));
    assert_eq!(v["metrics"]["remote_comm"], 1.0);
}

#[test]
fn compare_and_list_cover_every_strategy() {
    let dir = tempfile::tempdir().unwrap();
    let comm = write(dir.path(), "comm.csv", COMM4);
    let args = [
        "map",
        "--comm",
        s(&comm),
        "--topology",
        "numa:2 core:2 pu:1",
        "--compare",
    ];
    let table = ok(&args);
    let mut jargs = args.to_vec();
    jargs.extend(["--format", "json"]);
    let v: Value = serde_json::from_str(&ok(&jargs)).unwrap();
    let arr = v.as_array().unwrap();
    let names = mapper::strategy_names();
    assert_eq!(arr.len(), names.len());
    for (e, n) in arr.iter().zip(&names) {
        assert_eq!(e["strategy"], *n);
        assert!(
            table.lines().any(|l| l.starts_with(n)),
            "{n} missing in {table}"
        );
        if e["binds"] == true {
            assert!(e["metrics"]["remote_comm"].is_number(), "{e}");
        }
    }
    // compact keeps the pairs (0,1) and (2,3) together: only (1,2) = 1 crosses.
    let compact = arr.iter().find(|e| e["strategy"] == "compact").unwrap();
    assert_eq!(compact["metrics"]["remote_comm"], 1.0);

    let list = ok(&["map", "--list"]);
    for n in &names {
        assert!(
            list.lines().any(|l| l.starts_with(n)),
            "{n} missing in {list}"
        );
    }
    assert!(list.contains("(default)"));
}

#[test]
fn topology_command_prints_the_restricted_tree() {
    let xml = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../mapper/tests/data/intel-2s-4numa.xml"
    );
    let out = ok(&["topology", "--topology", xml, "--cpuset", "0-3,30"]);
    assert!(
        out.contains("restricted to 0-3,30: 1 package, 2 NUMA nodes (4+1 PUs)"),
        "{out}"
    );
    assert!(out.contains("numa P#1: capacity 1 PU (30)"), "{out}");
    assert!(out.contains("core P#15: PU 30"), "{out}");
    let live = ok(&["topology"]);
    assert!(live.starts_with("live: "), "{live}");

    // --export writes hwloc XML that --topology reads back to the same tree.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("node.xml");
    let synth = "pack:2 numa:2 core:3 pu:2";
    let shown = ok(&["topology", "--topology", synth, "--export", s(&f)]);
    let again = ok(&["topology", "--topology", s(&f)]);
    let body = |t: &str| t.split_once('\n').unwrap().1.to_string();
    assert_eq!(body(&shown), body(&again));
    assert!(again.starts_with(&format!("{}: 2 packages, 4 NUMA nodes", f.display())));
}

#[test]
fn cpuset_self_follows_the_affinity_mask() {
    // Pinned to one CPU by taskset, `--cpuset self` keeps only that PU of the live machine.
    // Use the first CPU this test may run on (CPU 0 may be outside a container's cpuset).
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    let first = mapper::parse_cpu_list(allowed).unwrap()[0].to_string();
    let o = Command::new("taskset")
        .args([
            "-c",
            &first,
            env!("CARGO_BIN_EXE_cmlb"),
            "topology",
            "--cpuset",
            "self",
        ])
        .output()
        .expect("taskset (util-linux)");
    let out = stdout(&o);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.starts_with(&format!("live restricted to {first}: ")),
        "{out}"
    );
    assert!(out.contains(", 1 core, 1 PU"), "{out}");
}

#[test]
fn bad_matrices_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |name: &str, text: &str, needles: &[&str]| {
        let f = write(d, name, text);
        let out = d.join(format!("{name}.plan.yaml"));
        fails(
            &[
                "map",
                "--comm",
                s(&f),
                "--topology",
                "numa:2 core:2 pu:1",
                "--out",
                s(&out),
            ],
            needles,
        );
        assert!(!out.exists(), "{name}: a plan was written");
    };
    run(
        "nonsquare.csv",
        "0,1,2\n1,0,3\n",
        &[
            "nonsquare.csv",
            "not square: line 1 has 3 values, expected 2",
        ],
    );
    run(
        "short-row.csv",
        "0,1\n1\n",
        &["not square: line 2 has 1 values, expected 2"],
    );
    run(
        "asym.csv",
        "0,1,0\n1,0,5\n0,4,0\n",
        &["not symmetric: A[1][2] (line 2, column 3) = 5 but A[2][1] (line 3, column 2) = 4"],
    );
    run(
        "nan.csv",
        "0,NaN\nNaN,0\n",
        &["line 1, column 2: NaN is not allowed"],
    );
    run(
        "neg.csv",
        "0,-3\n-3,0\n",
        &["line 1, column 2: -3 is not allowed"],
    );
    run(
        "text.csv",
        "0,1\n1,abc\n",
        &["line 2, column 2: 'abc' is not a number"],
    );
    run(
        "huge.csv",
        "0,1e308\n1e308,0\n",
        &["huge.csv", "sum to more than a 64-bit float holds"],
    );
    run("empty.csv", "", &["empty.csv", "empty matrix"]);
    run("comments.csv", "# nothing\n\n", &["empty matrix"]);
}

#[test]
fn eagermap_order_errors_point_at_file_lines() {
    let dir = tempfile::tempdir().unwrap();
    // Reversed rows: line 1 = thread 1, line 2 = thread 0. A[0][1] = 7 (line 2), A[1][0] = 2 (line 1).
    let f = write(dir.path(), "rev.csv", "2,0,\n0,7,\n");
    fails(
        &[
            "map",
            "--comm",
            s(&f),
            "--comm-format",
            "eagermap",
            "--topology",
            "numa:2 core:2 pu:1",
        ],
        &["A[0][1] (line 2, column 2) = 7 but A[1][0] (line 1, column 1) = 2"],
    );
}

#[test]
fn bad_loads_strategies_cpusets_and_topologies() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let comm = write(d, "comm.csv", COMM4);
    let c = s(&comm);
    let topo = "numa:2 core:2 pu:1";
    let short = write(d, "short.csv", "1\n2\n3\n");
    fails(
        &["map", "--comm", c, "--load", s(&short), "--topology", topo],
        &[
            "short.csv: load vector has 3 values but",
            "comm.csv has 4 threads",
        ],
    );
    let neg = write(d, "neg.csv", "1\n-2\n3\n4\n");
    fails(
        &["map", "--comm", c, "--load", s(&neg), "--topology", topo],
        &["neg.csv", "line 2, column 1: -2 is not allowed"],
    );
    let huge = write(d, "huge-load.csv", "1e308\n1e308\n1\n1\n");
    fails(
        &["map", "--comm", c, "--load", s(&huge), "--topology", topo],
        &[
            "huge-load.csv: load vector",
            "sum to more than a 64-bit float holds",
        ],
    );
    let empty = write(d, "empty-load.csv", "\n");
    fails(
        &["map", "--comm", c, "--load", s(&empty), "--topology", topo],
        &["empty-load.csv", "empty load vector"],
    );
    let names = mapper::strategy_names().join(", ");
    usage_error(
        &[
            "map",
            "--comm",
            c,
            "--topology",
            topo,
            "--strategy",
            "fastest",
        ],
        &[
            "unknown strategy 'fastest'",
            &format!("choose one of: {names}"),
        ],
    );
    fails(
        &[
            "map",
            "--comm",
            c,
            "--topology",
            topo,
            "--cpuset",
            "0-1,6-7",
        ],
        &["cpuset names PUs 6-7 outside the topology (it has PUs 0-3)"],
    );
    fails(
        &["map", "--comm", c, "--topology", topo, "--cpuset", "3-1"],
        &["cpuset '3-1'", "range '3-1' is reversed"],
    );
    fails(
        &["topology", "--topology", topo, "--cpuset", "9"],
        &["cpuset names PU 9 outside the topology"],
    );
    let bad_xml = write(d, "node.xml", "<topology version=\"2.0\"><object type=");
    fails(
        &["map", "--comm", c, "--topology", s(&bad_xml)],
        &["node.xml: not a valid hwloc XML topology"],
    );
    fails(
        &["topology", "--topology", s(&bad_xml)],
        &["not a valid hwloc XML topology"],
    );
    fails(
        &["map", "--comm", c, "--topology", "pack:2 cores:4 pu:2"],
        &["hwloc rejected the synthetic description \"pack:2 cores:4 pu:2\""],
    );
    fails(
        &["topology", "--topology", "numa:2 core:99999999 pu:99"],
        &["describes 19799999802 PUs", "at most 16384"],
    );
}

#[test]
fn missing_files_and_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let missing = d.join("nope.csv");
    fails(
        &[
            "map",
            "--comm",
            s(&missing),
            "--topology",
            "numa:2 core:2 pu:1",
        ],
        &["nope.csv", "No such file"],
    );
    let comm = write(d, "comm.csv", COMM4);
    fails(
        &[
            "map",
            "--comm",
            s(&comm),
            "--topology",
            s(&d.join("gone.xml")),
        ],
        &["gone.xml", "No such file"],
    );
    fails(
        &[
            "map",
            "--profile",
            s(&d.join("noprof")),
            "--topology",
            "numa:2 core:2 pu:1",
        ],
        &["noprof/profile.yaml", "No such file"],
    );
    fails(
        &["map", "--topology", "numa:2 core:2 pu:1"],
        &["no input: give --profile DIR or --comm FILE"],
    );
    let out = d.join("no-such-dir/plan.yaml");
    fails(
        &[
            "map",
            "--comm",
            s(&comm),
            "--topology",
            "numa:2 core:2 pu:1",
            "--out",
            s(&out),
        ],
        &[
            "no-such-dir/plan.yaml: directory",
            "no-such-dir does not exist",
        ],
    );
}

#[test]
fn output_files_follow_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let comm = write(dir.path(), "comm.csv", COMM4);
    for (umask, want) in [(0o022, 0o644), (0o077, 0o600)] {
        let plan = dir.path().join(format!("plan-{umask:o}.yaml"));
        let xml = dir.path().join(format!("topo-{umask:o}.xml"));
        for args in [
            vec![
                "map",
                "--comm",
                s(&comm),
                "--topology",
                "numa:2 core:2 pu:1",
                "--out",
                s(&plan),
            ],
            vec![
                "topology",
                "--topology",
                "numa:2 core:2 pu:1",
                "--export",
                s(&xml),
            ],
        ] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_cmlb"));
            cmd.args(&args);
            // SAFETY: umask is async-signal-safe; it only affects the child.
            unsafe {
                cmd.pre_exec(move || {
                    libc::umask(umask);
                    Ok(())
                });
            }
            let o = cmd.output().unwrap();
            assert!(o.status.success(), "{args:?}: {o:?}");
        }
        for f in [&plan, &xml] {
            let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, want, "{} with umask {umask:o}", f.display());
        }
    }
}

#[test]
fn none_strategy_table_counts_the_threads_it_leaves_alone() {
    let dir = tempfile::tempdir().unwrap();
    let comm = write(dir.path(), "comm.csv", COMM4);
    let out = ok(&[
        "map",
        "--comm",
        s(&comm),
        "--topology",
        "numa:2 core:2 pu:1",
        "--strategy",
        "none",
    ]);
    assert!(out.contains("threads:  4 "), "{out}");
    assert!(out.contains("no binding"), "{out}");
}

#[test]
fn table_without_a_core_level_gives_each_pu_its_own_core() {
    let dir = tempfile::tempdir().unwrap();
    let comm = write(dir.path(), "comm.csv", COMM4);
    let args = [
        "map",
        "--comm",
        s(&comm),
        "--topology",
        "numa:2 pu:2",
        "--strategy",
        "compact",
    ];
    let out = ok(&args);
    assert!(out.contains("  core P#0    PU 0: t0\n"), "{out}");
    assert!(out.contains("  core P#1    PU 1: t1\n"), "{out}");
    // The same cores as the JSON plan.
    let mut json = args.to_vec();
    json.extend(["--format", "json"]);
    let v: Value = serde_json::from_str(&ok(&json)).unwrap();
    assert_eq!(v["assignment"][1]["core"], 1);
}

#[test]
fn csv_files_may_start_with_a_byte_order_mark() {
    // Spreadsheets save CSV with a UTF-8 BOM; it must not make cell (1,1) "not a number".
    let dir = tempfile::tempdir().unwrap();
    let comm = write(dir.path(), "comm.csv", &format!("\u{feff}{COMM4}"));
    let load = write(dir.path(), "load.csv", "\u{feff}1\n2\n3\n4\n");
    let out = ok(&[
        "map",
        "--comm",
        s(&comm),
        "--load",
        s(&load),
        "--topology",
        "numa:2 core:2 pu:1",
    ]);
    assert!(out.contains("threads:  4 "), "{out}");
}

/// A reader that goes away early (`cmlb map --list | head -1`) ends cmlb by SIGPIPE, silently,
/// like any Unix tool: no "failed printing to stdout" panic, no exit status 101.
#[test]
fn closed_stdout_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    for args in [&["map", "--list"][..], &["profile", "--probe"][..]] {
        let (r, w) = nix::unistd::pipe().unwrap();
        drop(r);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_cmlb"))
            .args(args)
            .stdout(std::process::Stdio::from(w))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?} {err}",
            o.status
        );
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

/// On a GPU node the table names each NUMA node's GPUs and NICs beside its threads (El
/// Capitan's early-access node: GPU numbers are not NUMA order).
#[test]
fn table_names_the_devices_of_each_numa_node() {
    let dir = tempfile::tempdir().unwrap();
    let comm = write(dir.path(), "comm.csv", COMM4);
    let xml =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../mapper/tests/data/topologies/eas-tioga.xml");
    let out = ok(&[
        "map",
        "--comm",
        s(&comm),
        "--topology",
        s(&xml),
        "--strategy",
        "compact",
    ]);
    assert!(
        out.contains("8 GPUs, 5 NICs"),
        "the topology line counts them: {out}"
    );
    assert!(
        out.contains("numa P#0: 4 threads on 32 PUs, load 4, GPUs rsmi4 rsmi5, NICs hsi2 ens2"),
        "{out}"
    );
    assert!(
        out.contains("numa P#3: 0 threads on 32 PUs, load 0, GPUs rsmi0 rsmi1, NICs hsi0"),
        "{out}"
    );
}
