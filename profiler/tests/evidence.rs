//! Evidence and the do-no-harm guard on live profiles of the stencil workloads, whose true
//! sharing is known by construction (`WL_TRUTH`), with more threads than this VM's 2 CPUs.
//! Plans are scored on the true matrix on a synthetic machine of 4 NUMA nodes (RemoteComm is 0
//! for every plan on this VM's single node).

mod common;

use mapper::read_comm_csv;
use mapper::remote_comm;
use mapper::MapInput;
use mapper::StrategySpec;
use mapper::{CommMatrix, Plan, Topology};
use profile::Profile;
use profiler::{run_profile, Backend, ProfileConfig, Target};
use step::guard::{self, TOLERANCE};

/// The workload's true matrix (default seed, as in the profiled run).
fn truth(name: &str, threads: usize) -> CommMatrix {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truth.csv");
    let argv = common::argv(name, threads, 0.01);
    let st = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env("WL_TRUTH", &path)
        .env("WL_KIB", "64")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    read_comm_csv(&path, false).unwrap()
}

fn profile(name: &str, threads: usize, secs: f64) -> Profile {
    let mut cfg = ProfileConfig::new(Target::Launch(common::argv(name, threads, secs)));
    cfg.backend = Backend::Watch;
    let run = run_profile(&cfg).unwrap();
    assert!(run.exit_status.unwrap().success());
    run.profile
}

fn pus(plan: &Plan, topo: &Topology) -> Vec<usize> {
    let mut v = vec![0; plan.assignment.len()];
    for a in &plan.assignment {
        v[a.thread] = topo.pu_position(a.pu).unwrap();
    }
    v
}

/// (chosen, unguarded, compact, random mean over 10 seeds) RemoteComm on the truth, and the
/// guard's line.
fn score(p: &Profile, t: &CommMatrix, topo: &Topology) -> (f64, f64, f64, f64, String) {
    let plan = |name: &str, m: &CommMatrix, seed: u64| {
        mapper::plan(
            &StrategySpec::parse(name).unwrap(),
            &MapInput {
                comm: m,
                load: &p.load,
                topology: topo,
                seed,
            },
            None,
        )
        .unwrap()
    };
    let c = guard::choose(p, topo, &|m| Ok(plan("cmlb-refine", m, 1))).unwrap();
    let rc = |x: &Plan| remote_comm(t, topo, &pus(x, topo));
    let random = (0..10).map(|s| rc(&plan("random", t, s))).sum::<f64>() / 10.0;
    let unguarded = rc(&plan("cmlb-refine", &p.comm, 1));
    (
        rc(&c.plan),
        unguarded,
        rc(&plan("compact", t, 0)),
        random,
        c.line,
    )
}

#[test]
fn stencil_profiles_carry_evidence_and_plans_never_lose_to_creation_order() {
    let topo = Topology::from_synthetic("numa:4 core:2 pu:1").unwrap();
    for name in ["stencil", "stencil-shuffled"] {
        let t = truth(name, 8);
        assert_eq!(t.n(), 8);
        // 6 s: from 3 s profiles the shuffled stencil's plan beat creation order in 4 of 5
        // runs on the 2-vCPU VM (and failed a CI run); from 6 s, in 12 of 12.
        let p = profile(name, 8, 6.0);
        assert_eq!(p.comm.n(), 8, "{name}: {:?}", p.meta.threads);
        let e = p.meta.evidence.as_ref().expect("evidence in the profile");
        assert_eq!(e.threads, 8);
        assert_eq!(e.per_thread.len(), 8);
        let (a, b) = p.halves.as_ref().expect("halves");
        for i in 0..8 {
            for j in 0..8 {
                assert!((a.get(i, j) + b.get(i, j) - p.comm.get(i, j)).abs() < 1e-9);
            }
        }
        let (chosen, unguarded, compact, random, line) = score(&p, &t, &topo);
        eprintln!(
            "{name}: {} | chosen {chosen} unguarded {unguarded} compact {compact} random \
             {random} | {line}",
            e.summary_line()
        );
        assert!(
            chosen <= (1.0 + TOLERANCE) * compact,
            "{name}: chosen {chosen} compact {compact}: {line}"
        );
        if name == "stencil-shuffled" {
            // Creation order tells nothing here (compact cuts all 7 neighbour pairs on this
            // machine); the profile must show enough of the slabs' neighbours that the
            // strategy's own plan beats it (3 = the optimum; 4-6 even before issue 16).
            assert_eq!(compact, 7.0);
            assert!(
                unguarded < compact,
                "{name}: unguarded plan {unguarded}: {line}"
            );
        }
    }
}
