//! The profiled program runs with transparent huge pages off (prctl PR_SET_THP_DISABLE in the
//! launcher), so the fault-based load vector counts 4 KiB pages of memory, not huge-page faults.

mod common;
use common::cmlb;

#[test]
fn profiled_program_runs_without_transparent_huge_pages() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(
        status.contains("THP_enabled:"),
        "this kernel does not report THP_enabled in /proc/PID/status"
    );
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("prof");
    let o = cmlb(&[
        "profile",
        "--backend",
        "faults",
        "--run-anyway",
        "--out",
        out.to_str().unwrap(),
        "--",
        "grep",
        "THP_enabled",
        "/proc/self/status",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["THP_enabled:", "0"]),
        "stdout: {text}\nstderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Not profiled, the same command sees THP as the system sets it (enabled unless the
    // system turned it off entirely), so the test tells the two apart.
    let plain = std::process::Command::new("grep")
        .args(["THP_enabled", "/proc/self/status"])
        .output()
        .unwrap();
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert!(plain.contains("THP_enabled:\t1"), "{plain}");
}
