//! Collectives by their logical pattern.
//!
//! The bytes an MPI library actually sends for a collective depend on the algorithm it picks
//! at run time (binomial trees, rings, recursive doubling, shared-memory shortcuts) and never
//! pass through the profiling interface. What the program asks for does: which member's data
//! must reach which members. The tracer counts that logical movement, per calling member:
//!
//! | collective | what the calling member is counted as sending |
//! |---|---|
//! | `Bcast`, `Scatter(v)` | root: each member's part to that member |
//! | `Gather(v)`, `Reduce` | every non-root member: its contribution to the root |
//! | `Allgather(v)` | its block to every other member |
//! | `Alltoall(v)` | block i to member i |
//! | `Reduce_scatter(_block)` | its share of block i to member i |
//! | `Allreduce` | a reduce-scatter then an allgather: 2·n/p bytes to every other member |
//! | `Scan`, `Exscan` | its n bytes to the next member |
//! | `Barrier` | nothing |
//!
//! All sizes are in bytes (count × the datatype's size); a member never counts bytes to itself.

/// One collective call, as the calling member sees it (sizes in bytes).
#[derive(Debug, Clone, PartialEq)]
pub enum Coll {
    /// `MPI_Bcast` of `n` bytes from `root`.
    Bcast {
        /// Root's rank in the communicator.
        root: usize,
        /// Bytes.
        n: u64,
    },
    /// `MPI_Reduce`/`MPI_Gather(v)`: `n` bytes from every member to `root`.
    ToRoot {
        /// Root's rank in the communicator.
        root: usize,
        /// Bytes each member contributes.
        n: u64,
    },
    /// `MPI_Scatter(v)`: member i gets `parts[i]` bytes from `root` (one entry: the same for all).
    Scatter {
        /// Root's rank in the communicator.
        root: usize,
        /// Bytes per member (or one value for every member).
        parts: Vec<u64>,
    },
    /// `MPI_Allgather(v)`: the caller's `n` bytes to every other member.
    Allgather {
        /// The caller's block.
        n: u64,
    },
    /// `MPI_Alltoall(v)`, `MPI_Reduce_scatter(_block)`: `parts[i]` bytes to member i (one
    /// entry: the same for all).
    ToEach {
        /// Bytes per member (or one value for every member).
        parts: Vec<u64>,
    },
    /// `MPI_Allreduce` of `n` bytes.
    Allreduce {
        /// Bytes.
        n: u64,
    },
    /// `MPI_Scan`/`MPI_Exscan` of `n` bytes.
    Scan {
        /// Bytes.
        n: u64,
    },
}

fn part(parts: &[u64], i: usize) -> u64 {
    match parts {
        [one] => *one,
        _ => parts.get(i).copied().unwrap_or(0),
    }
}

/// What member `my` of a communicator of `size` members sends, as (member, bytes), no zero
/// entries and never to itself.
pub fn sends(c: &Coll, my: usize, size: usize) -> Vec<(usize, u64)> {
    let others = (0..size).filter(move |&i| i != my);
    let v: Vec<(usize, u64)> = match c {
        Coll::Bcast { root, n } if *root == my => others.map(|i| (i, *n)).collect(),
        Coll::Scatter { root, parts } if *root == my => {
            others.map(|i| (i, part(parts, i))).collect()
        }
        Coll::Bcast { .. } | Coll::Scatter { .. } => Vec::new(),
        Coll::ToRoot { root, n } if *root != my && *root < size => vec![(*root, *n)],
        Coll::ToRoot { .. } => Vec::new(),
        Coll::Allgather { n } => others.map(|i| (i, *n)).collect(),
        Coll::ToEach { parts } => others.map(|i| (i, part(parts, i))).collect(),
        Coll::Allreduce { n } => {
            let share = if size > 0 { 2 * n / size as u64 } else { 0 };
            others.map(|i| (i, share)).collect()
        }
        Coll::Scan { n } if my + 1 < size => vec![(my + 1, *n)],
        Coll::Scan { .. } => Vec::new(),
    };
    v.into_iter().filter(|&(_, b)| b > 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooted_collectives_move_data_between_the_root_and_the_others() {
        assert_eq!(
            sends(&Coll::Bcast { root: 1, n: 8 }, 1, 3),
            [(0, 8), (2, 8)]
        );
        assert!(sends(&Coll::Bcast { root: 1, n: 8 }, 0, 3).is_empty());
        assert_eq!(sends(&Coll::ToRoot { root: 2, n: 4 }, 0, 3), [(2, 4)]);
        assert!(sends(&Coll::ToRoot { root: 2, n: 4 }, 2, 3).is_empty());
        let sc = Coll::Scatter {
            root: 0,
            parts: vec![5, 6, 0, 7],
        };
        assert_eq!(sends(&sc, 0, 4), [(1, 6), (3, 7)]);
        assert!(sends(&sc, 1, 4).is_empty());
    }

    #[test]
    fn unrooted_collectives_reach_every_other_member() {
        assert_eq!(sends(&Coll::Allgather { n: 3 }, 1, 3), [(0, 3), (2, 3)]);
        assert_eq!(
            sends(
                &Coll::ToEach {
                    parts: vec![1, 2, 3]
                },
                2,
                3
            ),
            [(0, 1), (1, 2)]
        );
        // 2 n / p to each of the p - 1 others: an allreduce of 400 bytes on 4 members.
        assert_eq!(
            sends(&Coll::Allreduce { n: 400 }, 0, 4),
            [(1, 200), (2, 200), (3, 200)]
        );
        assert_eq!(sends(&Coll::Scan { n: 8 }, 1, 3), [(2, 8)]);
        assert!(sends(&Coll::Scan { n: 8 }, 2, 3).is_empty());
        assert!(sends(&Coll::Allreduce { n: 8 }, 0, 1).is_empty());
    }
}
