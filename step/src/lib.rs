//! The one apply pipeline: what a launcher knows about a step → what each task gets.
//!
//! Every front end that pins threads goes through here — the SPANK plugin (`srun
//! --cmlb-map=…`), `cmlb run`, and (for one plan) `cmlb map`/`cmlb report` — so no two of them
//! can decide differently. The shape is LLNL mpibind's: set inputs ([`Step::new`] and the
//! setters) → compute ([`Step::compute`]) → read results ([`StepPlan`]) → the launcher applies
//! them with the `contract` crate ([`contract::pin`], [`contract::task_env`],
//! [`contract::wrap_env`]).
//!
//! ```
//! use step::{Mode, ProfileSource, Step, TaskAction};
//! use mapper::{StrategySpec, Topology};
//!
//! # let dir = tempfile::tempdir().unwrap();
//! # let prof = dir.path().join("prof");
//! # std::fs::create_dir(&prof).unwrap();
//! # let threads: String = (0..4).map(|i| format!("- index: {i}\n  tid: {}\n", 100 + i)).collect();
//! # std::fs::write(prof.join("profile.yaml"), format!("schema: 1\ncommand: [app]\nbackend: test\nthreads:\n{threads}")).unwrap();
//! # // Threads 0-2 and 1-3 share, seen alike in both held-out halves on 10 cache lines each.
//! # std::fs::write(prof.join("comm.csv"), "0,0,20,0\n0,0,0,20\n20,0,0,0\n0,20,0,0\n").unwrap();
//! # for h in ["a", "b"] {
//! #     std::fs::write(prof.join(format!("comm.{h}.csv")), "0,0,10,0\n0,0,0,10\n10,0,0,0\n0,10,0,0\n").unwrap();
//! #     std::fs::write(prof.join(format!("lines.{h}.csv")), "0,0,10,0\n0,0,0,10\n10,0,0,0\n0,10,0,0\n").unwrap();
//! # }
//! # std::fs::write(prof.join("load.csv"), "1\n1\n1\n1\n").unwrap();
//! let machine = Topology::load("pack:1 numa:2 core:2 pu:1")?;
//! let plan = Step::new(&machine, &[0, 1, 2, 3])?
//!     .command(&["./app".to_string()])
//!     .profile(ProfileSource::Given(prof.clone()))
//!     .strategy(StrategySpec::parse("cmlb")?)
//!     .mode(Mode::Apply)
//!     .compute()?;
//! let TaskAction::Pin { pus, .. } = &plan.tasks[0].action else { panic!() };
//! assert_eq!(pus.len(), 4); // thread k on pus[k]
//! println!("{}", plan.summary.as_deref().unwrap_or(""));
//! # Ok::<(), mapper::MapError>(())
//! ```

#![warn(missing_docs)]

pub mod binding;
pub mod guard;
mod local_ranks;

use contract::BindMode;
use mapper::{format_cpu_list, Topology};
use mapper::{read_samples_csv, SampleLog, SAMPLES_FILE};
use mapper::{MapError, Plan, Result};
use mapper::{MapInput, StrategySpec};
use profile::ranks::{has_ranks, read_ranks_dir};
use profile::{Profile, PROFILE_FILE};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the launcher was asked to do with the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Run every task under the profiler, writing its profile.
    Profile,
    /// Pin every task's threads from its profile (a short profiling pre-run first when there
    /// is none and pre-runs are allowed).
    Apply,
}

/// Where the step's profiles are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileSource {
    /// This directory, for every task; it must exist (the pipeline never writes it).
    Given(PathBuf),
    /// This directory, for every task; a pre-run writes it when it has no profile yet
    /// (`cmlb run --save-profile`).
    Saved(PathBuf),
    /// Under this directory (the site's scratch or the user's cache), by the command's key
    /// ([`binding::profile_key`]): a one-task step's profile is `KEY`; a multi-task step's job
    /// profile directory is `KEY` with task g's thread profile in `KEY/task<g>` (falling back
    /// to the lowest-numbered task that has one) and the rank matrix in `KEY/ranks`.
    Keyed(PathBuf),
    /// Under `root` by a name the user chose (`--cmlb-map=profile:name=NAME`), laid out as
    /// [`ProfileSource::Keyed`]'s `KEY`: a profile made from one command line serves another
    /// (a short run profiled, the long one applied).
    Named {
        /// The scratch directory (or cache) the name is kept in.
        root: PathBuf,
        /// One plain directory name (`cmlb_slurm::options::check_name`).
        name: String,
    },
}

/// What one local task gets.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskAction {
    /// Run under the profiler, which writes `dir`.
    Profile {
        /// The profile directory to write.
        dir: PathBuf,
        /// A multi-task step: the directory the MPI tracer writes the job's rank matrix into
        /// ([`contract::ranks::trace_env`] gives the task's variables).
        ranks: Option<PathBuf>,
    },
    /// No profile yet: profile briefly into `dir`, then run pinned (`cmlb run --save-profile`).
    Prerun {
        /// The profile directory the pre-run writes.
        dir: PathBuf,
    },
    /// Pin thread k (creation order, main thread = 0) to `pus[k]`.
    Pin {
        /// PU OS index per thread.
        pus: Vec<u32>,
        /// The plan the PUs come from.
        plan: Box<Plan>,
        /// The profile it was made from.
        profile: PathBuf,
    },
    /// Run in the task's share with its threads unpinned: the strategy binds nothing
    /// (`none`), or the site's default mode has no profile to apply yet.
    Unpinned,
    /// The task's CPU mask is its share and nothing more: its thread profile supports no
    /// thread plan ([`crate::guard::Choice::used_prior`]), so its threads float inside the
    /// share as they would without cmlb. The share itself still counts: in a multi-task step
    /// the rank matrix may have chosen which share each rank gets.
    Share,
}

/// One local task's share of the step and what to do in it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPlan {
    /// The task's CPU mask (PU OS indexes): whole cores of the step, in tree order.
    pub share: Vec<u32>,
    /// What the launcher does in the task.
    pub action: TaskAction,
}

/// The result of [`Step::compute`].
#[derive(Debug, Clone, PartialEq)]
pub struct StepPlan {
    /// One entry per local task, in task order.
    pub tasks: Vec<TaskPlan>,
    /// The one line a launcher prints about the step (apply with a profile), or `None`.
    pub summary: Option<String>,
    /// The step's profile directory: task 0's profile for a one-task step, the job profile
    /// directory (`task<g>/` per task, `ranks/`) for a multi-task one.
    pub profile_dir: PathBuf,
}

/// The directories of one step's profiles ([`Step::compute`]).
struct Dirs {
    /// What [`StepPlan::profile_dir`] reports.
    step: PathBuf,
    /// Each local task's thread profile directory.
    tasks: Vec<PathBuf>,
    /// The rank matrix directory of a multi-task step.
    ranks: Option<PathBuf>,
}

/// A job profile directory: `ranks/` or some `task<g>/` inside.
fn is_job_dir(d: &Path) -> bool {
    d.join(contract::ranks::RANKS_DIR).is_dir()
        || std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_prefix("task"))
                    .is_some_and(|g| g.parse::<usize>().is_ok())
                    && e.path().is_dir()
            })
}

/// The exec-wrap a launcher uses for [`TaskAction::Profile`] and [`TaskAction::Prerun`]:
/// which `cmlb`, and the options passed on to it.
#[derive(Debug, Clone, PartialEq)]
pub struct WrapOpts {
    /// The `cmlb` binary.
    pub cmlb: PathBuf,
    /// `--backend` of the profiler, if chosen.
    pub backend: Option<String>,
    /// `--period` of the profiler, if chosen.
    pub period: Option<u64>,
    /// Profile mode: stop sampling after this many seconds (the program runs on).
    pub duration: Option<f64>,
    /// Pre-run: the longest profiling run before the program is restarted pinned.
    pub prerun_secs: f64,
    /// Profile mode: a profiler problem never fails the user's program.
    pub run_anyway: bool,
    /// Profile runs of the same command merge into its profile (`cmlb profile --accumulate`),
    /// keeping the weight of at most this many runs (`--max-runs`).
    pub max_runs: Option<u32>,
    /// Pre-run: the binding mode of the pinned run.
    pub bind: BindMode,
    /// Pre-run: the topology specification the pinned run loads.
    pub topology: String,
    /// Pre-run: the strategy of the pinned run.
    pub strategy: StrategySpec,
}

impl TaskAction {
    /// The words to run the task's program under (`cmlb profile … --` or `cmlb run … --`),
    /// or `None` when the program runs as it is.
    pub fn wrap_argv(&self, o: &WrapOpts) -> Option<Vec<String>> {
        match self {
            TaskAction::Profile { dir, .. } => Some(profile_argv(o, dir)),
            TaskAction::Prerun { dir } => {
                let mut w = vec![
                    o.cmlb.display().to_string(),
                    "run".into(),
                    "--time".into(),
                    o.prerun_secs.to_string(),
                    "--save-profile".into(),
                    dir.display().to_string(),
                    "--strategy".into(),
                    o.strategy.to_string(),
                    "--bind".into(),
                    o.bind.name().into(),
                    "--topology".into(),
                    o.topology.clone(),
                ];
                push_sampling(&mut w, o);
                w.push("--".into());
                Some(w)
            }
            TaskAction::Pin { .. } | TaskAction::Unpinned | TaskAction::Share => None,
        }
    }
}

/// `cmlb profile --out DIR [options] --`: the profiler run of profile mode and of the pre-run.
pub fn profile_argv(o: &WrapOpts, dir: &Path) -> Vec<String> {
    let mut w = vec![
        o.cmlb.display().to_string(),
        "profile".into(),
        "--out".into(),
        dir.display().to_string(),
    ];
    if o.run_anyway {
        w.push("--run-anyway".into());
    }
    // Repeated profile runs of one command (one key) add evidence instead of replacing it.
    w.push("--accumulate".into());
    if let Some(n) = o.max_runs {
        w.extend(["--max-runs".into(), n.to_string()]);
    }
    push_sampling(&mut w, o);
    if let Some(d) = o.duration {
        w.extend(["--duration".into(), d.to_string()]);
    }
    w.push("--".into());
    w
}

fn push_sampling(w: &mut Vec<String>, o: &WrapOpts) {
    if let Some(b) = &o.backend {
        w.extend(["--backend".into(), b.clone()]);
    }
    if let Some(p) = o.period {
        w.extend(["--period".into(), p.to_string()]);
    }
}

/// The inputs of one step on one node (see the module example).
#[derive(Debug, Clone)]
pub struct Step {
    node: Topology,
    cpus: Vec<u32>,
    cpus_label: Option<String>,
    key_cpus: String,
    tasks: usize,
    /// Global task id (MPI rank under srun) of each local task.
    global: Vec<usize>,
    /// Tasks of the whole step, on every node.
    total: usize,
    /// Nodes of the step.
    nodes: usize,
    /// How Slurm deals the node's cores to its tasks across sockets.
    socket_dist: binding::SocketDist,
    omp_threads: Option<usize>,
    command: Vec<String>,
    profile: Option<ProfileSource>,
    strategy: StrategySpec,
    mode: Mode,
    prerun: bool,
    label: &'static str,
    seed: u64,
    /// How the launcher knows the step uses GPUs (a variable and its value), if it does.
    gpus: Option<String>,
}

impl Step {
    /// A step on `machine` using the PUs `cpus` (OS indexes; the machine is restricted to
    /// them). Defaults: one task, the default strategy, apply, pre-runs allowed.
    pub fn new(machine: &Topology, cpus: &[u32]) -> Result<Step> {
        let node = machine.restrict(cpus)?;
        Ok(Step {
            node,
            cpus: cpus.to_vec(),
            cpus_label: None,
            key_cpus: format_cpu_list(cpus),
            tasks: 1,
            global: vec![0],
            total: 1,
            nodes: 1,
            socket_dist: binding::SocketDist::default(),
            omp_threads: None,
            command: Vec::new(),
            profile: None,
            strategy: StrategySpec::default(),
            mode: Mode::Apply,
            prerun: true,
            label: "apply",
            seed: 1,
            gpus: None,
        })
    }

    /// A step given as Slurm gives it: `S_STEP_ALLOC_CORES` (logical core numbers, in
    /// hwloc's logical order) on `machine`. The cores' text keys the profile and names them
    /// in the summary line.
    pub fn from_slurm_cores(machine: &Topology, cores: &str) -> Result<Step> {
        let ids = mapper::parse_cpu_list(cores)
            .map_err(|e| MapError::input("S_STEP_ALLOC_CORES", format!("'{cores}': {e}")))?;
        let pus = binding::pus_of_logical_cores(machine, &ids).map_err(|e| {
            MapError::Topology(format!("topology mismatch: step cores {cores}: {e}"))
        })?;
        let mut s = Step::new(machine, &pus)?;
        s.cpus_label = Some(format!("cores {cores}"));
        s.key_cpus = cores.to_string();
        s.label = "apply";
        Ok(s)
    }

    /// Number of local tasks (at least 1), the whole step on this node (global ids 0..n).
    pub fn tasks(mut self, n: usize) -> Self {
        self.tasks = n.max(1);
        self.global = (0..self.tasks).collect();
        self.total = self.tasks;
        self.nodes = 1;
        self
    }
    /// A step over several nodes or with tasks elsewhere: the global task ids (MPI ranks under
    /// srun) of this node's tasks, in local order, the step's task count and node count. Task
    /// profiles are kept by global id, and the rank matrix places the local ranks.
    pub fn layout(mut self, global: &[usize], total: usize, nodes: usize) -> Self {
        if !global.is_empty() {
            self.tasks = global.len();
            self.global = global.to_vec();
        }
        self.total = total.max(self.tasks);
        self.nodes = nodes.max(1);
        self
    }
    /// How Slurm deals cores to the node's tasks across sockets (`SLURM_DISTRIBUTION`'s second
    /// part; default cyclic, as Slurm's), so each task's share and "rank order" are the ones
    /// Slurm itself would give.
    pub fn socket_dist(mut self, d: binding::SocketDist) -> Self {
        self.socket_dist = d;
        self
    }
    /// The user's `OMP_NUM_THREADS`: the thread count of each task (checked against the
    /// profile, and part of the profile key).
    pub fn omp_threads(mut self, n: Option<usize>) -> Self {
        self.omp_threads = n.filter(|&n| n > 0);
        self
    }
    /// The task's program and arguments (they key the profile).
    pub fn command(mut self, argv: &[String]) -> Self {
        self.command = argv.to_vec();
        self
    }
    /// Where the profiles are.
    pub fn profile(mut self, p: ProfileSource) -> Self {
        self.profile = Some(p);
        self
    }
    /// The mapping strategy.
    pub fn strategy(mut self, s: StrategySpec) -> Self {
        self.strategy = s;
        self
    }
    /// Profile or apply.
    pub fn mode(mut self, m: Mode) -> Self {
        self.mode = m;
        self
    }
    /// Whether apply may pre-run a program that has no profile yet. Off for a site's default
    /// mode: the pre-run starts the program twice, which only a user who asked may get.
    pub fn allow_prerun(mut self, yes: bool) -> Self {
        self.prerun = yes;
        self
    }
    /// The word naming the launcher in the summary line (`apply`, `run`).
    pub fn label(mut self, l: &'static str) -> Self {
        self.label = l;
        self
    }
    /// Seed of the randomised strategies.
    pub fn seed(mut self, s: u64) -> Self {
        self.seed = s;
        self
    }
    /// The step uses GPUs, as the launcher says (e.g. `SLURM_STEP_GPUS=0,1`): ranks then keep
    /// the NUMA nodes of the shares the launcher gave them, near the GPUs it bound them to.
    /// On a node whose topology shows GPUs this holds without being told.
    pub fn gpus(mut self, why: Option<String>) -> Self {
        self.gpus = why.filter(|w| !w.is_empty());
        self
    }

    /// Why ranks must keep their NUMA nodes, if they must: the launcher's word, or the GPUs
    /// the node's topology shows (the step may use them without saying so).
    fn gpu_reason(&self) -> Option<String> {
        self.gpus.clone().or_else(|| {
            let n = self
                .node
                .devices
                .iter()
                .filter(|d| d.kind == mapper::DeviceKind::Gpu)
                .count();
            (n > 0).then(|| format!("{n} GPU{} on this node", if n == 1 { "" } else { "s" }))
        })
    }

    /// The step's PUs (OS indexes) on this node.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Where the step's profiles are: the step's directory, each local task's thread profile
    /// directory, and (multi-task steps) the rank matrix directory.
    fn dirs(&self) -> Result<Dirs> {
        let shares_threads = binding::task_shares_dist(&self.node, self.tasks, self.socket_dist)
            .first()
            .map_or(0, Vec::len);
        let job = |d: &Path| Dirs {
            step: d.to_path_buf(),
            tasks: self
                .global
                .iter()
                .map(|g| d.join(format!("task{g}")))
                .collect(),
            ranks: Some(d.join(contract::ranks::RANKS_DIR)),
        };
        match &self.profile {
            None => Err(MapError::Step("no profile location given".into())),
            // A directory the user named serves every task, unless it is a job profile
            // directory (no profile.yaml of its own, task<g>/ or ranks/ inside).
            Some(ProfileSource::Given(d) | ProfileSource::Saved(d)) => {
                if self.total > 1 && !d.join(PROFILE_FILE).exists() && is_job_dir(d) {
                    Ok(job(d))
                } else {
                    Ok(Dirs {
                        step: d.clone(),
                        tasks: vec![d.clone(); self.tasks],
                        ranks: None,
                    })
                }
            }
            Some(ProfileSource::Named { root, name }) => {
                let d = root.join(name);
                if self.total == 1 {
                    Ok(Dirs {
                        step: d.clone(),
                        tasks: vec![d],
                        ranks: None,
                    })
                } else {
                    Ok(job(&d))
                }
            }
            Some(ProfileSource::Keyed(root)) => {
                let threads = self.omp_threads.unwrap_or(shares_threads);
                if self.total == 1 {
                    let d = root.join(binding::profile_key(&self.command, threads, &self.key_cpus));
                    return Ok(Dirs {
                        step: d.clone(),
                        tasks: vec![d],
                        ranks: None,
                    });
                }
                // One key for the whole step, the same on every node: the step's shape, not
                // this node's cores (nodes may be given different core numbers).
                let shape = if self.nodes > 1 {
                    format!("{} nodes, {} tasks", self.nodes, self.total)
                } else {
                    format!("{}, {} tasks", self.key_cpus, self.total)
                };
                Ok(job(&root.join(binding::profile_key(
                    &self.command,
                    threads,
                    &shape,
                ))))
            }
        }
    }

    /// When the step's own profile is missing: the profiles of the same program beside it
    /// (newest first, at most three), as text to append to the line, so that a user who
    /// profiled a run with other arguments learns what to name. Empty when there are none.
    pub fn other_profiles(&self, missing: &Path) -> String {
        let (Some(root), Some(exe)) = (missing.parent(), self.command.first()) else {
            return String::new();
        };
        let base = exe.rsplit('/').next().unwrap_or(exe);
        let mut found: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.path() != missing && e.path().is_dir())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = e.path();
                // A one-task profile names its command; a job profile its task<g>/ profiles.
                let yaml = std::iter::once(p.join(PROFILE_FILE))
                    .chain(
                        std::fs::read_dir(&p)
                            .into_iter()
                            .flatten()
                            .filter_map(|t| t.ok())
                            .map(|t| t.path().join(PROFILE_FILE)),
                    )
                    .find(|y| y.is_file())?;
                let text = std::fs::read_to_string(&yaml).ok()?;
                let meta: profile::ProfileMeta = serde_norway::from_str(&text).ok()?;
                let first = meta.command.first()?;
                (first.rsplit('/').next() == Some(base)).then(|| {
                    let when = std::fs::metadata(&yaml)
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    (when, format!("{name} ({})", meta.command.join(" ")))
                })
            })
            .collect();
        if found.is_empty() {
            return String::new();
        }
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        let list: Vec<String> = found.into_iter().take(3).map(|(_, s)| s).collect();
        format!(
            "; profiles of {base} in {}: {}: use one with apply:profile=DIR, or profile the \
             next run with profile:name=NAME and apply with apply:name=NAME",
            root.display(),
            list.join(", ")
        )
    }

    /// Compute every task's action. An error is a reason to run the step unpinned (the
    /// launcher says it in one line, or fails the step in strict mode).
    pub fn compute(&self) -> Result<StepPlan> {
        let shares = binding::task_shares_dist(&self.node, self.tasks, self.socket_dist);
        let dirs = self.dirs()?;
        let given = matches!(self.profile, Some(ProfileSource::Given(_)));
        if self.mode == Mode::Profile {
            return Ok(StepPlan {
                tasks: shares
                    .iter()
                    .enumerate()
                    .map(|(t, share)| TaskPlan {
                        share: share.clone(),
                        action: TaskAction::Profile {
                            dir: dirs.tasks[t].clone(),
                            ranks: dirs.ranks.clone(),
                        },
                    })
                    .collect(),
                summary: None,
                profile_dir: dirs.step,
            });
        }
        let has = |d: &Path| d.join(PROFILE_FILE).exists();
        let ranks = match &dirs.ranks {
            Some(r) if has_ranks(r) => Some(read_ranks_dir(r).map_err(|e| {
                MapError::Step(format!("rank profile {} is unusable: {e}", r.display()))
            })?),
            _ => None,
        };
        // A task without a thread profile of its own uses the lowest-numbered task's: ranks of
        // one program usually run the same threads.
        let fallback = if dirs.ranks.is_some() {
            let mut found: Vec<(usize, PathBuf)> = std::fs::read_dir(&dirs.step)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let g: usize = name.strip_prefix("task")?.parse().ok()?;
                    has(&e.path()).then_some((g, e.path()))
                })
                .collect();
            found.sort();
            found.into_iter().next().map(|(_, p)| p)
        } else {
            Some(dirs.step.clone()).filter(|d| has(d))
        };
        if fallback.is_none() && ranks.is_none() {
            if given {
                return Err(MapError::Step(format!(
                    "profile={} has no profile.yaml",
                    dirs.step.display()
                )));
            }
            let all = |a: &dyn Fn(usize) -> TaskAction| -> Vec<TaskPlan> {
                shares
                    .iter()
                    .enumerate()
                    .map(|(t, share)| TaskPlan {
                        share: share.clone(),
                        action: a(t),
                    })
                    .collect()
            };
            if self.prerun && self.total == 1 {
                return Ok(StepPlan {
                    tasks: all(&|t| TaskAction::Prerun {
                        dir: dirs.tasks[t].clone(),
                    }),
                    summary: None,
                    profile_dir: dirs.step,
                });
            }
            // A pre-run restarts each task after profiling it: MPI ranks cannot survive that
            // (their peers would lose them), so a multi-task step is profiled only on request.
            let others = self.other_profiles(&dirs.step);
            let summary = (self.prerun && self.total > 1).then(|| {
                format!(
                    "cmlb: {}: no profile of this {}-task step in {}: run it once with \
                     --cmlb-map=profile (a pre-run would restart every task); running \
                     unpinned{others}",
                    self.label,
                    self.total,
                    dirs.step.display()
                )
            });
            return Ok(StepPlan {
                tasks: all(&|_| TaskAction::Unpinned),
                summary,
                profile_dir: dirs.step,
            });
        }
        // Which share each local task gets: rank order, or the rank matrix's placement.
        let (order, rank_line) = match &ranks {
            Some(rp) => {
                let why = self.gpu_reason();
                local_ranks::assign(
                    &self.node,
                    &shares,
                    &self.global,
                    self.total,
                    rp,
                    &self.strategy,
                    self.seed,
                    match &why {
                        Some(w) => local_ranks::Placement::KeepNuma(w),
                        None => local_ranks::Placement::Free,
                    },
                )?
            }
            None => ((0..shares.len()).collect(), None),
        };
        let mut tasks = Vec::with_capacity(self.tasks);
        let mut summary = None;
        for (t, &k) in order.iter().enumerate() {
            let share = &shares[k];
            let own = &dirs.tasks[t];
            let dir = if has(own) {
                Some(own.clone())
            } else {
                fallback.clone()
            };
            let action = match dir {
                Some(dir) => {
                    let topo = self.node.restrict(share)?;
                    let (plan, compact, n, verdict, unsupported) = self.plan_task(&dir, &topo)?;
                    if summary.is_none() {
                        summary = Some(format!(
                            "{}; {verdict}",
                            self.summary_line(&dir, n, &plan, &compact)
                        ));
                    }
                    match binding::thread_pus(&plan) {
                        // The evidence supports no plan: the threads stay as the launcher
                        // placed them, in the task's share, as without cmlb.
                        _ if unsupported => TaskAction::Share,
                        Some(pus) => TaskAction::Pin {
                            pus,
                            plan: Box::new(plan),
                            profile: dir,
                        },
                        None => TaskAction::Unpinned,
                    }
                }
                None => TaskAction::Unpinned,
            };
            tasks.push(TaskPlan {
                share: share.clone(),
                action,
            });
        }
        let summary = match (summary, rank_line) {
            (Some(s), Some(r)) => Some(format!("{s}; {r}")),
            (None, Some(r)) => Some(format!(
                "cmlb: {}: strategy {}, job profile {}: {r}",
                self.label,
                self.strategy.name(),
                dirs.step.display()
            )),
            (s, None) => s,
        };
        Ok(StepPlan {
            tasks,
            summary,
            profile_dir: dirs.step,
        })
    }

    /// The plan of one task from its profile, checked against creation order on held-out
    /// evidence ([`guarded_plan`]), and the `compact` plan it is compared with.
    fn plan_task(&self, dir: &Path, topo: &Topology) -> Result<(Plan, Plan, usize, String, bool)> {
        check_profile_files(dir)?;
        let prof = Profile::read_dir(dir)
            .map_err(|e| MapError::Step(format!("profile {} is unusable: {e}", dir.display())))?;
        let n = prof.comm.n();
        if let Some(m) = self.omp_threads {
            // MPI libraries start threads of their own (Open MPI's progress and PMIx threads)
            // before the OpenMP team, so a rank's profile may hold more threads than
            // OMP_NUM_THREADS; fewer means the program changed.
            if m > n || (self.total == 1 && m != n) {
                return Err(MapError::Step(format!(
                    "profile {} has {n} threads but OMP_NUM_THREADS={m}",
                    dir.display()
                )));
            }
        }
        let choice = guarded_plan(&self.strategy, &prof, dir, topo, self.seed)?;
        let input = MapInput {
            comm: &prof.comm,
            load: &prof.load,
            topology: topo,
            seed: self.seed,
        };
        let compact = mapper::plan(&StrategySpec::compact(), &input, None)?;
        Ok((choice.plan, compact, n, choice.line, choice.used_prior))
    }

    fn summary_line(&self, dir: &Path, n: usize, plan: &Plan, compact: &Plan) -> String {
        let m = &plan.metrics;
        let c = &compact.metrics;
        let versus = format!(
            "RemoteComm {:.4e} (compact {:.4e}), Load_std {:.4e} (compact {:.4e})",
            m.remote_comm, c.remote_comm, m.load_std, c.load_std
        );
        // The strategy asked for: when the guard fell back, the verdict after it says so.
        let head = format!(
            "cmlb: {}: strategy {}, profile {} ({n} threads)",
            self.label,
            self.strategy.name(),
            dir.display()
        );
        let pus = format_cpu_list(&self.cpus);
        match &self.cpus_label {
            Some(cores) => format!(
                "{head}, {} task{} on {cores} (PUs {pus}); task 0: {versus}",
                self.tasks,
                if self.tasks == 1 { "" } else { "s" }
            ),
            None => format!("{head}, PUs {pus}: {versus}"),
        }
    }
}

/// The plan of `spec` from a profile, applied only when the profile supports it: the plan is
/// made from each held-out half and scored on the other against creation order (`compact`),
/// and falls back to it otherwise ([`crate::guard::choose`]); threads without data follow
/// creation order. The verdict line says which. Every front end that plans from a profile
/// (`cmlb run`, `--cmlb-map=apply`, `cmlb map --profile`) calls this, so they agree.
pub fn guarded_plan(
    spec: &StrategySpec,
    prof: &Profile,
    dir: &Path,
    topo: &Topology,
    seed: u64,
) -> Result<crate::guard::Choice> {
    let n = prof.comm.n();
    let samples = if spec.wants_samples() {
        read_profile_samples(dir, n)?
    } else {
        None
    };
    // The guard reports every plan's metrics on the profile's own matrix.
    crate::guard::choose(prof, topo, &|comm: &mapper::CommMatrix| {
        let input = MapInput {
            comm,
            load: &prof.load,
            topology: topo,
            seed,
        };
        mapper::plan(spec, &input, samples.as_ref())
    })
}

/// `dir/samples.csv` when the profile has one, checked against the profile's `n` threads.
pub fn read_profile_samples(dir: &Path, n: usize) -> Result<Option<Arc<SampleLog>>> {
    let path = dir.join(SAMPLES_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let log = read_samples_csv(&path)?;
    if log.threads.len() > n {
        return Err(MapError::input(
            path.display().to_string(),
            format!(
                "has samples of thread {} but the matrix has {n} threads",
                log.threads.len() - 1
            ),
        ));
    }
    Ok(Some(Arc::new(log)))
}

/// The profile files a pipeline reads must be regular files: a FIFO or a device (or a symlink
/// to one) would block or flood the launcher — slurmstepd, under Slurm — while it reads.
pub fn check_profile_files(dir: &Path) -> Result<()> {
    use profile::{cpu::CPU_FILE, HALF_FILES, LINE_FILES, PROFILE_FILE};
    let names = [
        PROFILE_FILE,
        "comm.csv",
        "load.csv",
        "timeline.csv",
        SAMPLES_FILE,
        CPU_FILE,
    ]
    .into_iter()
    .chain(HALF_FILES)
    .chain(LINE_FILES);
    for name in names {
        // Not followed: a symlink is refused too, so it cannot be swapped for a FIFO later.
        // Missing files get Profile::read_dir's own message (timeline.csv is optional).
        match std::fs::symlink_metadata(dir.join(name)) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => {
                return Err(MapError::Step(format!(
                    "profile {}: {name} is not a regular file",
                    dir.display()
                )))
            }
            Err(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_profile(dir: &Path, comm: &str, n: usize) {
        std::fs::create_dir_all(dir).unwrap();
        let threads: String = (0..n)
            .map(|i| format!("- index: {i}\n  tid: {}\n", 100 + i))
            .collect();
        std::fs::write(
            dir.join("profile.yaml"),
            format!("schema: 1\ncommand: [app]\nbackend: test\nthreads:\n{threads}"),
        )
        .unwrap();
        std::fs::write(dir.join("comm.csv"), comm).unwrap();
        std::fs::write(dir.join("load.csv"), "1\n".repeat(n)).unwrap();
    }

    const PAIRS4: &str = "0,0,9,0\n0,0,0,9\n9,0,0,0\n0,9,0,0\n";

    #[test]
    fn apply_pins_every_task_inside_its_share() {
        let t = tempfile::tempdir().unwrap();
        let prof = t.path().join("p");
        write_profile(&prof, PAIRS4, 4);
        let machine = Topology::load("pack:1 numa:2 core:4 pu:1").unwrap();
        let step = Step::new(&machine, &(0..8).collect::<Vec<u32>>())
            .unwrap()
            .tasks(2)
            .profile(ProfileSource::Given(prof.clone()))
            .strategy(StrategySpec::parse("cmlb").unwrap());
        let plan = step.compute().unwrap();
        assert_eq!(plan.tasks.len(), 2);
        // Each task in its own share: pinned inside it, or (a profile without held-out halves
        // supports no thread plan) the share as its mask.
        assert_ne!(plan.tasks[0].share, plan.tasks[1].share);
        for tp in &plan.tasks {
            match &tp.action {
                TaskAction::Pin { pus, .. } => {
                    assert!(pus.iter().all(|p| tp.share.contains(p)), "{tp:?}")
                }
                TaskAction::Share => {}
                other => panic!("{other:?}"),
            }
        }
        // One task on the whole node: pairs (0,2) and (1,3) share a NUMA node (PUs 0-3, 4-7)
        // when the guard keeps cmlb's plan; otherwise the threads are left in the share.
        let plan = step.tasks(1).compute().unwrap();
        let s = plan.summary.clone().unwrap();
        match &plan.tasks[0].action {
            TaskAction::Pin { pus, .. } => {
                assert_eq!(pus[0] / 4, pus[2] / 4, "{pus:?}");
                assert_eq!(pus[1] / 4, pus[3] / 4, "{pus:?}");
            }
            TaskAction::Share => assert!(s.contains("threads left as they are"), "{s}"),
            other => panic!("{other:?}"),
        }
        assert!(s.starts_with("cmlb: apply: strategy cmlb, profile "), "{s}");
        assert!(s.contains("(4 threads), PUs 0-7: RemoteComm"), "{s}");
    }

    #[test]
    fn no_profile_means_a_prerun_or_unpinned_never_a_guess() {
        let t = tempfile::tempdir().unwrap();
        let machine = Topology::load("pack:1 numa:1 core:2 pu:1").unwrap();
        let argv = vec!["/bin/app".to_string()];
        let step = Step::new(&machine, &[0, 1])
            .unwrap()
            .command(&argv)
            .profile(ProfileSource::Keyed(t.path().into()));
        let p = step.compute().unwrap();
        assert_eq!(
            p.tasks[0].action,
            TaskAction::Prerun {
                dir: p.profile_dir.clone()
            }
        );
        let p = step.clone().allow_prerun(false).compute().unwrap();
        assert!(p.tasks.iter().all(|t| t.action == TaskAction::Unpinned));
        assert_eq!(p.summary, None);
        // A profile the user named must exist.
        let e = step
            .profile(ProfileSource::Given(t.path().join("nope")))
            .compute()
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("nope has no profile.yaml"), "{e}");
    }

    #[test]
    fn wrap_words_carry_the_options() {
        let o = WrapOpts {
            cmlb: "/usr/bin/cmlb".into(),
            backend: Some("watch".into()),
            period: Some(500),
            duration: Some(2.0),
            prerun_secs: 3.0,
            run_anyway: true,
            max_runs: Some(4),
            bind: BindMode::Omp,
            topology: "live".into(),
            strategy: StrategySpec::parse("spectral:k=2,scheme=plain").unwrap(),
        };
        let w = TaskAction::Profile {
            dir: "/s/k".into(),
            ranks: None,
        }
        .wrap_argv(&o)
        .unwrap();
        assert_eq!(
            w.join(" "),
            "/usr/bin/cmlb profile --out /s/k --run-anyway --accumulate --max-runs 4 --backend watch \
             --period 500 --duration 2 --"
        );
        let w = TaskAction::Prerun { dir: "/s/k".into() }
            .wrap_argv(&o)
            .unwrap();
        assert_eq!(
            w.join(" "),
            "/usr/bin/cmlb run --time 3 --save-profile /s/k --strategy spectral:k=2,scheme=plain \
             --bind omp --topology live --backend watch --period 500 --"
        );
        assert_eq!(TaskAction::Unpinned.wrap_argv(&o), None);
    }

    #[test]
    fn thread_count_must_match_the_profile() {
        let t = tempfile::tempdir().unwrap();
        write_profile(t.path(), PAIRS4, 4);
        let machine = Topology::load("pack:1 numa:1 core:4 pu:1").unwrap();
        let e = Step::new(&machine, &[0, 1, 2, 3])
            .unwrap()
            .omp_threads(Some(3))
            .profile(ProfileSource::Given(t.path().into()))
            .compute()
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("has 4 threads but OMP_NUM_THREADS=3"), "{e}");
    }

    #[test]
    fn profile_files_must_be_regular_files() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("profile.yaml"), "schema: 1\n").unwrap();
        std::fs::write(d.join("load.csv"), "1\n").unwrap();
        // Missing files are left to Profile::read_dir's message.
        check_profile_files(d).expect("regular files and a missing one");
        nix::unistd::mkfifo(&d.join("comm.csv"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = check_profile_files(d).unwrap_err().to_string();
        assert!(e.contains("comm.csv is not a regular file"), "{e}");
        std::fs::remove_file(d.join("comm.csv")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join("comm.csv")).unwrap();
        let e = check_profile_files(d).unwrap_err().to_string();
        assert!(e.contains("comm.csv is not a regular file"), "{e}");
        std::fs::remove_file(d.join("comm.csv")).unwrap();
        // The optional files Profile::read_dir also reads: the CPU timeline and the halves.
        for f in ["cpu.csv", "comm.b.csv", "lines.a.csv"] {
            nix::unistd::mkfifo(&d.join(f), nix::sys::stat::Mode::S_IRWXU).unwrap();
            let e = check_profile_files(d).unwrap_err().to_string();
            assert!(e.contains(&format!("{f} is not a regular file")), "{e}");
            std::fs::remove_file(d.join(f)).unwrap();
        }
    }

    /// A rank profile of `n` ranks where the given pairs exchange `bytes` each way.
    fn write_ranks(dir: &Path, n: usize, pairs: &[(u32, u32)], bytes: u64) {
        use contract::ranks::{JobRanks, RankRow, Sent};
        let rows = (0..n as u32)
            .map(|r| RankRow {
                rank: r,
                host: "n1".into(),
                seconds: 1.0,
                to: pairs
                    .iter()
                    .filter_map(|&(a, b)| {
                        let d = if a == r {
                            b
                        } else if b == r {
                            a
                        } else {
                            return None;
                        };
                        Some((
                            d,
                            Sent {
                                p2p_bytes: bytes,
                                p2p_msgs: 1,
                                ..Sent::default()
                            },
                        ))
                    })
                    .collect(),
            })
            .collect();
        JobRanks {
            n,
            rows,
            mpi: "test".into(),
            command: vec!["app".into()],
        }
        .write_dir(&dir.join(contract::ranks::RANKS_DIR))
        .unwrap();
    }

    #[test]
    fn a_multi_node_step_keeps_task_profiles_by_global_id_under_one_key() {
        let t = tempfile::tempdir().unwrap();
        let machine = Topology::load("pack:1 numa:1 core:4 pu:1").unwrap();
        let argv = vec!["/bin/app".to_string()];
        let on = |cores: &str, global: &[usize]| {
            Step::from_slurm_cores(&machine, cores)
                .unwrap()
                .layout(global, 8, 2)
                .command(&argv)
                .profile(ProfileSource::Keyed(t.path().into()))
                .mode(Mode::Profile)
                .compute()
                .unwrap()
        };
        // Two nodes given different core numbers still name one job profile directory.
        let a = on("0-3", &[0, 1, 2, 3]);
        let b = on("1-2", &[4, 6]);
        assert_eq!(a.profile_dir, b.profile_dir);
        let TaskAction::Profile { dir, ranks } = &b.tasks[1].action else {
            panic!("{:?}", b.tasks[1])
        };
        assert_eq!(dir, &b.profile_dir.join("task6"));
        assert_eq!(
            ranks.as_deref(),
            Some(b.profile_dir.join("ranks").as_path())
        );
        // A one-task step keeps its single profile directory and traces no ranks.
        let one = Step::new(&machine, &[0, 1])
            .unwrap()
            .command(&argv)
            .profile(ProfileSource::Keyed(t.path().into()))
            .mode(Mode::Profile)
            .compute()
            .unwrap();
        assert_ne!(one.profile_dir, a.profile_dir);
        let TaskAction::Profile { dir, ranks } = &one.tasks[0].action else {
            unreachable!()
        };
        assert_eq!((dir, ranks), (&one.profile_dir, &None));
    }

    #[test]
    fn the_rank_matrix_decides_which_rank_gets_which_share() {
        let t = tempfile::tempdir().unwrap();
        let job = t.path().join("job");
        // Ranks 0-2 and 1-3 exchange: rank order (0,1 | 2,3 on the two NUMA nodes) cuts both.
        write_ranks(&job, 4, &[(0, 2), (1, 3)], 1000);
        let machine = Topology::load("pack:1 numa:2 core:2 pu:1").unwrap();
        let p = Step::new(&machine, &[0, 1, 2, 3])
            .unwrap()
            .layout(&[0, 1, 2, 3], 4, 1)
            .command(&["app".to_string()])
            .profile(ProfileSource::Given(job.clone()))
            .compute()
            .unwrap();
        let numa = |t: usize| p.tasks[t].share[0] / 2;
        assert_eq!(numa(0), numa(2), "{:?}", p.tasks);
        assert_eq!(numa(1), numa(3), "{:?}", p.tasks);
        assert_ne!(numa(0), numa(1), "{:?}", p.tasks);
        // No thread profiles: each rank runs in its share with threads unpinned.
        assert!(p.tasks.iter().all(|t| t.action == TaskAction::Unpinned));
        let s = p.summary.unwrap();
        assert!(
            s.contains("ranks 0-3 of 4 on this node: cores by the rank matrix (inter-NUMA bytes 0.0000e0, rank order 4.0000e3"),
            "{s}"
        );
        // Pairs that rank order already keeps together: rank order stays.
        write_ranks(&job, 4, &[(0, 1), (2, 3)], 1000);
        let p = Step::new(&machine, &[0, 1, 2, 3])
            .unwrap()
            .layout(&[0, 1, 2, 3], 4, 1)
            .profile(ProfileSource::Given(job.clone()))
            .compute()
            .unwrap();
        let shares: Vec<u32> = p.tasks.iter().map(|t| t.share[0]).collect();
        assert_eq!(shares, [0, 1, 2, 3]);
        assert!(p.summary.unwrap().contains("rank order kept"));
        // A profile of another rank count is not applied to this step.
        write_ranks(&job, 6, &[(0, 2)], 10);
        let p = Step::new(&machine, &[0, 1, 2, 3])
            .unwrap()
            .layout(&[0, 1, 2, 3], 4, 1)
            .profile(ProfileSource::Given(job))
            .compute()
            .unwrap();
        assert!(p
            .summary
            .unwrap()
            .contains("the rank profile has 6 ranks but the step 4 tasks"));
    }

    #[test]
    fn a_rank_without_its_own_thread_profile_uses_the_lowest_ranks() {
        let t = tempfile::tempdir().unwrap();
        let job = t.path().join("job");
        write_profile(&job.join("task2"), "0,9\n9,0\n", 2);
        let machine = Topology::load("pack:1 numa:1 core:4 pu:1").unwrap();
        // A strategy that pins from any profile: which profile is used is what is tested.
        let p = Step::new(&machine, &[0, 1, 2, 3])
            .unwrap()
            .layout(&[4, 5], 8, 2)
            .strategy(StrategySpec::parse("scatter").unwrap())
            .profile(ProfileSource::Given(job.clone()))
            .compute()
            .unwrap();
        for tp in &p.tasks {
            let TaskAction::Pin { profile, pus, .. } = &tp.action else {
                panic!("{tp:?}")
            };
            assert_eq!(profile, &job.join("task2"));
            assert!(pus.iter().all(|u| tp.share.contains(u)));
        }
    }

    #[test]
    fn an_mpi_rank_may_hold_more_threads_than_its_openmp_team() {
        let t = tempfile::tempdir().unwrap();
        let job = t.path().join("job");
        write_profile(&job.join("task0"), PAIRS4, 4);
        let machine = Topology::load("pack:1 numa:1 core:4 pu:1").unwrap();
        let step = |omp| {
            Step::new(&machine, &[0, 1, 2, 3])
                .unwrap()
                .layout(&[0], 2, 2)
                .strategy(StrategySpec::parse("scatter").unwrap())
                .omp_threads(Some(omp))
                .profile(ProfileSource::Given(job.clone()))
                .compute()
        };
        // 2 OpenMP threads + 2 threads of the MPI library: planned.
        assert!(matches!(
            step(2).unwrap().tasks[0].action,
            TaskAction::Pin { .. }
        ));
        let e = step(5).unwrap_err().to_string();
        assert!(e.ends_with("has 4 threads but OMP_NUM_THREADS=5"), "{e}");
    }

    #[test]
    fn a_multi_task_step_without_a_profile_is_never_pre_run() {
        let t = tempfile::tempdir().unwrap();
        let machine = Topology::load("pack:1 numa:1 core:2 pu:1").unwrap();
        let p = Step::new(&machine, &[0, 1])
            .unwrap()
            .layout(&[0, 1], 4, 2)
            .command(&["app".to_string()])
            .profile(ProfileSource::Keyed(t.path().into()))
            .compute()
            .unwrap();
        assert!(p.tasks.iter().all(|t| t.action == TaskAction::Unpinned));
        let s = p.summary.unwrap();
        assert!(
            s.contains("no profile of this 4-task step in") && s.contains("--cmlb-map=profile"),
            "{s}"
        );
    }

    /// A profile made under a name serves a run with other arguments (a short run profiled,
    /// the long one applied); without the name, the missing keyed profile's line lists the
    /// program's other profiles.
    #[test]
    fn a_named_profile_serves_another_command_line() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        // The short run's profile, made with profile:name=short (command "app --steps 10").
        write_profile(&root.join("short"), PAIRS4, 4);
        let yaml = root.join("short/profile.yaml");
        let text = std::fs::read_to_string(&yaml).unwrap();
        std::fs::write(
            &yaml,
            text.replace("command: [app]", "command: [/bin/app, --steps, '10']"),
        )
        .unwrap();
        let machine = Topology::load("pack:1 numa:2 core:2 pu:1").unwrap();
        let long = ["/bin/app".to_string(), "--steps".into(), "100000".into()];
        let step = |src: ProfileSource| {
            Step::new(&machine, &[0, 1, 2, 3])
                .unwrap()
                .command(&long)
                .profile(src)
        };
        let named = step(ProfileSource::Named {
            root: root.clone(),
            name: "short".into(),
        })
        .compute()
        .unwrap();
        // Planned from that profile (pinned, or left in its share by the guard): neither a
        // pre-run nor "no profile".
        assert!(
            matches!(
                named.tasks[0].action,
                TaskAction::Pin { .. } | TaskAction::Share
            ),
            "{:?}",
            named.tasks
        );
        assert_eq!(named.profile_dir, root.join("short"));
        let line = named.summary.unwrap();
        assert!(
            line.contains(&root.join("short").display().to_string()),
            "{line}"
        );
        // By key: the long run's own profile is missing; its other profiles are named.
        let keyed = step(ProfileSource::Keyed(root.clone()));
        let p = keyed.compute().unwrap();
        assert!(matches!(p.tasks[0].action, TaskAction::Prerun { .. }));
        let others = keyed.other_profiles(&p.profile_dir);
        assert!(
            others.contains("profiles of app in")
                && others.contains("short (/bin/app --steps 10)")
                && others.contains("apply:name=NAME"),
            "{others}"
        );
        // Another program's profiles are not offered.
        let other = Step::new(&machine, &[0, 1])
            .unwrap()
            .command(&["/bin/other".to_string()])
            .profile(ProfileSource::Keyed(root.clone()));
        let p = other.compute().unwrap();
        assert_eq!(other.other_profiles(&p.profile_dir), "");
    }
}
