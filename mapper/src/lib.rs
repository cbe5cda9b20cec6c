//! The cmlb mapping core: which thread runs on which PU, so that threads sharing data sit on
//! one NUMA node while every node's memory load stays balanced.
//!
//! One entry point per use:
//!
//! * **a plan from inputs** — [`plan`]: a [`Topology`] (live, hwloc XML or synthetic,
//!   restricted to the PUs a job was given), a [`CommMatrix`] and a load vector, a
//!   [`StrategySpec`] → a [`Plan`] (thread → PU) with its [`metrics`]:
//!
//! ```
//! use mapper::strategy::MapInput;
//! use mapper::{plan, CommMatrix, StrategySpec, Topology};
//!
//! let topology = Topology::load("pack:1 numa:2 core:2 pu:1")?; // 2 NUMA nodes × 2 cores
//! let mut comm = CommMatrix::zeros(4);
//! comm.add_sym(0, 2, 10.0); // threads 0 and 2 share data
//! comm.add_sym(1, 3, 10.0); // so do 1 and 3
//! let load = [1.0, 1.0, 3.0, 3.0];
//! let input = MapInput { comm: &comm, load: &load, topology: &topology, seed: 1 };
//! let plan = plan(&StrategySpec::parse("cmlb")?, &input, None)?;
//! assert_eq!(plan.metrics.remote_comm, 0.0); // no sharing crosses a NUMA node
//! assert_eq!(plan.metrics.load_std, 0.0); // and both nodes carry a load of 4
//! # Ok::<(), mapper::MapError>(())
//! ```
//!
//! * **a step of a launcher** — [`pipeline::Step`]: what Slurm or `cmlb run` knows about a
//!   step (CPUs, tasks, thread counts, where profiles are, the strategy) → what each task gets
//!   (CPU share, thread → PU list, or a profiling wrap), as the SPANK plugin and `cmlb run`
//!   use it.
//!
//! Underneath: [`topology`] (hwloc), [`strategy`] (every mapping method, selectable by
//! [`StrategySpec`]), [`metrics`], [`profile`] and [`plan`] files. No Slurm, no perf, no I/O
//! beyond files.

pub mod compare;
pub mod error;
pub mod matrix;
pub mod metrics;
pub mod mram;
pub mod output;
pub mod plan;
pub mod ranks;
pub mod reuse;
pub mod samples;
pub mod strategy;
pub mod topology;

pub use error::{MapError, Result};
pub use matrix::CommMatrix;
pub use plan::{Assignment, Plan};
pub use strategy::StrategySpec;
pub use topology::{Device, DeviceKind, Level, Topology};

/// The one way from a strategy to a plan: check the inputs agree, configure the strategy
/// `spec` names (with the profile's raw-sample log when it maps from one, `dagtm`), run it and
/// attach the plan's metrics. Every front end (`cmlb map`, `cmlb run`, the SPANK plugin through
/// the guard, `cmlb ranks` per node, `--compare`, the evaluation) plans through here.
pub fn plan(
    spec: &StrategySpec,
    input: &strategy::MapInput,
    samples: Option<&std::sync::Arc<samples::SampleLog>>,
) -> Result<Plan> {
    let s = spec.build()?;
    let s = samples
        .and_then(|log| s.with_samples(std::sync::Arc::clone(log)))
        .unwrap_or(s);
    strategy::compute_plan_with(s.as_ref(), input)
}
