//! Helpers shared by the fuzz targets: inputs that parsers read from a path are written to a
//! file in one private temporary directory per fuzzing process (overwritten each run).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The process's scratch directory (removed when the process exits normally).
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("fuzz scratch dir"))
        .path()
}

/// Write `bytes` to `scratch()/name` and return its path.
pub fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = scratch().join(name);
    std::fs::write(&p, bytes).expect("write fuzz input");
    p
}

/// An error about the file at `path` must say which file: the launcher prints this one line.
pub fn assert_names(err: &dyn std::fmt::Display, path: &Path) {
    let msg = err.to_string();
    let name = path.display().to_string();
    assert!(
        msg.contains(&name),
        "error does not name the file {name}: {msg}"
    );
}

/// Split one fuzz input into `n` parts at the separator byte sequence `\0--\0` (missing parts
/// are empty), so one input can hold several files of a profile directory.
pub fn split(data: &[u8], n: usize) -> Vec<&[u8]> {
    const SEP: &[u8] = b"\0--\0";
    let mut parts = Vec::with_capacity(n);
    let mut rest = data;
    while parts.len() + 1 < n {
        match rest.windows(SEP.len()).position(|w| w == SEP) {
            Some(i) => {
                parts.push(&rest[..i]);
                rest = &rest[i + SEP.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    while parts.len() < n {
        parts.push(&[]);
    }
    parts
}
