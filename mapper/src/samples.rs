//! `profile/samples.csv`: an optional, bounded log of raw samples for methods that need the
//! access order of each thread rather than the aggregated matrices (DagTM's reuse-distance
//! analysis, digest 003).
//!
//! ```text
//! tid_index,time_ns,addr
//! 0,1200,0x7f3a10c040
//! 1,1250,140737488355328
//! ```
//! `tid_index` is the thread's creation-order index (row of `comm.csv`), `time_ns` any
//! monotonic time, `addr` the data address in decimal or `0x` hex. Rows need not be sorted:
//! each thread's accesses are ordered by time (ties keep file order). The profiler writes it
//! when asked to keep a sample log; [`write_samples_csv`] is the writer both sides share.

use crate::error::{MapError, Result};
use std::path::Path;

/// File name inside a profile directory.
pub const SAMPLES_FILE: &str = "samples.csv";

/// The header line of `samples.csv`.
pub const SAMPLES_HEADER: &str = "tid_index,time_ns,addr";

/// One sampled access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedSample {
    pub thread: usize,
    pub time_ns: u64,
    pub addr: u64,
}

/// Per thread (creation order), its sampled data addresses in time order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleLog {
    pub threads: Vec<Vec<u64>>,
}

impl SampleLog {
    /// Group samples by thread and order each thread's accesses by time (stable).
    pub fn from_samples(mut samples: Vec<LoggedSample>) -> SampleLog {
        samples.sort_by_key(|s| (s.thread, s.time_ns));
        let n = samples.iter().map(|s| s.thread + 1).max().unwrap_or(0);
        let mut threads = vec![Vec::new(); n];
        for s in samples {
            threads[s.thread].push(s.addr);
        }
        SampleLog { threads }
    }

    /// Total samples.
    pub fn len(&self) -> usize {
        self.threads.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn parse_addr(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Largest thread count a `samples.csv` may describe: thread indices are dense from 0, so one
/// corrupt index (e.g. 7777777777777772) would otherwise make [`SampleLog::from_samples`] ask for
/// a vector that long and abort the process (in slurmstepd, too) instead of returning an error.
pub const MAX_SAMPLE_THREADS: usize = 1 << 16;

/// Read `samples.csv`. Errors name the file and line.
pub fn read_samples_csv(path: &Path) -> Result<SampleLog> {
    let text = std::fs::read_to_string(path).map_err(|e| MapError::io(path, e))?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, h)) if h.trim().replace(' ', "") == SAMPLES_HEADER => {}
        Some((i, h)) => {
            return Err(MapError::parse(
                path,
                format!(
                    "line {}: expected the header '{SAMPLES_HEADER}', found '{}'",
                    i + 1,
                    h.trim()
                ),
            ))
        }
        None => return Err(MapError::parse(path, "empty file (no header)")),
    }
    let mut samples = Vec::new();
    for (i, line) in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let bad = |what: &str| MapError::parse(path, format!("line {}: {what}", i + 1));
        if f.len() != 3 {
            return Err(bad(&format!("expected 3 fields, found {}", f.len())));
        }
        let thread = f[0]
            .parse()
            .map_err(|_| bad(&format!("tid_index '{}' is not a thread index", f[0])))?;
        if thread >= MAX_SAMPLE_THREADS {
            return Err(bad(&format!(
                "tid_index {thread} is too large (at most {} threads)",
                MAX_SAMPLE_THREADS
            )));
        }
        let time_ns = f[1]
            .parse()
            .map_err(|_| bad(&format!("time_ns '{}' is not a non-negative integer", f[1])))?;
        let addr = parse_addr(f[2])
            .ok_or_else(|| bad(&format!("addr '{}' is not a decimal or 0x address", f[2])))?;
        samples.push(LoggedSample {
            thread,
            time_ns,
            addr,
        });
    }
    Ok(SampleLog::from_samples(samples))
}

/// Write `samples.csv` atomically (temp file + rename), addresses in hex.
pub fn write_samples_csv(path: &Path, samples: &[LoggedSample]) -> Result<()> {
    let mut s = String::with_capacity(24 * samples.len() + 32);
    s.push_str(SAMPLES_HEADER);
    s.push('\n');
    for x in samples {
        s.push_str(&format!("{},{},{:#x}\n", x.thread, x.time_ns, x.addr));
    }
    crate::output::write_atomic(path, s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_order_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(SAMPLES_FILE);
        let s = |thread, time_ns, addr| LoggedSample {
            thread,
            time_ns,
            addr,
        };
        write_samples_csv(
            &p,
            &[s(1, 30, 0x40), s(0, 20, 7), s(1, 10, 0x80), s(1, 30, 9)],
        )
        .unwrap();
        let log = read_samples_csv(&p).unwrap();
        assert_eq!(log.threads, vec![vec![7], vec![0x80, 0x40, 9]]);
        std::fs::write(&p, "tid_index,time_ns,addr\n0,1,12\n0,0,0x10\n").unwrap();
        assert_eq!(read_samples_csv(&p).unwrap().threads, vec![vec![16, 12]]);
    }

    /// Found by the `samples_csv` fuzz target (fuzz/artifacts/samples_csv/crash-501d6401...):
    /// a huge tid_index aborted the process with a failed allocation instead of an error.
    #[test]
    fn fuzz_regression_huge_tid_index_is_an_error_not_an_abort() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(SAMPLES_FILE);
        std::fs::write(
            &p,
            b"tid_index,time_ns,addr\n7777777777777772,10,0x7f0006\n",
        )
        .unwrap();
        let e = read_samples_csv(&p).unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains("line 2"),
            "{e}"
        );
        assert!(e.contains("tid_index 7777777777777772 is too large"), "{e}");
        let last = MAX_SAMPLE_THREADS - 1;
        std::fs::write(&p, format!("tid_index,time_ns,addr\n{last},1,2\n")).unwrap();
        assert_eq!(
            read_samples_csv(&p).unwrap().threads.len(),
            MAX_SAMPLE_THREADS
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("samples.csv");
        for (text, want) in [
            ("", "empty file"),
            ("tid,time,addr\n", "line 1: expected the header"),
            ("tid_index,time_ns,addr\n0,1\n", "line 2: expected 3 fields"),
            (
                "tid_index,time_ns,addr\n0,1,2\n-1,1,2\n",
                "line 3: tid_index '-1'",
            ),
            ("tid_index,time_ns,addr\n0,x,2\n", "line 2: time_ns 'x'"),
            ("tid_index,time_ns,addr\n0,1,0xzz\n", "line 2: addr '0xzz'"),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = read_samples_csv(&p).unwrap_err().to_string();
            assert!(e.contains("samples.csv") && e.contains(want), "{e}");
        }
        let e = read_samples_csv(&dir.path().join("nope.csv"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope.csv"), "{e}");
    }
}
