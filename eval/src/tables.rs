//! What the rows say: the summary per strategy and NUMA size, the Markdown document, and the
//! numbers the RemoteComm plots show (drawn by `report`, which only draws).

use crate::inputs::EvalInput;
use crate::run::EvalRow;
use mapper::num;
use mapper::Metrics;

/// Strategies in first-seen order, keeping only those with at least one result.
pub fn strategies(rows: &[EvalRow]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rows {
        if matches!(r.metrics, Ok(Some(_))) && !v.contains(&r.strategy) {
            v.push(r.strategy.clone());
        }
    }
    v
}

/// The NUMA sizes of the rows, ascending.
pub fn numa_sizes(rows: &[EvalRow]) -> Vec<usize> {
    let mut numas: Vec<usize> = rows.iter().map(|r| r.numa).collect();
    numas.sort_unstable();
    numas.dedup();
    numas
}

/// Input names in first-seen order.
fn inputs_of<'a>(rows: impl IntoIterator<Item = &'a EvalRow>) -> Vec<String> {
    let mut inputs: Vec<String> = Vec::new();
    for r in rows {
        if !inputs.contains(&r.input) {
            inputs.push(r.input.clone());
        }
    }
    inputs
}

/// One line of the summary table.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub numa: usize,
    pub strategy: String,
    /// Geometric mean over inputs of (RemoteComm + 1) / (random's + 1).
    pub remote_vs_random: f64,
    /// Geometric mean over inputs of (Load_std + 1) / (random's + 1).
    pub load_std_vs_random: f64,
    /// Inputs where it ties for the lowest RemoteComm.
    pub wins: usize,
    /// Inputs it ran on.
    pub inputs: usize,
    pub median_mapping_ms: f64,
}

/// Per strategy and NUMA size: geometric mean over inputs of RemoteComm ÷ random's, and of
/// Load_std ÷ random's (both +1 so perfect zeros stay finite), count of inputs where it has the
/// lowest RemoteComm, how many inputs it ran on, and median mapping time. Repaired plans count
/// under their mapper's name (the tables and [`repair_note`] say which were repaired).
pub fn summary(rows: &[EvalRow]) -> Vec<SummaryRow> {
    let mut out = Vec::new();
    let metric = |input: &str, numa: usize, s: &str| -> Option<Metrics> {
        rows.iter()
            .find(|r| r.input == input && r.numa == numa && r.strategy == s)
            .and_then(|r| r.metrics.clone().ok().flatten())
    };
    let inputs = inputs_of(rows);
    for numa in numa_sizes(rows) {
        for s in strategies(rows) {
            let (mut lr, mut ll, mut k, mut wins, mut times) = (0.0, 0.0, 0, 0, Vec::new());
            for i in &inputs {
                let (Some(m), Some(base)) = (metric(i, numa, &s), metric(i, numa, "random")) else {
                    continue;
                };
                lr += ((m.remote_comm + 1.0) / (base.remote_comm + 1.0)).ln();
                ll += ((m.load_std + 1.0) / (base.load_std + 1.0)).ln();
                k += 1;
                times.push(m.mapping_ms);
                let best = strategies(rows)
                    .iter()
                    .filter_map(|o| metric(i, numa, o))
                    .map(|o| o.remote_comm)
                    .fold(f64::INFINITY, f64::min);
                if m.remote_comm <= best * (1.0 + 1e-12) {
                    wins += 1;
                }
            }
            if k == 0 {
                continue;
            }
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            out.push(SummaryRow {
                numa,
                strategy: s,
                remote_vs_random: (lr / k as f64).exp(),
                load_std_vs_random: (ll / k as f64).exp(),
                wins,
                inputs: k,
                median_mapping_ms: median,
            });
        }
    }
    out
}

/// The short table the README shows.
pub fn summary_markdown(rows: &[EvalRow]) -> String {
    let mut s = String::from(
        "| NUMA nodes | strategy | RemoteComm vs random | Load_std vs random | lowest RemoteComm on | median mapping ms |\n\
|---:|---|---:|---:|---:|---:|\n",
    );
    // "of k": strategies that need a sample log (dagtm) run on the profiled inputs only.
    for r in summary(rows) {
        s.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {}/{} | {:.3} |\n",
            r.numa,
            r.strategy,
            r.remote_vs_random,
            r.load_std_vs_random,
            r.wins,
            r.inputs,
            r.median_mapping_ms
        ));
    }
    s
}

/// One line per strategy and NUMA size whose plans had to be repaired: how many of its plans
/// and threads moved. `None` when no plan was repaired.
pub fn repair_note(rows: &[EvalRow]) -> Option<String> {
    let mut parts = Vec::new();
    for numa in numa_sizes(rows) {
        for s in strategies(rows) {
            let of: Vec<&EvalRow> = rows
                .iter()
                .filter(|r| r.numa == numa && r.strategy == s && matches!(r.metrics, Ok(Some(_))))
                .collect();
            let repaired: Vec<usize> = of
                .iter()
                .filter_map(|r| r.repair)
                .map(|r| r.moved)
                .collect();
            if !repaired.is_empty() {
                parts.push(format!(
                    "{s} on {numa} NUMA nodes: {} of {} plans, {} threads moved",
                    repaired.len(),
                    of.len(),
                    repaired.iter().sum::<usize>()
                ));
            }
        }
    }
    (!parts.is_empty()).then(|| {
        format!(
            "Repaired plans (more threads on a PU than the capacity; moved before measuring): {}.\n",
            parts.join("; ")
        )
    })
}

/// The whole document: how it was made, the summary, then one full table per NUMA size.
/// `plots`: the plot directory as the document should link it (relative to its own directory).
pub fn markdown(rows: &[EvalRow], inputs: &[EvalInput], notes: &str, plots: &str) -> String {
    let mut s = String::from("# Evaluation: cmlb strategies and Scotch on the same inputs\n\n");
    s.push_str(notes);
    s.push_str("\n## Inputs\n\n| input | threads | source |\n|---|---:|---|\n");
    for i in inputs {
        s.push_str(&format!("| {} | {} | {} |\n", i.name, i.comm.n(), i.source));
    }
    s.push_str(
        "\n## Summary\n\nGeometric means over the inputs of each metric divided by the seeded \
`random` strategy's (+1 on both sides so zeros stay finite): below 1 is better than random. \
\"lowest RemoteComm on\" counts the inputs where the strategy ties for the best RemoteComm.\n\n",
    );
    s.push_str(&summary_markdown(rows));
    if let Some(note) = repair_note(rows) {
        s.push('\n');
        s.push_str(&note);
    }
    for numa in numa_sizes(rows) {
        let topo = rows
            .iter()
            .find(|r| r.numa == numa)
            .map(|r| r.topology.clone())
            .unwrap_or_default();
        s.push_str(&format!(
            "\n## {numa} NUMA nodes\n\nSynthetic machine `{topo}` (or larger, to fit the thread count). \
![RemoteComm, {numa} NUMA nodes]({plots}/remote-{numa}numa.svg)\n\n\
| input | strategy | RemoteComm | Load_std | quality | hop-bytes | mapping ms |\n\
|---|---|---:|---:|---:|---:|---:|\n"
        ));
        for r in rows.iter().filter(|r| r.numa == numa) {
            match &r.metrics {
                Ok(Some(m)) => s.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} | {:.3} |\n",
                    r.input,
                    r.label(),
                    num(m.remote_comm),
                    num(m.load_std),
                    num(m.quality),
                    num(m.hop_bytes),
                    m.mapping_ms
                )),
                Ok(None) => {}
                Err(e) => s.push_str(&format!(
                    "| {} | {} | error: {} | | | | |\n",
                    r.input,
                    r.label(),
                    e.replace('|', "/")
                )),
            }
        }
    }
    s
}

/// The numbers of one RemoteComm plot: per input of that NUMA size (first-seen order) and per
/// strategy ([`strategies`] of all rows, so colours stay the same across NUMA sizes),
/// (RemoteComm + 1) / (random's + 1); `None` where either is missing.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteVsRandom {
    pub numa: usize,
    pub inputs: Vec<String>,
    pub strategies: Vec<String>,
    /// `values[input][strategy]`.
    pub values: Vec<Vec<Option<f64>>>,
}

pub fn remote_vs_random(rows: &[EvalRow], numa: usize) -> RemoteVsRandom {
    let here: Vec<&EvalRow> = rows.iter().filter(|r| r.numa == numa).collect();
    let strategies = strategies(rows);
    let inputs = inputs_of(here.iter().copied());
    let get = |input: &str, name: &str| {
        here.iter()
            .find(|r| r.input == input && r.strategy == name)
            .and_then(|r| r.metrics.clone().ok().flatten())
    };
    let values = inputs
        .iter()
        .map(|i| {
            strategies
                .iter()
                .map(|s| {
                    Some((get(i, s)?.remote_comm + 1.0) / (get(i, "random")?.remote_comm + 1.0))
                })
                .collect()
        })
        .collect();
    RemoteVsRandom {
        numa,
        inputs,
        strategies,
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::Repair;

    fn row(
        input: &str,
        numa: usize,
        strategy: &str,
        remote: f64,
        repair: Option<Repair>,
    ) -> EvalRow {
        EvalRow {
            input: input.into(),
            threads: 8,
            numa,
            topology: "numa:2 core:2 pu:2".into(),
            strategy: strategy.into(),
            metrics: Ok(Some(Metrics {
                remote_comm: remote,
                ..Metrics::default()
            })),
            repair,
        }
    }

    #[test]
    fn repaired_rows_are_labelled_and_counted_under_their_mapper() {
        let rows = vec![
            row("a", 2, "random", 99.0, None),
            row(
                "a",
                2,
                "scotch",
                9.0,
                Some(Repair {
                    moved: 12,
                    overfull_pus: 3,
                }),
            ),
            row("b", 2, "random", 99.0, None),
            row("b", 2, "scotch", 0.0, None),
        ];
        let md = markdown(&rows, &[], "notes\n", "eval");
        assert!(
            md.contains("| a | scotch (repaired: 12 moved) | 9 |"),
            "{md}"
        );
        assert!(md.contains("| b | scotch | 0 |"), "{md}");
        assert!(
            md.contains("scotch on 2 NUMA nodes: 1 of 2 plans, 12 threads moved"),
            "{md}"
        );
        // One summary line for scotch over both inputs: (10/100 · 1/100)^(1/2) = 0.032.
        let s = summary(&rows);
        let sc: Vec<&SummaryRow> = s.iter().filter(|r| r.strategy == "scotch").collect();
        assert_eq!(sc.len(), 1);
        assert_eq!(sc[0].inputs, 2);
        assert!((sc[0].remote_vs_random - (0.1f64 * 0.01).sqrt()).abs() < 1e-12);
        assert_eq!(repair_note(&rows[2..]), None);
    }

    #[test]
    fn plot_numbers_are_relative_to_random_per_numa_size() {
        let rows = vec![
            row("a", 2, "random", 9.0, None),
            row("a", 2, "compact", 4.0, None),
            row("a", 4, "random", 19.0, None),
            row("b", 4, "random", 0.0, None),
            row("b", 4, "compact", 1.0, None),
        ];
        let r = remote_vs_random(&rows, 4);
        assert_eq!(r.inputs, vec!["a", "b"]);
        assert_eq!(r.strategies, vec!["random", "compact"]);
        assert_eq!(
            r.values,
            vec![vec![Some(1.0), None], vec![Some(1.0), Some(2.0)]]
        );
        assert_eq!(numa_sizes(&rows), vec![2, 4]);
    }
}
