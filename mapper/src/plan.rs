//! `plan.yaml`: which PU each thread runs on, and how good that is.

use crate::error::{MapError, Result};
use crate::metrics::Metrics;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where one thread goes. `pu`, `core` and `numa` are OS indexes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub thread: usize,
    pub pu: u32,
    pub core: u32,
    pub numa: u32,
}

/// A mapping plan: strategy, topology summary, per-thread assignment, metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub strategy: String,
    /// One-line topology summary (see `Topology::summary_line`).
    #[serde(default)]
    pub topology: String,
    /// Empty for `none`/`identity` (no binding).
    pub assignment: Vec<Assignment>,
    pub metrics: Metrics,
}

impl Plan {
    /// Write as YAML atomically (temp file + rename).
    pub fn write_yaml(&self, path: &Path) -> Result<()> {
        let text =
            serde_norway::to_string(self).map_err(|e| MapError::parse(path, e.to_string()))?;
        write_atomic(path, text.as_bytes())
    }

    pub fn read_yaml(path: &Path) -> Result<Plan> {
        let text = std::fs::read_to_string(path).map_err(|e| MapError::io(path, e))?;
        serde_norway::from_str(&text).map_err(|e| MapError::parse(path, e.to_string()))
    }
}

/// Write a file atomically: a temporary file in the same directory, then rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(MapError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("directory {} does not exist", dir.display()),
            ),
        ));
    }
    // 0666 minus the umask, as a plain create would give: tempfile's own 0600 would make an
    // exported topology or plan unreadable to anyone else (e.g. slurmstepd as the job user).
    let mut tmp = tempfile::Builder::new()
        .prefix(".cmlb-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| {
            MapError::io(
                path,
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create a file in {}: {}", dir.display(), e.kind()),
                ),
            )
        })?;
    tmp.write_all(bytes).map_err(|e| MapError::io(path, e))?;
    tmp.persist(path).map_err(|e| MapError::io(path, e.error))?;
    Ok(())
}
