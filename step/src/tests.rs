//! The pipeline's behaviour from a launcher's side: shares, pins, pre-runs, rank shares,
//! named profiles.

use super::*;
use contract::BindMode;
use mapper::{StrategySpec, Topology};
use std::path::Path;

fn write_profile(dir: &Path, comm: &str, n: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let threads: String = (0..n)
        .map(|i| format!("- index: {i}\n  tid: {}\n", 100 + i))
        .collect();
    std::fs::write(
        dir.join("profile.yaml"),
        format!("schema: 1\ncommand: [app]\nbackend: test\nthreads:\n{threads}"),
    )
    .unwrap();
    std::fs::write(dir.join("comm.csv"), comm).unwrap();
    std::fs::write(dir.join("load.csv"), "1\n".repeat(n)).unwrap();
}

const PAIRS4: &str = "0,0,9,0\n0,0,0,9\n9,0,0,0\n0,9,0,0\n";

#[test]
fn apply_pins_every_task_inside_its_share() {
    let t = tempfile::tempdir().unwrap();
    let prof = t.path().join("p");
    write_profile(&prof, PAIRS4, 4);
    let machine = Topology::load("pack:1 numa:2 core:4 pu:1").unwrap();
    let step = Step::new(&machine, &(0..8).collect::<Vec<u32>>())
        .unwrap()
        .tasks(2)
        .profile(ProfileSource::Given(prof.clone()))
        .strategy(StrategySpec::parse("cmlb").unwrap());
    let plan = step.compute().unwrap();
    assert_eq!(plan.tasks.len(), 2);
    // Each task in its own share: pinned inside it, or (a profile without held-out halves
    // supports no thread plan) the share as its mask.
    assert_ne!(plan.tasks[0].share, plan.tasks[1].share);
    for tp in &plan.tasks {
        match &tp.action {
            TaskAction::Pin { pus, .. } => {
                assert!(pus.iter().all(|p| tp.share.contains(p)), "{tp:?}")
            }
            TaskAction::Share => {}
            other => panic!("{other:?}"),
        }
    }
    // One task on the whole node: pairs (0,2) and (1,3) share a NUMA node (PUs 0-3, 4-7)
    // when the guard keeps cmlb's plan; otherwise the threads are left in the share.
    let plan = step.tasks(1).compute().unwrap();
    let s = plan.summary.clone().unwrap();
    match &plan.tasks[0].action {
        TaskAction::Pin { pus, .. } => {
            assert_eq!(pus[0] / 4, pus[2] / 4, "{pus:?}");
            assert_eq!(pus[1] / 4, pus[3] / 4, "{pus:?}");
        }
        TaskAction::Share => assert!(s.contains("threads left as they are"), "{s}"),
        other => panic!("{other:?}"),
    }
    assert!(s.starts_with("cmlb: apply: strategy cmlb, profile "), "{s}");
    assert!(s.contains("(4 threads), PUs 0-7: RemoteComm"), "{s}");
}

#[test]
fn no_profile_means_a_prerun_or_unpinned_never_a_guess() {
    let t = tempfile::tempdir().unwrap();
    let machine = Topology::load("pack:1 numa:1 core:2 pu:1").unwrap();
    let argv = vec!["/bin/app".to_string()];
    let step = Step::new(&machine, &[0, 1])
        .unwrap()
        .command(&argv)
        .profile(ProfileSource::Keyed(t.path().into()));
    let p = step.compute().unwrap();
    assert_eq!(
        p.tasks[0].action,
        TaskAction::Prerun {
            dir: p.profile_dir.clone()
        }
    );
    let p = step.clone().allow_prerun(false).compute().unwrap();
    assert!(p.tasks.iter().all(|t| t.action == TaskAction::Unpinned));
    assert_eq!(p.summary, None);
    // A profile the user named must exist.
    let e = step
        .profile(ProfileSource::Given(t.path().join("nope")))
        .compute()
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("nope has no profile.yaml"), "{e}");
}

#[test]
fn wrap_words_carry_the_options() {
    let o = WrapOpts {
        cmlb: "/usr/bin/cmlb".into(),
        backend: Some("watch".into()),
        period: Some(500),
        duration: Some(2.0),
        prerun_secs: 3.0,
        run_anyway: true,
        max_runs: Some(4),
        bind: BindMode::Omp,
        topology: "live".into(),
        strategy: StrategySpec::parse("spectral:k=2,scheme=plain").unwrap(),
    };
    let w = TaskAction::Profile {
        dir: "/s/k".into(),
        ranks: None,
    }
    .wrap_argv(&o)
    .unwrap();
    assert_eq!(
        w.join(" "),
        "/usr/bin/cmlb profile --out /s/k --run-anyway --accumulate --max-runs 4 --backend watch \
         --period 500 --duration 2 --"
    );
    let w = TaskAction::Prerun { dir: "/s/k".into() }
        .wrap_argv(&o)
        .unwrap();
    assert_eq!(
        w.join(" "),
        "/usr/bin/cmlb run --time 3 --save-profile /s/k --strategy spectral:k=2,scheme=plain \
         --bind omp --topology live --backend watch --period 500 --"
    );
    assert_eq!(TaskAction::Unpinned.wrap_argv(&o), None);
}

#[test]
fn thread_count_must_match_the_profile() {
    let t = tempfile::tempdir().unwrap();
    write_profile(t.path(), PAIRS4, 4);
    let machine = Topology::load("pack:1 numa:1 core:4 pu:1").unwrap();
    let e = Step::new(&machine, &[0, 1, 2, 3])
        .unwrap()
        .omp_threads(Some(3))
        .profile(ProfileSource::Given(t.path().into()))
        .compute()
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("has 4 threads but OMP_NUM_THREADS=3"), "{e}");
}

#[test]
fn profile_files_must_be_regular_files() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    std::fs::write(d.join("profile.yaml"), "schema: 1\n").unwrap();
    std::fs::write(d.join("load.csv"), "1\n").unwrap();
    // Missing files are left to Profile::read_dir's message.
    check_profile_files(d).expect("regular files and a missing one");
    nix::unistd::mkfifo(&d.join("comm.csv"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let e = check_profile_files(d).unwrap_err().to_string();
    assert!(e.contains("comm.csv is not a regular file"), "{e}");
    std::fs::remove_file(d.join("comm.csv")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.join("comm.csv")).unwrap();
    let e = check_profile_files(d).unwrap_err().to_string();
    assert!(e.contains("comm.csv is not a regular file"), "{e}");
    std::fs::remove_file(d.join("comm.csv")).unwrap();
    // The optional files Profile::read_dir also reads: the CPU timeline and the halves.
    for f in ["cpu.csv", "comm.b.csv", "lines.a.csv"] {
        nix::unistd::mkfifo(&d.join(f), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = check_profile_files(d).unwrap_err().to_string();
        assert!(e.contains(&format!("{f} is not a regular file")), "{e}");
        std::fs::remove_file(d.join(f)).unwrap();
    }
}

/// A rank profile of `n` ranks where the given pairs exchange `bytes` each way.
fn write_ranks(dir: &Path, n: usize, pairs: &[(u32, u32)], bytes: u64) {
    use contract::ranks::{JobRanks, RankRow, Sent};
    let rows = (0..n as u32)
        .map(|r| RankRow {
            rank: r,
            host: "n1".into(),
            seconds: 1.0,
            to: pairs
                .iter()
                .filter_map(|&(a, b)| {
                    let d = if a == r {
                        b
                    } else if b == r {
                        a
                    } else {
                        return None;
                    };
                    Some((
                        d,
                        Sent {
                            p2p_bytes: bytes,
                            p2p_msgs: 1,
                            ..Sent::default()
                        },
                    ))
                })
                .collect(),
        })
        .collect();
    JobRanks {
        n,
        rows,
        mpi: "test".into(),
        command: vec!["app".into()],
    }
    .write_dir(&dir.join(contract::ranks::RANKS_DIR))
    .unwrap();
}

#[test]
fn a_multi_node_step_keeps_task_profiles_by_global_id_under_one_key() {
    let t = tempfile::tempdir().unwrap();
    let machine = Topology::load("pack:1 numa:1 core:4 pu:1").unwrap();
    let argv = vec!["/bin/app".to_string()];
    let on = |cores: &str, global: &[usize]| {
        // Slurm's core numbers key the profile (cmlb-slurm's step_on_cores); here core k is PU k.
        Step::new(&machine, &mapper::parse_cpu_list(cores).unwrap())
            .unwrap()
            .cpus_key(cores, format!("cores {cores}"))
            .layout(global, 8, 2)
            .command(&argv)
            .profile(ProfileSource::Keyed(t.path().into()))
            .mode(Mode::Profile)
            .compute()
            .unwrap()
    };
    // Two nodes given different core numbers still name one job profile directory.
    let a = on("0-3", &[0, 1, 2, 3]);
    let b = on("1-2", &[4, 6]);
    assert_eq!(a.profile_dir, b.profile_dir);
    let TaskAction::Profile { dir, ranks } = &b.tasks[1].action else {
        panic!("{:?}", b.tasks[1])
    };
    assert_eq!(dir, &b.profile_dir.join("task6"));
    assert_eq!(
        ranks.as_deref(),
        Some(b.profile_dir.join("ranks").as_path())
    );
    // A one-task step keeps its single profile directory and traces no ranks.
    let one = Step::new(&machine, &[0, 1])
        .unwrap()
        .command(&argv)
        .profile(ProfileSource::Keyed(t.path().into()))
        .mode(Mode::Profile)
        .compute()
        .unwrap();
    assert_ne!(one.profile_dir, a.profile_dir);
    let TaskAction::Profile { dir, ranks } = &one.tasks[0].action else {
        unreachable!()
    };
    assert_eq!((dir, ranks), (&one.profile_dir, &None));
}

#[test]
fn the_rank_matrix_decides_which_rank_gets_which_share() {
    let t = tempfile::tempdir().unwrap();
    let job = t.path().join("job");
    // Ranks 0-2 and 1-3 exchange: rank order (0,1 | 2,3 on the two NUMA nodes) cuts both.
    write_ranks(&job, 4, &[(0, 2), (1, 3)], 1000);
    let machine = Topology::load("pack:1 numa:2 core:2 pu:1").unwrap();
    let p = Step::new(&machine, &[0, 1, 2, 3])
        .unwrap()
        .layout(&[0, 1, 2, 3], 4, 1)
        .command(&["app".to_string()])
        .profile(ProfileSource::Given(job.clone()))
        .compute()
        .unwrap();
    let numa = |t: usize| p.tasks[t].share[0] / 2;
    assert_eq!(numa(0), numa(2), "{:?}", p.tasks);
    assert_eq!(numa(1), numa(3), "{:?}", p.tasks);
    assert_ne!(numa(0), numa(1), "{:?}", p.tasks);
    // No thread profiles: each rank runs in its share with threads unpinned.
    assert!(p.tasks.iter().all(|t| t.action == TaskAction::Unpinned));
    let s = p.summary.unwrap();
    assert!(
        s.contains("ranks 0-3 of 4 on this node: cores by the rank matrix (inter-NUMA bytes 0.0000e0, rank order 4.0000e3"),
        "{s}"
    );
    // Pairs that rank order already keeps together: rank order stays.
    write_ranks(&job, 4, &[(0, 1), (2, 3)], 1000);
    let p = Step::new(&machine, &[0, 1, 2, 3])
        .unwrap()
        .layout(&[0, 1, 2, 3], 4, 1)
        .profile(ProfileSource::Given(job.clone()))
        .compute()
        .unwrap();
    let shares: Vec<u32> = p.tasks.iter().map(|t| t.share[0]).collect();
    assert_eq!(shares, [0, 1, 2, 3]);
    assert!(p.summary.unwrap().contains("rank order kept"));
    // A profile of another rank count is not applied to this step.
    write_ranks(&job, 6, &[(0, 2)], 10);
    let p = Step::new(&machine, &[0, 1, 2, 3])
        .unwrap()
        .layout(&[0, 1, 2, 3], 4, 1)
        .profile(ProfileSource::Given(job))
        .compute()
        .unwrap();
    assert!(p
        .summary
        .unwrap()
        .contains("the rank profile has 6 ranks but the step 4 tasks"));
}

#[test]
fn a_rank_without_its_own_thread_profile_uses_the_lowest_ranks() {
    let t = tempfile::tempdir().unwrap();
    let job = t.path().join("job");
    write_profile(&job.join("task2"), "0,9\n9,0\n", 2);
    let machine = Topology::load("pack:1 numa:1 core:4 pu:1").unwrap();
    // A strategy that pins from any profile: which profile is used is what is tested.
    let p = Step::new(&machine, &[0, 1, 2, 3])
        .unwrap()
        .layout(&[4, 5], 8, 2)
        .strategy(StrategySpec::parse("scatter").unwrap())
        .profile(ProfileSource::Given(job.clone()))
        .compute()
        .unwrap();
    for tp in &p.tasks {
        let TaskAction::Pin { profile, pus, .. } = &tp.action else {
            panic!("{tp:?}")
        };
        assert_eq!(profile, &job.join("task2"));
        assert!(pus.iter().all(|u| tp.share.contains(u)));
    }
}

#[test]
fn an_mpi_rank_may_hold_more_threads_than_its_openmp_team() {
    let t = tempfile::tempdir().unwrap();
    let job = t.path().join("job");
    write_profile(&job.join("task0"), PAIRS4, 4);
    let machine = Topology::load("pack:1 numa:1 core:4 pu:1").unwrap();
    let step = |omp| {
        Step::new(&machine, &[0, 1, 2, 3])
            .unwrap()
            .layout(&[0], 2, 2)
            .strategy(StrategySpec::parse("scatter").unwrap())
            .omp_threads(Some(omp))
            .profile(ProfileSource::Given(job.clone()))
            .compute()
    };
    // 2 OpenMP threads + 2 threads of the MPI library: planned.
    assert!(matches!(
        step(2).unwrap().tasks[0].action,
        TaskAction::Pin { .. }
    ));
    let e = step(5).unwrap_err().to_string();
    assert!(e.ends_with("has 4 threads but OMP_NUM_THREADS=5"), "{e}");
}

#[test]
fn a_multi_task_step_without_a_profile_is_never_pre_run() {
    let t = tempfile::tempdir().unwrap();
    let machine = Topology::load("pack:1 numa:1 core:2 pu:1").unwrap();
    let p = Step::new(&machine, &[0, 1])
        .unwrap()
        .layout(&[0, 1], 4, 2)
        .command(&["app".to_string()])
        .profile(ProfileSource::Keyed(t.path().into()))
        .compute()
        .unwrap();
    assert!(p.tasks.iter().all(|t| t.action == TaskAction::Unpinned));
    let s = p.summary.unwrap();
    assert!(
        s.contains("no profile of this 4-task step in") && s.contains("--cmlb-map=profile"),
        "{s}"
    );
}

/// A profile made under a name serves a run with other arguments (a short run profiled,
/// the long one applied); without the name, the missing keyed profile's line lists the
/// program's other profiles.
#[test]
fn a_named_profile_serves_another_command_line() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().to_path_buf();
    // The short run's profile, made with profile:name=short (command "app --steps 10").
    write_profile(&root.join("short"), PAIRS4, 4);
    let yaml = root.join("short/profile.yaml");
    let text = std::fs::read_to_string(&yaml).unwrap();
    std::fs::write(
        &yaml,
        text.replace("command: [app]", "command: [/bin/app, --steps, '10']"),
    )
    .unwrap();
    let machine = Topology::load("pack:1 numa:2 core:2 pu:1").unwrap();
    let long = ["/bin/app".to_string(), "--steps".into(), "100000".into()];
    let step = |src: ProfileSource| {
        Step::new(&machine, &[0, 1, 2, 3])
            .unwrap()
            .command(&long)
            .profile(src)
    };
    let named = step(ProfileSource::Named {
        root: root.clone(),
        name: "short".into(),
    })
    .compute()
    .unwrap();
    // Planned from that profile (pinned, or left in its share by the guard): neither a
    // pre-run nor "no profile".
    assert!(
        matches!(
            named.tasks[0].action,
            TaskAction::Pin { .. } | TaskAction::Share
        ),
        "{:?}",
        named.tasks
    );
    assert_eq!(named.profile_dir, root.join("short"));
    let line = named.summary.unwrap();
    assert!(
        line.contains(&root.join("short").display().to_string()),
        "{line}"
    );
    // By key: the long run's own profile is missing; its other profiles are named.
    let keyed = step(ProfileSource::Keyed(root.clone()));
    let p = keyed.compute().unwrap();
    assert!(matches!(p.tasks[0].action, TaskAction::Prerun { .. }));
    let others = keyed.other_profiles(&p.profile_dir);
    assert!(
        others.contains("profiles of app in")
            && others.contains("short (/bin/app --steps 10)")
            && others.contains("apply:name=NAME"),
        "{others}"
    );
    // Another program's profiles are not offered.
    let other = Step::new(&machine, &[0, 1])
        .unwrap()
        .command(&["/bin/other".to_string()])
        .profile(ProfileSource::Keyed(root.clone()));
    let p = other.compute().unwrap();
    assert_eq!(other.other_profiles(&p.profile_dir), "");
}
