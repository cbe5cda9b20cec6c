//! `cmlb topology`: print the topology cmlb would map onto.

use clap::Args as ClapArgs;
use mapper::topology::{parse_cpu_list, Topology};

#[derive(ClapArgs)]
pub struct Args {
    /// `live`, a path to an hwloc XML file (e.g. from `lstopo-no-graphics --of xml`), or an
    /// hwloc synthetic description such as "pack:2 numa:2 l3:1 core:8 pu:2".
    #[arg(long, default_value = "live")]
    pub topology: String,
    /// Restrict to these PU OS indexes, Linux list format (e.g. "0-3,8,10-11").
    #[arg(long)]
    pub cpuset: Option<String>,
}

/// Load `--topology` and apply `--cpuset`; shared with `cmlb map`.
pub fn load(spec: &str, cpuset: Option<&str>) -> anyhow::Result<Topology> {
    // MapError already names the file or synthetic string; no extra context needed.
    let topo = Topology::load(spec)?;
    match cpuset {
        None => Ok(topo),
        Some(list) => {
            let cpus = parse_cpu_list(list)?;
            Ok(topo.restrict(&cpus)?)
        }
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let topo = load(&a.topology, a.cpuset.as_deref())?;
    print!("{}", topo.summary());
    Ok(())
}
