//! `cmlb profile` through the real binary with real perf_event sampling: the profile directory,
//! thread numbering, exit status, and one clear error (non-zero exit, nothing written) for each
//! failure users hit.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// Profiling runs take turns: they share 2 vCPUs and their sample counts matter.
static SERIAL: Mutex<()> = Mutex::new(());

fn workloads() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/workloads");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("workloads");
        std::fs::create_dir_all(&out).unwrap();
        let st = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(&src)
            .arg(format!("OUT={}", out.display()))
            .status()
            .expect("make (gcc) is needed to build tests/workloads");
        assert!(st.success(), "building tests/workloads failed");
        out
    })
    .clone()
}

fn wl(name: &str) -> String {
    workloads().join(name).to_string_lossy().into_owned()
}

fn cmlb(args: &[&str], env: &[(&str, &str)]) -> Output {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run cmlb")
}

/// Run cmlb as `nobody` (the caller must be root). In place when `nobody` can reach the
/// binary, else from a copy in a world-readable temporary directory (a checkout under a 0700
/// home directory), so tests that need another user always run.
fn cmlb_as_nobody(args: &[&str]) -> Output {
    assert!(nix::unistd::geteuid().is_root());
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = |bin: &Path| Command::new(bin).args(args).uid(65534).gid(65534).output();
    match run(Path::new(env!("CARGO_BIN_EXE_cmlb"))) {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let d = tempfile::tempdir().unwrap();
            let mode = |m| std::os::unix::fs::PermissionsExt::from_mode(m);
            std::fs::set_permissions(d.path(), mode(0o755)).unwrap();
            let bin = d.path().join("cmlb");
            std::fs::copy(env!("CARGO_BIN_EXE_cmlb"), &bin).unwrap();
            std::fs::set_permissions(&bin, mode(0o755)).unwrap();
            run(&bin).expect("run a copy of cmlb as nobody")
        }
        Err(e) => panic!("cannot run cmlb as nobody: {e}"),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Expect exit 1, nothing written at `out`, and one `cmlb: error:` line with every needle.
fn fails(o: &Output, out: Option<&Path>, needles: &[&str]) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("cmlb: error: "))
        .unwrap_or_else(|| panic!("no error line in {err}"));
    for n in needles {
        assert!(line.contains(n), "{n:?} not in {line:?}");
    }
    if let Some(out) = out {
        assert!(!out.exists(), "{} was written", out.display());
        let parent = out.parent().unwrap();
        if let Ok(d) = std::fs::read_dir(parent) {
            for e in d.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                assert!(!n.starts_with(".cmlb-"), "left behind {n}");
            }
        }
    }
}

fn yaml(dir: &Path) -> serde_norway::Value {
    serde_norway::from_str(&std::fs::read_to_string(dir.join("profile.yaml")).unwrap()).unwrap()
}

#[test]
fn threads_are_numbered_in_creation_order() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let o = cmlb(
        &[
            "profile",
            "--backend",
            "faults",
            "--out",
            out.to_str().unwrap(),
            "--",
            &wl("nosharing"),
            "6",
            "0.3",
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("profile written to {}", out.display())),
        "{err}"
    );
    assert!(err.contains("faults backend, 6 threads"), "{err}");
    assert!(err.contains("0 lost"), "{err}");
    // The workload prints `cmlb-wl thread=<creation index> tid=<tid> ...` per thread.
    let y = yaml(&out);
    let threads = y["threads"].as_sequence().unwrap();
    assert_eq!(threads.len(), 6);
    for line in text(&o.stdout).lines().filter(|l| l.contains(" thread=")) {
        let field = |k: &str| -> i64 {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(k))
                .unwrap()
                .parse()
                .unwrap()
        };
        let (idx, tid) = (field("thread="), field("tid="));
        assert_eq!(threads[idx as usize]["tid"].as_i64(), Some(tid), "{line}");
        assert_eq!(threads[idx as usize]["name"].as_str(), Some("nosharing"));
    }
    for f in ["comm.csv", "load.csv", "timeline.csv"] {
        assert!(out.join(f).exists(), "{f}");
    }
    assert_eq!(y["backend"].as_str(), Some("faults"));
}

#[test]
fn exit_status_of_the_command_is_propagated() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let o = cmlb(
        &[
            "profile",
            "--backend",
            "faults",
            "--out",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "head -c 1000000 /dev/zero > /dev/null; exit 3",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(out.join("profile.yaml").exists());
    assert!(text(&o.stderr).contains("exited with status 3"));
    // Death by a signal: 128+N, and the signal named.
    let o = cmlb(
        &[
            "profile",
            "--backend",
            "faults",
            "--out",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "head -c 1000000 /dev/zero > /dev/null; kill -9 $$",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(137), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("killed by signal 9 (SIGKILL); exit status 137"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn probe_reports_the_auto_choice() {
    let o = cmlb(&["profile", "--probe"], &[]);
    assert!(o.status.success());
    let s = text(&o.stdout);
    assert!(
        s.contains("PMU types:") && s.contains("auto backend:"),
        "{s}"
    );
    assert!(s.contains("perf_event_paranoid:"), "{s}");
}

#[test]
fn missing_command() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let o = cmlb(
        &[
            "profile",
            "--out",
            out.to_str().unwrap(),
            "--",
            "cmlb-no-such-command",
        ],
        &[],
    );
    fails(
        &o,
        Some(&out),
        &["cannot run 'cmlb-no-such-command'", "not found in PATH"],
    );
}

#[test]
fn gone_pid() {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id().to_string();
    c.wait().unwrap();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let o = cmlb(
        &["profile", "--attach", &pid, "--out", out.to_str().unwrap()],
        &[],
    );
    fails(&o, Some(&out), &[&format!("no process with pid {pid}")]);
}

#[test]
fn an_all_zero_load_vector_is_reported() {
    // Attached after the program touched its memory: watchpoint hits, hardly any page fault.
    let mut prog = Command::new(wl("pairs"))
        .args(["4", "4"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let pid = prog.id().to_string();
    let o = cmlb(
        &[
            "profile",
            "--attach",
            &pid,
            "--duration",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    let _ = prog.kill();
    let _ = prog.wait();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let load = std::fs::read_to_string(out.join("load.csv")).unwrap();
    let all_zero = load.lines().all(|l| l.trim().parse::<f64>() == Ok(0.0));
    assert_eq!(
        err.contains("load.csv is all zero"),
        all_zero,
        "warning must match load.csv:\n{load}\n{err}"
    );
}

#[test]
fn unwritable_output_dir() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = file.join("prof");
    let o = cmlb(
        &["profile", "--out", out.to_str().unwrap(), "--", "true"],
        &[],
    );
    fails(
        &o,
        None,
        &["cannot be created", "a-file", "is not a directory"],
    );
}

#[test]
fn run_anyway_runs_the_command_unprofiled_and_keeps_its_status() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = file.join("prof");
    let marker = d.path().join("ran");
    let script = format!("touch {}; exit 3", marker.display());
    let o = cmlb(
        &[
            "profile",
            "--run-anyway",
            "--out",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(marker.exists(), "the command did not run: {err}");
    assert!(
        err.contains("cmlb: warning:") && err.contains("is not a directory"),
        "{err}"
    );
    assert!(
        err.contains("running sh unprofiled (--run-anyway)"),
        "{err}"
    );
    assert!(!err.contains("cmlb: error:"), "{err}");
}

#[test]
fn an_unrelated_directory_is_not_replaced_by_a_profile() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("data");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("results.txt"), "x").unwrap();
    let marker = d.path().join("ran");
    let o = cmlb(
        &[
            "profile",
            "--out",
            out.to_str().unwrap(),
            "--",
            "touch",
            marker.to_str().unwrap(),
        ],
        &[],
    );
    fails(&o, None, &["not an earlier cmlb output (no profile.yaml)"]);
    assert!(out.join("results.txt").is_file());
    assert!(!marker.exists(), "checked before the command runs");
}

#[test]
fn huge_time_spans_are_errors_not_panics() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let marker = d.path().join("ran");
    for (opt, v, needle) in [
        (
            "--duration",
            "1e300",
            "--duration must be at most 1e8 seconds",
        ),
        (
            "--duration",
            "1e19",
            "--duration must be at most 1e8 seconds",
        ),
        (
            "--watch-interval-ms",
            "1e300",
            "--watch-interval-ms must be at most 1e11 milliseconds",
        ),
    ] {
        let o = cmlb(
            &[
                "profile",
                opt,
                v,
                "--out",
                out.to_str().unwrap(),
                "--",
                "touch",
                marker.to_str().unwrap(),
            ],
            &[],
        );
        fails(&o, Some(&out), &[needle]);
        assert!(!marker.exists(), "{opt} {v}: the command ran");
    }
}

/// A read-only output directory fails before the command runs. Root ignores directory
/// permissions, so as root the check runs as `nobody`.
#[test]
fn read_only_output_dir() {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o555),
    )
    .unwrap();
    let out = d.path().join("prof");
    let marker = d.path().join("ran");
    let args = [
        "profile",
        "--out",
        out.to_str().unwrap(),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ];
    let o = if nix::unistd::geteuid().is_root() {
        cmlb_as_nobody(&args)
    } else {
        cmlb(&args, &[])
    };
    fails(&o, Some(&out), &["is not writable", "--out"]);
    assert!(
        !marker.exists(),
        "the command ran although the profile could not be written"
    );
}

/// `--backend hw` without a hardware sampling PMU (VMs like these) is refused with one clear
/// error; on a machine that has one, it is never refused for lacking it.
#[test]
fn hardware_backend_is_refused_without_a_pmu() {
    let probe = text(&cmlb(&["profile", "--probe"], &[]).stdout);
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let o = cmlb(
        &[
            "profile",
            "--backend",
            "hw",
            "--out",
            out.to_str().unwrap(),
            "--",
            "true",
        ],
        &[],
    );
    if probe.contains("hardware sampling:    none") {
        fails(
            &o,
            Some(&out),
            &["no hardware PMU", "PEBS", "--backend watch"],
        );
    } else {
        let err = text(&o.stderr);
        assert!(!err.contains("no hardware PMU"), "{probe}\n{err}");
    }
}

#[test]
fn full_ring_buffer_counts_lost_samples() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    // 2 threads first-touching 64 MiB each: ~32k fault samples within a few ms, into a
    // 4 KiB ring buffer drained every 10 ms.
    let o = cmlb(
        &[
            "profile",
            "--backend",
            "faults",
            "--buffer-kib",
            "4",
            "--out",
            out.to_str().unwrap(),
            "--",
            &wl("nosharing"),
            "2",
            "0.2",
        ],
        &[("WL_KIB", "65536")],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("warning: the kernel dropped"), "{err}");
    let lost = yaml(&out)["lost_samples"].as_u64().unwrap();
    assert!(lost > 0);
    assert!(err.contains(&format!("{lost} lost")), "{err}");
    // Samples of threads whose start record was lost are dropped: said exactly when it happens.
    let unknown: u64 = yaml(&out)["params"]["samples_unknown_tid"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        err.contains(&format!(
            "{unknown} samples came from threads whose start records were lost"
        )),
        unknown > 0,
        "{err}"
    );
}

/// perf_event_paranoid: an unprivileged user may not observe another user's process. As root
/// the profiler runs as `nobody` against root's `sleep`; otherwise it attaches to pid 1,
/// which belongs to root.
#[test]
fn not_permitted_for_another_users_process() {
    let root = nix::unistd::geteuid().is_root();
    let mut victim = root.then(|| Command::new("sleep").arg("30").spawn().unwrap());
    let pid = victim.as_ref().map_or(1, |v| v.id()).to_string();
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = d.path().join("prof");
    let args = [
        "profile",
        "--backend",
        "faults",
        "--attach",
        &pid,
        "--out",
        out.to_str().unwrap(),
    ];
    let o = if root {
        cmlb_as_nobody(&args)
    } else {
        cmlb(&args, &[])
    };
    if let Some(v) = victim.as_mut() {
        let _ = v.kill();
        let _ = v.wait();
    }
    fails(
        &o,
        Some(&out),
        &["not permitted", "perf_event_paranoid", &pid],
    );
}

/// `samples.csv` is the input of `--strategy dagtm`: bounded by `--sample-log`, rows name
/// threads by creation index, and `cmlb map` can use the profile directory as it is.
#[test]
fn sample_log_is_bounded_and_feeds_dagtm() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let o = cmlb(
        &[
            "profile",
            "--backend",
            "faults",
            "--sample-log",
            "50",
            "--out",
            out.to_str().unwrap(),
            "--",
            &wl("pairs"),
            "4",
            "0.3",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let log = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    let mut lines = log.lines();
    assert_eq!(lines.next(), Some("tid_index,time_ns,addr"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 50, "the log keeps exactly the first 50 samples");
    for r in &rows {
        let idx: usize = r.split(',').next().unwrap().parse().unwrap();
        assert!(idx < 4, "{r}: thread index beyond the 4 threads");
    }
    assert_eq!(yaml(&out)["params"]["sample_log.kept"].as_str(), Some("50"));

    let m = cmlb(
        &[
            "map",
            "--profile",
            out.to_str().unwrap(),
            "--topology",
            "pack:1 core:2 pu:2",
            "--strategy",
            "dagtm",
            "--no-guard",
            "--format",
            "json",
        ],
        &[],
    );
    assert!(m.status.success(), "{}", text(&m.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&m.stdout).unwrap();
    assert_eq!(plan["strategy"], "dagtm");
    assert_eq!(plan["assignment"].as_array().unwrap().len(), 4);

    let out0 = d.path().join("prof0");
    let o = cmlb(
        &[
            "profile",
            "--backend",
            "faults",
            "--sample-log",
            "0",
            "--out",
            out0.to_str().unwrap(),
            "--",
            &wl("pairs"),
            "2",
            "0.2",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!out0.join("samples.csv").exists());
}

/// When the reader of cmlb's stderr goes away (a closed pipe), `profile` and `run` still
/// supervise the command to its end, write the profile and return the command's status:
/// their messages are dropped, not fatal, and SIGPIPE does not end them.
#[test]
fn a_vanished_stderr_reader_neither_stops_the_command_nor_loses_the_profile() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let prof = d.path().join("prof");
    let closed = || {
        let (r, w) = nix::unistd::pipe().unwrap();
        drop(r);
        std::process::Stdio::from(w)
    };
    let st = Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(["profile", "-v", "--backend", "faults", "--out"])
        .arg(&prof)
        .args(["--", "sh", "-c", "exit 4"])
        .stderr(closed())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(4), "{st:?}");
    assert!(prof.join("profile.yaml").is_file());
    let st = Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(["run", "-v", "--profile"])
        .arg(&prof)
        .args(["--", "sh", "-c", "exit 3"])
        .stderr(closed())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(3), "{st:?}");
}

/// `--accumulate`: a second profiled run of the same command merges into the profile (the
/// evidence counts its runs and the matrix's halves still add up to it); another command's
/// run replaces it with a warning; `--max-runs 1` keeps only the newest run.
#[test]
fn accumulate_merges_runs_of_the_same_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("prof");
    let o = out.to_str().unwrap();
    let pairs = wl("pairs");
    let run = |cmd: &[&str], extra: &[&str]| {
        let mut args = vec!["profile", "--backend", "watch", "--out", o, "--accumulate"];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(cmd);
        let r = cmlb(&args, &[]);
        assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
        text(&r.stderr)
    };
    let runs = || {
        let y = yaml(&out);
        y["evidence"]["runs"].as_u64().unwrap()
    };
    let err = run(&[&pairs, "4", "0.5"], &[]);
    assert!(err.contains("cmlb: evidence: 1 run, "), "{err}");
    assert_eq!(runs(), 1);
    let first = profile::Profile::read_dir(&out).unwrap();
    let err = run(&[&pairs, "4", "0.5"], &[]);
    assert!(err.contains("merged into the profile in"), "{err}");
    assert!(err.contains("cmlb: evidence: 2 runs, "), "{err}");
    assert_eq!(runs(), 2);
    let merged = profile::Profile::read_dir(&out).unwrap();
    assert!(merged.meta.samples > first.meta.samples);
    let (a, b) = merged.halves.as_ref().expect("halves");
    for i in 0..4 {
        for j in 0..4 {
            assert!((a.get(i, j) + b.get(i, j) - merged.comm.get(i, j)).abs() < 1e-6);
        }
    }
    // Another command (other arguments): replaced, and said so.
    let err = run(&[&pairs, "2", "0.3"], &[]);
    assert!(
        err.contains("not accumulating") && err.contains("another command"),
        "{err}"
    );
    assert_eq!(runs(), 1);
    run(&[&pairs, "2", "0.3"], &[]);
    assert_eq!(runs(), 2);
    run(&[&pairs, "2", "0.3"], &["--max-runs", "1"]);
    assert_eq!(runs(), 1);
    let r = cmlb(
        &["profile", "--accumulate", "--max-runs", "0", "--", &pairs],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
}

/// Every fault-based backend writes a profile that `cmlb map` reads back (the matrix and its
/// held-out halves agree; the page-level case is `live::assemble`'s unit test).
#[test]
fn every_backend_writes_a_profile_that_maps() {
    let d = tempfile::tempdir().unwrap();
    for backend in ["faults", "numa-faults", "watch"] {
        let out = d.path().join(backend);
        let o = cmlb(
            &[
                "profile",
                "--backend",
                backend,
                "--out",
                out.to_str().unwrap(),
                "--",
                &wl("pairs"),
                "4",
                "0.5",
            ],
            &[],
        );
        assert!(o.status.success(), "{backend}: {}", text(&o.stderr));
        let m = cmlb(
            &[
                "map",
                "--profile",
                out.to_str().unwrap(),
                "--topology",
                "numa:2 core:2 pu:1",
                "--format",
                "json",
            ],
            &[],
        );
        assert!(m.status.success(), "{backend}: {}", text(&m.stderr));
    }
}

/// `--job-scratch` (the plugin's rank-wrap, ranks on nodes it does not run on): a scratch
/// directory another user could swap is not written to. The rank runs unprofiled with one
/// line, and an MPI tracer in its environment writes into a private directory instead, so the
/// rank still takes part in the tracer's collective.
#[test]
fn a_rank_with_an_untrusted_scratch_directory_runs_unprofiled() {
    let d = tempfile::tempdir().unwrap();
    let open = d.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let scratch = open.join("scratch");
    let out = scratch.join("job/task0");
    let ranks = scratch.join("job/ranks");
    let o = cmlb(
        &[
            "profile",
            "--run-anyway",
            "--job-scratch",
            scratch.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo \"tracer out: $CMLB_RANKS_OUT\"; exit 3",
        ],
        &[("CMLB_RANKS_OUT", ranks.to_str().unwrap())],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "the command's own status: {err}");
    assert!(
        err.contains("writable by other users and not sticky") && err.contains("unprofiled"),
        "{err}"
    );
    let said = text(&o.stdout);
    let private = said
        .trim()
        .strip_prefix("tracer out: ")
        .unwrap_or_else(|| panic!("{said}"));
    assert!(!Path::new(private).starts_with(&open), "{private}");
    assert!(Path::new(private).is_dir(), "{private}");
    assert!(err.contains(private), "the line names it: {err}");
    assert!(
        !out.exists() && !ranks.exists(),
        "nothing written below the scratch directory"
    );
    let _ = std::fs::remove_dir_all(private);
}
