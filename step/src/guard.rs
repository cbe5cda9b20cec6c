//! Do no harm: a plan made from a profile is applied only when held-out evidence says it beats
//! the prior that costs nothing, creation order (`compact`). See `docs/evidence.md`.
//!
//! A thin profile (a few dozen watchpoint hits over thousands of thread pairs) gives a matrix
//! of noise, and a strategy maps noise as faithfully as structure: such plans cut 1.3–2.5×
//! more true communication than placing threads in creation order, which is right for the
//! many programs whose threads share with their creation-order neighbours. [`choose`] decides
//! on data the plan was not made from:
//!
//! 1. The profiler splits the sharing events into two disjoint halves A and B (`comm.a.csv`,
//!    `comm.b.csv`; by cache line, so a watched word's burst of hits lands in one half).
//! 2. The user's strategy maps each half (blended with the prior, step 4); the plan from A is
//!    scored on B and the plan from B on A, and so is `compact`. The score of a plan on a
//!    matrix is RemoteComm (Σ A\[i]\[j] over thread pairs on different NUMA nodes); on a
//!    machine with a single NUMA node, where RemoteComm is 0 for every plan, the hop-bytes
//!    (Σ A\[i]\[j] × tree hops between their PUs).
//! 3. The plan (the strategy on the whole matrix, blended) is kept only when, over both
//!    folds, it scores at most [`KEEP_AT`] × compact's score, **and** a sign test over the
//!    held-out thread pairs agrees: the pairs compact separates more than the plan (W) outweigh
//!    those the plan separates more (L) by at least [`SIGN_Z`] × √(Σ w²), each pair weighted
//!    by `w = v / (v + mean)` (≤ 1). The events of one pair are not independent (a watched
//!    word gives bursts), so pairs, not events, are the units, and weak pairs (background
//!    noise) count less. Each fold on its own must favour the plan (one lucky half must not
//!    carry the pooled test). And it must not score worse than compact on the whole matrix.
//!    Otherwise the plan is `compact`'s.
//! 4. Where the profile is blind, the prior decides: every matrix the strategy sees is blended
//!    with a creation-order chain (thread i with i+1) weighted by how much of the sharing the
//!    profile has not seen ([`blend`], coverage estimated from the halves by capture–recapture,
//!    at least [`PRIOR_WEIGHT`] × the mean per-thread sharing). So a thread without data joins
//!    its creation-order neighbours, a thin profile's plan stays close to creation order, and
//!    ties between plans go the prior's way.
//!
//! 5. A kept plan is refused when the profile's CPU timeline (`cpu.csv`) says it stacks threads
//!    that ran at the same time on one PU ([`CROWD_MAX`]): sharing evidence cannot see that,
//!    and a plan kept on it made bwa 1.93x slower on a 2-PU VM.
//!
//! Tolerance (stated, tested in `tests/guard.rs` on synthetic watch-like profiles thinned to
//! 10–100 of 1 000 watched words): the chosen plan's RemoteComm on the true matrix is at most
//! [`TOLERANCE`] (5 %) above `compact`'s. On full profiles the plan is kept and wins where
//! creation order is not already optimal (shuffled patterns), and is never worse than compact
//! where it is.
//!
//! Profiles without halves (made by older cmlb versions, or imported) have no held-out
//! evidence: the plan is kept only when every thread has sharing data and the same two tests
//! pass in-sample (plan and score on the whole matrix), which is weaker and said so in the
//! line.

use mapper::Topology;
use mapper::{CommMatrix, MapError, Plan, Result};
use mapper::{MapInput, StrategySpec};
use profile::evidence::fmt_count;
use profile::Profile;

/// Smallest spread of creation order's node loads (as a fraction of the mean node load) for
/// which a plan is kept for its memory-load balance alone.
pub const BALANCE_MIN: f64 = 0.1;
/// Largest plan Load_std, as a fraction of compact's, that counts as clearly better balanced.
/// 0.7, not 0.5: with two threads per PU on 4 NUMA nodes of one PU and two heavy threads
/// (4x the others) that compact puts together, the best plan reaches 0.577 of compact's
/// spread (node loads 5, 5, 2, 2 against 2, 8, 2, 2), so 0.5 refused every balance there
/// (tests/numa 4x1). Noisy load vectors are held back by the held-out gate instead.
pub const BALANCE_GAIN: f64 = 0.7;
/// A plan is kept only when its held-out score is at most this fraction of compact's.
pub const KEEP_AT: f64 = 0.95;
/// Sign test threshold (one-sided z on the weighted pair counts).
pub const SIGN_Z: f64 = 2.0;
/// Level of the exact sign test over held-out cache lines (one-sided binomial p-value), the
/// test that decides when the pairs are too few for the pair test (see [`choose`]).
pub const LINE_ALPHA: f64 = 0.001;
/// Least weight of the creation-order chain blended into every matrix, relative to the mean
/// per-thread sharing of the threads with data (more when the profile is thin, see [`blend`]).
pub const PRIOR_WEIGHT: f64 = 0.05;
/// The stated tolerance: on the true matrix the chosen plan's RemoteComm is at most
/// `(1 + TOLERANCE)` × compact's (tested on thinned profiles, see the module doc).
pub const TOLERANCE: f64 = 0.05;

/// A plan is refused when the profile's CPU timeline says it would make the threads' work take
/// more than this many times as long as unpinned ([`profile::cpu::CpuTimeline::crowding`]):
/// it stacks threads that run at the same time on one PU. Above 1 because a timeline measured
/// unpinned is noisy per bin (the kernel's slices): four always-busy threads pinned two per PU
/// score up to ~1.05 on 100 ms bins.
pub const CROWD_MAX: f64 = 1.1;
/// Bins of the CPU timeline are merged to at least this width before [`CROWD_MAX`] is checked:
/// over 100 ms the kernel shares a PU fairly, so pinned pairs of busy threads do not look
/// crowded by chance, while waves of workers (hundreds of ms) stay visible.
pub const CROWD_BIN_MS: f64 = 100.0;

/// Strategies that do not read the matrix: nothing to check.
const MATRIX_FREE: [&str; 4] = ["compact", "scatter", "random", "identity"];

/// The guard's decision.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The plan launchers apply (or, with `used_prior`, the reference they leave aside).
    pub plan: Plan,
    /// True when the evidence does not support the strategy's plan. Launchers then leave the
    /// threads as they are (no thread pinning: what the user has without cmlb); `plan` is
    /// creation order (`compact`), the reference the evidence was scored against, for
    /// `cmlb map` and reports. Pinning in creation order instead cost 4-21 % of run time on 4
    /// of 10 programs on a 2-PU VM and gained on none (docs/benchmarks.md, "Run time").
    pub used_prior: bool,
    /// One line for the user, e.g. "plan kept: held-out RemoteComm 0.62x compact (...)" or
    /// "profile too thin (...): threads left as they are".
    pub line: String,
    /// Creation order (`compact`) on the profile: the reference the plan was scored against,
    /// computed once here for the launcher's summary line too.
    pub prior: Plan,
}

/// The guard's decision before the reference is attached ([`choose_on_sharing`]).
struct Verdict {
    plan: Plan,
    used_prior: bool,
    line: String,
}

/// Decide between the user's strategy's plan and `compact` on held-out evidence.
///
/// `plan_with` computes the user's strategy's plan for a given communication matrix (same
/// loads, topology and sample log). It is called three times when the profile has halves
/// (half A, half B, whole matrix), once otherwise. The returned plan's metrics are those of
/// the profile's own matrix and loads.
pub fn choose(
    profile: &Profile,
    topology: &Topology,
    plan_with: &dyn Fn(&CommMatrix) -> Result<Plan>,
) -> Result<Choice> {
    let input = MapInput {
        comm: &profile.comm,
        load: &profile.load,
        topology,
        seed: 0,
    };
    let prior = mapper::plan(&StrategySpec::compact(), &input, None)?;
    let v = choose_on_sharing(profile, topology, plan_with, &prior)?;
    let checkable = !v.used_prior
        && !v.plan.assignment.is_empty()
        && !MATRIX_FREE.contains(&v.plan.strategy.as_str());
    let crowding = match profile.cpu.as_ref().filter(|_| checkable) {
        None => None,
        Some(cpu) => {
            let pus = pus_of(&v.plan, topology, profile.comm.n())?;
            Some(
                cpu.coarsened(CROWD_BIN_MS)
                    .crowding(&pus, topology.pus.len()),
            )
        }
    };
    Ok(match crowding {
        // The sharing evidence held (the plan would cut communication), but not the CPU time:
        // compact is the reference, as for every refusal.
        Some(crowding) if crowding > CROWD_MAX => Choice {
            plan: prior.clone(),
            used_prior: true,
            line: format!(
                "plan refused: it stacks threads that ran at the same time on the same PUs \
                 (their work would take an estimated {crowding:.2}x as long as unpinned, from \
                 the profile's CPU timeline; it had {}): threads left as they are",
                v.line.trim_start_matches("plan kept: ")
            ),
            prior,
        },
        _ => Choice {
            plan: v.plan,
            used_prior: v.used_prior,
            line: v.line,
            prior,
        },
    })
}

/// [`choose`] on the sharing and memory-load evidence alone.
fn choose_on_sharing(
    profile: &Profile,
    topology: &Topology,
    plan_with: &dyn Fn(&CommMatrix) -> Result<Plan>,
    prior: &Plan,
) -> Result<Verdict> {
    let n = profile.comm.n();
    let prior_pus = pus_of(prior, topology, n)?;
    let metric = Metric::for_topology(topology);
    let prior_choice = |why: String| Verdict {
        plan: prior.clone(),
        used_prior: true,
        line: format!("{why}: threads left as they are (no plan beats what you have)"),
    };
    let no_data = threads_without_data(&profile.comm);
    if no_data.len() == n {
        // Nothing shares, so communication cannot tell plans apart, but the memory loads can:
        // a plan that spreads them clearly better than creation order is kept for that alone
        // (a skewed program whose heavy threads creation order would put on one node).
        let plan = plan_with(&profile.comm)?;
        let (lp, lc) = (plan.metrics.load_std, prior.metrics.load_std);
        if MATRIX_FREE.contains(&plan.strategy.as_str()) && !plan.assignment.is_empty() {
            return Ok(Verdict {
                line: format!(
                    "strategy '{}' does not map from the profile: nothing to check",
                    plan.strategy
                ),
                plan,
                used_prior: false,
            });
        }
        if !plan.assignment.is_empty()
            && balances_clearly(&plan.metrics, &prior.metrics, profile, topology)
        {
            return Ok(Verdict {
                line: format!(
                    "profile has no sharing data; plan kept for memory-load balance \
                     (Load_std {lp:.4e}, compact {lc:.4e})"
                ),
                plan,
                used_prior: false,
            });
        }
        return Ok(prior_choice("profile has no sharing data".into()));
    }
    let total_pairs = estimated_pairs(profile.halves.as_ref());
    let full = plan_with(&blend(&profile.comm, total_pairs))?;
    if full.assignment.is_empty() || MATRIX_FREE.contains(&full.strategy.as_str()) {
        let line = format!(
            "strategy '{}' does not map from the profile: nothing to check",
            full.strategy
        );
        // Planned on the blended matrix: report the metrics of the profile's own.
        let plan = if full.assignment.is_empty() {
            full
        } else {
            let pus = pus_of(&full, topology, n)?;
            let m = mapper::metrics_of(&profile.comm, &profile.load, topology, &pus);
            with_metrics(full, m)
        };
        return Ok(Verdict {
            line,
            plan,
            used_prior: false,
        });
    }
    let full_pus = pus_of(&full, topology, n)?;
    let in_sample = Fold::score(&profile.comm, None, &full_pus, &prior_pus, topology, metric);
    // Memory-load balance is the other half of CMLB's objective and does not depend on the
    // sharing data: where the communication evidence does not carry the plan, a plan that
    // spreads the load clearly better than creation order (Load_std below compact's by more
    // than the tolerance) and costs no more communication on the whole profile (within the
    // tolerance) is still kept, for its balance.
    let full_metrics = mapper::metrics_of(&profile.comm, &profile.load, topology, &full_pus);
    // The communication it may not cost is counted on the pairs seen in both halves: a pair in
    // one half only is what the held-out check cannot confirm, and two stray events between
    // the heavy threads creation order keeps together (a program that shares nothing) once
    // vetoed a balance 100x better than compact's (tests/numa/README.md, finding 6).
    // Without halves every pair counts: the whole profile's figures, already computed.
    let balances = balances_clearly(&full_metrics, &prior.metrics, profile, topology)
        && match &profile.halves {
            Some((a, b)) => {
                let confirmed = seen_in_both(&profile.comm, a, b);
                let rc = |pus: &[usize]| mapper::remote_comm(&confirmed, topology, pus);
                rc(&full_pus) <= rc(&prior_pus) * (1.0 + TOLERANCE)
            }
            None => full_metrics.remote_comm <= prior.metrics.remote_comm * (1.0 + TOLERANCE),
        };
    // `held_out`: the plan's held-out communication against compact's, where the halves gave
    // one. The balance is kept only when that is within the tolerance too: on the whole profile
    // the plan wins by construction (it was made from it), so a thin profile's plan looks free
    // there while costing more on data it was not made from. A 64-thread stencil whose 4 s
    // profile gave wrong loads (equal by construction) kept such a plan at held-out 4.00x
    // compact and cut 4.7x compact's true communication (docs/evidence.md).
    let fallback = |why: String, held_out: Option<f64>| -> Verdict {
        if !balances || held_out.is_some_and(|r| r > 1.0 + TOLERANCE) {
            return prior_choice(why);
        }
        let plan = with_metrics(full.clone(), full_metrics.clone());
        Verdict {
            line: format!(
                "{why}, but the plan balances memory load: kept (Load_std {:.4e}, compact \
                 {:.4e}; RemoteComm {:.4e}, compact {:.4e})",
                full_metrics.load_std,
                prior.metrics.load_std,
                full_metrics.remote_comm,
                prior.metrics.remote_comm
            ),
            plan,
            used_prior: false,
        }
    };
    let gaps = if no_data.is_empty() {
        String::new()
    } else {
        format!(
            "; {} of {n} threads without sharing data placed by creation order",
            no_data.len()
        )
    };

    let (test, held_out) = match &profile.halves {
        Some((a, b)) if !all_zero(a) && !all_zero(b) => {
            let pa = pus_of(&plan_with(&blend(a, total_pairs))?, topology, n)?;
            let pb = pus_of(&plan_with(&blend(b, total_pairs))?, topology, n)?;
            let (la, lb) = match &profile.lines {
                Some((la, lb)) => (Some(la), Some(lb)),
                None => (None, None),
            };
            let fa = Fold::score(b, lb, &pa, &prior_pus, topology, metric);
            let fb = Fold::score(a, la, &pb, &prior_pus, topology, metric);
            // Both folds must favour the plan: one lucky half (a few heavy pairs that compact
            // happens to cut) must not carry the pooled test.
            let mut f = fa.add(&fb);
            f.split = fa.ratio() >= 1.0 || fb.ratio() >= 1.0;
            (f, true)
        }
        Some(_) => {
            return Ok(fallback(
                format!(
                    "profile too thin (one half of its sharing events is empty; {} of {n} \
                     threads without data)",
                    no_data.len()
                ),
                None,
            ))
        }
        None if !no_data.is_empty() => {
            return Ok(fallback(
                format!(
                    "profile without held-out halves (older cmlb or an import) and {} of {n} \
                     threads without sharing data",
                    no_data.len()
                ),
                None,
            ))
        }
        None => (in_sample, false),
    };
    let what = if held_out {
        "held-out"
    } else {
        "in-sample (no held-out halves in this profile)"
    };
    let lines_known = held_out && profile.lines.is_some();
    let lines = if lines_known {
        format!(
            ", lines better/worse {}/{}",
            fmt_count(test.line_wins),
            fmt_count(test.line_losses)
        )
    } else {
        String::new()
    };
    let summary = format!(
        "{what} {} {:.2}x compact, pairs better/worse {}/{}{lines}",
        metric.name(),
        test.ratio(),
        test.wins,
        test.losses
    );
    if !test.passes(lines_known) {
        return Ok(fallback(
            format!("profile too thin ({summary})"),
            held_out.then(|| test.ratio()),
        ));
    }
    if in_sample.plan > in_sample.prior {
        return Ok(fallback(
            format!("plan worse than compact on the whole profile ({summary})"),
            held_out.then(|| test.ratio()),
        ));
    }
    let plan = with_metrics(full, full_metrics);
    Ok(Verdict {
        plan,
        used_prior: false,
        line: format!("plan kept: {summary}{gaps}"),
    })
}

/// What a plan is scored by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    RemoteComm,
    /// One NUMA node: RemoteComm is 0 for every plan.
    HopBytes,
}

impl Metric {
    fn for_topology(t: &Topology) -> Metric {
        if t.numa.iter().filter(|n| !n.pus.is_empty()).count() > 1 {
            Metric::RemoteComm
        } else {
            Metric::HopBytes
        }
    }
    fn name(self) -> &'static str {
        match self {
            Metric::RemoteComm => "RemoteComm",
            Metric::HopBytes => "hop-bytes (one NUMA node)",
        }
    }
    /// Cost of one unit of communication between PUs `a` and `b` (indexes into `t.pus`).
    fn cost(self, t: &Topology, a: usize, b: usize) -> f64 {
        match self {
            Metric::RemoteComm => f64::from(u8::from(t.pus[a].numa != t.pus[b].numa)),
            Metric::HopBytes => f64::from(t.hops(a, b)),
        }
    }
}

/// Scores of the plan and the prior on one matrix, and the sign test's pair counts.
#[derive(Debug, Clone, Copy, Default)]
struct Fold {
    plan: f64,
    prior: f64,
    /// Pairs the prior separates more than the plan does (pair count, for the line).
    wins: usize,
    /// Pairs the plan separates more than the prior does.
    losses: usize,
    /// The same, each pair weighted by [`pair_weight`], and Σ weight² over both.
    win_w: f64,
    loss_w: f64,
    var_w: f64,
    /// Distinct held-out cache lines on the pairs won and lost (when the profile has line
    /// counts): the units of the exact sign test.
    line_wins: f64,
    line_losses: f64,
    /// Held-out folds that disagree: one favours compact (or ties).
    split: bool,
}

impl Fold {
    /// `lines`: the distinct lines behind each pair of `m`, when known.
    fn score(
        m: &CommMatrix,
        lines: Option<&CommMatrix>,
        plan: &[usize],
        prior: &[usize],
        t: &Topology,
        k: Metric,
    ) -> Fold {
        let mut f = Fold::default();
        let n = m.n();
        let (mut sum, mut count) = (0.0, 0usize);
        for i in 0..n {
            for j in (i + 1)..n {
                let v = m.get(i, j);
                if v > 0.0 {
                    sum += v;
                    count += 1;
                }
            }
        }
        let mean = if count > 0 { sum / count as f64 } else { 1.0 };
        for i in 0..n {
            for j in (i + 1)..n {
                let v = m.get(i, j);
                if v == 0.0 {
                    continue;
                }
                let (cp, cq) = (k.cost(t, plan[i], plan[j]), k.cost(t, prior[i], prior[j]));
                f.plan += v * cp;
                f.prior += v * cq;
                let w = pair_weight(v, mean);
                let l = lines.map_or(0.0, |l| l.get(i, j));
                if cq > cp {
                    f.wins += 1;
                    f.win_w += w;
                    f.var_w += w * w;
                    f.line_wins += l;
                } else if cp > cq {
                    f.losses += 1;
                    f.loss_w += w;
                    f.var_w += w * w;
                    f.line_losses += l;
                }
            }
        }
        f
    }

    fn add(&self, o: &Fold) -> Fold {
        Fold {
            plan: self.plan + o.plan,
            prior: self.prior + o.prior,
            wins: self.wins + o.wins,
            losses: self.losses + o.losses,
            win_w: self.win_w + o.win_w,
            loss_w: self.loss_w + o.loss_w,
            var_w: self.var_w + o.var_w,
            line_wins: self.line_wins + o.line_wins,
            line_losses: self.line_losses + o.line_losses,
            split: self.split || o.split,
        }
    }

    /// Plan score / prior score (1 when both are 0).
    fn ratio(&self) -> f64 {
        if self.prior > 0.0 {
            self.plan / self.prior
        } else if self.plan > 0.0 {
            f64::INFINITY
        } else {
            1.0
        }
    }

    fn passes(&self, lines_known: bool) -> bool {
        self.prior > 0.0
            && !self.split
            && self.ratio() <= KEEP_AT
            && (self.win_w - self.loss_w >= SIGN_Z * self.var_w.sqrt()
                || (lines_known && self.line_p() <= LINE_ALPHA))
    }

    /// One-sided p-value of the exact sign test over held-out lines: the chance of at least
    /// this many won lines out of the lines won or lost if each went either way with
    /// probability ½. Counts scaled by `--max-runs` are rounded against the plan.
    fn line_p(&self) -> f64 {
        let (w, l) = (self.line_wins.floor(), self.line_losses.ceil());
        binomial_upper_tail(w as u64, (w + l) as u64)
    }
}

/// P(X >= k) for X ~ Binomial(n, 1/2), summed in log space (n may be thousands).
fn binomial_upper_tail(k: u64, n: u64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    let ln2 = std::f64::consts::LN_2;
    // ln C(n, k), then each next term from the last.
    let mut ln_c: f64 = (0..k)
        .map(|i| ((n - i) as f64).ln() - ((i + 1) as f64).ln())
        .sum();
    let mut terms = Vec::with_capacity((n - k + 1) as usize);
    for x in k..=n {
        terms.push(ln_c - n as f64 * ln2);
        if x < n {
            ln_c += ((n - x) as f64).ln() - ((x + 1) as f64).ln();
        }
    }
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (top.exp() * terms.iter().map(|t| (t - top).exp()).sum::<f64>()).min(1.0)
}

/// A held-out pair's weight in the sign test: `v / (v + mean)` with `mean` the mean count of
/// the half's observed pairs. A pair seen once (most background noise: one watched word, one
/// burst) weighs little, a pair as strong as the typical one about ½, a dominant one nearly
/// 1; no pair weighs more than 1, so one heavy pair cannot carry the test.
fn pair_weight(v: f64, mean: f64) -> f64 {
    v / (v + mean)
}

fn all_zero(m: &CommMatrix) -> bool {
    threads_without_data(m).len() == m.n()
}

/// Threads whose row (off the diagonal) is all zero.
pub fn threads_without_data(m: &CommMatrix) -> Vec<usize> {
    (0..m.n())
        .filter(|&i| {
            m.row(i)
                .iter()
                .enumerate()
                .all(|(j, &v)| j == i || v == 0.0)
        })
        .collect()
}

/// How many thread pairs share at all, estimated from the halves by capture–recapture
/// (Lincoln–Petersen: pairs seen in A × pairs seen in B / pairs seen in both). `None` without
/// halves or when no pair is seen in both (then the profile has seen too little to tell).
pub fn estimated_pairs(halves: Option<&(CommMatrix, CommMatrix)>) -> Option<f64> {
    let (a, b) = halves?;
    let (mut na, mut nb, mut both) = (0usize, 0usize, 0usize);
    for i in 0..a.n() {
        for j in (i + 1)..a.n() {
            let (x, y) = (a.get(i, j) > 0.0, b.get(i, j) > 0.0);
            na += usize::from(x);
            nb += usize::from(y);
            both += usize::from(x && y);
        }
    }
    (both > 0).then(|| (na * nb) as f64 / both as f64)
}

/// `m` plus the creation-order chain (i, i+1), the prior. Its weight is what an unobserved
/// chain pair is expected to carry: `(1 - coverage) × the mean observed pair`, where coverage
/// = pairs observed in `m` / `total_pairs` (the estimated number of sharing pairs, see
/// [`estimated_pairs`]; unknown counts as coverage 0). A thin profile has seen a small part of
/// the pairs that share, so a chain pair it has not seen may well share, and a plan must not
/// cut it for free (a strategy would otherwise group the observed fragments in any order,
/// cutting the unobserved pairs between them). A profile that has seen all the sharing pairs
/// gives the chain no weight beyond [`PRIOR_WEIGHT`] × the mean per-thread sharing, which still
/// makes a thread without data join its creation-order neighbours and breaks ties the prior's
/// way.
pub fn blend(m: &CommMatrix, total_pairs: Option<f64>) -> CommMatrix {
    let n = m.n();
    let mut out = m.clone();
    let (mut sum, mut pairs) = (0.0, 0usize);
    let mut rows = vec![0.0; n];
    for i in 0..n {
        for j in (i + 1)..n {
            let v = m.get(i, j);
            if v > 0.0 {
                sum += v;
                pairs += 1;
                rows[i] += v;
                rows[j] += v;
            }
        }
    }
    if pairs == 0 {
        return out;
    }
    let with_data: Vec<f64> = rows.into_iter().filter(|&r| r > 0.0).collect();
    let floor = PRIOR_WEIGHT * with_data.iter().sum::<f64>() / with_data.len() as f64;
    let coverage = total_pairs.map_or(0.0, |t| (pairs as f64 / t).min(1.0));
    let lambda = floor.max((1.0 - coverage) * sum / pairs as f64);
    for i in 1..n {
        out.add_sym(i - 1, i, lambda);
    }
    out
}

/// Thread -> index into `t.pus` of a plan that binds every thread.
/// The plan spreads the memory load clearly better than creation order: compact's node loads
/// are uneven (Load_std at least `BALANCE_MIN` of the mean node load) and the plan's spread is
/// at most `BALANCE_GAIN` of theirs. A modest difference in a noisy load vector does not
/// count: it once let a plan that cut more true sharing than compact through (the stencil test).
fn balances_clearly(
    plan: &mapper::Metrics,
    prior: &mapper::Metrics,
    profile: &Profile,
    topology: &Topology,
) -> bool {
    let mean = profile.load.iter().sum::<f64>() / topology.numa.len().max(1) as f64;
    prior.load_std >= BALANCE_MIN * mean && plan.load_std <= BALANCE_GAIN * prior.load_std
}

/// The entries of `m` on the pairs with events in both halves `a` and `b`.
fn seen_in_both(m: &CommMatrix, a: &CommMatrix, b: &CommMatrix) -> CommMatrix {
    let n = m.n();
    let mut out = CommMatrix::zeros(n);
    for i in 0..n {
        for j in (i + 1)..n {
            if a.get(i, j) > 0.0 && b.get(i, j) > 0.0 {
                out.add_sym(i, j, m.get(i, j));
            }
        }
    }
    out
}

/// `plan` with `m` (metrics on the profile's own matrix), keeping its mapping time.
fn with_metrics(mut plan: Plan, m: mapper::Metrics) -> Plan {
    plan.metrics = mapper::Metrics {
        mapping_ms: plan.metrics.mapping_ms,
        ..m
    };
    plan
}

fn pus_of(plan: &Plan, t: &Topology, n: usize) -> Result<Vec<usize>> {
    let mut pus = vec![usize::MAX; n];
    for a in &plan.assignment {
        let p = t.pu_position(a.pu).ok_or_else(|| {
            MapError::Strategy(format!(
                "plan of '{}' puts thread {} on PU {}, which is not in the topology",
                plan.strategy, a.thread, a.pu
            ))
        })?;
        if let Some(slot) = pus.get_mut(a.thread) {
            *slot = p;
        }
    }
    if let Some(t) = pus.iter().position(|&p| p == usize::MAX) {
        return Err(MapError::Strategy(format!(
            "plan of '{}' places no PU for thread {t}",
            plan.strategy
        )));
    }
    Ok(pus)
}
