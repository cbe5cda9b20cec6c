//! Which cores each of this node's ranks gets, from the job's rank matrix.
//!
//! Slurm gives a node's tasks contiguous core shares in rank order. With a rank profile the
//! shares stay the same sets of cores, but which rank gets which share follows the rank
//! matrix: the node's ranks are mapped by the step's strategy (CMLB by default) onto one
//! representative PU per share, so ranks that exchange most end up on the same NUMA node (and
//! below that, the same caches). The rank matrix is counted exactly by the MPI tracer, not
//! sampled, so the placement is kept whenever it is strictly better than rank order on that
//! matrix (inter-NUMA bytes first, then hop-bytes); otherwise rank order stays.
//!
//! **GPU steps** ([`Placement::KeepNuma`]): Slurm's `--gpu-bind` and the GPU variables of each
//! task (`CUDA_VISIBLE_DEVICES`, ...) were chosen for the share Slurm gave it. Moving the rank to
//! a share on another NUMA node would carry it away from its GPUs, worse than what the user
//! had; so ranks then trade shares only within a NUMA node (caches and cores below it still
//! follow the rank matrix), and every rank keeps its distance to its GPUs.

use mapper::Result;
use mapper::{format_cpu_list, Topology};
use mapper::{MapInput, StrategySpec};
use profile::ranks::RankProfile;

/// Which shares a rank may move to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placement<'a> {
    /// Any share of the node.
    Free,
    /// Only shares on the NUMA node(s) of its own share (rank order's): the step uses GPUs,
    /// and the text says how cmlb knows.
    KeepNuma(&'a str),
}

/// For each local task (in local order), the index of the share it gets, and the line that
/// says why (`None`: nothing to say, the step has no rank profile).
#[allow(clippy::too_many_arguments)]
pub(super) fn assign(
    node: &Topology,
    shares: &[Vec<u32>],
    global: &[usize],
    total: usize,
    rp: &RankProfile,
    spec: &StrategySpec,
    seed: u64,
    placement: Placement<'_>,
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
    let no_placement = || {
        Ok((
            identity.clone(),
            Some(format!(
                "{here}: strategy {} gave no placement of whole shares: rank order",
                spec.name()
            )),
        ))
    };
    let order = match placement {
        Placement::Free => match place(&topo, shares, &sub, &identity, spec, seed)? {
            Some(o) => o,
            None => return no_placement(),
        },
        Placement::KeepNuma(_) => {
            if reps.len() != shares.len() {
                return no_placement();
            }
            // The ranks of each NUMA node's shares, placed among those shares only.
            let mut groups: Vec<(Vec<u32>, Vec<usize>)> = Vec::new();
            for (k, s) in shares.iter().enumerate() {
                let key = node.numa_of_pus(s);
                match groups.iter_mut().find(|(g, _)| *g == key) {
                    Some((_, members)) => members.push(k),
                    None => groups.push((key, vec![k])),
                }
            }
            let mut order = identity.clone();
            for (_, members) in &groups {
                if members.len() < 2 {
                    continue;
                }
                let g_shares: Vec<Vec<u32>> = members.iter().map(|&k| shares[k].clone()).collect();
                let g_reps: Vec<u32> = g_shares.iter().map(|s| s[0]).collect();
                let g_topo = node.restrict(&g_reps)?;
                let g_sub = sub.submatrix_of(members);
                let local: Vec<usize> = (0..members.len()).collect();
                match place(&g_topo, &g_shares, &g_sub, &local, spec, seed)? {
                    Some(o) => {
                        for (i, &m) in members.iter().enumerate() {
                            order[m] = members[o[i]];
                        }
                    }
                    None => return no_placement(),
                }
            }
            order
        }
    };
    let score = |pus: &[usize]| {
        (
            mapper::remote_comm(&sub, &topo, pus),
            mapper::hop_bytes(&sub, &topo, pus),
        )
    };
    let base: Vec<usize> = shares.iter().map(|s| pos(s[0])).collect();
    let planned: Vec<usize> = order.iter().map(|&k| pos(shares[k][0])).collect();
    let (br, bh) = score(&base);
    let (pr, ph) = score(&planned);
    let gpus = match placement {
        Placement::KeepNuma(why) => format!(
            "; GPU step ({why}): ranks keep their NUMA nodes, so none moves away from its GPUs"
        ),
        Placement::Free => String::new(),
    };
    let better = pr < br - 1e-9 * br.max(1.0) || (pr <= br && ph < bh - 1e-9 * bh.max(1.0));
    if !better {
        return Ok((
            identity,
            Some(format!(
                "{here}: rank order kept, the rank matrix places them no better \
                 (inter-NUMA bytes {br:.4e}, hop-bytes {bh:.4e}){gpus}"
            )),
        ));
    }
    Ok((
        order,
        Some(format!(
            "{here}: cores by the rank matrix (inter-NUMA bytes {pr:.4e}, rank order \
             {br:.4e}; hop-bytes {ph:.4e}, rank order {bh:.4e}){gpus}"
        )),
    ))
}

/// Map the ranks of `sub` (rank i in rank order has share `ids[i]`, here `shares[i]`) onto the
/// shares' representative PUs in `topo` with the strategy: for each rank, the index into
/// `shares` of the share it gets; `None` when the plan does not give every rank its own share
/// (unless tasks outnumber PUs and shares repeat).
fn place(
    topo: &Topology,
    shares: &[Vec<u32>],
    sub: &mapper::CommMatrix,
    ids: &[usize],
    spec: &StrategySpec,
    seed: u64,
) -> Result<Option<Vec<usize>>> {
    let load = vec![1.0; sub.n()];
    let plan = mapper::plan(
        spec,
        &MapInput {
            comm: sub,
            load: &load,
            topology: topo,
            seed,
        },
        None,
    )?;
    let mut planned = plan.assignment.clone();
    planned.sort_by_key(|a| a.thread);
    let distinct_shares = {
        let mut r: Vec<u32> = shares.iter().map(|s| s[0]).collect();
        r.sort_unstable();
        r.dedup();
        r.len()
    };
    let distinct = {
        let mut p: Vec<u32> = planned.iter().map(|a| a.pu).collect();
        p.sort_unstable();
        p.dedup();
        p.len() == planned.len()
    };
    if planned.len() != ids.len() || (distinct_shares == shares.len() && !distinct) {
        return Ok(None);
    }
    Ok(Some(
        planned
            .iter()
            .map(|a| {
                shares
                    .iter()
                    .position(|s| s[0] == a.pu)
                    .expect("the plan's PUs are representatives")
            })
            .collect(),
    ))
}
