//! Mapping strategies, selectable by name.
//!
//! A strategy turns (communication matrix, load vector, restricted topology) into one PU per
//! thread. [`compute_plan`] runs one and attaches the metrics.

use crate::error::{MapError, Result};
use crate::matrix::CommMatrix;
use crate::metrics::{self, Metrics};
use crate::plan::{Assignment, Plan};
use crate::topology::Topology;

mod baseline;

/// What every strategy gets.
#[derive(Debug, Clone, Copy)]
pub struct MapInput<'a> {
    pub comm: &'a CommMatrix,
    /// One value per thread (all ones when the user gave no load).
    pub load: &'a [f64],
    pub topology: &'a Topology,
    /// Seed for randomised strategies; same seed, same plan.
    pub seed: u64,
}

/// A mapping strategy.
pub trait Strategy {
    /// The name users select it by.
    fn name(&self) -> &'static str;
    /// One line for `--help` and `cmlb map --list`.
    fn describe(&self) -> &'static str;
    /// Returns, for each thread, an index into `input.topology.pus`, or `None` if the strategy
    /// does not bind (e.g. `none`). Must be deterministic for a given input and seed.
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>>;
}

/// The strategy `cmlb map` uses when none is named. Placeholder until the CMLB strategies land.
pub const DEFAULT: &str = "compact";

/// Every strategy, in the order `--compare` prints them.
pub fn all() -> Vec<Box<dyn Strategy>> {
    vec![
        Box::new(baseline::Compact),
        Box::new(baseline::Scatter),
        Box::new(baseline::Random),
        Box::new(baseline::Identity),
    ]
}

/// Names of every strategy, for error messages and help.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|s| s.name()).collect()
}

/// Look a strategy up by name (`none` is an alias of `identity`).
pub fn by_name(name: &str) -> Result<Box<dyn Strategy>> {
    let wanted = if name == "none" { "identity" } else { name };
    all()
        .into_iter()
        .find(|s| s.name() == wanted)
        .ok_or_else(|| {
            MapError::Strategy(format!(
                "unknown strategy '{name}'; choose one of: {}",
                names().join(", ")
            ))
        })
}

/// Check the inputs agree with each other before any strategy sees them.
pub fn validate(input: &MapInput) -> Result<()> {
    if input.load.len() != input.comm.n() {
        return Err(MapError::input(
            "load vector",
            format!(
                "has {} values but the matrix has {} threads",
                input.load.len(),
                input.comm.n()
            ),
        ));
    }
    if let Some(i) = input.load.iter().position(|v| !v.is_finite() || *v < 0.0) {
        return Err(MapError::input(
            "load vector",
            format!(
                "value {} is {}: loads must be finite and >= 0",
                i + 1,
                input.load[i]
            ),
        ));
    }
    if input.topology.pus.is_empty() {
        return Err(MapError::Topology("no PUs to map onto".into()));
    }
    Ok(())
}

/// Run strategy `name` and build the plan with its metrics.
pub fn compute_plan(name: &str, input: &MapInput) -> Result<Plan> {
    validate(input)?;
    let s = by_name(name)?;
    let start = std::time::Instant::now();
    let pus = s.map(input)?;
    let mapping_ms = start.elapsed().as_secs_f64() * 1e3;
    let topo = input.topology;
    let (assignment, metrics) = match pus {
        None => (
            Vec::new(),
            Metrics {
                mapping_ms,
                ..Metrics::default()
            },
        ),
        Some(pus) => {
            if pus.len() != input.comm.n() || pus.iter().any(|&p| p >= topo.pus.len()) {
                return Err(MapError::Strategy(format!(
                    "strategy '{}' returned an invalid mapping",
                    s.name()
                )));
            }
            let assignment = pus
                .iter()
                .enumerate()
                .map(|(t, &p)| Assignment {
                    thread: t,
                    pu: topo.pus[p].os_index,
                    core: topo.pus[p].core,
                    numa: topo.pus[p].numa,
                })
                .collect();
            let m = Metrics {
                mapping_ms,
                ..metrics::compute(input.comm, input.load, topo, &pus)
            };
            (assignment, m)
        }
    };
    Ok(Plan {
        strategy: s.name().to_string(),
        topology: topo.summary_line(),
        assignment,
        metrics,
    })
}
