//! Communication detection, thesis Algorithm 3-1.
//!
//! A hash table keyed by cache line holds the recent samples on each line. A new sample by
//! thread T1 on line L counts one communication with every other thread T2 that has a sample on
//! L younger than the expiration period (`t1 - t2 < expiration`), symmetrically. Then the new
//! sample is put into the table. When the table is full, every expired entry is purged.
//!
//! Choices the pseudocode leaves open, made here:
//! * Per line the table keeps only the most recent sample of each thread: an older sample of
//!   the same thread on the same line would count the same pair twice for one access, and it
//!   always expires no later than the newer one. So one access communicates at most once with
//!   each other thread, as the brief of the algorithm says ("with every other thread").
//! * Expired entries met while scanning a line are dropped on the spot (they can never count
//!   again); the full-table purge of the thesis handles lines that are not touched again.
//! * If the table is still more than 7/8 full after the purge, the entries closest to expiry are
//!   evicted until it is 7/8 full and counted in [`CommStats::evicted`]: memory stays bounded and
//!   purges stay amortised O(1) per sample. Such evictions can only lose communications.
//! * Samples must come roughly in time order; a sample older than a table entry counts with it
//!   (their distance is below any expiration period).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Most distinct (line, pair) combinations remembered for [`CommDetector::line_halves`]; past
/// it new combinations are not counted (the line counts then undercount, which only makes the
/// guard's line test more cautious). 1 Mi entries is ~50 MB at most, reached only by the
/// hardware backend on programs sharing millions of lines.
const PAIR_LINES_CAP: usize = 1 << 20;

/// How long a sample stays able to count communications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiration {
    /// The same period for every entry, in nanoseconds.
    Fixed { ns: u64 },
    /// ComDetective's rule, which the thesis took over (section 3.2.1, "the expiration period is
    /// set as in ComDetective"): an entry lives as long as the gap between the inserting thread's
    /// previous sample and this one, i.e. one sampling interval of that thread. `first_ns` is used
    /// for a thread's first sample (ComDetective uses 0 there, which wastes it); `max_ns` caps the
    /// period so that a thread waking up after a long sleep does not pin entries for seconds.
    SampleInterval { first_ns: u64, max_ns: u64 },
}

impl Expiration {
    /// The default: ComDetective's per-thread sampling interval, 1 ms for a thread's first sample
    /// (one load-analysis timeslice), capped at 100 ms.
    pub const DEFAULT: Expiration = Expiration::SampleInterval {
        first_ns: 1_000_000,
        max_ns: 100_000_000,
    };

    /// Human-readable form for `profile.yaml`'s params.
    pub fn describe(&self) -> String {
        match *self {
            Expiration::Fixed { ns } => format!("fixed {ns} ns"),
            Expiration::SampleInterval { first_ns, max_ns } => format!(
                "per-thread sample interval (ComDetective), first sample {first_ns} ns, max {max_ns} ns"
            ),
        }
    }
}

/// Counters describing how the table behaved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommStats {
    /// Samples processed.
    pub samples: u64,
    /// Communications counted (each adds 1 to `A[i][j]` and `A[j][i]`).
    pub communications: u64,
    /// Full-table purges of expired entries.
    pub purges: u64,
    /// Entries evicted before they expired because the table stayed full after a purge.
    pub evicted: u64,
    /// Largest number of entries the table held.
    pub peak_entries: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Time (ns) from which this entry no longer counts: sample time + expiration period.
    expires: u64,
    thread: u32,
}

/// Multiplicative hash for line numbers (the std SipHash costs more than the rest of the
/// per-sample work; keys are not attacker-controlled).
#[derive(Default)]
struct LineHasher(u64);

impl Hasher for LineHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 ^= self.0 >> 32;
    }
}

/// The entries of one line. Most lines are touched by one thread at a time, so that case is
/// stored inline (no allocation per line).
#[derive(Debug)]
enum Slot {
    One(Entry),
    Many(Vec<Entry>),
}

impl Slot {
    fn len(&self) -> usize {
        match self {
            Slot::One(_) => 1,
            Slot::Many(v) => v.len(),
        }
    }

    /// Keep entries expiring after `now`; returns how many are left.
    fn retain_live(&mut self, now: u64) -> usize {
        match self {
            Slot::One(e) => usize::from(e.expires > now),
            Slot::Many(v) => {
                v.retain(|e| e.expires > now);
                if v.len() == 1 {
                    *self = Slot::One(v[0]);
                    1
                } else {
                    v.len()
                }
            }
        }
    }

    fn for_each(&self, mut f: impl FnMut(&Entry)) {
        match self {
            Slot::One(e) => f(e),
            Slot::Many(v) => v.iter().for_each(f),
        }
    }
}

type LineMap = HashMap<u64, Slot, BuildHasherDefault<LineHasher>>;

/// Initial soft capacity of the table (entries). The table is purged when it reaches the soft
/// capacity; when a purge frees less than half, the soft capacity doubles, up to the
/// configured capacity. The table so stays near twice its live set: cache-friendly when
/// entries expire fast, bounded by the configured capacity when they do not.
const INITIAL_SOFT_CAPACITY: usize = 1 << 14;

/// Streaming communication detector (Algorithm 3-1) over thread indices `0..n`.
#[derive(Debug)]
pub struct CommDetector {
    line_shift: u32,
    expiration: Expiration,
    capacity: usize,
    soft_capacity: usize,
    lines: LineMap,
    entries: usize,
    /// Lower triangle: `tri[i][j]` for `j < i` counts communications between i and j.
    tri: Vec<Vec<u64>>,
    /// The same, for the communications on lines of half A only ([`line_in_half_a`]); half B
    /// is the difference, so the two halves are disjoint and add up to `tri`.
    tri_a: Vec<Vec<u64>>,
    /// Distinct lines each pair communicated on, as `tri` (all lines) and `tri_a` (lines of
    /// half A): the independent units behind the counts (a watched word gives a burst of
    /// events on one line), for the guard's test on programs with few threads.
    lines_tri: Vec<Vec<u64>>,
    lines_tri_a: Vec<Vec<u64>>,
    /// (line, pair index) already counted in `lines_tri`.
    pair_lines: HashSet<(u64, u64)>,
    /// Whether `lines_tri` is kept at all: only a profile's guard reads it, not the live
    /// early-stop tracker, which would pay a set insert per communication for nothing.
    count_lines: bool,
    last_time: Vec<Option<u64>>,
    stats: CommStats,
}

impl CommDetector {
    /// `line_size` must be a power of two; `capacity` is the maximum number of table entries.
    pub fn new(
        threads: usize,
        line_size: u64,
        expiration: Expiration,
        capacity: usize,
    ) -> CommDetector {
        debug_assert!(line_size.is_power_of_two());
        let capacity = capacity.max(8);
        let mut d = CommDetector {
            line_shift: line_size.trailing_zeros(),
            expiration,
            capacity,
            soft_capacity: INITIAL_SOFT_CAPACITY.min(capacity),
            lines: LineMap::default(),
            entries: 0,
            tri: Vec::new(),
            tri_a: Vec::new(),
            lines_tri: Vec::new(),
            lines_tri_a: Vec::new(),
            pair_lines: HashSet::new(),
            count_lines: true,
            last_time: Vec::new(),
            stats: CommStats::default(),
        };
        d.ensure_threads(threads);
        d
    }

    /// The same detector without the distinct-line counts ([`Self::line_halves`] stays
    /// empty), for callers that read only the counts and their halves.
    pub fn without_line_counts(mut self) -> CommDetector {
        self.count_lines = false;
        self
    }

    /// Grow to at least `n` threads (threads created during the run).
    pub fn ensure_threads(&mut self, n: usize) {
        while self.tri.len() < n {
            let i = self.tri.len();
            self.tri.push(vec![0; i]);
            self.tri_a.push(vec![0; i]);
            self.lines_tri.push(vec![0; i]);
            self.lines_tri_a.push(vec![0; i]);
            self.last_time.push(None);
        }
    }

    pub fn threads(&self) -> usize {
        self.tri.len()
    }

    pub fn stats(&self) -> CommStats {
        self.stats
    }

    /// Number of entries currently in the table.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Communications counted between threads `i` and `j` so far.
    pub fn count(&self, i: usize, j: usize) -> u64 {
        match i.cmp(&j) {
            std::cmp::Ordering::Greater => self.tri[i][j],
            std::cmp::Ordering::Less => self.tri[j][i],
            std::cmp::Ordering::Equal => 0,
        }
    }

    fn expiration_for(&mut self, thread: usize, time: u64) -> u64 {
        let prev = self.last_time[thread];
        // Out-of-order samples must not move a thread's clock backwards.
        if prev.is_none_or(|p| time > p) {
            self.last_time[thread] = Some(time);
        }
        match self.expiration {
            Expiration::Fixed { ns } => ns,
            Expiration::SampleInterval { first_ns, max_ns } => match prev {
                None => first_ns.min(max_ns),
                Some(p) => time.saturating_sub(p).min(max_ns),
            },
        }
    }

    #[inline]
    fn count_pair(tri: &mut [Vec<u64>], a: u32, b: u32) {
        let (a, b) = if a > b { (a, b) } else { (b, a) };
        tri[a as usize][b as usize] += 1;
    }

    /// Process one sample of thread index `thread` (< `threads()`) at `time_ns` on `addr`.
    pub fn push(&mut self, thread: usize, time_ns: u64, addr: u64) {
        debug_assert!(thread < self.tri.len());
        self.stats.samples += 1;
        let period = self.expiration_for(thread, time_ns);
        let line = addr >> self.line_shift;
        if self.entries >= self.soft_capacity {
            self.purge(time_ns);
        }
        let t = thread as u32;
        let new = Entry {
            expires: time_ns.saturating_add(period),
            thread: t,
        };
        let half_a = line_in_half_a(line);
        let tri = &mut self.tri;
        let tri_a = &mut self.tri_a;
        let lines_tri = &mut self.lines_tri;
        let lines_tri_a = &mut self.lines_tri_a;
        let pair_lines = &mut self.pair_lines;
        let count_lines = self.count_lines;
        let mut count = |a: u32, b: u32| {
            Self::count_pair(tri, a, b);
            if half_a {
                Self::count_pair(tri_a, a, b);
            }
            if !count_lines {
                return;
            }
            let (hi, lo) = if a > b { (a, b) } else { (b, a) };
            let pair = u64::from(hi) << 32 | u64::from(lo);
            if pair_lines.len() < PAIR_LINES_CAP && pair_lines.insert((line, pair)) {
                Self::count_pair(lines_tri, a, b);
                if half_a {
                    Self::count_pair(lines_tri_a, a, b);
                }
            }
        };
        let mut found = 0u64;
        let (removed, added) = match self.lines.entry(line) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Slot::One(new));
                (0, 1)
            }
            std::collections::hash_map::Entry::Occupied(mut o) => {
                let slot = o.get_mut();
                match slot {
                    Slot::One(e) => {
                        if e.thread != t && time_ns < e.expires {
                            count(t, e.thread);
                            found += 1;
                            *slot = Slot::Many(vec![*e, new]);
                            (0, 1)
                        } else {
                            // Own older sample, or expired: replaced by the new one.
                            *e = new;
                            (1, 1)
                        }
                    }
                    Slot::Many(list) => {
                        let before = list.len();
                        list.retain(|e| {
                            if e.thread == t {
                                return false; // superseded by the new sample
                            }
                            if time_ns < e.expires {
                                count(t, e.thread);
                                found += 1;
                                true
                            } else {
                                false // expired: can never count again
                            }
                        });
                        let removed = before - list.len();
                        if list.is_empty() {
                            *slot = Slot::One(new);
                        } else {
                            list.push(new);
                        }
                        (removed, 1)
                    }
                }
            }
        };
        self.stats.communications += found;
        self.entries = self.entries + added - removed;
        self.stats.peak_entries = self.stats.peak_entries.max(self.entries);
    }

    /// The thesis's purge: drop every expired entry. If that leaves the table more than half
    /// full, the soft capacity doubles; at the configured capacity, the entries nearest to
    /// expiry are evicted down to 7/8 of it.
    fn purge(&mut self, now: u64) {
        self.stats.purges += 1;
        let mut left = 0usize;
        self.lines.retain(|_, slot| {
            let n = slot.retain_live(now);
            left += n;
            n > 0
        });
        self.entries = left;
        if self.entries > self.soft_capacity / 2 && self.soft_capacity < self.capacity {
            self.soft_capacity = (self.soft_capacity * 2).min(self.capacity);
        }
        let target = self.capacity - self.capacity / 8;
        if self.entries > target {
            let excess = self.entries - target;
            let mut expiries: Vec<u64> = Vec::with_capacity(self.entries);
            for slot in self.lines.values() {
                slot.for_each(|e| expiries.push(e.expires));
            }
            let (_, &mut cut, _) = expiries.select_nth_unstable(excess - 1);
            let mut removed = 0usize;
            self.lines.retain(|_, slot| {
                let b = slot.len();
                let n = slot.retain_live(cut);
                removed += b - n;
                n > 0
            });
            self.entries -= removed;
            self.stats.evicted += removed as u64;
        }
    }

    /// The symmetric communication matrix (diagonal 0).
    pub fn matrix(&self) -> mapper::CommMatrix {
        let n = self.tri.len();
        let mut m = mapper::CommMatrix::zeros(n);
        for (i, row) in self.tri.iter().enumerate() {
            for (j, &c) in row.iter().enumerate() {
                if c > 0 {
                    m.add_sym(i, j, c as f64);
                }
            }
        }
        m
    }

    /// The matrix split into two disjoint halves by cache line ([`line_in_half_a`]): half A
    /// counts the communications on lines of half A, half B the rest; A + B = [`Self::matrix`].
    pub fn halves(&self) -> (mapper::CommMatrix, mapper::CommMatrix) {
        split_halves(&self.tri, &self.tri_a)
    }

    /// Per half, the number of distinct lines each pair communicated on (same split as
    /// [`Self::halves`]): how many independent observations a half's counts rest on.
    pub fn line_halves(&self) -> (mapper::CommMatrix, mapper::CommMatrix) {
        split_halves(&self.lines_tri, &self.lines_tri_a)
    }
}

/// Two symmetric matrices from lower-triangle counts `all` and their half-A part `in_a`: half A
/// gets `in_a`, half B the rest (`all - in_a`).
fn split_halves(all: &[Vec<u64>], in_a: &[Vec<u64>]) -> (mapper::CommMatrix, mapper::CommMatrix) {
    let n = all.len();
    let mut a = mapper::CommMatrix::zeros(n);
    let mut b = mapper::CommMatrix::zeros(n);
    for (i, (row, row_a)) in all.iter().zip(in_a).enumerate() {
        for (j, (&c, &ca)) in row.iter().zip(row_a).enumerate() {
            if ca > 0 {
                a.add_sym(i, j, ca as f64);
            }
            if c > ca {
                b.add_sym(i, j, (c - ca) as f64);
            }
        }
    }
    (a, b)
}

/// Which half of the held-out split a cache line's communications go to. By line, not by
/// time: a watched word's hits come in bursts, and a split by time would put one burst in
/// both halves, so the halves would agree about a single word and look more certain than the
/// profile is. A hash of the line number, so neighbouring lines (one array) spread over both.
#[inline]
pub fn line_in_half_a(line: u64) -> bool {
    let h = (line ^ (line >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h >> 63 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn fixed(ns: u64) -> Expiration {
        Expiration::Fixed { ns }
    }

    #[test]
    fn two_threads_same_line_within_period_communicate_once_each_way() {
        let mut d = CommDetector::new(2, 64, fixed(10 * MS), 1024);
        d.push(0, 0, 0x1000);
        d.push(1, 5 * MS, 0x1008); // same 64-byte line
        assert_eq!(d.count(0, 1), 1);
        assert_eq!(d.count(1, 0), 1);
        let m = d.matrix();
        assert_eq!(m.get(0, 1), 1.0);
        assert_eq!(m.get(1, 0), 1.0);
        assert_eq!(m.get(0, 0), 0.0);
    }

    #[test]
    fn expired_sample_does_not_count_and_boundary_is_exclusive() {
        let mut d = CommDetector::new(2, 64, fixed(10 * MS), 1024);
        d.push(0, 0, 0x1000);
        d.push(1, 10 * MS, 0x1000); // t1 - t2 == period: not "< period"
        assert_eq!(d.count(0, 1), 0);
        d.push(0, 10 * MS + 1, 0x1000); // thread 1's sample is 1 ns old
        assert_eq!(d.count(0, 1), 1);
    }

    #[test]
    fn different_lines_do_not_communicate_and_line_size_is_configurable() {
        let mut d = CommDetector::new(2, 64, fixed(10 * MS), 1024);
        d.push(0, 0, 0x1000);
        d.push(1, 1, 0x1040); // next 64-byte line
        assert_eq!(d.count(0, 1), 0);
        let mut d = CommDetector::new(2, 128, fixed(10 * MS), 1024);
        d.push(0, 0, 0x1000);
        d.push(1, 1, 0x1040); // same 128-byte line
        assert_eq!(d.count(0, 1), 1);
    }

    #[test]
    fn same_thread_never_communicates_with_itself() {
        let mut d = CommDetector::new(1, 64, fixed(10 * MS), 1024);
        for t in 0..10 {
            d.push(0, t, 0x1000);
        }
        assert_eq!(d.stats().communications, 0);
        assert_eq!(d.entries(), 1, "own older sample is superseded");
        assert_eq!(d.matrix().get(0, 0), 0.0);
    }

    #[test]
    fn one_access_counts_once_per_other_thread_and_with_every_other_thread() {
        let mut d = CommDetector::new(3, 64, fixed(10 * MS), 1024);
        d.push(1, 0, 0x2000);
        d.push(1, 1, 0x2000); // supersedes
        d.push(2, 2, 0x2000); // counts with 1
        d.push(0, 3, 0x2000); // counts with 1 and 2
        assert_eq!(d.count(0, 1), 1);
        assert_eq!(d.count(0, 2), 1);
        assert_eq!(d.count(1, 2), 1);
        assert_eq!(d.stats().communications, 3);
    }

    /// A burst of communications on one line is one line; each other line adds one.
    #[test]
    fn line_halves_count_distinct_lines_per_pair() {
        let mut d = CommDetector::new(3, 64, fixed(10 * MS), 1024);
        let mut t = 0;
        let mut lines = Vec::new();
        for l in 0..8u64 {
            let addr = 0x10_0000 + l * 64;
            lines.push(addr >> 6);
            for _ in 0..5 {
                d.push(0, t, addr);
                d.push(1, t + 1, addr);
                t += 2;
            }
        }
        d.push(2, t, 0x10_0000); // (0, 2) and (1, 2) on the first line only
        assert_eq!(
            d.count(0, 1),
            72,
            "events: every access after a line's first"
        );
        let (la, lb) = d.line_halves();
        let (ea, eb) = d.halves();
        assert_eq!(la.get(0, 1) + lb.get(0, 1), 8.0);
        assert_eq!(la.get(0, 2) + lb.get(0, 2), 1.0);
        assert_eq!(la.get(1, 2) + lb.get(1, 2), 1.0);
        let in_a = lines.iter().filter(|&&l| line_in_half_a(l)).count() as f64;
        assert_eq!(la.get(0, 1), in_a);
        // A line in a half has at least one event there, and a pair with events has lines.
        for (l, e) in [(&la, &ea), (&lb, &eb)] {
            for i in 0..3 {
                for j in 0..3 {
                    assert!(l.get(i, j) <= e.get(i, j));
                    assert_eq!(l.get(i, j) > 0.0, e.get(i, j) > 0.0);
                }
            }
        }
    }

    #[test]
    fn sample_interval_expiration_follows_the_inserting_threads_rate() {
        let exp = Expiration::SampleInterval {
            first_ns: MS,
            max_ns: 100 * MS,
        };
        let mut d = CommDetector::new(2, 64, exp, 1024);
        // Thread 0 samples every 4 ms: its entries live 4 ms.
        d.push(0, 0, 0xA000);
        d.push(0, 4 * MS, 0xB000);
        d.push(1, 7 * MS, 0xB000); // 3 ms after thread 0's sample: counts
        assert_eq!(d.count(0, 1), 1);
        d.push(0, 8 * MS, 0xC000); // interval 4 ms -> expires at 12 ms
        d.push(1, 12 * MS, 0xC000); // exactly at expiry: does not count
        assert_eq!(d.count(0, 1), 1);
        // First sample of a thread uses first_ns.
        let mut d = CommDetector::new(2, 64, exp, 1024);
        d.push(0, 0, 0xA000);
        d.push(1, MS - 1, 0xA000);
        assert_eq!(d.count(0, 1), 1);
        let mut d = CommDetector::new(2, 64, exp, 1024);
        d.push(0, 0, 0xA000);
        d.push(1, MS, 0xA000);
        assert_eq!(d.count(0, 1), 0);
    }

    #[test]
    fn sample_interval_is_capped() {
        let exp = Expiration::SampleInterval {
            first_ns: MS,
            max_ns: 2 * MS,
        };
        let mut d = CommDetector::new(2, 64, exp, 1024);
        d.push(0, 0, 0xA000);
        d.push(0, 1000 * MS, 0xB000); // interval 1 s, capped to 2 ms
        d.push(1, 1003 * MS, 0xB000);
        assert_eq!(d.count(0, 1), 0);
    }

    #[test]
    fn full_table_purges_expired_entries_and_stays_bounded() {
        let mut d = CommDetector::new(2, 64, fixed(10), 64);
        for i in 0..10_000u64 {
            d.push((i % 2) as usize, i * 100, i * 64); // every sample on its own line
            assert!(d.entries() <= 64);
        }
        let s = d.stats();
        assert!(s.purges > 0);
        assert_eq!(s.evicted, 0, "everything was expired when purged");
        assert_eq!(s.communications, 0);
    }

    #[test]
    fn full_table_of_live_entries_evicts_oldest_and_counts_them() {
        let mut d = CommDetector::new(2, 64, fixed(u64::MAX / 2), 64);
        for i in 0..1000u64 {
            d.push(0, i, i * 64);
            assert!(d.entries() <= 64);
        }
        let s = d.stats();
        assert!(s.evicted > 0);
        // The most recent lines survive: thread 1 touching the last line communicates,
        // touching the first line (evicted long ago) does not.
        d.push(1, 1000, 999 * 64);
        assert_eq!(d.count(0, 1), 1);
        d.push(1, 1001, 0);
        assert_eq!(d.count(0, 1), 1);
    }

    #[test]
    fn threads_can_be_added_during_the_run() {
        let mut d = CommDetector::new(1, 64, fixed(MS), 64);
        d.push(0, 0, 0x40);
        d.ensure_threads(3);
        d.push(2, 1, 0x40);
        assert_eq!(d.matrix().n(), 3);
        assert_eq!(d.count(2, 0), 1);
    }
}

#[cfg(test)]
mod reference {
    //! The table against a brute-force reading of Algorithm 3-1 on random streams.
    use super::*;
    use proptest::prelude::*;

    /// For each sample, count every other thread whose most recent earlier sample on the same
    /// line is younger than the period.
    fn brute_force(n: usize, samples: &[(usize, u64, u64)], period: u64, line: u64) -> Vec<u64> {
        let mut counts = vec![0u64; n * n];
        for (i, &(t1, time1, a1)) in samples.iter().enumerate() {
            for t2 in (0..n).filter(|&t| t != t1) {
                let last = samples[..i]
                    .iter()
                    .rev()
                    .find(|&&(t, _, a)| t == t2 && a / line == a1 / line);
                if let Some(&(_, time2, _)) = last {
                    if time1 - time2 < period {
                        counts[t1 * n + t2] += 1;
                        counts[t2 * n + t1] += 1;
                    }
                }
            }
        }
        counts
    }

    proptest! {
        #[test]
        fn table_matches_brute_force(
            steps in proptest::collection::vec((0usize..4, 0u64..50, 0u64..512), 1..200),
            period in 1u64..200,
            capacity in prop_oneof![Just(8usize), Just(1 << 16)],
        ) {
            let mut time = 0;
            let samples: Vec<(usize, u64, u64)> = steps
                .iter()
                .map(|&(t, dt, a)| {
                    time += dt;
                    (t, time, a)
                })
                .collect();
            let mut d = CommDetector::new(4, 64, Expiration::Fixed { ns: period }, capacity);
            for &(t, time, a) in &samples {
                d.push(t, time, a);
            }
            let want = brute_force(4, &samples, period, 64);
            let m = d.matrix();
            if d.stats().evicted == 0 {
                for i in 0..4 {
                    for j in 0..4 {
                        prop_assert_eq!(m.get(i, j), want[i * 4 + j] as f64, "pair {} {}", i, j);
                    }
                }
            } else {
                // Evictions can only lose communications.
                for i in 0..4 {
                    for j in 0..4 {
                        prop_assert!(m.get(i, j) <= want[i * 4 + j] as f64);
                    }
                }
            }
            for i in 0..4 {
                for j in 0..4 {
                    prop_assert_eq!(m.get(i, j), m.get(j, i));
                }
            }
        }
    }
}
