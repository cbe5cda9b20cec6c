//! Slurm's CPU text, read for the step pipeline: `S_STEP_ALLOC_CORES` (logical core numbers)
//! and the socket part of `SLURM_DISTRIBUTION`. The pipeline itself (`cmlb-step`) takes PUs,
//! a profile key and a socket rule, and knows no Slurm variable.

use mapper::{Level, MapError, Result, Topology};
use step::binding::SocketDist;
use step::Step;

/// A step given as Slurm gives it: `S_STEP_ALLOC_CORES` (logical core numbers, in hwloc's
/// logical order) on `machine`. The cores' text keys the profile (it is the same on every node
/// of a job) and names them in the summary line.
pub fn step_on_cores(machine: &Topology, cores: &str) -> Result<Step> {
    let ids = mapper::parse_cpu_list(cores)
        .map_err(|e| MapError::input("S_STEP_ALLOC_CORES", format!("'{cores}': {e}")))?;
    let pus = pus_of_logical_cores(machine, &ids)
        .map_err(|e| MapError::Topology(format!("topology mismatch: step cores {cores}: {e}")))?;
    Ok(Step::new(machine, &pus)?.cpus_key(cores, format!("cores {cores}")))
}

/// From `SLURM_DISTRIBUTION` (`block:cyclic`, `cyclic:block,Pack`, ...): its socket part,
/// Slurm's default (cyclic) when absent or not understood.
pub fn socket_dist(dist: Option<&str>) -> SocketDist {
    let socket = dist
        .and_then(|d| d.split(',').next())
        .and_then(|d| d.split(':').nth(1))
        .unwrap_or("");
    match socket {
        "block" => SocketDist::Block,
        _ => SocketDist::Cyclic,
    }
}

/// PU OS indexes of the cores with the given *logical* indexes (Slurm's `S_STEP_ALLOC_CORES`
/// numbers cores 0..N in socket order, which is hwloc's logical core order).
pub fn pus_of_logical_cores(topo: &Topology, cores: &[u32]) -> Result<Vec<u32>> {
    let core_nodes: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].level == Level::Core)
        .collect();
    let mut out = Vec::new();
    if core_nodes.is_empty() {
        // No core level: every PU is its own core.
        for &c in cores {
            let p = topo.pus.get(c as usize).ok_or_else(|| {
                MapError::Topology(format!("core {c} is not in the topology ({})", topo.source))
            })?;
            out.push(p.os_index);
        }
        return Ok(out);
    }
    for &c in cores {
        let node = core_nodes.get(c as usize).ok_or_else(|| {
            MapError::Topology(format!(
                "core {c} is not in the topology ({}, {} cores)",
                topo.source,
                core_nodes.len()
            ))
        })?;
        out.extend(topo.nodes[*node].pus.iter().map(|&p| topo.pus[p].os_index));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(numa: u32, cores: u32, pus: u32) -> Topology {
        Topology::load(&format!("pack:1 numa:{numa} core:{cores} pu:{pus}")).unwrap()
    }

    #[test]
    fn socket_part_of_the_distribution() {
        assert_eq!(socket_dist(Some("block:block")), SocketDist::Block);
        assert_eq!(socket_dist(Some("cyclic:cyclic,Pack")), SocketDist::Cyclic);
        assert_eq!(socket_dist(Some("block")), SocketDist::Cyclic);
        assert_eq!(socket_dist(None), SocketDist::Cyclic);
    }

    #[test]
    fn logical_cores() {
        let t = topo(2, 2, 2);
        assert_eq!(pus_of_logical_cores(&t, &[1, 2]).unwrap(), vec![2, 3, 4, 5]);
        let e = pus_of_logical_cores(&t, &[4]).unwrap_err().to_string();
        assert!(e.contains("core 4") && e.contains("4 cores"), "{e}");
    }

    #[test]
    fn a_step_on_slurm_cores_is_keyed_and_labelled_by_them() {
        let machine = topo(2, 2, 2);
        let s = step_on_cores(&machine, "1-2").unwrap();
        assert_eq!(s.cpus(), &[2, 3, 4, 5]);
        let e = step_on_cores(&machine, "x").unwrap_err().to_string();
        assert!(e.contains("S_STEP_ALLOC_CORES") && e.contains("'x'"), "{e}");
        let e = step_on_cores(&machine, "9").unwrap_err().to_string();
        assert!(e.contains("topology mismatch: step cores 9"), "{e}");
    }
}
