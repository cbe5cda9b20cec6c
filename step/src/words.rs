//! The command words that cross exec: how a launcher runs a task under `cmlb profile` or
//! `cmlb run` (the pre-run), built from [`WrapOpts`].

use crate::TaskAction;
use contract::BindMode;
use mapper::StrategySpec;
use std::path::{Path, PathBuf};

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
