//! The step: what a launcher knows (CPUs, tasks, command, profile, strategy, mode) set on a
//! [`Step`], then [`Step::compute`] → a [`StepPlan`] with every task's action.

use crate::{binding, check_profile_files, guarded_plan, local_ranks};
use crate::{Mode, ProfileSource, StepPlan, TaskAction, TaskPlan};
use mapper::StrategySpec;
use mapper::{format_cpu_list, Topology};
use mapper::{MapError, Plan, Result};
use profile::ranks::{has_ranks, read_ranks_dir};
use profile::{Profile, PROFILE_FILE};
use std::path::{Path, PathBuf};

mod layout;

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

    /// How the launcher names the step's CPUs: `key` keys the profile (the same text on every
    /// node of a job, e.g. Slurm's `S_STEP_ALLOC_CORES`), `label` names them in the summary
    /// line (e.g. "cores 0-3"). Default: the PU list.
    pub fn cpus_key(mut self, key: &str, label: String) -> Self {
        self.key_cpus = key.to_string();
        self.cpus_label = Some(label);
        self
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
        Ok((choice.plan, choice.prior, n, choice.line, choice.used_prior))
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
