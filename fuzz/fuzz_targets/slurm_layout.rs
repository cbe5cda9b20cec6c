//! A batch job's layout as Slurm puts it in the environment and the plugin reads it inside
//! slurmstepd: `SLURM_TASKS_PER_NODE` (`2(x3),1`, `cmlb_slurm::layout::per_node_counts`) from
//! the input's first line, `SLURM_JOB_NODELIST` (`node[01-04],big`,
//! `cmlb_slurm::nodes::expand_hostlist`) from the rest. No panic, no unbounded allocation; an error
//! quotes the value; counts written back in Slurm's compressed form parse back equal, and names
//! of plain characters joined with commas expand back equal.
#![no_main]
use libfuzzer_sys::fuzz_target;

/// At most this many nodes (what `per_node_counts` accepts).
const MAX_NODES: usize = 1 << 20;

fn compress(counts: &[usize]) -> String {
    let mut items = Vec::new();
    let mut i = 0;
    while i < counts.len() {
        let mut j = i;
        while j < counts.len() && counts[j] == counts[i] {
            j += 1;
        }
        items.push(if j - i == 1 {
            counts[i].to_string()
        } else {
            format!("{}(x{})", counts[i], j - i)
        });
        i = j;
    }
    items.join(",")
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let (per_node, nodelist) = s.split_once('\n').unwrap_or((s, ""));
    match cmlb_slurm::layout::per_node_counts(per_node) {
        Ok(c) => {
            assert!(!c.is_empty() && c.len() <= MAX_NODES, "{} nodes", c.len());
            let spelled = compress(&c);
            let back = cmlb_slurm::layout::per_node_counts(&spelled).expect("compressed form");
            assert_eq!(back, c, "{per_node:?} → {spelled:?}");
        }
        Err(e) => assert!(e.contains(&format!("'{per_node}'")), "{e}"),
    }
    match cmlb_slurm::nodes::expand_hostlist(nodelist) {
        Ok(names) => {
            assert!(
                !names.is_empty() && names.len() <= MAX_NODES,
                "{} names",
                names.len()
            );
            let plain = |n: &String| {
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            };
            if names.iter().all(plain) {
                let back = cmlb_slurm::nodes::expand_hostlist(&names.join(",")).expect("joined names");
                assert_eq!(back, names);
            }
        }
        Err(e) => assert!(!e.to_string().trim().is_empty()),
    }
});
