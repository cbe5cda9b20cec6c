//! Shared helpers of the live profiling tests: building the workloads of `tests/workloads`.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Build the workloads once per test binary (gcc via the workloads' Makefile) and return the
/// directory holding the binaries.
pub fn workloads() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/workloads");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("workloads");
        std::fs::create_dir_all(&out).unwrap();
        let st = std::process::Command::new("make")
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

/// argv for a workload binary with thread count and run time.
pub fn argv(name: &str, threads: usize, seconds: f64) -> Vec<String> {
    vec![
        workloads().join(name).to_string_lossy().into_owned(),
        threads.to_string(),
        seconds.to_string(),
    ]
}
