//! Reuse-distance analysis of one thread's access stream (DagTM, digest 003 §2).
//!
//! The reuse distance of an access is the number of *distinct* data touched since the previous
//! access to the same datum. The paper keeps one balanced tree per thread ordered by last-access
//! time and counts the nodes newer than the datum's previous access; here the same order
//! statistic comes from a Fenwick (binary indexed) tree over access times in which exactly the
//! latest access time of every datum is marked, so each access costs O(log S) for S accesses.
//! A datum keeps the minimum distance over its reuses; a datum never reused gets M, the number
//! of distinct data of the thread (the paper's Step 7, "∞ → M").
//!
//! With sampled input (one access in every `period`), these are distances in the sampled
//! stream, the sampled reuse-distance analysis the paper cites.

use std::collections::HashMap;

/// Order statistics over access times: how many marked times lie in a range.
struct Fenwick {
    tree: Vec<i64>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Fenwick {
            tree: vec![0; n + 1],
        }
    }
    fn add(&mut self, i: usize, v: i64) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] += v;
            i += i & i.wrapping_neg();
        }
    }
    /// Marked times in 0..=i.
    fn prefix(&self, i: usize) -> i64 {
        let mut i = i + 1;
        let mut s = 0;
        while i > 0 {
            s += self.tree[i];
            i -= i & i.wrapping_neg();
        }
        s
    }
}

/// One distinct datum of a thread's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datum {
    pub id: u64,
    /// Accesses to it (the paper's F).
    pub accesses: usize,
    /// Minimum reuse distance over its reuses, or M if it was never reused.
    pub distance: usize,
}

/// Every distinct datum of `trace`, in order of first access, with its minimum reuse distance.
pub fn reuse_distances(trace: &[u64]) -> Vec<Datum> {
    let mut fw = Fenwick::new(trace.len());
    // datum -> (index into out, last access time)
    let mut last: HashMap<u64, (usize, usize)> = HashMap::with_capacity(trace.len() / 2 + 1);
    let mut out: Vec<(Datum, Option<usize>)> = Vec::new();
    for (t, &id) in trace.iter().enumerate() {
        match last.get_mut(&id) {
            Some((k, prev)) => {
                // Distinct data whose latest access lies strictly between prev and t.
                let d = (fw.prefix(t.saturating_sub(1)) - fw.prefix(*prev)) as usize;
                let entry = &mut out[*k];
                entry.0.accesses += 1;
                entry.1 = Some(entry.1.map_or(d, |m: usize| m.min(d)));
                fw.add(*prev, -1);
                *prev = t;
            }
            None => {
                last.insert(id, (out.len(), t));
                out.push((
                    Datum {
                        id,
                        accesses: 1,
                        distance: 0,
                    },
                    None,
                ));
            }
        }
        fw.add(t, 1);
    }
    let m = out.len();
    out.into_iter()
        .map(|(mut d, min)| {
            d.distance = min.unwrap_or(m);
            d
        })
        .collect()
}

/// The thread's average reuse distance R_j = Σ r_i / M (Eq. 1) and M; None for an empty stream.
pub fn average_reuse_distance(trace: &[u64]) -> Option<(f64, usize)> {
    let d = reuse_distances(trace);
    if d.is_empty() {
        return None;
    }
    let sum: usize = d.iter().map(|x| x.distance).sum();
    Some((sum as f64 / d.len() as f64, d.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Digest 003's worked example: `a b c b a` → distances a 2, b 1, c 3 (never reused → M),
    /// R = 2.
    #[test]
    fn worked_example() {
        let (a, b, c) = (1, 2, 3);
        let d = reuse_distances(&[a, b, c, b, a]);
        let got: Vec<(u64, usize, usize)> =
            d.iter().map(|x| (x.id, x.distance, x.accesses)).collect();
        assert_eq!(got, vec![(a, 2, 2), (b, 1, 2), (c, 3, 1)]);
        assert_eq!(average_reuse_distance(&[a, b, c, b, a]), Some((2.0, 3)));
        assert_eq!(average_reuse_distance(&[]), None);
    }

    #[test]
    fn minimum_over_reuses_and_immediate_reuse() {
        // x reused after {y, z} (2), then immediately (0): min 0.
        let d = reuse_distances(&[9, 7, 8, 9, 9]);
        assert_eq!(d[0].distance, 0);
        assert_eq!(d[0].accesses, 3);
    }

    /// The tree agrees with the definition counted naively.
    fn naive(trace: &[u64]) -> Vec<(u64, usize)> {
        let mut order: Vec<u64> = Vec::new();
        for &x in trace {
            if !order.contains(&x) {
                order.push(x);
            }
        }
        let m = order.len();
        order
            .iter()
            .map(|&x| {
                let pos: Vec<usize> = (0..trace.len()).filter(|&i| trace[i] == x).collect();
                let best = pos
                    .windows(2)
                    .map(|w| {
                        let mut seen: Vec<u64> = trace[w[0] + 1..w[1]].to_vec();
                        seen.sort();
                        seen.dedup();
                        seen.len()
                    })
                    .min()
                    .unwrap_or(m);
                (x, best)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn matches_the_definition(trace in proptest::collection::vec(0u64..12, 0..80)) {
            let got: Vec<(u64, usize)> = reuse_distances(&trace).iter().map(|d| (d.id, d.distance)).collect();
            prop_assert_eq!(got, naive(&trace));
        }
    }
}
