//! Score a profile's plans on a known true matrix (the measurements of `docs/evidence.md`,
//! run by `tests/bench/profile-evidence`).
//!
//! ```text
//! cargo run --release -p cmlb-mapper --example evidence -- PROFILE_DIR TOPOLOGY STRATEGY TRUTH.csv [OPTIMUM]
//! ```
//! Prints one line of `key=value`: the profile's evidence, the guard's decision, and the true
//! RemoteComm (on TRUTH.csv) of the chosen plan, of the strategy's plan without the guard, of
//! `compact`, of `random` (mean of 20 seeds) and of the strategy run on the truth itself (the
//! best plan this strategy finds with perfect knowledge). `gap_recovered` is
//! (random - chosen) / (random - OPTIMUM) with OPTIMUM the true optimum when given (the
//! stencil's: 3 cuts of a path into 4 groups), else the strategy's best on the truth.

use mapper::read_comm_csv;
use mapper::remote_comm;
use mapper::MapInput;
use mapper::StrategySpec;
use mapper::{CommMatrix, Plan, Topology};
use profile::Profile;
use std::path::Path;

fn pus(plan: &Plan, topo: &Topology) -> Vec<usize> {
    let mut v = vec![0; plan.assignment.len()];
    for a in &plan.assignment {
        v[a.thread] = topo.pu_position(a.pu).expect("PU of the topology");
    }
    v
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 && args.len() != 5 {
        eprintln!("usage: evidence PROFILE_DIR TOPOLOGY STRATEGY TRUTH.csv [OPTIMUM]");
        std::process::exit(2);
    }
    let optimum: Option<f64> = match args.get(4) {
        Some(v) => Some(
            v.parse()
                .map_err(|_| format!("OPTIMUM must be a number, got '{v}'"))?,
        ),
        None => None,
    };
    let mut profile = Profile::read_dir(Path::new(&args[0]))?;
    if profile.meta.evidence.is_none() {
        // A profile of an older cmlb: no halves, but the counts can still be given.
        profile.update_evidence(1);
    }
    let topo = Topology::load(&args[1])?;
    let strategy = &args[2];
    let truth = read_comm_csv(Path::new(&args[3]), false)?;
    if truth.n() != profile.comm.n() {
        return Err(format!(
            "truth has {} threads, the profile {}",
            truth.n(),
            profile.comm.n()
        )
        .into());
    }
    let load = &profile.load;
    let plan_on = |name: &str, m: &CommMatrix, seed: u64| {
        mapper::plan(
            &StrategySpec::parse(name).unwrap(),
            &MapInput {
                comm: m,
                load,
                topology: &topo,
                seed,
            },
            None,
        )
    };
    let rc = |p: &Plan| remote_comm(&truth, &topo, &pus(p, &topo));
    let choice = step::guard::choose(&profile, &topo, &|m| plan_on(strategy, m, 1))?;
    let unguarded = plan_on(strategy, &profile.comm, 1)?;
    let compact = plan_on("compact", &profile.comm, 0)?;
    let random: f64 = (0..20)
        .map(|s| plan_on("random", &profile.comm, s).map(|p| rc(&p)))
        .sum::<Result<f64, _>>()?
        / 20.0;
    let best = plan_on(strategy, &truth, 1)?;
    let (rc_chosen, rc_best) = (rc(&choice.plan), rc(&best));
    let e = profile.meta.evidence.clone();
    let hits: f64 = profile
        .meta
        .params
        .get("backend.watch_hits")
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    let gap = random - optimum.unwrap_or(rc_best);
    println!(
        "threads={} samples={} seconds={:.2} samples_per_s={:.0} watch_hits={} hits_per_s={:.0} \
         sharing_events={} pairs={} without_data={} stability={} agree={} used_prior={} \
         rc_chosen={} rc_unguarded={} rc_compact={} rc_random={:.1} rc_best={} \
         gap_recovered={:.2} line=\"{}\"",
        profile.comm.n(),
        profile.meta.samples,
        profile.meta.duration_s,
        profile.meta.samples as f64 / profile.meta.duration_s.max(1e-9),
        hits,
        hits / profile.meta.duration_s.max(1e-9),
        e.as_ref().map_or(0.0, |e| e.sharing_events),
        e.as_ref().map_or(0, |e| e.pairs_observed),
        e.as_ref().map_or(0, |e| e.threads_without_data.len()),
        e.as_ref()
            .and_then(|e| e.stability)
            .map_or("-".into(), |s| format!("{s:.2}")),
        e.as_ref()
            .and_then(|e| e.partner_agreement)
            .map_or("-".into(), |(a, b)| format!("{a}/{b}")),
        choice.used_prior,
        rc_chosen,
        rc(&unguarded),
        rc(&compact),
        random,
        rc_best,
        if gap > 0.0 {
            (random - rc_chosen) / gap
        } else {
            f64::NAN
        },
        choice.line
    );
    Ok(())
}
