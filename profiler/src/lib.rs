//! The cmlb profiler: sampling backends produce one stream of memory-access samples
//! `(tid, time, addr, kind, dram?)`; the analysis turns it into the communication matrix,
//! the memory load vector and the timeline of a [`profile::Profile`].
//!
//! Live profiling entry point: [`run_profile`] (used by `cmlb profile` and `cmlb run`).

pub mod analysis;
pub mod error;
pub mod hw;
pub mod import;
pub mod live;
pub mod probe;
pub mod sample;

pub use analysis::{analyze, AnalysisParams, Analyzer, ThreadSpec};
pub use error::{ProfileError, Result};
pub use live::{run_profile, ProfileConfig, ProfileRun, Target, WatchConfig};
pub use probe::{Backend, Probe};
pub use sample::{AccessKind, Sample};
