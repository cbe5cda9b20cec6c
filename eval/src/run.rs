//! The run: every strategy (and Scotch, when gmap is given) on every input × NUMA size, one
//! [`EvalRow`] each.

use crate::capacity::Repair;
use crate::error::{EvalError, Result};
use crate::inputs::{synthetic_topology, EvalInput};
use crate::scotch;
use mapper::MapInput;
use mapper::Metrics;
use std::path::Path;

/// One cell group of the result table.
#[derive(Debug, Clone)]
pub struct EvalRow {
    pub input: String,
    pub threads: usize,
    pub numa: usize,
    pub topology: String,
    pub strategy: String,
    /// `Err` when the strategy cannot run on this input (or its plan is invalid);
    /// `Ok(None)` when it does not bind.
    pub metrics: std::result::Result<Option<Metrics>, String>,
    /// Set when an external mapper's plan broke the one-thread-per-PU capacity and was
    /// repaired before its metrics were computed ([`crate::capacity::repair`]).
    pub repair: Option<Repair>,
}

impl EvalRow {
    /// The strategy as the full tables show it: with the repair when there was one, so a
    /// repaired plan is never read as the mapper's own.
    pub fn label(&self) -> String {
        match self.repair {
            Some(r) => format!("{} (repaired: {} moved)", self.strategy, r.moved),
            None => self.strategy.clone(),
        }
    }
}

/// Run every strategy (and Scotch, if `gmap` is given) on every input × NUMA size.
pub fn run(
    inputs: &[EvalInput],
    numa_sizes: &[usize],
    gmap: Option<&Path>,
    seed: u64,
) -> Result<Vec<EvalRow>> {
    let work = tempfile::tempdir().map_err(|e| EvalError::io(std::env::temp_dir(), e))?;
    let mut rows = Vec::new();
    for &numa in numa_sizes {
        for input in inputs {
            let topo = synthetic_topology(numa, input.comm.n())?;
            let mi = MapInput {
                comm: &input.comm,
                load: &input.load,
                topology: &topo,
                seed,
            };
            let row = |strategy: String, metrics, repair| EvalRow {
                input: input.name.clone(),
                threads: input.comm.n(),
                numa,
                topology: topo.source.clone(),
                strategy,
                metrics,
                repair,
            };
            for (name, plan) in mapper::compare(&mi, input.samples.as_ref(), None) {
                // A strategy that maps from raw samples has nothing to say about a bare matrix.
                let needs_samples =
                    mapper::StrategySpec::parse(&name).is_ok_and(|s| s.wants_samples());
                if needs_samples && input.samples.is_none() {
                    continue;
                }
                let m = plan.map(|p| (!p.assignment.is_empty()).then_some(p.metrics));
                rows.push(row(name, m, None));
            }
            if let Some(g) = gmap {
                let r = match scotch::map(g, input, &topo, work.path()) {
                    Ok(p) => row("scotch".into(), Ok(Some(p.metrics)), p.repair),
                    Err(e) => row("scotch".into(), Err(e.to_string()), None),
                };
                rows.push(r);
            }
        }
    }
    Ok(rows)
}
