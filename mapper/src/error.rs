//! Typed errors of the mapping core. Every variant names what is wrong and where.

use std::path::PathBuf;

/// Errors returned by the mapper library.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// A matrix, load vector or other numeric input is malformed.
    #[error("{what}: {msg}")]
    Input { what: String, msg: String },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its contents do not parse.
    #[error("{}: {msg}", path.display())]
    Parse { path: PathBuf, msg: String },
    /// The topology could not be loaded or restricted.
    #[error("topology: {0}")]
    Topology(String),
    /// The strategy name is unknown or its parameters are invalid.
    #[error("strategy: {0}")]
    Strategy(String),
    /// A step cannot be planned (no or unusable profile, thread counts that disagree): the
    /// message is complete, for the launcher's one line.
    #[error("{0}")]
    Step(String),
}

pub type Result<T, E = MapError> = std::result::Result<T, E>;

impl MapError {
    pub fn input(what: impl Into<String>, msg: impl Into<String>) -> Self {
        MapError::Input {
            what: what.into(),
            msg: msg.into(),
        }
    }
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        MapError::Io {
            path: path.into(),
            source,
        }
    }
    pub fn parse(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        MapError::Parse {
            path: path.into(),
            msg: msg.into(),
        }
    }
}
