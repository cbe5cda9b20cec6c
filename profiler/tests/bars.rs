//! The bars, measured with real sampling on this machine (no hardware PMU: the `watch`
//! backend, which `auto` picks here), on the workloads of `tests/workloads` with 8 threads on
//! however many CPUs there are (2 vCPUs here: oversubscribed).
//!
//! * ring: each thread's strongest partner is a true neighbour (i±1) for >= 7 of 8 threads;
//! * no sharing: off-diagonal mass < 10 % of the ring's;
//! * skewed load: the threads that stream 4x more memory rank on top of the load vector.

mod common;

use profile::Profile;
use profiler::{run_profile, Backend, ProfileConfig, Target};
use std::sync::{Mutex, OnceLock};

static SERIAL: Mutex<()> = Mutex::new(());
const THREADS: usize = 8;
const SECONDS: f64 = 2.0;

fn profile(name: &str) -> Profile {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = ProfileConfig::new(Target::Launch(common::argv(name, THREADS, SECONDS)));
    cfg.backend = Backend::Watch;
    let run = run_profile(&cfg).unwrap();
    assert!(run.exit_status.unwrap().success());
    assert_eq!(run.profile.meta.threads.len(), THREADS, "{name}");
    run.profile
}

fn ring() -> &'static Profile {
    static P: OnceLock<Profile> = OnceLock::new();
    P.get_or_init(|| profile("ring"))
}

fn off_diagonal(p: &Profile) -> f64 {
    let c = &p.comm;
    (0..c.n())
        .flat_map(|i| (0..c.n()).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| c.get(i, j))
        .sum()
}

#[test]
fn ring_strongest_partner_is_a_neighbour() {
    let c = &ring().comm;
    let mut good = 0;
    let mut report = String::new();
    for i in 0..THREADS {
        let row: Vec<f64> = (0..THREADS).map(|j| c.get(i, j)).collect();
        let (best, &v) = row
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap();
        let neighbour = best == (i + 1) % THREADS || best == (i + THREADS - 1) % THREADS;
        if v > 0.0 && neighbour {
            good += 1;
        }
        report.push_str(&format!("thread {i}: {row:?} -> {best}\n"));
    }
    assert!(
        good >= 7,
        "only {good}/8 threads have a neighbour as strongest partner:\n{report}"
    );
}

#[test]
fn no_sharing_has_under_a_tenth_of_the_ring_mass() {
    let ring_mass = off_diagonal(ring());
    let none = off_diagonal(&profile("nosharing"));
    assert!(ring_mass > 0.0);
    assert!(
        none < 0.1 * ring_mass,
        "no-sharing off-diagonal mass {none} vs ring {ring_mass}"
    );
}

#[test]
fn skewed_heavy_threads_top_the_load_vector() {
    let p = profile("skewed");
    // The workload's heavy threads: creation index w with w % 4 == 1.
    let heavy: Vec<usize> = (0..THREADS).filter(|w| w % 4 == 1).collect();
    let mut order: Vec<usize> = (0..THREADS).collect();
    order.sort_by(|&a, &b| p.load[b].total_cmp(&p.load[a]));
    let mut top = order[..heavy.len()].to_vec();
    top.sort();
    assert_eq!(top, heavy, "load vector {:?}", p.load);
}
