//! `cmlb map`: compute a thread-to-PU plan (or compare every strategy) from a profile
//! directory or a communication matrix, on a live, XML or synthetic topology.

use anyhow::bail;
use clap::{Args as ClapArgs, ValueEnum};
use mapper::num;
use mapper::write_atomic;
use mapper::LevelCosts;
use mapper::MapInput;
use mapper::Topology;
use mapper::{read_comm_csv, read_load_csv};
use mapper::{read_samples_csv, LoggedSample, SampleLog};
use mapper::{CommMatrix, Plan};
use profile::Profile;
use profiler::import::{read_trace, ImportFormat};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CommFormat {
    /// Row i = thread i.
    Plain,
    /// EagerMap's files: rows in reverse thread order (first thread on the last line).
    Eagermap,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A listing per NUMA node → core → PU → threads, then the metrics.
    Table,
    /// The plan as YAML (the `plan.yaml` format).
    Yaml,
    /// The plan as one JSON object (an array of per-strategy metrics with --compare).
    Json,
}

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  cmlb map --profile prof --topology live
  cmlb map --comm SP-OMP.csv --comm-format eagermap --topology \"pack:2 numa:2 core:16 pu:2\"
  cmlb map --comm comm.csv --load load.csv --topology node.xml --cpuset 0-15 --strategy cmlb --format json
  cmlb map --comm comm.csv --topology \"pack:2 numa:2 core:8 pu:2\" --compare
  cmlb map --list")]
pub struct Args {
    /// Profile directory written by `cmlb profile` (profile.yaml, comm.csv, load.csv).
    #[arg(long, value_name = "DIR", conflicts_with = "comm")]
    pub profile: Option<PathBuf>,
    /// Communication matrix: n×n comma-separated, symmetric, non-negative.
    #[arg(long, value_name = "FILE")]
    pub comm: Option<PathBuf>,
    /// Row order of --comm.
    #[arg(long, value_enum, default_value = "plain")]
    pub comm_format: CommFormat,
    /// Memory load per thread (one value per line or comma-separated); all ones if absent.
    /// Overrides the profile's load.csv.
    #[arg(long, value_name = "FILE")]
    pub load: Option<PathBuf>,
    /// `live`, a path to an hwloc XML file, or an hwloc synthetic description
    /// such as "pack:2 numa:2 l3:1 core:8 pu:2".
    #[arg(long, default_value = "live")]
    pub topology: String,
    /// Only use these PUs (OS indexes, Linux list format, e.g. "0-7,16-23"), or `self` for
    /// this process's affinity mask.
    #[arg(long, value_name = "LIST|self")]
    pub cpuset: Option<String>,
    /// Mapping strategy (see --list), optionally with parameters after a colon:
    /// NAME:key=value,... (e.g. "spectral:k=8,scheme=first-fit", "pair-exchange:iters=100000").
    #[arg(long, default_value = mapper::DEFAULT_STRATEGY, value_parser = super::parse_strategy,
          value_name = "NAME[:key=value,...]")]
    pub strategy: mapper::StrategySpec,
    /// Seed for the random steps (`random`, `pair-exchange`, the default's annealing); same
    /// input and seed, same plan.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write the plan to FILE atomically: JSON if it ends in .json, else YAML.
    #[arg(long, value_name = "FILE", conflicts_with = "compare")]
    pub out: Option<PathBuf>,
    /// Run every strategy on the same input and print their metrics side by side.
    #[arg(long)]
    pub compare: bool,
    /// List the strategies and exit.
    #[arg(long)]
    pub list: bool,
    /// With --profile: use the strategy's plan even when the profile does not support it.
    /// By default a plan from a profile is kept only when, made from one half of the
    /// profile's samples, it beats creation order (`compact`) on the other half; otherwise
    /// `compact` is used, and one line on stderr says which (as `cmlb run` and
    /// `--cmlb-map=apply` do).
    #[arg(long)]
    pub no_guard: bool,
    /// Raw-sample log (`tid_index,time_ns,addr`) for strategies that work from access streams
    /// (dagtm). Default: samples.csv in the --profile directory, when it has one.
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    /// Format of --samples: `samples` (samples.csv), or a recorded trace as `cmlb profile
    /// --import` reads it (`perf-script`, `csv`), with threads numbered as that import numbers
    /// them — so `--profile` from an import and `--samples` of the same trace agree.
    #[arg(
        long,
        value_name = "FORMAT",
        default_value = "samples",
        requires = "samples"
    )]
    pub samples_format: String,
    /// Access costs for the mram_cost metric (MRAM(h) model), e.g. "l1=4,l2=10,l3=38,mem=87,remote=2.1"
    /// (cycles; any subset, the rest keep these defaults; remote = remote/local memory ratio,
    /// used only when the topology has no NUMA distances).
    #[arg(long, value_name = "LIST")]
    pub mram_latencies: Option<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.list {
        print!("{}", list_text());
        return Ok(());
    }
    let (comm, load) = read_inputs(&a)?;
    let topo = super::topology::load(&a.topology, a.cpuset.as_deref())?;
    let input = MapInput {
        comm: &comm,
        load: &load,
        topology: &topo,
        seed: a.seed,
    };
    // Only strategies that use access streams need the log; don't make others fail on it.
    let wants_samples = a.compare || a.samples.is_some() || a.strategy.wants_samples();
    let costs = a
        .mram_latencies
        .as_deref()
        .map(LevelCosts::parse)
        .transpose()?;
    let samples = if wants_samples {
        read_samples(&a, input.comm.n())?
    } else {
        None
    };
    if a.compare {
        return compare(&input, samples.as_ref(), costs.as_ref(), a.format);
    }
    let mut plan = match &a.profile {
        // A plan from a profile is checked like cmlb run and the plugin check it; an explicit
        // sample log or --no-guard takes the strategy's plan as it is.
        Some(dir) if !a.no_guard && a.samples.is_none() => {
            let mut prof = Profile::read_dir(dir)?;
            prof.load = load.clone();
            let choice = step::guarded_plan(&a.strategy, &prof, dir, &topo, a.seed)?;
            say!(
                "cmlb: map: {}{}",
                choice.line,
                if choice.used_prior {
                    " [the plan below is creation order, for reference: cmlb run and \
                     --cmlb-map=apply pin nothing]"
                } else {
                    ""
                }
            );
            choice.plan
        }
        _ => mapper::plan(&a.strategy, &input, samples.as_ref())?,
    };
    if let Some(c) = &costs {
        mapper::add_mram_cost(&mut plan, &input, c);
    }
    // Write the file first: if that fails the user sees only the error, not a plan that
    // looks saved.
    if let Some(out) = &a.out {
        write_plan(&plan, out)?;
    }
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&plan)?),
        Format::Yaml => print!("{}", serde_norway::to_string(&plan)?),
        Format::Table => print!("{}", plan_table(&plan, &topo, input.comm.n())),
    }
    Ok(())
}

fn list_text() -> String {
    let all = mapper::strategies();
    let w = all.iter().map(|s| s.name().len()).max().unwrap_or(0);
    let mut s = String::new();
    for st in &all {
        let mark = if st.name() == mapper::DEFAULT_STRATEGY {
            " (default)"
        } else {
            ""
        };
        s.push_str(&format!("{:<w$}  {}{mark}\n", st.name(), st.describe()));
    }
    s
}

/// The matrix and load vector, checked against each other; errors name the files.
fn read_inputs(a: &Args) -> anyhow::Result<(CommMatrix, Vec<f64>)> {
    let (comm, comm_name, profile_load) = match (&a.profile, &a.comm) {
        (Some(dir), _) => {
            let p = Profile::read_dir(dir)?;
            (p.comm, dir.join("comm.csv"), Some(p.load))
        }
        (None, Some(path)) => (
            read_comm_csv(path, a.comm_format == CommFormat::Eagermap)?,
            path.clone(),
            None,
        ),
        (None, None) => {
            bail!("no input: give --profile DIR or --comm FILE (or --list to see the strategies)")
        }
    };
    let (load, load_name) = match (&a.load, profile_load) {
        (Some(path), _) => (read_load_csv(path)?, Some(path.clone())),
        (None, Some(l)) => (l, a.profile.as_ref().map(|d| d.join("load.csv"))),
        (None, None) => (vec![1.0; comm.n()], None),
    };
    if load.len() != comm.n() {
        bail!(
            "{}: load vector has {} values but {} has {} threads",
            load_name.as_deref().unwrap_or(Path::new("load")).display(),
            load.len(),
            comm_name.display(),
            comm.n()
        );
    }
    Ok((comm, load))
}

/// The sample log from --samples, or the profile directory's samples.csv if it exists, for a
/// matrix of `n` threads: a log naming more threads is refused here, where the file is known.
fn read_samples(a: &Args, n: usize) -> anyhow::Result<Option<Arc<SampleLog>>> {
    let path = match (&a.samples, &a.profile) {
        (Some(p), _) => p.clone(),
        // The profile's own log, read and checked as every front end reads it.
        (None, Some(dir)) => return Ok(step::read_profile_samples(dir, n)?),
        (None, None) => return Ok(None),
    };
    let log = read_samples_from(a, &path)?;
    if log.threads.len() > n {
        bail!(
            "{}: has samples of thread {} but the matrix has {n} threads",
            path.display(),
            log.threads.len() - 1
        );
    }
    Ok(Some(Arc::new(log)))
}

fn read_samples_from(a: &Args, path: &Path) -> anyhow::Result<SampleLog> {
    if a.samples_format == "samples" {
        return Ok(read_samples_csv(path)?);
    }
    let Some(fmt) = ImportFormat::parse(&a.samples_format) else {
        bail!(
            "--samples-format '{}' is not one of: samples, {}",
            a.samples_format,
            ImportFormat::NAMES.join(", ")
        );
    };
    let trace = read_trace(fmt, path)?;
    let index: HashMap<i32, usize> = trace
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| (t.tid, i))
        .collect();
    let logged = trace
        .samples
        .iter()
        .filter_map(|s| {
            index.get(&s.tid).map(|&thread| LoggedSample {
                thread,
                time_ns: s.time_ns,
                addr: s.addr,
            })
        })
        .collect();
    Ok(SampleLog::from_samples(logged))
}

fn write_plan(plan: &Plan, out: &Path) -> anyhow::Result<()> {
    let json = out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if json {
        let mut text = serde_json::to_string_pretty(plan)?;
        text.push('\n');
        write_atomic(out, text.as_bytes())?;
    } else {
        plan.write_yaml(out)?;
    }
    log::info!("plan written to {}", out.display());
    Ok(())
}

fn metrics_rows(m: &mapper::Metrics) -> Vec<(&'static str, String)> {
    let loads: Vec<String> = m.numa_load.iter().map(|&v| num(v)).collect();
    vec![
        ("remote_comm", num(m.remote_comm)),
        ("load_std", num(m.load_std)),
        ("numa_load", loads.join(" ")),
        ("quality", num(m.quality)),
        ("hop_bytes", num(m.hop_bytes)),
        ("mram_cost", num(m.mram_cost)),
        ("mapping_ms", format!("{:.3}", m.mapping_ms)),
    ]
}

/// A person-checkable listing: every NUMA node, its cores that got threads, which threads
/// run on each PU, then the metrics.
/// `threads` is the input's count: a `none` plan assigns nothing but the threads still exist.
fn plan_table(plan: &Plan, topo: &Topology, threads: usize) -> String {
    let mut s = format!(
        "strategy: {}\ntopology: {}\nthreads:  {threads} (tN = thread N in creation order)\n",
        plan.strategy, plan.topology,
    );
    if plan.assignment.is_empty() {
        s.push_str("no binding: the OS scheduler places the threads\n");
        return s;
    }
    // threads per PU OS index
    let mut on_pu: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for a in &plan.assignment {
        on_pu.entry(a.pu).or_default().push(a.thread);
    }
    let list = |v: &[usize]| {
        v.iter()
            .map(|t| format!("t{t}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for (k, numa) in topo.numa.iter().enumerate() {
        let threads: usize = numa
            .pus
            .iter()
            .map(|&p| on_pu.get(&topo.pus[p].os_index).map_or(0, |v| v.len()))
            .sum();
        let load = plan.metrics.numa_load.get(k).copied().unwrap_or(0.0);
        // The node's GPUs and NICs, so a reader sees which threads sit next to which device.
        let near: String = topo
            .device_names_on_numa(numa.os_index)
            .iter()
            .map(|(kind, names)| format!(", {}s {}", kind.name(), names.join(" ")))
            .collect();
        s.push_str(&format!(
            "\nnuma P#{}: {threads} threads on {} PUs, load {}{near}\n",
            numa.os_index,
            numa.capacity(),
            num(load)
        ));
        // PUs of a core are consecutive in tree order: one line per core with threads. By the
        // PU's core number (what JSON/YAML report), not its tree parent: a topology without a
        // core level makes each PU its own core.
        let mut i = 0;
        while i < numa.pus.len() {
            let core = topo.pus[numa.pus[i]].core;
            let mut j = i;
            while j < numa.pus.len() && topo.pus[numa.pus[j]].core == core {
                j += 1;
            }
            let cells: Vec<String> = numa.pus[i..j]
                .iter()
                .map(|&p| {
                    let os = topo.pus[p].os_index;
                    match on_pu.get(&os) {
                        Some(v) => format!("PU {os}: {}", list(v)),
                        None => format!("PU {os}: idle"),
                    }
                })
                .collect();
            let used = numa.pus[i..j]
                .iter()
                .any(|&p| on_pu.contains_key(&topo.pus[p].os_index));
            if used {
                s.push_str(&format!(
                    "  core P#{:<4} {}\n",
                    topo.pus[numa.pus[i]].core,
                    cells.join("   ")
                ));
            }
            i = j;
        }
    }
    s.push_str("\nmetrics:\n");
    for (k, v) in metrics_rows(&plan.metrics) {
        s.push_str(&format!("  {k:<12} {v}\n"));
    }
    s
}

fn compare(
    input: &MapInput,
    samples: Option<&Arc<SampleLog>>,
    costs: Option<&LevelCosts>,
    format: Format,
) -> anyhow::Result<()> {
    let results = mapper::compare(input, samples, costs);
    match format {
        Format::Json | Format::Yaml => {
            let v: Vec<serde_json::Value> = results
                .iter()
                .map(|(name, r)| match r {
                    Ok(p) if p.assignment.is_empty() => serde_json::json!({
                        "strategy": name, "binds": false, "metrics": null
                    }),
                    Ok(p) => serde_json::json!({
                        "strategy": name, "binds": true, "metrics": p.metrics
                    }),
                    Err(e) => serde_json::json!({ "strategy": name, "error": e }),
                })
                .collect();
            if format == Format::Json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{}", serde_norway::to_string(&v)?);
            }
        }
        Format::Table => {
            println!("topology: {}", input.topology.summary_line());
            println!("threads:  {}", input.comm.n());
            let head = [
                "strategy",
                "remote_comm",
                "load_std",
                "quality",
                "hop_bytes",
                "mram_cost",
                "mapping_ms",
                "numa_load",
            ];
            let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
            for (name, r) in &results {
                let mut row = vec![name.clone()];
                match r {
                    Ok(p) if p.assignment.is_empty() => {
                        row.push("(no binding)".into());
                    }
                    Ok(p) => {
                        let m = &p.metrics;
                        let loads: Vec<String> = m.numa_load.iter().map(|&v| num(v)).collect();
                        row.extend([
                            num(m.remote_comm),
                            num(m.load_std),
                            num(m.quality),
                            num(m.hop_bytes),
                            num(m.mram_cost),
                            format!("{:.3}", m.mapping_ms),
                            loads.join(" "),
                        ]);
                    }
                    Err(e) => row.push(format!("error: {e}")),
                }
                rows.push(row);
            }
            let cols = head.len();
            let width: Vec<usize> = (0..cols)
                .map(|c| {
                    rows.iter()
                        .filter(|r| r.len() == cols)
                        .map(|r| r[c].len())
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            for r in &rows {
                let line: Vec<String> = r
                    .iter()
                    .enumerate()
                    .map(|(c, v)| {
                        if c == 0 {
                            format!("{v:<w$}", w = width[c])
                        } else if r.len() < cols || c == cols - 1 {
                            v.clone()
                        } else {
                            format!("{v:>w$}", w = width[c])
                        }
                    })
                    .collect();
                println!("{}", line.join("  ").trim_end());
            }
        }
    }
    if results.iter().all(|(_, r)| r.is_err()) {
        bail!("every strategy failed on this input");
    }
    Ok(())
}
