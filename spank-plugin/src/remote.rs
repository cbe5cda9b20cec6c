//! Remote context (slurmstepd), the plugin's step policy: `user_init` (once per step per
//! node, as the job user) reads what Slurm knows about the step and hands it to the mapper's
//! pipeline ([`step::Step`]); `task_init` (in each task before exec, as the job
//! user) carries out the task's action with the `contract` crate. Nothing here decides a
//! placement: `cmlb run` goes through the same pipeline and would decide the same.

use crate::ffi::{self, item, spank_t, LogLevel};
use crate::options::{MapOpts, Mode, SiteConf};
use crate::sys;
use crate::{effective, with_state};
use cmlb_slurm::companions;
use cmlb_slurm::scratch::{check_scratch, ensure_scratch};
use contract::{BindMode, PinEnv};
use mapper::{format_cpu_list, Topology};
use std::path::PathBuf;
use step::{self, ProfileSource, TaskAction, TaskPlan};

/// What one local task gets, as `task_init` carries it out.
#[derive(Debug, Clone)]
pub(crate) enum TaskDo {
    /// Nothing (dry-run, or a task beyond the plan).
    Nothing,
    /// Task mask = `share`, thread k on `pus[k]` (none when `pus` is empty: the share only);
    /// `omp_team`: an MPI rank's OpenMP team size ([`contract::PinEnv::omp_team`]).
    Pin {
        pus: Vec<u32>,
        share: Vec<u32>,
        omp_team: Option<usize>,
    },
    /// Re-exec the task as `words... <program> <args>` (profiler or pre-run), inside `share`;
    /// with `trace`, the MPI tracer (library) records the task's rank traffic into the directory.
    Wrap {
        words: Vec<String>,
        share: Vec<u32>,
        trace: Option<(Vec<PathBuf>, PathBuf)>,
    },
}

/// What user_init decided for this step on this node.
#[derive(Debug, Clone)]
pub(crate) struct StepState {
    opts: MapOpts,
    preload: PathBuf,
    /// strict=1 and planning failed: every task fails with this message.
    fail: Option<String>,
    tasks: Vec<TaskDo>,
}

/// A reason to run unpinned (or fail with strict=1).
#[derive(Debug)]
struct Skip(String);

impl<E: std::fmt::Display> From<E> for Skip {
    fn from(e: E) -> Self {
        Skip(e.to_string())
    }
}

fn warn(msg: &str) {
    ffi::log(LogLevel::User, msg);
}

pub(crate) fn user_init(sp: spank_t) -> i32 {
    let (site, broken, option, option_bad) = with_state(|s| {
        s.step = None;
        (
            s.site.clone(),
            s.site_broken,
            s.option.as_ref().map(|o| o.1.clone()),
            s.option_bad,
        )
    });
    if broken {
        return 0;
    }
    if option_bad {
        // The value was logged by the option callback; falling back to CMLB_MAP or the site
        // default would apply something the user did not ask for.
        return degrade(&site, "--cmlb-map was not understood here");
    }
    let env = ffi::getenv(sp, crate::ENV_SWITCH);
    let opts = match effective(option, env.as_deref(), &site) {
        Ok(o) => o,
        Err(e) => return degrade(&site, &e),
    };
    if opts.mode == Mode::Off {
        return 0;
    }
    // The batch script, extern and interactive steps are not the user's program: binding them
    // would also leak OMP_* variables into every srun of the script.
    match ffi::get_u32(sp, item::S_JOB_STEPID) {
        Some(id) if id < 0xffff_fff0 => {}
        // The batch script: no binding, but where the job's ranks go across nodes.
        Some(crate::batch::BATCH_STEP) => {
            return match crate::batch::user_init(sp, &site, &opts) {
                Ok(()) => 0,
                Err(e) => degrade_batch(&site, &e),
            }
        }
        _ => return 0,
    }
    // `mpirun`/`mpiexec` started its daemons with srun: not the application. Pinning,
    // profiling or pre-running them broke every Open MPI job (the ranks are reached from the
    // batch script instead: batch.rs, contract::launcher).
    if let Some(prog) = ffi::get_argv(sp)
        .and_then(|a| a.into_iter().next())
        .filter(|p| contract::launcher::is_daemon(p))
    {
        daemon_step(sp, &prog, &opts);
        return 0;
    }
    match plan_step(sp, &site, &opts) {
        Ok(st) => {
            with_state(|s| s.step = Some(st));
            0
        }
        Err(Skip(e)) => degrade(&site, &e),
    }
}

/// A launcher daemon's step is left exactly as it is. Its ranks are reached when the batch
/// script was prepared (the rank-wrap variable came down to the daemon); otherwise the first
/// node says once why they are not.
fn daemon_step(sp: spank_t, prog: &str, opts: &MapOpts) {
    let name = prog.rsplit('/').next().unwrap_or(prog);
    let wrapped = ffi::getenv(sp, contract::env::RANK_WRAP).is_some_and(|w| !w.is_empty());
    let first = ffi::get_u32(sp, item::S_JOB_NODEID).is_none_or(|n| n == 0);
    if wrapped || opts.from_site || !first {
        ffi::log(
            LogLevel::Verbose,
            &format!(
                "cmlb: {name} is an MPI launcher's daemon: its step is left as it is{}",
                if wrapped {
                    "; the batch script's preload reaches its ranks"
                } else {
                    ""
                }
            ),
        );
        return;
    }
    warn(&format!(
        "cmlb: {name} is an MPI launcher's daemon: left as it is, its ranks run without cmlb; \
         cmlb reaches mpirun/mpiexec ranks in a batch script run with sbatch --cmlb-map={} \
         (docs/mpi.md), or use srun",
        opts.mode.name()
    ));
}

/// Strict mode's failure: every task of this step (the script, in the batch step) exits 1 in
/// task_init with `msg`, rather than user_init failing, which Slurm treats as a launch failure.
fn fail_tasks(msg: &str) {
    with_state(|s| {
        s.step = Some(StepState {
            opts: MapOpts::off(),
            preload: PathBuf::new(),
            fail: Some(msg.to_string()),
            tasks: Vec::new(),
        })
    });
}

fn degrade(site: &SiteConf, msg: &str) -> i32 {
    if site.strict {
        ffi::log(
            LogLevel::Error,
            &format!("cmlb: {msg} (strict=1: failing the step)"),
        );
        // A failing user_init makes srun report "launch failed" yet exit 0 (22.05), so the
        // tasks fail instead: task_init errors become the step's non-zero exit status.
        fail_tasks(msg);
        0
    } else {
        warn(&format!("cmlb: warning: {msg}; the step runs unpinned"));
        0
    }
}

/// A batch-step problem: the script runs with Slurm's own distribution (or fails in strict mode).
fn degrade_batch(site: &SiteConf, msg: &str) -> i32 {
    if site.strict {
        ffi::log(
            LogLevel::Error,
            &format!("cmlb: {msg} (strict=1: failing the job)"),
        );
        // As for a step: the script's task fails in task_init. A failing user_init in the
        // batch step is a launch failure to Slurm, which may requeue or hold the job.
        fail_tasks(msg);
        0
    } else {
        warn(&format!(
            "cmlb: warning: {msg}; the job's ranks are placed as Slurm distributes them"
        ));
        0
    }
}

/// What Slurm tells about the step on this node.
struct SlurmStep {
    job: u32,
    step: u32,
    uid: u32,
    ntasks: usize,
    /// Nodes and tasks of the whole step, and the global id (MPI rank) of each local task.
    nnodes: usize,
    total: usize,
    global: Vec<usize>,
    argv: Vec<String>,
    cores: String,
    omp_threads: Option<usize>,
    scratch: PathBuf,
    /// In a batch job profiled with `sbatch --cmlb-map=profile`: the job's `ranks/`, which a
    /// step with the job's task count records too.
    job_ranks: Option<PathBuf>,
}

fn read_step(sp: spank_t, site: &SiteConf) -> Result<SlurmStep, Skip> {
    let need =
        |what: &str, v: Option<u32>| v.ok_or_else(|| Skip(format!("Slurm did not give {what}")));
    let job = need("the job id", ffi::get_u32(sp, item::S_JOB_ID))?;
    let step = need("the step id", ffi::get_u32(sp, item::S_JOB_STEPID))?;
    let uid = need("the job uid", ffi::get_u32(sp, item::S_JOB_UID))?;
    let ntasks = need(
        "the local task count",
        ffi::get_u32(sp, item::S_JOB_LOCAL_TASK_COUNT),
    )? as usize;
    let nnodes = ffi::get_u32(sp, item::S_JOB_NNODES).map_or(1, |n| n.max(1) as usize);
    let total =
        ffi::get_u32(sp, item::S_JOB_TOTAL_TASK_COUNT).map_or(ntasks, |n| (n as usize).max(ntasks));
    let global: Vec<usize> = match (0..ntasks as u32)
        .map(|l| ffi::local_to_global(sp, l).map(|g| g as usize))
        .collect::<Option<Vec<usize>>>()
    {
        Some(g) => g,
        None if total == ntasks => (0..ntasks).collect(),
        None => return Err(Skip("Slurm did not give the tasks' global ids".into())),
    };
    let argv = ffi::get_argv(sp)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| Skip("Slurm did not give the command".into()))?;
    let cores = ffi::get_str(sp, item::S_STEP_ALLOC_CORES)
        .ok_or_else(|| Skip("Slurm did not give S_STEP_ALLOC_CORES".into()))?;
    let omp_threads = ffi::getenv(sp, contract::env::OMP_NUM_THREADS)
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0);
    let scratch = crate::scratch::job_scratch(sp, &site.scratch, uid, job).here;
    let job_ranks = match (
        ffi::getenv(sp, contract::env::JOB_PROFILE).filter(|d| !d.is_empty()),
        ffi::getenv(sp, contract::env::JOB_TASKS).and_then(|n| n.trim().parse::<usize>().ok()),
    ) {
        (Some(d), Some(n)) if n == total => Some(PathBuf::from(d).join(contract::ranks::RANKS_DIR)),
        _ => None,
    };
    Ok(SlurmStep {
        job_ranks,
        job,
        step,
        uid,
        ntasks,
        nnodes,
        total,
        global,
        argv,
        cores,
        omp_threads,
        scratch,
    })
}

fn plan_step(sp: spank_t, site: &SiteConf, opts: &MapOpts) -> Result<StepState, Skip> {
    let s = read_step(sp, site)?;
    let spec = site.topology.clone().unwrap_or_else(|| "live".into());
    let machine = Topology::load(&spec)?;
    let explicit = opts.profile.clone();
    if explicit.is_none() && std::fs::symlink_metadata(&s.scratch).is_ok() {
        check_scratch(&s.scratch, s.uid).map_err(|e| Skip(e.0))?;
    }
    let mode = match opts.mode {
        Mode::Profile => step::Mode::Profile,
        _ => step::Mode::Apply,
    };
    let strategy = opts.strategy.clone().unwrap_or_default();
    let step = cmlb_slurm::cores::step_on_cores(&machine, &s.cores)?
        .layout(&s.global, s.total, s.nnodes)
        .socket_dist(cmlb_slurm::cores::socket_dist(
            ffi::getenv(sp, "SLURM_DISTRIBUTION").as_deref(),
        ))
        .omp_threads(s.omp_threads)
        // A GPU step's ranks keep the NUMA nodes Slurm gave them, near their GPUs.
        .gpus(cmlb_slurm::gpus::gpu_hint(|k| ffi::getenv(sp, k)))
        .command(&s.argv)
        .profile(match (&explicit, &opts.name) {
            (Some(p), _) => ProfileSource::Given(p.clone()),
            (None, Some(name)) => ProfileSource::Named {
                root: s.scratch.clone(),
                name: name.clone(),
            },
            (None, None) => ProfileSource::Keyed(s.scratch.clone()),
        })
        .strategy(strategy.clone())
        .mode(mode)
        // The pre-run starts the program twice: only for users who asked for apply, never
        // for every job of a site whose default is apply.
        .allow_prerun(!opts.from_site)
        .label("apply");
    let plan = step.compute()?;

    let dir = sys::plugin_dir();
    let preload = companions::preload_lib(site, &dir).map_err(Skip);
    let wraps = plan.tasks.iter().any(|t| {
        matches!(
            t.action,
            TaskAction::Profile { .. } | TaskAction::Prerun { .. }
        )
    });
    let state = |preload: PathBuf, tasks: Vec<TaskDo>| StepState {
        opts: opts.clone(),
        preload,
        fail: None,
        tasks,
    };
    let plural = if s.ntasks == 1 { "" } else { "s" };
    if wraps {
        let wrap = opts.wrap_opts(site, companions::cmlb_binary(site, &dir).map_err(Skip)?);
        ensure_scratch(&s.scratch, s.uid).map_err(|e| Skip(e.0))?;
        // A multi-task step's rank traffic: the MPI tracer, preloaded beside the profiler.
        let ranks_out = plan.tasks.iter().find_map(|t| match &t.action {
            TaskAction::Profile { ranks: Some(r), .. } => Some(r.clone()),
            _ => None,
        });
        let mpi_lib = match &ranks_out {
            Some(_) => match companions::mpi_lib(site, &dir) {
                Ok(l) => Some(l),
                Err(e) => {
                    warn(&format!(
                        "cmlb: warning: {e}: the rank matrix of this step is not recorded"
                    ));
                    None
                }
            },
            None => None,
        };
        let tasks = plan
            .tasks
            .iter()
            .map(|t| match t.action.wrap_argv(&wrap) {
                Some(words) => TaskDo::Wrap {
                    words,
                    share: t.share.clone(),
                    trace: match (&t.action, &mpi_lib) {
                        (TaskAction::Profile { ranks: Some(r), .. }, Some(l)) => Some((
                            std::iter::once(r.clone())
                                .chain(s.job_ranks.clone())
                                .collect(),
                            l.clone(),
                        )),
                        _ => None,
                    },
                },
                None => TaskDo::Nothing,
            })
            .collect();
        warn(&if opts.mode == Mode::Profile {
            format!(
                "cmlb: profiling {} ({} task{plural}{}, cores {}); profile: {}{}",
                s.argv[0],
                s.ntasks,
                if s.total > s.ntasks {
                    format!(" of {} on {} nodes", s.total, s.nnodes)
                } else {
                    String::new()
                },
                s.cores,
                plan.profile_dir.display(),
                match (&ranks_out, &mpi_lib) {
                    (Some(r), Some(_)) => format!("; MPI rank matrix: {}", r.display()),
                    _ => String::new(),
                }
            )
        } else {
            format!(
                "cmlb: no profile for {} in {}: profiling for {} s first (pre-run), then running pinned{}",
                s.argv[0],
                plan.profile_dir.display(),
                opts.time,
                step.other_profiles(&plan.profile_dir)
            )
        });
        return Ok(state(preload?, tasks));
    }
    if plan.summary.is_none() {
        ffi::log(
            LogLevel::Verbose,
            &format!(
                "cmlb: no profile for {} yet (site default apply): running unpinned; \
                 srun --cmlb-map=profile or --cmlb-map=apply makes one{}",
                s.argv[0],
                step.other_profiles(&plan.profile_dir)
            ),
        );
        return Ok(state(PathBuf::new(), vec![TaskDo::Nothing; s.ntasks]));
    }
    // bind=omp pins through the environment alone and needs no library.
    let preload = match opts.bind {
        BindMode::Omp => PathBuf::new(),
        _ => preload?,
    };
    let mut tasks = Vec::with_capacity(s.ntasks);
    for (t, tp) in plan.tasks.iter().enumerate() {
        tasks.push(apply_task(t, tp, opts, &s)?);
    }
    if let Some(line) = &plan.summary {
        warn(&format!(
            "{line}{}",
            if opts.dryrun {
                " [dry run: nothing bound]"
            } else {
                ""
            }
        ));
    }
    Ok(state(preload, tasks))
}

/// One task of an applied plan: the verbose and dry-run reports, then what task_init does.
fn apply_task(t: usize, tp: &TaskPlan, opts: &MapOpts, s: &SlurmStep) -> Result<TaskDo, Skip> {
    let (pus, plan) = match &tp.action {
        TaskAction::Pin { pus, plan, .. } => (Some(pus), Some(plan)),
        _ => (None, None),
    };
    if opts.verbose {
        if let Some(p) = pus {
            let list: Vec<String> = p
                .iter()
                .enumerate()
                .map(|(k, u)| format!("{k}:{u}"))
                .collect();
            warn(&format!("cmlb: task {t}: thread->PU {}", list.join(" ")));
        }
    }
    if opts.dryrun {
        if let Some(plan) = plan {
            let out = s
                .scratch
                .join("dryrun")
                .join(format!("{}.{}", s.job, s.step))
                .join(format!("task{t}.plan.yaml"));
            ensure_scratch(&s.scratch, s.uid).map_err(|e| Skip(e.0))?;
            std::fs::create_dir_all(out.parent().expect("has parent"))?;
            plan.write_yaml(&out)?;
            warn(&format!(
                "cmlb: dry run: plan of task {t} written to {}",
                out.display()
            ));
        }
        return Ok(TaskDo::Nothing);
    }
    Ok(match pus {
        // The share as the task's mask, no thread pinned (empty `pus`: no environment).
        None if tp.action == TaskAction::Share => TaskDo::Pin {
            pus: Vec::new(),
            share: tp.share.clone(),
            omp_team: None,
        },
        Some(p) => TaskDo::Pin {
            pus: p.clone(),
            share: tp.share.clone(),
            // Ranks of a multi-task step start the MPI library's threads before the team.
            omp_team: if s.total > 1 { s.omp_threads } else { None },
        },
        // A plan that binds nothing (`none`) leaves the task as Slurm placed it.
        None => TaskDo::Nothing,
    })
}

pub(crate) fn task_init(sp: spank_t) -> i32 {
    let Some(st) = with_state(|s| s.step.clone()) else {
        return 0;
    };
    let strict = with_state(|s| s.site.strict);
    if let Some(msg) = &st.fail {
        sys::fail_task(&format!("cmlb: strict=1: task not started ({msg})"));
    }
    let Some(t) = ffi::get_int(sp, item::S_TASK_ID) else {
        return degrade_task(strict, "Slurm did not give the local task id");
    };
    let Some(action) = st.tasks.get(t as usize) else {
        return 0;
    };
    let preload = st.preload.display().to_string();
    let existing = ffi::getenv(sp, contract::env::LD_PRELOAD);
    let set_all = |env: Vec<(String, String)>| {
        for (k, v) in env {
            if let Err(rc) = ffi::setenv(sp, &k, &v) {
                warn(&format!(
                    "cmlb: warning: cannot set {k} in task {t} (spank error {rc})"
                ));
            }
        }
    };
    let share = match action {
        TaskDo::Nothing => return 0,
        TaskDo::Pin { share, .. } | TaskDo::Wrap { share, .. } => share,
    };
    if let Err(e) = contract::pin(share) {
        return degrade_task(
            strict,
            &format!(
                "task {t}: cannot set the CPU mask {}: {e}",
                format_cpu_list(share)
            ),
        );
    }
    match action {
        TaskDo::Nothing => {}
        TaskDo::Pin { pus, omp_team, .. } => set_all(contract::task_env(&PinEnv {
            pus,
            mode: st.opts.bind,
            preload_lib: (st.opts.bind != BindMode::Omp).then_some(preload.as_str()),
            existing_ld_preload: existing.as_deref(),
            pid: std::process::id(),
            verbose: st.opts.verbose,
            omp_team: *omp_team,
        })),
        TaskDo::Wrap { words, trace, .. } => {
            let mut existing = existing;
            if let Some((out, lib)) = trace {
                let env = contract::ranks::trace_env(
                    out,
                    &lib.display().to_string(),
                    existing.as_deref(),
                );
                // The exec-wrap below keeps the tracer in the program's LD_PRELOAD.
                existing = env
                    .iter()
                    .find(|(k, _)| k == contract::env::LD_PRELOAD)
                    .map(|(_, v)| v.clone());
                set_all(env);
            }
            // Slurm >= 23.11: start the task as `words... program args` (reaches static
            // programs too); on any error fall back to the preload's exec-wrap below.
            #[cfg(spank_prepend_task_argv)]
            if ffi::prepend_task_argv(sp, words).is_ok() {
                return 0;
            }
            set_all(contract::wrap_env(
                words,
                std::process::id(),
                &preload,
                existing.as_deref(),
            ))
        }
    }
    0
}

fn degrade_task(strict: bool, msg: &str) -> i32 {
    if strict {
        sys::fail_task(&format!("cmlb: {msg} (strict=1: failing the task)"));
    } else {
        warn(&format!("cmlb: warning: {msg}; the task runs unpinned"));
        0
    }
}
