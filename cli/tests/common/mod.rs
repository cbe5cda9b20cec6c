//! Helpers the CLI tests share: run the real `cmlb` binary and check its success or its one-line
//! error. Each test crate uses a different subset.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Run `cmlb ARGS` and capture everything.
pub fn cmlb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(args)
        .output()
        .expect("run cmlb")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `cmlb ARGS` succeeds; its stdout.
pub fn ok(args: &[&str]) -> String {
    let o = cmlb(args);
    assert!(
        o.status.success(),
        "cmlb {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

/// `cmlb ARGS` exits 1 with nothing on stdout and exactly one `cmlb: error:` line on stderr
/// that contains every needle.
pub fn fails(args: &[&str], needles: &[&str]) {
    let o = cmlb(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "cmlb {args:?}: {err}");
    assert!(o.stdout.is_empty(), "cmlb {args:?} printed {}", stdout(&o));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "cmlb {args:?}: expected one line, got {err}"
    );
    assert!(lines[0].starts_with("cmlb: error: "), "{err}");
    for n in needles {
        assert!(lines[0].contains(n), "cmlb {args:?}: {n:?} not in {err}");
    }
}

/// `cmlb ARGS` is refused by the argument parser (clap's usage error, status 2, as for every
/// option value that does not parse), nothing on stdout, every needle on stderr.
pub fn usage_error(args: &[&str], needles: &[&str]) {
    let o = cmlb(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "cmlb {args:?}: {err}");
    assert!(o.stdout.is_empty(), "cmlb {args:?} printed {}", stdout(&o));
    for n in needles {
        assert!(err.contains(n), "cmlb {args:?}: {n:?} not in {err}");
    }
}

/// A profile of `n` threads where 0-1, 2-3, ... share.
pub fn pairs_profile(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let mut comm = String::new();
    for i in 0..n {
        let row: Vec<&str> = (0..n)
            .map(|j| if i != j && i / 2 == j / 2 { "100" } else { "0" })
            .collect();
        comm.push_str(&row.join(","));
        comm.push('\n');
    }
    std::fs::write(dir.join("comm.csv"), comm).unwrap();
    std::fs::write(dir.join("load.csv"), "1\n".repeat(n)).unwrap();
    let mut y = "schema: 1\ncommand: [x]\nbackend: hand\nthreads:\n".to_string();
    for k in 0..n {
        y.push_str(&format!("- {{index: {k}, tid: {}}}\n", 100 + k));
    }
    std::fs::write(dir.join("profile.yaml"), y).unwrap();
}
