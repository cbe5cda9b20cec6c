//! Typed errors of the evaluation. Each names what is wrong and where; the messages are the
//! ones `cmlb eval` printed when this code lived in `report`, so scripts matching them still do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An EagerMap directory holds no matrix.
    #[error("{}: no .csv matrices found", .0.display())]
    NoMatrices(PathBuf),
    /// Reading a matrix, profile or sample log, or building a topology, failed.
    #[error(transparent)]
    Map(#[from] mapper::MapError),
    /// Scotch's `tleaf` target cannot describe this machine.
    #[error("topology {0}: Scotch's tleaf target needs the same number of PUs per NUMA node and per core")]
    NonUniformTarget(String),
    /// gmap's mapping file is not what its man page describes.
    #[error("Scotch mapping: {0}")]
    MappingFile(String),
    /// gmap exited with an error.
    #[error("{} failed: {stderr}", program.display())]
    Gmap { program: PathBuf, stderr: String },
    /// gmap's `-vt` log has no `Mapping` time line.
    #[error("gmap -vt printed no mapping time")]
    NoMappingTime,
    /// An external plan still breaks the per-PU capacity: never compared as if it were a plan.
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
}

pub type Result<T, E = EvalError> = std::result::Result<T, E>;

impl EvalError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EvalError::Io {
            path: path.into(),
            source,
        }
    }
}
