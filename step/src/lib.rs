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
mod inputs;
mod local_ranks;
mod pipeline;
#[cfg(test)]
mod tests;
mod words;

pub use inputs::{check_profile_files, guarded_plan, read_profile_samples};
pub use pipeline::Step;
pub use words::{profile_argv, WrapOpts};

use mapper::Plan;
use std::path::PathBuf;

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
