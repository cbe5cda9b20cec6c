//! The cmlb mapping core: which thread runs on which PU, so that threads sharing data sit on
//! one NUMA node while every node's memory load stays balanced.
//!
//! One entry point per use:
//!
//! * **a plan from inputs** — [`plan`]: a [`Topology`] (live, hwloc XML or synthetic,
//!   restricted to the PUs a job was given), a [`CommMatrix`] and a load vector, a
//!   [`StrategySpec`] → a [`Plan`] (thread → PU) with its [`Metrics`]:
//!
//! ```
//! use mapper::{plan, CommMatrix, MapInput, StrategySpec, Topology};
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
//! Everything other crates use is re-exported here, and only here (the modules are private):
//!
//! | step | names |
//! |---|---|
//! | the machine | [`Topology`] (`load`: live, hwloc XML or synthetic; `restrict`), [`Device`], [`DeviceKind`], [`MemoryNode`], [`Level`], [`Pu`], [`NodeSpec`], [`hwloc_xml`], [`quiet_hwloc`], [`parse_cpu_list`], [`format_cpu_list`] |
//! | the sharing and the loads | [`CommMatrix`], [`read_comm_csv`], [`write_comm_csv`], [`read_load_csv`], [`parse_numeric_csv`], [`check_sum`]; raw samples for `dagtm`: [`SampleLog`], [`LoggedSample`], [`read_samples_csv`], [`write_samples_csv`], [`SAMPLES_FILE`] |
//! | the strategy | [`StrategySpec`] (parsed once where the user typed it), [`DEFAULT_STRATEGY`], [`strategies`], [`strategy_names`], [`Strategy`] (with its [`Params`]), [`MapInput`], [`LOAD_TOLERANCE`] (`cmlb-refine`'s default) |
//! | compute | [`plan`] (the one route from a spec to a plan), [`compare`] (every strategy) |
//! | results | [`Plan`], [`Assignment`], [`Metrics`], [`metrics_of`], [`remote_comm`], [`hop_bytes`], [`numa_load`], [`LevelCosts`] and [`add_mram_cost`] (MRAM(h)), [`num`] (numbers as cmlb prints them) |
//! | errors and files | [`MapError`], [`Result`], [`write_atomic`], [`replace_dir`], [`check_output_dir`] |
//! | ranks across machines | [`ranks`] (`cmlb ranks`: rank graph → machines, multilevel bisection) |
//!
//! Above it, one way: `cmlb-profile` (profile directories, evidence) and `cmlb-step` (a
//! launcher's step → per-task actions, the guard), then the Slurm and CLI front ends. No Slurm,
//! no perf, no I/O beyond files here.

mod compare;
mod error;
mod matrix;
mod metrics;
mod mram;
mod output;
mod plan;
pub mod ranks;
mod reuse;
mod samples;
mod strategy;
mod topology;

// The front door: everything other crates may use, and nothing else. Grouped as the data flows.

// Inputs: the machine, the sharing, the loads, the raw samples.
pub use matrix::{
    check_sum, parse_numeric_csv, read_comm_csv, read_load_csv, write_comm_csv, CommMatrix,
};
pub use samples::{read_samples_csv, write_samples_csv, LoggedSample, SampleLog, SAMPLES_FILE};
pub use topology::{
    format_cpu_list, hwloc_xml, parse_cpu_list, quiet_hwloc, Device, DeviceKind, Level, MemoryNode,
    NodeSpec, Pu, Topology,
};
// Choosing a strategy and computing: `plan` is the one route from a spec to a plan.
pub use strategy::{
    all as strategies, names as strategy_names, MapInput, Params, Strategy, StrategySpec,
    DEFAULT as DEFAULT_STRATEGY, LOAD_TOLERANCE,
};
// Results and how they are scored.
pub use compare::{add_mram_cost, compare, num};
pub use metrics::{compute as metrics_of, hop_bytes, numa_load, remote_comm, Metrics};
pub use mram::LevelCosts;
pub use plan::{Assignment, Plan};
// Errors, and writing results so a reader never sees half a file.
pub use error::{MapError, Result};
pub use output::{check_output_dir, replace_dir, write_atomic};

/// The one way from a strategy to a plan: check the inputs agree, configure the strategy
/// `spec` names (with the profile's raw-sample log when it maps from one, `dagtm`), run it and
/// attach the plan's metrics. Every front end (`cmlb map`, `cmlb run`, the SPANK plugin through
/// the guard, `cmlb ranks` per node, `--compare`, the evaluation) plans through here.
pub fn plan(
    spec: &StrategySpec,
    input: &MapInput,
    samples: Option<&std::sync::Arc<SampleLog>>,
) -> Result<Plan> {
    let s = spec.build()?;
    let s = samples
        .and_then(|log| s.with_samples(std::sync::Arc::clone(log)))
        .unwrap_or(s);
    strategy::compute_plan_with(s.as_ref(), input)
}
