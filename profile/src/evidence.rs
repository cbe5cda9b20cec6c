//! How much a profile knows: the `evidence:` section of `profile.yaml`.
//!
//! A communication matrix from a few dozen watchpoint hits looks like any other matrix; a plan
//! made from it is a guess. [`Evidence`] says how much the matrix rests on (samples and sharing
//! events, overall and per thread, threads with no sharing data at all, pairs observed) and
//! how stable it is: the profiler splits the sharing events into two disjoint halves
//! (`comm.a.csv`, `comm.b.csv`, see `docs/evidence.md`), and the two halves of a profile that
//! knows the program's structure agree with each other. the guard (`cmlb-step`'s `guard`) uses the halves to
//! decide whether a plan may be applied.

use mapper::CommMatrix;
use serde::{Deserialize, Serialize};

/// Per-thread evidence, in creation order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadEvidence {
    pub thread: usize,
    /// All samples attributed to the thread (page faults, watchpoint hits, precise samples).
    pub samples: u64,
    /// Sharing events involving the thread: its row sum of the communication matrix.
    pub sharing_events: f64,
}

/// Overall and per-thread evidence of a profile (`profile.yaml`, `evidence:`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Profiled runs merged into this profile (`cmlb profile --accumulate`).
    pub runs: u32,
    /// Samples of all threads.
    pub samples: u64,
    /// Profiled seconds (summed over merged runs).
    pub seconds: f64,
    /// Sharing events: Σ_{i<j} `A[i][j]` (each communication counted once).
    pub sharing_events: f64,
    pub threads: usize,
    /// Threads whose row of the matrix is all zero: nothing is known about their partners.
    pub threads_without_data: Vec<usize>,
    /// Pairs i < j with `A[i][j]` > 0, out of `pairs_possible` = n(n-1)/2.
    pub pairs_observed: usize,
    pub pairs_possible: usize,
    /// Split-half stability: Pearson correlation of the two halves' pair counts (all pairs
    /// i < j, zeros included), in -1..=1. Near 0: the halves look like independent noise;
    /// near 1: both halves show the same structure. `None` without halves, or when a half has
    /// no sharing event (or every pair has the same count in a half).
    pub stability: Option<f64>,
    /// Threads whose strongest partner is the same in both halves, out of the threads with
    /// sharing data in both halves (`None` without halves).
    pub partner_agreement: Option<(usize, usize)>,
    /// Sampling ended before the command because the evidence was stable (the watch
    /// backend's early stop; the newest run's in an accumulated profile). `None`: sampling
    /// ran until the command ended, `--duration` or a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_stopped: Option<SamplingStop>,
    pub per_thread: Vec<ThreadEvidence>,
}

/// When and on what evidence sampling stopped early (`cmlb profile` without
/// `--no-early-stop`): the figures of the check that ended it, from the sharing seen so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingStop {
    /// Seconds of sampling before the stop.
    pub after_s: f64,
    /// Seconds the evidence had been stable (consecutive checks that passed).
    pub stable_for_s: f64,
    /// Split-half stability at the stop.
    pub stability: f64,
    /// Threads whose strongest partner in each half was at least half as strong as the
    /// strongest in the other half, of the threads with data in both halves (the early stop's
    /// figure: unlike `partner_agreement` it does not count a thread with two equal partners,
    /// a stencil's or a ring's, as disagreeing when the halves pick different ones).
    pub partners_consistent: (usize, usize),
}

impl Evidence {
    /// Evidence of a matrix, its halves (if any) and the per-thread sample counts.
    pub fn compute(
        comm: &CommMatrix,
        halves: Option<&(CommMatrix, CommMatrix)>,
        thread_samples: &[u64],
        seconds: f64,
        runs: u32,
    ) -> Evidence {
        let n = comm.n();
        let row_sums: Vec<f64> = (0..n)
            .map(|i| {
                comm.row(i)
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .map(|(_, v)| v)
                    .sum()
            })
            .collect();
        let mut events = 0.0;
        let mut pairs = 0;
        for i in 0..n {
            for j in (i + 1)..n {
                let v = comm.get(i, j);
                events += v;
                pairs += usize::from(v > 0.0);
            }
        }
        let (stability, partner_agreement) = match halves {
            Some((a, b)) if a.n() == n && b.n() == n => {
                (pearson_upper(a, b), Some(partner_agreement(a, b)))
            }
            _ => (None, None),
        };
        Evidence {
            runs,
            samples: thread_samples.iter().sum(),
            seconds,
            sharing_events: events,
            threads: n,
            threads_without_data: (0..n).filter(|&i| row_sums[i] == 0.0).collect(),
            pairs_observed: pairs,
            pairs_possible: n * n.saturating_sub(1) / 2,
            stability,
            partner_agreement,
            sampling_stopped: None,
            per_thread: (0..n)
                .map(|i| ThreadEvidence {
                    thread: i,
                    samples: thread_samples.get(i).copied().unwrap_or(0),
                    sharing_events: row_sums[i],
                })
                .collect(),
        }
    }

    /// The one line `cmlb profile` prints, e.g.
    /// `evidence: 1 run, 20345 samples (9800/s), 412 sharing events over 45 of 2016 pairs,
    /// 11 of 64 threads without sharing data, split-half stability 0.83 (strongest partner
    /// agrees for 40 of 53 threads)`.
    pub fn summary_line(&self) -> String {
        let rate = if self.seconds > 0.0 {
            format!(" ({:.0}/s)", self.samples as f64 / self.seconds)
        } else {
            String::new()
        };
        let stab = match self.stability {
            Some(s) => format!("split-half stability {s:.2}"),
            None => "split-half stability unknown".to_string(),
        };
        let agree = match self.partner_agreement {
            Some((k, of)) if of > 0 => {
                format!(" (strongest partner agrees for {k} of {of} threads)")
            }
            _ => String::new(),
        };
        let stopped = match &self.sampling_stopped {
            Some(s) => format!(
                "; sampling stopped after {:.1} s, the evidence stable for {:.1} s (split-half \
                 stability {:.2}, partners consistent for {} of {} threads)",
                s.after_s,
                s.stable_for_s,
                s.stability,
                s.partners_consistent.0,
                s.partners_consistent.1
            ),
            None => String::new(),
        };
        format!(
            "evidence: {} run{}, {} samples{rate}, {} sharing events over {} of {} pairs, {} of {} \
             threads without sharing data, {stab}{agree}{stopped}",
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            self.samples,
            fmt_count(self.sharing_events),
            self.pairs_observed,
            self.pairs_possible,
            self.threads_without_data.len(),
            self.threads,
        )
    }
}

/// Counts are integers unless merged runs were scaled down (`--max-runs`).
pub fn fmt_count(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Pearson correlation of the pairs i < j of two matrices of the same size; `None` when
/// either has no variance (empty, or every pair equal) or there is no pair.
pub fn pearson_upper(a: &CommMatrix, b: &CommMatrix) -> Option<f64> {
    let n = a.n().min(b.n());
    let m = (n * n.saturating_sub(1) / 2) as f64;
    if m < 2.0 {
        return None;
    }
    let (mut sa, mut sb, mut saa, mut sbb, mut sab) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for i in 0..n {
        for j in (i + 1)..n {
            let (x, y) = (a.get(i, j), b.get(i, j));
            sa += x;
            sb += y;
            saa += x * x;
            sbb += y * y;
            sab += x * y;
        }
    }
    let va = saa - sa * sa / m;
    let vb = sbb - sb * sb / m;
    // Relative to the scale of the data: a constant matrix has variance ~0 up to rounding.
    if va <= 1e-12 * saa.max(1e-300) || vb <= 1e-12 * sbb.max(1e-300) {
        return None;
    }
    Some(((sab - sa * sb / m) / (va * vb).sqrt()).clamp(-1.0, 1.0))
}

/// The thread's strongest partner (ties: the lowest index), `None` for an empty row.
pub fn strongest_partner(m: &CommMatrix, i: usize) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (j, &v) in m.row(i).iter().enumerate() {
        if j != i && v > 0.0 && best.is_none_or(|(_, b)| v > b) {
            best = Some((j, v));
        }
    }
    best.map(|(j, _)| j)
}

/// (threads whose strongest partner is the same in both, threads with data in both).
pub fn partner_agreement(a: &CommMatrix, b: &CommMatrix) -> (usize, usize) {
    let (mut agree, mut both) = (0, 0);
    for i in 0..a.n() {
        if let (Some(x), Some(y)) = (strongest_partner(a, i), strongest_partner(b, i)) {
            both += 1;
            agree += usize::from(x == y);
        }
    }
    (agree, both)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(n: usize, pairs: &[(usize, usize, f64)]) -> CommMatrix {
        let mut c = CommMatrix::zeros(n);
        for &(i, j, v) in pairs {
            c.add_sym(i, j, v);
        }
        c
    }

    #[test]
    fn counts_threads_pairs_and_events() {
        let c = m(4, &[(0, 1, 3.0), (1, 2, 2.0)]);
        let e = Evidence::compute(&c, None, &[10, 20, 30, 0], 2.0, 1);
        assert_eq!(e.samples, 60);
        assert_eq!(e.sharing_events, 5.0);
        assert_eq!(e.threads_without_data, vec![3]);
        assert_eq!((e.pairs_observed, e.pairs_possible), (2, 6));
        assert_eq!(e.per_thread[1].sharing_events, 5.0);
        assert_eq!(e.per_thread[1].samples, 20);
        assert_eq!((e.stability, e.partner_agreement), (None, None));
        let line = e.summary_line();
        assert_eq!(
            line,
            "evidence: 1 run, 60 samples (30/s), 5 sharing events over 2 of 6 pairs, 1 of 4 \
             threads without sharing data, split-half stability unknown"
        );
    }

    #[test]
    fn halves_that_agree_are_stable_and_noise_is_not() {
        // Two halves of a ring of 6: the same structure.
        let ring: Vec<(usize, usize, f64)> = (0..6).map(|i| (i, (i + 1) % 6, 5.0)).collect();
        let a = m(6, &ring);
        let mut b = m(6, &ring);
        b.add_sym(0, 3, 1.0);
        let full = {
            let mut f = a.clone();
            for i in 0..6 {
                for j in (i + 1)..6 {
                    f.add_sym(i, j, b.get(i, j));
                }
            }
            f
        };
        let e = Evidence::compute(&full, Some(&(a.clone(), b)), &[1; 6], 1.0, 1);
        assert!(e.stability.unwrap() > 0.9, "{:?}", e.stability);
        // Every thread of a ring has two equal partners: ties go to the lowest index in both.
        assert_eq!(e.partner_agreement, Some((6, 6)));
        assert!(e
            .summary_line()
            .contains("strongest partner agrees for 6 of 6"));
        // Disjoint pairs in the two halves: negatively correlated, partners disagree.
        let x = m(4, &[(0, 1, 4.0), (2, 3, 4.0)]);
        let y = m(4, &[(0, 2, 4.0), (1, 3, 4.0)]);
        let e = Evidence::compute(&x, Some(&(x.clone(), y)), &[1; 4], 1.0, 1);
        assert!(e.stability.unwrap() < 0.0, "{:?}", e.stability);
        assert_eq!(e.partner_agreement, Some((0, 4)));
        // An empty half: no stability figure.
        let e = Evidence::compute(&x, Some(&(x.clone(), m(4, &[]))), &[1; 4], 1.0, 1);
        assert_eq!(e.stability, None);
        assert_eq!(e.partner_agreement, Some((0, 0)));
    }
}
