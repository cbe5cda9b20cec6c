//! The cmlb mapping core.
//!
//! Inputs -> compute -> output, with no Slurm, no perf and no I/O beyond files:
//!
//! * [`topology::Topology`]: the machine (live / XML / synthetic via hwloc), restricted to the
//!   PUs a job was given.
//! * [`matrix::CommMatrix`] + a load vector: what the profiler measured (see [`profile`]).
//! * [`strategy`]: mapping strategies selectable by name (`cmlb`, `eagermap`, `compact`, ...).
//! * [`plan::Plan`]: thread -> PU assignment with its [`metrics`].

pub mod binding;
pub mod compare;
pub mod error;
pub mod guard;
pub mod matrix;
pub mod metrics;
pub mod mram;
pub mod output;
pub mod plan;
pub mod profile;
pub mod reuse;
pub mod strategy;
pub mod topology;

pub use error::{MapError, Result};
pub use matrix::CommMatrix;
pub use plan::{Assignment, Plan};
pub use topology::{Level, Topology};
