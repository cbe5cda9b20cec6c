//! `cmlb run` through the real binary: the OpenMP environment it gives the program, the exit
//! status it passes through, and its degraded (unpinned) and strict behaviour. The preload
//! path and pre-runs are covered end to end by tests/e2e/t_40_run.sh.

mod common;

use common::pairs_profile;
use std::process::{Command, Output};

fn cmlb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(args)
        .env_remove("OMP_NUM_THREADS")
        .output()
        .expect("run cmlb")
}

#[test]
fn exports_the_plan_as_openmp_places_in_thread_order() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("p");
    pairs_profile(&p, 2);
    let map = Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args([
            "map",
            "--profile",
            p.to_str().unwrap(),
            "--cpuset",
            "self",
            "--strategy",
        ])
        .args(["scatter", "--format", "json"])
        .output()
        .unwrap();
    assert!(map.status.success());
    let plan: serde_json::Value = serde_json::from_slice(&map.stdout).unwrap();
    let places: Vec<String> = plan["assignment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{{{}}}", a["pu"]))
        .collect();
    let o = cmlb(&[
        "run",
        "--profile",
        p.to_str().unwrap(),
        "--strategy",
        "scatter",
        "--bind",
        "omp",
        "--",
        "sh",
        "-c",
        "echo $OMP_PLACES $OMP_PROC_BIND $OMP_NUM_THREADS; echo ${CMLB_BIND_PUS:-none}",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    // OMP_NUM_THREADS stays unset: the program's thread count is its own.
    assert_eq!(out, format!("{} true\nnone\n", places.join(",")));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cmlb: run: strategy scatter") && err.contains("RemoteComm"),
        "{err}"
    );
}

#[test]
fn keeps_the_users_omp_num_threads_and_passes_the_exit_status() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("p");
    pairs_profile(&p, 1);
    let o = Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args([
            "run",
            "--profile",
            p.to_str().unwrap(),
            "--bind",
            "omp",
            "--",
        ])
        .args(["sh", "-c", "echo $OMP_NUM_THREADS; exit 7"])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "1\n");
}

#[test]
fn corrupt_profile_runs_unpinned_with_one_warning() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("p");
    pairs_profile(&p, 2);
    std::fs::write(p.join("comm.csv"), "0,x\nx,0\n").unwrap();
    let o = cmlb(&[
        "run",
        "--profile",
        p.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo ${OMP_PLACES:-unset}",
    ]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "unset\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cmlb: warning: profile")
            && err.contains("comm.csv")
            && err.contains("running unpinned"),
        "{err}"
    );
}

#[test]
fn strict_fails_without_running_the_program() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("ran");
    let o = cmlb(&[
        "run",
        "--strict",
        "--profile",
        d.path().join("none").to_str().unwrap(),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("cmlb: error: no plan (--strict): profile") && err.contains("profile.yaml"),
        "{err}"
    );
    assert!(!marker.exists());
}

#[test]
fn a_missing_preload_library_is_found_out_before_any_pre_run() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("ran");
    let cache = d.path().join("cache");
    let missing = d.path().join("libcmlb_preload.so");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--cache",
            cache.to_str().unwrap(),
            "--time",
            "1",
            "--preload",
            missing.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.extend(["--", "touch", marker.to_str().unwrap()]);
        cmlb(&args)
    };
    // --strict: refused before the program runs at all (no pre-run).
    let o = run(&["--strict"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--preload") && err.contains("no such file"),
        "{err}"
    );
    assert!(!marker.exists(), "the program ran: {err}");
    // --bind preload cannot do without it: one warning, no pre-run, an unpinned run.
    let o = run(&["--bind", "preload"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("no such file; running unpinned"), "{err}");
    assert!(!err.contains("pre-run"), "{err}");
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    // The default (--bind both) warns and binds through the OpenMP environment.
    let o = run(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("binding through the OpenMP environment only"),
        "{err}"
    );
    assert!(marker.exists());
}

#[test]
fn thread_count_mismatch_is_reported() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("p");
    pairs_profile(&p, 2);
    let o = Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(["run", "--profile", p.to_str().unwrap(), "--", "true"])
        .env("OMP_NUM_THREADS", "3")
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("has 2 threads but OMP_NUM_THREADS=3; running unpinned"),
        "{err}"
    );
}

#[test]
fn bad_arguments_are_clear_errors() {
    let o = cmlb(&["run", "--time", "0", "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--time must be a positive number of seconds")
    );
    // Far beyond any real time span: an error, not an Instant overflow panic after a pre-run.
    let o = cmlb(&["run", "--time", "1e300", "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--time must be at most 1e8 seconds"));
    // A bad strategy spec is a usage error, as a bad --backend (clap's value parser).
    let o = cmlb(&["run", "--strategy", "nosuch", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown strategy 'nosuch'"));
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("p");
    pairs_profile(&p, 1);
    let o = cmlb(&[
        "run",
        "--profile",
        p.to_str().unwrap(),
        "--bind",
        "omp",
        "--",
        "/nonexistent/prog",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot run /nonexistent/prog"));
    // Without a profile too: one error, before any pre-run of a program that cannot start.
    let o = cmlb(&[
        "run",
        "--cache",
        d.path().to_str().unwrap(),
        "--",
        "nosuchcmd-xyz",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot run nosuchcmd-xyz: command not found in PATH"),
        "{err}"
    );
    // The pre-run's options are checked by run itself (clap: usage error, status 2).
    let o = cmlb(&["run", "--backend", "bogus", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown backend 'bogus'"));
}

/// `cmlb run --job-rank` as the rank-wrap runs it for a rank that `mpirun` forked: the rank's
/// launcher variables and CMLB_RANK_HOSTS say which ranks share the node; each rank plans the
/// node's ranks together and takes its own share, so two ranks of one node get disjoint CPUs.
#[test]
fn a_launchers_rank_is_planned_with_its_nodes_ranks_or_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job");
    for r in 0..4 {
        pairs_profile(&job.join(format!("task{r}")), 2);
    }
    let node = contract::launcher::node_names(None)[0].clone();
    // Rank RANK, the LOCAL-th of 2 on this node, of 4 placed by HOSTS; OPTS before `--`.
    let rank_with = |rank: usize, local: usize, hosts: &str, opts: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cmlb"))
            .args(["run", "--job-rank", "--profile", job.to_str().unwrap()])
            .args(opts)
            .arg("--")
            .args(["sh", "-c", "grep Cpus_allowed_list /proc/self/status"])
            .env_remove("OMP_NUM_THREADS")
            .env("OMPI_COMM_WORLD_RANK", rank.to_string())
            .env("OMPI_COMM_WORLD_SIZE", "4")
            .env("OMPI_COMM_WORLD_LOCAL_RANK", local.to_string())
            .env("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
            .env(contract::env::RANK_HOSTS, hosts)
            .output()
            .unwrap()
    };
    let run_rank =
        |rank, local, hosts: &str| rank_with(rank, local, hosts, &["--bind", "omp", "--show-pins"]);
    let cpus = |o: &Output| {
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        out.trim().rsplit('\t').next().unwrap().trim().to_string()
    };
    let own = contract::own_cpus().unwrap();
    // Ranks 1 and 3 share this node (the plan's hostfile put them here, seq mapper).
    let hosts = format!("elsewhere,{node},elsewhere,{node}");
    let a = run_rank(1, 0, &hosts);
    let b = run_rank(3, 1, &hosts);
    for (o, rank) in [(&a, 1), (&b, 3)] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let share = err
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmlb: rank {rank} on {node}: share ")))
            .unwrap_or_else(|| panic!("no pins line for rank {rank}: {err}"))
            // Pinned threads, or (a thread profile that supports no plan) the share alone.
            .split(", thread->PU")
            .next()
            .unwrap()
            .split("; threads unpinned")
            .next()
            .unwrap()
            .to_string();
        assert_eq!(cpus(o), share, "rank {rank} runs in its planned share");
    }
    if own.len() >= 2 {
        let (sa, sb) = (
            contract::parse_cpu_list(&cpus(&a)).unwrap(),
            contract::parse_cpu_list(&cpus(&b)).unwrap(),
        );
        assert!(sa.iter().all(|c| !sb.contains(c)), "{sa:?} {sb:?}");
    }
    // The launcher put rank 3 first on this node (--map-by node, say): not where the list
    // says, so it runs unpinned with one line.
    let c = run_rank(3, 0, &hosts);
    let err = String::from_utf8_lossy(&c.stderr);
    assert!(c.status.success(), "{err}");
    assert!(
        err.contains("not where the job's placement puts it") && err.contains("running unpinned"),
        "{err}"
    );
    assert_eq!(
        contract::parse_cpu_list(&cpus(&c)).unwrap(),
        own,
        "left as the launcher placed it"
    );
    // A scratch directory another user could swap (its parent is writable by all and not
    // sticky): the profile in it is not trusted, the rank runs unpinned, with one line.
    let open = d.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let scratch = open.join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let o = rank_with(1, 0, &hosts, &["--job-scratch", scratch.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("writable by other users and not sticky") && err.contains("running unpinned"),
        "{err}"
    );
    assert_eq!(contract::parse_cpu_list(&cpus(&o)).unwrap(), own);
    // A saved topology larger than this machine: the plan may name PUs this process cannot
    // have; the rank still runs (pinned inside its CPUs, or unpinned with one line).
    let o = rank_with(3, 1, &hosts, &["--topology", "pack:1 core:64 pu:1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let got = contract::parse_cpu_list(&cpus(&o)).unwrap();
    assert!(
        err.contains("cannot set the CPU mask") || got.iter().all(|c| own.contains(c)),
        "{err} {got:?}"
    );
    // No launcher variables: a clear error, the program still runs.
    let o = Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args([
            "run",
            "--job-rank",
            "--profile",
            job.to_str().unwrap(),
            "--",
            "true",
        ])
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("PMI_RANK")
        .env_remove("MV2_COMM_WORLD_RANK")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.contains("no launcher variables name"),
        "{err}"
    );
}
