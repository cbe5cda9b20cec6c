//! Live sampling on the workloads of `tests/workloads` (real perf_event sampling on this
//! machine). The runs share 2 vCPUs, so they take turns (one at a time) to keep the sample
//! counts, and therefore the assertions, stable.

mod common;

use profiler::{run_profile, Backend, ProfileConfig, ProfileError, Target};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn profile(name: &str, threads: usize, secs: f64, backend: Backend) -> profiler::ProfileRun {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = ProfileConfig::new(Target::Launch(common::argv(name, threads, secs)));
    cfg.backend = backend;
    run_profile(&cfg).unwrap()
}

#[test]
fn faults_backend_numbers_threads_by_creation() {
    let run = profile("nosharing", 4, 0.3, Backend::Faults);
    assert!(run.exit_status.unwrap().success());
    let m = &run.profile.meta;
    assert_eq!(m.threads.len(), 4, "{:?}", m.threads);
    assert_eq!(m.backend, "faults");
    let root = m.threads[0].tid;
    for (i, t) in m.threads.iter().enumerate() {
        assert_eq!(t.index, i);
        assert_eq!(t.name, "nosharing");
        // Each worker first-touches 1 MiB = 256 pages of its own.
        assert!(t.load_samples >= 256, "thread {i}: {t:?}");
        if i > 0 {
            assert_ne!(t.tid, root);
        }
    }
    assert_eq!(run.watch_samples, 0);
    assert_eq!(run.lost, 0);
}

#[test]
fn watch_backend_attributes_watchpoint_hits() {
    let run = profile("pairs", 4, 1.0, Backend::Watch);
    assert!(run.watch_samples > 0, "no watchpoint hits");
    let c = &run.profile.comm;
    // Pairs (0,1) and (2,3) share; nothing crosses the pairs except noise.
    let inside = c.get(0, 1) + c.get(2, 3);
    let across = c.get(0, 2) + c.get(0, 3) + c.get(1, 2) + c.get(1, 3);
    assert!(inside > 4.0 * across, "inside {inside} across {across}");
}

#[test]
fn missing_command_is_an_error() {
    let cfg = ProfileConfig::new(Target::Launch(vec!["cmlb-no-such-command".into()]));
    match run_profile(&cfg) {
        Err(ProfileError::Command { command, reason }) => {
            assert_eq!(command, "cmlb-no-such-command");
            assert!(reason.contains("not found"));
        }
        other => panic!("expected a command error, got {other:?}"),
    }
}

#[test]
fn gone_pid_is_an_error() {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    let cfg = ProfileConfig::new(Target::Attach(pid));
    assert!(matches!(run_profile(&cfg), Err(ProfileError::NoSuchProcess(p)) if p == pid));
}

#[test]
fn attach_follows_a_running_process_until_the_duration_ends() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let argv = common::argv("ring", 4, 2.0);
    let mut child = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Let it create its threads and fault its buffers in.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut cfg = ProfileConfig::new(Target::Attach(pid));
    cfg.backend = Backend::Watch;
    cfg.duration = Some(std::time::Duration::from_millis(800));
    let run = run_profile(&cfg).unwrap();
    child.wait().unwrap();
    assert!(run.exit_status.is_none());
    let m = &run.profile.meta;
    assert_eq!(m.threads.len(), 4, "{:?}", m.threads);
    assert_eq!(m.threads[0].tid, pid as i64, "main thread first");
    assert!(run.elapsed.as_secs_f64() < 1.5, "stopped at the duration");
    // Faults are over, so the watchpoints were armed on words of the writable mappings.
    assert!(run.watch_samples > 0, "no watchpoint hits after attaching");
}

#[test]
fn child_processes_only_with_follow_children() {
    let wl = common::argv("nosharing", 2, 0.2);
    let script = format!("{} {} {} > /dev/null; true", wl[0], wl[1], wl[2]);
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut counts = Vec::new();
    for follow in [false, true] {
        let mut cfg = ProfileConfig::new(Target::Launch(vec![
            "sh".into(),
            "-c".into(),
            script.clone(),
        ]));
        cfg.backend = Backend::Faults;
        cfg.follow_children = follow;
        let run = run_profile(&cfg).unwrap();
        assert!(run.exit_status.unwrap().success());
        let names: Vec<String> = run
            .profile
            .meta
            .threads
            .iter()
            .map(|t| t.name.clone())
            .collect();
        counts.push(names);
    }
    // Without: the shell only. With: the shell, then the workload's main thread and worker,
    // in creation order, named after the exec'd program.
    assert_eq!(counts[0], vec!["sh"]);
    assert_eq!(counts[1], vec!["sh", "nosharing", "nosharing"]);
}

#[test]
fn watch_backend_follows_children_into_the_process_with_the_threads() {
    // The shell forks (`; true` keeps it from exec'ing the workload in its place) and waits:
    // the words must come from the workload's address space, not the shell's.
    let wl = common::argv("pairs", 4, 1.0);
    let script = format!("{} {} {} > /dev/null; true", wl[0], wl[1], wl[2]);
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = ProfileConfig::new(Target::Launch(vec!["sh".into(), "-c".into(), script]));
    cfg.backend = Backend::Watch;
    cfg.follow_children = true;
    let run = run_profile(&cfg).unwrap();
    assert!(run.exit_status.unwrap().success());
    let names: Vec<&str> = run
        .profile
        .meta
        .threads
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["sh", "pairs", "pairs", "pairs", "pairs"]);
    assert!(run.watch_samples > 0, "no watchpoint hits");
    // The shell is thread 0, so the workload's pairs (0,1) and (2,3) are (1,2) and (3,4).
    let c = &run.profile.comm;
    let inside = c.get(1, 2) + c.get(3, 4);
    let across = c.get(1, 3) + c.get(1, 4) + c.get(2, 3) + c.get(2, 4);
    assert!(inside > 4.0 * across, "inside {inside} across {across}");
}

#[test]
fn a_command_that_leaves_followed_processes_running_says_so() {
    // `sh -c 'app &'`: the shell exits at once, the workload keeps running unprofiled.
    let wl = common::argv("pairs", 2, 1.0);
    let script = format!("{} {} {} > /dev/null &", wl[0], wl[1], wl[2]);
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = ProfileConfig::new(Target::Launch(vec!["sh".into(), "-c".into(), script]));
    cfg.backend = Backend::Faults;
    cfg.follow_children = true;
    let run = run_profile(&cfg).unwrap();
    assert!(run.exit_status.unwrap().success());
    assert!(
        run.warnings
            .iter()
            .any(|w| w.contains("1 process(es) it started were still running")),
        "{:?}",
        run.warnings
    );
    // In the foreground (the shell waits), nothing to say.
    let script = format!("{} {} 0.2 > /dev/null; true", wl[0], wl[1]);
    let mut cfg = ProfileConfig::new(Target::Launch(vec!["sh".into(), "-c".into(), script]));
    cfg.backend = Backend::Faults;
    cfg.follow_children = true;
    let run = run_profile(&cfg).unwrap();
    assert!(
        !run.warnings.iter().any(|w| w.contains("still running")),
        "{:?}",
        run.warnings
    );
}
