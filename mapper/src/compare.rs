//! Every strategy on the same input: what `cmlb map --compare` prints and `cmlb report`
//! tabulates, computed and formatted in one place so the two always agree.

use crate::mram::LevelCosts;
use crate::plan::Plan;
use crate::samples::SampleLog;
use crate::strategy::{self, MapInput, StrategySpec};
use std::sync::Arc;

/// Recompute a plan's `mram_cost` for the level latencies `costs` (MRAM(h) model).
pub fn add_mram_cost(plan: &mut Plan, input: &MapInput, costs: &LevelCosts) {
    let pus: Option<Vec<usize>> = plan
        .assignment
        .iter()
        .map(|a| input.topology.pu_position(a.pu))
        .collect();
    if let Some(pus) = pus.filter(|p| !p.is_empty()) {
        plan.metrics.mram_cost = crate::mram::predict(input.comm, input.topology, &pus, costs);
    }
}

/// `(strategy name, its plan or why it failed)` for every registered strategy, in
/// [`strategy::all`] order. A failing strategy does not stop the others.
pub fn compare(
    input: &MapInput,
    samples: Option<&Arc<SampleLog>>,
    costs: Option<&LevelCosts>,
) -> Vec<(String, Result<Plan, String>)> {
    strategy::all()
        .iter()
        .map(|s| {
            let r = StrategySpec::parse(s.name())
                .and_then(|spec| crate::plan(&spec, input, samples))
                .map(|mut plan| {
                    if let Some(c) = costs {
                        add_mram_cost(&mut plan, input, c);
                    }
                    plan
                })
                .map_err(|e| e.to_string());
            (s.name().to_string(), r)
        })
        .collect()
}

/// Numbers for people: integers as integers, large or tiny values in scientific notation.
pub fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.fract() == 0.0 && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() >= 1e9 || v.abs() < 1e-3 {
        format!("{v:.4e}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_prints_integers_plainly_and_extremes_in_scientific_notation() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1234.0), "1234");
        assert_eq!(num(2.5), "2.500");
        assert_eq!(num(1.99e10), "1.9900e10");
        assert_eq!(num(0.0001), "1.0000e-4");
    }
}
