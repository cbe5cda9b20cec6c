//! Accumulating profiles: repeated profiled runs of the same command merge into one profile
//! (`cmlb profile --accumulate`), so the evidence grows with every run instead of being
//! replaced by the next thin one.
//!
//! What is merged: the communication matrix, its halves and their line counts are summed (they
//! count events and lines), the per-thread sample counts and the profiled time are summed, the
//! load vector is averaged over the runs (each run's vector has the scale of that run's length;
//! the mapping only uses its proportions). The timeline, CPU timeline, phases and parameters
//! are the newest run's.
//!
//! A bound on the kept runs (`max_runs`) keeps the profile following the program: once that
//! many runs are in, the accumulated counts are scaled by `(max_runs - 1) / runs` before the
//! new run is added, so the profile weighs about the last `max_runs` runs (a sliding
//! average without storing each run).

use super::Profile;
use mapper::CommMatrix;
use mapper::{MapError, Result};

/// Default bound on the runs a profile accumulates.
pub const DEFAULT_MAX_RUNS: u32 = 8;

/// Why an existing profile cannot take a new run (the caller then replaces it and says so).
pub fn mismatch(old: &Profile, new: &Profile) -> Option<String> {
    if old.meta.command != new.meta.command {
        return Some(format!(
            "it was made from another command ({})",
            old.meta.command.join(" ")
        ));
    }
    if old.comm.n() != new.comm.n() {
        return Some(format!(
            "it has {} threads and this run {}",
            old.comm.n(),
            new.comm.n()
        ));
    }
    if old.meta.backend != new.meta.backend {
        return Some(format!(
            "it was profiled with the {} backend, this run with {}",
            old.meta.backend, new.meta.backend
        ));
    }
    None
}

fn scaled_sum(old: &CommMatrix, f: f64, new: &CommMatrix) -> CommMatrix {
    let n = new.n();
    let mut m = CommMatrix::zeros(n);
    for i in 0..n {
        for j in i..n {
            m.add_sym(i, j, old.get(i, j) * f + new.get(i, j));
        }
    }
    m
}

impl Profile {
    /// Merge `new` (one run, the newest) into `self` (an accumulated profile), keeping the
    /// weight of at most `max_runs` runs. Fails (and changes nothing) when the two cannot be
    /// merged ([`mismatch`]) or `max_runs` is 0.
    pub fn merge_run(&mut self, new: &Profile, max_runs: u32) -> Result<()> {
        if max_runs == 0 {
            return Err(MapError::input("max runs", "must be at least 1"));
        }
        if let Some(why) = mismatch(self, new) {
            return Err(MapError::input("accumulated profile", why));
        }
        let runs = self.runs();
        // Runs of the old profile that keep their weight.
        let kept = runs.min(max_runs - 1);
        let f = f64::from(kept) / f64::from(runs);
        let comm = scaled_sum(&self.comm, f, &new.comm);
        // Halves only when both sides have them: a sum of halves with a matrix that has none
        // would not add up to the merged matrix.
        let halves = match (&self.halves, &new.halves) {
            (Some((oa, ob)), Some((na, nb))) => {
                Some((scaled_sum(oa, f, na), scaled_sum(ob, f, nb)))
            }
            _ => None,
        };
        let lines = match (&halves, &self.lines, &new.lines) {
            (Some(_), Some((oa, ob)), Some((na, nb))) => {
                Some((scaled_sum(oa, f, na), scaled_sum(ob, f, nb)))
            }
            _ => None,
        };
        let w = f64::from(kept);
        let load: Vec<f64> = self
            .load
            .iter()
            .zip(&new.load)
            .map(|(o, n)| (o * w + n) / (w + 1.0))
            .collect();
        let mut meta = new.meta.clone();
        for (t, o) in meta.threads.iter_mut().zip(&self.meta.threads) {
            t.samples += (o.samples as f64 * f).round() as u64;
            t.load_samples += (o.load_samples as f64 * f).round() as u64;
        }
        meta.samples += (self.meta.samples as f64 * f).round() as u64;
        meta.lost_samples += (self.meta.lost_samples as f64 * f).round() as u64;
        meta.duration_s += self.meta.duration_s * f;
        meta.params
            .insert("accumulate.max_runs".into(), max_runs.to_string());
        self.meta = meta;
        self.comm = comm;
        self.halves = halves;
        self.lines = lines;
        self.load = load;
        self.timeline = new.timeline.clone();
        self.cpu = new.cpu.clone();
        self.update_evidence(kept + 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ProfileMeta, ThreadInfo};

    fn run(pairs: &[(usize, usize, f64)], load: f64) -> Profile {
        let n = 3;
        let mut comm = CommMatrix::zeros(n);
        let (mut a, mut b) = (CommMatrix::zeros(n), CommMatrix::zeros(n));
        for (k, &(i, j, v)) in pairs.iter().enumerate() {
            comm.add_sym(i, j, v);
            if k % 2 == 0 { &mut a } else { &mut b }.add_sym(i, j, v);
        }
        // One line per listed pair.
        let mut lines = (CommMatrix::zeros(n), CommMatrix::zeros(n));
        for i in 0..n {
            for j in (i + 1)..n {
                lines
                    .0
                    .add_sym(i, j, f64::from(u8::from(a.get(i, j) > 0.0)));
                lines
                    .1
                    .add_sym(i, j, f64::from(u8::from(b.get(i, j) > 0.0)));
            }
        }
        let mut p = Profile {
            meta: ProfileMeta {
                duration_s: 1.0,
                ..ProfileMeta::new(&["./app"], "watch", n, ThreadInfo::new(100, "app", 10, 5))
            },
            comm,
            load: vec![load; n],
            timeline: Vec::new(),
            halves: Some((a, b)),
            lines: Some(lines),
            cpu: None,
        };
        p.update_evidence(1);
        p
    }

    #[test]
    fn runs_add_up_and_the_evidence_grows() {
        let mut acc = run(&[(0, 1, 2.0), (1, 2, 4.0)], 10.0);
        acc.merge_run(&run(&[(0, 1, 1.0), (0, 2, 3.0)], 20.0), 8)
            .unwrap();
        assert_eq!(acc.comm.get(0, 1), 3.0);
        assert_eq!(acc.comm.get(0, 2), 3.0);
        assert_eq!(acc.comm.get(1, 2), 4.0);
        let (a, b) = acc.halves.as_ref().unwrap();
        for (i, j) in [(0, 1), (0, 2), (1, 2)] {
            assert_eq!(a.get(i, j) + b.get(i, j), acc.comm.get(i, j));
        }
        // Lines add up like the halves: (0, 1) was seen on a line in each run.
        let (la, lb) = acc.lines.as_ref().unwrap();
        assert_eq!(la.get(0, 1) + lb.get(0, 1), 2.0);
        assert_eq!(la.get(1, 2) + lb.get(1, 2), 1.0);
        assert_eq!(acc.load, vec![15.0; 3]);
        assert_eq!(acc.meta.threads[0].samples, 20);
        assert_eq!(acc.meta.samples, 60);
        assert_eq!(acc.meta.duration_s, 2.0);
        let e = acc.meta.evidence.as_ref().unwrap();
        assert_eq!(e.runs, 2);
        assert_eq!(e.sharing_events, 10.0);
        assert_eq!(e.pairs_observed, 3);
    }

    #[test]
    fn the_bound_keeps_the_weight_of_the_last_runs() {
        let mut acc = run(&[(0, 1, 8.0)], 1.0);
        for _ in 0..20 {
            acc.merge_run(&run(&[(0, 1, 8.0)], 1.0), 4).unwrap();
        }
        // A steady program: the weight of 4 runs, never more.
        assert_eq!(acc.runs(), 4);
        assert!(
            (acc.comm.get(0, 1) - 32.0).abs() < 1e-9,
            "{}",
            acc.comm.get(0, 1)
        );
        // max_runs = 1: every run replaces the last.
        acc.merge_run(&run(&[(1, 2, 5.0)], 1.0), 1).unwrap();
        assert_eq!((acc.comm.get(0, 1), acc.comm.get(1, 2)), (0.0, 5.0));
        assert_eq!(acc.runs(), 1);
    }

    #[test]
    fn another_command_or_thread_count_is_refused_unchanged() {
        let mut acc = run(&[(0, 1, 2.0)], 1.0);
        let before = acc.clone();
        let mut other = run(&[(0, 1, 2.0)], 1.0);
        other.meta.command = vec!["./other".into()];
        let e = acc.merge_run(&other, 8).unwrap_err().to_string();
        assert!(e.contains("another command (./app)"), "{e}");
        assert_eq!(acc, before);
        assert!(acc.merge_run(&run(&[], 1.0), 0).is_err());
    }
}
