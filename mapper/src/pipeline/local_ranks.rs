//! Which cores each of this node's ranks gets, from the job's rank matrix.
//!
//! Slurm gives a node's tasks contiguous core shares in rank order. With a rank profile the
//! shares stay the same sets of cores, but which rank gets which share follows the rank
//! matrix: the node's ranks are mapped by the step's strategy (CMLB by default) onto one
//! representative PU per share, so ranks that exchange most end up on the same NUMA node (and
//! below that, the same caches). The rank matrix is counted exactly by the MPI tracer, not
//! sampled, so the placement is kept whenever it is strictly better than rank order on that
//! matrix (inter-NUMA bytes first, then hop-bytes); otherwise rank order stays.

use crate::error::Result;
use crate::metrics;
use crate::pipeline::plan_for;
use crate::profile::ranks::RankProfile;
use crate::strategy::{MapInput, StrategySpec};
use crate::topology::{format_cpu_list, Topology};

/// For each local task (in local order), the index of the share it gets, and the line that
/// says why (`None`: nothing to say, the step has no rank profile).
pub(super) fn assign(
    node: &Topology,
    shares: &[Vec<u32>],
    global: &[usize],
    total: usize,
    rp: &RankProfile,
    spec: &StrategySpec,
    seed: u64,
) -> Result<(Vec<usize>, Option<String>)> {
    let identity: Vec<usize> = (0..shares.len()).collect();
    let ids: Vec<u32> = global.iter().map(|&g| g as u32).collect();
    let here = format!("ranks {} of {total} on this node", format_cpu_list(&ids));
    if rp.meta.ranks != total {
        return Ok((
            identity,
            Some(format!(
                "the rank profile has {} ranks but the step {total} tasks: ranks keep rank order",
                rp.meta.ranks
            )),
        ));
    }
    let sub = rp.graph.submatrix(global);
    let traffic: f64 = (0..sub.n())
        .flat_map(|i| ((i + 1)..sub.n()).map(move |j| (i, j)))
        .map(|(i, j)| sub.get(i, j))
        .sum();
    if shares.len() < 2 || traffic <= 0.0 {
        return Ok((
            identity,
            Some(format!(
                "{here} exchange nothing with each other: rank order"
            )),
        ));
    }
    // One representative PU per distinct share (shares repeat when tasks outnumber PUs).
    let mut reps: Vec<u32> = Vec::new();
    for s in shares {
        if !reps.contains(&s[0]) {
            reps.push(s[0]);
        }
    }
    let topo = node.restrict(&reps)?;
    let pos = |pu: u32| {
        topo.pu_position(pu)
            .expect("representatives are in the topology")
    };
    let load = vec![1.0; sub.n()];
    let plan = plan_for(
        spec,
        &MapInput {
            comm: &sub,
            load: &load,
            topology: &topo,
            seed,
        },
        None,
    )?;
    let base: Vec<usize> = shares.iter().map(|s| pos(s[0])).collect();
    let score = |pus: &[usize]| {
        (
            metrics::remote_comm(&sub, &topo, pus),
            metrics::hop_bytes(&sub, &topo, pus),
        )
    };
    let (br, bh) = score(&base);
    let mut planned = plan.assignment.clone();
    planned.sort_by_key(|a| a.thread);
    let pus: Vec<usize> = planned.iter().map(|a| pos(a.pu)).collect();
    // Every share keeps one rank unless tasks outnumber PUs.
    let distinct = {
        let mut p = pus.clone();
        p.sort_unstable();
        p.dedup();
        p.len() == pus.len()
    };
    if pus.len() != shares.len() || (reps.len() == shares.len() && !distinct) {
        return Ok((
            identity,
            Some(format!(
                "{here}: strategy {} gave no placement of whole shares: rank order",
                spec.name()
            )),
        ));
    }
    let (pr, ph) = score(&pus);
    let better = pr < br - 1e-9 * br.max(1.0) || (pr <= br && ph < bh - 1e-9 * bh.max(1.0));
    if !better {
        return Ok((
            identity,
            Some(format!(
                "{here}: rank order kept, the rank matrix places them no better \
                 (inter-NUMA bytes {br:.4e}, hop-bytes {bh:.4e})"
            )),
        ));
    }
    let order: Vec<usize> = planned
        .iter()
        .map(|a| {
            shares
                .iter()
                .position(|s| s[0] == a.pu)
                .expect("the plan's PUs are representatives")
        })
        .collect();
    Ok((
        order,
        Some(format!(
            "{here}: cores by the rank matrix (inter-NUMA bytes {pr:.4e}, rank order \
             {br:.4e}; hop-bytes {ph:.4e}, rank order {bh:.4e})"
        )),
    ))
}
