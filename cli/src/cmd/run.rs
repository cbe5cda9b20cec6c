//! `cmlb run`: what `srun --cmlb-map=apply` does, without Slurm: find or make a profile (a
//! short profiling pre-run), plan on the PUs this process may use, then replace itself by the
//! program with its threads pinned (CPU mask, OpenMP variables, the pthread_create preload).

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use contract::{BindMode, PinEnv};
use mapper::StrategySpec;
use mapper::{format_cpu_list, Topology};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use step::{self, ProfileSource, Step, TaskAction, WrapOpts};

#[derive(ClapArgs)]
#[command(
    about = "Profile if needed, map and run a program with its threads pinned",
    long_about = "Runs COMMAND with thread k pinned to the PU the mapping strategy gives it, on \
the PUs this process may use (its CPU affinity).\n\n\
The profile is --profile DIR if given; otherwise the cached profile of this command (same \
executable, arguments, thread count and CPUs) under --cache; otherwise a profiling pre-run of \
COMMAND for at most --time seconds is made first and cached (the program then runs twice: \
meant for threaded OpenMP/pthreads programs whose first seconds are representative and which \
can safely be started twice).\n\n\
Binding (--bind): the process's CPU mask is set to the planned PUs; `omp` exports OMP_PLACES \
(one place per thread, in thread order), OMP_PROC_BIND=true, GOMP_CPU_AFFINITY, KMP_AFFINITY \
and OMP_NUM_THREADS (if unset); `preload` loads libcmlb_preload.so, which pins the k-th created \
thread (main thread = 0) to its PU before it runs; `both` does both.\n\n\
If the profile is unusable or the plan cannot be made, cmlb says why once and runs COMMAND \
unpinned (exit 1 instead with --strict). The exit status is COMMAND's.",
    after_help = "Examples:\n  cmlb run -- ./app 8\n  cmlb run --strategy scatter --profile prof -- ./app\n  \
cmlb run --time 2 --bind omp -- ./omp_app"
)]
pub struct Args {
    #[command(flatten)]
    pub placing: Placing,
    /// Where the pre-run's profile is written (and looked up first). Default: under --cache.
    #[arg(long, value_name = "DIR", conflicts_with = "profile")]
    pub save_profile: Option<PathBuf>,
    /// Profiler backend for the pre-run: auto, hw, numa-faults, watch or faults (see
    /// `cmlb profile --help`).
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<String>,
    /// Sample period for the pre-run (`cmlb profile --period`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub period: Option<u64>,
    /// Fail instead of running unpinned when no plan can be made.
    #[arg(long)]
    pub strict: bool,
    /// Compute and print the plan, then run COMMAND unpinned.
    #[arg(long)]
    pub dry_run: bool,
    /// An MPI rank that `mpirun`/`mpiexec` started (the plugin's batch-script rank-wrap runs
    /// ranks under this): plan it together with the other ranks that CMLB_RANK_HOSTS puts on
    /// this node, over the PUs hwloc says this node allows, from the job profile --profile DIR
    /// (`task<rank>/` thread profiles, `ranks/` rank matrix), and take this rank's share. The
    /// launcher's variables name the rank (OMPI_COMM_WORLD_*, PMI_RANK + MPI_LOCALRANKID,
    /// MV2_COMM_WORLD_*); a rank that runs elsewhere than CMLB_RANK_HOSTS says runs unpinned.
    #[arg(long, requires = "profile", conflicts_with = "dry_run")]
    pub job_rank: bool,
    /// Print the PU of each thread (`thread->PU k:PU ...`) before running COMMAND.
    #[arg(long)]
    pub show_pins: bool,
    /// With --job-rank: the job user's scratch directory on this node, checked before the
    /// profile in it is trusted (the user's own directory, under parents nobody else can
    /// swap: as the plugin checks it on the nodes it runs on). The rank-wrap passes it.
    #[arg(long, value_name = "DIR", requires = "job_rank")]
    pub job_scratch: Option<PathBuf>,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// How a program is planned and pinned: the options `cmlb run` and each `cmlb` placement of
/// `cmlb bench` share (one definition, so the two cannot drift apart).
#[derive(ClapArgs, Clone, Debug)]
pub struct Placing {
    /// Mapping strategy (see `cmlb map --list`), optionally with parameters after a colon:
    /// NAME:key=value,... (e.g. "spectral:k=8,scheme=first-fit").
    #[arg(long, default_value = mapper::DEFAULT_STRATEGY, value_parser = super::parse_strategy,
          value_name = "NAME[:key=value,...]")]
    pub strategy: StrategySpec,
    /// Use this profile directory (no pre-run).
    #[arg(long, value_name = "DIR")]
    pub profile: Option<PathBuf>,
    /// Cache of profiles by command (default $XDG_CACHE_HOME/cmlb or ~/.cache/cmlb).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// `live`, an hwloc XML file or a synthetic description; restricted to this process's CPUs.
    #[arg(long, default_value = "live")]
    pub topology: String,
    /// Longest profiling pre-run, in seconds (the program is stopped after that).
    #[arg(long, default_value_t = 3.0, value_name = "SECS")]
    pub time: f64,
    /// omp, preload or both.
    #[arg(long, default_value = "both", value_parser = parse_bind)]
    pub bind: BindMode,
    /// The pthread_create preload library (default: libcmlb_preload.so next to cmlb).
    #[arg(long, value_name = "FILE")]
    pub preload: Option<PathBuf>,
}

/// Checked here, not only by the pre-run's `cmlb profile`: its usage error would otherwise
/// surface as a warning in the middle of the output and an unpinned run.
fn parse_backend(s: &str) -> Result<String, String> {
    super::profile::parse_backend(s).map(|_| s.to_string())
}

pub(crate) fn parse_bind(s: &str) -> Result<BindMode, String> {
    BindMode::parse(s)
        .ok_or_else(|| format!("unknown bind mode '{s}' (expected omp, preload or both)"))
}

/// What to do with COMMAND once the plan is known: its CPU mask and environment.
pub(crate) struct Launch {
    pub(crate) mask: Vec<u32>,
    pub(crate) env: Vec<(String, String)>,
}

pub fn run(a: Args) -> Result<()> {
    super::positive_secs(a.placing.time, "--time")?;
    // A command that cannot start fails once, up front, not after a pre-run of it.
    find_program(&a.command[0])?;
    let launch = match plan(&a) {
        Ok(b) => b,
        Err(e) if a.strict => return Err(e.context("no plan (--strict)")),
        Err(e) => {
            // The ranks of a node fail alike: their first says so for all of them.
            let quiet = a.job_rank
                && contract::launcher::rank_ids(|k| std::env::var(k).ok())
                    .is_some_and(|ids| ids.local_rank != 0);
            if !quiet {
                say!("cmlb: warning: {}; running unpinned", crate::one_line(&e));
            }
            None
        }
    };
    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]);
    if let Some(l) = launch {
        match contract::pin(&l.mask) {
            Ok(()) => {
                for (k, v) in &l.env {
                    cmd.env(k, v);
                }
            }
            Err(e) if a.strict => {
                return Err(e)
                    .with_context(|| format!("setting the CPU mask {}", format_cpu_list(&l.mask)))
            }
            // E.g. a plan over a saved topology's PUs outside this job's cpuset: the program
            // still runs, as it would without cmlb.
            Err(e) => say!(
                "cmlb: warning: cannot set the CPU mask {} ({e}); running unpinned",
                format_cpu_list(&l.mask)
            ),
        }
    }
    let e = cmd.exec();
    bail!("cannot run {}: {e}", a.command[0])
}

/// The pipeline's plan for this process as one task on its own CPUs; a pre-run first when
/// there is no profile yet.
pub(crate) fn plan(a: &Args) -> Result<Option<Launch>> {
    // Before any pre-run: a missing library must not cost a run of the program first.
    let (bind, lib) = match a.placing.bind {
        BindMode::Omp => (BindMode::Omp, None),
        BindMode::Preload => (BindMode::Preload, Some(preload_lib(a)?)),
        BindMode::Both => match preload_lib(a) {
            Ok(lib) => (BindMode::Both, Some(lib)),
            // OMP_PLACES and the task's CPU mask still pin an OpenMP program.
            Err(e) if !a.strict => {
                say!(
                    "cmlb: warning: {}; binding through the OpenMP environment only",
                    crate::one_line(&e)
                );
                (BindMode::Omp, None)
            }
            Err(e) => return Err(e),
        },
    };
    let machine = Topology::load(&a.placing.topology)?;
    let omp: Option<usize> = std::env::var(contract::env::OMP_NUM_THREADS)
        .ok()
        .and_then(|v| v.trim().parse().ok());
    let source = match (&a.placing.profile, &a.save_profile) {
        (Some(p), _) => ProfileSource::Given(p.clone()),
        (None, Some(p)) => ProfileSource::Saved(p.clone()),
        (None, None) => ProfileSource::Keyed(cache_dir(a)?),
    };
    if let Some(dir) = &a.job_scratch {
        let uid = nix::unistd::getuid().as_raw();
        cmlb_slurm::scratch::check_scratch(dir, uid).context("the job profile is not used")?;
    }
    let rank = if a.job_rank { Some(job_rank()?) } else { None };
    let allowed: Vec<u32> = match &rank {
        // The node's PUs as hwloc reports them allowed, not this process's mask: the launcher
        // may have bound the rank already, and every rank of the node must plan over the same
        // PUs to get disjoint shares. A saved topology (--topology FILE) holds the whole node:
        // it is cut to this job's cpuset where the cgroup names one.
        Some(_) => {
            let pus = machine.pus.iter().map(|p| p.os_index);
            match cgroup_cpus() {
                Some(set) => pus.filter(|p| set.contains(p)).collect(),
                None => pus.collect(),
            }
        }
        None => contract::own_cpus().context("sched_getaffinity")?,
    };
    if let Some(r) = &rank {
        // More ranks than PUs: pinned, two ranks' busy-polling MPI threads share a PU and wait
        // on each other (Open MPI's mpirun jobs took 34-227 s instead of 1.7 s in 5 of 74
        // such runs). MPI libraries leave oversubscribed ranks to the OS too: each rank may
        // run on all of the node's PUs (not only on the CPU its daemon was bound to).
        if r.local.len() > allowed.len() {
            if r.ids.local_rank == 0 {
                say!(
                    "cmlb: {} ranks on {} share {} PUs (oversubscribed): each runs on all of \
                     them, unpinned, as MPI libraries leave oversubscribed ranks",
                    r.local.len(),
                    r.node,
                    allowed.len()
                );
            }
            return Ok(Some(Launch {
                mask: allowed,
                env: Vec::new(),
            }));
        }
    }
    let mut step = Step::new(&machine, &allowed)
        .with_context(|| {
            format!(
                "topology {} vs this process's CPUs {}",
                a.placing.topology,
                format_cpu_list(&allowed)
            )
        })?
        .omp_threads(omp)
        .command(&a.command)
        .profile(source)
        .strategy(a.placing.strategy.clone())
        .label("run");
    if let Some(r) = &rank {
        step = step.layout(&r.local, r.ids.size, r.nodes);
    }
    let mut result = step.compute()?;
    if let TaskAction::Prerun { dir } = &result.tasks[0].action {
        prerun(a, dir)?;
        result = step.compute()?;
    }
    let me = match &rank {
        Some(r) => r.ids.local_rank,
        None => 0,
    };
    let task = &result.tasks[me];
    // A job rank: one summary line per node (its first rank), as the plugin prints per step.
    if let Some(s) = result.summary.as_ref().filter(|_| me == 0) {
        say!(
            "{s}{}",
            if a.dry_run {
                " [dry run: nothing bound]"
            } else {
                ""
            }
        );
    }
    let pus = match &task.action {
        TaskAction::Pin { pus, .. } => pus,
        TaskAction::Unpinned => return Ok(None),
        // No thread plan: the task's share as its mask (this process's own CPUs for a plain
        // `cmlb run`; a rank's share of the node), threads free inside it.
        TaskAction::Share => {
            if a.show_pins {
                if let Some(r) = &rank {
                    say!(
                        "cmlb: rank {} on {}: share {}; threads unpinned inside it",
                        r.ids.rank,
                        r.node,
                        format_cpu_list(&task.share)
                    );
                }
            }
            if a.dry_run {
                return Ok(None);
            }
            return Ok(Some(Launch {
                mask: task.share.clone(),
                env: Vec::new(),
            }));
        }
        TaskAction::Prerun { dir } | TaskAction::Profile { dir, .. } => {
            bail!(
                "the profiling pre-run wrote no profile in {}",
                dir.display()
            )
        }
    };
    let list: Vec<String> = pus
        .iter()
        .enumerate()
        .map(|(k, u)| format!("{k}:{u}"))
        .collect();
    if a.dry_run {
        say!("cmlb: plan thread:PU {}", list.join(" "));
        return Ok(None);
    }
    if a.show_pins {
        match &rank {
            Some(r) => say!(
                "cmlb: rank {} on {}: share {}, thread->PU {}",
                r.ids.rank,
                r.node,
                format_cpu_list(&task.share),
                list.join(" ")
            ),
            None => say!("cmlb: thread->PU {}", list.join(" ")),
        }
    }
    let existing = std::env::var(contract::env::LD_PRELOAD).ok();
    let lib = lib.map(|l| l.display().to_string());
    let env = contract::task_env(&PinEnv {
        pus,
        mode: bind,
        preload_lib: lib.as_deref(),
        existing_ld_preload: existing.as_deref(),
        // exec keeps our pid: the preload pins only in the process with this pid.
        pid: std::process::id(),
        verbose: false,
        // A rank starts the MPI library's threads before an OpenMP team (see PinEnv).
        omp_team: rank.as_ref().and(omp),
    });
    Ok(Some(Launch {
        mask: task.share.clone(),
        env,
    }))
}

/// An MPI rank of a `mpirun`/`mpiexec` launch ([`Args::job_rank`]).
struct JobRank {
    ids: contract::launcher::RankIds,
    node: String,
    /// The ranks on this node, ascending (this one is the `ids.local_rank`-th).
    local: Vec<usize>,
    /// Nodes the job's ranks run on.
    nodes: usize,
}

fn job_rank() -> Result<JobRank> {
    use contract::launcher;
    let ids = launcher::rank_ids(|k| std::env::var(k).ok()).context(
        "--job-rank: no launcher variables name this process's MPI rank \
         (OMPI_COMM_WORLD_*, PMI_RANK/MPI_LOCALRANKID, MV2_COMM_WORLD_*)",
    )?;
    let text = std::env::var(contract::env::RANK_HOSTS).unwrap_or_default();
    let hosts = launcher::decode_hosts(&text).with_context(|| {
        format!(
            "--job-rank: {}='{text}' is not a list of hosts (node1*4,node2*4)",
            contract::env::RANK_HOSTS
        )
    })?;
    let node = launcher::this_node(&hosts, std::env::var("SLURMD_NODENAME").ok())
        .context("--job-rank: neither the host name nor SLURMD_NODENAME names this node")?;
    if !launcher::placement_agrees(&hosts, &node, &ids) {
        bail!(
            "rank {} of {} runs as local rank {} of {} on {node}, not where the job's placement \
             puts it ({}: {} ranks, {} on {node}): the launcher placed the ranks otherwise",
            ids.rank,
            ids.size,
            ids.local_rank,
            ids.local_size,
            contract::env::RANK_HOSTS,
            hosts.len(),
            launcher::ranks_on(&hosts, &node).len()
        );
    }
    let mut distinct = hosts.clone();
    distinct.sort();
    distinct.dedup();
    Ok(JobRank {
        local: launcher::ranks_on(&hosts, &node),
        nodes: distinct.len(),
        ids,
        node,
    })
}

/// The CPUs of this process's cgroup (v2 `cpuset.cpus.effective`, or v1 `cpuset.cpus`):
/// the job's allocation on this node, whatever mask the launcher gave the rank. `None` when
/// no cpuset is readable (no cgroup, or no cpuset controller).
fn cgroup_cpus() -> Option<Vec<u32>> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let file = match controllers {
            "" => format!("/sys/fs/cgroup{path}/cpuset.cpus.effective"),
            c if c.split(',').any(|c| c == "cpuset") => {
                format!("/sys/fs/cgroup/cpuset{path}/cpuset.cpus")
            }
            _ => continue,
        };
        if let Ok(list) = std::fs::read_to_string(&file) {
            if let Ok(cpus) = contract::parse_cpu_list(list.trim()) {
                if !cpus.is_empty() {
                    return Some(cpus);
                }
            }
        }
    }
    None
}

/// Where `exec` would find `prog`: as given when it has a `/`, else the first executable file
/// of that name on PATH.
pub(crate) fn find_program(prog: &str) -> Result<PathBuf> {
    let runnable =
        |p: &Path| p.is_file() && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok();
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        if !p.exists() {
            bail!("cannot run {prog}: no such file");
        }
        if !runnable(&p) {
            bail!("cannot run {prog}: not an executable file");
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| runnable(p))
        .ok_or_else(|| anyhow::anyhow!("cannot run {prog}: command not found in PATH"))
}

fn cache_dir(a: &Args) -> Result<PathBuf> {
    if let Some(c) = &a.placing.cache {
        if c.exists() && !c.is_dir() {
            bail!("--cache {} is not a directory", c.display());
        }
        return Ok(c.clone());
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("cmlb"));
    }
    match std::env::var_os("HOME").filter(|x| !x.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".cache").join("cmlb")),
        None => bail!("no --cache given and neither XDG_CACHE_HOME nor HOME is set"),
    }
}

fn preload_lib(a: &Args) -> Result<PathBuf> {
    if let Some(p) = &a.placing.preload {
        if !p.is_file() {
            bail!("--preload {}: no such file", p.display());
        }
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("locating the cmlb binary")?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    for cand in [
        dir.join("libcmlb_preload.so"),
        dir.join("cmlb_preload.so"),
        dir.join("../lib/cmlb/libcmlb_preload.so"),
    ] {
        if cand.is_file() {
            return Ok(cand);
        }
    }
    bail!(
        "libcmlb_preload.so not found next to {} (give --preload, or --bind omp)",
        exe.display()
    )
}

/// Profile COMMAND with `cmlb profile` for at most `--time` seconds, then stop the program.
fn prerun(a: &Args, out: &Path) -> Result<()> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    say!(
        "cmlb: no profile in {}: profiling {} for up to {} s (pre-run)",
        out.display(),
        a.command[0],
        a.placing.time
    );
    let opts = WrapOpts {
        cmlb: std::env::current_exe().context("locating the cmlb binary")?,
        backend: a.backend.clone(),
        period: a.period,
        duration: None,
        prerun_secs: a.placing.time,
        run_anyway: false,
        max_runs: None,
        bind: a.placing.bind,
        topology: a.placing.topology.clone(),
        strategy: a.placing.strategy.clone(),
    };
    let words = step::profile_argv(&opts, out);
    let mut cmd = Command::new(&words[0]);
    // The pre-run's output is not the user's result: keep it off stdout.
    cmd.args(&words[1..])
        .args(&a.command)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let mut child = cmd.spawn().context("starting cmlb profile")?;
    let deadline = Instant::now() + Duration::from_secs_f64(a.placing.time);
    let mut stopped = false;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if !stopped && Instant::now() >= deadline {
            // Stop the profiled program (the profiler's children); the profiler then writes.
            stop_children(child.id(), libc::SIGTERM);
            stopped = true;
            let grace = Instant::now() + Duration::from_secs(2);
            while Instant::now() < grace {
                if child.try_wait()?.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            stop_children(child.id(), libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !out.join(profile::PROFILE_FILE).exists() {
        bail!("the profiling pre-run wrote no profile ({status})");
    }
    Ok(())
}

/// Signal every child of `pid` (the program the profiler launched).
fn stop_children(pid: u32, sig: i32) {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    for c in text
        .split_whitespace()
        .filter_map(|s| s.parse::<i32>().ok())
    {
        // SAFETY: kill(2) on a pid we read from our own child's children list.
        unsafe { libc::kill(c, sig) };
    }
}
