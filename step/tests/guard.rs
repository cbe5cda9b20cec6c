//! The do-no-harm guard on profiles whose true sharing is known: sharing events are drawn from
//! a true matrix the way the watch backend sees them (bursts of hits on one watched word, plus
//! background noise), split into halves by word, then thinned to a few percent. The chosen
//! plan is scored on the true matrix.

use mapper::remote_comm;
use mapper::MapInput;
use mapper::{CommMatrix, Plan, StrategySpec, Topology};
use profile::{Profile, ProfileMeta, ThreadInfo};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use step::guard::{self, TOLERANCE};

/// Known patterns of n threads (true matrices, weight 1 per sharing pair).
fn truth(kind: &str, n: usize, rng: &mut ChaCha8Rng) -> CommMatrix {
    let mut m = CommMatrix::zeros(n);
    let mut order: Vec<usize> = (0..n).collect();
    if kind == "stencil-shuffled" || kind == "clusters-shuffled" {
        order.shuffle(rng);
    }
    match kind {
        "stencil" | "stencil-shuffled" => {
            for s in 1..n {
                m.add_sym(order[s - 1], order[s], 1.0);
            }
        }
        "ring" => {
            for i in 0..n {
                m.add_sym(i, (i + 1) % n, 1.0);
            }
        }
        "pairs" => {
            for i in (0..n).step_by(2) {
                m.add_sym(i, i + 1, 1.0);
            }
        }
        "clusters" | "clusters-shuffled" => {
            for i in 0..n {
                for j in (i + 1)..n {
                    if i / 4 == j / 4 {
                        m.add_sym(order[i], order[j], 1.0);
                    }
                }
            }
        }
        "alltoall" => {
            for i in 0..n {
                for j in (i + 1)..n {
                    m.add_sym(i, j, 1.0);
                }
            }
        }
        _ => panic!("{kind}"),
    }
    m
}

/// A profile of `words` watched words: each word is one pair (drawn in proportion to the true
/// matrix, or any pair with probability `noise`) and gives a burst of 1..=40 events on its
/// cache line; words go to half A or B alternately (the profiler splits by cache line), and
/// each counts one line for its pair in its half.
fn sampled(t: &CommMatrix, words: usize, noise: f64, rng: &mut ChaCha8Rng) -> Profile {
    let n = t.n();
    let mut pairs = Vec::new();
    for i in 0..n {
        for j in (i + 1)..n {
            if t.get(i, j) > 0.0 {
                pairs.push((i, j));
            }
        }
    }
    let (mut a, mut b) = (CommMatrix::zeros(n), CommMatrix::zeros(n));
    let (mut la, mut lb) = (CommMatrix::zeros(n), CommMatrix::zeros(n));
    for w in 0..words {
        let (i, j) = if rng.gen_bool(noise) {
            let i = rng.gen_range(0..n);
            let mut j = rng.gen_range(0..n - 1);
            if j >= i {
                j += 1;
            }
            (i, j)
        } else {
            pairs[rng.gen_range(0..pairs.len())]
        };
        let burst = f64::from(rng.gen_range(1..=40u32));
        if w % 2 == 0 { &mut a } else { &mut b }.add_sym(i, j, burst);
        if w % 2 == 0 { &mut la } else { &mut lb }.add_sym(i, j, 1.0);
    }
    let mut comm = a.clone();
    for i in 0..n {
        for j in (i + 1)..n {
            comm.add_sym(i, j, b.get(i, j));
        }
    }
    let mut p = Profile {
        meta: ProfileMeta {
            duration_s: 1.0,
            samples: words as u64,
            ..ProfileMeta::new(&["./synthetic"], "watch", n, ThreadInfo::new(0, "", 1, 1))
        },
        comm,
        load: vec![1.0; n],
        timeline: Vec::new(),
        halves: Some((a, b)),
        lines: Some((la, lb)),
        cpu: None,
    };
    p.update_evidence(1);
    p
}

/// What every test hands `guard::choose`: `strategy` planning each matrix it is given, with
/// `load` and seed 1.
fn planner<'a>(
    strategy: &'a str,
    load: &'a [f64],
    topology: &'a Topology,
) -> impl Fn(&CommMatrix) -> mapper::Result<Plan> + 'a {
    move |m| {
        mapper::plan(
            &StrategySpec::parse(strategy)?,
            &MapInput {
                comm: m,
                load,
                topology,
                seed: 1,
            },
            None,
        )
    }
}

fn pus(plan: &Plan, topo: &Topology) -> Vec<usize> {
    let mut v = vec![0; plan.assignment.len()];
    for a in &plan.assignment {
        v[a.thread] = topo.pu_position(a.pu).unwrap();
    }
    v
}

struct Outcome {
    chosen: f64,
    compact: f64,
    used_prior: bool,
    line: String,
}

impl Outcome {
    /// The stated tolerance: the chosen plan's true RemoteComm at most (1 + TOLERANCE) x
    /// compact's. `case` names the case in the failure message.
    fn assert_within_tolerance(&self, case: &str) {
        assert!(
            self.chosen <= (1.0 + TOLERANCE) * self.compact,
            "{case}: chosen {} vs compact {} ({})",
            self.chosen,
            self.compact,
            self.line
        );
    }
}

fn decide(p: &Profile, t: &CommMatrix, topo: &Topology, strategy: &str) -> Outcome {
    let load = vec![1.0; t.n()];
    let plan_with = planner(strategy, &load, topo);
    let c = guard::choose(p, topo, &plan_with).unwrap();
    let compact = mapper::plan(
        &StrategySpec::compact(),
        &MapInput {
            comm: t,
            load: &load,
            topology: topo,
            seed: 0,
        },
        None,
    )
    .unwrap();
    Outcome {
        chosen: remote_comm(t, topo, &pus(&c.plan, topo)),
        compact: remote_comm(t, topo, &pus(&compact, topo)),
        used_prior: c.used_prior,
        line: c.line,
    }
}

const KINDS: [&str; 7] = [
    "stencil",
    "stencil-shuffled",
    "ring",
    "pairs",
    "clusters",
    "clusters-shuffled",
    "alltoall",
];

/// Thinned to a few percent of a full profile's words (1 000 words → 10–100), with 10 % noise:
/// never more than the stated tolerance worse than compact on the true matrix, over every
/// pattern, two strategies and several seeds.
#[test]
fn thin_profiles_never_lose_to_compact_beyond_the_tolerance() {
    let topo = Topology::from_synthetic("numa:4 core:4 pu:2").unwrap();
    let mut kept = 0;
    let mut cases = 0;
    for strategy in ["cmlb-refine:anneal=0", "eagermap"] {
        for kind in KINDS {
            for seed in 0..8u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let t = truth(kind, 32, &mut rng);
                for words in [10, 20, 50, 100] {
                    let p = sampled(&t, words, 0.1, &mut rng);
                    let o = decide(&p, &t, &topo, strategy);
                    cases += 1;
                    kept += usize::from(!o.used_prior);
                    o.assert_within_tolerance(&format!(
                        "{strategy} {kind} seed {seed} {words} words"
                    ));
                }
            }
        }
    }
    // The guard is not simply "always compact": some thin profiles still carry enough.
    assert!(kept > 0, "no plan kept in {cases} cases");
}

/// Full profiles (1 000 words, 10 % noise): where creation order tells nothing the plan is
/// kept and wins; where it is already optimal the chosen plan is no worse than compact.
#[test]
fn full_profiles_keep_the_plan_where_it_wins() {
    let topo = Topology::from_synthetic("numa:4 core:4 pu:2").unwrap();
    for kind in KINDS {
        for seed in 0..3u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let t = truth(kind, 32, &mut rng);
            let p = sampled(&t, 1000, 0.1, &mut rng);
            let o = decide(&p, &t, &topo, "cmlb-refine");
            assert!(o.chosen <= o.compact, "{kind} {seed}: {}", o.line);
            if kind.ends_with("shuffled") {
                assert!(!o.used_prior, "{kind} {seed}: {}", o.line);
                assert!(
                    o.chosen <= 0.5 * o.compact,
                    "{kind} {seed}: chosen {} compact {} ({})",
                    o.chosen,
                    o.compact,
                    o.line
                );
                assert!(
                    o.line.starts_with("plan kept: held-out RemoteComm"),
                    "{}",
                    o.line
                );
            }
        }
    }
}

/// Threads without data follow their creation-order neighbours instead of being scattered.
#[test]
fn threads_without_data_are_placed_by_creation_order() {
    let topo = Topology::from_synthetic("numa:2 core:8 pu:1").unwrap();
    // Two cliques: {0, 2, 4, 6, 8, 10, 12} and {3, 5, 7, 9, 11, 13, 14, 15}; thread 1 has no
    // data, and its creation-order neighbours (0 and 2) are both in the first clique.
    let x = [0, 2, 4, 6, 8, 10, 12];
    let y = [3, 5, 7, 9, 11, 13, 14, 15];
    let mut t = CommMatrix::zeros(16);
    for g in [&x[..], &y[..]] {
        for (k, &i) in g.iter().enumerate() {
            for &j in &g[k + 1..] {
                t.add_sym(i, j, 50.0);
            }
        }
    }
    let b = guard::blend(&t, Some(12.0));
    assert!(b.get(0, 1) > 0.0 && b.get(1, 2) > 0.0);
    assert!(b.get(2, 3) > t.get(2, 3) && b.get(0, 4) == t.get(0, 4));
    let mut p = sampled(&t, 0, 0.0, &mut ChaCha8Rng::seed_from_u64(1));
    let plan_with = planner("cmlb-refine", &[1.0; 16], &topo);
    // The sampled profile of 0 words has no data at all: compact, and it says why.
    let o = guard::choose(&p, &topo, &plan_with).unwrap();
    assert!(o.used_prior, "{}", o.line);
    assert!(
        o.line.starts_with("profile has no sharing data"),
        "{}",
        o.line
    );
    let mut full = t.clone();
    for i in 0..16 {
        for j in (i + 1)..16 {
            full.add_sym(i, j, t.get(i, j));
        }
    }
    p.comm = full;
    p.halves = Some((t.clone(), t.clone()));
    p.lines = None;
    let o = guard::choose(&p, &topo, &plan_with).unwrap();
    assert!(!o.used_prior, "{}", o.line);
    let node = |th: usize| o.plan.assignment[th].numa;
    assert_eq!(node(1), node(0), "{:?}", o.plan.assignment);
    for &i in &x {
        assert_eq!(node(i), node(0));
    }
    assert!(
        o.line
            .contains("1 of 16 threads without sharing data placed by creation order"),
        "{}",
        o.line
    );
    // The plan's metrics are the profile's own matrix's, not the blended one's.
    assert_eq!(o.plan.metrics.remote_comm, 0.0);
}

/// Profiles without halves (older cmlb): in-sample only, and only with data for every thread.
#[test]
fn profiles_without_halves_are_judged_in_sample() {
    let topo = Topology::from_synthetic("numa:4 core:4 pu:2").unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let t = truth("stencil-shuffled", 32, &mut rng);
    let mut p = sampled(&t, 2000, 0.0, &mut rng);
    p.halves = None;
    p.lines = None;
    let o = decide(&p, &t, &topo, "cmlb-refine");
    assert!(!o.used_prior, "{}", o.line);
    assert!(
        o.line.contains("in-sample (no held-out halves"),
        "{}",
        o.line
    );
    let mut thin = sampled(&t, 10, 0.0, &mut rng);
    thin.halves = None;
    thin.lines = None;
    let o = decide(&thin, &t, &topo, "cmlb-refine");
    assert!(o.used_prior, "{}", o.line);
    assert!(o.line.contains("without held-out halves"), "{}", o.line);
}

/// A program whose threads share nothing but whose loads are skewed: communication cannot tell
/// plans apart, the memory loads can. The default's balanced plan is kept (creation order would
/// put both heavy threads on one node); with equal loads creation order stays.
#[test]
fn no_sharing_data_keeps_a_plan_that_balances_the_loads() {
    let topo = Topology::from_synthetic("numa:2 core:4 pu:1").unwrap();
    let zero = CommMatrix::zeros(8);
    let mut p = sampled(&zero, 0, 0.0, &mut ChaCha8Rng::seed_from_u64(3));
    for (load, kept) in [
        (vec![1.0, 4.0, 1.0, 4.0, 1.0, 1.0, 1.0, 1.0], true),
        (vec![1.0; 8], false),
    ] {
        p.load = load.clone();
        let plan_with = planner("cmlb-refine", &load, &topo);
        let o = guard::choose(&p, &topo, &plan_with).unwrap();
        assert_eq!(!o.used_prior, kept, "{:?}: {}", load, o.line);
        if kept {
            assert!(o.line.contains("memory-load balance"), "{}", o.line);
            assert_eq!(o.plan.metrics.load_std, 0.0, "{}", o.line);
        }
        // A few stray sharing events (too thin to carry a plan) change nothing.
        let mut noisy = p.clone();
        let mut a = CommMatrix::zeros(8);
        a.add_sym(2, 6, 1.0);
        noisy.comm = a.clone();
        noisy.halves = Some((a, CommMatrix::zeros(8)));
        noisy.lines = None;
        let o = guard::choose(&noisy, &topo, &plan_with).unwrap();
        assert_eq!(!o.used_prior, kept, "thin, {:?}: {}", load, o.line);
        if kept {
            assert!(o.line.contains("balances memory load"), "{}", o.line);
        }
    }
}

/// tests/numa finding 6: a program that shares nothing, with two heavy threads creation order
/// puts on one node, and two stray sharing events between exactly those threads, all in one
/// half (a `faults` pre-run of `skewed`). The held-out check cannot confirm the pair, so it
/// must not veto the plan that splits the heavy threads: compact's RemoteComm 0 against the
/// plan's 2 is noise, the balance is many times better. A pair seen in both halves still
/// counts.
#[test]
fn stray_events_in_one_half_do_not_veto_a_balanced_plan() {
    let topo = Topology::from_synthetic("numa:2 core:4 pu:1").unwrap();
    let load = vec![1.0, 4.0, 1.0, 4.0, 1.0, 1.0, 1.0, 1.0];
    let mut p = sampled(
        &CommMatrix::zeros(8),
        0,
        0.0,
        &mut ChaCha8Rng::seed_from_u64(3),
    );
    p.load = load.clone();
    let plan_with = planner("cmlb-refine", &load, &topo);
    // Compact puts threads 0-3 on node 0: both heavy threads (1, 3) together.
    let mut stray = CommMatrix::zeros(8);
    stray.add_sym(1, 3, 2.0);
    let mut one_half = p.clone();
    one_half.comm = stray.clone();
    one_half.halves = Some((stray.clone(), CommMatrix::zeros(8)));
    one_half.lines = None;
    let o = guard::choose(&one_half, &topo, &plan_with).unwrap();
    assert!(!o.used_prior, "{}", o.line);
    assert!(o.line.contains("balances memory load"), "{}", o.line);
    assert_eq!(o.plan.metrics.load_std, 0.0, "{}", o.line);

    // The same pair seen in both halves is confirmed sharing: splitting it costs
    // communication compact does not pay, and compact stays.
    let mut half = CommMatrix::zeros(8);
    half.add_sym(1, 3, 1.0);
    let mut both = p.clone();
    both.comm = stray;
    both.halves = Some((half.clone(), half));
    both.lines = None;
    let o = guard::choose(&both, &topo, &plan_with).unwrap();
    assert!(o.used_prior, "{}", o.line);
}

/// The same on the 4x1 guest's shape (4 NUMA nodes of one PU, 8 threads: two per PU), where
/// compact puts creation-order neighbours together (t0,t1 | t2,t3 | ...) and so the heavy
/// threads 2 and 3, and the stray pair is (2, 3). There the best plan's Load_std is 0.577 of
/// compact's (node loads 5, 5, 2, 2 against 2, 8, 2, 2), and the guard once asked for half:
/// every plan went back to compact and put 0.571 of the memory on one node (CI, 2026-11-26,
/// when compact dealt t and t+4 together). `BALANCE_GAIN` is 0.7.
#[test]
fn heavy_threads_split_on_four_one_pu_nodes() {
    let topo = Topology::from_synthetic("numa:4 core:1 pu:1").unwrap();
    let load = vec![1.0, 1.0, 4.0, 4.0, 1.0, 1.0, 1.0, 1.0];
    let mut p = sampled(
        &CommMatrix::zeros(8),
        0,
        0.0,
        &mut ChaCha8Rng::seed_from_u64(3),
    );
    p.load = load.clone();
    let plan_with = planner("cmlb-refine", &load, &topo);
    let mut stray = CommMatrix::zeros(8);
    stray.add_sym(2, 3, 1.0);
    p.comm = stray.clone();
    p.halves = Some((stray, CommMatrix::zeros(8)));
    p.lines = None;
    let o = guard::choose(&p, &topo, &plan_with).unwrap();
    assert!(!o.used_prior, "{}", o.line);
    assert!(o.line.contains("balances memory load"), "{}", o.line);
    let node = |t: usize| {
        let pu = o.plan.assignment.iter().find(|a| a.thread == t).unwrap().pu;
        topo.pu_position(pu).unwrap()
    };
    assert_ne!(node(2), node(3), "heavy threads together: {}", o.line);
}

/// The quick-start demo's program shape: 4 threads, two pairs hammering one array each,
/// profiled on this VM (one NUMA node, 2 PUs; `compact` puts threads 0 and 1 on one PU), with
/// partners (0, 2) and (1, 3) that creation order does not pair.
/// The held-out halves agree on both pairs, each seen on many watched words: too few pairs for
/// the pair test, plenty of lines for the line test. The plan is kept and pairs the partners.
#[test]
fn demo_sized_pairs_profile_keeps_the_plan() {
    let vm = Topology::from_synthetic("core:2 pu:1").unwrap();
    let two_nodes = Topology::from_synthetic("numa:2 core:2 pu:1").unwrap();
    // Compact pairs (0, 1) and (2, 3) on both machines: the pairs are shuffled.
    let mut shuffled = CommMatrix::zeros(4);
    shuffled.add_sym(0, 2, 1.0);
    shuffled.add_sym(1, 3, 1.0);
    // Partners share a PU on the VM (4 threads on 2 PUs), a NUMA node on the two-node machine.
    for (topo, truth, by_pu) in [(&vm, &shuffled, true), (&two_nodes, &shuffled, false)] {
        for seed in 0..8u64 {
            // 28 shared words in a 2 s demo run (its profile.yaml: watch_shared_words).
            let p = sampled(truth, 28, 0.0, &mut ChaCha8Rng::seed_from_u64(seed));
            let plan_with = planner("cmlb-refine", &[1.0; 4], topo);
            let o = guard::choose(&p, topo, &plan_with).unwrap();
            assert!(!o.used_prior, "seed {seed}: {}", o.line);
            assert!(o.line.starts_with("plan kept: held-out"), "{}", o.line);
            assert!(o.line.contains("lines better/worse"), "{}", o.line);
            let place = |th: usize| {
                let a = &o.plan.assignment[th];
                if by_pu {
                    a.pu
                } else {
                    a.numa
                }
            };
            for i in 0..4 {
                for j in (i + 1)..4 {
                    if truth.get(i, j) > 0.0 {
                        assert_eq!(place(i), place(j), "seed {seed}: {:?}", o.plan.assignment);
                    }
                }
            }
        }
    }
    // The demo's own halves (a 2 s run on this VM, `comm.a.csv` / `comm.b.csv`), with the
    // fewest lines that could give them: 28 shared words over 2 pairs and 2 halves. The demo's
    // partners are (0, 1) and (2, 3), which compact now pairs by itself: its counts are put on
    // the shuffled partners, which it does not.
    let pairs = |x: f64, y: f64| {
        let mut m = CommMatrix::zeros(4);
        m.add_sym(0, 2, x);
        m.add_sym(1, 3, y);
        m
    };
    let mut p = sampled(&shuffled, 0, 0.0, &mut ChaCha8Rng::seed_from_u64(0));
    p.comm = pairs(2377.0 + 1572.0, 3635.0 + 3389.0);
    p.halves = Some((pairs(2377.0, 3635.0), pairs(1572.0, 3389.0)));
    p.lines = Some((pairs(7.0, 7.0), pairs(7.0, 7.0)));
    p.update_evidence(1);
    let plan_with = planner("cmlb-refine", &[1.0; 4], &vm);
    let o = guard::choose(&p, &vm, &plan_with).unwrap();
    assert!(!o.used_prior, "{}", o.line);
    assert!(o.line.contains("lines better/worse 28/0"), "{}", o.line);
    // The same halves without line counts (a profile of an older cmlb): the pair test alone,
    // which four pairs cannot pass.
    p.lines = None;
    let o = guard::choose(&p, &vm, &plan_with).unwrap();
    assert!(o.used_prior, "{}", o.line);
}

/// 4 threads whose halves are noise only (every watched word a random pair, independently in
/// each half): from a handful of words to hundreds, creation order stays.
#[test]
fn four_thread_profile_with_noise_only_halves_falls_back() {
    let vm = Topology::from_synthetic("core:2 pu:1").unwrap();
    let two_nodes = Topology::from_synthetic("numa:2 core:2 pu:1").unwrap();
    let mut any = CommMatrix::zeros(4);
    any.add_sym(0, 1, 1.0);
    let mut cases = 0;
    for topo in [&vm, &two_nodes] {
        for words in [4, 8, 16, 28, 64, 200] {
            for seed in 0..16u64 {
                let p = sampled(&any, words, 1.0, &mut ChaCha8Rng::seed_from_u64(seed));
                let plan_with = planner("cmlb-refine", &[1.0; 4], topo);
                let o = guard::choose(&p, topo, &plan_with).unwrap();
                assert!(o.used_prior, "{words} words, seed {seed}: {}", o.line);
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 192);
}

/// Small programs (4-8 threads on two NUMA nodes), thinned to a few words with 10 % noise:
/// the line test that lets their plans through must keep the stated tolerance.
#[test]
fn small_thin_profiles_never_lose_to_compact_beyond_the_tolerance() {
    let mut kept = 0;
    let mut cases = 0;
    for n in [4usize, 6, 8] {
        let topo = Topology::from_synthetic(&format!("numa:2 core:{} pu:1", n / 2)).unwrap();
        for kind in KINDS {
            if kind.starts_with("clusters") && n % 4 != 0 {
                continue;
            }
            for seed in 0..8u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let t = truth(kind, n, &mut rng);
                for words in [4, 8, 16, 32, 64] {
                    let p = sampled(&t, words, 0.1, &mut rng);
                    let o = decide(&p, &t, &topo, "cmlb-refine");
                    cases += 1;
                    kept += usize::from(!o.used_prior);
                    o.assert_within_tolerance(&format!(
                        "{n} threads, {kind} seed {seed} {words} words"
                    ));
                }
            }
        }
    }
    assert!(kept > 0, "no plan kept in {cases} cases");
}

/// The 64-thread stencil of docs/evidence.md: a 4 s profile too thin to carry a plan, whose
/// load vector (equal loads by construction) came out skewed, kept a plan "for memory-load
/// balance" at held-out RemoteComm 4.00x compact and cut 4.7x compact's true communication. A
/// balance the loads claim does not excuse a plan that loses to compact on the held-out half
/// beyond the tolerance. Over thin profiles of the plane-ordered stencil and ring (compact
/// optimal) with wrongly skewed loads: no plan kept for balance has a held-out ratio above the
/// tolerance, and such plans exist among the cases (the rule is exercised). What the rule
/// cannot do: a held-out ratio near 1 (a coin flip on a few pairs) with wrong loads still keeps
/// a balanced plan; the loads themselves are not checked against held-out data.
#[test]
fn a_balance_does_not_keep_a_plan_that_loses_held_out() {
    let topo = Topology::from_synthetic("numa:4 core:4 pu:2").unwrap();
    let (mut refused, mut kept_for_balance, mut cases) = (0, 0, 0);
    for kind in ["stencil", "ring"] {
        for seed in 0..16u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
            let t = truth(kind, 32, &mut rng);
            for words in [6, 10, 20, 40] {
                let mut p = sampled(&t, words, 0.1, &mut rng);
                // Sampling artefacts: a few threads seen 20-60x more than the rest.
                let load: Vec<f64> = (0..32)
                    .map(|_| {
                        if rng.gen_bool(0.15) {
                            rng.gen_range(20.0..60.0)
                        } else {
                            rng.gen_range(0.5..1.5)
                        }
                    })
                    .collect();
                p.load = load.clone();
                let plan_with = planner("cmlb-refine:anneal=0", &load, &topo);
                let c = guard::choose(&p, &topo, &plan_with).unwrap();
                let Some(ratio) = c
                    .line
                    .split("held-out RemoteComm ")
                    .nth(1)
                    .and_then(|r| r.split('x').next())
                    .and_then(|r| r.parse::<f64>().ok())
                else {
                    continue;
                };
                cases += 1;
                if c.line.contains("balances memory load") {
                    kept_for_balance += 1;
                    assert!(
                        ratio <= 1.0 + TOLERANCE,
                        "{kind} seed {seed} {words} words: kept for balance at held-out \
                         {ratio}x compact ({})",
                        c.line
                    );
                } else if c.used_prior && ratio > 1.0 + TOLERANCE {
                    refused += 1;
                }
            }
        }
    }
    assert!(cases >= 64, "only {cases} cases with a held-out ratio");
    assert!(
        refused > 0 && kept_for_balance > 0,
        "the cases do not exercise the rule: {refused} refused, {kept_for_balance} kept for \
         balance of {cases}"
    );
}

/// The CPU timeline vetoes a plan that would make threads which ran side by side take turns
/// on one PU (bwa's worker waves on a 2-PU VM: a plan kept on its sharing ran 1.93x slower),
/// and leaves a plan alone when the threads it puts together can share a PU.
#[test]
fn a_plan_that_stacks_threads_running_at_once_is_refused() {
    use profile::cpu::CpuTimeline;
    let topo = Topology::from_synthetic("core:2 pu:1").unwrap();
    // Pairs (0, 2) and (1, 3): creation order splits both, the plan keeps them together.
    let mut t = CommMatrix::zeros(4);
    t.add_sym(0, 2, 1.0);
    t.add_sym(1, 3, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut p = sampled(&t, 1000, 0.0, &mut rng);
    let bins = 100;

    // Every thread busy all the time: two per PU is what the kernel gives them anyway.
    p.cpu = Some(CpuTimeline {
        bin_ms: 20.0,
        ms: vec![vec![10.0; bins]; 4],
    });
    let o = decide(&p, &t, &topo, "cmlb-refine");
    assert!(!o.used_prior, "{}", o.line);
    assert!(o.line.starts_with("plan kept"), "{}", o.line);

    // Threads 0 and 2 run together, then 1 and 3: the plan puts each wave on one PU.
    let busy_in_first_half = |first: bool| -> Vec<f64> {
        (0..bins)
            .map(|b| if (b < bins / 2) == first { 20.0 } else { 0.0 })
            .collect()
    };
    let ms = vec![
        busy_in_first_half(true),
        busy_in_first_half(false),
        busy_in_first_half(true),
        busy_in_first_half(false),
    ];
    p.cpu = Some(CpuTimeline { bin_ms: 20.0, ms });
    let o = decide(&p, &t, &topo, "cmlb-refine");
    assert!(o.used_prior, "{}", o.line);
    assert!(
        o.line.starts_with("plan refused: it stacks threads")
            && o.line.contains("2.00x as long as unpinned")
            && o.line.contains("threads left as they are"),
        "{}",
        o.line
    );
}
