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

pub use crate::output::write_atomic;
