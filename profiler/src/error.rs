//! Typed errors of the profiler library. One enum for every part (analysis, record decoding,
//! trace import, sampling backends); variants are only ever added, so callers can match on them.

use std::path::PathBuf;

/// Errors returned by the profiler library. Every message names what is wrong and where.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// An analysis parameter is out of range (e.g. a line size that is not a power of two).
    #[error("invalid analysis parameter {name}: {msg}")]
    InvalidParam { name: &'static str, msg: String },

    /// The thread list handed to the analysis is inconsistent.
    #[error("thread list: {0}")]
    Threads(String),

    /// A sample lies too far from the start of the run to be binned into timeslices
    /// (usually a corrupt timestamp); the limit is `AnalysisParams::max_span_ns`.
    #[error(
        "sample at {time_ns} ns is {span_ns} ns after the first sample, more than the limit of \
         {max_span_ns} ns (corrupt timestamp?)"
    )]
    TimeSpan {
        time_ns: u64,
        span_ns: u64,
        max_span_ns: u64,
    },

    /// A perf_event sample record could not be decoded.
    #[error("perf record at byte {offset}: {msg}")]
    Record { offset: usize, msg: String },

    /// A trace file to import has a bad line.
    #[error("{}:{line}: {msg}", path.display())]
    Import {
        path: PathBuf,
        line: usize,
        msg: String,
    },

    /// A trace file to import is unusable as a whole (empty, unknown format, ...).
    #[error("{}: {msg}", path.display())]
    ImportFile { path: PathBuf, msg: String },

    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The command to profile could not be started.
    #[error("cannot run '{command}': {reason}")]
    Command { command: String, reason: String },

    /// `--attach PID` named a process that does not exist (any more).
    #[error("no process with pid {0} (it is gone or never existed)")]
    NoSuchProcess(i32),

    /// The kernel refused perf_event_open for permission reasons.
    #[error("perf_event_open not permitted for {what}: {detail}")]
    NotPermitted { what: String, detail: String },

    /// The requested backend needs hardware the machine does not have.
    #[error("no hardware PMU: {0}")]
    NoHardwarePmu(String),

    /// The requested backend cannot run here for another reason.
    #[error("backend '{backend}' unavailable: {reason}")]
    BackendUnavailable { backend: String, reason: String },

    /// Any other perf_event_open / ring-buffer failure.
    #[error("perf_event_open for {what} failed: {source}")]
    Perf {
        what: String,
        #[source]
        source: std::io::Error,
    },

    /// Invalid live-profiling setting (bad knob values, no command).
    #[error("invalid profiler setting: {0}")]
    Config(String),

    /// An error from the mapping core (profile directory I/O, matrix checks).
    #[error(transparent)]
    Map(#[from] mapper::MapError),
}

pub type Result<T, E = ProfileError> = std::result::Result<T, E>;

impl ProfileError {
    pub fn param(name: &'static str, msg: impl Into<String>) -> Self {
        ProfileError::InvalidParam {
            name,
            msg: msg.into(),
        }
    }
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ProfileError::Io {
            path: path.into(),
            source,
        }
    }
    pub fn record(offset: usize, msg: impl Into<String>) -> Self {
        ProfileError::Record {
            offset,
            msg: msg.into(),
        }
    }
    pub fn import(path: impl Into<PathBuf>, line: usize, msg: impl Into<String>) -> Self {
        ProfileError::Import {
            path: path.into(),
            line,
            msg: msg.into(),
        }
    }
}
