//! Stopping early once the evidence is stable (watch backend, on by default; `cmlb profile
//! --no-early-stop` turns it off).
//!
//! Watchpoint traps are the watch backend's cost, and a program whose sharing the profile has
//! already seen gains nothing from more of them: the plan will not change. So while sampling,
//! the hits are counted as the profile will count them (Algorithm 3-1 with the watch
//! backend's expiration, split in the same two halves by cache line), and once a second the
//! evidence is checked. Sampling stops, and the program runs on unprofiled as with
//! `--duration`, once [`StopRule::checks`] checks in a row found
//!
//! * every thread that touched memory with sharing data,
//! * split-half stability at least [`StopRule::stability`] and consistent partners for at
//!   least [`StopRule::agreement`] of the threads: each half's strongest partner of the
//!   thread is, in the other half, at least half as strong as that half's strongest (the
//!   profile's `partner_agreement` asks for the same strongest partner, which a thread with
//!   two equal neighbours, as in any stencil or ring, gets right only by chance), and
//! * the stability within [`StopRule::drift`] of the previous check (it stopped changing).
//!
//! Programs whose halves never agree that well (all-to-all sharing, noise, threads that share
//! nothing) are profiled to the end, as before.

use crate::analysis::comm::{CommDetector, Expiration};
use crate::sample::Sample;
use mapper::CommMatrix;
use profile::evidence::{pearson_upper, strongest_partner, SamplingStop};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The early-stop rule in effect for a run: the configured one, when watchpoints are armed
/// (`watching`: the watch backend with slots) in one process — a followed tree's threads in
/// other processes never get watch data, so their evidence could never look complete. The
/// sampling loop tracks evidence under it, and the run's knobs report it.
pub(super) fn rule_in_effect(cfg: &super::ProfileConfig, watching: bool) -> Option<StopRule> {
    cfg.early_stop.filter(|_| watching && !cfg.follow_children)
}

/// When sampling may stop early.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopRule {
    /// Time between two checks.
    pub every: Duration,
    /// Consecutive passing checks needed (the first check is at `every`).
    pub checks: usize,
    /// Least split-half stability.
    pub stability: f64,
    /// Least fraction of the threads with consistent partners in both halves.
    pub agreement: f64,
    /// Largest change of the stability between two passing checks.
    pub drift: f64,
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule {
            every: Duration::from_secs(1),
            checks: 3,
            stability: 0.9,
            agreement: 0.9,
            drift: 0.05,
        }
    }
}

/// One check's figures (logged at debug level, kept for the stop record).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    pub at: Duration,
    /// Threads seen touching memory, and those of them with sharing data.
    pub threads: usize,
    pub with_data: usize,
    pub stability: Option<f64>,
    /// (threads with consistent partners, threads with data in both halves).
    pub agreement: (usize, usize),
}

/// The running count of the sharing seen so far.
pub struct Tracker {
    rule: StopRule,
    start: Instant,
    next_check: Instant,
    detector: CommDetector,
    /// tid -> detector index, in order of first hit (the figures do not depend on the order).
    index: HashMap<i32, usize>,
    /// The last checks that passed, oldest first.
    passed: Vec<Check>,
}

impl Tracker {
    /// `expiration_ns`: the expiration the profile's analysis uses for watchpoint hits.
    pub fn new(rule: StopRule, start: Instant, expiration_ns: u64) -> Tracker {
        Tracker {
            rule,
            start,
            next_check: start + rule.every,
            detector: CommDetector::new(0, 64, Expiration::Fixed { ns: expiration_ns }, 1 << 16)
                .without_line_counts(),
            index: HashMap::new(),
            passed: Vec::new(),
        }
    }

    /// Count watchpoint hits (in time order).
    pub fn feed(&mut self, hits: &[Sample]) {
        for s in hits {
            let next = self.index.len();
            let i = *self.index.entry(s.tid).or_insert(next);
            self.detector.ensure_threads(i + 1);
            self.detector.push(i, s.time_ns, s.addr);
        }
    }

    /// The figures now, for `threads` threads seen touching memory.
    pub fn figures(&self, now: Instant, threads: usize) -> Check {
        let (a, b) = self.detector.halves();
        let m = self.detector.matrix();
        let with_data = (0..m.n())
            .filter(|&i| (0..m.n()).any(|j| m.get(i, j) > 0.0))
            .count();
        Check {
            at: now.saturating_duration_since(self.start),
            threads,
            with_data,
            stability: pearson_upper(&a, &b),
            agreement: consistent_partners(&a, &b),
        }
    }

    /// Check when one is due; `Some` when sampling should stop now.
    pub fn check(&mut self, now: Instant, threads: usize) -> Option<SamplingStop> {
        if now < self.next_check {
            return None;
        }
        self.next_check = now + self.rule.every;
        let c = self.figures(now, threads);
        log::debug!("early stop check: {c:?}");
        let r = &self.rule;
        let stable = c.stability.is_some_and(|s| {
            s >= r.stability
                && self
                    .passed
                    .last()
                    .and_then(|p| p.stability)
                    .is_none_or(|p| (s - p).abs() <= r.drift)
        });
        let passes = threads >= 2
            && c.with_data >= threads
            && stable
            && c.agreement.0 as f64 >= r.agreement * threads as f64;
        if !passes {
            self.passed.clear();
            return None;
        }
        self.passed.push(c);
        if self.passed.len() < r.checks {
            return None;
        }
        let first = self.passed[0].at;
        Some(SamplingStop {
            after_s: c.at.as_secs_f64(),
            stable_for_s: (c.at - first + r.every).as_secs_f64(),
            stability: c.stability.unwrap_or(0.0),
            partners_consistent: c.agreement,
        })
    }
}

/// (threads whose strongest partner in each half is at least half as strong as the strongest
/// in the other half, threads with data in both halves).
pub fn consistent_partners(a: &CommMatrix, b: &CommMatrix) -> (usize, usize) {
    let (mut ok, mut both) = (0, 0);
    for i in 0..a.n() {
        if let (Some(x), Some(y)) = (strongest_partner(a, i), strongest_partner(b, i)) {
            both += 1;
            let strong = |m: &CommMatrix, j: usize, top: usize| m.get(i, j) >= 0.5 * m.get(i, top);
            ok += usize::from(strong(b, x, y) && strong(a, y, x));
        }
    }
    (ok, both)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs (1, 2) and (3, 4), each pair on many lines: with `noise` a third pair of
    /// threads shares lines at random.
    fn second(t: &mut Tracker, sec: u64, lines: u64, noise: bool, seed: &mut u64) {
        for l in 0..lines {
            let base = sec * 1_000_000_000 + l * 1_000_000;
            let (x, y) = if noise {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let x = (*seed >> 33) % 4;
                let y = (x + 1 + (*seed >> 40) % 3) % 4;
                (x as i32 + 1, y as i32 + 1)
            } else if l % 2 == 0 {
                (1, 2)
            } else {
                (3, 4)
            };
            let addr = 0x1000_0000 + (sec * lines + l) * 64;
            t.feed(&[
                Sample::address_only(x, base, addr),
                Sample::address_only(y, base + 10, addr),
            ]);
        }
    }

    #[test]
    fn stops_after_stable_checks_and_not_before() {
        let t0 = Instant::now();
        let rule = StopRule::default();
        let mut t = Tracker::new(rule, t0, 300_000_000);
        let mut seed = 1;
        let mut stopped = None;
        for sec in 0..10u64 {
            second(&mut t, sec, 40, false, &mut seed);
            let now = t0 + rule.every * (sec as u32 + 1);
            if let Some(s) = t.check(now, 4) {
                stopped = Some((sec + 1, s));
                break;
            }
        }
        let (at, s) = stopped.expect("stable pairs stop the sampling");
        assert_eq!(at, 3, "three passing checks, one a second: {s:?}");
        assert!(
            s.stability > 0.9 && s.partners_consistent == (4, 4),
            "{s:?}"
        );
        assert_eq!(s.stable_for_s, 3.0);
        // A thread without data (5 threads touched memory, 4 share) keeps it sampling.
        let mut t = Tracker::new(rule, t0, 300_000_000);
        for sec in 0..10u64 {
            second(&mut t, sec, 40, false, &mut seed);
            assert_eq!(t.check(t0 + rule.every * (sec as u32 + 1), 5), None);
        }
    }

    #[test]
    fn noise_never_stops_and_a_failed_check_starts_the_count_over() {
        let t0 = Instant::now();
        let rule = StopRule::default();
        let mut t = Tracker::new(rule, t0, 300_000_000);
        let mut seed = 7;
        for sec in 0..20u64 {
            second(&mut t, sec, 40, true, &mut seed);
            assert_eq!(t.check(t0 + rule.every * (sec as u32 + 1), 4), None);
        }
        // A check that fails (a fifth thread appeared, without data yet) starts the count over.
        let mut t = Tracker::new(rule, t0, 300_000_000);
        let mut at = None;
        for sec in 0..10u64 {
            second(&mut t, sec, 40, false, &mut seed);
            let threads = if sec == 1 { 5 } else { 4 };
            if t.check(t0 + rule.every * (sec as u32 + 1), threads)
                .is_some()
            {
                at = Some(sec + 1);
                break;
            }
        }
        assert_eq!(at, Some(5));
    }

    /// A ring's threads have two equal neighbours: which one is the strongest in a half is
    /// chance, but both halves show both as strong partners.
    #[test]
    fn equal_neighbours_are_consistent_partners() {
        let ring = |w: [f64; 4]| {
            let mut m = CommMatrix::zeros(4);
            for (i, &v) in w.iter().enumerate() {
                m.add_sym(i, (i + 1) % 4, v);
            }
            m
        };
        let (a, b) = (ring([10.0, 9.0, 10.0, 9.0]), ring([9.0, 10.0, 9.0, 10.0]));
        assert_eq!(consistent_partners(&a, &b), (4, 4));
        let e = profile::Evidence::compute(&a, Some(&(a.clone(), b.clone())), &[1; 4], 1.0, 1);
        assert_eq!(e.partner_agreement, Some((0, 4)), "the strict figure");
        // Another partner entirely in one half: not consistent.
        let mut c = CommMatrix::zeros(4);
        c.add_sym(0, 2, 10.0);
        c.add_sym(1, 3, 10.0);
        assert_eq!(consistent_partners(&a, &c), (0, 4));
    }

    #[test]
    fn no_check_before_it_is_due() {
        let t0 = Instant::now();
        let mut t = Tracker::new(StopRule::default(), t0, 300_000_000);
        let mut seed = 1;
        second(&mut t, 0, 40, false, &mut seed);
        assert_eq!(t.check(t0 + Duration::from_millis(500), 4), None);
        assert!(t.passed.is_empty());
    }
}
