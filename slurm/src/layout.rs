//! How Slurm writes a job's layout in its environment: `SLURM_TASKS_PER_NODE` (`2(x3),1`) and
//! `SLURM_JOB_NODELIST` (`node[1-4],big`), as the batch step sees them.

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
                    .filter(|&r| r > 0 && r <= 1 << 20)
                    .ok_or_else(bad)?;
                (c, r)
            }
        };
        let count: usize = count.parse().map_err(|_| bad())?;
        out.extend(std::iter::repeat_n(count, repeat));
    }
    if out.is_empty() || out.len() > 1 << 20 {
        return Err(format!("'{text}' lists no nodes"));
    }
    Ok(out)
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
}
