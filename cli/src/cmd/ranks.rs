//! `cmlb ranks`: map the ranks of a multi-node job onto its machines (and switches), then
//! onto each machine's cores, and compare with Slurm's `block` and `cyclic` distributions.

use anyhow::{bail, Context, Result};
use clap::{Args as ClapArgs, ValueEnum};
use mapper::ranks::{self, Cluster, MapOptions, RankGraph};
use mapper::MapInput;
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
    #[arg(long, default_value = mapper::DEFAULT_STRATEGY, value_parser = super::parse_strategy,
          value_name = "NAME[:key=value,...]")]
    pub strategy: StrategySpec,
    /// Write the SLURM_HOSTFILE (one machine name per rank, in rank order) atomically.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// Write Scotch's placement (gmap's, brought to the exact rank counts) as a SLURM_HOSTFILE
    /// too, to run it side by side with cmlb's; needs gmap (an error when it cannot run).
    #[arg(long, value_name = "FILE")]
    pub scotch_hostfile: Option<PathBuf>,
    /// Each rank's load (bytes, memory load, …): one value per rank, one per line or
    /// comma-separated. Machines then get loads closer to their share wherever that costs no
    /// cut, and each plan's per-node load is reported.
    #[arg(long, value_name = "FILE")]
    pub load: Option<PathBuf>,
    /// Compare with Scotch's gmap on the same graph, machines and rank counts: `auto` when it
    /// is installed (a missing gmap is one line), `always` (a missing gmap is an error), `never`.
    #[arg(long, value_enum, default_value = "auto")]
    pub scotch: ScotchMode,
    /// Seed of the partitioner's random choices (the plan is the same for the same seed).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScotchMode {
    /// Run gmap when it is installed; otherwise say so in one line.
    Auto,
    /// Run gmap; fail when it is not installed or fails.
    Always,
    /// Do not run gmap.
    Never,
}

/// One placement's cost.
#[derive(serde::Serialize)]
struct Cost {
    placement: String,
    inter_node_bytes: f64,
    inter_switch_bytes: Option<f64>,
    inter_numa_bytes: Option<f64>,
    /// With --load: each machine's load, in machine order.
    node_loads: Option<Vec<f64>>,
    max_node_load: Option<f64>,
    min_node_load: Option<f64>,
    ms: f64,
}

/// How the ranks of a placement are put onto cores inside each machine (for inter-NUMA).
enum Inside {
    Strategy(StrategySpec),
    /// gmap inside each machine as well, for Scotch's own plan; `work` holds its files.
    Gmap {
        gmap: PathBuf,
        work: PathBuf,
    },
}

pub fn run(a: Args) -> Result<()> {
    let g = if a.dense {
        RankGraph::from_dense(&mapper::read_comm_csv(&a.comm, false)?)
    } else {
        ranks::read_edges(&a.comm, None)?
    };
    let load = match &a.load {
        None => None,
        Some(p) => {
            let v = mapper::read_load_csv(p)?;
            if v.len() != g.n() {
                bail!(
                    "{}: {} load values but {} has {} ranks",
                    p.display(),
                    v.len(),
                    a.comm.display(),
                    g.n()
                );
            }
            Some(v)
        }
    };
    let mut cluster = cmlb_slurm::nodes::parse_nodes(&a.nodes)?;
    if let Some(tc) = &a.topology_conf {
        let text =
            std::fs::read_to_string(tc).with_context(|| format!("reading {}", tc.display()))?;
        cluster = cmlb_slurm::nodes::with_topology_conf(cluster, &text, &tc.display().to_string())?;
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
    // A hostfile of Scotch's plan is asked for by name: gmap must run, as with `always`.
    let scotch_mode = match (a.scotch, &a.scotch_hostfile) {
        (ScotchMode::Never, Some(_)) => {
            bail!("--scotch-hostfile needs Scotch's plan: it cannot go with --scotch never")
        }
        (_, Some(_)) => ScotchMode::Always,
        (m, None) => m,
    };
    let gmap = match (scotch_mode, eval::scotch::find()) {
        (ScotchMode::Never, _) => None,
        (ScotchMode::Always, None) => bail!(
            "{}: Scotch's gmap is not installed (no scotch_gmap or gmap in PATH; \
             Debian: apt-get install scotch)",
            if a.scotch_hostfile.is_some() {
                "--scotch-hostfile"
            } else {
                "--scotch always"
            }
        ),
        (_, found) => found,
    };

    let t = Instant::now();
    let opts = MapOptions {
        load: load.clone(),
        seed: a.seed,
    };
    let planned = ranks::map_to_machines_with(&g, &cluster, &opts)?;
    let plan_ms = t.elapsed().as_secs_f64() * 1e3;
    let compact = StrategySpec::parse("compact")?;
    let mut notes: Vec<String> = Vec::new();
    // Slurm's own distributions pin ranks in order: compact inside a node.
    let mut placements = vec![
        (
            "cmlb",
            planned.clone(),
            plan_ms,
            Inside::Strategy(a.strategy.clone()),
        ),
        (
            "block",
            ranks::block(&cluster, g.n())?,
            0.0,
            Inside::Strategy(compact.clone()),
        ),
        (
            "cyclic",
            ranks::cyclic(&cluster, g.n())?,
            0.0,
            Inside::Strategy(compact),
        ),
    ];
    // gmap's files, only when gmap runs; removed when this returns.
    let mut work: Option<tempfile::TempDir> = None;
    let mut scotch_place: Option<Vec<usize>> = None;
    match &gmap {
        None if scotch_mode == ScotchMode::Auto => {
            notes.push("scotch: not run: gmap not installed (apt-get install scotch)".into())
        }
        None => {}
        Some(gm) => {
            let tmp = tempfile::tempdir().context("creating a work directory for gmap")?;
            let dir = work.insert(tmp).path().to_path_buf();
            match eval::scotch::map_ranks(gm, &g, &cluster, &dir) {
                Ok(p) => {
                    if let Some(r) = &p.repair {
                        notes.push(format!(
                            "scotch: gmap left {} machine(s) with more ranks than Slurm gives \
                             them (inter-node bytes as gmap mapped: {}); {} rank(s) moved to \
                             machines with room, least added bytes first: the row is that \
                             repaired plan",
                            r.overfull_machines,
                            mapper::num(r.raw_inter_node),
                            r.moved
                        ));
                    }
                    if let Some(n) = &p.note {
                        notes.push(format!("scotch: {n}"));
                    }
                    scotch_place = Some(p.machine.clone());
                    placements.push((
                        "scotch",
                        p.machine,
                        p.mapping_ms,
                        Inside::Gmap {
                            gmap: gm.clone(),
                            work: dir,
                        },
                    ));
                }
                Err(e) if scotch_mode == ScotchMode::Auto => {
                    notes.push(format!("scotch: not compared: {e}"))
                }
                Err(e) => return Err(e).context("mapping the ranks with Scotch's gmap"),
            }
        }
    }

    let mut costs = Vec::new();
    let mut inner: Vec<Option<Vec<u32>>> = vec![None; g.n()];
    for (name, place, ms, inside) in placements {
        let inter_switch = switch_of.as_ref().map(|sw| {
            let s: Vec<usize> = place.iter().map(|&m| sw[m]).collect();
            g.cut(&s)
        });
        let inter_numa = match &node_topo {
            None => None,
            Some(topo) => match inside_machines(
                &g,
                &cluster,
                &place,
                topo,
                &inside,
                (name == "cmlb").then_some(&mut inner),
            ) {
                Ok(v) => Some(v),
                // Scotch's row is a comparison: it stands without the inter-NUMA figure.
                Err(e) if matches!(inside, Inside::Gmap { .. }) => {
                    notes.push(format!("scotch: no inter-NUMA bytes: {e:#}"));
                    None
                }
                Err(e) => return Err(e),
            },
        };
        let node_loads = load
            .as_ref()
            .map(|l| ranks::machine_loads(&place, l, cluster.machines.len()));
        let fold = |f: fn(f64, f64) -> f64, init: f64| {
            node_loads.as_ref().map(|v| v.iter().copied().fold(init, f))
        };
        costs.push(Cost {
            placement: name.into(),
            inter_node_bytes: g.cut(&place),
            inter_switch_bytes: inter_switch,
            inter_numa_bytes: inter_numa,
            max_node_load: fold(f64::max, f64::NEG_INFINITY),
            min_node_load: fold(f64::min, f64::INFINITY),
            node_loads,
            ms,
        });
    }
    let hostfile = |place: &[usize]| {
        let mut text = String::new();
        for &m in place {
            text.push_str(&cluster.machines[m].name);
            text.push('\n');
        }
        text
    };
    if let Some(h) = &a.hostfile {
        mapper::write_atomic(h, hostfile(&planned).as_bytes())?;
    }
    if let (Some(h), Some(place)) = (&a.scotch_hostfile, &scotch_place) {
        mapper::write_atomic(h, hostfile(place).as_bytes())?;
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
                    "nodes": cluster.machines.iter().map(|m| &m.name).collect::<Vec<_>>(),
                    "placements": costs, "notes": notes, "plan": plan
                }))?
            );
        }
        Format::Table => {
            println!(
                "ranks: {}, edges: {}, bytes: {}, machines: {}{}",
                g.n(),
                g.edges(),
                mapper::num(g.total()),
                cluster.machines.len(),
                if cluster.switches.is_empty() {
                    String::new()
                } else {
                    format!(", switches: {}", cluster.switches.len())
                }
            );
            println!(
                "{:<8} {:>16} {:>16} {:>16} {:>14} {:>14} {:>10}",
                "",
                "inter-node",
                "inter-switch",
                "inter-NUMA",
                "max node load",
                "min node load",
                "ms"
            );
            let opt = |v: Option<f64>| v.map_or("-".to_string(), mapper::num);
            for c in &costs {
                println!(
                    "{:<8} {:>16} {:>16} {:>16} {:>14} {:>14} {:>10.1}",
                    c.placement,
                    mapper::num(c.inter_node_bytes),
                    opt(c.inter_switch_bytes),
                    opt(c.inter_numa_bytes),
                    opt(c.max_node_load),
                    opt(c.min_node_load),
                    c.ms
                );
            }
            for n in &notes {
                println!("{n}");
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

/// Map every machine's ranks onto `topo` as `inside` says; returns the bytes crossing NUMA nodes
/// inside machines and, when asked, each rank's PU. gmap's mapping is brought to one rank per
/// PU as for threads (`eval::scotch::map`).
fn inside_machines(
    g: &RankGraph,
    c: &Cluster,
    place: &[usize],
    topo: &Topology,
    inside: &Inside,
    mut pus: Option<&mut Vec<Option<Vec<u32>>>>,
) -> Result<f64> {
    // gmap is not run for a lone rank (nothing to map, RemoteComm 0); a strategy still gives
    // its PU.
    let least = if matches!(inside, Inside::Gmap { .. }) {
        2
    } else {
        1
    };
    let mut remote = 0.0;
    for k in 0..c.machines.len() {
        let members: Vec<usize> = (0..g.n()).filter(|&r| place[r] == k).collect();
        if members.len() < least {
            continue;
        }
        let name = &c.machines[k].name;
        let context = || format!("mapping the ranks of {name}");
        let sub = g.submatrix(&members);
        let load = vec![1.0; members.len()];
        remote += match inside {
            Inside::Strategy(spec) => {
                let input = MapInput {
                    comm: &sub,
                    load: &load,
                    topology: topo,
                    seed: 1,
                };
                let plan = mapper::plan(spec, &input, None).with_context(context)?;
                if let Some(p) = pus.as_deref_mut() {
                    for a in &plan.assignment {
                        p[members[a.thread]] = Some(vec![a.pu]);
                    }
                }
                plan.metrics.remote_comm
            }
            Inside::Gmap { gmap, work } => {
                let input = eval::EvalInput {
                    name: name.clone(),
                    source: "cmlb ranks".into(),
                    comm: sub,
                    load,
                    samples: None,
                };
                let plan = eval::scotch::map(gmap, &input, topo, work).with_context(context)?;
                plan.metrics.remote_comm
            }
        };
    }
    Ok(remote)
}

/// `0-3,8,10-11` for sorted rank numbers.
fn short_list(v: &[usize]) -> String {
    let as_u32: Vec<u32> = v.iter().map(|&x| x as u32).collect();
    contract::format_cpu_list(&as_u32)
}
