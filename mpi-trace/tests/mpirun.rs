//! The tracer inside real MPI jobs: Debian's Open MPI and MPICH, `mpirun` on this machine, the
//! bundled MPI workload (tests/workloads/mpi.c) whose point-to-point bytes are known by
//! construction. Multi-node runs under Slurm are tests/multinode's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const IMPLS: [&str; 2] = ["openmpi", "mpich"];

fn workloads() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/workloads");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mpi-workloads");
        std::fs::create_dir_all(&out).unwrap();
        let st = Command::new("make")
            .args(["-s", "-C"])
            .arg(&src)
            .arg(format!("OUT={}", out.display()))
            .arg("mpi")
            .status()
            .expect("make is needed to build tests/workloads");
        assert!(
            st.success(),
            "building the MPI workload failed: Open MPI and MPICH come from slurm-conf/install-deps"
        );
        out
    })
    .clone()
}

/// target/debug/libcmlb_mpi.so, built with this test's package.
fn lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let l = dir.join(contract::ranks::MPI_LIB);
    assert!(l.exists(), "{} missing", l.display());
    l
}

/// `mpirun -n N mpi-wl.IMPL ARGS` with `env`; with `trace`, the tracer preloaded writing `out`.
fn run(imp: &str, n: usize, args: &[&str], env: &[(&str, String)], out: Option<&Path>) -> Output {
    let bin = workloads().join(format!("mpi-wl.{imp}"));
    let mut c = Command::new(format!("mpirun.{imp}"));
    let mut envs: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    if let Some(o) = out {
        envs.push(("LD_PRELOAD".into(), lib().display().to_string()));
        envs.push((contract::ranks::RANKS_OUT.into(), o.display().to_string()));
    }
    if imp == "openmpi" {
        // Open MPI refuses root without these, and more ranks than these 2 vCPUs without
        // --oversubscribe; it forwards only the variables named with -x.
        c.args(["--oversubscribe", "-n", &n.to_string()]);
        for (k, v) in &envs {
            c.args(["-x", &format!("{k}={v}")]);
        }
        c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    } else {
        c.args(["-n", &n.to_string()]);
        c.envs(envs);
    }
    c.arg(&bin).args(args);
    c.output().expect("mpirun")
}

fn edges(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(String::from)
        .collect();
    v.sort();
    v
}

#[test]
fn point_to_point_bytes_are_counted_exactly_for_every_send_primitive() {
    for imp in IMPLS {
        for prim in ["isend", "sendrecv", "persistent"] {
            for pat in ["ring", "grid"] {
                let d = tempfile::tempdir().unwrap();
                let truth = d.path().join("truth");
                let out = d.path().join("ranks");
                let o = run(
                    imp,
                    6,
                    &[pat, "7", "3"],
                    &[
                        ("WL_P2P", prim.into()),
                        ("WL_TRUTH", truth.display().to_string()),
                    ],
                    Some(&out),
                );
                let what = format!("{imp} {prim} {pat}");
                assert!(o.status.success(), "{what}: {o:?}");
                assert_eq!(
                    edges(&out.join("p2p.edges")),
                    edges(&truth),
                    "{what}: the p2p matrix is not the workload's"
                );
                let hosts = std::fs::read_to_string(out.join("hosts.txt")).unwrap();
                assert_eq!(hosts.lines().filter(|l| !l.starts_with('#')).count(), 6);
            }
        }
    }
}

#[test]
fn collectives_are_counted_by_their_pattern_and_summarised() {
    for imp in IMPLS {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ranks");
        let o = run(imp, 4, &["pairs", "5", "2"], &[], Some(&out));
        assert!(o.status.success(), "{imp}: {o:?}");
        // The workload's collectives: an MPI_Allgather of 64 chars (each rank's block to the 3
        // others) and an MPI_Allreduce of one double (2·8/4 = 4 bytes to each other rank).
        let y = std::fs::read_to_string(out.join("ranks.yaml")).unwrap();
        assert!(y.contains("ranks: 4\n"), "{y}");
        assert!(y.contains("collective_bytes: 816\n"), "{imp}: {y}"); // 4·3·(64+4)
        assert!(y.contains("p2p_bytes: 40960\n"), "{imp}: {y}"); // 4 ranks · 5 steps · 2 KiB
        assert!(y.contains("measured_inter_node_bytes: 0\n"), "{y}"); // one host
        let csv = std::fs::read_to_string(out.join("comm.csv")).unwrap();
        let rows: Vec<Vec<u64>> = csv
            .lines()
            .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
            .collect();
        assert_eq!(rows.len(), 4);
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r[i], 0);
            for (j, v) in r.iter().enumerate() {
                assert_eq!(*v, rows[j][i], "comm.csv is symmetric");
            }
            // Its pair partner: 2·(5·2 KiB) p2p plus 2·68 collective; the others 2·68.
            let heavy = r.iter().filter(|&&v| v == 2 * 10240 + 136).count();
            let light = r.iter().filter(|&&v| v == 136).count();
            assert_eq!((heavy, light), (1, 2), "{imp}: row {i} {r:?}");
        }
    }
}

#[test]
fn without_an_output_directory_calls_only_pass_through() {
    for imp in IMPLS {
        let d = tempfile::tempdir().unwrap();
        let bin = workloads().join(format!("mpi-wl.{imp}"));
        let mut c = Command::new(format!("mpirun.{imp}"));
        if imp == "openmpi" {
            c.args([
                "--oversubscribe",
                "-x",
                &format!("LD_PRELOAD={}", lib().display()),
            ])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        } else {
            c.env("LD_PRELOAD", lib());
        }
        let o = c
            .args(["-n", "3"])
            .arg(&bin)
            .args(["ring", "3", "1"])
            .current_dir(d.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{imp}: {o:?}");
        let lines = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("cmlb-mpi-wl rank="))
            .count();
        assert_eq!(lines, 3, "{imp}: {o:?}");
        assert!(std::fs::read_dir(d.path()).unwrap().next().is_none());
        assert!(!String::from_utf8_lossy(&o.stderr).contains("cmlb-mpi:"));
    }
}

#[test]
fn an_unwritable_directory_is_one_warning_and_the_program_still_succeeds() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let o = run(
        "mpich",
        2,
        &["pairs", "2", "1"],
        &[],
        Some(&file.join("ranks")),
    );
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cmlb-mpi: cannot write the rank profile to"),
        "{err}"
    );
}
