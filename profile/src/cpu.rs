//! When each thread ran: `cpu.csv`, the CPU time of every thread per time bin of the profiled
//! run, and what it says about a plan that pins threads.
//!
//! Sharing data alone cannot tell a plan that keeps partners together from one that stacks
//! threads running at the same time on one PU. On a 2-PU VM, bwa's worker threads share a
//! little, and a plan that put all of them on PU 0 was kept on its sharing (hop-bytes 0.01x
//! compact) and ran 1.93x slower than unpinned: the workers took turns on one PU while the
//! other idled. The CPU timeline lets the guard see that before the plan is applied
//! ([`CpuTimeline::crowding`]).
//!
//! Format: `n` rows (thread i in creation order, like `comm.csv`), one column per bin, each
//! value the milliseconds of CPU time (user + system) the thread got in that bin; the bin
//! width is `cpu.bin_ms` in `profile.yaml`'s params. The profiler reads it from
//! `/proc/PID/task/TID/schedstat` (the scheduler's own run time, in ns), so it works with
//! every backend and needs no PMU.

use mapper::{MapError, Result};
use std::path::Path;

/// File name of the CPU timeline in a profile directory.
pub const CPU_FILE: &str = "cpu.csv";
/// The `profile.yaml` parameter holding the bin width in ms.
pub const BIN_PARAM: &str = "cpu.bin_ms";

/// CPU time per thread per time bin.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuTimeline {
    /// Width of one bin, in ms.
    pub bin_ms: f64,
    /// `ms[thread][bin]`: CPU time the thread got in the bin, in ms. Rows have equal length.
    pub ms: Vec<Vec<f64>>,
}

impl CpuTimeline {
    /// Threads (rows).
    pub fn n(&self) -> usize {
        self.ms.len()
    }

    fn bins(&self) -> usize {
        self.ms.first().map_or(0, Vec::len)
    }

    /// The same timeline with bins merged `k` at a time, `k` the least that makes them at
    /// least `min_bin_ms` wide (the last bin may hold fewer).
    pub fn coarsened(&self, min_bin_ms: f64) -> CpuTimeline {
        let k = (min_bin_ms / self.bin_ms).ceil().max(1.0) as usize;
        CpuTimeline {
            bin_ms: self.bin_ms * k as f64,
            ms: self
                .ms
                .iter()
                .map(|r| r.chunks(k).map(|c| c.iter().sum()).collect())
                .collect(),
        }
    }

    /// Total CPU time of each thread, in ms.
    pub fn totals(&self) -> Vec<f64> {
        self.ms.iter().map(|r| r.iter().sum()).collect()
    }

    /// An estimate of the run time of the profiled work, in ms, when thread `t` may only run
    /// on PU `pus[t]` (an index among `n_pus` PUs): in each bin a PU serves its threads one
    /// after another, so the bin lasts as long as its busiest PU's demand (and at least its
    /// own width, the demand having been measured in it). `None` pins nothing: each bin then
    /// lasts as long as its total demand spread over all PUs, or its busiest thread, whichever
    /// is longer (what the kernel's load balancing approaches).
    pub fn span(&self, pus: Option<&[usize]>, n_pus: usize) -> f64 {
        let n_pus = n_pus.max(1);
        let mut per_pu = vec![0.0; n_pus];
        let mut total = 0.0;
        for b in 0..self.bins() {
            let demand = match pus {
                Some(pus) => {
                    per_pu.iter_mut().for_each(|v| *v = 0.0);
                    for (t, row) in self.ms.iter().enumerate() {
                        if let Some(&p) = pus.get(t) {
                            per_pu[p.min(n_pus - 1)] += row[b];
                        }
                    }
                    per_pu.iter().copied().fold(0.0, f64::max)
                }
                None => {
                    let sum: f64 = self.ms.iter().map(|r| r[b]).sum();
                    let max = self.ms.iter().map(|r| r[b]).fold(0.0, f64::max);
                    (sum / n_pus as f64).max(max)
                }
            };
            // A bin in which nothing ran (the program waited on I/O) lasts its width either
            // way; counting it keeps the ratio honest for programs that mostly wait.
            total += demand.max(self.bin_ms);
        }
        total
    }

    /// How much longer the work would take pinned as `pus` says than left to the kernel:
    /// [`span`](Self::span) pinned over unpinned (1.0 = no crowding; 2.0 = threads that ran
    /// side by side take turns on half the PUs). 1.0 for an empty timeline.
    pub fn crowding(&self, pus: &[usize], n_pus: usize) -> f64 {
        let free = self.span(None, n_pus);
        if free <= 0.0 {
            return 1.0;
        }
        self.span(Some(pus), n_pus) / free
    }

    /// Read `cpu.csv` for a profile of `n` threads with bins of `bin_ms`.
    pub fn read(path: &Path, n: usize, bin_ms: f64) -> Result<CpuTimeline> {
        let text = std::fs::read_to_string(path).map_err(|e| MapError::io(path, e))?;
        let what = path.display().to_string();
        let rows = mapper::parse_numeric_csv(&what, &text)?;
        if rows.len() != n {
            return Err(MapError::input(
                &what,
                format!("has {} rows but the profile has {n} threads", rows.len()),
            ));
        }
        if let Some((i, r)) = rows
            .iter()
            .enumerate()
            .find(|(_, r)| r.len() != rows[0].len())
        {
            return Err(MapError::input(
                &what,
                format!(
                    "row {} has {} bins but row 1 has {} (every thread has every bin)",
                    i + 1,
                    r.len(),
                    rows[0].len()
                ),
            ));
        }
        if !(bin_ms.is_finite() && bin_ms > 0.0) {
            return Err(MapError::input(
                &what,
                format!("bin width {BIN_PARAM} = {bin_ms} must be a positive number of ms"),
            ));
        }
        Ok(CpuTimeline { bin_ms, ms: rows })
    }

    /// `cpu.csv`'s text.
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        for row in &self.ms {
            let cells: Vec<String> = row.iter().map(|v| format!("{v:.3}")).collect();
            s.push_str(&cells.join(","));
            s.push('\n');
        }
        s
    }
}

/// The bin width recorded in a profile's params, if it has a CPU timeline.
pub fn bin_ms(params: &std::collections::BTreeMap<String, String>) -> Option<f64> {
    params.get(BIN_PARAM).and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four threads busy all the time, two PUs: any two per PU is what the kernel gives them.
    #[test]
    fn two_per_pu_of_always_busy_threads_is_not_crowding() {
        let t = CpuTimeline {
            bin_ms: 20.0,
            ms: vec![vec![10.0; 50]; 4],
        };
        assert!((t.crowding(&[0, 0, 1, 1], 2) - 1.0).abs() < 1e-9);
        assert!((t.crowding(&[0, 1, 0, 1], 2) - 1.0).abs() < 1e-9);
        // Three on one PU: that PU's bins take 30 ms of work, not 20.
        assert!((t.crowding(&[0, 0, 0, 1], 2) - 1.5).abs() < 1e-9);
    }

    /// bwa's shape: two waves of workers, each wave running side by side on both PUs. A plan
    /// that pins one wave to one PU makes its workers take turns.
    #[test]
    fn a_wave_of_workers_on_one_pu_is_crowding() {
        let wave = |first: bool| -> Vec<f64> {
            (0..100)
                .map(|b| if (b < 50) == first { 20.0 } else { 0.0 })
                .collect()
        };
        let ms = vec![wave(true), wave(true), wave(false), wave(false)];
        let t = CpuTimeline { bin_ms: 20.0, ms };
        // Waves together on one PU each: double time.
        assert!((t.crowding(&[0, 0, 1, 1], 2) - 2.0).abs() < 1e-9);
        // One of each wave per PU: no crowding.
        assert!((t.crowding(&[0, 1, 0, 1], 2) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn coarsening_merges_bins() {
        let t = CpuTimeline {
            bin_ms: 20.0,
            ms: vec![vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]],
        };
        let c = t.coarsened(50.0);
        assert_eq!(c.bin_ms, 60.0);
        assert_eq!(c.ms, vec![vec![6.0, 15.0]]);
        assert_eq!(t.coarsened(10.0), t);
    }

    #[test]
    fn idle_bins_count_their_width() {
        let t = CpuTimeline {
            bin_ms: 10.0,
            ms: vec![vec![0.0, 0.0, 10.0], vec![0.0, 0.0, 10.0]],
        };
        // Unpinned: 10 + 10 + 10; both on one PU: 10 + 10 + 20.
        assert!((t.span(None, 2) - 30.0).abs() < 1e-9);
        assert!((t.crowding(&[0, 0], 2) - 40.0 / 30.0).abs() < 1e-9);
    }

    #[test]
    fn read_checks_shape_and_width() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(CPU_FILE);
        std::fs::write(&p, "1,2\n3,4\n").unwrap();
        let t = CpuTimeline::read(&p, 2, 20.0).unwrap();
        assert_eq!(t.totals(), vec![3.0, 7.0]);
        assert_eq!(CpuTimeline::read(&p, 2, 20.0).unwrap().to_csv(), t.to_csv());
        let e = CpuTimeline::read(&p, 3, 20.0).unwrap_err().to_string();
        assert!(e.contains("2 rows") && e.contains("3 threads"), "{e}");
        std::fs::write(&p, "1,2\n3\n").unwrap();
        let e = CpuTimeline::read(&p, 2, 20.0).unwrap_err().to_string();
        assert!(e.contains("row 2 has 1 bins"), "{e}");
        std::fs::write(&p, "1,2\n3,4\n").unwrap();
        let e = CpuTimeline::read(&p, 2, 0.0).unwrap_err().to_string();
        assert!(e.contains(BIN_PARAM), "{e}");
    }
}
