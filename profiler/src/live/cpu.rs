//! When each thread ran, for `cpu.csv` ([`profile::cpu`]): the scheduler's run time of
//! every thread of the profiled processes, read from `/proc/PID/task/TID/schedstat` once per
//! bin. Backend-independent and PMU-free; a thread that exits between two reads loses at most
//! one bin of CPU time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Bin width of the CPU timeline. Short enough to see threads that run in waves (bwa's batches
/// last hundreds of ms), long enough that a 64-thread program costs ~3 200 small reads a second.
pub const BIN: Duration = Duration::from_millis(20);

/// Most bins kept in `cpu.csv`: a longer run's bins are merged (2, 3, ... at a time) so the file
/// stays below ~6 MB for 128 threads however long the profile ran (6 000 bins = 2 min at 20 ms;
/// the guard reads 100 ms bins anyway).
pub const MAX_BINS: usize = 6000;

pub(super) struct CpuPoll {
    start: Instant,
    next: Instant,
    /// Last run time read per tid, in ns.
    seen: HashMap<i32, u64>,
    /// CPU ms per bin, per tid.
    bins: HashMap<i32, Vec<f64>>,
    polls: u64,
}

impl CpuPoll {
    pub fn new(start: Instant) -> Self {
        CpuPoll {
            start,
            next: start,
            seen: HashMap::new(),
            bins: HashMap::new(),
            polls: 0,
        }
    }

    /// Read the run time of every thread of `pids` if a bin has passed since the last read.
    /// The first read is the baseline (CPU time before profiling began is not counted).
    pub fn poll(&mut self, now: Instant, pids: impl IntoIterator<Item = i32>) {
        if now < self.next {
            return;
        }
        self.next = now + BIN;
        let first = self.polls == 0;
        self.polls += 1;
        // The CPU time read now accrued since the last read, about one bin ago.
        let bin = (now.saturating_duration_since(self.start).as_nanos() / BIN.as_nanos())
            .saturating_sub(1) as usize;
        for pid in pids {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for e in tasks.flatten() {
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                    continue;
                };
                let Some(ns) = run_ns(pid, tid) else { continue };
                let prev = self.seen.insert(tid, ns);
                let delta = match prev {
                    Some(p) => ns.saturating_sub(p),
                    None if first => 0,
                    // Born since the last read: all its run time is new.
                    None => ns,
                };
                if delta > 0 {
                    let row = self.bins.entry(tid).or_default();
                    if row.len() <= bin {
                        row.resize(bin + 1, 0.0);
                    }
                    row[bin] += delta as f64 / 1e6;
                }
            }
        }
    }

    /// CPU ms per bin of each thread, by creation-order index (`index_of` maps a tid; threads
    /// it does not know are dropped), `n` rows of equal length.
    pub fn timeline(
        &self,
        n: usize,
        index_of: impl Fn(i32) -> Option<usize>,
    ) -> profile::cpu::CpuTimeline {
        let len = self.bins.values().map(Vec::len).max().unwrap_or(0);
        let mut ms = vec![vec![0.0; len]; n];
        for (&tid, row) in &self.bins {
            if let Some(i) = index_of(tid).filter(|&i| i < n) {
                for (b, v) in row.iter().enumerate() {
                    ms[i][b] += v;
                }
            }
        }
        let t = profile::cpu::CpuTimeline {
            bin_ms: BIN.as_secs_f64() * 1e3,
            ms,
        };
        if len > MAX_BINS {
            t.coarsened(t.bin_ms * len.div_ceil(MAX_BINS) as f64)
        } else {
            t
        }
    }

    /// Reads that found the process (0: it never could be read, e.g. another user's).
    pub fn polls(&self) -> u64 {
        self.polls
    }

    pub fn has_data(&self) -> bool {
        !self.bins.is_empty()
    }
}

/// The thread's run time in ns: the first field of its schedstat.
fn run_ns(pid: i32, tid: i32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own threads: a spinning thread gets CPU time in its bins, the baseline
    /// taken at the first read is not counted.
    #[test]
    fn a_spinning_thread_shows_its_cpu_time() {
        let pid = std::process::id() as i32;
        let start = Instant::now();
        let mut poll = CpuPoll::new(start);
        poll.poll(start, [pid]);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let mut x = 0u64;
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                x = x.wrapping_add(1);
                std::hint::black_box(x);
            }
        });
        let tid = rx.recv().unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
            poll.poll(Instant::now(), [pid]);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap();
        assert!(poll.has_data() && poll.polls() > 5);
        let t = poll.timeline(1, |t| (t == tid).then_some(0));
        let total: f64 = t.totals()[0];
        // It spun for ~300 ms; on a busy 2-CPU test machine it gets at least a third of that.
        assert!(total > 50.0 && total < 400.0, "spinner got {total} ms");
        assert_eq!(t.bin_ms, 20.0);
    }

    /// A long run's timeline is merged down to at most MAX_BINS bins, CPU time kept.
    #[test]
    fn a_long_run_keeps_a_bounded_timeline() {
        let mut poll = CpuPoll::new(Instant::now());
        let n = 2 * MAX_BINS + 5;
        poll.bins
            .insert(7, (0..n).map(|b| (b % 3) as f64).collect());
        let t = poll.timeline(1, |tid| (tid == 7).then_some(0));
        assert!(t.ms[0].len() <= MAX_BINS, "{} bins", t.ms[0].len());
        assert_eq!(t.bin_ms, 60.0);
        let total: f64 = (0..n).map(|b| (b % 3) as f64).sum();
        assert!((t.totals()[0] - total).abs() < 1e-6);
    }
}
