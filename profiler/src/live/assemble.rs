//! From collected samples and the thread table to a [`Profile`], through the thesis analysis
//! ([`crate::analysis`]).

use super::threads::ThreadTable;
use crate::analysis::{analyze, AnalysisParams, Expiration, ThreadSpec, UnknownThreads};
use crate::error::Result;
use crate::probe::Backend;
use crate::sample::Sample;
use mapper::LoggedSample;
use profile::Profile;

pub struct Meta {
    pub command: Vec<String>,
    pub backend: Backend,
    pub period: u64,
    pub duration_s: f64,
    pub lost: u64,
    pub knobs: Vec<(String, String)>,
    /// Watch backend: time between the starts of two arming windows.
    pub watch_interval_ns: u64,
    pub watch_hold: u32,
    /// Keep at most this many raw samples (time order) for `samples.csv`; 0 keeps none.
    pub sample_log_limit: usize,
    /// When each thread ran, for `cpu.csv` (none in tests that build from samples alone).
    pub cpu: Option<super::cpu::CpuPoll>,
}

/// The first `limit` samples of the stream communication is counted on, with each tid
/// replaced by its creation-order index (samples of unknown threads are skipped), for the
/// methods that need each thread's access order (DagTM's reuse distances).
fn sample_log(table: &ThreadTable, sorted: &[Sample], limit: usize) -> Vec<LoggedSample> {
    sorted
        .iter()
        .filter_map(|s| {
            table.index(s.tid).map(|thread| LoggedSample {
                thread,
                time_ns: s.time_ns,
                addr: s.addr,
            })
        })
        .take(limit)
        .collect()
}

/// The kernel's minimum NUMA-balancing scan period, in ns (1 s when it cannot be read: the
/// kernel's default). Newer kernels keep it in debugfs, older ones in /proc/sys/kernel.
fn numa_scan_period_ns() -> u64 {
    [
        "/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms",
        "/proc/sys/kernel/numa_balancing_scan_period_min_ms",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok())
    .filter(|&ms| (10..=600_000).contains(&ms))
    .unwrap_or(1000)
        * 1_000_000
}

/// Communication from a second analysis with its own parameters (numa-faults, watch): the
/// matrix, its held-out halves (from the same counting, so they add up to it) and the
/// `comm.*` parameters replace the load analysis' own.
fn take_comm(p: &mut Profile, comm: Profile) {
    p.comm = comm.comm;
    p.halves = comm.halves;
    p.lines = comm.lines;
    for (k, v) in comm.meta.params {
        if k.starts_with("comm.") {
            p.meta.params.insert(k, v);
        }
    }
}

/// Build the profile. Page-fault samples feed the load vector and timeline (they are the only
/// samples whose rate follows the memory a thread touches); communication is counted over
/// all samples. Watchpoint hits come in short bursts one `interval` apart, so for them the
/// expiration period is fixed to span the windows during which the same words stay watched
/// (`interval * hold`) instead of ComDetective's per-thread sample interval, which would be
/// microseconds inside a burst and miss partners that ran in the next window.
pub fn build(
    table: &ThreadTable,
    mut fault: Vec<Sample>,
    watch: Vec<Sample>,
    mut hw: Vec<Sample>,
    meta: Meta,
) -> Result<(Profile, Vec<LoggedSample>)> {
    let threads: Vec<ThreadSpec> = table
        .threads()
        .iter()
        .map(|t| ThreadSpec::new(t.tid, t.name.clone()))
        .collect();
    let base = AnalysisParams {
        unknown_threads: UnknownThreads::Ignore,
        ..AnalysisParams::default()
    };
    fault.sort_by_key(|s| s.time_ns);
    let log;
    let mut profile = if meta.backend == Backend::Hw {
        // Precise samples carry load/store and DRAM local/remote: the thesis analysis as is
        // (ComDetective expiration, DRAM-only load vector where DATA_SRC says so).
        hw.sort_by_key(|s| s.time_ns);
        log = sample_log(table, &hw, meta.sample_log_limit);
        analyze(&hw, &threads, &base)?
    } else if watch.is_empty() && meta.backend == Backend::NumaFaults {
        // NUMA hinting faults come once per page per scan of the task's memory (the kernel's
        // numa_balancing scan period, 1 s by default), never twice from one thread inside a
        // sampling interval: communication is counted per page and across a scan period, as
        // the kernel sees it. Per 64 B line and ComDetective's interval they matched almost
        // nothing (6-67 counted communications from ~4 000 faults in the multi-NUMA guest).
        log = sample_log(table, &fault, meta.sample_log_limit);
        let comm_params = AnalysisParams {
            line_size: 4096,
            expiration: Expiration::Fixed {
                ns: numa_scan_period_ns() * 3 / 2,
            },
            ..base.clone()
        };
        let comm = analyze(&fault, &threads, &comm_params)?;
        let mut p = analyze(&fault, &threads, &base)?;
        take_comm(&mut p, comm);
        p
    } else if watch.is_empty() {
        log = sample_log(table, &fault, meta.sample_log_limit);
        analyze(&fault, &threads, &base)?
    } else {
        let mut all = watch;
        all.extend_from_slice(&fault);
        all.sort_by_key(|s| s.time_ns);
        log = sample_log(table, &all, meta.sample_log_limit);
        let comm_params = AnalysisParams {
            expiration: Expiration::Fixed {
                ns: watch_expiration_ns(meta.watch_interval_ns, meta.watch_hold),
            },
            ..base.clone()
        };
        let comm = analyze(&all, &threads, &comm_params)?;
        let mut p = analyze(&fault, &threads, &base)?;
        for (t, c) in p.meta.threads.iter_mut().zip(&comm.meta.threads) {
            t.samples = c.samples;
        }
        p.meta.samples = comm.meta.samples;
        take_comm(&mut p, comm);
        p
    };
    let m = &mut profile.meta;
    m.command = meta.command;
    m.host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cpus = super::events::online_cpus().map(|c| c.len()).unwrap_or(0);
    m.topology = format!("{cpus} online CPUs");
    m.backend = meta.backend.to_string();
    m.sample_period = meta.period;
    m.duration_s = meta.duration_s;
    m.lost_samples = meta.lost;
    if meta.backend != Backend::Hw {
        m.params.insert(
            "load.source".into(),
            "page-fault samples (pages first touched per thread)".into(),
        );
    }
    for (k, v) in meta.knobs {
        m.params.insert(format!("backend.{k}"), v);
    }
    if meta.sample_log_limit > 0 {
        m.params
            .insert("sample_log.limit".into(), meta.sample_log_limit.to_string());
        m.params
            .insert("sample_log.kept".into(), log.len().to_string());
    }
    if let Some(c) = meta.cpu.filter(|c| c.has_data()) {
        // Rows as the matrix has threads (the analysis may add threads known only from samples).
        let t = c.timeline(profile.comm.n(), |tid| table.index(tid));
        m.params
            .insert(profile::cpu::BIN_PARAM.into(), format!("{}", t.bin_ms));
        m.params.insert(
            "cpu.source".into(),
            "/proc/PID/task/TID/schedstat (scheduler run time)".into(),
        );
        m.params.insert("cpu.reads".into(), c.polls().to_string());
        profile.cpu = Some(t);
    }
    profile.update_evidence(1);
    Ok((profile, log))
}

/// The expiration of the watch backend's communication counting (ComDetective's): the watch
/// interval times the windows a word is held. The analysis and the live early-stop tracker
/// must count alike.
pub(super) fn watch_expiration_ns(interval_ns: u64, hold: u32) -> u64 {
    interval_ns * u64::from(hold.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NUMA hinting faults of two threads on one page (different cache lines), 0.5 s apart:
    /// a communication for the page-level counting of numa-faults, none per 64 B line. The
    /// profile's held-out halves must come from the same counting as its matrix.
    #[test]
    fn numa_faults_count_per_page_and_halves_match_the_matrix() {
        let table = ThreadTable::new(100, vec![(100, "a".into()), (101, "b".into())], false);
        let page = 0x7f00_0000_0000u64;
        let mut samples = Vec::new();
        for k in 0..20u64 {
            let t = k * 2_000_000_000;
            samples.push(Sample::address_only(100, t, page + 64));
            samples.push(Sample::address_only(101, t + 500_000_000, page + 1024));
        }
        let meta = Meta {
            command: vec!["x".into()],
            backend: Backend::NumaFaults,
            period: 1,
            duration_s: 40.0,
            lost: 0,
            knobs: Vec::new(),
            watch_interval_ns: 50_000_000,
            watch_hold: 1,
            sample_log_limit: 0,
            cpu: None,
        };
        let (p, _) = build(&table, samples, Vec::new(), Vec::new(), meta).unwrap();
        assert!(p.comm.get(0, 1) > 0.0, "page-level sharing counted");
        let (a, b) = p.halves.as_ref().expect("halves");
        assert_eq!(a.get(0, 1) + b.get(0, 1), p.comm.get(0, 1));
    }
}
