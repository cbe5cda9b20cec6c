//! `cmlb ranks`: map the ranks of a multi-node job onto its machines (and switches), then
//! onto each machine's cores, and compare with Slurm's `block` and `cyclic` distributions.

use anyhow::{bail, Context, Result};
use clap::{Args as ClapArgs, ValueEnum};
use mapper::ranks::{self, Cluster, RankGraph};
use mapper::strategy::{self, MapInput};
use mapper::{StrategySpec, Topology};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Metrics per placement, then ranks per machine.
    Table,
    /// One JSON object: metrics per placement and the rank → machine (→ PU) plan.
    Json,
}

#[derive(ClapArgs)]
#[command(
    about = "Map the ranks of a multi-node job onto machines and cores",
    long_about = "Splits the ranks over the job's machines so that ranks exchanging most bytes \
share a machine (and a switch, with --topology-conf), each machine taking the ranks Slurm \
gives it; then maps each machine's ranks onto its cores with --strategy. Prints inter-node \
(and inter-switch, inter-NUMA) bytes next to Slurm's block and cyclic distributions, and can \
write the SLURM_HOSTFILE for `srun --distribution=arbitrary`.",
    after_help = "Rank matrices: an edge list `SRC DST BYTES [MESSAGES]` per line (ranks from 0; \
`#` comments; one or both directions), or a dense n×n CSV (--dense).\n\nExamples:\n  \
cmlb ranks --comm ranks/comm.edges --nodes 'node[1-4]:16' --hostfile hosts\n  \
cmlb ranks --comm ranks.edges --nodes 256x64 --node-topology 'numa:2 core:32 pu:1'\n  \
cmlb ranks --comm ranks.edges --nodes 'n[01-16]:32' --topology-conf /etc/slurm/topology.conf"
)]
pub struct Args {
    /// The rank matrix (edge list, or a dense CSV with --dense).
    #[arg(long, value_name = "FILE")]
    pub comm: PathBuf,
    /// --comm is a dense n×n CSV (row i = rank i).
    #[arg(long)]
    pub dense: bool,
    /// The machines and the ranks Slurm gives each: `node[1-4]:16,big:32` (Slurm hostlists),
    /// or `MxS` for M machines of S ranks.
    #[arg(long, value_name = "LIST")]
    pub nodes: String,
    /// Slurm's topology.conf: switches above the machines (hierarchical mapping).
    #[arg(long, value_name = "FILE")]
    pub topology_conf: Option<PathBuf>,
    /// The machines' topology (all alike): `live`, an hwloc XML file or a synthetic
    /// description; with it, ranks are also mapped onto cores and inter-NUMA bytes reported.
    #[arg(long, value_name = "TOPO")]
    pub node_topology: Option<String>,
    /// Strategy inside each machine.
    #[arg(long, default_value = strategy::DEFAULT, value_parser = super::parse_strategy,
          value_name = "NAME[:key=value,...]")]
    pub strategy: StrategySpec,
    /// Write the SLURM_HOSTFILE (one machine name per rank, in rank order) atomically.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// One placement's cost.
#[derive(serde::Serialize)]
struct Cost {
    placement: String,
    inter_node_bytes: f64,
    inter_switch_bytes: Option<f64>,
    inter_numa_bytes: Option<f64>,
    ms: f64,
}

pub fn run(a: Args) -> Result<()> {
    let g = if a.dense {
        RankGraph::from_dense(&mapper::profile::read_comm_csv(&a.comm, false)?)
    } else {
        ranks::read_edges(&a.comm, None)?
    };
    let mut cluster = Cluster::parse(&a.nodes)?;
    if let Some(tc) = &a.topology_conf {
        let text =
            std::fs::read_to_string(tc).with_context(|| format!("reading {}", tc.display()))?;
        cluster = cluster.with_topology_conf(&text, &tc.display().to_string())?;
    }
    if g.n() > cluster.slots() {
        bail!(
            "{}: {} ranks but --nodes gives {} slots",
            a.comm.display(),
            g.n(),
            cluster.slots()
        );
    }
    let node_topo = a.node_topology.as_deref().map(Topology::load).transpose()?;
    let switch_of = switch_of(&cluster);

    let t = Instant::now();
    let planned = ranks::map_to_machines(&g, &cluster)?;
    let plan_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut costs = Vec::new();
    let mut inner: Vec<Option<Vec<u32>>> = vec![None; g.n()];
    for (name, place, ms) in [
        ("cmlb", planned.clone(), plan_ms),
        ("block", ranks::block(&cluster, g.n())?, 0.0),
        ("cyclic", ranks::cyclic(&cluster, g.n())?, 0.0),
    ] {
        let inter_switch = switch_of.as_ref().map(|sw| {
            let s: Vec<usize> = place.iter().map(|&m| sw[m]).collect();
            g.cut(&s)
        });
        let inter_numa = match &node_topo {
            None => None,
            Some(topo) => Some(inside_machines(
                &g,
                &cluster,
                &place,
                topo,
                if name == "cmlb" {
                    a.strategy.clone()
                } else {
                    // Slurm's own distributions pin ranks in order: compact inside a node.
                    StrategySpec::parse("compact")?
                },
                (name == "cmlb").then_some(&mut inner),
            )?),
        };
        costs.push(Cost {
            placement: name.into(),
            inter_node_bytes: g.cut(&place),
            inter_switch_bytes: inter_switch,
            inter_numa_bytes: inter_numa,
            ms,
        });
    }
    if let Some(h) = &a.hostfile {
        let mut text = String::new();
        for &m in &planned {
            text.push_str(&cluster.machines[m].name);
            text.push('\n');
        }
        mapper::output::write_atomic(h, text.as_bytes())?;
    }
    match a.format {
        Format::Json => {
            let plan: Vec<serde_json::Value> = planned
                .iter()
                .enumerate()
                .map(|(r, &m)| {
                    serde_json::json!({
                        "rank": r, "node": cluster.machines[m].name, "pu": inner[r].as_ref().map(|p| p[0])
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "ranks": g.n(), "edges": g.edges(), "total_bytes": g.total(),
                    "placements": costs, "plan": plan
                }))?
            );
        }
        Format::Table => {
            println!(
                "ranks: {}, edges: {}, bytes: {}, machines: {}{}",
                g.n(),
                g.edges(),
                mapper::compare::num(g.total()),
                cluster.machines.len(),
                if cluster.switches.is_empty() {
                    String::new()
                } else {
                    format!(", switches: {}", cluster.switches.len())
                }
            );
            println!(
                "{:<8} {:>16} {:>16} {:>16} {:>10}",
                "", "inter-node", "inter-switch", "inter-NUMA", "ms"
            );
            let opt = |v: Option<f64>| v.map_or("-".to_string(), mapper::compare::num);
            for c in &costs {
                println!(
                    "{:<8} {:>16} {:>16} {:>16} {:>10.1}",
                    c.placement,
                    mapper::compare::num(c.inter_node_bytes),
                    opt(c.inter_switch_bytes),
                    opt(c.inter_numa_bytes),
                    c.ms
                );
            }
            for (k, m) in cluster.machines.iter().enumerate() {
                let rs: Vec<usize> = (0..g.n()).filter(|&r| planned[r] == k).collect();
                println!("{}: {}", m.name, short_list(&rs));
            }
        }
    }
    Ok(())
}

/// Each machine's leaf switch, when a topology.conf was given.
fn switch_of(c: &Cluster) -> Option<Vec<usize>> {
    if c.switches.is_empty() {
        return None;
    }
    Some(
        (0..c.machines.len())
            .map(|m| {
                c.switches
                    .iter()
                    .position(|s| s.machines.contains(&m))
                    .expect("with_topology_conf checks every machine has a switch")
            })
            .collect(),
    )
}

/// Map every machine's ranks onto `topo` with `spec`; returns the bytes crossing NUMA nodes
/// inside machines and, when asked, each rank's PU.
fn inside_machines(
    g: &RankGraph,
    c: &Cluster,
    place: &[usize],
    topo: &Topology,
    spec: StrategySpec,
    mut pus: Option<&mut Vec<Option<Vec<u32>>>>,
) -> Result<f64> {
    let mut remote = 0.0;
    for k in 0..c.machines.len() {
        let members: Vec<usize> = (0..g.n()).filter(|&r| place[r] == k).collect();
        if members.is_empty() {
            continue;
        }
        let sub = g.submatrix(&members);
        let load = vec![1.0; members.len()];
        let input = MapInput {
            comm: &sub,
            load: &load,
            topology: topo,
            seed: 1,
        };
        let plan = mapper::plan_for(&spec, &input, None)
            .with_context(|| format!("mapping the ranks of {}", c.machines[k].name))?;
        remote += plan.metrics.remote_comm;
        if let Some(p) = pus.as_deref_mut() {
            for a in &plan.assignment {
                p[members[a.thread]] = Some(vec![a.pu]);
            }
        }
    }
    Ok(remote)
}

/// `0-3,8,10-11` for sorted rank numbers.
fn short_list(v: &[usize]) -> String {
    let as_u32: Vec<u32> = v.iter().map(|&x| x as u32).collect();
    contract::format_cpu_list(&as_u32)
}
