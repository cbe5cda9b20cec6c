//! `cmlb topology`: print the topology cmlb would map onto.

use clap::Args as ClapArgs;
use mapper::{parse_cpu_list, Topology};

#[derive(ClapArgs)]
pub struct Args {
    /// `live`, a path to an hwloc XML file (e.g. from `lstopo-no-graphics --of xml`), or an
    /// hwloc synthetic description such as "pack:2 numa:2 l3:1 core:8 pu:2".
    #[arg(long, default_value = "live")]
    pub topology: String,
    /// Restrict to these PU OS indexes, Linux list format (e.g. "0-3,8,10-11"), or `self`
    /// for the CPUs this process may run on (its affinity mask, e.g. inside a Slurm step).
    #[arg(long, value_name = "LIST|self")]
    pub cpuset: Option<String>,
    /// Write hwloc's XML of the (unrestricted) topology to FILE, atomically, for later use
    /// with --topology FILE (e.g. to map for a cluster node from a login node).
    #[arg(long, value_name = "FILE.xml")]
    pub export: Option<std::path::PathBuf>,
}

/// Load `--topology` and apply `--cpuset`; shared with `cmlb map`.
pub fn load(spec: &str, cpuset: Option<&str>) -> anyhow::Result<Topology> {
    // MapError already names the file or synthetic string; no extra context needed.
    let topo = Topology::load(spec)?;
    match cpuset {
        None => Ok(topo),
        Some(list) => {
            let cpus = if list.trim() == "self" {
                own_affinity()?
            } else {
                parse_cpu_list(list)?
            };
            Ok(topo.restrict(&cpus)?)
        }
    }
}

/// OS indexes of the CPUs in this process's affinity mask (any mask size the kernel uses).
fn own_affinity() -> anyhow::Result<Vec<u32>> {
    contract::own_cpus()
        .map_err(|e| anyhow::anyhow!("cannot read this process's CPU affinity: {e}"))
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let topo = load(&a.topology, a.cpuset.as_deref())?;
    if let Some(path) = &a.export {
        let xml = mapper::hwloc_xml(&a.topology)?;
        mapper::write_atomic(path, xml.as_bytes())?;
    }
    print!("{}", topo.summary());
    Ok(())
}
