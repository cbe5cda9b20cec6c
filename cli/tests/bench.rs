//! `cmlb bench` through the real binary, on programs whose answer is known: one made slower on
//! purpose under every pinned placement (it sleeps 0.3 s when the OpenMP places cmlb exports
//! are set, 0.1 s without), one that fails when pinned, and bad arguments. The statistics'
//! behaviour on placement-blind programs (19 of 20 seeded experiments "the same") is a unit
//! test of `stats.rs`: with a real clock that check would fail by chance in ~13 % of CI runs.

mod common;

use common::{fails, usage_error};
use std::path::Path;
use std::process::{Command, Output};

fn bench(dir: &Path, args: &[&str], program: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .arg("bench")
        .args(["--warmup", "0", "--bind", "omp", "--cache"])
        .arg(dir.join("cache"))
        .arg("--out")
        .arg(dir.join("out"))
        .args(args)
        .arg("--")
        .arg(program)
        .env_remove("OMP_PLACES")
        .env_remove("OMP_NUM_THREADS")
        .output()
        .expect("run cmlb bench")
}

fn script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.to_str().unwrap().to_string()
}

/// Slow under any placement that pins (cmlb exports OMP_PLACES for it), fast unpinned.
const SENSITIVE: &str = "if [ -n \"$OMP_PLACES\" ]; then sleep 0.3; else sleep 0.1; fi";

fn csv_rows(dir: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join("out/bench.csv")).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("round,placement,wall_s,"));
    lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect()
}

#[test]
fn a_placement_sensitive_program_comes_out_significant_with_the_right_sign() {
    let d = tempfile::tempdir().unwrap();
    let prog = script(d.path(), "sensitive.sh", SENSITIVE);
    // The plan's strategy is given (scatter pins whatever the profile says): a profile of a
    // shell script supports no plan of the default strategy, which would pin nothing.
    let o = bench(
        d.path(),
        &[
            "--runs",
            "4",
            // Exactly 4 rounds, whatever the interval's width (the order is checked below).
            "--max-runs",
            "4",
            "--placements",
            "unpinned,compact,cmlb",
            "--strategy",
            "scatter",
        ],
        &prog,
    );
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}{err}");
    let verdict = out.lines().last().unwrap();
    assert!(
        verdict.starts_with("verdict: cmlb took ")
            && verdict.contains("the time of unpinned")
            && verdict.ends_with("slower, significant"),
        "{out}"
    );
    // The estimate is the 3x the program was made to show.
    let ratio: f64 = verdict["verdict: cmlb took ".len()..]
        .split('x')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((2.5..3.3).contains(&ratio), "{verdict}");
    let compact = out.lines().find(|l| l.starts_with("compact ")).unwrap();
    assert!(compact.ends_with("slower"), "{out}");
    // Interleaved, the order rotated every round; 4 runs of each, every one recorded.
    let rows = csv_rows(d.path());
    let order: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(
        order,
        [
            "unpinned", "compact", "cmlb", "compact", "cmlb", "unpinned", "cmlb", "unpinned",
            "compact", "unpinned", "compact", "cmlb"
        ]
    );
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_prefix("node")
                        .is_some_and(|k| k.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0);
    for r in &rows {
        let wall: f64 = r[2].parse().unwrap();
        let expect = if r[1] == "unpinned" { 0.1 } else { 0.3 };
        assert!(wall >= expect && wall < expect + 0.15, "{r:?}");
        // CPU migrations where this user may count them, pages per NUMA node from numastat.
        assert_eq!(r.len(), 14, "{r:?}");
        assert!(r[12].is_empty() || r[12].parse::<u64>().is_ok(), "{r:?}");
        let pages: Vec<&str> = r[13].split(';').filter(|x| !x.is_empty()).collect();
        assert_eq!(pages.len(), nodes, "one count per NUMA node: {r:?}");
        assert!(pages.iter().all(|x| x.parse::<u64>().is_ok()), "{r:?}");
    }
    // The summary as printed, the figure (a dot per run) and the page `cmlb report` makes.
    let summary = std::fs::read_to_string(d.path().join("out/bench.txt")).unwrap();
    assert!(summary.starts_with("command: ") && summary.ends_with(&format!("{verdict}\n")));
    let svg = std::fs::read_to_string(d.path().join("out/bench.svg")).unwrap();
    assert_eq!(svg.matches("<circle").count(), 12);
    let page_dir = d.path().join("page");
    common::ok(&[
        "report",
        d.path().join("out").to_str().unwrap(),
        "--out",
        page_dir.to_str().unwrap(),
    ]);
    let page = std::fs::read_to_string(page_dir.join("index.html")).unwrap();
    assert!(
        page.contains(verdict) && page.contains("bench.svg"),
        "{page}"
    );
    assert!(page_dir.join("bench.png").is_file());
    // The other way round: against a pinned baseline, unpinned is the faster one.
    let o = bench(
        d.path(),
        &[
            "--runs",
            "4",
            "--placements",
            "compact,unpinned",
            "--baseline",
            "compact",
        ],
        &prog,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    let verdict = out.lines().last().unwrap();
    assert!(
        verdict.starts_with("verdict: unpinned took 0.3")
            && verdict.ends_with("faster, significant"),
        "{out}"
    );
}

#[test]
fn a_plan_the_profile_cannot_support_pins_nothing() {
    // The default strategy on a profile of a shell script (no sharing data): the guard keeps
    // what the user has, so every run of the cmlb placement is an unpinned one (fast here).
    let d = tempfile::tempdir().unwrap();
    let prog = script(d.path(), "sensitive.sh", SENSITIVE);
    let o = bench(
        d.path(),
        &[
            "--runs",
            "4",
            "--placements",
            "compact,cmlb",
            "--baseline",
            "compact",
        ],
        &prog,
    );
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}{err}");
    assert!(err.contains("threads left as they are"), "{err}");
    let row = out.lines().find(|l| l.starts_with("cmlb ")).unwrap();
    assert!(
        row.contains("faster") && row.contains("(no thread plan: threads left as they are)"),
        "{out}"
    );
    for r in csv_rows(d.path()).iter().filter(|r| r[1] == "cmlb") {
        let wall: f64 = r[2].parse().unwrap();
        assert!((0.1..0.25).contains(&wall), "{r:?}");
    }
}

#[test]
fn a_program_that_fails_under_one_placement_stops_the_bench_and_keeps_the_runs_done() {
    let d = tempfile::tempdir().unwrap();
    let prog = script(
        d.path(),
        "fragile.sh",
        "if [ -n \"$OMP_PLACES\" ]; then echo 'out of luck' >&2; exit 3; fi; sleep 0.05",
    );
    let o = bench(
        d.path(),
        &["--runs", "4", "--placements", "unpinned,scatter"],
        &prog,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with("cmlb: error: ")
            && last.contains("fragile.sh failed under placement scatter in round 1")
            && last.contains("exit status 3")
            && last.contains("the 1 runs done are in"),
        "{err}"
    );
    // The end of the program's own stderr is shown, and the finished run kept.
    assert!(err.contains("out of luck"), "{err}");
    let rows = csv_rows(d.path());
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][1], "unpinned");
    // No summary for an unfinished bench; its page says so and shows the run done.
    assert!(!d.path().join("out/bench.txt").exists());
    let page = d.path().join("page");
    common::ok(&[
        "report",
        d.path().join("out").to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(page.join("index.html")).unwrap();
    assert!(
        html.contains("1 runs, no summary (the bench did not finish)"),
        "{html}"
    );
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    let d = tempfile::tempdir().unwrap();
    let prog = script(d.path(), "never.sh", "touch \"$0.ran\"");
    let out = d.path().join("out");
    let o = out.to_str().unwrap();
    usage_error(
        &["bench", "--placements", "unpinned,compcat", "--", &prog],
        &["unknown placement 'compcat'", "scatter"],
    );
    usage_error(
        &["bench", "--bind", "pin", "--", &prog],
        &["unknown bind mode 'pin' (expected omp, preload or both)"],
    );
    usage_error(
        &["bench", "--runs", "3", "--", &prog],
        &["--runs", "3 is not in 4..=1000"],
    );
    fails(
        &[
            "bench",
            "--out",
            o,
            "--placements",
            "compact,scatter",
            "--",
            &prog,
        ],
        &["--baseline unpinned is not one of --placements (compact,scatter)"],
    );
    fails(
        &[
            "bench",
            "--out",
            o,
            "--placements",
            "compact,compact",
            "--baseline",
            "compact",
            "--",
            &prog,
        ],
        &["--placements names compact twice"],
    );
    fails(
        &["bench", "--out", o, "--", "/nonexistent/app"],
        &["cannot run /nonexistent/app: no such file"],
    );
    assert!(!Path::new(&format!("{prog}.ran")).exists());
    assert!(!out.exists(), "nothing written for refused arguments");
}

#[test]
fn slurm_placements_need_slurm_and_an_allocation() {
    let d = tempfile::tempdir().unwrap();
    let prog = script(d.path(), "never.sh", "touch \"$0.ran\"");
    let out = d.path().join("out");
    let o = out.to_str().unwrap();
    fails(
        &[
            "bench",
            "--out",
            o,
            "--placements",
            "unpinned,block",
            "--",
            &prog,
        ],
        &["placement block is an srun step's: it needs --slurm"],
    );
    let run = Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(["bench", "--slurm", "--out", o, "--", &prog])
        .env_remove("SLURM_JOB_ID")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--slurm runs its steps inside an allocation, and SLURM_JOB_ID is not set"),
        "{err}"
    );
    usage_error(&["bench", "--srun", "-n2", "--", &prog], &["--slurm"]);
    assert!(!Path::new(&format!("{prog}.ran")).exists());
}
