//! Typed errors of the report renderer. Each names what is wrong and where.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The plan does not fit the profile or the topology.
    #[error("plan: {0}")]
    Plan(String),
    /// No usable font for the PNG/SVG text.
    #[error("font: {0}")]
    Font(String),
    /// plotters failed to draw or encode a figure.
    #[error("figure {figure}: {msg}")]
    Draw { figure: String, msg: String },
    /// The output location is unusable.
    #[error("output: {0}")]
    Output(String),
    /// Checking or replacing the output directory failed (see `mapper::check_output_dir` and `mapper::replace_dir`).
    #[error(transparent)]
    Map(#[from] mapper::MapError),
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;

impl ReportError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReportError::Io {
            path: path.into(),
            source,
        }
    }
}
