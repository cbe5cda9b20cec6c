//! Mapping quality on real matrices (the quality bar; README "Mapping quality").
//!
//! The ten EagerMap example matrices (nine NAS-MPI 32-task, SP-OMP 64-thread), each on a
//! synthetic topology with exactly n PUs and 2 or 4 NUMA nodes, with two load vectors:
//! the first quarter of the threads 4× heavier, and seeded log-normal loads. The same again on
//! 2n cores (half of them free), where the default may size the NUMA groups by load.
//!
//! Print the table: `cargo test -p cmlb-mapper --release --test quality -- --nocapture`

mod common;

use mapper::Topology;
use mapper::{MapInput, DEFAULT_STRATEGY as DEFAULT};

struct Row {
    matrix: String,
    numa: u32,
    strategy: String,
    remote: f64,
    std: f64,
}

fn run(loads: &dyn Fn(usize) -> Vec<f64>, strategies: &[&str]) -> Vec<Row> {
    run_on(loads, strategies, 1)
}

/// `spare` cores per thread: 1 = the threads fill the machine, 2 = half of the cores are free.
fn run_on(loads: &dyn Fn(usize) -> Vec<f64>, strategies: &[&str], spare: u32) -> Vec<Row> {
    let mut rows = Vec::new();
    for (name, comm) in common::nas_matrices() {
        let n = comm.n();
        let load = loads(n);
        for numa in [2u32, 4] {
            let topo: Topology = common::uniform(numa, 1, spare * n as u32 / numa, 1);
            let input = MapInput {
                comm: &comm,
                load: &load,
                topology: &topo,
                seed: 1,
            };
            for s in strategies {
                let p = common::plan_named(s, &input).expect("plan");
                rows.push(Row {
                    matrix: name.clone(),
                    numa,
                    strategy: s.to_string(),
                    remote: p.metrics.remote_comm,
                    std: p.metrics.load_std,
                });
            }
        }
    }
    rows
}

fn total(rows: &[Row], s: &str, f: impl Fn(&Row) -> f64) -> f64 {
    rows.iter().filter(|r| r.strategy == s).map(f).sum()
}

fn print_table(title: &str, rows: &[Row], strategies: &[&str]) {
    println!("\n{title}");
    print!("{:<8} {:>4}", "matrix", "numa");
    for s in strategies {
        print!(" | {:>12} {:>9}", format!("{s} RC"), "Load_std");
    }
    println!();
    let mut keys: Vec<(String, u32)> = rows.iter().map(|r| (r.matrix.clone(), r.numa)).collect();
    keys.dedup();
    for (m, numa) in keys {
        print!("{m:<8} {numa:>4}");
        for s in strategies {
            let r = rows
                .iter()
                .find(|r| r.matrix == m && r.numa == numa && r.strategy == *s)
                .unwrap();
            print!(" | {:>12.0} {:>9.3}", r.remote, r.std);
        }
        println!();
    }
    print!("{:<13}", "sum");
    for s in strategies {
        print!(
            " | {:>12.0} {:>9.3}",
            total(rows, s, |r| r.remote),
            total(rows, s, |r| r.std)
        );
    }
    println!();
    let (e_rc, e_std) = (
        total(rows, "eagermap", |r| r.remote),
        total(rows, "eagermap", |r| r.std),
    );
    print!("{:<13}", "vs eagermap");
    for s in strategies {
        print!(
            " | {:>11.3}x {:>8.2}%",
            total(rows, s, |r| r.remote) / e_rc,
            100.0 * total(rows, s, |r| r.std) / e_std
        );
    }
    println!();
}

/// Summed Load_std of `strategy` at most 5 % of EagerMap's (the balance bar).
fn assert_load_std_within_5_percent_of_eagermap(rows: &[Row], strategy: &str) {
    let sd = |s| total(rows, s, |r| r.std);
    assert!(
        sd(strategy) <= 0.05 * sd("eagermap"),
        "{strategy} Load_std {} vs eagermap {}",
        sd(strategy),
        sd("eagermap")
    );
}

const SHOWN: [&str; 4] = ["eagermap", "eagermap-lb", "cmlb", DEFAULT];

/// Threads filling the machine. Asserted: the faithful `cmlb` shows the thesis's trade-off, and
/// the default keeps the balance bar (Load_std <= 5 % of EagerMap's) and beats `cmlb`. The
/// issue's RemoteComm bar (<= 1.15x EagerMap's) is out of reach here for any balanced plan:
/// SP-OMP alone puts the set at 1.173x (docs/strategies.md, "Why the default stays at 1.19x");
/// the last assertion keeps the measured 1.189x from creeping up.
#[test]
fn quarter_heavy_loads_full_machine_balanced_and_better_than_thesis() {
    let rows = run(&common::quarter_heavy, &SHOWN);
    print_table(
        "NAS matrices, first quarter of threads 4x load (RC = RemoteComm)",
        &rows,
        &SHOWN,
    );
    let rc = |s| total(&rows, s, |r| r.remote);
    // The faithful thesis grouping: balanced, at a communication cost.
    assert_load_std_within_5_percent_of_eagermap(&rows, "cmlb");
    assert!(
        rc("cmlb") > rc("eagermap"),
        "cmlb RemoteComm {} vs eagermap {}",
        rc("cmlb"),
        rc("eagermap")
    );
    // The default: balanced and close to EagerMap's communication.
    assert_load_std_within_5_percent_of_eagermap(&rows, DEFAULT);
    assert!(
        rc(DEFAULT) < rc("cmlb"),
        "{DEFAULT} must beat the faithful cmlb"
    );
    assert!(
        rc(DEFAULT) <= 1.20 * rc("eagermap"),
        "{DEFAULT} RemoteComm {} vs eagermap {} (measured 1.189x)",
        rc(DEFAULT),
        rc("eagermap")
    );
}

#[test]
fn lognormal_loads_default_never_less_balanced_than_eagermap() {
    let loads = |n| common::lognormal_loads(n, 42);
    let rows = run(&loads, &SHOWN);
    print_table(
        "NAS matrices, log-normal loads (sigma 1, seed 42)",
        &rows,
        &SHOWN,
    );
    assert_default_never_less_balanced_than_eagermap(&rows);
}

/// Per case (matrix × NUMA count), not only summed.
fn assert_default_never_less_balanced_than_eagermap(rows: &[Row]) {
    for d in rows.iter().filter(|r| r.strategy == DEFAULT) {
        let e = rows
            .iter()
            .find(|r| r.strategy == "eagermap" && r.matrix == d.matrix && r.numa == d.numa)
            .unwrap();
        assert!(
            d.std <= e.std,
            "{} on {} NUMA: {DEFAULT} Load_std {} > eagermap {}",
            d.matrix,
            d.numa,
            d.std,
            e.std
        );
    }
}

/// Half of the cores free (n threads on 2n cores, as memory-bound codes often run): the default
/// may then size the NUMA groups by load, so a node of heavy threads holds fewer of them.
#[test]
fn spare_cores_let_the_default_match_eagermap_communication_balanced() {
    let rows = run_on(&common::quarter_heavy, &SHOWN, 2);
    print_table(
        "NAS matrices on 2n cores, first quarter of threads 4x load",
        &rows,
        &SHOWN,
    );
    let rc = |s| total(&rows, s, |r| r.remote);
    assert_load_std_within_5_percent_of_eagermap(&rows, DEFAULT);
    assert!(
        rc(DEFAULT) <= 1.15 * rc("eagermap"),
        "{DEFAULT} RemoteComm {} vs eagermap {}",
        rc(DEFAULT),
        rc("eagermap")
    );

    let loads = |n| common::lognormal_loads(n, 42);
    let rows = run_on(&loads, &SHOWN, 2);
    print_table(
        "NAS matrices on 2n cores, log-normal loads (sigma 1, seed 42)",
        &rows,
        &SHOWN,
    );
    assert_default_never_less_balanced_than_eagermap(&rows);
}

/// The default's annealing step (after KL), threads filling the machine. Quarter-heavy loads:
/// never worse in any case, and on the 32-task NAS matrices it finds exactly balanced groupings
/// KL's single swaps cannot reach (bt, sp and mg on 2 and 4 nodes, cg on 2). Log-normal loads,
/// where almost no single swap keeps the balance: clearly lower RemoteComm over the set.
#[test]
fn annealing_escapes_the_pair_exchange_optimum() {
    const KL_ONLY: &str = "cmlb-refine:anneal=0";
    let shown = ["eagermap", DEFAULT, KL_ONLY];
    let rows = run(&common::quarter_heavy, &shown);
    print_table(
        "NAS matrices, first quarter 4x load: default with and without annealing",
        &rows,
        &shown,
    );
    for d in rows.iter().filter(|r| r.strategy == DEFAULT) {
        let k = rows
            .iter()
            .find(|r| r.strategy == KL_ONLY && r.matrix == d.matrix && r.numa == d.numa)
            .unwrap();
        assert!(
            d.remote <= k.remote && d.std <= 1e-9,
            "{} on {} NUMA: annealed RemoteComm {} Load_std {} vs KL only {}",
            d.matrix,
            d.numa,
            d.remote,
            d.std,
            k.remote
        );
    }
    let nas32 = |s: &str| -> f64 {
        rows.iter()
            .filter(|r| r.strategy == s && r.matrix != "SP-OMP")
            .map(|r| r.remote)
            .sum()
    };
    // Measured 0.960 (seed 1); without annealing the ratio is 1 and this fails.
    assert!(
        nas32(DEFAULT) <= 0.975 * nas32(KL_ONLY),
        "annealed {} vs KL only {}",
        nas32(DEFAULT),
        nas32(KL_ONLY)
    );

    let loads = |n| common::lognormal_loads(n, 42);
    let rows = run(&loads, &shown);
    print_table(
        "NAS matrices, log-normal loads: default with and without annealing",
        &rows,
        &shown,
    );
    let rc = |s| total(&rows, s, |r| r.remote);
    // Measured 0.952 (seed 1; 0.92-0.97 for seeds 1-4).
    assert!(
        rc(DEFAULT) <= 0.98 * rc(KL_ONLY),
        "annealed {} vs KL only {}",
        rc(DEFAULT),
        rc(KL_ONLY)
    );
}
