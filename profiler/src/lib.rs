//! The cmlb profiler: sampling backends produce one stream of memory-access samples
//! `(tid, time, addr, kind, dram?)`; the analysis turns it into the communication matrix,
//! the memory load vector and the timeline of a [`mapper::profile::Profile`].

pub mod analysis;
pub mod error;
pub mod hw;
pub mod import;
pub mod sample;

pub use analysis::{analyze, AnalysisParams, Analyzer, ThreadSpec};
pub use error::{ProfileError, Result};
pub use sample::{AccessKind, Sample};
