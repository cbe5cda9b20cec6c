//! How Slurm writes a job's layout in its environment: `SLURM_TASKS_PER_NODE` (`2(x3),1`) and
//! `SLURM_JOB_NODELIST` (`node[1-4],big`), as the batch step sees them.

/// The most nodes a layout may list (Slurm's own limit is far below).
pub const MAX_NODES: usize = 1 << 20;

/// `SLURM_TASKS_PER_NODE` / `SLURM_JOB_CPUS_PER_NODE`: `COUNT[(xREPEAT)],...` → one count per
/// node.
pub fn per_node_counts(text: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        let bad = || format!("'{item}' in '{text}' is not COUNT or COUNT(xREPEAT)");
        let (count, repeat) = match item.split_once('(') {
            None => (item, 1usize),
            Some((c, r)) => {
                let r = r
                    .strip_prefix('x')
                    .and_then(|r| r.strip_suffix(')'))
                    .and_then(|r| r.parse().ok())
                    .filter(|&r| r > 0 && r <= MAX_NODES)
                    .ok_or_else(bad)?;
                (c, r)
            }
        };
        let count: usize = count.parse().map_err(|_| bad())?;
        // Each repeat is bounded, their sum too: before it is allocated, not after.
        if out.len() + repeat > MAX_NODES {
            return Err(format!("'{text}' lists more than {MAX_NODES} nodes"));
        }
        out.extend(std::iter::repeat_n(count, repeat));
    }
    if out.is_empty() {
        return Err(format!("'{text}' lists no nodes"));
    }
    Ok(out)
}

/// Whether per-node task counts describe `nodes` nodes and `ntasks` tasks in all. The sum is
/// checked: counts near `usize::MAX` must not wrap into one that matches.
pub fn describes(per_node: &[usize], nodes: usize, ntasks: usize) -> bool {
    per_node.len() == nodes
        && per_node.iter().try_fold(0usize, |a, &c| a.checked_add(c)) == Some(ntasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_expand_and_errors_quote_the_item() {
        assert_eq!(per_node_counts("4(x2)").unwrap(), [4, 4]);
        assert_eq!(per_node_counts("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert_eq!(per_node_counts("7").unwrap(), [7]);
        assert_eq!(
            per_node_counts("2(3)").unwrap_err(),
            "'2(3)' in '2(3)' is not COUNT or COUNT(xREPEAT)"
        );
        assert!(per_node_counts("a").is_err());
        assert!(per_node_counts("").is_err());
    }

    #[test]
    fn a_layout_describes_its_nodes_and_tasks_without_wrapping() {
        let c = per_node_counts("2(x3),1").unwrap();
        assert!(describes(&c, 4, 7));
        assert!(!describes(&c, 3, 7));
        assert!(!describes(&c, 4, 6));
        let huge = per_node_counts(&format!("{},1", usize::MAX)).unwrap();
        assert!(!describes(&huge, 2, 0), "usize::MAX + 1 wrapped to 0");
    }

    #[test]
    fn repeats_adding_up_past_the_limit_are_refused_before_allocating() {
        // Found writing the slurm_layout fuzz target: each (xREPEAT) was bounded, their sum only
        // after every node had been allocated (a few thousand items: gigabytes in slurmstepd).
        let text = ["1(x1048576)"; 4000].join(",");
        let e = per_node_counts(&text).unwrap_err();
        assert!(e.ends_with("' lists more than 1048576 nodes"), "{e}");
        assert_eq!(per_node_counts("1(x1048576)").unwrap().len(), MAX_NODES);
        assert!(per_node_counts("1(x1048576),2").is_err());
    }
}
