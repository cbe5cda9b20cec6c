//! The analysis of thesis section 3.2: one pass over the sample stream builds the
//! communication matrix (Algorithm 3-1, [`comm`]) and the per-timeslice, per-thread load
//! counts; [`Analyzer::finish`] then smooths the series, splits it into phases and computes the
//! load vector ([`load`]).
//!
//! ```no_run
//! use profiler::analysis::{analyze, AnalysisParams, ThreadSpec};
//! # let samples: Vec<profiler::Sample> = Vec::new();
//! let threads = vec![ThreadSpec::new(4242, "main"), ThreadSpec::new(4243, "worker")];
//! let profile = analyze(samples, &threads, &AnalysisParams::default()).unwrap();
//! ```
//!
//! Samples should arrive in time order (as the backends merge them); the analysis is streaming
//! and keeps no per-sample state beyond the bounded communication table.

pub mod comm;
pub mod load;

use crate::error::{ProfileError, Result};
use crate::sample::Sample;
pub use comm::{CommDetector, CommStats, Expiration};
use mapper::LoggedSample;
use profile::{Phase, Profile, ProfileMeta, ThreadInfo, TimelineRow, PROFILE_SCHEMA};
use std::collections::{BTreeMap, HashMap};

/// Which samples feed the load vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadFilter {
    /// DRAM-only if any sample says where it was served from (`dram.is_some()`), else all.
    Auto,
    /// Only samples with `dram == Some(true)`.
    DramOnly,
    /// Every sample.
    All,
}

/// What to do with a sample whose tid is not in the thread list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownThreads {
    /// Add the thread after the known ones, in order of first appearance.
    Append,
    /// Drop the sample (counted in the `samples_unknown_tid` param).
    Ignore,
}

/// Analysis parameters. The defaults are the thesis's where it gives one.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisParams {
    /// Bytes per cache line, a power of two. Thesis 3.2.1: cache-line granularity; 64 B is the
    /// line size of the Intel Xeons it used (and of current x86 and most Arm cores).
    pub line_size: u64,
    /// Expiration period of table entries; see [`Expiration::DEFAULT`].
    pub expiration: Expiration,
    /// Maximum number of entries in the communication table (bounded memory; thesis: "purge
    /// expired entries when the table is full"). Default 1 Mi entries (~100 MB worst case).
    pub table_capacity: usize,
    /// Timeslice width in ns. Thesis 3.2.2: 1 ms.
    pub timeslice_ns: u64,
    /// Fraction of slices treated as outliers by the smoothing. Thesis 3.2.2 (after Rocka): 5 %.
    pub outlier_fraction: f64,
    /// Fraction of the lowest slices whose mean is the low value. Algorithm 3-2: 5 %.
    pub low_fraction: f64,
    /// Minimum phase width in slices. Algorithm 3-2: 100.
    pub min_phase_width: usize,
    pub load_filter: LoadFilter,
    pub unknown_threads: UnknownThreads,
    /// Start of the run (ns, same clock as the samples); default: the first sample's time.
    /// Earlier samples are put into the first slice.
    pub origin_ns: Option<u64>,
    /// Samples further than this from the origin are rejected as corrupt (default 7 days),
    /// because the timeslice series would need one entry per millisecond up to them.
    pub max_span_ns: u64,
    /// Keep up to this many raw samples `(thread index, time, addr)` for `profile/samples.csv`
    /// (methods that need each thread's access order, e.g. `dagtm`); 0 = none. The first
    /// samples are kept, later ones are counted in `sample_log.dropped`.
    pub sample_log_limit: usize,
}

impl Default for AnalysisParams {
    fn default() -> Self {
        AnalysisParams {
            line_size: 64,
            expiration: Expiration::DEFAULT,
            table_capacity: 1 << 20,
            timeslice_ns: 1_000_000,
            outlier_fraction: 0.05,
            low_fraction: 0.05,
            min_phase_width: 100,
            load_filter: LoadFilter::Auto,
            unknown_threads: UnknownThreads::Append,
            origin_ns: None,
            max_span_ns: 7 * 24 * 3600 * 1_000_000_000,
            sample_log_limit: 0,
        }
    }
}

impl AnalysisParams {
    pub fn validate(&self) -> Result<()> {
        if self.line_size == 0 || !self.line_size.is_power_of_two() {
            return Err(ProfileError::param(
                "line_size",
                format!("{} is not a power of two", self.line_size),
            ));
        }
        if self.timeslice_ns == 0 {
            return Err(ProfileError::param("timeslice_ns", "must be > 0"));
        }
        for (name, v) in [
            ("outlier_fraction", self.outlier_fraction),
            ("low_fraction", self.low_fraction),
        ] {
            if !(0.0..1.0).contains(&v) {
                return Err(ProfileError::param(name, format!("{v} is not in [0, 1)")));
            }
        }
        if self.table_capacity < 8 {
            return Err(ProfileError::param(
                "table_capacity",
                format!("{} is too small (at least 8 entries)", self.table_capacity),
            ));
        }
        if let Expiration::Fixed { ns: 0 } = self.expiration {
            return Err(ProfileError::param(
                "expiration",
                "a fixed expiration of 0 ns never counts a communication",
            ));
        }
        Ok(())
    }
}

/// A thread known before (or while) sampling, in creation order (main thread first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSpec {
    pub tid: i32,
    pub name: String,
}

impl ThreadSpec {
    pub fn new(tid: i32, name: impl Into<String>) -> Self {
        ThreadSpec {
            tid,
            name: name.into(),
        }
    }
}

/// Sparse per-slice counts of one thread: (slice, count), slices ascending.
#[derive(Debug, Default, Clone)]
struct SliceCounts(Vec<(u32, u32)>);

impl SliceCounts {
    #[inline]
    fn add(&mut self, slice: u32) {
        match self.0.last_mut() {
            Some((s, c)) if *s == slice => *c += 1,
            Some((s, _)) if *s > slice => match self.0.binary_search_by_key(&slice, |e| e.0) {
                Ok(i) => self.0[i].1 += 1,
                Err(i) => self.0.insert(i, (slice, 1)),
            },
            _ => self.0.push((slice, 1)),
        }
    }
}

/// Load-side accumulator for one filter (all samples, or DRAM-only).
#[derive(Debug, Default, Clone)]
struct LoadAcc {
    /// Samples per slice over all threads.
    totals: Vec<u32>,
    /// Per thread.
    per_thread: Vec<SliceCounts>,
    counts: Vec<u64>,
}

impl LoadAcc {
    #[inline]
    fn add(&mut self, thread: usize, slice: u32) {
        let s = slice as usize;
        if s >= self.totals.len() {
            self.totals.resize(s + 1, 0);
        }
        self.totals[s] = self.totals[s].saturating_add(1);
        if thread >= self.per_thread.len() {
            self.per_thread.resize_with(thread + 1, Default::default);
            self.counts.resize(thread + 1, 0);
        }
        self.per_thread[thread].add(slice);
        self.counts[thread] += 1;
    }
}

/// Streaming analysis: `push` samples in time order, then `finish`.
#[derive(Debug)]
pub struct Analyzer {
    params: AnalysisParams,
    threads: Vec<ThreadSpec>,
    index_of: HashMap<i32, usize>,
    comm: CommDetector,
    all: LoadAcc,
    dram: LoadAcc,
    saw_dram_info: bool,
    samples: Vec<u64>,
    origin: Option<u64>,
    last_time: u64,
    unknown_tid: u64,
    before_origin: u64,
    appended_threads: usize,
    log: Vec<LoggedSample>,
    log_dropped: u64,
}

impl Analyzer {
    /// `threads` in creation order (index 0 = main thread). Tids must be unique.
    pub fn new(threads: &[ThreadSpec], params: AnalysisParams) -> Result<Analyzer> {
        params.validate()?;
        let mut index_of = HashMap::with_capacity(threads.len());
        for (i, t) in threads.iter().enumerate() {
            if let Some(j) = index_of.insert(t.tid, i) {
                return Err(ProfileError::Threads(format!(
                    "tid {} is listed twice (threads {j} and {i})",
                    t.tid
                )));
            }
        }
        Ok(Analyzer {
            comm: CommDetector::new(
                threads.len(),
                params.line_size,
                params.expiration,
                params.table_capacity,
            ),
            origin: params.origin_ns,
            params,
            threads: threads.to_vec(),
            index_of,
            all: LoadAcc::default(),
            dram: LoadAcc::default(),
            saw_dram_info: false,
            samples: vec![0; threads.len()],
            last_time: 0,
            unknown_tid: 0,
            before_origin: 0,
            appended_threads: 0,
            log: Vec::new(),
            log_dropped: 0,
        })
    }

    /// Register a thread created during the run (next creation index); returns its index.
    /// A tid already known keeps its index.
    pub fn add_thread(&mut self, tid: i32, name: impl Into<String>) -> usize {
        if let Some(&i) = self.index_of.get(&tid) {
            return i;
        }
        let i = self.threads.len();
        self.threads.push(ThreadSpec::new(tid, name));
        self.index_of.insert(tid, i);
        self.samples.push(0);
        self.comm.ensure_threads(i + 1);
        i
    }

    /// Process one sample. Fails only on a timestamp absurdly far from the origin.
    pub fn push(&mut self, s: &Sample) -> Result<()> {
        let thread = match self.index_of.get(&s.tid) {
            Some(&i) => i,
            None => match self.params.unknown_threads {
                UnknownThreads::Ignore => {
                    self.unknown_tid += 1;
                    return Ok(());
                }
                UnknownThreads::Append => {
                    self.appended_threads += 1;
                    self.add_thread(s.tid, String::new())
                }
            },
        };
        let origin = *self.origin.get_or_insert(s.time_ns);
        let offset = match s.time_ns.checked_sub(origin) {
            Some(d) => d,
            None => {
                self.before_origin += 1;
                0
            }
        };
        if offset > self.params.max_span_ns {
            return Err(ProfileError::TimeSpan {
                time_ns: s.time_ns,
                span_ns: offset,
                max_span_ns: self.params.max_span_ns,
            });
        }
        let slice = (offset / self.params.timeslice_ns) as u32;
        self.last_time = self.last_time.max(s.time_ns);
        self.samples[thread] += 1;
        self.comm.push(thread, s.time_ns, s.addr);
        if self.params.sample_log_limit > 0 {
            if self.log.len() < self.params.sample_log_limit {
                self.log.push(LoggedSample {
                    thread,
                    time_ns: s.time_ns,
                    addr: s.addr,
                });
            } else {
                self.log_dropped += 1;
            }
        }
        self.all.add(thread, slice);
        match s.dram {
            Some(true) => {
                self.saw_dram_info = true;
                self.dram.add(thread, slice);
            }
            Some(false) => self.saw_dram_info = true,
            None => {}
        }
        Ok(())
    }

    /// Samples accepted so far.
    pub fn samples(&self) -> u64 {
        self.samples.iter().sum()
    }

    /// Compute the load vector and assemble the profile. The caller fills the run's identity
    /// (command, host, topology, backend, sample period, lost samples) in `meta`.
    pub fn finish(self) -> Profile {
        self.finish_with_log().0
    }

    /// [`Analyzer::finish`], plus the raw sample log kept under `sample_log_limit`, for
    /// `mapper::write_samples_csv` (write it into the profile directory).
    pub fn finish_with_log(mut self) -> (Profile, Vec<LoggedSample>) {
        let log = std::mem::take(&mut self.log);
        (self.finish_profile(), log)
    }

    fn finish_profile(self) -> Profile {
        let p = &self.params;
        let n = self.threads.len();
        let dram_only = match p.load_filter {
            LoadFilter::DramOnly => true,
            LoadFilter::All => false,
            LoadFilter::Auto => self.saw_dram_info,
        };
        let acc = if dram_only { &self.dram } else { &self.all };
        // The series covers every slice up to the last sample, whichever filter is used.
        let len = self.all.totals.len();
        let mut raw: Vec<f64> = acc.totals.iter().map(|&c| c as f64).collect();
        raw.resize(len, 0.0);
        let smoothed = load::smooth_outliers(&raw, p.outlier_fraction);
        let low = load::low_value(&smoothed, p.low_fraction);
        let (ranges, how) = load::split_phases(&smoothed, low, p.min_phase_width);
        let weights: Vec<f64> = ranges
            .iter()
            .map(|&r| load::phase_weight(&raw, r))
            .collect();
        let phase_of = load::phase_of_slices(len, &ranges);

        let mut v = vec![0.0; n];
        let mut outside = 0u64;
        for (t, counts) in acc.per_thread.iter().enumerate() {
            for &(slice, c) in &counts.0 {
                match phase_of.get(slice as usize) {
                    Some(&ph) if ph >= 0 => v[t] += weights[ph as usize] * c as f64,
                    _ => outside += u64::from(c),
                }
            }
        }

        let slice_ms = p.timeslice_ns as f64 / 1e6;
        let timeline: Vec<TimelineRow> = (0..len)
            .map(|i| TimelineRow {
                t_ms: i as f64 * slice_ms,
                samples: raw[i],
                smoothed: smoothed[i],
                phase: phase_of[i],
            })
            .collect();
        let phases: Vec<Phase> = ranges
            .iter()
            .zip(&weights)
            .map(|(&(s, e), &w)| Phase {
                start_ms: s as f64 * slice_ms,
                end_ms: (e + 1) as f64 * slice_ms,
                weight: w,
            })
            .collect();
        let threads: Vec<ThreadInfo> = self
            .threads
            .iter()
            .enumerate()
            .map(|(i, t)| ThreadInfo {
                index: i,
                tid: i64::from(t.tid),
                name: t.name.clone(),
                samples: self.samples[i],
                load_samples: acc.counts.get(i).copied().unwrap_or(0),
            })
            .collect();

        let cs = self.comm.stats();
        let mut params = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            params.insert(k.to_string(), v);
        };
        put("comm.line_size_bytes", p.line_size.to_string());
        put("comm.expiration", p.expiration.describe());
        put("comm.table_capacity", p.table_capacity.to_string());
        put("comm.table_peak_entries", cs.peak_entries.to_string());
        put("comm.table_purges", cs.purges.to_string());
        put("comm.table_evicted_live", cs.evicted.to_string());
        put("comm.communications", cs.communications.to_string());
        put("load.timeslice_ns", p.timeslice_ns.to_string());
        put("load.outlier_fraction", p.outlier_fraction.to_string());
        put("load.low_fraction", p.low_fraction.to_string());
        put("load.low_value", format!("{low}"));
        put("load.min_phase_width_slices", p.min_phase_width.to_string());
        put(
            "load.phase_split",
            match how {
                load::PhaseSplit::LowPoints => "low points",
                load::PhaseSplit::WithTail => "low points + end of run",
                load::PhaseSplit::Whole => "whole run (no phase of the minimum width)",
                load::PhaseSplit::Empty => "no samples",
            }
            .to_string(),
        );
        put(
            "load.filter",
            if dram_only {
                "DRAM-only (samples the hardware marked local/remote DRAM)"
            } else {
                "all samples (the backend cannot tell DRAM accesses)"
            }
            .to_string(),
        );
        put("load.samples_outside_phases", outside.to_string());
        put("samples_unknown_tid", self.unknown_tid.to_string());
        put("samples_before_origin", self.before_origin.to_string());
        put("threads_from_samples", self.appended_threads.to_string());
        if p.sample_log_limit > 0 {
            put("sample_log.limit", p.sample_log_limit.to_string());
            put("sample_log.dropped", self.log_dropped.to_string());
        }

        let total: u64 = self.samples.iter().sum();
        let duration_s = match self.origin {
            Some(o) if total > 0 => self.last_time.saturating_sub(o) as f64 / 1e9,
            _ => 0.0,
        };
        let mut profile = Profile {
            meta: ProfileMeta {
                schema: PROFILE_SCHEMA,
                command: Vec::new(),
                host: String::new(),
                topology: String::new(),
                backend: String::new(),
                sample_period: 0,
                duration_s,
                samples: total,
                lost_samples: 0,
                load_dram_only: dram_only,
                threads,
                phases,
                params,
                evidence: None,
            },
            comm: self.comm.matrix(),
            load: v,
            timeline,
            halves: Some(self.comm.halves()),
            lines: Some(self.comm.line_halves()),
            cpu: None,
        };
        profile.update_evidence(1);
        profile
    }
}

/// Analyse a whole sample stream (in time order). `threads` in creation order.
pub fn analyze<I>(samples: I, threads: &[ThreadSpec], params: &AnalysisParams) -> Result<Profile>
where
    I: IntoIterator,
    I::Item: std::borrow::Borrow<Sample>,
{
    let mut a = Analyzer::new(threads, params.clone())?;
    for s in samples {
        a.push(std::borrow::Borrow::borrow(&s))?;
    }
    Ok(a.finish())
}

#[cfg(test)]
mod tests;
